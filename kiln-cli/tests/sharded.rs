//! Sharded models and digests through the `kiln` binary (spec/model-file.md):
//! `kiln convert` writes a manifest and shards when the names do not fit one
//! block, `kiln validate` checks the whole model and names the shard at
//! fault, `kiln inspect` shows every tensor with its shard.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use kiln_model::{Kind, Manifest, Model};
use serde_json::Value;
use tempfile::TempDir;

fn kiln() -> Command {
    Command::cargo_bin("kiln").expect("the kiln binary is built")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A safetensors file of `n` f32 tensors with 200-byte names (more than 64 KiB
/// of names for n >= 330): each tensor holds its index.
fn many_tensors(path: &Path, n: usize) -> BTreeMap<String, Vec<u8>> {
    let mut tensors = BTreeMap::new();
    for i in 0..n {
        let name = format!("model.layers.{i:05}.mlp.experts.{}.weight", "e".repeat(173));
        let data: Vec<u8> = [i as f32, -(i as f32)].iter().flat_map(|f| f.to_le_bytes()).collect();
        tensors.insert(name, data);
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(k, v)| (k.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2], v).unwrap()))
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
    tensors
}

struct Sharded {
    dir: TempDir,
    manifest: PathBuf,
    tensors: BTreeMap<String, Vec<u8>>,
}

fn sharded() -> Sharded {
    let dir = TempDir::new().unwrap();
    let input = dir.path().join("in.safetensors");
    let tensors = many_tensors(&input, 500);
    let manifest = dir.path().join("m.kiln");
    kiln().args(["convert", "--no-fsync", "-q", s(&input), "-o", s(&manifest)]).assert().code(0);
    Sharded { dir, manifest, tensors }
}

fn shard_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("m-0"))
        .collect();
    v.sort();
    v
}

#[test]
fn names_past_one_block_make_a_sharded_model_that_round_trips() {
    let m = sharded();
    let shards = shard_files(m.dir.path());
    assert_eq!(shards.len(), 2, "{shards:?}");
    assert!(shards[0].ends_with("m-00001-of-00002.kiln") && shards[1].ends_with("m-00002-of-00002.kiln"));
    let bytes = std::fs::read(&m.manifest).unwrap();
    assert_eq!(Kind::of(&bytes), Some(Kind::Manifest));
    let mut scratch = vec![0u32; Manifest::scratch_len(500)];
    let manifest = Manifest::parse_with(&bytes, &kiln_nostd::Limits::DEFAULT, Some(&mut scratch)).unwrap();
    assert_eq!((manifest.shard_count(), manifest.tensor_count()), (2, 500));
    // Every tensor, bit for bit, from the shard the manifest names.
    let files: Vec<Vec<u8>> = shards.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let parsed: Vec<Model<'_>> = files
        .iter()
        .map(|f| {
            let mut names = vec![0u32; kiln_nostd::directory::scratch_len(500)];
            Model::parse_verified_with(f, kiln_nostd::Parser::new().scratch(&mut names)).unwrap()
        })
        .collect();
    let mut seen = 0;
    let mut next = [0usize; 2];
    for t in manifest.tensors() {
        let within = next[t.shard as usize - 1];
        next[t.shard as usize - 1] += 1;
        let shard = &parsed[t.shard as usize - 1];
        assert_eq!(shard.shard().unwrap().model, &manifest.model_id());
        let got = shard.directory().get(within).unwrap();
        assert_eq!((got.name(), got.bytes()), (Some(t.name), &m.tensors[t.name][..]), "{}", t.name);
        seen += 1;
    }
    assert_eq!(seen, m.tensors.len());
    let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(500)];
    kiln_model::check_all(&manifest, |e| files.get(e.index as usize - 1), true, Some(&mut scratch)).unwrap();
    // validate: the whole model.
    let out = kiln().args(["validate", s(&m.manifest)]).assert().code(0).get_output().stdout.clone();
    let line = String::from_utf8(out).unwrap();
    assert!(line.contains("ok (sharded model: 2 shards, 500 tensors, digests verified)"), "{line}");
    let out = kiln().args(["validate", "--json", s(&m.manifest)]).assert().code(0).get_output().stdout.clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!((v["ok"].as_bool(), v["kind"].as_str()), (Some(true), Some("manifest")));
    assert_eq!(v["shards"].as_array().unwrap().len(), 2);
    assert_eq!(v["shards"][1]["file"], "m-00002-of-00002.kiln");
    // A shard alone says which model and position it is.
    let out = kiln().args(["validate", s(&shards[1])]).assert().code(0).get_output().stdout.clone();
    let id = hex::encode(&manifest.model_id()[..8]);
    assert!(String::from_utf8(out).unwrap().contains(&format!("ok (shard 2 of 2 of model {id}, digests verified)")));
    // inspect: every tensor with its shard, from the manifest alone.
    let out = kiln().args(["inspect", "--json", s(&m.manifest)]).assert().code(0).get_output().stdout.clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["tensors"].as_array().unwrap().len(), 500);
    assert_eq!(v["tensors"][499]["shard"], 2);
    assert_eq!(v["tensors"][499]["shard_file"], "m-00002-of-00002.kiln");
    let text = kiln().args(["inspect", s(&m.manifest)]).assert().code(0).get_output().stdout.clone();
    assert!(String::from_utf8(text).unwrap().contains("sharded model (manifest)"));
}

