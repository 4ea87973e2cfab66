//! Issue 24, the input side of `kiln convert`: a Hugging Face-layout
//! checkpoint opened by its index and by its folder, a llama.cpp gguf-split
//! set, and every way an index or a split set can be wrong. Fixtures come
//! from the real writers (`safetensors.numpy.save_file` with `ml_dtypes`
//! for bf16, `gguf.GGUFWriter` with its split support); without python3 +
//! numpy + ml_dtypes + safetensors + gguf these tests print SKIPPED.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kiln_convert::{inputs, read_payload, Model, ReadOptions};

fn python_ready() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import numpy, ml_dtypes, safetensors, gguf"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("\n!!!!!!!! SKIPPED: python3 cannot import numpy, ml_dtypes, safetensors and gguf.\n");
    }
    ok
}

fn py(dir: &Path, script: &str) {
    let out = Command::new("python3").arg("-c").arg(script).current_dir(dir).output().expect("python3");
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn kiln(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln")).args(args).current_dir(dir).output().expect("kiln")
}

/// Runs `kiln convert`, expects `code`, returns stderr.
fn convert(dir: &Path, args: &[&str], code: i32) -> String {
    let mut all = vec!["convert"];
    all.extend_from_slice(args);
    let out = kiln(dir, &all);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "kiln {all:?}:\n{err}");
    err
}

/// Reads IN into the converter's in-between form.
fn read(path: &Path) -> anyhow::Result<Model> {
    let opened = inputs::open_all(path)?;
    inputs::read_all(opened, None, &ReadOptions::default())
}

fn err_of(path: &Path) -> String {
    format!("{:#}", read(path).expect_err("an error"))
}

/// One expected tensor: (name, Kiln dtype, shape, payload, input shard).
type Expected = (String, String, Vec<u64>, Vec<u8>, usize);

fn expected(dir: &Path) -> Vec<Expected> {
    let text = std::fs::read_to_string(dir.join("expected.txt")).unwrap();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let shape = if f[2].is_empty() { vec![] } else { f[2].split(',').map(|d| d.parse().unwrap()).collect() };
            let bytes = hex::decode(f[3]).unwrap();
            (f[0].to_string(), f[1].to_string(), shape, bytes, f[4].parse().unwrap())
        })
        .collect()
}

/// Names, dtypes, shapes, input shards and byte-exact payloads (through the copy path).
fn check_model(model: &Model, want: &[Expected]) {
    let got: Vec<Expected> = (0..model.tensors.len())
        .map(|i| {
            let t = &model.tensors[i];
            (t.name.to_string(), t.dtype.name().to_string(), t.shape.to_vec(), read_payload(model, i).unwrap(), t.shard)
        })
        .collect();
    assert_eq!(got, want);
}

/// A Hugging Face-layout checkpoint: three shards (bf16, f16, f32, i64, a
/// rank-0 and a zero-element tensor), the index, config and tokenizer files.
/// `expected.txt` lists the tensors in the converter's order: shard order,
/// within a shard by name (the safetensors reader's order).
const CHECKPOINT: &str = r#"
import json, os, numpy as np, ml_dtypes
from safetensors.numpy import save_file
rng = np.random.default_rng(24)
bf16 = ml_dtypes.bfloat16
shards = [
    ("model-00001-of-00003.safetensors", {
        "model.embed_tokens.weight": rng.standard_normal((4, 3)).astype(np.float32).astype(bf16),
        "model.norm.weight": rng.standard_normal(5).astype(np.float16),
    }),
    ("model-00002-of-00003.safetensors", {
        "model.layers.0.mlp.weight": rng.standard_normal((2, 3)).astype(np.float32),
        "model.layers.0.ids": np.arange(6, dtype=np.int64).reshape(3, 2) - 3,
        "model.layers.0.attn.bf16": rng.standard_normal((2, 2)).astype(np.float32).astype(bf16),
    }),
    ("model-00003-of-00003.safetensors", {
        "lm_head.scale": np.array(3.5, dtype=np.float32),
        "lm_head.empty": np.zeros((0, 4), dtype=np.float16),
    }),
]
os.makedirs("ckpt", exist_ok=True)
kiln = {"BF16": "bf16", "F16": "f16", "F32": "f32", "I64": "i64"}
st = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int64): "I64", np.dtype(bf16): "BF16"}
weight_map, total, lines = {}, 0, []
for k, (name, ts) in enumerate(shards):
    save_file(ts, os.path.join("ckpt", name), metadata={"format": "pt"})
    for n in sorted(ts, key=lambda s: s.encode()):
        a = ts[n]
        weight_map[n] = name
        total += a.nbytes
        lines.append("\t".join([n, kiln[st[a.dtype]], ",".join(map(str, a.shape)), a.tobytes().hex(), str(k)]))
