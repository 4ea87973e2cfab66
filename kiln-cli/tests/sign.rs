//! `kiln sign`, `kiln verify` and `kiln delta` end to end, with Ed25519 keys
//! made by `openssl genpkey -algorithm ed25519`, and the signature checked by
//! OpenSSL itself over the message spec/model-file.md defines.

use std::path::{Path, PathBuf};
use std::process::Command as Std;

use assert_cmd::Command;
use predicates::prelude::*;
use tempfile::TempDir;

fn kiln() -> Command {
    Command::cargo_bin("kiln").expect("the kiln binary is built")
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/examples").join(name)
}

fn openssl(args: &[&str]) -> std::process::Output {
    let out = Std::new("openssl").args(args).output().expect("openssl runs (scripts/setup.sh installs it)");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// A key pair as OpenSSL writes it: (key.pem, pub.pem).
fn keys(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (key, public) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.pub.pem")));
    openssl(&["genpkey", "-algorithm", "ed25519", "-out", key.to_str().unwrap()]);
    openssl(&["pkey", "-in", key.to_str().unwrap(), "-pubout", "-out", public.to_str().unwrap()]);
    (key, public)
}

fn sign(key: &Path, input: &Path, out: &Path, version: &str, target: &str) {
    kiln()
        .args(["sign", "--key"])
        .arg(key)
        .args(["--version", version, "--target", target])
        .arg(input)
        .arg("-o")
        .arg(out)
        .assert()
        .success()
        .stderr(predicate::str::contains(format!("release {version} for {target}")));
}

fn verify(public: &Path, file: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    kiln().args(["verify", "--pubkey"]).arg(public).args(extra).arg(file).assert()
}

#[test]
fn sign_then_verify_with_openssl_keys_and_every_changed_byte_fails() {
    let dir = TempDir::new().unwrap();
    let (key, public) = keys(dir.path(), "a");
    let (_, other) = keys(dir.path(), "b");
    let signed = dir.path().join("signed.kiln");
    sign(&key, &example("digits-mlp.model.kiln"), &signed, "3", "board-a");
    let name = signed.display().to_string();
    verify(&public, &signed, &[]).success().stdout(format!(
        "{name}: ok (signed model, 8 tensors, release 3 for board-a, key {}, signature and digests verified)\n",
        raw_key(&public)
    ));
    verify(&public, &signed, &["--target", "board-a", "--newer-than", "2"]).success();
    verify(&other, &signed, &[])
        .code(1)
        .stdout(predicate::str::contains("SIGNATURE at byte 20: the model is signed by another key"));
    verify(&public, &signed, &["--target", "board-b"]).code(1).stdout(predicate::str::contains("for another target"));
    verify(&public, &signed, &["--newer-than", "3"]).code(1).stdout(predicate::str::contains("not newer"));
    // Unsigned: refused.
    verify(&public, &example("digits-mlp.model.kiln"), &[])
        .code(1)
        .stdout(predicate::str::contains("SIGNATURE at byte 8"));
    // `kiln validate` reads it and says who signed it, not that the signature was checked.
    kiln().arg("validate").arg(&signed).assert().success().stdout(predicate::str::contains(format!(
        "ok (signed model, 8 tensors, digests verified, release 3 for board-a, signed by key {}; signature not checked",
        raw_key(&public)
    )));
    // A changed byte anywhere: every 61st byte, and the last one.
    let bytes = std::fs::read(&signed).unwrap();
    let flipped = dir.path().join("flipped.kiln");
    let mut at: Vec<usize> = (0..bytes.len()).step_by(61).collect();
    at.push(bytes.len() - 1);
    for i in at {
        let mut b = bytes.clone();
        b[i] ^= 0x10;
        std::fs::write(&flipped, &b).unwrap();
        verify(&public, &flipped, &[]).code(1);
    }
}

/// The 32 raw bytes of an SPKI PEM public key, in hex (its DER's last 32 bytes).
fn raw_key(public: &Path) -> String {
    let der = openssl(&["pkey", "-pubin", "-in", public.to_str().unwrap(), "-outform", "DER"]).stdout;
    hex::encode(&der[der.len() - 32..])
}

#[test]
fn openssl_verifies_the_signature_over_the_specs_message() {
    let dir = TempDir::new().unwrap();
    let (key, public) = keys(dir.path(), "a");
    let signed = dir.path().join("signed.kiln");
    // A plain record without digests: `sign` computes them.
    sign(&key, &example("small/f32-vector.model.kiln"), &signed, "1", "t");
    let bytes = std::fs::read(&signed).unwrap();
    let m = kiln_model::Model::parse(&bytes).unwrap();
    assert!(m.digests().is_some());
    let payload_start = m.payload_start();
    let msg = [&bytes[..56], &bytes[120..payload_start]].concat();
    let (msg_path, sig_path) = (dir.path().join("msg"), dir.path().join("sig"));
    std::fs::write(&msg_path, &msg).unwrap();
    std::fs::write(&sig_path, &bytes[56..120]).unwrap();
    let out = openssl(&[
        "pkeyutl",
        "-verify",
        "-pubin",
        "-inkey",
        public.to_str().unwrap(),
        "-rawin",
        "-in",
        msg_path.to_str().unwrap(),
        "-sigfile",
        sig_path.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Signature Verified Successfully"));
    // And a signature OpenSSL makes over that message is one `kiln verify` accepts.
    let other_sig =
        openssl(&["pkeyutl", "-sign", "-inkey", key.to_str().unwrap(), "-rawin", "-in", msg_path.to_str().unwrap()])
            .stdout;
    let mut resigned = bytes.clone();
    resigned[56..120].copy_from_slice(&other_sig);
    std::fs::write(&signed, &resigned).unwrap();
    verify(&public, &signed, &[]).success();
}

#[test]
fn delta_sends_only_the_changed_tensors_and_rebuilds_new() {
    let dir = TempDir::new().unwrap();
    let (key, _) = keys(dir.path(), "a");
    let old = dir.path().join("old.kiln");
    let new = dir.path().join("new.kiln");
    kiln()
        .args(["sign", "--key"])
        .arg(&key)
        .args(["--version", "1", "--target", "t", "--align", "1"])
        .arg(example("digits-mlp.model.kiln"))
        .arg("-o")
        .arg(&old)
        .assert()
        .success();
    kiln()
        .args(["sign", "--key"])
        .arg(&key)
        .args(["--version", "2", "--target", "t", "--align", "1"])
        .arg(example("digits-mlp.model.kiln"))
        .arg("-o")
        .arg(&new)
        .assert()
        .success();
    let update = dir.path().join("update.kiln");
    kiln()
        .arg("delta")
        .arg(&old)
        .arg(&new)
        .arg("-o")
        .arg(&update)
        .assert()
        .success()
        .stderr(predicate::str::contains("bytes for the"));
    let (o, n, d) = (std::fs::read(&old).unwrap(), std::fs::read(&new).unwrap(), std::fs::read(&update).unwrap());
    assert_eq!(kiln_model::delta::apply(&o, &d).unwrap(), n);
    // Same tensors, another release: only the head and NEW's prefix travel.
    let head = kiln_model::delta::DeltaHead::parse(&d).unwrap();
    assert_eq!(d.len(), head.len() + kiln_model::Model::parse(&n).unwrap().payload_start());
    // An unsigned NEW is refused.
    kiln().arg("delta").arg(&old).arg(example("digits-mlp.model.kiln")).arg("-o").arg(&update).assert().code(1);
}

#[test]
fn a_sharded_model_is_signed_through_its_manifest() {
    use kiln_nostd::{DType, TensorSpec};
    let dir = TempDir::new().unwrap();
    let (key, public) = keys(dir.path(), "a");
    let (x, y) = ([1u8; 8], [2u8; 16]);
    let one = [TensorSpec::new(DType::F32, &[2], &x).named("x")];
    let two = [TensorSpec::new(DType::F32, &[4], &y).named("y")];
    let files = kiln_model::write_sharded(&[], &[("m-00001-of-00002.kiln", &one), ("m-00002-of-00002.kiln", &two)], 64)
        .unwrap();
    std::fs::write(dir.path().join("m.kiln"), &files.manifest).unwrap();
    for (name, bytes) in &files.shards {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let signed = dir.path().join("m.signed.kiln");
    sign(&key, &dir.path().join("m.kiln"), &signed, "2", "edge");
    verify(&public, &signed, &[])
        .success()
        .stdout(predicate::str::contains("ok (signed sharded model, 2 tensors, release 2 for edge"));
    kiln().arg("validate").arg(&signed).assert().success().stdout(predicate::str::contains("signature not checked"));
    // A shard changed after signing: the manifest's digests catch it.
    let shard = dir.path().join("m-00002-of-00002.kiln");
    let mut b = std::fs::read(&shard).unwrap();
    let last = b.len() - 1;
    b[last] ^= 1;
    std::fs::write(&shard, &b).unwrap();
    verify(&public, &signed, &[]).code(1).stdout(predicate::str::contains("DIGEST"));
    // The unsigned manifest is refused.
    verify(&public, &dir.path().join("m.kiln"), &[]).code(1).stdout(predicate::str::contains("SIGNATURE at byte 8"));
}
