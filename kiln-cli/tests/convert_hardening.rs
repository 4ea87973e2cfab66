//! Issue 12, one test per numbered point (`pNN_...`): `kiln convert` never
//! destroys anything, never writes silently wrong data, stays within its
//! memory budgets, reads HK strictly, lets every input format be validated
//! and inspected, and names the file, format, tensor or key and byte offset
//! in its errors. Inputs come from the real writers (NumPy, `safetensors`,
//! `gguf`, spec/reference/hk_writer.py) wherever the point names them;
//! without python3 + numpy + safetensors + gguf those tests print SKIPPED.

use std::path::{Path, PathBuf};
#[cfg(unix)]
use std::process::Stdio;
use std::process::{Command, Output};
#[cfg(unix)]
use std::time::{Duration, Instant};

use kiln_nostd::frozen::{self, Schema};
use kiln_nostd::{DType, Directory, Limits, TensorSpec, Writer};

/// What `kiln convert` writes: a model file with digests (spec/model-file.md).
const RECORD_TYPE: &str = kiln_model::DIGESTS_TYPE;

fn python_ready() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import numpy, safetensors, gguf"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("\n!!!!!!!! SKIPPED: python3 cannot import numpy, safetensors and gguf.\n");
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

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn hk_writer(dir: &Path, body: &str) {
    let script = format!(
        "import sys, struct\nsys.path.insert(0, {:?})\nfrom hk_writer import *\n{body}",
        root().join("spec/reference").display().to_string()
    );
    py(dir, &script);
}

fn kiln(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln")).args(args).current_dir(dir).output().expect("kiln")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs `kiln convert`, expects `code`, returns stderr.
fn convert(dir: &Path, args: &[&str], code: i32) -> String {
    let mut all = vec!["convert"];
    all.extend_from_slice(args);
    let out = kiln(dir, &all);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(code), "kiln {all:?}:\n{err}");
    err
}

fn no_temporaries(dir: &Path) {
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("kiln-convert"))
        .collect();
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
}

struct Got {
    dtype: DType,
    shape: Vec<u64>,
    layout: Option<String>,
    block_size: u32,
    bytes: Vec<u8>,
    quant: Option<(u16, usize, u32, String)>,
}

fn tensors(dir: &Directory<'_>) -> Vec<(String, Got)> {
    dir.iter()
        .map(|t| {
            let quant = t.quant().map(|q| (q.scheme, q.axis, q.group_size, q.scale.name().unwrap_or("").to_string()));
            let g = Got {
                dtype: t.dtype(),
                shape: t.shape().to_vec(),
                layout: t.layout().map(str::to_string),
                block_size: t.block_size(),
                bytes: t.bytes().to_vec(),
                quant,
            };
            (t.name().unwrap().to_string(), g)
        })
        .collect()
}

/// The metadata and tensors of a record `kiln convert` wrote.
type Record = (Vec<(String, String)>, Vec<(String, Got)>);

fn record(path: &Path) -> Record {
    let bytes = std::fs::read(path).unwrap();
    let schema: Schema<'_> = Schema::parse(RECORD_TYPE).unwrap();
    let v = frozen::read(&bytes, &schema, &Limits::MAX, true).expect("a valid record");
    kiln_model::Model::parse_verified(&bytes).expect("its digests match its payloads");
    let meta = v
        .field("metadata")
        .and_then(|m| m.as_dict())
        .unwrap()
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_str().unwrap().to_string()))
        .collect();
    let dir = v.field("tensors").and_then(|t| t.as_tensors()).unwrap();
    (meta, tensors(&dir))
}

fn meta_get<'m>(meta: &'m [(String, String)], key: &str) -> Option<&'m str> {
    meta.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

fn small_npy(dir: &Path, name: &str) {
    // An .npy file as NumPy writes it (format 1.0), built here so the
    // output-safety tests run without Python.
    let mut h = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }".to_vec();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut f = b"\x93NUMPY\x01\x00".to_vec();
    f.extend((h.len() as u16).to_le_bytes());
    f.extend(h);
    f.extend(1.0f32.to_le_bytes());
    f.extend(2.0f32.to_le_bytes());
    std::fs::write(dir.join(name), f).unwrap();
}

// ---------------------------------------------------------------- 1 to 6

#[cfg(unix)]
#[test]
fn p01_devices_fifos_and_directories_are_never_replaced() {
    use std::os::unix::fs::FileTypeExt;
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    small_npy(p, "m.npy");
    let fifo = p.join("fifo.kiln");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    std::fs::create_dir(p.join("dir.kiln")).unwrap();
    let mut outs = vec![("fifo.kiln", "a FIFO"), ("dir.kiln", "a directory")];
    // A character device of our own (the same as /dev/null), when root may make one.
    let dev = p.join("null");
    if Command::new("mknod").arg(&dev).args(["c", "1", "3"]).status().is_ok_and(|s| s.success()) {
        outs.push(("null", "a character device"));
    } else {
        eprintln!("(not root: the device case is checked with /dev/null only if it is not writable)");
    }
    for (out, kind) in outs {
        let err = convert(p, &["m.npy", "-o", out], 2);
        assert!(err.contains(kind) && err.contains("regular files"), "{err}");
    }
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(std::fs::metadata(p.join("dir.kiln")).unwrap().is_dir());
    if dev.exists() {
        assert!(std::fs::metadata(&dev).unwrap().file_type().is_char_device(), "the device node is still a device");
        // And through a link to it.
        std::os::unix::fs::symlink(&dev, p.join("link.kiln")).unwrap();
        let err = convert(p, &["m.npy", "-o", "link.kiln"], 2);
        assert!(err.contains("a character device"), "{err}");
        assert!(std::fs::metadata(&dev).unwrap().file_type().is_char_device());
    }
    no_temporaries(p);
}

// Point 2 (temporary files created exclusively, never through a symlink,
// with random names) is tested where the file is created:
// convert::outfile::tests::a_symlink_planted_at_the_old_temporary_name_is_never_written
// and platform::tests::create_new_never_follows_or_replaces.

