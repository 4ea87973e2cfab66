//! End-to-end tests of the `kiln` binary: exit codes, exact output lines,
//! and inspect's table and JSON, on files built with `kiln_nostd::Writer`.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use kiln_nostd::{
    writer::{QuantSpec, TensorRef},
    DType, TensorSpec, Writer,
};
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
        TensorSpec::new(DType::U8, &[64], &a).named("a").quantized(QuantSpec::Scales {
            axis: 0,
            group_size: 32,
            scale: TensorRef::Name("a.scale"),
        }),
        TensorSpec::new(DType::F32, &[2], &F32_PAIR).named("a.scale"),
        TensorSpec::new(DType::I8, &[2, 32], &b).named("b").quantized(QuantSpec::ScalesOuter {
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
    let d = files.write("empty-dir.kiln", &kiln_nostd::wire::EMPTY_BLOCK);
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

// ------------------------------------------------------- Frozen values

/// A little-endian u32 count or length word.
fn word(n: u32) -> Vec<u8> {
    n.to_le_bytes().to_vec()
}

/// A `str` (or `list<u8>`): length word, then the bytes.
fn kstr(bytes: &[u8]) -> Vec<u8> {
    [word(bytes.len() as u32), bytes.to_vec()].concat()
}

/// The 16-byte frame for canonical type text `ty`.
fn frame(ty: &str) -> Vec<u8> {
    kiln_nostd::frozen::frame_bytes(kiln_nostd::frozen::hash_text(ty)).to_vec()
}

/// `kiln validate --json --type TY [extra] FILE` on `bytes`: (exit code, the JSON line).
fn validate_value(ty: &str, extra: &[&str], bytes: &[u8]) -> (i32, Value) {
    let files = Files::new();
    let path = files.write("v.kiln", bytes);
    let out = kiln().args(["validate", "--json", "--type", ty]).args(extra).arg(&path).output().expect("runs");
    let line: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{ty}: {e}: {:?}", out));
    assert_eq!(line["file"], s(&path));
    (out.status.code().expect("exit code"), line)
}

fn accepted(ty: &str, extra: &[&str], bytes: &[u8]) {
    let (code, line) = validate_value(ty, extra, bytes);
    assert_eq!((code, line["ok"].clone()), (0, json!(true)), "{ty}: {line}");
}

/// Asserts a rejection with this code, offset and rule.
fn rejected(ty: &str, extra: &[&str], bytes: &[u8], want: (&str, u64, &str)) {
    let (code, line) = validate_value(ty, extra, bytes);
    assert_eq!(code, 1, "{ty}: {line}");
    assert_eq!(line["ok"], false);
    assert_eq!(
        (line["error"].as_str().unwrap(), line["offset"].as_u64().unwrap(), line["rule"].as_str().unwrap()),
        want,
        "{ty}: {line}"
    );
}

const RECORD: &str = "struct{id:u32,name:str,tags:dict<str,i32>,note:opt<str>,scores:list<f32>,}";

/// A RECORD value: id 7, name "kiln", tags {a: 1, b: -2}, note absent, scores [1.0, -2.0].
fn record() -> Vec<u8> {
    [
        word(7),
        kstr(b"kiln"),
        word(2),
        kstr(b"a"),
        1i32.to_le_bytes().to_vec(),
        kstr(b"b"),
        (-2i32).to_le_bytes().to_vec(),
        vec![0],
        word(2),
        F32_PAIR.to_vec(),
    ]
    .concat()
}

#[test]
fn validate_frozen_lists_accepted_and_rejected() {
    let pair = [word(2), F32_PAIR.to_vec()].concat();
    accepted("list<f32>", &[], &pair);
    rejected("list<f32>", &[], &pair[..8], ("EOF", 0, "CountPastEnd"));
    rejected("list<f32>", &[], &[pair.clone(), vec![0]].concat(), ("TRAILING", 12, "TrailingBytes"));
    // Three strings claimed, one length present.
    rejected("list<str>", &[], &[word(3), word(0)].concat(), ("EOF", 0, "CountPastEnd"));
    accepted("list<str>", &[], &[word(2), kstr(b"a"), kstr(b"")].concat());
    rejected("list<str>", &[], &[word(1), kstr(&[0xff])].concat(), ("UTF8", 8, "StrUtf8"));
    accepted("list<bool>", &[], &[word(2), vec![0, 1]].concat());
    rejected("list<bool>", &[], &[word(2), vec![0, 2]].concat(), ("TYPE", 5, "BoolValue"));
    // Caps: list<u8> is a byte run (byte cap); other lists use the count cap.
    let bytes5 = kstr(b"hello");
    accepted("list<u8>", &["--byte-cap", "5"], &bytes5);
    rejected("list<u8>", &["--byte-cap", "4"], &bytes5, ("LIMIT", 0, "ByteLengthCap"));
    rejected("list<f32>", &["--count-cap", "1"], &pair, ("LIMIT", 0, "CountCap"));
    accepted("list<f32>", &["--count-cap", "2"], &pair);
}

#[test]
fn validate_frozen_structs_dicts_and_opts() {
    accepted(RECORD, &[], &record());
    rejected(RECORD, &[], &record()[..record().len() - 1], ("EOF", 35, "CountPastEnd"));
    // Dict keys out of order: b before a.
    let mut swapped = record();
    swapped[20] = b'b';
    swapped[29] = b'a';
    rejected(RECORD, &[], &swapped, ("TYPE", 25, "DictKeyOrder"));
    // Duplicate keys are out of order too.
    let dup = [word(2), kstr(b"k"), vec![1], kstr(b"k"), vec![2]].concat();
    rejected("dict<str,u8>", &[], &dup, ("TYPE", 10, "DictKeyOrder"));
    accepted("dict<str,u8>", &[], &word(0));
    // opt: absent, present, bad tag.
    accepted("opt<str>", &[], &[0]);
    accepted("opt<str>", &[], &[vec![1], kstr(b"x")].concat());
    rejected("opt<str>", &[], &[2], ("TYPE", 0, "OptTag"));
    rejected("opt<str>", &[], &[], ("EOF", 0, "ValueTruncated"));
    // struct{} is zero bytes; a scalar is its width.
    accepted("struct{}", &[], &[]);
    rejected("struct{}", &[], &[0], ("TRAILING", 0, "TrailingBytes"));
    accepted("i64", &[], &(-1i64).to_le_bytes());
    rejected("u16", &[], &[1], ("EOF", 0, "ValueTruncated"));
    // A tensors field inside a struct: the directory rules apply at absolute offsets.
    let mut in_struct = [7i64.to_le_bytes().to_vec(), f32_vector()].concat();
    accepted("struct{id:i64,batch:tensors,}", &[], &in_struct);
    in_struct[8 + 4] = 1; // directory version
    rejected("struct{id:i64,batch:tensors,}", &[], &in_struct, ("FRAME", 12, "DirectoryVersion"));
}

#[test]
fn validate_framed_checks_the_frame_and_the_schema_hash() {
    let framed = [frame(RECORD), record()].concat();
    accepted(RECORD, &["--framed"], &framed);
    // The hash of another type: SCHEMA before any field is read.
    let other = [frame("struct{id:u32,}"), record()].concat();
    rejected(RECORD, &["--framed"], &other, ("SCHEMA", 8, "SchemaHash"));
    let mut magic = framed.clone();
    magic[0] = b'X';
    rejected(RECORD, &["--framed"], &magic, ("FRAME", 0, "FrameMagic"));
    rejected(RECORD, &["--framed"], &framed[..10], ("EOF", 0, "FrameTruncated"));
    // Unframed bytes given --framed, and framed bytes given no --framed.
    rejected(RECORD, &["--framed"], &record(), ("FRAME", 0, "FrameMagic"));
    assert_eq!(validate_value(RECORD, &[], &framed).0, 1);
    // --type tensors --framed is a framed directory value; without --framed, a standalone block.
    let dir = [frame("tensors"), f32_vector()].concat();
    accepted("tensors", &["--framed"], &dir);
    rejected("tensors", &[], &dir, ("FRAME", 0, "DirectoryMagic"));
    rejected("tensors", &["--framed"], &f32_vector(), ("FRAME", 0, "FrameMagic"));
}

#[test]
fn validate_bad_type_exits_two_before_reading_files() {
    let files = Files::new();
    let ok = files.write("ok.kiln", &f32_vector());
    let missing = files.dir.path().join("missing.kiln");
    kiln().args(["validate", "--type", "list<u8", s(&ok), s(&missing)]).assert().code(2).stdout("").stderr(
        "kiln: invalid --type \"list<u8\": TYPE at byte 7 of the type text: the type text is not canonical Kiln type text (rule TypeTextSyntax)\n",
    );
    let deep = format!("{}u8{}", "opt<".repeat(65), ">".repeat(65));
    kiln().args(["validate", "--json", "--framed", "--type", &deep, s(&ok)]).assert().code(2).stdout("").stderr(
        predicate::str::contains(
            "LIMIT at byte 256 of the type text: the type nests more than 64 containers (rule TypeDepth)",
        ),
    );
    let depth_64 = format!("{}u8{}", "opt<".repeat(64), ">".repeat(64));
    let ok64 = files.write("ok64.kiln", &[0]);
    kiln().args(["validate", "--type", &depth_64, s(&ok64)]).assert().code(0);
    kiln()
        .args(["validate", "--type", "struct{a:u8,a:u8,}", s(&ok)])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("TYPE at byte 12").and(predicate::str::contains("DuplicateField")));
    kiln().args(["validate", "--type", "struct{ a:u8,}", s(&ok)]).assert().code(2);
}

const SCHEMA_JSON: &str = r#"{
  "title": "record",
  "type": "object",
  "properties": {
    "id": {"type": "integer", "format": "uint32"},
    "name": {"type": "string"},
    "tags": {"type": "object", "additionalProperties": {"type": "integer", "format": "int32"}},
    "note": {"type": "string"},
    "scores": {"type": "array", "items": {"type": "number", "format": "float"}}
  },
  "required": ["id", "name", "tags", "scores"]
}"#;

