//! Loader for `spec/kiln-v2-cases.json`, shared by the conformance tests.

use serde::Deserialize;
use std::path::PathBuf;

/// One golden case.
#[derive(Debug, Deserialize)]
pub struct Case {
    /// Case name from the spec's table.
    pub name: String,
    /// Canonical type text (`tensors` for a standalone directory).
    #[serde(rename = "type")]
    pub ty: String,
    /// Whether the bytes are wrapped in a 16-byte frame.
    pub framed: bool,
    /// The bytes, lowercase hex.
    pub hex: String,
    /// `accept` or an error code.
    pub expect: String,
    /// What the case pins.
    pub note: String,
}

impl Case {
    /// The case's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        hex::decode(&self.hex).expect("hex")
    }

    /// True for a standalone, unframed tensor directory.
    pub fn is_directory(&self) -> bool {
        self.ty == "tensors" && !self.framed
    }
}

#[derive(Deserialize)]
struct File {
    cap: u64,
    cases: Vec<Case>,
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("root").to_path_buf()
}

/// All golden cases, in the spec's order.
pub fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(repo_root().join("spec/kiln-v2-cases.json")).expect("read cases");
    let file: File = serde_json::from_str(&text).expect("parse cases");
    assert_eq!(file.cap, 16_777_216, "the cases use the spec's default cap");
    file.cases
}