#[test]
fn p03_converting_a_file_onto_itself_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir(p.join("d")).unwrap();
    small_npy(&p.join("d"), "m.npy");
    let before = std::fs::read(p.join("d/m.npy")).unwrap();
    std::fs::hard_link(p.join("d/m.npy"), p.join("hard.npy")).unwrap();
    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut outs = vec!["d/m.npy", "./d/../d/m.npy", "hard.npy"];
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("d/m.npy", p.join("soft.npy")).unwrap();
        outs.push("soft.npy");
    }
    for out in outs {
        let err = convert(p, &["d/m.npy", "-o", out], 2);
        assert!(err.contains("is the input file itself"), "{out}: {err}");
        assert_eq!(std::fs::read(p.join("d/m.npy")).unwrap(), before, "{out}: the input is unchanged");
    }
    // The way back too (a Kiln file onto itself).
    let example = root().join("spec/examples/digits-mlp.kiln");
    std::fs::copy(example, p.join("m.kiln")).unwrap();
    let err = convert(p, &["m.kiln", "-o", "m.kiln"], 2);
    assert!(err.contains("is the input file itself"), "{err}");
    no_temporaries(p);
    no_temporaries(&p.join("d"));
}

/// A safetensors file with one 8 GiB U8 tensor whose data is a hole: the
/// conversion runs for seconds, long enough to be interrupted mid-copy.
#[cfg(unix)]
fn sparse_safetensors(path: &Path) {
    let len: u64 = 8 << 30;
    let mut head = format!(r#"{{"big":{{"dtype":"U8","shape":[{len}],"data_offsets":[0,{len}]}}}}"#).into_bytes();
    while head.len() % 8 != 0 {
        head.push(b' ');
    }
    let mut f = (head.len() as u64).to_le_bytes().to_vec();
    f.extend(head);
    std::fs::write(path, &f).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(f.len() as u64 + len).unwrap();
}

#[cfg(unix)]
#[test]
fn p04_sigint_and_sigterm_remove_the_temporary_file() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    sparse_safetensors(&p.join("big.safetensors"));
    for signal in ["INT", "TERM"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(["convert", "-q", "big.safetensors", "-o", "out.kiln"])
            .current_dir(p)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until the temporary file exists and is being filled.
        let start = Instant::now();
        let temp = loop {
            let found = std::fs::read_dir(p).unwrap().filter_map(|e| e.ok()).find(|e| {
                e.file_name().to_string_lossy().contains("kiln-convert")
                    && e.metadata().is_ok_and(|m| m.len() > (1 << 20))
            });
            if let Some(e) = found {
                break e.path();
            }
            assert!(start.elapsed() < Duration::from_secs(60), "no temporary file appeared");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(Command::new("kill").arg(format!("-{signal}")).arg(child.id().to_string()).status().unwrap().success());
        let status = child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(130), "SIG{signal}: {status:?} {err}");
        assert!(err.contains("interrupted"), "{err}");
        assert!(!temp.exists(), "SIG{signal}: {} is left behind", temp.display());
        assert!(!p.join("out.kiln").exists());
        no_temporaries(p);
    }
}

#[test]
fn p05_the_sidecar_is_written_only_after_out() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    small_npy(p, "m.npy");
    // OUT cannot be replaced (a directory): the old converter had already
    // replaced OUT.meta.json by then.
    std::fs::create_dir(p.join("out.kiln")).unwrap();
    std::fs::write(p.join("out.kiln.meta.json"), b"precious").unwrap();
    convert(p, &["m.npy", "-o", "out.kiln", "--to", "tensors"], 2);
    assert_eq!(std::fs::read(p.join("out.kiln.meta.json")).unwrap(), b"precious");
    no_temporaries(p);
    // When OUT can be written, both are, OUT first (see
    // convert::outfile::tests::a_later_output_is_not_replaced_when_an_earlier_one_fails).
    convert(p, &["m.npy", "-o", "plain.kiln", "--to", "tensors"], 0);
    let side: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("plain.kiln.meta.json")).unwrap()).unwrap();
    assert_eq!(side["kiln.convert.source_format"], "npy");
    assert!(Directory::parse(&std::fs::read(p.join("plain.kiln")).unwrap()).is_ok());
}

#[cfg(unix)]
#[test]
fn p06_out_keeps_its_mode_and_links_are_written_through() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    small_npy(p, "m.npy");
    std::fs::write(p.join("private.kiln"), b"old").unwrap();
    std::fs::set_permissions(p.join("private.kiln"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(p.join("shared.kiln"), b"old").unwrap();
    std::fs::set_permissions(p.join("shared.kiln"), std::fs::Permissions::from_mode(0o664)).unwrap();
    for (out, mode) in [("private.kiln", 0o600), ("shared.kiln", 0o664)] {
        convert(p, &["m.npy", "-o", out], 0);
        let m = std::fs::metadata(p.join(out)).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, mode, "{out}");
    }
    // A symlink OUT: the link stays, its target gets the new bytes.
    std::fs::create_dir(p.join("models")).unwrap();
    std::fs::write(p.join("models/real.kiln"), b"old").unwrap();
    std::os::unix::fs::symlink("models/real.kiln", p.join("link.kiln")).unwrap();
    convert(p, &["m.npy", "-o", "link.kiln"], 0);
    assert!(std::fs::symlink_metadata(p.join("link.kiln")).unwrap().file_type().is_symlink());
    assert!(record(&p.join("models/real.kiln")).1.iter().any(|(n, _)| n == "m"));
    // A dangling link is refused rather than followed.
    std::os::unix::fs::symlink("models/nowhere.kiln", p.join("dangling.kiln")).unwrap();
    let err = convert(p, &["m.npy", "-o", "dangling.kiln"], 2);
    assert!(err.contains("dangling"), "{err}");
    assert!(!p.join("models/nowhere.kiln").exists());
    no_temporaries(p);
    no_temporaries(&p.join("models"));
}

// ---------------------------------------------------------------- 7 to 10

#[test]
fn p07_npy_duplicate_header_keys_are_refused() {
    if !python_ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    // What NumPy does with each (ast.literal_eval: the last value wins), then the files.
    py(
        p,
        r#"
import io, struct, numpy as np
def npy(h, data):
    h = h.encode('latin1')
    while (10 + len(h) + 1) % 64: h += b' '
    h += b'\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h + data
data = np.arange(6, dtype='<i4').tobytes()
cases = {
  'descr': ("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'descr': '<i4'}", 'int32', (2, 3)),
  'fortran': ("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), 'fortran_order': True}", 'int32', (2, 3)),
  'shape': ("{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), 'shape': (2, 3)}", 'int32', (2, 3)),
}
for name, (h, dtype, shape) in cases.items():
    b = npy(h, data)
    a = np.load(io.BytesIO(b))
    assert (a.dtype.name, a.shape) == (dtype, shape), (name, a.dtype, a.shape)
    open(name + '.npy', 'wb').write(b)
if cases['fortran']:
    assert np.load('fortran.npy').flags.f_contiguous
open('extra.npy', 'wb').write(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (6,), 'x': 1}", data))
try:
    np.load('extra.npy'); raise SystemExit('numpy accepted an extra key')
except ValueError:
    pass
"#,
    );
    for (file, key) in [("descr.npy", "descr"), ("fortran.npy", "fortran_order"), ("shape.npy", "shape")] {
        let err = convert(p, &[file, "-o", "out.kiln"], 1);
        assert!(err.contains(&format!("the key \"{key}\" twice")) && err.contains(file), "{err}");
        assert!(err.contains("byte "), "names the byte: {err}");
        assert!(!p.join("out.kiln").exists());
    }
    let err = convert(p, &["extra.npy", "-o", "out.kiln"], 1);
    assert!(err.contains("\"x\"") && err.contains("exactly descr, fortran_order and shape"), "{err}");
    no_temporaries(p);
}