index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
json.dump(index, open("ckpt/model.safetensors.index.json", "w"), indent=2)
open("ckpt/expected.txt", "w").write("\n".join(lines) + "\n")
for f in ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]:
    open(os.path.join("ckpt", f), "w").write("{}")
"#;

fn checkpoint() -> tempfile::TempDir {
    // Written by Python once per test binary (its start-up is most of a test's time), then
    // copied: each test edits a checkpoint of its own.
    static WRITTEN: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let template = WRITTEN.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        py(d.path(), CHECKPOINT);
        d
    });
    let d = tempfile::tempdir().unwrap();
    copy_tree(template.path(), d.path());
    d
}

/// Copies the files and folders under `from` into `to`.
fn copy_tree(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir(&dest).unwrap();
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// Rewrites the index with `edit` (Python, on `index`).
fn edit_index(dir: &Path, edit: &str) {
    py(
        dir,
        &format!(
            "import json\nindex = json.load(open('model.safetensors.index.json'))\nwm = index['weight_map']\n{edit}\n\
             json.dump(index, open('model.safetensors.index.json', 'w'), indent=2)"
        ),
    );
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn a_hugging_face_checkpoint_by_its_index_and_by_its_folder() {
    if !python_ready() {
        return;
    }
    let d = checkpoint();
    let ckpt = d.path().join("ckpt");
    let want = expected(&ckpt);
    for input in [ckpt.join("model.safetensors.index.json"), ckpt.clone()] {
        let model = read(&input).unwrap();
        assert!(model.sharded, "{}", input.display());
        assert_eq!(model.inputs.len(), 3);
        check_model(&model, &want);
        assert!(model.tensors.iter().all(|t| t.input == t.shard));
        assert_eq!(model.metadata.iter().find(|(k, _)| *k == "format").map(|(_, v)| v), Some("pt"));
    }
    // The folder's configuration and tokenizer files are named in a note.
    let notes = read(&ckpt).unwrap().notes.join("\n");
    assert!(notes.contains("config.json, generation_config.json, tokenizer.json, tokenizer_config.json"), "{notes}");
    assert!(notes.contains("NOT carried"), "{notes}");
    // Three input shards are three output shards, bit for bit, from the index and from the folder.
    for input in ["ckpt", "ckpt/model.safetensors.index.json"] {
        let err = convert(d.path(), &[input, "-o", "out.kiln", "--no-fsync"], 0);
        assert!(err.contains("a sharded model") && err.contains("3 shards"), "{err}");
        let bytes = std::fs::read(d.path().join("out.kiln")).unwrap();
        let m = kiln_model::Manifest::parse(&bytes).unwrap();
        assert_eq!(m.shard_count(), 3);
        let files: Vec<Vec<u8>> = m.shards().map(|s| std::fs::read(d.path().join(s.name.as_str())).unwrap()).collect();
        kiln_model::check_all(&m, |e| files.get(e.index as usize - 1), true, None).unwrap();
        let got: Vec<Expected> = m
            .tensors()
            .map(|t| {
                let (_, within) = m.find(t.name).unwrap();
                let shard = kiln_model::Model::parse(&files[t.shard as usize - 1]).unwrap();
                let bytes = shard.directory().get(within).unwrap().bytes().to_vec();
                (t.name.to_string(), t.dtype.name().to_string(), t.dims().collect(), bytes, t.shard as usize - 1)
            })
            .collect();
        assert_eq!(got, want);
        // The converter's own reader takes the manifest back: the same tensors.
        assert!(kiln(d.path(), &["validate", "out.kiln"]).status.success());
    }
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn a_one_shard_index_and_a_one_file_folder_are_written_as_one_file() {
    if !python_ready() {
        return;
    }
    let d = checkpoint();
    let ckpt = d.path().join("ckpt");
    // The index of shard 3 only.
    edit_index(
        &ckpt,
        "index['weight_map'] = {k: v for k, v in wm.items() if v.startswith('model-00003')}\n\
         index['metadata']['total_size'] = 4",
    );
    let err = convert(&ckpt, &["model.safetensors.index.json", "-o", "one.kiln"], 0);
    assert!(err.contains("2 tensors"), "{err}");
    let bytes = std::fs::read(ckpt.join("one.kiln")).unwrap();
    let model = kiln_model::Model::parse_verified(&bytes).unwrap();
    let dir = model.directory();
    let got: Vec<(String, Vec<u8>)> = dir.iter().map(|t| (t.name().unwrap().to_string(), t.bytes().to_vec())).collect();
    let want: Vec<(String, Vec<u8>)> = expected(&ckpt).into_iter().filter(|e| e.4 == 2).map(|e| (e.0, e.3)).collect();
    assert_eq!(got, want);
    // A folder with exactly one .safetensors file (and a config.json, noted).
    let solo = d.path().join("solo");
    std::fs::create_dir(&solo).unwrap();
    std::fs::copy(ckpt.join("model-00002-of-00003.safetensors"), solo.join("model.safetensors")).unwrap();
    std::fs::write(solo.join("config.json"), "{}").unwrap();
    let err = convert(d.path(), &["solo", "-o", "solo.kiln"], 0);
    assert!(err.contains("note: solo holds config.json: not tensors, NOT carried"), "{err}");
    assert!(err.contains("3 tensors"), "{err}");
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn a_folder_that_is_not_one_checkpoint_is_a_usage_error_listing_it() {
    if !python_ready() {
        return;
    }
    let d = checkpoint();
    let ckpt = d.path().join("ckpt");
    std::fs::remove_file(ckpt.join("model.safetensors.index.json")).unwrap();
    let err = convert(d.path(), &["ckpt", "-o", "out.kiln"], 2);
    assert!(err.contains("3 .safetensors files (model-00001-of-00003.safetensors, "), "{err}");
    std::fs::write(ckpt.join("a.safetensors.index.json"), "{}").unwrap();
    std::fs::write(ckpt.join("b.safetensors.index.json"), "{}").unwrap();
    let err = convert(d.path(), &["ckpt", "-o", "out.kiln"], 2);
    assert!(err.contains("2 index files (a.safetensors.index.json, b.safetensors.index.json)"), "{err}");
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = convert(d.path(), &["empty", "-o", "out.kiln"], 2);
    assert!(err.contains("it holds 0 .safetensors files"), "{err}");
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn every_index_fault_is_an_error_naming_the_tensor_and_the_shards() {
    if !python_ready() {
        return;
    }
    let cases: [(&str, &[&str]); 6] = [
        // A tensor its shard lacks (no shard holds it).
        (
            "wm['ghost'] = 'model-00001-of-00003.safetensors'",
            &["\"ghost\"", "model-00001-of-00003.safetensors", "lacks it"],
        ),
        // A tensor placed in the wrong shard.
        (
            "wm['model.layers.0.ids'] = 'model-00001-of-00003.safetensors'",
            &[
                "\"model.layers.0.ids\"",
                "model-00001-of-00003.safetensors, which lacks it",
                "it is in model-00002-of-00003.safetensors",
            ],
        ),
        // A shard tensor the index does not name.
        (
            "del wm['lm_head.scale']",
            &["shard model-00003-of-00003.safetensors holds tensor \"lm_head.scale\"", "does not name"],
        ),
        // total_size off by one.
        ("index['metadata']['total_size'] += 1", &["metadata.total_size is", "the shards' tensors hold"]),
        // No weight_map.
        ("del index['weight_map']", &["no \"weight_map\""]),
        // Not an object.
        ("index['weight_map'] = []", &["not a valid Hugging Face index"]),
    ];
    for (edit, needles) in cases {
        let d = checkpoint();
        let ckpt = d.path().join("ckpt");
        edit_index(&ckpt, edit);
        let err = err_of(&ckpt.join("model.safetensors.index.json"));
        for n in needles {
            assert!(err.contains(n), "{edit}: {err}");
        }
        let cli = convert(d.path(), &["ckpt", "-o", "out.kiln"], 1);
        assert!(cli.contains(needles[0]), "{edit}: {cli}");
    }
    // A missing shard is named.
    let d = checkpoint();
    let ckpt = d.path().join("ckpt");
    std::fs::remove_file(ckpt.join("model-00002-of-00003.safetensors")).unwrap();
    let err = err_of(&ckpt);
    assert!(err.contains("shard model-00002-of-00003.safetensors is missing"), "{err}");
    // A tensor name in two shards.
    let d = checkpoint();
    let ckpt = d.path().join("ckpt");
    py(
        &ckpt,
        "import numpy as np\nfrom safetensors.numpy import save_file\n\
         save_file({'lm_head.scale': np.array(3.5, dtype=np.float32), 'model.norm.weight': np.zeros(5, np.float16), \
         'lm_head.empty': np.zeros((0, 4), np.float16)}, 'model-00003-of-00003.safetensors')",
    );
    let err = err_of(&ckpt);
    assert!(
        err.contains("tensor \"model.norm.weight\" is in two shards: model-00001-of-00003.safetensors and model-00003-of-00003.safetensors"),
        "{err}"
    );
    // total_size missing: a note, not an error.
    let d = checkpoint();
    let ckpt = d.path().join("ckpt");
    edit_index(&ckpt, "del index['metadata']");
    let model = read(&ckpt).unwrap();
    assert!(model.notes.iter().any(|n| n.contains("no metadata.total_size")), "{:?}", model.notes);
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn shard_names_outside_the_folder_are_refused_before_any_file_is_opened() {
    if !python_ready() {
        return;
    }
    let d = checkpoint();
    let ckpt = d.path().join("ckpt");
    // Real files where each hostile name points, so opening one would succeed.
    let good = ckpt.join("model-00003-of-00003.safetensors");
    std::fs::copy(&good, d.path().join("x.safetensors")).unwrap();
    std::fs::create_dir(ckpt.join("a")).unwrap();
    std::fs::copy(&good, ckpt.join("a/b.safetensors")).unwrap();
    let abs = d.path().join("x.safetensors").display().to_string();
    let names =
        ["../x.safetensors", abs.as_str(), "a/b.safetensors", "x\u{0}.safetensors", "a\\b.safetensors", "..", ".", ""];
    for name in names {
        let d2 = checkpoint();
        let ckpt2 = d2.path().join("ckpt");
        std::fs::copy(d.path().join("x.safetensors"), d2.path().join("x.safetensors")).unwrap();
        let name = name.replace(&d.path().display().to_string(), &d2.path().display().to_string());
        let edit = format!("wm['lm_head.scale'] = {}", serde_json_string(&name));
        edit_index(&ckpt2, &edit);
        let err = err_of(&ckpt2.join("model.safetensors.index.json"));
        assert!(err.contains("tensor \"lm_head.scale\": shard"), "{name:?}: {err}");
        assert!(err.contains("plain file name") || err.contains("not a file name"), "{name:?}: {err}");
        assert!(err.contains("not a valid Hugging Face index"), "{name:?}: refused by the scan: {err}");
    }
}

/// A JSON (and Python) string literal.
fn serde_json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A 2-file gguf-split set of 7 tensors from gguf's own writer (`split_max_tensors=4`).
const SPLIT: &str = r#"
import numpy as np, gguf
w = gguf.GGUFWriter("tiny.gguf", "llama", split_max_tensors=4)
w.add_name("tiny")
w.add_uint32("tiny.context_length", 128)
for i in range(7):
    w.add_tensor(f"t{i}", (np.arange(i + 1, dtype=np.float32) * (i + 0.5)).reshape(1, i + 1))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
"#;

fn split_set() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    py(d.path(), SPLIT);
    assert!(d.path().join("tiny-00001-of-00002.gguf").exists() && d.path().join("tiny-00002-of-00002.gguf").exists());
    d
}

/// Rewrites file 2 of the set with hand-set split keys (gguf's writer sets them itself).
fn patch_second(dir: &Path, no: u16, count: u16, tensors: i32) {
    py(
        dir,
        &format!(
            "import numpy as np, gguf\nw = gguf.GGUFWriter('tiny-00002-of-00002.gguf', 'llama')\n\
             w.add_uint16('split.no', {no}); w.add_uint16('split.count', {count}); w.add_int32('split.tensors.count', {tensors})\n\
             for i in range(4, 7):\n    w.add_tensor(f't{{i}}', (np.arange(i + 1, dtype=np.float32) * (i + 0.5)).reshape(1, i + 1))\n\
             w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()"
        ),
    );
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn a_gguf_split_set_is_read_whole_from_any_of_its_files() {
    if !python_ready() {
        return;
    }
    let d = split_set();
    for file in ["tiny-00001-of-00002.gguf", "tiny-00002-of-00002.gguf"] {
        let model = read(&d.path().join(file)).unwrap();
        assert!(model.sharded);
        let names: Vec<&str> = model.tensors.iter().map(|t| &*t.name).collect();
        assert_eq!(names, ["t0", "t1", "t2", "t3", "t4", "t5", "t6"]);
        let shards: Vec<usize> = model.tensors.iter().map(|t| t.shard).collect();
        assert_eq!(shards, [0, 0, 0, 0, 1, 1, 1]);
        for (i, t) in model.tensors.iter().enumerate() {
            let want: Vec<u8> = (0..=i).flat_map(|k| ((k as f32) * (i as f32 + 0.5)).to_le_bytes()).collect();
            assert_eq!(read_payload(&model, i).unwrap(), want, "{}", t.name);
            assert_eq!(t.shape.as_slice(), [1, i as u64 + 1]);
        }
        // split.* is consumed; the first file's metadata is the model's.
        let keys: Vec<&str> = model.metadata.iter().map(|(k, _)| k).collect();
        assert!(keys.iter().all(|k| !k.starts_with("split.")), "{keys:?}");
        assert!(keys.contains(&"general.name") && keys.contains(&"tiny.context_length"), "{keys:?}");
        assert!(!model.metadata.iter().any(|(_, v)| v.contains("split.")), "split keys in source_types");
    }
    // Never a partial model: the whole set, as two shards of one model.
    let err = convert(d.path(), &["tiny-00001-of-00002.gguf", "-o", "o.kiln", "--no-fsync"], 0);
    assert!(err.contains("a sharded model") && err.contains("7 tensors"), "{err}");
    let bytes = std::fs::read(d.path().join("o.kiln")).unwrap();
    let m = kiln_model::Manifest::parse(&bytes).unwrap();
    assert_eq!((m.shard_count(), m.tensor_count()), (2, 7));
    assert!(!m.metadata().iter().any(|(k, _)| k.starts_with("split.")), "split keys are consumed");
    assert!(kiln(d.path(), &["validate", "o.kiln"]).status.success());
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn a_gguf_split_set_with_a_missing_extra_or_disagreeing_file_is_an_error_naming_it() {
    if !python_ready() {
        return;
    }
    // Missing.
    let d = split_set();
    std::fs::remove_file(d.path().join("tiny-00002-of-00002.gguf")).unwrap();
    let err = convert(d.path(), &["tiny-00001-of-00002.gguf", "-o", "o.kiln"], 1);
    assert!(err.contains("tiny-00002-of-00002.gguf is missing"), "{err}");
    assert!(!d.path().join("o.kiln").exists());
    // Extra: a file of the same name with another count, or past the count.
    for extra in ["tiny-00001-of-00003.gguf", "tiny-00003-of-00002.gguf"] {
        let d = split_set();
        std::fs::copy(d.path().join("tiny-00001-of-00002.gguf"), d.path().join(extra)).unwrap();
        let err = convert(d.path(), &["tiny-00002-of-00002.gguf", "-o", "o.kiln"], 1);
        assert!(err.contains(extra) && err.contains("an extra file"), "{extra}: {err}");
    }
    // Disagreeing split.count, split.no, split.tensors.count; a total that is not split.tensors.count.
    let cases: [((u16, u16, i32), &str); 4] = [
        ((1, 3, 7), "tiny-00002-of-00002.gguf: split.count is 3, its name and the set say 2"),
        ((0, 2, 7), "tiny-00002-of-00002.gguf: split.no is 0, its position in the set is 1"),
        ((1, 2, 8), "tiny-00002-of-00002.gguf: split.tensors.count is 8, the first file's is 7"),
        ((1, 2, 7), ""),
    ];
    for ((no, count, tensors), needle) in cases {
        let d = split_set();
        patch_second(d.path(), no, count, tensors);
        let result = read(&d.path().join("tiny-00001-of-00002.gguf"));
        if needle.is_empty() {
            // The hand-written file agrees: the set reads (its extra key is noted, not carried).
            let model = result.unwrap();
            assert_eq!(model.tensors.len(), 7);
            assert!(model.notes.iter().any(|n| n.contains("metadata keys NOT carried")), "{:?}", model.notes);
        } else {
            let err = format!("{:#}", result.unwrap_err());
            assert!(err.contains(needle), "{err}");
        }
    }
    // The tensors add up to split.tensors.count.
    let d = split_set();
    py(
        d.path(),
        "import numpy as np, gguf\nw = gguf.GGUFWriter('tiny-00002-of-00002.gguf', 'llama')\n\
         w.add_uint16('split.no', 1); w.add_uint16('split.count', 2); w.add_int32('split.tensors.count', 7)\n\
         w.add_tensor('t4', np.zeros(3, np.float32))\n\
         w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()",
    );
    let err = err_of(&d.path().join("tiny-00001-of-00002.gguf"));
    assert!(err.contains("holds 5 tensors in its 2 files, split.tensors.count says 7"), "{err}");
    // A split file renamed: its siblings cannot be found.
    let d = split_set();
    std::fs::rename(d.path().join("tiny-00001-of-00002.gguf"), d.path().join("first.gguf")).unwrap();
    let err = convert(d.path(), &["first.gguf", "-o", "o.kiln"], 1);
    assert!(err.contains("first.gguf: file 1 of a gguf-split set of 2"), "{err}");
}

#[test]
fn help_says_what_happens_to_config_and_tokenizer_files() {
    let out = kiln(&PathBuf::from("."), &["convert", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("config.json, generation_config.json and tokenizer files"), "{help}");
    assert!(help.contains("NOT carried"), "{help}");
    assert!(help.contains("--max-shard-size <SIZE>") && help.contains("\"500MB\""), "{help}");
}

// Issue 24, point 3: the way back. A sharded Kiln model to safetensors is the
// Hub's layout: for OUT DIR/model.safetensors, the shards
// DIR/model-0000k-of-0000N.safetensors and DIR/model.safetensors.index.json.

/// The checkpoint converted to a sharded Kiln model `m.kiln` (3 shards) in the temporary folder.
fn kiln_model() -> tempfile::TempDir {
    let d = checkpoint();
    let err = convert(d.path(), &["ckpt", "-o", "m.kiln", "--no-fsync"], 0);
    assert!(err.contains("3 shards"), "{err}");
    std::fs::create_dir(d.path().join("back")).unwrap();
    d
}

/// Every file in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// The tensors of the Hub-layout checkpoint in `dir` (index `index`), read with
/// the `safetensors` crate, in the converter's order (shard, then name), and
/// each shard's `__metadata__`; the index's weight_map and total_size are checked.
fn hub_tensors(dir: &Path, index: &str) -> (Vec<Expected>, Vec<std::collections::HashMap<String, String>>) {
    let text = std::fs::read_to_string(dir.join(index)).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let map = json["weight_map"].as_object().unwrap();
    let keys: Vec<&String> = map.keys().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "weight_map keys sorted");
    let mut shards: Vec<&str> = map.values().map(|v| v.as_str().unwrap()).collect();
    shards.sort();
    shards.dedup();
    let (mut got, mut metas, mut total) = (Vec::new(), Vec::new(), 0u64);
    for (k, shard) in shards.iter().enumerate() {
        let bytes = std::fs::read(dir.join(shard)).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
        metas.push(meta.metadata().clone().unwrap_or_default());
        let mut names = st.names();
        names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        for n in names {
            let t = st.tensor(n).unwrap();
            assert_eq!(map[n], *shard, "weight_map of {n}");
            total += t.data().len() as u64;
            let shape = t.shape().iter().map(|&d| d as u64).collect();
            got.push((n.to_string(), t.dtype().to_string().to_lowercase(), shape, t.data().to_vec(), k));
        }
    }
    assert_eq!(map.len(), got.len(), "every weight_map entry is in its shard");
    assert_eq!(json["metadata"]["total_size"].as_u64(), Some(total));
    (got, metas)
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn a_sharded_kiln_model_goes_back_to_the_hub_layout_bit_exact() {
    if !python_ready() {
        return;
    }
    let d = kiln_model();
    let want = expected(&d.path().join("ckpt"));
    // The converter reads the manifest with its shards: the same tensors, shard by shard.
    check_model(&read(&d.path().join("m.kiln")).unwrap(), &want);
    let err = convert(d.path(), &["m.kiln", "-o", "back/model.safetensors"], 0);
    assert!(err.contains("the index back/model.safetensors.index.json and 3 shards beside it"), "{err}");
    assert!(err.contains("7 tensors"), "{err}");
    assert_eq!(
        listing(&d.path().join("back")),
        [
            "model-00001-of-00003.safetensors",
            "model-00002-of-00003.safetensors",
            "model-00003-of-00003.safetensors",
            "model.safetensors.index.json"
        ]
    );
    let (got, metas) = hub_tensors(&d.path().join("back"), "model.safetensors.index.json");
    assert_eq!(got, want);
    for meta in &metas {
        assert_eq!(meta.get("format").map(String::as_str), Some("pt"), "{meta:?}");
        assert!(meta.keys().all(|k| !k.starts_with("kiln.")), "{meta:?}");
    }
    // Written as the crate writes them: each shard is byte-identical to the original.
    for k in 1..=3 {
        let name = format!("model-0000{k}-of-00003.safetensors");
        assert_eq!(
            std::fs::read(d.path().join("back").join(&name)).unwrap(),
            std::fs::read(d.path().join("ckpt").join(&name)).unwrap(),
            "{name}"
        );
    }
    // The index as transformers writes it (indent 2, keys sorted, a final newline).
    let index = std::fs::read_to_string(d.path().join("back/model.safetensors.index.json")).unwrap();
    assert!(index.starts_with("{\n  \"metadata\": {\n    \"total_size\": 118\n  },\n  \"weight_map\": {\n    \"lm_head.empty\": \"model-00003-of-00003.safetensors\",\n"), "{index}");
    assert!(index.ends_with("\n  }\n}\n"), "{index}");
    // Python's loader agrees.
    py(
        &d.path().join("back"),
        "import json, ml_dtypes\nfrom safetensors.numpy import load_file\nindex = json.load(open('model.safetensors.index.json'))\n\
         for name, shard in index['weight_map'].items():\n    assert name in load_file(shard), name",
    );
    // And to Kiln again, by the index and by the folder: the same tensors.
    for input in ["back/model.safetensors.index.json", "back"] {
        check_model(&read(&d.path().join(input)).unwrap(), &want);
        let err = convert(d.path(), &[input, "-o", "again.kiln", "--no-fsync"], 0);
        assert!(err.contains("3 shards"), "{err}");
        check_model(&read(&d.path().join("again.kiln")).unwrap(), &want);
    }
    // The Kiln manifest to Kiln again (every payload's digest checked as it is copied).
    convert(d.path(), &["m.kiln", "-o", "copy.kiln", "--no-fsync"], 0);
    check_model(&read(&d.path().join("copy.kiln")).unwrap(), &want);
    assert!(kiln(d.path(), &["validate", "copy.kiln"]).status.success());
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn an_output_shard_or_index_that_is_an_input_file_is_refused_before_anything_is_written() {
    if !python_ready() {
        return;
    }
    for (out_name, input) in
        [("model-00002-of-00003.safetensors", "m-00002-of-00003.kiln"), ("model.safetensors.index.json", "m.kiln")]
    {
        let d = kiln_model();
        let before = std::fs::read(d.path().join(input)).unwrap();
        std::fs::hard_link(d.path().join(input), d.path().join("back").join(out_name)).unwrap();
        let err = convert(d.path(), &["m.kiln", "-o", "back/model.safetensors"], 2);
        assert!(err.contains(&format!("back/{out_name} is the input file itself")), "{err}");
        assert_eq!(listing(&d.path().join("back")), [out_name], "nothing else written");
        assert_eq!(std::fs::read(d.path().join(input)).unwrap(), before);
    }
}

/// The offset of the first payload byte of tensor `name` in a Kiln shard file.
fn payload_at(file: &[u8], name: &str) -> usize {
    let m = kiln_model::Model::parse(file).unwrap();
    let dir = m.directory();
    let t = dir.iter().find(|t| t.name() == Some(name)).unwrap();
    assert!(t.byte_len() > 0);
    t.absolute_offset()
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn a_flipped_payload_byte_in_a_kiln_shard_fails_naming_the_shard_and_tensor_and_writes_nothing() {
    if !python_ready() {
        return;
    }
    let d = kiln_model();
    let shard = d.path().join("m-00002-of-00003.kiln");
    let mut bytes = std::fs::read(&shard).unwrap();
    let at = payload_at(&bytes, "model.layers.0.ids") + 5;
    bytes[at] ^= 0x10;
    std::fs::write(&shard, &bytes).unwrap();
    for out in ["back/model.safetensors", "back/m2.kiln"] {
        let err = convert(d.path(), &["m.kiln", "-o", out], 1);
        assert!(err.contains("m-00002-of-00003.kiln") && err.contains("tensor model.layers.0.ids"), "{out}: {err}");
        assert!(err.contains("DIGEST"), "{out}: {err}");
        assert!(listing(&d.path().join("back")).is_empty(), "{out}: {:?}", listing(&d.path().join("back")));
    }
    // A changed byte before the payloads is caught by the shard's check against its manifest, naming it.
    let d = kiln_model();
    let shard = d.path().join("m-00003-of-00003.kiln");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes.pop();
    std::fs::write(&shard, &bytes).unwrap();
    let err = convert(d.path(), &["m.kiln", "-o", "back/model.safetensors"], 1);
    assert!(err.contains("shard m-00003-of-00003.kiln: SHARD"), "{err}");
    assert!(listing(&d.path().join("back")).is_empty());
    // A missing shard is named too.
    std::fs::remove_file(&shard).unwrap();
    let err = convert(d.path(), &["m.kiln", "-o", "back/model.safetensors"], 1);
    assert!(err.contains("shard m-00003-of-00003.kiln is missing"), "{err}");
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn max_shard_size_re_splits_and_an_earlier_set_of_another_count_is_removed() {
    if !python_ready() {
        return;
    }
    let d = kiln_model();
    let want = expected(&d.path().join("ckpt"));
    // Payloads by input shard: [24, 10], [8, 48, 24], [0, 4]; at most 30 bytes a shard: 6 shards.
    let err = convert(d.path(), &["m.kiln", "-o", "back/model.safetensors", "--max-shard-size", "30"], 0);
    assert!(err.contains("and 6 shards beside it"), "{err}");
    let files = listing(&d.path().join("back"));
    assert_eq!(files.len(), 7, "{files:?}");
    assert!(files[..6].iter().enumerate().all(|(k, f)| *f == format!("model-0000{}-of-00006.safetensors", k + 1)));
    let (got, _) = hub_tensors(&d.path().join("back"), "model.safetensors.index.json");
    let shards: Vec<usize> = got.iter().map(|e| e.4).collect();
    assert_eq!(shards, [0, 1, 2, 3, 4, 5, 5]);
    let strip = |v: Vec<Expected>| v.into_iter().map(|e| (e.0, e.1, e.2, e.3)).collect::<Vec<_>>();
    assert_eq!(strip(got), strip(want.clone()));
    // Again without the maximum: the 3-shard set replaces the 6, which are removed once it is in place.
    let err = convert(d.path(), &["m.kiln", "-o", "back/model.safetensors"], 0);
    assert!(err.contains("removed back/model-00001-of-00006.safetensors"), "{err}");
    assert_eq!(listing(&d.path().join("back")).len(), 4);
    assert_eq!(hub_tensors(&d.path().join("back"), "model.safetensors.index.json").0, want);
    // Files named like an earlier set that are the input's own shards are never removed:
    // the manifest renamed, its shards m-0000k-of-00003.kiln are what `-o m.kiln` with 6 shards would call stale.
    std::fs::rename(d.path().join("m.kiln"), d.path().join("renamed.kiln")).unwrap();
    let err = convert(d.path(), &["renamed.kiln", "-o", "m.kiln", "--max-shard-size", "30", "--no-fsync"], 0);
    assert!(err.contains("and 6 shards beside it") && !err.contains("removed"), "{err}");
    check_model(&read(&d.path().join("renamed.kiln")).unwrap(), &want);
}

#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn a_one_shard_kiln_model_is_still_one_safetensors_file() {
    if !python_ready() {
        return;
    }
    let d = kiln_model();
    let original = d.path().join("ckpt/model-00002-of-00003.safetensors");
    convert(d.path(), &[original.to_str().unwrap(), "-o", "one.kiln"], 0);
    let err = convert(d.path(), &["one.kiln", "-o", "back/model.safetensors"], 0);
    assert!(!err.contains("a sharded model"), "{err}");
    assert_eq!(listing(&d.path().join("back")), ["model.safetensors"]);
    assert_eq!(std::fs::read(d.path().join("back/model.safetensors")).unwrap(), std::fs::read(&original).unwrap());
    // Then the sharded model to the same name: the single file, which loaders
    // would take before the index, is removed once the shards and index are in place.
    let err = convert(d.path(), &["m.kiln", "-o", "back/model.safetensors"], 0);
    assert!(err.contains("removed back/model.safetensors (a file of an earlier conversion to this name)"), "{err}");
    assert_eq!(listing(&d.path().join("back")).len(), 4);
    assert!(!d.path().join("back/model.safetensors").exists());
    // The other way, the index and shards are not the single file's to remove: a note names the index.
    let err = convert(d.path(), &["one.kiln", "-o", "back/model.safetensors"], 0);
    assert!(err.contains("back/model.safetensors.index.json is beside OUT"), "{err}");
    assert_eq!(listing(&d.path().join("back")).len(), 5);
}
