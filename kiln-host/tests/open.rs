//! `kiln_host::open` on the files a user meets: a good model file, a
//! truncated one, a flipped payload byte (found only when digests are
//! compared), a sharded model whole and with a shard missing, renamed,
//! symlinked out of its folder or changed; each error names its shard and
//! tensor.

use std::path::{Path, PathBuf};

use kiln_host::{open, open_with, Error, Found, Options};
use kiln_model::{write_sharded, Kind, ModelWriter};
use kiln_model::{AnyRule, Rule};
use kiln_nostd::{DType, ErrorCode, TensorSpec};

const A: [u8; 16] = [1; 16];
const B: [u8; 8] = [2; 8];
const C: [u8; 4] = [3; 4];

fn specs() -> Vec<TensorSpec<'static>> {
    vec![
        TensorSpec::new(DType::F32, &[4], &A).named("a"),
        TensorSpec::new(DType::F32, &[2], &B).named("b"),
        TensorSpec::new(DType::F32, &[1], &C).named("c"),
    ]
}

/// A model file with digests of a, b, c; the payload of `b` starts at the returned offset.
fn model_file() -> (Vec<u8>, usize) {
    let w = ModelWriter::new().align(64).digests(true);
    let meta = [("author", "me")];
    let mut out = vec![0u8; w.encoded_len(&meta, &specs()).unwrap()];
    w.write(&meta, &specs(), &mut out).unwrap();
    let at = kiln_model::Model::parse(&out).unwrap().directory().find("b").unwrap().absolute_offset();
    (out, at)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A sharded model in `dir`: m.kiln and two shards (a, b | c).
fn sharded(dir: &Path) -> PathBuf {
    let s = specs();
    let shards = [("m-00001-of-00002.kiln", &s[..2]), ("m-00002-of-00002.kiln", &s[2..])];
    let files = write_sharded(&[("author", "me")], &shards, 64).unwrap();
    for (name, bytes) in &files.shards {
        write(dir, name, bytes);
    }
    write(dir, "m.kiln", &files.manifest)
}

fn fault(e: &Error) -> (ErrorCode, AnyRule, Option<&str>, Option<&str>) {
    let f = e.fault().unwrap_or_else(|| panic!("not a Kiln fault: {e}"));
    (f.error.code(), f.error.rule(), f.file.as_deref(), f.tensor.as_ref().and_then(|t| t.name.as_deref()))
}

#[test]
fn a_good_model_file_opens_and_reads_tensors_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "m.kiln", &model_file().0);
    let m = open(&path).unwrap();
    assert_eq!(m.found(), Found::ModelFile(Kind::Digests));
    assert!(!m.digests_verified(), "a map reads no payload: no digests by default (ruling 6)");
    assert_eq!(m.tensor("b").unwrap().bytes(), B);
    assert_eq!(m.tensor("a").unwrap().shape(), [4]);
    assert_eq!(m.metadata().unwrap(), [("author", "me")]);
    assert_eq!(m.tensors().unwrap().len(), 3);
    assert!(matches!(m.tensor("z"), Err(Error::NoTensor(n)) if n == "z"));
    let m = open_with(&path, &Options::new().verify_digests(true)).unwrap();
    assert!(m.digests_verified());
}

#[test]
fn a_truncated_file_is_refused_with_its_rule() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = model_file().0;
    let path = write(dir.path(), "m.kiln", &bytes[..bytes.len() - 3]);
    let e = open(&path).unwrap_err();
    let (code, _, file, tensor) = fault(&e);
    assert_eq!((code, file, tensor), (ErrorCode::Eof, None, None), "{e}");
    assert!(e.to_string().starts_with(&format!("{}: EOF at byte ", path.display())), "{e}");
}

#[test]
fn a_flipped_payload_byte_is_found_by_digests_and_names_its_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, at) = model_file();
    bytes[at] ^= 1;
    let path = write(dir.path(), "m.kiln", &bytes);
    // Every rule but step 9d holds: a map without digests accepts it (ruling 6).
    assert!(open(&path).is_ok());
    let e = open_with(&path, &Options::new().verify_digests(true)).unwrap_err();
    assert_eq!(fault(&e), (ErrorCode::Digest, AnyRule::Core(kiln_nostd::Rule::PayloadDigest), None, Some("b")), "{e}");
    assert!(
        e.to_string().ends_with(&format!(
            "DIGEST at byte {at} (tensor b (index 1)): {}",
            kiln_nostd::Rule::PayloadDigest.description()
        )),
        "{e}"
    );
}

