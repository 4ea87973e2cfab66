//! The front door, `kiln_model::open`: every form the writers produce is
//! found and checked with the verdict of its own reader, hashing only when
//! asked (ruling 6), and `Directory::parse` on a model file keeps its
//! verdict while its message names `kiln_model::open`.

use ed25519_dalek::{Signer, SigningKey};
use kiln_model::signed::sign_model;
use kiln_model::{open, write_sharded, Kind, Model, ModelWriter, Opened, Options, Rule, Trust};
use kiln_nostd::{DType, Directory, ErrorCode, Limits, Parser, Rule as CoreRule, TensorSpec, Writer};

const A: [u8; 8] = [0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0];
const B: [u8; 3] = [1, 0, 1];

fn specs() -> Vec<TensorSpec<'static>> {
    vec![TensorSpec::new(DType::F32, &[2], &A).named("w"), TensorSpec::new(DType::Bool, &[3], &B).named("b")]
}

fn block() -> Vec<u8> {
    let mut out = vec![0u8; Writer::new().encoded_len(&specs()).unwrap()];
    Writer::new().write(&specs(), &mut out).unwrap();
    out
}

fn model_file(digests: bool) -> Vec<u8> {
    let w = ModelWriter::new().digests(digests);
    let meta = [("author", "kiln")];
    let mut out = vec![0u8; w.encoded_len(&meta, &specs()).unwrap()];
    w.write(&meta, &specs(), &mut out).unwrap();
    out
}

fn key() -> SigningKey {
    SigningKey::from_bytes(&[7; 32])
}

fn signed_file() -> Vec<u8> {
    let k = key();
    sign_model(&model_file(true), &k.verifying_key().to_bytes(), 3, "test", |m| k.sign(m).to_bytes()).unwrap()
}

/// The byte offset of tensor `w`'s first payload byte in `file`.
fn w_at(file: &[u8]) -> usize {
    Model::parse(file).unwrap().directory().find("w").unwrap().absolute_offset()
}

#[test]
fn each_form_is_found_and_named() {
    let b = block();
    let found = open(&b, &mut Options::new()).unwrap();
    assert!(matches!(found, Opened::Directory(d) if d.len() == 2));
    assert_eq!((found.kind(), found.name()), (None, "directory"));

    let plain = model_file(false);
    let found = open(&plain, &mut Options::new()).unwrap();
    assert_eq!((found.kind(), found.name()), (Some(Kind::Plain), "plain"));
    assert!(matches!(found, Opened::Model(m) if m.metadata().get("author") == Some("kiln")));

    let digests = model_file(true);
    assert_eq!(open(&digests, &mut Options::new()).unwrap().kind(), Some(Kind::Digests));

    let signed = signed_file();
    assert_eq!(open(&signed, &mut Options::new()).unwrap().kind(), Some(Kind::Signed));

    let files = write_sharded(&[("author", "kiln")], &[("m-00001-of-00001.kiln", &specs())], 64).unwrap();
    let found = open(&files.manifest, &mut Options::new()).unwrap();
    assert!(matches!(found, Opened::Manifest(m) if m.shard_count() == 1));
    assert_eq!((found.name(), found.directory().map(|d| d.len())), ("manifest", None));
    let shard = &files.shards[0].1;
    assert_eq!(open(shard, &mut Options::new()).unwrap().kind(), Some(Kind::Shard));
}

/// Ruling 6: a view over bytes in memory hashes nothing unless asked; one
/// flag turns step 9d on, with `Model::parse_verified`'s verdict.
#[test]
fn digests_are_checked_only_when_asked() {
    let mut f = model_file(true);
    let at = w_at(&f);
    f[at] ^= 1;
    assert!(open(&f, &mut Options::new()).is_ok());
    assert!(!Options::new().hashes() && Options::new().verify_digests(true).hashes());
    let e = open(&f, &mut Options::new().verify_digests(true)).unwrap_err();
    assert_eq!((e.code(), e.rule(), e.offset()), (ErrorCode::Digest, CoreRule::PayloadDigest.into(), at));
    assert_eq!(Some(e), Model::parse_verified(&f).err());
}