#[test]
fn validate_and_decode_take_a_json_schema_type() {
    let files = Files::new();
    let schema = files.write("record.schema.json", SCHEMA_JSON.as_bytes());
    let at = format!("@{}", s(&schema));
    let value = files.write("r.kiln", &record());
    let framed = files.write("rf.kiln", &[frame(RECORD), record()].concat());
    kiln().args(["validate", "--type", &at, s(&value)]).assert().code(0);
    kiln().args(["validate", "--framed", "--type", &at, s(&framed)]).assert().code(0);
    kiln().args(["decode", "--framed", "--type", &at, s(&framed)]).assert().code(0);
    let bad = files.write("bad.json", br#"{"type": "object", "properties": {"x": {"anyOf": []}}}"#);
    kiln()
        .args(["validate", "--type", &format!("@{}", s(&bad)), s(&value)])
        .assert()
        .code(2)
        .stdout("")
        .stderr(format!("kiln: invalid --type @{}: /properties/x: \"anyOf\" is not supported\n", s(&bad)));
    kiln()
        .args(["validate", "--type", &format!("@{}", s(&files.dir.path().join("nope.json"))), s(&value)])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read it"));
}

// ------------------------------------------------------------------ decode

fn decode_json(args: &[&str], bytes: &[u8]) -> Value {
    let files = Files::new();
    let path = files.write("d.kiln", bytes);
    let out = kiln().arg("decode").args(args).arg(&path).output().expect("runs");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.is_empty());
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

#[test]
fn decode_prints_the_value_as_json() {
    let files = Files::new();
    let path = files.write("r.kiln", &record());
    let out = kiln().args(["decode", "--type", RECORD, s(&path)]).output().expect("runs");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\n  \"id\": 7,\n  \"name\": \"kiln\",\n  \"tags\": {\n    \"a\": 1,\n    \"b\": -2\n  },\n  \"note\": null,\n  \"scores\": [1.0, -2.0]\n}\n"
    );
    kiln()
        .args(["decode", "--compact", "--type", RECORD, s(&path)])
        .assert()
        .code(0)
        .stdout("{\"id\":7,\"name\":\"kiln\",\"tags\":{\"a\":1,\"b\":-2},\"note\":null,\"scores\":[1.0,-2.0]}\n");
    // Framed, and from a JSON Schema type: the same document.
    let framed = [frame(RECORD), record()].concat();
    assert_eq!(
        decode_json(&["--framed", "--type", RECORD], &framed),
        json!({"id": 7, "name": "kiln", "tags": {"a": 1, "b": -2}, "note": null, "scores": [1.0, -2.0]})
    );
}

