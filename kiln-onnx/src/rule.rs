//! Rule R1 (docs/onnx.md): which tensors stay inline in the graph.
//!
//! ONNX Runtime runs ONNX's shape inference while it resolves a graph, and
//! the inference functions of some operators read an input's *values*
//! (Reshape's shape, Slice's starts, Resize's scales, ConstantOfShape's
//! shape, ...). Such an input cannot be external data ("Cannot parse data
//! from external tensors"), so it stays inline. Nothing else needs to: the
//! runtime loads external initializers before its optimizers and kernels
//! read them. The `onnx` package's own writer keeps every tensor under
//! 1,024 bytes inline instead; on the real-model corpus that left 8 to 30%
//! of the weights of the Paddle2ONNX and int8 models in the graph (biases,
//! quantization scales), against 0.002 to 0.39% with this rule.
//!
//! Shape inference also propagates shape data through the operators of
//! [`PROPAGATES`] (Gather's indices into a shape, a Concat of shapes): ONNX
//! Runtime reads every int32 or int64 tensor of rank 0 or 1 such a node
//! takes (seen: a Gather's `[1]` indices in a PyTorch export), so those
//! stay inline too.
//!
//! [`data_read`] gives the names a model's nodes read as data;
//! [`place`] decides one tensor with it.

use std::collections::HashSet;

use kiln_nostd::DType;

use crate::dtype::kiln_dtype;
use crate::proto::{GraphProto, ModelProto};

/// A tensor read as data stays inline up to this many payload bytes (the
/// graph keeps no large tensor; a larger one goes to Kiln, and ONNX Runtime
/// then reports the operator that reads it).
pub const INLINE_LIMIT: u64 = 64 << 10;

/// An input of an operator of another domain (whose shape inference this
/// table does not know) stays inline under this many bytes, as the `onnx`
/// package's writer keeps every tensor.
pub const OTHER_DOMAIN_LIMIT: u64 = 1024;

/// The inputs (by position) whose values the standard domain's shape
/// inference reads, per operator (ONNX's operator definitions: every
/// input its inference function takes data from, in any opset).
pub const READS_DATA: &[(&str, &[usize])] = &[
    ("AffineGrid", &[1]),
    ("BlackmanWindow", &[0]),
    ("CenterCropPad", &[1]),
    ("Col2Im", &[1, 2]),
    ("ConstantOfShape", &[0]),
    ("DFT", &[1, 2]),
    ("Dropout", &[1, 2]),
    ("Expand", &[1]),
    ("HammingWindow", &[0]),
    ("HannWindow", &[0]),
    ("MelWeightMatrix", &[0, 1, 2, 3, 4]),
    ("OneHot", &[1]),
    ("Pad", &[1, 2, 3]),
    ("Range", &[0, 1, 2]),
    ("ReduceL1", &[1]),
    ("ReduceL2", &[1]),
    ("ReduceLogSum", &[1]),
    ("ReduceLogSumExp", &[1]),
    ("ReduceMax", &[1]),
    ("ReduceMean", &[1]),
    ("ReduceMin", &[1]),
    ("ReduceProd", &[1]),
    ("ReduceSum", &[1]),
    ("ReduceSumSquare", &[1]),
    ("Reshape", &[1]),
    ("Resize", &[1, 2, 3]),
    ("STFT", &[1, 3]),
    ("Slice", &[1, 2, 3, 4]),
    ("Split", &[1]),
    ("SplitToSequence", &[1]),
    ("Squeeze", &[1]),
    ("Tile", &[1]),
    ("TopK", &[1]),
    ("Unsqueeze", &[1]),
    ("Upsample", &[1]),
];

/// The operators whose shape inference propagates shape data (ONNX's data
/// propagation functions, and the neighbours ONNX Runtime may add): an
/// int32 or int64 tensor of rank 0 or 1 they take stays inline.
pub const PROPAGATES: &[&str] = &[
    "Add",
    "Cast",
    "Concat",
    "Div",
    "Gather",
    "Identity",
    "Max",
    "Min",
    "Mul",
    "Neg",
    "Shape",
    "Size",
    "Slice",
    "Squeeze",
    "Sub",
    "Unsqueeze",
];

