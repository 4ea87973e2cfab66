//! The check a session makes before a runtime sees a graph written by
//! `kiln convert --onnx-graph` (rules R1 to R3 of docs/onnx.md), in two
//! steps so that the caller opens and validates the Kiln files in between:
//! [`requirements`] reads the graph alone (which tensors are external data,
//! in which files; every inline one allowed by R1; external data nowhere
//! else), and [`pair`] holds it against the validated Kiln files (the
//! graph's digest, each external initializer exactly its Kiln tensor).

use std::collections::HashMap;

use kiln_model::ShardName;
use kiln_nostd::DType;
use sha2::{Digest, Sha256};

use crate::dtype::{kiln_dtype, type_name};
use crate::error::GraphError;
use crate::proto::tensor_proto::DataLocation;
use crate::proto::{GraphProto, ModelProto, TensorProto};
use crate::rule::{data_read, payload_len, place, DataRead, Place};
use crate::weights::{weights, Origin};
use crate::KEY_MODEL;

/// An external initializer: where the graph says its bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct External {
    /// The initializer's name.
    pub name: String,
    /// The Kiln file (a plain file name in the graph's folder).
    pub file: String,
    /// The first byte in that file.
    pub offset: u64,
    /// The byte length.
    pub len: u64,
    /// Its Kiln dtype (from its ONNX type).
    pub dtype: DType,
    /// Its dimensions.
    pub dims: Vec<u64>,
    /// It is an initializer of a subgraph, not of the main graph (a runtime
    /// that takes the main graph's initializers from memory must take this
    /// one through its external-data files instead).
    pub subgraph: bool,
    /// A node (of any graph) or the main graph's outputs read it. A runtime
    /// drops an initializer nothing reads before it takes initializers from
    /// memory (ONNX Runtime then refuses one given for it).
    pub used: bool,
}

/// How an initializer passed (rule R3's list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// External data, held against its Kiln tensor.
    Kiln,
    /// Inline, allowed by rule R1.
    Inline,
}

impl Checked {
    /// `"kiln"` or `"inline"`, as both sessions report it.
    pub fn as_str(self) -> &'static str {
        match self {
            Checked::Kiln => "kiln",
            Checked::Inline => "inline",
        }
    }
}

/// What a graph needs from its Kiln files.
#[derive(Clone, Debug)]
pub struct Requirements {
    /// The Kiln model that records the graph's digest (`kiln.model`).
    pub model: String,
    /// The Kiln files the external initializers are in, first use first.
    pub files: Vec<String>,
    /// The external initializers, in graph order.
    pub externals: Vec<External>,
    /// Every initializer with how it passes (rule R3's order).
    pub checked: Vec<(String, Checked)>,
}

/// A Kiln tensor as a validated Kiln file holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KilnTensor {
    /// Its dtype.
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its payload's first byte in the file.
    pub offset: u64,
    /// Its payload's length.
    pub len: u64,
}

/// SHA-256 of `bytes` as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Reads `graph` (a serialized `ModelProto`) and says what it needs, or why it
/// is refused, in this order (the npm session's too): not a model; not one
/// graph field, an attribute's `g` given twice, subgraphs nested more than
/// [`MAX_DEPTH`] deep; external data anywhere but an initializer of the main
/// graph or a subgraph (a function's subgraphs included); no plain
/// `kiln.model`, or two; then for each initializer in R3's order: a negative
/// dimension; an external one whose `external_data` is not exactly a plain
/// `location`, a decimal `offset` and `length`, or that also holds data, or
/// whose type Kiln has no dtype for; an inline one that rule R1 would have
/// put in the Kiln file.
pub fn requirements(graph: &[u8]) -> Result<Requirements, GraphError> {
    let model = crate::decode(bytes::Bytes::copy_from_slice(graph))
        .map_err(|e| GraphError::new(format!("not an ONNX model (protobuf): {e}")))?;
    let g = model.graph.as_ref().ok_or_else(|| GraphError::new("the model has no graph"))?;
    nesting(graph)?;
    no_other_external(&model)?;
    let kiln_model = model_name(&model)?;
    let read = names_read(g);
    let data = data_read(&model);
    let mut req = Requirements { model: kiln_model, files: Vec::new(), externals: Vec::new(), checked: Vec::new() };
    for w in weights(&model) {
        let t = w.tensor;
        match w.origin {
            Origin::Constant { .. } => continue, // not an initializer; a Constant stays inline by R1 or is lifted
            _ if t.dims.iter().any(|&d| d < 0) => {
                return Err(GraphError::at(t.name(), format!("initializer {:?} has a negative dimension", t.name())));
            }
            Origin::Initializer | Origin::Subgraph { .. } if is_external(t) => {
                let mut ext = external(t)?;
                ext.subgraph = matches!(w.origin, Origin::Subgraph { .. });
                ext.used = read.contains(ext.name.as_str());
                if !req.files.contains(&ext.file) {
                    req.files.push(ext.file.clone());
                }
                req.externals.push(ext);
                req.checked.push((t.name().to_string(), Checked::Kiln));
            }
            _ => {
                inline_allowed(t, &data)?;
                req.checked.push((t.name().to_string(), Checked::Inline));
            }
        }
    }
    Ok(req)
}