#[test]
fn decode_numbers_bytes_and_keys() {
    let ty = "struct{big:i64,small:i64,u:uint,nan:f64,inf:f32,neg:f32,z:f32,raw:list<u8>,keys:dict<str,bool>,}";
    let bytes = [
        (-(1i64 << 53)).to_le_bytes().to_vec(),
        ((1i64 << 53) - 1).to_le_bytes().to_vec(),
        u64::MAX.to_le_bytes().to_vec(),
        f64::from_bits(0x7FF8_0000_0000_0001).to_le_bytes().to_vec(),
        f32::INFINITY.to_le_bytes().to_vec(),
        f32::NEG_INFINITY.to_le_bytes().to_vec(),
        (-0.0f32).to_le_bytes().to_vec(),
        kstr(&[0, 0xab, 0xff]),
        word(2),
        kstr(b"Z"),
        vec![1],
        kstr(b"a"),
        vec![0],
    ]
    .concat();
    let files = Files::new();
    let path = files.write("n.kiln", &bytes);
    kiln().args(["decode", "--compact", "--type", ty, s(&path)]).assert().code(0).stdout(
        "{\"big\":\"-9007199254740992\",\"small\":9007199254740991,\"u\":\"18446744073709551615\",\"nan\":\"NaN\",\"inf\":\"Infinity\",\"neg\":\"-Infinity\",\"z\":-0.0,\"raw\":\"00abff\",\"keys\":{\"Z\":true,\"a\":false}}\n",
    );
}

