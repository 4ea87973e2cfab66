//! `spec/model-cases.json` (written by the independent Python reference,
//! `spec/reference/gen_model_cases.py`): every case through the core's
//! readers of spec/model-file.md, with the reference's code, rule, offset
//! and file. A reader given the manifest checks the manifest, then every
//! shard in order (`model::check_all`); any other file is opened by content.
//! A case with a `trust` is read with that key (`Model::parse_trusted`,
//! `Manifest::parse_trusted`); a case with a `delta` applies the update to
//! its base (`delta::apply`), compares the rebuilt bytes with the `result`
//! file and checks them as a device does.

use std::collections::{BTreeMap, HashMap};

use kiln_model::{check_all, Error, Kind, Manifest, Model, Trust};
use kiln_nostd::{Limits, Parser};
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

/// A model file (not a manifest) as a reader with `trust`, or without a key
/// by its content.
fn model_verdict(bytes: &[u8], verify: bool, trust: Option<&Trust<'_>>) -> Result<(), Error> {
    if let Some(trust) = trust {
        return Model::parse_trusted(bytes, trust).map(|_| ());
    }
    if kiln_model::is_model_file(bytes) {
        let parsed = if verify { Model::parse_verified(bytes) } else { Model::parse(bytes) };
        parsed.map(|_| ())
    } else {
        Parser::new().parse(bytes).map(|_| ()).map_err(Error::from)
    }
}

/// The core's verdict: `None`, or the error and the file it is in.
fn verdict(
    files: &BTreeMap<String, Vec<u8>>,
    open: &str,
    verify: bool,
    trust: Option<&Trust<'_>>,
) -> Option<(Error, String)> {
    let bytes = &files[open];
    if Kind::of(bytes) == Some(Kind::Manifest) {
        let mut scratch = vec![0u32; Manifest::scratch_len(bytes.len() / 16)];
        let parsed = match trust {
            Some(trust) => Manifest::parse_trusted(bytes, &Limits::DEFAULT, Some(&mut scratch), trust),
            None => Manifest::parse_with(bytes, &Limits::DEFAULT, Some(&mut scratch)),
        };
        let m = match parsed {
            Ok(m) => m,
            Err(e) => return Some((e, open.to_owned())),
        };
        let shard_file = |e: &kiln_model::ShardEntry<'_>| files.get(e.name.as_str()).map(Vec::as_slice);
        return check_all(&m, shard_file, verify, None)
            .err()
            .map(|f| (f.error, m.shard(f.shard).unwrap().name.as_str().to_owned()));
    }
    model_verdict(bytes, verify, trust).err().map(|e| (e, open.to_owned()))
}

/// A delta case: the update `open` applied to `base`; the rebuilt model must
/// be the `result` file, and is then checked as a device checks it.
fn delta_verdict(
    files: &BTreeMap<String, Vec<u8>>,
    open: &str,
    delta: &Value,
    verify: bool,
    trust: Option<&Trust<'_>>,
) -> Result<Option<(Error, String)>, String> {
    let base = &files[delta["base"].as_str().unwrap()];
    let rebuilt = match kiln_model::delta::apply(base, &files[open]) {
        Ok(rebuilt) => rebuilt,
        Err(e) => return Ok(Some((e, open.to_owned()))),
    };
    let Some(result) = delta["result"].as_str() else {
        return Err(format!("the delta applies ({} bytes rebuilt)", rebuilt.len()));
    };
    if rebuilt != files[result] {
        return Err(format!("the rebuilt model ({} bytes) is not {result}", rebuilt.len()));
    }
    Ok(model_verdict(&rebuilt, verify, trust).err().map(|e| (e, result.to_owned())))
}

fn key(t: &Value) -> [u8; 32] {
    hex::decode(t["key"].as_str().unwrap()).unwrap().try_into().unwrap()
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
        let files: BTreeMap<String, Vec<u8>> = c["files"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), hex::decode(v.as_str().unwrap()).unwrap()))
            .collect();
        let (open, verify) = (c["open"].as_str().unwrap(), c["verify"].as_bool().unwrap());
        let t = &c["trust"];
        let key = (!t.is_null()).then(|| key(t));
        let trust = key.as_ref().map(Trust::new);
        if !t.is_null() && !t["usable"].as_bool().unwrap() {
            // a key the reader refuses when it is given: nothing is opened
            if trust.flatten().is_some() {
                failures.push(format!("{name}: Trust::new takes the key {}", t["key"]));
            }
            continue;
        }
        let trust = match trust {
            None => None,
            Some(None) => {
                failures.push(format!("{name}: Trust::new refuses the key {}", t["key"]));
                continue;
            }
            Some(Some(mut trust)) => {
                if let Some(target) = t["target"].as_str() {
                    trust = trust.target(target);
                }
                if let Some(v) = t["newer_than"].as_u64() {
                    trust = trust.newer_than(v);
                }
                Some(trust)
            }
        };
        let got = if c["delta"].is_null() {
            verdict(&files, open, verify, trust.as_ref())
        } else {
            match delta_verdict(&files, open, &c["delta"], verify, trust.as_ref()) {
                Ok(got) => got,
                Err(why) => {
                    failures.push(format!("{name}: {why}, want {}", c["expect"]));
                    continue;
                }
            }
        };
        let want = &c["expect"];
        let ok = match (&got, want.is_null()) {
            (None, true) => true,
            (Some((e, file)), false) => {
                // a null rule: the spec names none (the code and offset are compared)
                let rule_ok = want["rule"].as_str().is_none_or(|rule| {
                    let rule = names.get(rule).map_or(rule, String::as_str);
                    e.rule().id() == rule
                });
                e.code().as_str() == want["code"].as_str().unwrap()
                    && rule_ok
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