/// Holds the graph against its validated Kiln files: `recorded` is the
/// value of `kiln.convert.onnx_graph_sha256` in the Kiln model's metadata
/// (`None` when absent), `tensor(file, name)` the Kiln tensor `name` of
/// `file`. Passes only when the graph's SHA-256 is the one recorded and each
/// external initializer is exactly its Kiln tensor: same bytes (offset and
/// length), dtype and shape.
pub fn pair(
    req: &Requirements,
    graph: &[u8],
    recorded: Option<&str>,
    tensor: impl Fn(&str, &str) -> Option<KilnTensor>,
) -> Result<(), GraphError> {
    let model = &req.model;
    let Some(recorded) = recorded else {
        return Err(GraphError::new(format!(
            "{model} records no graph digest ({}): it was not written with this graph by kiln convert --onnx-graph; \
             convert it again",
            crate::KEY_GRAPH_SHA256
        ))
        .in_file(model));
    };
    let actual = sha256_hex(graph);
    if actual != recorded {
        return Err(GraphError::new(format!(
            "the graph's SHA-256 is {actual}; {model} records {recorded}: the graph was changed or belongs to another \
             conversion"
        ))
        .in_file(model));
    }
    for e in &req.externals {
        let where_ = format!("initializer {:?} ({}, offset {}, length {})", e.name, e.file, e.offset, e.len);
        let fail = |m: String| GraphError::at(&e.name, m).in_file(&e.file);
        let t =
            tensor(&e.file, &e.name).ok_or_else(|| fail(format!("{where_}: {} has no tensor of that name", e.file)))?;
        if (e.offset, e.len) != (t.offset, t.len) {
            return Err(fail(format!("{where_} is not that tensor's payload (offset {}, length {})", t.offset, t.len)));
        }
        if e.dtype != t.dtype || e.dims != t.shape {
            return Err(fail(format!(
                "{where_} is {} {:?}; the Kiln tensor is {} {:?}",
                e.dtype.name(),
                e.dims,
                t.dtype.name(),
                t.shape
            )));
        }
    }
    Ok(())
}

/// Every name a node of `g` or of its subgraphs takes as input, and `g`'s outputs.
fn names_read(g: &GraphProto) -> std::collections::HashSet<&str> {
    fn walk<'g>(g: &'g GraphProto, out: &mut std::collections::HashSet<&'g str>) {
        out.extend(g.output.iter().map(|o| o.name()));
        for n in &g.node {
            out.extend(n.input.iter().map(String::as_str));
            for a in &n.attribute {
                a.g.iter().chain(a.graphs.iter()).for_each(|sub| walk(sub, out));
            }
        }
    }
    let mut out = std::collections::HashSet::new();
    walk(g, &mut out);
    out
}

fn is_external(t: &TensorProto) -> bool {
    t.data_location == Some(i32::from(DataLocation::External))
}

/// The graph's `kiln.model`: a plain file name.
fn model_name(model: &ModelProto) -> Result<String, GraphError> {
    let mut found = model.metadata_props.iter().filter(|p| p.key() == KEY_MODEL);
    let entry = found.next().ok_or_else(|| {
        GraphError::new(format!(
            "the graph names no Kiln model (metadata_props {KEY_MODEL}): convert it again with kiln convert --onnx-graph"
        ))
    })?;
    if found.next().is_some() {
        return Err(GraphError::new(format!("metadata_props {KEY_MODEL} is given twice")));
    }
    let name = entry.value();
    if ShardName::new(name).is_none() {
        return Err(GraphError::new(format!(
            "metadata_props {KEY_MODEL} {name:?} is not a plain file name in the graph's folder"
        )));
    }
    Ok(name.to_string())
}

