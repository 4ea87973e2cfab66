//! End-to-end tests of the `kiln` binary: exit codes, exact output lines,
//! and inspect's table and JSON, on files built with `kiln_nostd::Writer`.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use kiln_nostd::{DType, Quant, TensorRef, TensorSpec, Writer};
use predicates::prelude::*;
use serde_json::{json, Value};
use tempfile::TempDir;

/// 1.0f32, -2.0f32 as wire bytes.
const F32_PAIR: [u8; 8] = [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0];

fn kiln() -> Command {
    Command::cargo_bin("kiln").expect("the kiln binary is built")
}

fn encode(specs: &[TensorSpec<'_>]) -> Vec<u8> {
    let len = Writer::new().encoded_len(specs).expect("plannable");
    let mut out = vec![0u8; len];
    assert_eq!(Writer::new().write(specs, &mut out).expect("valid specs"), len);
    out
}

/// One unnamed f32 vector [1.0, -2.0]: the spec's 200-byte example block.
fn f32_vector() -> Vec<u8> {
    encode(&[TensorSpec::new(DType::F32, &[2], &F32_PAIR)])
}

/// A named, quantized set: `a` (u8, scheme 1) with `a.scale`, and `b`
/// (i8 [2, 32], scheme 2) with `b.outer` and `b.scale`.
fn quant_set() -> Vec<u8> {
    let a = [7u8; 64];
    let b = [1u8; 64];
    let one = 1.0f32.to_le_bytes();
    let scales4 = [F32_PAIR, F32_PAIR].concat();
    encode(&[
        TensorSpec::new(DType::U8, &[64], &a).named("a").quantized(Quant::Scales {
            axis: 0,
            group_size: 32,
            scale: TensorRef::Name("a.scale"),
        }),
        TensorSpec::new(DType::F32, &[2], &F32_PAIR).named("a.scale"),
        TensorSpec::new(DType::I8, &[2, 32], &b).named("b").quantized(Quant::ScalesOuter {
            axis: 1,
            group_size: 16,
            scale: TensorRef::Name("b.scale"),
            outer: TensorRef::Name("b.outer"),
        }),
        TensorSpec::new(DType::F32, &[], &one).named("b.outer"),
        TensorSpec::new(DType::F32, &[2, 2], &scales4).named("b.scale"),
    ])
}

/// One opaque tensor: code 4096, layout Q4_K, two 18-byte blocks.
fn opaque() -> Vec<u8> {
    encode(&[TensorSpec::opaque(4096, "Q4_K", 18, &[64], &[0u8; 36]).named("blk")])
}

/// Two f32 scalars named `a` and `b`, with `b` patched to `a` in the heap.
fn duplicate_names() -> Vec<u8> {
    let (x, y) = (1.0f32.to_le_bytes(), 2.0f32.to_le_bytes());
    let mut bytes =
        encode(&[TensorSpec::new(DType::F32, &[], &x).named("a"), TensorSpec::new(DType::F32, &[], &y).named("b")]);
    // Header 64 + two 128-byte descriptors: the heap "ab" starts at 320.
    assert_eq!(&bytes[320..322], b"ab");
    bytes[321] = b'a';
    bytes
}

struct Files {
    dir: TempDir,
}

impl Files {
    fn new() -> Self {
        Files { dir: tempfile::tempdir().expect("temp dir") }
    }

    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).expect("write test file");
        path
    }
}

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 temp path")
}

const DUP_MESSAGE: &str = "TYPE at byte 196: two tensors have the same name";

// ---------------------------------------------------------------- validate

#[test]
fn validate_accepts_a_valid_file() {
    let files = Files::new();
    let ok = files.write("ok.kiln", &f32_vector());
    kiln().args(["validate", s(&ok)]).assert().code(0).stdout(format!("{}: ok\n", s(&ok))).stderr("");
}