#[test]
fn p08_npz_crc_is_checked_for_every_member() {
    if !python_ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    // Stored and deflated members above 1 MiB, and a small deflated one, each
    // with a CRC-32 that does not match its bytes; np.load refuses all three.
    py(
        p,
        r#"
import struct, zipfile, numpy as np
rng = np.random.default_rng(1)
big = rng.standard_normal(300_000).astype(np.float32)   # 1.2 MB
np.savez('stored.npz', a=big, b=np.arange(3, dtype=np.int16))
np.savez_compressed('deflated.npz', a=big)
np.savez_compressed('small.npz', a=np.arange(10, dtype=np.int32))
def corrupt_data(path):   # flip one payload byte of member a.npy
    b = bytearray(open(path, 'rb').read())
    z = zipfile.ZipFile(path); info = z.getinfo('a.npy')
    hdr = info.header_offset; n, e = struct.unpack_from('<HH', b, hdr + 26)
    b[hdr + 30 + n + e + 1000] ^= 1
    open('bad-' + path, 'wb').write(b)
def corrupt_crc(path):    # the data is intact, the recorded CRC is not
    b = bytearray(open(path, 'rb').read())
    z = zipfile.ZipFile(path); info = z.getinfo('a.npy')
    struct.pack_into('<I', b, info.header_offset + 14, info.CRC ^ 1)
    cd = b.rfind(b'PK\x01\x02'); cd = b.find(b'PK\x01\x02')
    while cd >= 0:
        struct.pack_into('<I', b, cd + 16, struct.unpack_from('<I', b, cd + 16)[0] ^ 1) if b[cd + 46:cd + 46 + 5] == b'a.npy' else None
        cd = b.find(b'PK\x01\x02', cd + 4)
    open('bad-' + path, 'wb').write(b)
corrupt_data('stored.npz'); corrupt_crc('deflated.npz'); corrupt_crc('small.npz')
for f in ('bad-stored.npz', 'bad-deflated.npz', 'bad-small.npz'):
    try:
        np.load(f)['a']; raise SystemExit(f + ': numpy read it')
    except zipfile.BadZipFile:
        pass
"#,
    );
    for good in ["stored.npz", "deflated.npz", "small.npz"] {
        convert(p, &[good, "-o", "ok.kiln", "-q"], 0);
    }
    for bad in ["bad-stored.npz", "bad-deflated.npz", "bad-small.npz"] {
        let err = convert(p, &[bad, "-o", "out.kiln"], 1);
        assert!(err.contains(bad) && err.contains("a.npy"), "names the file and member: {err}");
        assert!(err.contains("CRC") || err.contains("checksum"), "{err}");
        assert!(!p.join("out.kiln").exists());
        // kiln validate reads every member too.
        let v = kiln(p, &["validate", "--json", bad]);
        assert_eq!(v.status.code(), Some(1), "{}", stdout(&v));
        assert!(stdout(&v).contains(r#""format":"npz""#), "{}", stdout(&v));
    }
    no_temporaries(p);
}

#[test]
fn p09_user_keys_in_the_converter_namespace_are_never_overwritten() {
    if !python_ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    py(
        p,
        r#"
import numpy as np, gguf
from safetensors.numpy import save_file
user = {'kiln.convert.pad': 'xx', 'kiln.convert.source_format': 'evil', 'kiln.convert.value_encoding': 'json',
        'kiln.convert.source_types': '{}', 'format': 'pt'}
save_file({'w': np.ones(4, np.float32)}, 'in.safetensors', metadata=user)
w = gguf.GGUFWriter('in.gguf', 'arch')
w.add_string('kiln.convert.value_encoding', 'text'); w.add_uint32('kiln.convert.pad', 7)
w.add_tensor('w', np.ones(4, np.float32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
"#,
    );
    hk_writer(
        p,
        r#"
w = HkWriter()
w.add_metadata('kiln.convert.hk_header', 'mine')
w.add_metadata('kiln.convert.source_types', 1)
w.add_tensor('w', 'f32', (1,), struct.pack('<f', 1.0))
open('in.hk', 'wb').write(w.to_bytes())
"#,
    );
    for (input, format, encoding, moved) in [
        ("in.safetensors", "safetensors", "text", &["pad", "source_format", "value_encoding", "source_types"][..]),
        ("in.gguf", "gguf", "json", &["value_encoding", "pad"][..]),
        ("in.hk", "hk", "json", &["hk_header", "source_types"][..]),
    ] {
        let err = convert(p, &[input, "-o", "out.kiln"], 0);
        let (meta, _) = record(&p.join("out.kiln"));
        assert_eq!(meta_get(&meta, "kiln.convert.source_format"), Some(format), "{input}");
        assert_eq!(meta_get(&meta, "kiln.convert.value_encoding"), Some(encoding), "{input}");
        assert!(meta_get(&meta, "kiln.convert.pad").unwrap().bytes().all(|b| b == b' '), "{input}");
        for m in moved {
            let key = format!("kiln.convert.{m}");
            let kept = format!("kiln.convert.input.{key}");
            assert!(meta_get(&meta, &kept).is_some(), "{input}: {kept} in {meta:?}");
            assert!(err.contains(&format!("kept as \"{kept}\"")), "{input}: a note for {key}: {err}");
        }
        if input == "in.safetensors" {
            assert_eq!(meta_get(&meta, "kiln.convert.input.kiln.convert.source_format"), Some("evil"));
            // The way back restores the user's own keys.
            convert(p, &["out.kiln", "-o", "back.safetensors"], 0);
            py(
                p,
                r#"
from safetensors import safe_open
with safe_open('back.safetensors', 'np') as f:
    m = f.metadata()
assert m == {'kiln.convert.pad': 'xx', 'kiln.convert.source_format': 'evil', 'kiln.convert.value_encoding': 'json',
             'kiln.convert.source_types': '{}', 'format': 'pt'}, m
"#,
            );
        }
        if input == "in.gguf" {
            let types: serde_json::Value =
                serde_json::from_str(meta_get(&meta, "kiln.convert.source_types").unwrap()).unwrap();
            assert_eq!(types["kiln.convert.input.kiln.convert.pad"], "u32", "{types}");
        }
    }
}

#[test]
fn p10_kiln_only_dtypes_survive_a_round_trip_through_safetensors() {
    if !python_ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let q8: Vec<u8> = (0..5 * 2 * 34).map(|i| (i * 7 % 251) as u8).collect();
    let specs = [
        TensorSpec::new(DType::I4, &[3], &[0x21, 0x0f]).named("i4"),
        TensorSpec::new(DType::U4, &[4], &[0x43, 0x21]).named("u4"),
        TensorSpec::new(DType::E2M1, &[5], &[0x21, 0x43, 0x05]).named("e2m1_odd"),
        TensorSpec::new(DType::E2M1, &[4], &[0x21, 0x43]).named("e2m1_even"),
        TensorSpec { layout: Some("Q8_0"), block_size: 34, ..TensorSpec::new(DType::Opaque(4104), &[5, 64], &q8) }
            .named("q8"),
        TensorSpec::new(DType::F32, &[2], &[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]).named("f32"),
    ];
    let mut block = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    Writer::new().write(&specs, &mut block).unwrap();
    std::fs::write(p.join("kilnonly.kiln"), &block).unwrap();
    // And the example model: MXFP4 (e2m1 + e8m0 scales, scheme 1 links).
    std::fs::copy(root().join("spec/examples/digits-mlp.kiln"), p.join("mlp.kiln")).unwrap();
    for input in ["kilnonly.kiln", "mlp.kiln"] {
        let original = std::fs::read(p.join(input)).unwrap();
        let want = tensors(&Directory::parse(&original).unwrap());
        let err = convert(p, &[input, "-o", "mid.safetensors"], 0);
        assert!(err.contains("kiln convert restores it on the way back") || input == "mlp.kiln", "{err}");
        // The safetensors package reads what was written.
        py(
            p,
            r#"
from safetensors import safe_open
with safe_open('mid.safetensors', 'np') as f:
    for k in f.keys():
        if not f.get_slice(k).get_dtype().startswith(('F4', 'F6', 'F8')):   # not in NumPy
            f.get_tensor(k)
"#,
        );
        let err = convert(p, &["mid.safetensors", "-o", "back.kiln"], 0);
        let (meta, got) = record(&p.join("back.kiln"));
        assert!(meta.iter().all(|(k, _)| !k.starts_with("kiln.dtype.") && !k.starts_with("kiln.quant.")), "{meta:?}");
        let mut want_sorted: Vec<_> = want.iter().collect();
        want_sorted.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got.len(), want_sorted.len());
        for ((gn, g), (wn, w)) in got.iter().zip(want_sorted) {
            assert_eq!(gn, wn);
            assert_eq!(
                (g.dtype, &g.shape, &g.layout, g.block_size),
                (w.dtype, &w.shape, &w.layout, w.block_size),
                "{gn}: {err}"
            );
            assert_eq!(g.bytes, w.bytes, "{gn}");
            assert_eq!(g.quant, w.quant, "{gn}");
        }
    }
}

// ---------------------------------------------------------------- 11 to 13

/// Peak RSS (KiB), exit code and stderr of one `kiln` run, measured by GNU
/// time (scripts/setup.sh installs it): a process forked from this large
/// test process would count the parent's pages in its own maximum.
#[cfg(target_os = "linux")]
fn peak_rss(dir: &Path, args: &[&str]) -> Option<(u64, i32, String)> {
    if !Path::new("/usr/bin/time").exists() {
        eprintln!("!!!!!!!! SKIPPED the RSS figures: /usr/bin/time (GNU time) is not installed");
        return None;
    }
    let rss = dir.join("rss.txt");
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&rss)
        .arg(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let kib = std::fs::read_to_string(&rss).unwrap().lines().last().unwrap().trim().parse().unwrap();
    Some((kib, out.status.code().unwrap_or(-1), stderr(&out)))
}

/// The hostile inputs of issue 12 (and a just-under-budget one): each is
/// converted or refused with peak RSS under 64 MiB. Prints the table that
/// kiln-cli/README.md quotes.
#[cfg(target_os = "linux")]
#[test]
fn p11_p12_hostile_inputs_stay_under_64_mib() {
    if !python_ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    py(
        p,
        r#"
import struct, zipfile, numpy as np
def s(t): b = t.encode(); return struct.pack('<Q', len(b)) + b
def gguf(kvs, infos=b'', n_tensors=0, n_kv=None):
    n_kv = len(kvs) if n_kv is None else n_kv
    return b'GGUF' + struct.pack('<IQQ', 3, n_tensors, n_kv) + b''.join(kvs) + infos
# 4 MiB array of f64 5e-324 (the smallest subnormal: 327 digits in plain decimal)
arr = s('a') + struct.pack('<IIQ', 9, 12, 1 << 19) + struct.pack('<d', 5e-324) * (1 << 19)
open('subnormal.gguf', 'wb').write(gguf([arr]))
# 300,000 key/value pairs
open('kv300k.gguf', 'wb').write(gguf([s('k%d' % i) + struct.pack('<IB', 0, 1) for i in range(300_000)]))
# 300,000 tensor infos
info = b''.join(s('t%d' % i) + struct.pack('<I', 1) + struct.pack('<Q', 1) + struct.pack('<IQ', 0, 0) for i in range(300_000))
open('ti300k.gguf', 'wb').write(gguf([], info, 300_000))
# a safetensors header with 2,000 entries (larger single files are issue 24's open work: slow)
import json
h = json.dumps({'t%d' % i: {'dtype': 'U8', 'shape': [0], 'data_offsets': [0, 0]} for i in range(2_000)}).encode()
h += b' ' * (-len(h) % 8)
open('st20k.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h)
# an .npz member of zeros compressed 1028:1 (256 MiB here; the issue's was 10 GiB)
z = zipfile.ZipFile('bomb.npz', 'w', zipfile.ZIP_DEFLATED)
with z.open('zeros.npy', 'w', force_zip64=True) as f:
    hdr = b"{'descr': '<f8', 'fortran_order': False, 'shape': (33554432,), }"
    hdr += b' ' * (-(10 + len(hdr) + 1) % 64) + b'\n'
    f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hdr)) + hdr)
    for _ in range(256): f.write(bytes(1 << 20))
z.close()
"#,
    );
    let cases: [(&str, i32, &str); 5] = [
        ("subnormal.gguf", 0, ""),
        ("kv300k.gguf", 0, ""),
        ("ti300k.gguf", 1, "at most 65535"),
        // Names past one block: a sharded model.
        ("st20k.safetensors", 0, ""),
        ("bomb.npz", 1, "ratio above 1000:1"),
    ];
    eprintln!("| input | result | peak RSS |");
    for (input, code, needle) in cases {
        let Some((kib, got, err)) = peak_rss(p, &["convert", "-q", input, "-o", "out.kiln"]) else { return };
        eprintln!("| {input} | exit {got} | {:.1} MiB |", kib as f64 / 1024.0);
        assert_eq!(got, code, "{input}: {err}");
        assert!(err.contains(needle), "{input}: {err}");
        assert!(kib < 64 * 1024, "{input}: peak RSS {kib} KiB");
        if input == "subnormal.gguf" {
            let (meta, _) = record(&p.join("out.kiln"));
            let v = meta_get(&meta, "a").unwrap();
            assert!(v.starts_with("[5e-324,5e-324,"), "{}", &v[..40]);
            assert!(std::fs::metadata(p.join("out.kiln")).unwrap().len() < 4_000_000, "shortest float form");
        }
        std::fs::remove_file(p.join("out.kiln")).ok();
    }
    // The metadata budget is a flag.
    let err = convert(p, &["kv300k.gguf", "-o", "out.kiln", "--metadata-budget", "1M"], 1);
    assert!(err.contains("--metadata-budget") && err.contains("kv300k.gguf"), "{err}");
    no_temporaries(p);
}

/// Issue 24: peak RSS stays under 2x the largest header or index read plus
/// 16 MiB, on a safetensors file whose header holds one 16 MiB metadata
/// string (68 MiB, 4x the string, before) and on a 500,000-name index (60 MB)
/// over shards of zero-length tensors. Prints the table kiln-cli/README.md quotes.
#[cfg(target_os = "linux")]
#[test]
#[cfg_attr(miri, ignore = "spawns python3 and kiln, which Miri cannot run")]
fn p24_big_headers_and_indexes_stay_under_twice_their_size() {
    if !python_ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    py(
        p,
        r#"
import json, os, numpy as np
from safetensors.numpy import save_file
save_file({'w': np.arange(4, dtype=np.float32)}, 'meta16m.safetensors', metadata={'big': 'x' * (16 << 20)})
os.makedirs('moe', exist_ok=True)
# 500,000 names of 64 bytes (KILN_RSS_NAMES, 20,000 in CI: converting the whole index is the
# local run, scripts/robustness-full.sh); 900 per shard keeps each shard's names within one block.
n = int(os.environ.get('KILN_RSS_NAMES', '20000'))
names = ['model.layers.%03d.mlp.experts.%06d.gate_up_proj.weight_scale_inv.bias' % (i // 10000, i) for i in range(n)]
per = 900
count = (len(names) + per - 1) // per
weight_map = {}
for k in range(count):
    shard = 'model-%05d-of-%05d.safetensors' % (k + 1, count)
    chunk = names[k * per:(k + 1) * per]
    save_file({n: np.zeros(0, np.uint8) for n in chunk}, os.path.join('moe', shard))
    for n in chunk:
        weight_map[n] = shard
json.dump({'metadata': {'total_size': 0}, 'weight_map': weight_map}, open('moe/model.safetensors.index.json', 'w'), indent=2)
"#,
    );
    let index = p.join("moe/model.safetensors.index.json");
    // The bound: 2x the file + 16 MiB, the converter's tensor table (one
    // small row a tensor), the digests and the manifest read back included.
    let cases: [(&str, &Path, i32, &str); 2] = [
        ("meta16m.safetensors", &p.join("meta16m.safetensors"), 0, ""),
        ("moe/model.safetensors.index.json", &index, 0, "a sharded model"),
    ];
    eprintln!("| input | size | result | peak RSS | bound |");
    for (input, file, code, needle) in cases {
        let size = std::fs::metadata(file).unwrap().len();
        let bound_kib = (2 * size + (16 << 20)) / 1024;
        let Some((kib, got, err)) = peak_rss(p, &["convert", "-q", input, "-o", "out.kiln"]) else { return };
        eprintln!(
            "| {input} | {:.1} MB | exit {got} | {:.1} MiB | {:.1} MiB |",
            size as f64 / 1e6,
            kib as f64 / 1024.0,
            bound_kib as f64 / 1024.0
        );
        assert_eq!(got, code, "{input}: {err}");
        assert!(err.contains(needle), "{input}: {err}");
        assert!(kib < bound_kib, "{input}: peak RSS {kib} KiB, above 2x {size} bytes + 16 MiB");
        std::fs::remove_file(p.join("out.kiln")).ok();
    }
    no_temporaries(p);
}

/// Peak anonymous memory of one `kiln` run (RssAnon: the heap, stacks and
/// written data, not the mapped input's pages), with its exit code and
/// stderr. Linux keeps no high-water mark of RssAnon alone, so it is
/// sampled from /proc/PID/status every millisecond; the exact high-water
/// mark of all resident pages, anonymous and file-backed (VmHWM, GNU time's
/// %M), comes back too, and bounds what the samples could have missed.
/// Returns (peak RssAnon KiB, VmHWM KiB, exit code, stderr).
#[cfg(target_os = "linux")]
fn peak_anon(dir: &Path, args: &[&str]) -> Option<(u64, u64, i32, String)> {
    if !Path::new("/usr/bin/time").exists() {
        eprintln!("!!!!!!!! SKIPPED the RSS figures: /usr/bin/time (GNU time) is not installed");
        return None;
    }
    let hwm = dir.join("hwm.txt");
    let mut child = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&hwm)
        .arg(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // GNU time forks kiln: its one child.
    let children = format!("/proc/{0}/task/{0}/children", child.id());
    let mut anon = 0u64;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let pid = std::fs::read_to_string(&children).unwrap_or_default();
        if let Some(pid) = pid.split_whitespace().next() {
            let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let kib = text.lines().find_map(|l| l.strip_prefix("RssAnon:")).and_then(|v| v.split_whitespace().next());
            anon = anon.max(kib.and_then(|k| k.parse().ok()).unwrap_or(0));
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let hwm = std::fs::read_to_string(&hwm).unwrap().lines().last().unwrap().trim().parse().unwrap();
    Some((anon, hwm, status.code().unwrap_or(-1), err))
}

/// A safetensors file of `n` one-element f32 tensors named like a
/// mixture-of-experts model's, written here (the header's JSON by hand):
/// returns the header's length.
#[cfg(target_os = "linux")]
fn many_tensor_safetensors(path: &Path, n: usize) -> u64 {
    let mut head = String::from("{");
    for i in 0..n {
        let sep = if i == 0 { "" } else { "," };
        let (b, e) = (4 * i, 4 * i + 4);
        head += &format!(
            r#"{sep}"model.layers.{:03}.mlp.experts.{i:06}.w":{{"dtype":"F32","shape":[1],"data_offsets":[{b},{e}]}}"#,
            i / 1000
        );
    }
    head += "}";
    while head.len() % 8 != 0 {
        head.push(' ');
    }
    let mut bytes = (head.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(head.as_bytes());
    bytes.resize(bytes.len() + 4 * n, 0);
    std::fs::write(path, bytes).unwrap();
    head.len() as u64
}

/// Issue 41: converting 200,000 tensors of a safetensors file (a 19.7 MB
/// header; a sharded model, as one Kiln block holds 65,535 bytes of names)
/// keeps peak RssAnon within 2x the header + 16 MiB (155 MiB, 8x the header,
/// when the `safetensors` crate's table was read). VmHWM, which counts the
/// mapped header's pages and the binary's too, stays within the bound plus
/// the header and 16 MiB: a spike between two samples would have to fit
/// there. Prints the row kiln-cli/README.md quotes.
#[cfg(target_os = "linux")]
#[test]
#[cfg_attr(miri, ignore = "spawns kiln, which Miri cannot run")]
fn p41_200k_tensors_stay_within_twice_the_header() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let size = many_tensor_safetensors(&p.join("moe.safetensors"), 200_000);
    let bound_kib = (2 * size + (16 << 20)) / 1024;
    let Some((anon, hwm, code, err)) = peak_anon(p, &["convert", "-q", "moe.safetensors", "-o", "out.kiln"]) else {
        return;
    };
    eprintln!("| input | header | result | peak RssAnon | VmHWM | bound |");
    eprintln!(
        "| moe.safetensors (200,000 tensors) | {:.1} MB | exit {code} | {:.1} MiB | {:.1} MiB | {:.1} MiB |",
        size as f64 / 1e6,
        anon as f64 / 1024.0,
        hwm as f64 / 1024.0,
        bound_kib as f64 / 1024.0
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("a sharded model"), "{err}");
    assert!(anon > 0, "no sample of the child's RssAnon");
    assert!(anon < bound_kib, "peak RssAnon {anon} KiB, above 2x {size} bytes + 16 MiB");
    let slack = (size + (16 << 20)) / 1024;
    assert!(hwm < bound_kib + slack, "VmHWM {hwm} KiB");
    let back = kiln(p, &["validate", "out.kiln"]);
    assert!(back.status.success(), "{}", stderr(&back));
    no_temporaries(p);
}

#[test]
fn p12_npz_decompression_limits_are_flags() {
    if !python_ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    py(p, "import numpy as np\nnp.savez_compressed('z.npz', zeros=np.zeros(1 << 21))\n"); // 16 MiB of zeros
    let err = convert(p, &["z.npz", "-o", "out.kiln"], 1);
    assert!(err.contains("z.npz") && err.contains("zeros.npy") && err.contains("--max-ratio"), "{err}");
    let err = convert(p, &["z.npz", "-o", "out.kiln", "--max-ratio", "100000", "--max-member-size", "1M"], 1);
    assert!(err.contains("--max-member-size"), "{err}");
    convert(p, &["z.npz", "-o", "out.kiln", "--max-ratio", "100000", "-q"], 0);
    let (_, got) = record(&p.join("out.kiln"));
    assert_eq!(got[0].1.bytes.len(), 16 << 20);
    no_temporaries(p);
}

#[cfg(unix)]
#[test]
fn p13_a_fifo_input_is_refused_at_once() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    assert!(Command::new("mkfifo").arg(p.join("in.npy")).status().unwrap().success());
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["convert", "in.npy", "-o", "out.kiln"])
        .current_dir(p)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().ok();
            panic!("kiln convert hangs on a FIFO input");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("in.npy is a FIFO"), "{err}");
    // A directory as IN is a usage error too (exit 2, as documented).
    std::fs::create_dir(p.join("dir")).unwrap();
    // (A folder is read as a Hugging Face checkpoint: one index or one .safetensors file.)
    let err = convert(p, &["dir", "-o", "out.kiln"], 2);
    assert!(err.contains("dir: a folder must hold one *.safetensors.index.json"), "{err}");
}

// ---------------------------------------------------------------- 14 to 17 (HK, validate, inspect)

#[test]
fn p14_hk_lineage_is_verified_by_default() {
    if !python_ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    hk_writer(
        p,
        r#"
good = sample()
open('good.hk', 'wb').write(good)
# One bit of record 1's payload ("delta-two!"): record 2's parent_hash no longer matches.
i = good.index(b'delta-two!')
bad = bytearray(good); bad[i] ^= 1
open('bad.hk', 'wb').write(bytes(bad))
"#,
    );
    convert(p, &["good.hk", "-o", "good.kiln", "-q"], 0);
    let err = convert(p, &["bad.hk", "-o", "bad.kiln"], 1);
    assert!(err.contains("bad.hk") && err.contains("lineage") && err.contains("HkLineageHash"), "{err}");
    assert!(!p.join("bad.kiln").exists());
    let err = convert(p, &["bad.hk", "-o", "bad.kiln", "--no-verify-lineage"], 0);
    assert!(err.contains("NOT verified (--no-verify-lineage)"), "{err}");
    let v = kiln(p, &["validate", "--json", "bad.hk"]);
    assert_eq!(v.status.code(), Some(1));
    let line: serde_json::Value = serde_json::from_str(stdout(&v).trim()).unwrap();
    assert_eq!(
        (line["format"].as_str(), line["error"].as_str(), line["rule"].as_str()),
        (Some("hk"), Some("TYPE"), Some("HkLineageHash"))
    );
    assert!(line["offset"].as_u64().is_some());
    let v = kiln(p, &["validate", "--no-verify-lineage", "bad.hk"]);
    assert_eq!(v.status.code(), Some(0), "{}", stdout(&v));
}

#[test]
fn p15_converter_names_never_collide_with_the_files_own() {
    if !python_ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    hk_writer(
        p,
        r#"
w = HkWriter()
w.add_metadata('hk.appendix.0', 'a user key')
w.add_tensor('w', 'dq4', (64,), bytes(range(32)), scales=bytes([9] * 8))
w.add_tensor('w.hk_scales', 'uint8', (3,), bytes([1, 2, 3]))
w.add_tensor('hk.appendix.0.data', 'uint8', (2,), bytes([4, 5]))
b = append_record(w.to_bytes(), 'lora_adapter', 'a', 'w', b'appendix payload')
open('names.hk', 'wb').write(b)
"#,
    );
    let err = convert(p, &["names.hk", "-o", "out.kiln"], 0);
    let (meta, got) = record(&p.join("out.kiln"));
    let bytes = |name: &str| got.iter().find(|(n, _)| n == name).map(|(_, g)| g.bytes.clone());
    assert_eq!(bytes("w.hk_scales"), Some(vec![1, 2, 3]), "the file's own tensor keeps its name");
    assert_eq!(bytes("w.hk_scales.1"), Some(vec![9; 8]), "the derived one steps aside: {err}");
    assert_eq!(bytes("hk.appendix.0.data"), Some(vec![4, 5]));
    assert_eq!(bytes("hk.appendix.0.data.1"), Some(b"appendix payload".to_vec()));
    assert_eq!(meta_get(&meta, "hk.appendix.0"), Some(r#""a user key""#));
    let rec: serde_json::Value = serde_json::from_str(meta_get(&meta, "hk.appendix.0.1").unwrap()).unwrap();
    assert_eq!(rec["data_tensor"], "hk.appendix.0.data.1");
    let parts: serde_json::Value = serde_json::from_str(meta_get(&meta, "kiln.convert.hk_parts").unwrap()).unwrap();
    assert_eq!(parts["w.hk_scales.1"]["of"], "w");
    assert!(err.contains("the file has a tensor named w.hk_scales"), "{err}");
}

#[test]
fn p16_hk_strict_rulings() {
    if !python_ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    hk_writer(
        p,
        r#"
def entries(b):
    # (name, offset of the data_offset field) of each TOC entry
    toc = struct.unpack_from('<Q', b, 0x30)[0]; n = struct.unpack_from('<Q', b, 0x10)[0]; out = []; pos = toc
    for _ in range(n):
        nl = struct.unpack_from('<H', b, pos)[0]; name = b[pos + 2:pos + 2 + nl].decode(); nd = b[pos + 2 + nl + 3]
        field = pos + 2 + nl + 4 + 8 * nd; out.append((name, field)); pos = field + 48 + 6
    return out
w = HkWriter(alignment=64)
w.add_tensor('a', 'f32', (32,), bytes(128))
w.add_tensor('b', 'f32', (8,), bytes(32))
w.add_tensor('c', 'f32', (16,), bytes(64))
w.add_tensor('empty', 'f32', (0,), b'')
base = bytearray(w.to_bytes()); open('ok.hk', 'wb').write(base)
e = dict(entries(base))
a_off = struct.unpack_from('<Q', base, e['a'])[0]
def variant(name, edit):
    b = bytearray(base); edit(b); open(name + '.hk', 'wb').write(b)
variant('flag', lambda b: struct.pack_into('<I', b, 8, struct.unpack_from('<I', b, 8)[0] ^ 0x30))   # TILE_ALIGNED for 64
variant('misaligned', lambda b: struct.pack_into('<Q', b, e['b'], struct.unpack_from('<Q', b, e['b'])[0] + 8))
variant('overlap', lambda b: struct.pack_into('<Q', b, e['b'], a_off + 64))
variant('pastend', lambda b: struct.pack_into('<Q', b, e['empty'], len(b) + 4096))
"#,
    );
    convert(p, &["ok.hk", "-o", "ok.kiln", "-q"], 0);
    for (file, rule) in [
        ("flag.hk", "HkAlignmentFlag"),
        ("misaligned.hk", "HkMisaligned"),
        ("overlap.hk", "HkOverlap"),
        ("pastend.hk", "HkEmptyPastEnd"),
    ] {
        let err = convert(p, &[file, "-o", "out.kiln"], 1);
        assert!(err.contains(file) && err.contains(rule) && err.contains("byte "), "{err}");
        assert!(!p.join("out.kiln").exists());
        let v = kiln(p, &["validate", "--json", file]);
        let line: serde_json::Value = serde_json::from_str(stdout(&v).trim()).unwrap();
        assert_eq!((line["ok"].as_bool(), line["rule"].as_str()), (Some(false), Some(rule)), "{line}");
    }
}

#[test]
fn p17_validate_and_inspect_read_every_input_format() {
    if !python_ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    py(
        p,
        r#"
import numpy as np, gguf
from safetensors.numpy import save_file
save_file({'w': np.ones((2, 3), np.float32)}, 'm.safetensors', metadata={'k': 'v'})
w = gguf.GGUFWriter('m.gguf', 'arch'); w.add_tensor('w', np.ones((2, 3), np.float32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
np.save('m.npy', np.ones((2, 3), np.float32))
np.savez('m.npz', w=np.ones((2, 3), np.float32))
"#,
    );
    hk_writer(p, "open('m.hk', 'wb').write(sample())\n");
    std::fs::write(p.join("broken.gguf"), b"GGUF\x03\x00\x00\x00\x01").unwrap();
    for (file, format) in
        [("m.safetensors", "safetensors"), ("m.gguf", "gguf"), ("m.npy", "npy"), ("m.npz", "npz"), ("m.hk", "hk")]
    {
        let v = kiln(p, &["validate", "--json", file]);
        assert_eq!(v.status.code(), Some(0), "{file}: {}{}", stdout(&v), stderr(&v));
        assert_eq!(stdout(&v).trim(), format!(r#"{{"file":"{file}","ok":true,"format":"{format}"}}"#));
        let v = kiln(p, &["validate", file]);
        assert_eq!(stdout(&v).trim(), format!("{file}: ok ({format})"));
        let i = kiln(p, &["inspect", file]);
        assert_eq!(i.status.code(), Some(0), "{}", stderr(&i));
        let text = stdout(&i);
        assert!(text.contains(&format!("format:          {format}")) && text.contains("index  name"), "{text}");
        let j = kiln(p, &["inspect", "--json", file]);
        let doc: serde_json::Value = serde_json::from_str(&stdout(&j)).unwrap();
        assert_eq!(doc["format"], format);
        assert!(!doc["tensors"].as_array().unwrap().is_empty());
        if file != "m.hk" {
            assert_eq!(doc["tensors"][0]["shape"], serde_json::json!([2, 3]), "{file}");
        }
    }
    // A rejected foreign file: the reader's message and offset, exit 1.
    let v = kiln(p, &["validate", "--json", "broken.gguf", "m.gguf"]);
    assert_eq!(v.status.code(), Some(1));
    let first: serde_json::Value = serde_json::from_str(stdout(&v).lines().next().unwrap()).unwrap();
    assert_eq!((first["ok"].as_bool(), first["format"].as_str()), (Some(false), Some("gguf")));
    assert_eq!(first["offset"].as_u64(), Some(8), "{first}");
    let i = kiln(p, &["inspect", "broken.gguf"]);
    assert_eq!(i.status.code(), Some(1));
    assert!(stderr(&i).contains("broken.gguf (gguf): byte 8"), "{}", stderr(&i));
    // --from forces a reader.
    let v = kiln(p, &["validate", "--from", "gguf", "m.npy"]);
    assert_eq!(v.status.code(), Some(1), "{}", stdout(&v));
    // Kiln files keep their exact contract.
    std::fs::copy(root().join("spec/examples/digits-mlp.kiln"), p.join("m.kiln")).unwrap();
    let v = kiln(p, &["validate", "--json", "m.kiln"]);
    assert_eq!(stdout(&v).trim(), r#"{"file":"m.kiln","ok":true}"#);
}

// ---------------------------------------------------------------- 18

#[test]
fn p18_errors_name_the_file_format_tensor_and_offset() {
    if !python_ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    py(
        p,
        r#"
import numpy as np, struct, json
from safetensors.numpy import save_file
save_file({'r9': np.ones((1,) * 9, np.float32)}, 'rank9.safetensors')
save_file({'a': np.zeros(8, np.float32), 'mask': np.array([True, False, True])}, 'bool.safetensors')
b = bytearray(open('bool.safetensors', 'rb').read()); b[-2] = 2; open('bool.safetensors', 'wb').write(b)
open('be.gguf', 'wb').write(b'GGUF' + struct.pack('>IQQ', 3, 0, 0))
h = b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, }'
h += b' ' * (-len(h) % 8)
open('json.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + bytes(8))
"#,
    );
    hk_writer(
        p,
        r#"
w = HkWriter()
w.add_tensor('w', 'f32', (1,), bytes(4)); w.add_tensor('w', 'f32', (1,), bytes(4))
open('dup.hk', 'wb').write(w.to_bytes())
"#,
    );
    let err = convert(p, &["rank9.safetensors", "-o", "o.kiln"], 1);
    assert!(err.contains("rank9.safetensors (safetensors)") && err.contains("tensor r9: rank 9"), "{err}");
    let err = convert(p, &["dup.hk", "-o", "o.kiln"], 1);
    assert!(err.contains("dup.hk (hk)") && err.contains("\"w\" appears twice") && err.contains("Kiln limit"), "{err}");
    let err = convert(p, &["bool.safetensors", "-o", "o.kiln"], 1);
    let size = std::fs::metadata(p.join("bool.safetensors")).unwrap().len();
    assert!(err.contains("bool.safetensors (safetensors)") && err.contains("tensor mask (bool)"), "{err}");
    assert!(err.contains(&format!("byte {} of the input", size - 2)), "{err}");
    let err = convert(p, &["be.gguf", "-o", "o.kiln"], 1);
    assert!(err.contains("big-endian GGUF") && err.contains("byte 4"), "{err}");
    let err = convert(p, &["json.safetensors", "-o", "o.kiln"], 1);
    assert!(err.contains("json.safetensors (safetensors): byte "), "a safetensors error has an offset: {err}");
    // A write error names OUT (the file size limit makes write() fail with EFBIG).
    #[cfg(unix)]
    {
        small_npy(p, "m.npy");
        py(p, "import numpy as np\nnp.save('big.npy', np.zeros(1 << 18))\n");
        let kiln_bin = env!("CARGO_BIN_EXE_kiln");
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("trap '' XFSZ; ulimit -f 64; exec '{kiln_bin}' convert big.npy -o big.kiln"))
            .current_dir(p)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("cannot write big.kiln") || err.contains("cannot copy big.npy to big.kiln"), "{err}");
        no_temporaries(p);
    }
}

/// The fsync system calls of one `kiln convert` run (under strace), or `None`
/// when strace is not installed.
fn fsyncs(dir: &Path, args: &[&str]) -> Option<usize> {
    if Command::new("strace").arg("-V").output().is_err() {
        eprintln!("!!!!!!!! SKIPPED the fsync count: strace is not installed");
        return None;
    }
    let log = dir.join("strace.txt");
    let status = Command::new("strace")
        .args(["-f", "-e", "trace=fsync,fdatasync", "-o"])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_kiln"))
        .arg("convert")
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "kiln convert {args:?} under strace");
    let text = std::fs::read_to_string(&log).unwrap();
    Some(text.lines().filter(|l| l.contains("fsync(") || l.contains("fdatasync(")).count())
}

#[test]
fn fsync_is_the_default_and_no_fsync_skips_it() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    small_npy(p, "m.npy");
    // Every spelling is accepted and writes the same bytes.
    convert(p, &["-q", "m.npy", "-o", "default.kiln"], 0);
    convert(p, &["-q", "--no-fsync", "m.npy", "-o", "nosync.kiln"], 0);
    convert(p, &["-q", "--fsync", "m.npy", "-o", "sync.kiln"], 0);
    let default = std::fs::read(p.join("default.kiln")).unwrap();
    assert_eq!(std::fs::read(p.join("nosync.kiln")).unwrap(), default);
    assert_eq!(std::fs::read(p.join("sync.kiln")).unwrap(), default);
    // --help documents the opt-out; the old opt-in flag is hidden.
    let help = stdout(&kiln(p, &["convert", "--help"]));
    assert!(help.contains("--no-fsync"), "{help}");
    assert!(!help.contains("  --fsync"), "{help}");
    // The default flushes OUT (and the sidecar with --to tensors); --no-fsync does not.
    let Some(default) = fsyncs(p, &["-q", "m.npy", "-o", "a.kiln"]) else { return };
    assert!(default >= 1, "no fsync by default");
    assert_eq!(fsyncs(p, &["-q", "--no-fsync", "m.npy", "-o", "b.kiln"]), Some(0));
    let tensors = fsyncs(p, &["-q", "--to", "tensors", "m.npy", "-o", "c.kiln"]).unwrap();
    assert!(tensors >= 2, "OUT and OUT.meta.json are both flushed ({tensors} fsyncs)");
}