/// Where rule R1 puts a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Its bytes are a tensor of the Kiln file; the graph points at them.
    Kiln,
    /// It stays in the graph.
    Inline,
}

/// The names a model's nodes read as data while the graph is resolved, with
/// the largest payload each may have to stay inline: every input
/// [`READS_DATA`] lists of a standard-domain node, and every int32 or int64
/// tensor of rank 0 or 1 a standard-domain node of [`PROPAGATES`] takes
/// ([`INLINE_LIMIT`]);
/// every input of a node of another domain ([`OTHER_DOMAIN_LIMIT`]); in
/// every graph and subgraph and function body. Names are the model's own (ONNX
/// names are unique across a model), so one set serves every graph.
#[derive(Clone, Debug, Default)]
pub struct DataRead {
    standard: HashSet<String>,
    other: HashSet<String>,
    /// Every input of a standard-domain node of [`PROPAGATES`] (for integer vectors).
    any: HashSet<String>,
}

impl DataRead {
    /// The payload limit under which tensor `name` of ONNX type `code` and
    /// dimensions `dims` stays inline, if a node reads it as data.
    pub fn limit(&self, name: &str, code: i32, dims: &[i64]) -> Option<u64> {
        let integer_vector = matches!(code, 6 | 7) && dims.len() <= 1;
        if self.standard.contains(name) || (integer_vector && self.any.contains(name)) {
            Some(INLINE_LIMIT)
        } else if self.other.contains(name) {
            Some(OTHER_DOMAIN_LIMIT)
        } else {
            None
        }
    }
}

/// [`DataRead`] of `model`.
pub fn data_read(model: &ModelProto) -> DataRead {
    let mut out = DataRead::default();
    if let Some(g) = &model.graph {
        graph(g, &mut out);
    }
    for f in &model.functions {
        f.node.iter().for_each(|n| node(n, &mut out));
    }
    out
}

fn graph(g: &GraphProto, out: &mut DataRead) {
    g.node.iter().for_each(|n| node(n, out));
}

fn node(n: &crate::proto::NodeProto, out: &mut DataRead) {
    if matches!(n.domain(), "" | "ai.onnx") {
        if PROPAGATES.contains(&n.op_type()) {
            out.any.extend(n.input.iter().filter(|s| !s.is_empty()).cloned());
        }
        if let Some((_, inputs)) = READS_DATA.iter().find(|(op, _)| *op == n.op_type()) {
            for &i in *inputs {
                if let Some(name) = n.input.get(i).filter(|s| !s.is_empty()) {
                    out.standard.insert(name.clone());
                }
            }
        }
    } else {
        out.other.extend(n.input.iter().filter(|s| !s.is_empty()).cloned());
    }
    for a in &n.attribute {
        a.g.iter().chain(a.graphs.iter()).for_each(|sub| graph(sub, out));
    }
}

/// The payload length of `dims` elements of `dtype` (4-bit types two per
/// byte), or `None` for a negative dimension or a length past `u64`.
pub fn payload_len(dtype: DType, dims: &[i64]) -> Option<u64> {
    let elements = dims.iter().try_fold(1u64, |n, &d| n.checked_mul(u64::try_from(d).ok()?))?;
    dtype.byte_length(elements)
}

