//! `spec/model-cases.json` (written by the independent Python reference,
//! `spec/reference/gen_model_cases.py`): every case through the core's
//! readers of spec/model-file.md, with the reference's code, rule, offset
//! and file. A reader given the manifest checks the manifest, then every
//! shard in order (`model::check_all`); any other file is opened by content.

use std::collections::{BTreeMap, HashMap};

use kiln_nostd::model::{check_all, Kind, Manifest, Model};
use kiln_nostd::{Error, Limits, Parser};
use serde_json::Value;

/// The spec's rule ids (`gap_nonzero`) to the core's `Rule` names, from the
/// rule tables of spec/kiln-v2.md (the reference reports the spec's ids for
/// the rules it shares with the directory and Frozen readers).
fn rule_names() -> HashMap<String, String> {
    let text = std::fs::read_to_string(kiln_conformance::repo_root().join("spec/kiln-v2.md")).unwrap();
    let mut map = HashMap::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if let (Some(id), Some(rust)) = (cells.get(1), cells.get(2)) {
            let (id, rust) = (id.trim_matches('`'), rust.trim_matches('`'));
            if !rust.is_empty() && rust.chars().next().is_some_and(char::is_uppercase) {
                // The directory table comes first; the Frozen table reuses some ids (`bool_byte`).
                map.entry(id.to_owned()).or_insert_with(|| rust.to_owned());
            }
        }
    }
    map
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// The core's verdict: `None`, or the error and the file it is in.
fn verdict(files: &BTreeMap<String, Vec<u8>>, open: &str, verify: bool) -> Option<(Error, String)> {
    let bytes = &files[open];
    if Kind::of(bytes) == Some(Kind::Manifest) {
        let mut scratch = vec![0u32; Manifest::scratch_len(bytes.len() / 16)];
        let m = match Manifest::parse_with(bytes, &Limits::DEFAULT, Some(&mut scratch)) {
            Ok(m) => m,
            Err(e) => return Some((e, open.to_owned())),
        };
        let shard_file = |e: &kiln_nostd::model::ShardEntry<'_>| files.get(e.name.as_str()).map(Vec::as_slice);
        return check_all(&m, shard_file, verify, None)
            .err()
            .map(|f| (f.error, m.shard(f.shard).unwrap().name.as_str().to_owned()));
    }
    let result = if kiln_nostd::model::is_model_file(bytes) {
        let parsed = if verify { Model::parse_verified(bytes) } else { Model::parse(bytes) };
        parsed.map(|_| ())
    } else {
        Parser::new().parse(bytes).map(|_| ())
    };
    result.err().map(|e| (e, open.to_owned()))
}

#[test]
fn every_model_case_gives_the_references_verdict() {
    let path = kiln_conformance::repo_root().join("spec/model-cases.json");
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let names = rule_names();
    assert!(cases.len() >= 150, "{}", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let name = c["name"].as_str().unwrap();
        let files: BTreeMap<String, Vec<u8>> =
            c["files"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), hex(v.as_str().unwrap()))).collect();
        let got = verdict(&files, c["open"].as_str().unwrap(), c["verify"].as_bool().unwrap());
        let want = &c["expect"];
        let ok = match (&got, want.is_null()) {
            (None, true) => true,
            (Some((e, file)), false) => {
                let rule = want["rule"].as_str().unwrap();
                let rule = names.get(rule).map_or(rule, String::as_str);
                e.code().as_str() == want["code"].as_str().unwrap()
                    && e.rule().id() == rule
                    && e.offset_u64() == want["offset"].as_u64().unwrap()
                    && file == want["file"].as_str().unwrap()
            }
            _ => false,
        };
        if !ok {
            let got = got.map(|(e, f)| format!("{} {} {} in {f}", e.code(), e.rule().id(), e.offset_u64()));
            failures.push(format!("{name}: got {got:?}, want {want}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