#[test]
fn decode_tensors_print_the_inspect_table() {
    let table = decode_json(&[], &quant_set());
    let files = Files::new();
    let set = files.write("set.kiln", &quant_set());
    let inspect: Value =
        serde_json::from_slice(&kiln().args(["inspect", "--json", s(&set)]).output().expect("runs").stdout).unwrap();
    assert_eq!(table, inspect["tensors"]);
    // Inside a framed struct: offsets are absolute in the file.
    let ty = "struct{id:i64,batch:tensors,}";
    let framed = [frame(ty), 7i64.to_le_bytes().to_vec(), f32_vector()].concat();
    let doc = decode_json(&["--framed", "--type", ty], &framed);
    assert_eq!(doc["id"], 7);
    assert_eq!(doc["batch"][0]["dtype"], "f32");
    assert_eq!(doc["batch"][0]["byte_offset"], 16 + 8 + 192);
    assert_eq!(
        decode_json(
            &["--type", "tensors", "--framed"],
            &[frame("tensors"), kiln_nostd::wire::EMPTY_BLOCK.to_vec()].concat()
        ),
        json!([])
    );
}

#[test]
fn decode_invalid_input_exits_one_with_the_error() {
    let files = Files::new();
    let short = files.write("short.kiln", &record()[..20]);
    kiln().args(["decode", "--type", RECORD, s(&short)]).assert().code(1).stdout("").stderr(format!(
        "{}: EOF at byte 12: count * minimum element size is more than the unread bytes (rule CountPastEnd)\n",
        s(&short)
    ));
    let framed = files.write("f.kiln", &[frame("struct{}"), record()].concat());
    kiln()
        .args(["decode", "--framed", "--type", RECORD, s(&framed)])
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains("SCHEMA at byte 8").and(predicate::str::contains("rule SchemaHash")));
    kiln().args(["decode", "--type", "list<", s(&short)]).assert().code(2).stdout("");
    kiln().args(["decode", "--type", RECORD, s(&files.dir.path().join("missing"))]).assert().code(2);
    kiln()
        .args([
            "decode",
            "--count-cap",
            "1",
            "--type",
            "list<f32>",
            s(&files.write("p", &[word(2), F32_PAIR.to_vec()].concat())),
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("LIMIT at byte 0"));
}