#[test]
fn each_reader_s_verdict_stands() {
    // A truncated model file: the model reader's verdict.
    let f = model_file(true);
    let cut = &f[..f.len() - 1];
    assert_eq!(open(cut, &mut Options::new()).err(), Model::parse(cut).err());
    // A block with a trailing byte: the directory reader's.
    let mut b = block();
    b.push(0);
    assert_eq!(open(&b, &mut Options::new()).unwrap_err(), Directory::parse(&b).unwrap_err());
    // Caps and scratch apply to every form.
    let tight = Limits::DEFAULT.with_count_cap(1);
    let e = open(&f, &mut Options::new().parser(Parser::new().limits(tight))).unwrap_err();
    assert_eq!(e.rule(), CoreRule::TensorCountCap);
    let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(2)];
    assert!(open(&f, &mut Options::new().parser(Parser::new().scratch(&mut scratch).hash_seed(9))).is_ok());
    // Something else entirely: the directory reader's FRAME at byte 0.
    let e = open(b"GGUF and more bytes", &mut Options::new()).unwrap_err();
    assert_eq!((e.code(), e.rule(), e.offset()), (ErrorCode::Frame, CoreRule::DirectoryMagic.into(), 0));
}

#[test]
fn a_required_signature_is_checked_and_unsigned_input_refused() {
    let public = key().verifying_key().to_bytes();
    let trust = Trust::new(&public).unwrap();
    let signed = signed_file();
    let found = open(&signed, &mut Options::new().trust(trust)).unwrap();
    assert_eq!(found.kind(), Some(Kind::Signed));
    assert!(Options::new().trust(trust).hashes());
    // An unsigned model file is NotSigned; a plain block is not a signed record's frame at all.
    let e = open(&model_file(true), &mut Options::new().trust(trust)).unwrap_err();
    assert_eq!((e.code(), e.rule()), (ErrorCode::Signature, Rule::NotSigned.into()));
    let b = block();
    let e = open(&b, &mut Options::new().trust(trust)).unwrap_err();
    assert_eq!(Some(e), Model::parse_trusted(&b, &trust).err());
    assert_eq!((e.code(), e.offset()), (ErrorCode::Frame, 0));
    let mut flipped = signed.clone();
    let at = w_at(&flipped);
    flipped[at] ^= 1;
    let e = open(&flipped, &mut Options::new().trust(trust)).unwrap_err();
    assert_eq!(Some(e), Model::parse_trusted(&flipped, &trust).err());
    assert_eq!(e.rule(), CoreRule::PayloadDigest);
}

/// `Directory::parse` on what `kiln convert` writes: the same verdict as
/// before (FRAME at byte 0, `DirectoryMagic`), and the message names the
/// call that opens it.
#[test]
fn the_directory_reader_points_a_model_file_to_open() {
    let f = model_file(false);
    let e = Directory::parse(&f).unwrap_err();
    assert_eq!((e.code(), e.rule(), e.offset()), (ErrorCode::Frame, CoreRule::DirectoryMagic, 0));
    assert_eq!(e, kiln_nostd::Error::new(CoreRule::DirectoryMagic, 0));
    assert_eq!(
        e.to_string(),
        "FRAME at byte 0: the directory magic is not KLNT (a Kiln model file starts with KLN0: open it with \
         kiln_model::open)"
    );
    // The hint comes from the rule alone (the checks carry nothing for it); other rules have none.
    assert_eq!(Directory::parse(b"GGUF and more bytes").unwrap_err().hint(), e.hint());
    let cut = kiln_nostd::Error::new(CoreRule::HeaderTruncated, 4);
    assert_eq!(
        (cut.hint(), cut.to_string()),
        (None, "EOF at byte 4: the buffer ends inside the 64-byte directory header".into())
    );
}

/// The block of kiln-nostd/README.md that opens what `kiln convert` writes
/// (the core's README runs as the core's doctest, which cannot name this
/// crate): its lines, run here on the same example, and found in the README.
#[test]
fn the_core_readme_block_runs() -> Result<(), Box<dyn std::error::Error>> {
    use kiln_model::{open, Options};
    let block = [
        "let bytes = std::fs::read(\"spec/examples/digits-mlp.model.kiln\")?;",
        "let found = open(&bytes, &mut Options::new())?;",
        "assert_eq!(found.directory().map(|d| d.len()), Some(8));",
        "let err = kiln_nostd::Directory::parse(&bytes).unwrap_err();",
        "assert!(err.to_string().contains(\"kiln_model::open\"));",
    ];
    let readme = include_str!("../../kiln-nostd/README.md");
    for line in block {
        assert!(readme.lines().any(|l| l.starts_with(line)), "kiln-nostd/README.md lost: {line}");
    }
    // The README's path is from the repository's root; this test runs in the crate's folder.
    let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/digits-mlp.model.kiln"))?;
    let found = open(&bytes, &mut Options::new())?;
    assert_eq!(found.directory().map(|d| d.len()), Some(8));
    let err = kiln_nostd::Directory::parse(&bytes).unwrap_err();
    assert!(err.to_string().contains("kiln_model::open"));
    Ok(())
}