#[test]
fn a_sharded_model_opens_every_shard() {
    let dir = tempfile::tempdir().unwrap();
    let path = sharded(dir.path());
    let m = open(&path).unwrap();
    assert_eq!(m.found(), Found::Manifest);
    assert_eq!(m.shards().collect::<Vec<_>>(), ["m-00001-of-00002.kiln", "m-00002-of-00002.kiln"]);
    assert_eq!(m.tensor("c").unwrap().bytes(), C);
    assert_eq!(m.tensor("b").unwrap().bytes(), B);
    assert_eq!(m.metadata().unwrap(), [("author", "me")]);
    let names: Vec<_> = m.tensors().unwrap().iter().map(|t| t.name().unwrap().to_owned()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert!(open_with(&path, &Options::new().verify_digests(true)).unwrap().digests_verified());
}

#[test]
fn a_missing_or_renamed_shard_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = sharded(dir.path());
    let second = dir.path().join("m-00002-of-00002.kiln");
    std::fs::rename(&second, dir.path().join("renamed.kiln")).unwrap();
    let e = open(&path).unwrap_err();
    assert_eq!(
        fault(&e),
        (ErrorCode::Shard, AnyRule::Model(Rule::ShardMissing), Some("m-00002-of-00002.kiln"), None),
        "{e}"
    );
    std::fs::remove_file(dir.path().join("renamed.kiln")).unwrap();
    let e = open(&path).unwrap_err();
    assert_eq!(fault(&e).1, Rule::ShardMissing);
}

#[cfg(unix)]
#[test]
fn a_shard_linked_out_of_its_folder_is_missing_and_one_linked_inside_opens() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("model");
    std::fs::create_dir(&folder).unwrap();
    let path = sharded(&folder);
    let first = folder.join("m-00001-of-00002.kiln");
    let outside = dir.path().join("elsewhere.kiln");
    std::fs::rename(&first, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &first).unwrap();
    let e = open(&path).unwrap_err();
    assert_eq!(
        fault(&e),
        (ErrorCode::Shard, AnyRule::Model(Rule::ShardMissing), Some("m-00001-of-00002.kiln"), None),
        "{e}"
    );
    // The same bytes through a link that stays in the folder: followed.
    std::fs::remove_file(&first).unwrap();
    std::fs::rename(&outside, folder.join("real.kiln")).unwrap();
    std::os::unix::fs::symlink("real.kiln", &first).unwrap();
    assert_eq!(open(&path).unwrap().tensor("a").unwrap().bytes(), A);
}

#[test]
fn a_changed_shard_names_shard_and_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let path = sharded(dir.path());
    let first = dir.path().join("m-00001-of-00002.kiln");
    let mut bytes = std::fs::read(&first).unwrap();
    let at = kiln_model::Model::parse(&bytes).unwrap().directory().find("b").unwrap().absolute_offset();
    bytes[at] ^= 1;
    std::fs::write(&first, &bytes).unwrap();
    assert!(open(&path).is_ok(), "no digests by default: the flipped byte breaks no other rule");
    let e = open_with(&path, &Options::new().verify_digests(true)).unwrap_err();
    assert_eq!(
        fault(&e),
        (ErrorCode::Digest, AnyRule::Core(kiln_nostd::Rule::PayloadDigest), Some("m-00001-of-00002.kiln"), Some("b")),
        "{e}"
    );
    assert!(e.to_string().contains(&format!("at byte {at} of m-00001-of-00002.kiln (tensor b (index 1)): ")), "{e}");
    // Truncated: its length is not the manifest's.
    std::fs::write(&first, &bytes[..bytes.len() - 1]).unwrap();
    let e = open(&path).unwrap_err();
    assert_eq!(
        fault(&e),
        (ErrorCode::Shard, AnyRule::Model(Rule::ShardLength), Some("m-00001-of-00002.kiln"), None),
        "{e}"
    );
}

#[test]
fn a_plain_directory_opens_and_a_foreign_file_names_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let s = specs();
    let w = kiln_nostd::Writer::new();
    let mut block = vec![0u8; w.encoded_len(&s).unwrap()];
    w.write(&s, &mut block).unwrap();
    let m = open(write(dir.path(), "d.kiln", &block)).unwrap();
    assert_eq!(m.found(), Found::Directory);
    assert_eq!(m.tensor("c").unwrap().bytes(), C);
    assert!(m.metadata().unwrap().is_empty());
    let mut st = 2u64.to_le_bytes().to_vec();
    st.extend_from_slice(b"{}");
    let path = write(dir.path(), "w.safetensors", &st);
    match open(&path) {
        Err(Error::Foreign { format: "safetensors", message, .. }) => {
            assert!(
                message.ends_with(&format!(
                    "convert it with `kiln convert {} -o {}`",
                    path.display(),
                    path.with_extension("kiln").display()
                )),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    let e = open(dir.path().join("absent.kiln")).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
}