// --------------------------------------------------- schema-to-type, gen-rust

#[test]
fn schema_to_type_prints_the_text_and_hash() {
    let files = Files::new();
    let schema = files.write("record.schema.json", SCHEMA_JSON.as_bytes());
    let hash = kiln_nostd::frozen::hash_text(RECORD);
    kiln()
        .args(["schema-to-type", s(&schema)])
        .assert()
        .code(0)
        .stdout(format!("{RECORD}\n0x{hash:016x}\n"))
        .stderr("");
    let out = kiln().args(["schema-to-type", "--json", s(&schema)]).output().expect("runs");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc, json!({"type": RECORD, "hash": format!("0x{hash:016x}")}));
    let bad = files.write(
        "bad.json",
        br#"{"type": "array", "items": {"type": "object", "properties": {"t": {"type": "string", "enum": ["a"]}}}}"#,
    );
    kiln()
        .args(["schema-to-type", s(&bad)])
        .assert()
        .code(1)
        .stdout("")
        .stderr(format!("kiln: {}: /items/properties/t: \"enum\" is not supported\n", s(&bad)));
    let warn = files.write("w.json", br#"{"type": "string", "maxLength": 4}"#);
    kiln()
        .args(["schema-to-type", s(&warn)])
        .assert()
        .code(0)
        .stdout(predicate::str::starts_with("str\n"))
        .stderr(predicate::str::contains("\"maxLength\" is ignored"));
    kiln().args(["schema-to-type", s(&files.dir.path().join("missing.json"))]).assert().code(2);
}

#[test]
fn gen_rust_prints_derived_structs() {
    let files = Files::new();
    let schema = files.write("record.schema.json", SCHEMA_JSON.as_bytes());
    let out = kiln().args(["gen-rust", s(&schema)]).output().expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let code = String::from_utf8(out.stdout).unwrap();
    assert!(code.contains(&format!("// Type text:   {RECORD}\n")), "{code}");
    assert!(code.contains("#[derive(Debug, Clone, Copy, Kiln)]\npub struct Record<'a> {\n    pub id: u32,\n    pub name: &'a str,\n    pub tags: DictView<'a, i32>,\n    pub note: Option<&'a str>,\n    pub scores: ListView<'a, f32>,\n}\n"), "{code}");
    let owned = kiln().args(["gen-rust", "--owned", "--name", "Rec", s(&schema)]).output().expect("runs");
    let code = String::from_utf8(owned.stdout).unwrap();
    assert!(code.contains("pub struct Rec {\n    pub id: u32,\n    pub name: String,\n    pub tags: BTreeMap<String, i32>,\n    pub note: Option<String>,\n    pub scores: Vec<f32>,\n}\n"), "{code}");
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
    let empty = files.write("empty.kiln", &kiln_nostd::wire::EMPTY_BLOCK);
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

// ---------------------------------------------------------------- model files

/// A model file (spec/model-file.md) with a padding key and one more key.
fn model_file() -> Vec<u8> {
    let specs = [TensorSpec::new(DType::F32, &[2], &F32_PAIR).named("w")];
    let meta = [("author", "kiln")];
    let w = kiln_model::ModelWriter::new().align(4096);
    let mut out = vec![0u8; w.encoded_len(&meta, &specs).expect("plannable")];
    w.write(&meta, &specs, &mut out).expect("valid");
    out
}

#[test]
fn model_files_validate_and_inspect_without_a_type() {
    let files = Files::new();
    let m = files.write("m.kiln", &model_file());
    // The record type is named (a plain record has no digests to verify).
    let plain = r#""ok":true,"kind":"plain","digests_verified":false}"#;
    kiln().args(["validate", "--json", s(&m)]).assert().code(0).stdout(format!("{{\"file\":\"{}\",{plain}\n", s(&m)));
    kiln()
        .args(["validate", s(&m)])
        .assert()
        .code(0)
        .stdout(format!("{}: ok (model file, 1 tensors, no digests)\n", s(&m)));
    // The same bytes from standard input.
    kiln()
        .args(["validate", "--json", "-"])
        .write_stdin(model_file())
        .assert()
        .code(0)
        .stdout(format!("{{\"file\":\"-\",{plain}\n"));
    // An explicit --type keeps its meaning: a model file is not a bare directory.
    kiln()
        .args(["validate", "--type", "tensors", "--json", s(&m)])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("\"error\":\"FRAME\",\"offset\":0,\"rule\":\"DirectoryMagic\""));
    kiln()
        .args(["validate", "--type", "struct{metadata:dict<str,str>,tensors:tensors,}", "--framed", s(&m)])
        .assert()
        .code(0);
    // inspect shows the metadata, never the padding key.
    let out = kiln().args(["inspect", s(&m)]).assert().code(0).get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("metadata (1 entries):\n  author = kiln\n"), "{text}");
    assert!(!text.contains("kiln.convert.pad"), "{text}");
    let out = kiln().args(["inspect", "--json", s(&m)]).assert().code(0).get_output().stdout.clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["metadata"], json!([["author", "kiln"]]));
    assert_eq!(v["tensors"][0]["name"], "w");
    assert_eq!(v["payload_start"].as_u64().unwrap() % 4096, 0);
    // A plain directory's inspect JSON has no metadata key.
    let d = files.write("d.kiln", &f32_vector());
    let out = kiln().args(["inspect", "--json", s(&d)]).assert().code(0).get_output().stdout.clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert!(v.get("metadata").is_none());
}