/// Where rule R1 puts tensor `name` of ONNX type `code` and dimensions
/// `dims`: inline when Kiln has no dtype for it, or when a node reads it as
/// data and its payload is under that read's limit; in the Kiln file
/// otherwise (including dimensions that give no length, which the converter
/// then refuses by name).
pub fn place(read: &DataRead, name: &str, code: i32, dims: &[i64]) -> Place {
    let Some(dtype) = kiln_dtype(code) else { return Place::Inline };
    match (read.limit(name, code, dims), payload_len(dtype, dims)) {
        (Some(limit), Some(n)) if n < limit => Place::Inline,
        _ => Place::Kiln,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{AttributeProto, NodeProto};

    fn node(op: &str, domain: &str, inputs: &[&str]) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            domain: Some(domain.into()),
            input: inputs.iter().map(|s| (*s).to_string()).collect(),
            ..NodeProto::default()
        }
    }

    fn model() -> ModelProto {
        let sub = GraphProto { node: vec![node("Slice", "", &["x", "starts", "ends"])], ..GraphProto::default() };
        let mut branch = node("If", "", &["cond"]);
        branch.attribute.push(AttributeProto { g: Some(sub), ..AttributeProto::default() });
        let g = GraphProto {
            node: vec![
                node("Reshape", "", &["w", "shape"]),
                node("Conv", "", &["x", "weight", "bias"]),
                node("MatMulNBits", "com.microsoft", &["x", "packed", "scales"]),
                branch,
            ],
            ..GraphProto::default()
        };
        ModelProto { graph: Some(g), ..ModelProto::default() }
    }

    #[test]
    fn only_what_shape_inference_reads_stays_inline() {
        let read = data_read(&model());
        assert_eq!(place(&read, "shape", 7, &[2]), Place::Inline);
        assert_eq!(place(&read, "starts", 7, &[4]), Place::Inline, "read in a subgraph");
        assert_eq!(place(&read, "w", 1, &[2]), Place::Kiln, "a Reshape's data input is a weight");
        assert_eq!(place(&read, "bias", 1, &[4]), Place::Kiln, "however small");
        assert_eq!(place(&read, "weight", 1, &[]), Place::Kiln);
    }

    #[test]
    fn integer_vectors_that_shape_data_propagates_through_stay_inline() {
        let mut m = model();
        m.graph.as_mut().unwrap().node.push(node("Gather", "", &["dims", "index"]));
        let read = data_read(&m);
        assert_eq!(place(&read, "index", 7, &[1]), Place::Inline, "int64, rank 1, taken by a Gather");
        assert_eq!(place(&read, "index", 6, &[]), Place::Inline, "int32 scalar");
        assert_eq!(place(&read, "index", 7, &[2, 2]), Place::Kiln, "rank 2 is no shape");
        assert_eq!(place(&read, "index", 3, &[4]), Place::Kiln, "int8 is no shape");
        assert_eq!(place(&read, "bias", 7, &[4]), Place::Kiln, "a Conv propagates no shape data");
        assert_eq!(place(&read, "unread", 7, &[4]), Place::Kiln, "no node takes it");
    }

    #[test]
    fn the_limits_are_exclusive_and_count_bytes() {
        let read = data_read(&model());
        assert_eq!(place(&read, "shape", 7, &[8191]), Place::Inline); // 65,528 bytes
        assert_eq!(place(&read, "shape", 7, &[8192]), Place::Kiln); // 64 KiB
        assert_eq!(place(&read, "scales", 1, &[255]), Place::Inline, "another domain: under 1,024 bytes");
        assert_eq!(place(&read, "scales", 1, &[256]), Place::Kiln);
        assert_eq!(place(&read, "packed", 21, &[2047]), Place::Kiln, "4-bit: 2,047 elements take 1,024 bytes");
        assert_eq!(place(&read, "packed", 21, &[2046]), Place::Inline);
    }

    #[test]
    fn types_kiln_cannot_hold_stay_inline_whatever_their_size() {
        let read = DataRead::default();
        for code in [8, 14, 15, 18, 20, 25, 0] {
            assert_eq!(place(&read, "any", code, &[1 << 20]), Place::Inline, "{code}");
        }
    }

    #[test]
    fn dimensions_without_a_length_go_to_kiln_where_they_are_refused() {
        let read = data_read(&model());
        assert_eq!(place(&read, "shape", 7, &[-1]), Place::Kiln);
        assert_eq!(place(&read, "shape", 7, &[i64::MAX, i64::MAX]), Place::Kiln);
    }

    #[test]
    fn the_table_is_sorted_and_each_operator_once() {
        assert!(READS_DATA.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