/// `kiln validate` of the manifest: exit 1 and the line.
fn rejected(manifest: &Path) -> (String, Value) {
    let out = kiln().args(["validate", s(manifest)]).assert().code(1).get_output().stdout.clone();
    let json = kiln().args(["validate", "--json", s(manifest)]).assert().code(1).get_output().stdout.clone();
    (String::from_utf8(out).unwrap(), serde_json::from_slice(&json).unwrap())
}

#[test]
fn tampering_is_rejected_with_the_shard_named() {
    let m = sharded();
    let shards = shard_files(m.dir.path());
    let original: Vec<Vec<u8>> = shards.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let restore = || {
        for (p, b) in shards.iter().zip(&original) {
            std::fs::write(p, b).unwrap();
        }
    };
    // One flipped payload byte that passes every structural rule.
    let shard = Model::parse(&original[1]).unwrap();
    let t = shard.directory().get(3).unwrap();
    let mut bad = original[1].clone();
    bad[t.absolute_offset()] ^= 1;
    std::fs::write(&shards[1], &bad).unwrap();
    let (line, v) = rejected(&m.manifest);
    assert!(
        line.contains(&format!(
            "DIGEST at byte {} of m-00002-of-00002.kiln (tensor {}",
            t.absolute_offset(),
            t.name().unwrap()
        )),
        "{line}"
    );
    assert_eq!((v["error"].as_str(), v["shard_file"].as_str()), (Some("DIGEST"), Some("m-00002-of-00002.kiln")));
    assert_eq!(v["offset"].as_u64(), Some(t.absolute_offset() as u64));
    assert_eq!(v["shards"][0]["ok"], true);
    assert_eq!(v["shards"][1]["rule"], "PayloadDigest");
    // --no-verify-digests does not hash: the structure still holds.
    kiln().args(["validate", "--no-verify-digests", s(&m.manifest)]).assert().code(0);
    restore();
    // A missing shard.
    std::fs::remove_file(&shards[0]).unwrap();
    let (line, v) = rejected(&m.manifest);
    assert!(line.contains("SHARD at byte 0 of m-00001-of-00002.kiln"), "{line}");
    assert_eq!(v["rule"], "ShardMissing");
    restore();
    // A shard cut by one byte.
    std::fs::write(&shards[1], &original[1][..original[1].len() - 1]).unwrap();
    let (_, v) = rejected(&m.manifest);
    assert_eq!((v["rule"].as_str(), v["shard_file"].as_str()), (Some("ShardLength"), Some("m-00002-of-00002.kiln")));
    restore();
    // Two shards swapped: a shard at the wrong position (its length differs first, or its index).
    std::fs::write(&shards[0], &original[1]).unwrap();
    std::fs::write(&shards[1], &original[0]).unwrap();
    let (_, v) = rejected(&m.manifest);
    assert_eq!(v["error"], "SHARD");
    assert_eq!(v["shard_file"], "m-00001-of-00002.kiln");
    assert!(["ShardLength", "ShardIndex"].contains(&v["rule"].as_str().unwrap()), "{v}");
    restore();
    // A shard of another model: the same layout converted from other values.
    let other_dir = TempDir::new().unwrap();
    let other_in = other_dir.path().join("in.safetensors");
    let mut other = m.tensors.clone();
    other.values_mut().next().unwrap()[0] ^= 1;
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = other
        .iter()
        .map(|(k, v)| (k.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2], v).unwrap()))
        .collect();
    std::fs::write(&other_in, safetensors::serialize(views, None).unwrap()).unwrap();
    let other_m = other_dir.path().join("m.kiln");
    kiln().args(["convert", "--no-fsync", "-q", s(&other_in), "-o", s(&other_m)]).assert().code(0);
    std::fs::copy(other_dir.path().join("m-00002-of-00002.kiln"), &shards[1]).unwrap();
    let (_, v) = rejected(&m.manifest);
    assert_eq!((v["rule"].as_str(), v["shard_file"].as_str()), (Some("ShardModel"), Some("m-00002-of-00002.kiln")));
    restore();
    kiln().args(["validate", s(&m.manifest)]).assert().code(0);
}

