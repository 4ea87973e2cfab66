//! ONNX models and Kiln: the one place that decides which tensors of an ONNX
//! model are weights held in a Kiln file, which stay inline in the graph
//! `kiln convert --onnx-graph` writes, and how a graph is checked against its
//! Kiln files before a runtime sees it (`docs/onnx.md`, rules R1 to R3).
//!
//! The converter (`kiln-convert`) and the Python session (`kiln-py`) both call
//! this crate; the npm session follows the same rules in JavaScript.

#![forbid(unsafe_code)]

pub mod check;
pub mod dtype;
pub mod error;
#[rustfmt::skip]
#[allow(missing_docs, clippy::all, clippy::pedantic, unreachable_pub, rust_2018_idioms)]
pub mod proto;
pub mod rule;
pub mod weights;

pub use check::{pair, requirements, sha256_hex, Checked, External, KilnTensor, Requirements};
pub use error::GraphError;
pub use rule::{data_read, place, DataRead, Place, INLINE_LIMIT};
pub use weights::{each_weight_mut, lift, weights, Origin, Weight};

/// The graph's `metadata_props` key naming its Kiln model (rule R2): the
/// plain file name of the model file, or of a sharded model's manifest.
pub const KEY_MODEL: &str = "kiln.model";
/// The Kiln metadata key holding the SHA-256 (64 lowercase hex digits) of
/// the graph written beside it (rule R2).
pub const KEY_GRAPH_SHA256: &str = "kiln.convert.onnx_graph_sha256";

/// Decodes an ONNX model (prost checks every length against the bytes left
/// and stops past 100 levels of nesting).
pub fn decode(bytes: bytes::Bytes) -> Result<proto::ModelProto, prost::DecodeError> {
    <proto::ModelProto as prost::Message>::decode(bytes)
}
