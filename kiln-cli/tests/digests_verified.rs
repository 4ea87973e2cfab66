//! `kiln validate --json`'s `"digests_verified"` is true only when every digest
//! the model carries was hashed and matched: never for a rejected file (one
//! cut short, one with a flipped payload byte, a sharded model with a bad
//! shard), never with `--no-verify-digests`, never for a plain record.
//! Issue 42 found it true on a truncated file.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use kiln_model::{Kind, Model, ModelWriter};
use kiln_nostd::{DType, TensorSpec};
use serde_json::Value;
use tempfile::TempDir;

fn kiln() -> Command {
    Command::cargo_bin("kiln").expect("the kiln binary is built")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A digests record of three f32 tensors (payloads at 64-byte offsets).
fn digests_file() -> Vec<u8> {
    let a: Vec<u8> = (0..16).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let b: Vec<u8> = (0..32).flat_map(|i| (-(i as f32)).to_le_bytes()).collect();
    let c: Vec<u8> = (0..8).flat_map(|i| (0.5 * i as f32).to_le_bytes()).collect();
    let specs = [
        TensorSpec::new(DType::F32, &[16], &a).named("a"),
        TensorSpec::new(DType::F32, &[4, 8], &b).named("b"),
        TensorSpec::new(DType::F32, &[8], &c).named("c"),
    ];
    let w = ModelWriter::new().digests(true);
    let mut out = vec![0u8; w.encoded_len(&[], &specs).expect("plannable")];
    w.write(&[], &specs, &mut out).expect("valid");
    assert_eq!(Kind::of(&out), Some(Kind::Digests));
    out
}

/// `kiln validate --json [extra] PATH`: exit code and the one JSON object.
fn validate(path: &Path, extra: &[&str]) -> (i32, Value) {
    let out = kiln().arg("validate").arg("--json").args(extra).arg(s(path)).output().expect("runs");
    let line = String::from_utf8(out.stdout).expect("UTF-8");
    (out.status.code().expect("exit code"), serde_json::from_str(line.trim_end()).expect("one JSON object"))
}

fn write(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("written");
    path
}

#[test]
fn a_good_file_has_its_digests_verified_and_only_when_asked() {
    let dir = TempDir::new().unwrap();
    let good = write(&dir, "good.kiln", &digests_file());
    let (code, v) = validate(&good, &[]);
    assert_eq!(
        (code, &v["ok"], &v["kind"], &v["digests_verified"]),
        (0, &Value::Bool(true), &"digests".into(), &Value::Bool(true)),
        "{v}"
    );
    let (code, v) = validate(&good, &["--no-verify-digests"]);
    assert_eq!((code, &v["digests_verified"]), (0, &Value::Bool(false)), "{v}");
}

#[test]
fn a_truncated_file_does_not_claim_verified_digests() {
    let dir = TempDir::new().unwrap();
    let bytes = digests_file();
    let m = Model::parse_verified(&bytes).expect("valid");
    let last = m.directory().get(2).expect("three tensors");
    // Cut inside the last payload, one byte short, and inside the directory block.
    let cuts = [last.absolute_offset() + 4, bytes.len() - 1, m.directory().start() + 100];
    for (i, cut) in cuts.into_iter().enumerate() {
        let path = write(&dir, &format!("cut{i}.kiln"), &bytes[..cut]);
        let (code, v) = validate(&path, &[]);
        assert_eq!(code, 1, "cut at {cut}: {v}");
        assert_eq!((&v["ok"], &v["error"]), (&Value::Bool(false), &"EOF".into()), "cut at {cut}: {v}");
        assert_eq!(v["digests_verified"], false, "cut at {cut}: {v}");
        // The same bytes from standard input take the same path.
        let out = kiln().args(["validate", "--json", "-"]).write_stdin(&bytes[..cut]).output().expect("runs");
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(
            (&v["error"], &v["digests_verified"]),
            (&"EOF".into(), &Value::Bool(false)),
            "stdin, cut at {cut}: {v}"
        );
    }
}

#[test]
fn a_flipped_payload_byte_does_not_claim_verified_digests() {
    let dir = TempDir::new().unwrap();
    let mut bytes = digests_file();
    let at = Model::parse(&bytes).expect("valid").directory().get(1).expect("b").absolute_offset() + 5;
    bytes[at] ^= 1;
    let path = write(&dir, "flipped.kiln", &bytes);
    let (code, v) = validate(&path, &[]);
    assert_eq!((code, &v["error"], &v["rule"]), (1, &"DIGEST".into(), &"PayloadDigest".into()), "{v}");
    assert_eq!(v["digests_verified"], false, "{v}");
    // Unhashed, the structure holds: accepted, and not verified either.
    let (code, v) = validate(&path, &["--no-verify-digests"]);
    assert_eq!((code, &v["digests_verified"]), (0, &Value::Bool(false)), "{v}");
    // `kiln inspect` reads the directory only, unless asked to hash (file and stdin alike).
    kiln().args(["inspect", s(&path)]).assert().code(0);
    for json in [false, true] {
        let flags: &[&str] = if json { &["--verify-digests", "--json"] } else { &["--verify-digests"] };
        let out = kiln().arg("inspect").args(flags).arg(s(&path)).output().expect("runs");
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let told = String::from_utf8_lossy(if json { &out.stdout } else { &out.stderr }).into_owned();
        // DIGEST at the tensor's first payload byte (five before the flipped one).
        assert!(told.contains("DIGEST") && told.contains(&format!("{}", at - 5)), "{told}");
        let out = kiln().arg("inspect").args(flags).arg("-").write_stdin(bytes.clone()).output().expect("runs");
        assert_eq!(out.status.code(), Some(1), "stdin: {out:?}");
    }
    let good = write(&dir, "good.kiln", &digests_file());
    kiln().args(["inspect", "--verify-digests", s(&good)]).assert().code(0);
}

#[test]
fn a_sharded_model_with_a_bad_shard_does_not_claim_verified_digests() {
    let dir = TempDir::new().unwrap();
    let input = dir.path().join("in.safetensors");
    let data: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i; 256]).collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = data
        .iter()
        .enumerate()
        .map(|(i, d)| {
            (format!("t{i}"), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![64], d).unwrap())
        })
        .collect();
    std::fs::write(&input, safetensors::serialize(views, None).unwrap()).unwrap();
    let manifest = dir.path().join("m.kiln");
    kiln()
        .args(["convert", "--no-fsync", "-q", "--max-shard-size", "300", s(&input), "-o", s(&manifest)])
        .assert()
        .code(0);
    let (code, v) = validate(&manifest, &[]);
    assert_eq!((code, &v["kind"], &v["digests_verified"]), (0, &"manifest".into(), &Value::Bool(true)), "{v}");
    let shard = dir.path().join("m-00002-of-00004.kiln");
    let original = std::fs::read(&shard).unwrap();
    // A shard cut short, then one with a flipped payload byte.
    std::fs::write(&shard, &original[..original.len() - 1]).unwrap();
    let (code, v) = validate(&manifest, &[]);
    assert_eq!(
        (code, &v["shard_file"], &v["digests_verified"]),
        (1, &"m-00002-of-00004.kiln".into(), &Value::Bool(false)),
        "{v}"
    );
    let mut flipped = original.clone();
    let at = Model::parse(&original).unwrap().directory().get(0).unwrap().absolute_offset();
    flipped[at] ^= 1;
    std::fs::write(&shard, &flipped).unwrap();
    let (code, v) = validate(&manifest, &[]);
    assert_eq!((code, &v["error"], &v["digests_verified"]), (1, &"DIGEST".into(), &Value::Bool(false)), "{v}");
    // `kiln inspect` shows the manifest without opening a shard, unless asked to hash:
    // then the bad shard is named as `kiln validate` names it.
    kiln().args(["inspect", s(&manifest)]).assert().code(0);
    let out = kiln().args(["inspect", "--verify-digests", "--json", s(&manifest)]).output().expect("runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        (out.status.code(), &v["error"], &v["shard_file"]),
        (Some(1), &"DIGEST".into(), &"m-00002-of-00004.kiln".into()),
        "{v}"
    );
    std::fs::write(&shard, &original).unwrap();
    kiln().args(["inspect", "--verify-digests", s(&manifest)]).assert().code(0);
}
