//! The Rust front end of the cross-front-end verdict test
//! (`scripts/verdicts/verdicts.py`): for each argument `NAME=PATH`, one JSON
//! line per call of a row of `docs/verification.md`, with the call's verdict
//! (accepted, or the code and byte offset of the rule it broke) and, where the
//! call says so, whether the digests were compared.
//!
//! `cargo test --workspace` builds it (target/debug/examples/verdict).

use std::fs::File;
use std::path::Path;

use kiln_model::source::{self, SourceError};
use kiln_model::{Kind, Model};
use kiln_nostd::{Directory, Incremental};
use serde_json::{json, Value};

/// A verdict line: accepted, or the code and offset of the rule broken.
fn verdict(result: Result<Option<bool>, (String, u64)>) -> Value {
    match result {
        Ok(None) => json!({ "ok": true }),
        Ok(Some(checked)) => json!({ "ok": true, "digests_checked": checked }),
        Err((code, offset)) => json!({ "ok": false, "code": code, "offset": offset }),
    }
}

fn model_error(e: kiln_model::Error) -> (String, u64) {
    (e.code().as_str().to_owned(), e.offset_u64())
}

fn core_error(e: kiln_nostd::Error) -> (String, u64) {
    (e.code().as_str().to_owned(), e.offset_u64())
}

fn source_error<E: std::fmt::Debug>(e: SourceError<E>) -> (String, u64) {
    match e {
        SourceError::Kiln(e) => model_error(e),
        other => panic!("not a verdict: {other:?}"),
    }
}

/// Whether a model of record type `kind` carries digests (what hashing can check).
fn has_digests(kind: Option<Kind>) -> bool {
    matches!(kind, Some(Kind::Digests | Kind::Shard | Kind::Signed))
}

/// `(row's call, given a path, verdict)` for every Rust row this test drives.
/// "Given a path": the call opens the files a manifest names; the ranged
/// readers read the one file they are given, as a buffer would be.
fn calls(path: &Path, bytes: &[u8]) -> Vec<(&'static str, bool, Value)> {
    let mut out = Vec::new();

    // The front door, with its default options (ruling 6: a buffer in memory is not hashed).
    let mut options = kiln_model::Options::new();
    let hashes = options.hashes();
    let opened = kiln_model::open(bytes, &mut options);
    out.push((
        "kiln_model::open",
        false,
        verdict(opened.map(|o| Some(hashes && has_digests(o.kind()))).map_err(model_error)),
    ));

    out.push(("Directory::parse", false, verdict(Directory::parse(bytes).map(|_| None).map_err(core_error))));
    out.push((
        "kiln_model::parse_any",
        false,
        verdict(kiln_model::parse_any(bytes).map(|_| Some(false)).map_err(model_error)),
    ));
    out.push(("Model::parse", false, verdict(Model::parse(bytes).map(|_| Some(false)).map_err(model_error))));
    out.push((
        "Model::parse_verified",
        false,
        verdict(Model::parse_verified(bytes).map(|m| Some(has_digests(Some(m.kind())))).map_err(model_error)),
    ));

    // Ranged reading from the file (a standalone block, then a model file).
    let file = File::open(path).expect("the file opens");
    let mut prefix = vec![0u8; 1 << 16];
    out.push(("source::open", true, verdict(source::open(&file, &mut prefix).map(|_| None).map_err(source_error))));
    let mut chunk = vec![0u8; 4096];
    out.push((
        "source::Options::verify_model",
        false,
        verdict(
            source::Options::new()
                .verify_model(&file, &mut prefix, &mut chunk)
                .map(|s| Some(s.digests_checked))
                .map_err(source_error),
        ),
    ));

    // In chunks: the whole file fed 1000 bytes at a time.
    let mut inc_prefix = vec![0u8; 1 << 16];
    let mut inc = Incremental::new(&mut inc_prefix);
    let fed = bytes.chunks(1000).try_for_each(|c| inc.feed(c).map(|_| ()));
    let result = fed.and_then(|()| inc.finish()).map(|_| None).map_err(core_error);
    out.push(("Incremental", false, verdict(result)));

    // The host crate's front door, by path (a manifest opens its shards).
    let host = kiln_host::open(path);
    let result = match host {
        Ok(m) => Ok(Some(m.digests_verified())),
        Err(kiln_host::Error::Kiln { fault, .. }) => Err(model_error(fault.error)),
        Err(kiln_host::Error::Foreign { .. }) => Err(("FRAME".to_owned(), 0)),
        Err(e) => panic!("not a verdict: {e}"),
    };
    out.push(("kiln_host::open", true, verdict(result)));
    out
}

fn main() {
    for arg in std::env::args().skip(1) {
        let (name, path) = arg.split_once('=').expect("NAME=PATH");
        let bytes = std::fs::read(path).expect("the file reads");
        for (call, by_path, mut v) in calls(Path::new(path), &bytes) {
            let obj = v.as_object_mut().expect("an object");
            obj.insert("call".into(), json!(call));
            obj.insert("by_path".into(), json!(by_path));
            obj.insert("file".into(), json!(name));
            println!("{v}");
        }
    }
}