#[test]
fn validate_json_line_for_an_accepted_file() {
    let files = Files::new();
    let ok = files.write("ok.kiln", &quant_set());
    kiln()
        .args(["validate", "--json", s(&ok)])
        .assert()
        .code(0)
        .stdout(format!("{{\"file\":\"{}\",\"ok\":true}}\n", s(&ok)));
}

#[test]
fn validate_rejects_duplicate_names_with_exact_json() {
    let files = Files::new();
    let bad = files.write("dup.kiln", &duplicate_names());
    let expected = format!(
        "{{\"file\":\"{}\",\"ok\":false,\"error\":\"TYPE\",\"offset\":196,\"rule\":\"DuplicateName\",\"message\":\"{DUP_MESSAGE}\"}}\n",
        s(&bad)
    );
    kiln().args(["validate", "--json", s(&bad)]).assert().code(1).stdout(expected).stderr("");
}

#[test]
fn validate_rejects_duplicate_names_with_a_human_line() {
    let files = Files::new();
    let bad = files.write("dup.kiln", &duplicate_names());
    kiln().args(["validate", s(&bad)]).assert().code(1).stdout(format!("{}: {DUP_MESSAGE}\n", s(&bad)));
}

#[test]
fn validate_reports_every_file_in_order() {
    let files = Files::new();
    let ok = files.write("ok.kiln", &f32_vector());
    let bad = files.write("dup.kiln", &duplicate_names());
    let op = files.write("opaque.kiln", &opaque());
    kiln().args(["validate", s(&ok), s(&bad), s(&op)]).assert().code(1).stdout(format!(
        "{}: ok\n{}: {DUP_MESSAGE}\n{}: ok\n",
        s(&ok),
        s(&bad),
        s(&op)
    ));

    let out = kiln().args(["validate", "--json", s(&ok), s(&bad)]).output().expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0], json!({"file": s(&ok), "ok": true}));
    assert_eq!(lines[1]["rule"], "DuplicateName");
}

#[test]
fn validate_all_valid_files_exit_zero() {
    let files = Files::new();
    let a = files.write("a.kiln", &f32_vector());
    let b = files.write("b.kiln", &quant_set());
    let c = files.write("c.kiln", &opaque());
    let d = files.write("empty-dir.kiln", &kiln_nostd::EMPTY_BLOCK);
    kiln().args(["validate", s(&a), s(&b), s(&c), s(&d)]).assert().code(0);
}

#[test]
fn validate_trailing_byte_is_rejected() {
    let files = Files::new();
    let mut bytes = f32_vector();
    bytes.push(0);
    let bad = files.write("trailing.kiln", &bytes);
    kiln()
        .args(["validate", "--json", s(&bad)])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "\"error\":\"TRAILING\",\"offset\":200,\"rule\":\"TrailingBytes\",\"message\":\"TRAILING at byte 200: the buffer continues past the end of the value\"",
        ));
}

#[test]
fn validate_empty_file_is_eof() {
    let files = Files::new();
    let empty = files.write("empty.kiln", b"");
    kiln()
        .args(["validate", s(&empty)])
        .assert()
        .code(1)
        .stdout(format!("{}: EOF at byte 0: the buffer ends inside the 64-byte directory header\n", s(&empty)));
}

#[test]
fn validate_missing_file_exits_two_and_names_it() {
    let files = Files::new();
    let ok = files.write("ok.kiln", &f32_vector());
    let missing = files.dir.path().join("missing.kiln");
    kiln()
        .args(["validate", s(&missing), s(&ok)])
        .assert()
        .code(2)
        .stdout(format!("{}: ok\n", s(&ok)))
        .stderr(predicate::str::contains(s(&missing)).and(predicate::str::contains("cannot read")));
}

#[test]
fn validate_io_error_wins_over_rejection() {
    let files = Files::new();
    let bad = files.write("dup.kiln", &duplicate_names());
    let missing = files.dir.path().join("missing.kiln");
    kiln()
        .args(["validate", "--json", s(&bad), s(&missing)])
        .assert()
        .code(2)
        .stdout(predicate::str::contains("\"rule\":\"DuplicateName\""));
}