#[test]
fn a_symlinked_shard_outside_the_folder_is_not_opened() {
    let m = sharded();
    let shards = shard_files(m.dir.path());
    let elsewhere = TempDir::new().unwrap();
    let moved = elsewhere.path().join("m-00001-of-00002.kiln");
    std::fs::rename(&shards[0], &moved).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&moved, &shards[0]).unwrap();
        let (_, v) = rejected(&m.manifest);
        assert_eq!(
            (v["rule"].as_str(), v["shard_file"].as_str()),
            (Some("ShardMissing"), Some("m-00001-of-00002.kiln"))
        );
        // A link that stays inside the folder is followed.
        std::fs::remove_file(&shards[0]).unwrap();
        let inside = m.dir.path().join("kept.bin");
        std::fs::rename(&moved, &inside).unwrap();
        std::os::unix::fs::symlink("kept.bin", &shards[0]).unwrap();
        kiln().args(["validate", s(&m.manifest)]).assert().code(0);
    }
}

#[test]
fn a_smaller_model_is_one_digests_file_and_a_flipped_byte_is_caught() {
    let dir = TempDir::new().unwrap();
    let input = dir.path().join("in.safetensors");
    many_tensors(&input, 10);
    let out = dir.path().join("one.kiln");
    kiln().args(["convert", "--no-fsync", "-q", s(&input), "-o", s(&out)]).assert().code(0);
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(Kind::of(&bytes), Some(Kind::Digests));
    let m = Model::parse_verified(&bytes).unwrap();
    let t = m.directory().get(4).unwrap();
    let mut bad = bytes.clone();
    bad[t.absolute_offset()] ^= 1;
    std::fs::write(&out, &bad).unwrap();
    let line = kiln().args(["validate", s(&out)]).assert().code(1).get_output().stdout.clone();
    let line = String::from_utf8(line).unwrap();
    assert!(
        line.contains(&format!("DIGEST at byte {} (tensor {} (index 4))", t.absolute_offset(), t.name().unwrap())),
        "{line}"
    );
    kiln().args(["validate", "--no-verify-digests", s(&out)]).assert().code(0);
}
