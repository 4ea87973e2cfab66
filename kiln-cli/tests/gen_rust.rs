//! `kiln gen-rust` output compiles and round-trips a value.
//!
//! Runs `kiln gen-rust` (borrowed and --owned) on fixtures/gen_rust.schema.json,
//! writes the modules into a temporary cargo project next to
//! fixtures/gen_rust_main.rs (path dependency on kiln-nostd with features
//! derive and alloc), and runs it offline with the target directory
//! `gen-rust-test` inside the build's own (`CARGO_TARGET_DIR` when it is an
//! absolute path, else `<workspace>/target`), so compiled dependencies are
//! reused between runs, and between clones that share a target directory. The program encodes, decodes and re-encodes a value, and
//! writes it framed; `kiln validate` and `kiln decode` then read that file
//! with `--type @schema.json`.

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use assert_cmd::Command;
use serde_json::{json, Value};

fn kiln() -> Command {
    Command::cargo_bin("kiln").expect("the kiln binary is built")
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn stdout_of(args: &[&str]) -> String {
    let out = kiln().args(args).output().expect("kiln runs");
    assert_eq!(out.status.code(), Some(0), "kiln {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

#[test]
fn generated_structs_compile_and_round_trip() {
    let fixtures = manifest_dir().join("tests/fixtures");
    let schema = fixtures.join("gen_rust.schema.json");
    let schema_arg = schema.to_str().expect("utf-8 path");
    let workspace = manifest_dir().parent().expect("workspace root").to_path_buf();

    let borrowed = stdout_of(&["gen-rust", schema_arg]);
    let owned = stdout_of(&["gen-rust", "--owned", schema_arg]);
    let type_and_hash = stdout_of(&["schema-to-type", schema_arg]);
    let mut lines = type_and_hash.lines();
    let (text, hash) = (lines.next().expect("type text"), lines.next().expect("hash"));

    let project = tempfile::tempdir().expect("temp dir");
    let root = project.path();
    std::fs::create_dir(root.join("src")).expect("src dir");
    let nostd = workspace.join("kiln-nostd");
    write(
        &root.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"gen-rust-roundtrip\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
             [dependencies]\nkiln-nostd = {{ path = {:?}, features = [\"derive\", \"alloc\"] }}\n\n[workspace]\n",
            nostd.to_str().expect("utf-8 path")
        ),
    );
    // The workspace's lock file pins the same dependency versions offline.
    std::fs::copy(workspace.join("Cargo.lock"), root.join("Cargo.lock")).expect("copy Cargo.lock");
    std::fs::copy(fixtures.join("gen_rust_main.rs"), root.join("src/main.rs")).expect("copy main.rs");
    write(&root.join("src/borrowed.rs"), &borrowed);
    write(&root.join("src/owned.rs"), &owned);

    let value_file = root.join("value.kiln");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Process::new(cargo)
        .args(["run", "--offline", "--quiet", "--"])
        .args([text, hash, value_file.to_str().expect("utf-8 path")])
        .current_dir(root)
        .env("CARGO_TARGET_DIR", target_dir(&workspace).join("gen-rust-test"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "the generated code failed to build or run:\n{}\n{}\n--- borrowed.rs\n{borrowed}\n--- owned.rs\n{owned}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("round trip ok"));

    // The CLI reads what the generated code wrote, typed by the JSON Schema.
    let value_arg = value_file.to_str().expect("utf-8 path");
    let type_arg = format!("@{schema_arg}");
    kiln().args(["validate", "--framed", "--type", &type_arg, value_arg]).assert().code(0);
    kiln().args(["validate", "--framed", "--type", text, value_arg]).assert().code(0);
    kiln().args(["validate", "--framed", "--type", "struct{}", value_arg]).assert().code(1);
    let doc: Value =
        serde_json::from_str(&stdout_of(&["decode", "--framed", "--type", &type_arg, value_arg])).expect("JSON");
    assert_eq!(doc["id"], "-1152921504606846976");
    assert_eq!(doc["big"], "18446744073709551615");
    assert_eq!(doc["small"], -8);
    assert!(doc["mean"].as_f64().is_some_and(|m| m == 0.0 && m.is_sign_negative()));
    assert_eq!(doc["raw"], "00ff07");
    assert_eq!(doc["labels"], json!(["a", ""]));
    assert_eq!(doc["grid"], json!([[1.0], [], [2.5, 3.5]]));
    assert_eq!(doc["tags"], json!({"a": -1, "b": 2}));
    assert_eq!(
        doc["tags"].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["a".into(), "b".into()])
    );
    assert_eq!(doc["path"][0], json!({"x": 1.0, "y": 2.0, "label": "p1"}));
    assert_eq!(doc["named"]["home"]["y"], 9.5);
    assert_eq!(doc["meta"], json!({"type": "demo", "createdAt": 1_700_000_000u64}));
    assert_eq!((doc["note"].clone(), doc["home"]["label"].clone()), (Value::Null, json!("x")));
}

/// The target directory the test build uses: `CARGO_TARGET_DIR` if absolute (a relative one
/// names a folder from wherever cargo was started), else the workspace's `target`.
fn target_dir(workspace: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => workspace.join("target"),
    }
}