/// An external initializer's place, by the rules.
fn external(t: &TensorProto) -> Result<External, GraphError> {
    let name = t.name();
    let fail = |m: String| GraphError::at(name, format!("initializer {name:?}: {m}"));
    let mut keys: HashMap<&str, &str> = HashMap::new();
    for e in &t.external_data {
        if keys.insert(e.key(), e.value()).is_some() {
            return Err(fail(format!("external_data key {:?} is given twice", e.key())));
        }
    }
    let mut given: Vec<&str> = keys.keys().copied().collect();
    given.sort_unstable();
    if given != ["length", "location", "offset"] {
        return Err(fail(format!("external_data keys {given:?}; exactly location, offset and length are expected")));
    }
    let held = t.raw_data.is_some()
        || !t.float_data.is_empty()
        || !t.int32_data.is_empty()
        || !t.string_data.is_empty()
        || !t.int64_data.is_empty()
        || !t.double_data.is_empty()
        || !t.uint64_data.is_empty();
    if held {
        return Err(fail("is external data and also holds data in the graph".into()));
    }
    let file = keys.get("location").copied().unwrap_or_default();
    if ShardName::new(file).is_none() {
        return Err(fail(format!(
            "external data location {file:?} is not a plain file name; it must be a file in the graph's own folder"
        )));
    }
    let number = |key: &str| -> Result<u64, GraphError> {
        let v = keys.get(key).copied().unwrap_or_default();
        let decimal = !v.is_empty() && v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit());
        decimal
            .then(|| v.parse().ok())
            .flatten()
            .ok_or_else(|| fail(format!("external data {key} {v:?} is not a decimal number")))
    };
    let (offset, len) = (number("offset")?, number("length")?);
    let code = t.data_type();
    let dtype = kiln_dtype(code)
        .ok_or_else(|| fail(format!("is external data of type {}, which no Kiln tensor holds", type_name(code))))?;
    let dims = t
        .dims
        .iter()
        .map(|&d| u64::try_from(d).map_err(|_| fail(format!("dimension {d} is negative"))))
        .collect::<Result<Vec<u64>, _>>()?;
    Ok(External {
        name: name.to_string(),
        file: file.to_string(),
        offset,
        len,
        dtype,
        dims,
        subgraph: false,
        used: true,
    })
}

/// An inline initializer must be one rule R1 keeps inline.
fn inline_allowed(t: &TensorProto, data: &DataRead) -> Result<(), GraphError> {
    if place(data, t.name(), t.data_type(), &t.dims) == Place::Inline {
        return Ok(());
    }
    let size = kiln_dtype(t.data_type())
        .and_then(|d| payload_len(d, &t.dims))
        .map_or_else(|| "its dimensions give no size".to_string(), |n| format!("{n} bytes"));
    let why = match data.limit(t.name(), t.data_type(), &t.dims) {
        Some(limit) => format!("a node reads it as data, but only under {limit} bytes may stay"),
        None => "no node reads it as data while the graph is resolved".to_string(),
    };
    Err(GraphError::at(
        t.name(),
        format!(
            "initializer {:?} is stored in the graph ({size}; {why}): only what shape inference reads (a \
             shape, axes, scales, ...) or a type Kiln cannot hold stays in the graph; the rest must be external \
             data in the Kiln file",
            t.name()
        ),
    ))
}

/// External data anywhere but the main graph's initializers would be read by
/// the runtime unchecked: refused, naming where.
fn no_other_external(model: &ModelProto) -> Result<(), GraphError> {
    fn graph(g: &GraphProto, in_function: bool) -> Result<(), GraphError> {
        if in_function {
            // A function's subgraphs hold no weights of the conversion (nothing checks them).
            if let Some(t) = g.initializer.iter().find(|t| is_external(t)) {
                return Err(GraphError::at(
                    t.name(),
                    format!("initializer {:?} of a function is external data", t.name()),
                ));
            }
        }
        for s in &g.sparse_initializer {
            if s.values.iter().chain(s.indices.iter()).any(is_external) {
                let name = s.values.as_ref().map_or("", TensorProto::name);
                return Err(GraphError::at(name, format!("sparse initializer {name:?} is external data")));
            }
        }
        g.node.iter().try_for_each(|n| node(n, in_function))
    }
    fn node(n: &crate::proto::NodeProto, in_function: bool) -> Result<(), GraphError> {
        for a in &n.attribute {
            let sparse = a.sparse_tensor.iter().chain(a.sparse_tensors.iter());
            let tensors =
                a.t.iter().chain(a.tensors.iter()).chain(sparse.flat_map(|s| s.values.iter().chain(s.indices.iter())));
            if tensors.into_iter().any(is_external) {
                return Err(GraphError::new(format!(
                    "attribute {:?} of node {:?} ({}) is external data",
                    a.name(),
                    n.name(),
                    n.op_type()
                )));
            }
            for sub in a.g.iter().chain(a.graphs.iter()) {
                graph(sub, in_function)?;
            }
        }
        Ok(())
    }
    if let Some(g) = &model.graph {
        graph(g, false).map_err(only_initializers)?;
    }
    for f in &model.functions {
        f.node.iter().try_for_each(|n| node(n, true)).map_err(|e| {
            let mut e = only_initializers(e);
            e.message = format!("function {:?}: {}", f.name(), e.message);
            e
        })?;
    }
    Ok(())
}