#[test]
fn validate_a_directory_is_an_io_error() {
    let files = Files::new();
    kiln().args(["validate", s(files.dir.path())]).assert().code(2).stdout("");
}

#[test]
fn validate_frozen_types_are_not_supported_yet() {
    let files = Files::new();
    let ok = files.write("ok.kiln", &f32_vector());
    kiln().args(["validate", "--type", "list<u8>", s(&ok)]).assert().code(2).stdout("").stderr(
        predicate::str::contains("Frozen values are not supported yet").and(predicate::str::contains("list<u8>")),
    );
    // The explicit default is fine.
    kiln().args(["validate", "--type", "tensors", s(&ok)]).assert().code(0);
}

#[test]
fn validate_frames_are_not_supported_yet() {
    let files = Files::new();
    let ok = files.write("ok.kiln", &f32_vector());
    kiln()
        .args(["validate", "--framed", s(&ok)])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("frames are not supported yet"));
}

#[test]
fn validate_count_cap_makes_a_file_limit() {
    let files = Files::new();
    let set = files.write("set.kiln", &quant_set()); // 5 tensors
    kiln()
        .args(["validate", "--json", "--count-cap", "4", s(&set)])
        .assert()
        .code(1)
        .stdout(format!(
            "{{\"file\":\"{}\",\"ok\":false,\"error\":\"LIMIT\",\"offset\":8,\"rule\":\"TensorCountCap\",\"message\":\"LIMIT at byte 8: tensor_count is above the count cap\"}}\n",
            s(&set)
        ));
    kiln().args(["validate", "--count-cap", "5", s(&set)]).assert().code(0);
}

#[test]
fn validate_byte_cap_makes_a_file_limit() {
    let files = Files::new();
    let set = files.write("set.kiln", &quant_set()); // names: a a.scale b b.outer b.scale = 23 bytes
    kiln()
        .args(["validate", "--byte-cap", "22", s(&set)])
        .assert()
        .code(1)
        .stdout(format!("{}: LIMIT at byte 12: name_bytes is above the byte cap\n", s(&set)));
    kiln().args(["validate", "--byte-cap", "23", s(&set)]).assert().code(0);
}

#[test]
fn validate_usage_errors_exit_two() {
    kiln().arg("validate").assert().code(2);
    kiln().args(["validate", "--count-cap", "-1", "x"]).assert().code(2);
    kiln().args(["validate", "--count-cap", "4294967296", "x"]).assert().code(2);
    kiln().args(["validate", "--bogus", "x"]).assert().code(2);
    kiln().assert().code(2);
}

// ----------------------------------------------------------------- inspect