#[test]
fn a_damaged_model_file_gets_the_frozen_readers_verdict() {
    let files = Files::new();
    let mut bytes = model_file();
    let n = bytes.len();
    bytes.push(0);
    let m = files.write("m.kiln", &bytes);
    kiln()
        .args(["validate", "--json", s(&m)])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(format!("\"error\":\"TRAILING\",\"offset\":{n}")));
}

/// `kiln validate --json FILE` without flags gives `kiln_model::parse_any`'s
/// verdict (code, offset, rule) on the goldens and on mutated model files: the
/// verdict `kiln_validate` of the C API and the npm and Python loaders give.
#[test]
fn validate_without_flags_is_parse_any() {
    let files = Files::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let goldens: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("spec/kiln-v2-cases.json")).unwrap()).unwrap();
    let mut inputs: Vec<Vec<u8>> =
        goldens["cases"].as_array().unwrap().iter().map(|c| hex::decode(c["hex"].as_str().unwrap()).unwrap()).collect();
    let model = model_file();
    for at in (0..model.len()).step_by(29) {
        let mut m = model.clone();
        m[at] ^= 0x5a;
        inputs.push(m);
    }
    inputs.push(model[..model.len() - 1].to_vec());
    let paths: Vec<PathBuf> = inputs.iter().enumerate().map(|(i, b)| files.write(&format!("in{i}.kiln"), b)).collect();
    let mut args = vec!["validate".to_string(), "--json".to_string()];
    args.extend(paths.iter().map(|p| s(p).to_string()));
    let out = kiln().args(&args).assert().get_output().stdout.clone();
    let lines: Vec<Value> = String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), inputs.len());
    for (bytes, line) in inputs.iter().zip(&lines) {
        match kiln_model::parse_any(bytes) {
            Ok(_) => assert_eq!(line["ok"], true, "{line}"),
            Err(e) => {
                assert_eq!(line["error"], e.code().as_str(), "{line}");
                assert_eq!(line["offset"], e.offset(), "{line}");
                assert_eq!(line["rule"], e.rule().id(), "{line}");
            }
        }
    }
}
