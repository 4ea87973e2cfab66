//! Every golden case through `kiln validate --json`, one file per case.
//!
//! Frozen cases pass `--type` (and `--framed`) exactly as a script would.

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;

fn cases() -> Vec<Value> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let text = std::fs::read_to_string(root.join("spec/kiln-v2-cases.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["cases"].as_array().unwrap().clone()
}

#[test]
fn every_golden_through_kiln_validate_json() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        let ty = case["type"].as_str().unwrap();
        let framed = case["framed"].as_bool().unwrap();
        let expect = case["expect"].as_str().unwrap();
        let path = dir.path().join(format!("{name}.kiln"));
        std::fs::write(&path, hex::decode(case["hex"].as_str().unwrap()).unwrap()).unwrap();

        let mut cmd = Command::cargo_bin("kiln").unwrap();
        cmd.arg("validate").arg("--json").arg("--type").arg(ty);
        if framed {
            cmd.arg("--framed");
        }
        let out = cmd.arg(&path).output().unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let line: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{name}: {e}: {stdout:?}"));
        assert_eq!(line["file"], path.to_str().unwrap(), "{name}");
        if expect == "accept" {
            assert_eq!(line["ok"], true, "{name}: {stdout}");
            assert_eq!(out.status.code(), Some(0), "{name}");
        } else {
            assert_eq!(line["ok"], false, "{name}: {stdout}");
            assert_eq!(line["error"], expect, "{name}: {stdout}");
            assert_eq!(out.status.code(), Some(1), "{name}");
            let offset = line["offset"].as_u64().unwrap();
            assert!(offset as usize <= case["hex"].as_str().unwrap().len() / 2, "{name}");
        }
        checked += 1;
    }
    assert_eq!(checked, 46, "every golden must run through the CLI");
}