#[test]
fn inspect_prints_the_header_and_table() {
    let files = Files::new();
    let set = files.write("set.kiln", &quant_set());
    let expected = format!(
        "\
file:            {}
tensors:         5
name heap bytes: 23
payload bytes:   272
block length:    1040
flags:           0x03 (names, little-endian)

index  name     dtype  shape    bytes  offset  quant                                            layout
0      a        u8     [64]     64     768     scales(axis=0,group=32,scale=#1)                 -
1      a.scale  f32    [2]      8      832     -                                                -
2      b        i8     [2, 32]  64     896     scales+outer(axis=1,group=16,scale=#4,outer=#3)  -
3      b.outer  f32    []       4      960     -                                                -
4      b.scale  f32    [2, 2]   16     1024    -                                                -
",
        s(&set)
    );
    kiln().args(["inspect", s(&set)]).assert().code(0).stdout(expected).stderr("");
}

#[test]
fn inspect_shows_opaque_dtype_and_layout() {
    let files = Files::new();
    let op = files.write("opaque.kiln", &opaque());
    kiln()
        .args(["inspect", s(&op)])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("0      blk   opaque:4096  [64]   36     256     -      Q4_K/18\n"));
}

#[test]
fn inspect_json_document() {
    let files = Files::new();
    let set = files.write("set.kiln", &quant_set());
    let out = kiln().args(["inspect", "--json", s(&set)]).output().expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["file"], s(&set));
    assert_eq!(doc["tensor_count"], 5);
    assert_eq!(doc["name_bytes"], 23);
    assert_eq!(doc["payload_bytes"], 272);
    assert_eq!(doc["block_length"], 1040);
    assert_eq!(doc["payload_start"], 768);
    assert_eq!(doc["flags"], 3);
    let tensors = doc["tensors"].as_array().expect("tensors array");
    assert_eq!(tensors.len(), 5);
    assert_eq!(
        tensors[0],
        json!({
            "index": 0, "name": "a", "dtype": "u8", "dtype_code": 9, "shape": [64], "element_count": 64,
            "byte_offset": 768, "byte_length": 64, "layout": null, "block_size": null,
            "quant": {"scheme": 1, "kind": "scales", "axis": 0, "group_size": 32, "scale": 1, "outer": null}
        })
    );
    assert_eq!(
        tensors[2]["quant"],
        json!({"scheme": 2, "kind": "scales+outer", "axis": 1, "group_size": 16, "scale": 4, "outer": 3})
    );
    assert_eq!(tensors[3]["shape"], json!([]));
    assert_eq!(tensors[3]["element_count"], 1);
    assert_eq!(tensors[3]["quant"], Value::Null);
}

#[test]
fn inspect_json_unnamed_and_opaque() {
    let files = Files::new();
    let vec = files.write("vec.kiln", &f32_vector());
    let doc: Value =
        serde_json::from_slice(&kiln().args(["inspect", "--json", s(&vec)]).output().expect("runs").stdout)
            .expect("JSON");
    assert_eq!(doc["tensors"][0]["name"], Value::Null);
    assert_eq!(doc["tensors"][0]["byte_offset"], 192);
    assert_eq!(doc["flags"], 2);

    let op = files.write("opaque.kiln", &opaque());
    let doc: Value = serde_json::from_slice(&kiln().args(["inspect", "--json", s(&op)]).output().expect("runs").stdout)
        .expect("JSON");
    let t = &doc["tensors"][0];
    assert_eq!((t["dtype"].clone(), t["dtype_code"].clone()), (json!("opaque"), json!(4096)));
    assert_eq!((t["layout"].clone(), t["block_size"].clone()), (json!("Q4_K"), json!(18)));
}

#[test]
fn inspect_empty_directory() {
    let files = Files::new();
    let empty = files.write("empty.kiln", &kiln_nostd::EMPTY_BLOCK);
    kiln().args(["inspect", s(&empty)]).assert().code(0).stdout(predicate::str::contains("tensors:         0\n"));
}

#[test]
fn inspect_invalid_file_reports_the_error() {
    let files = Files::new();
    let bad = files.write("dup.kiln", &duplicate_names());
    kiln()
        .args(["inspect", s(&bad)])
        .assert()
        .code(1)
        .stdout("")
        .stderr(format!("{}: {DUP_MESSAGE} (rule DuplicateName)\n", s(&bad)));
    kiln().args(["inspect", "--json", s(&bad)]).assert().code(1).stdout(format!(
        "{{\"file\":\"{}\",\"ok\":false,\"error\":\"TYPE\",\"offset\":196,\"rule\":\"DuplicateName\",\"message\":\"{DUP_MESSAGE}\"}}\n",
        s(&bad)
    ));
}

#[test]
fn inspect_missing_file_exits_two() {
    let files = Files::new();
    let missing = files.dir.path().join("missing.kiln");
    kiln().args(["inspect", s(&missing)]).assert().code(2).stderr(predicate::str::contains(s(&missing)));
}