/// `graph` with the external initializers named in `data` made inline, their
/// bytes `data`'s (which the caller took from the checked Kiln files), and
/// the rest unchanged. A runtime given a graph as bytes resolves external
/// data of subgraph initializers against files it opens itself (ONNX
/// Runtime's checker wants them on disk, relative to no folder); inlining
/// those from the checked bytes keeps the runtime off the file system.
pub fn with_inline(graph: &[u8], data: &HashMap<String, Vec<u8>>) -> Result<Vec<u8>, GraphError> {
    fn walk(g: &mut GraphProto, data: &HashMap<String, Vec<u8>>) {
        for t in &mut g.initializer {
            if let Some(bytes) = data.get(t.name()).filter(|_| is_external(t)) {
                t.data_location = None;
                t.external_data.clear();
                t.raw_data = Some(bytes.clone().into());
            }
        }
        for n in &mut g.node {
            for a in &mut n.attribute {
                a.g.iter_mut().chain(a.graphs.iter_mut()).for_each(|sub| walk(sub, data));
            }
        }
    }
    let mut model = crate::decode(bytes::Bytes::copy_from_slice(graph))
        .map_err(|e| GraphError::new(format!("not an ONNX model (protobuf): {e}")))?;
    if let Some(g) = model.graph.as_mut() {
        walk(g, data);
    }
    Ok(prost::Message::encode_to_vec(&model))
}

fn only_initializers(mut e: GraphError) -> GraphError {
    e.message.push_str(
        ": only the initializers of the model's graphs may be (their Kiln files are checked; this would be read \
         unchecked)",
    );
    e
}

/// Subgraphs nested deeper are refused (the npm session too): below protobuf
/// parsers' 100 message levels (3 per subgraph; a subgraph's own types take
/// 5 or more), so that this rule, not a parser's limit, decides.
pub const MAX_DEPTH: usize = 30;

/// The messages that say how a model's graphs nest, each field repeated so
/// that a singular one given twice is seen: protobuf's parsers (prost, ONNX
/// Runtime's) would merge the two, the npm session, reading the wire
/// itself, refuses them, and so does this.
mod nest {
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Model {
        #[prost(message, repeated, tag = "7")]
        pub graph: Vec<Graph>,
        #[prost(message, repeated, tag = "25")]
        pub functions: Vec<Function>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Function {
        #[prost(message, repeated, tag = "7")]
        pub node: Vec<Node>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Graph {
        #[prost(message, repeated, tag = "1")]
        pub node: Vec<Node>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Node {
        #[prost(string, tag = "3")]
        pub name: String,
        #[prost(string, tag = "4")]
        pub op_type: String,
        #[prost(message, repeated, tag = "5")]
        pub attribute: Vec<Attribute>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Attribute {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, repeated, tag = "6")]
        pub g: Vec<Graph>,
        #[prost(message, repeated, tag = "11")]
        pub graphs: Vec<Graph>,
    }
}

/// One graph field, an attribute's `g` at most once, subgraphs nested at most
/// [`MAX_DEPTH`] deep (the main graph's, then the functions').
fn nesting(bytes: &[u8]) -> Result<(), GraphError> {
    fn node(n: &nest::Node, depth: usize) -> Result<(), GraphError> {
        for a in &n.attribute {
            let what = format!("attribute {:?} of node {:?} ({})", a.name, n.name, n.op_type);
            if a.g.len() > 1 {
                return Err(GraphError::new(format!("{what} gives its graph (g) {} times", a.g.len())));
            }
            for sub in a.g.iter().chain(a.graphs.iter()) {
                if depth >= MAX_DEPTH {
                    return Err(GraphError::new(format!("subgraphs nested more than {MAX_DEPTH} deep (at {what})")));
                }
                sub.node.iter().try_for_each(|n| node(n, depth + 1))?;
            }
        }
        Ok(())
    }
    let m = <nest::Model as prost::Message>::decode(bytes)
        .map_err(|e| GraphError::new(format!("not an ONNX model (protobuf): {e}")))?;
    if m.graph.len() != 1 {
        return Err(GraphError::new(format!("{} graph fields (a model has one)", m.graph.len())));
    }
    m.graph.iter().flat_map(|g| &g.node).chain(m.functions.iter().flat_map(|f| &f.node)).try_for_each(|n| node(n, 0))
}
