//! ONNX in: a model's initializers as Kiln tensors (docs/conversion.md, "ONNX").
//!
//! The protobuf is parsed by prost (messages generated from onnx-ml.proto,
//! [`proto`]), never by hand. prost checks every length against the bytes
//! that remain before it reads or allocates, and stops past 100 levels of
//! nesting; a `bytes` field is a slice of the mapped file (`bytes::Bytes`), so
//! an inline `raw_data` payload is neither copied nor touched while parsing:
//! it is copied file-to-file later, like any other input's payload. Typed
//! fields (`float_data`, `int32_data`, ...) are decoded by prost into vectors
//! and re-encoded here as little-endian bytes: memory for them is bounded by
//! the file's size (at most 8 bytes per encoded byte, for `int64_data` of
//! one-byte varints). External data is read from side files in the model's
//! own folder only: a `location` must be a plain file name, exactly as a
//! shard name is, and a symbolic link that leads out of the folder is not
//! followed.
//!
//! ONNX has no magic bytes: a file is read as ONNX by its `.onnx` extension or
//! by `--from onnx` ([`super::format_of`]).

pub mod graph;
pub use kiln_onnx::dtype::type_name;
pub use kiln_onnx::proto;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use kiln_nostd::dtype::{ByteRule, Width};
use kiln_nostd::int::u64_from;
use kiln_nostd::DType;
use prost::Message;

use super::error::{io_fail, limit};
use super::meta::Dups;
use super::model::{Format, Model, ReadOptions, Source, TensorOut};
use super::Input;
use crate::paths::{self, plain_file_name};
use kiln_onnx::dtype::kiln_dtype;
use kiln_onnx::Origin;
use proto::tensor_proto::DataLocation;
use proto::{GraphProto, ModelProto, TensorProto};

/// The newest IR version whose every field the generated messages know
/// (onnx-ml.proto's `IR_VERSION`). A newer model may carry fields prost
/// would drop when the graph is written back, so `--onnx-graph` refuses it.
pub fn known_ir_version() -> i64 {
    i64::from(i32::from(proto::Version::IrVersion))
}

/// Metadata keys the reader writes (the model's own `metadata_props` are
/// carried under their own keys).
pub const KEY_IR_VERSION: &str = "onnx.ir_version";
/// `domain:version` pairs of the model's opset imports, comma-separated
/// (`ai.onnx` for the default domain), in the model's order.
pub const KEY_OPSET: &str = "onnx.opset_import";
/// The producer's name and version, the model's domain, version and graph name.
pub const KEY_PRODUCER_NAME: &str = "onnx.producer_name";
/// See [`KEY_PRODUCER_NAME`].
pub const KEY_PRODUCER_VERSION: &str = "onnx.producer_version";
/// See [`KEY_PRODUCER_NAME`].
pub const KEY_DOMAIN: &str = "onnx.domain";
/// See [`KEY_PRODUCER_NAME`].
pub const KEY_MODEL_VERSION: &str = "onnx.model_version";
/// See [`KEY_PRODUCER_NAME`].
pub const KEY_GRAPH_NAME: &str = "onnx.graph_name";

/// Decodes an ONNX model from `bytes` (a map of the whole file).
pub fn decode(bytes: Bytes) -> anyhow::Result<ModelProto> {
    if bytes.is_empty() {
        bail!("an empty file is not an ONNX model");
    }
    ModelProto::decode(bytes).map_err(|e| anyhow!("not a valid ONNX model (protobuf): {}", shorten(&e.to_string())))
}

/// prost names every message on the way to a fault; past a few levels (a
/// nesting attack) the middle of that path is elided.
fn shorten(text: &str) -> String {
    let parts: Vec<&str> = text.split(": ").collect();
    if parts.len() <= 8 {
        return text.to_string();
    }
    let (head, tail) =
        (parts.get(..3).unwrap_or_default(), parts.get(parts.len().saturating_sub(4)..).unwrap_or_default());
    format!("{}: ... ({} levels): {}", head.join(": "), parts.len().saturating_sub(7), tail.join(": "))
}

/// The whole file as `Bytes` that own a map of it, so that every `bytes`
/// field prost decodes is a slice of the file whose offset can be taken.
pub fn map_shared(input: &Input) -> anyhow::Result<Bytes> {
    if input.bytes().is_empty() {
        return Ok(Bytes::new());
    }
    // SAFETY: a second read-only map of the regular file `Input` already
    // maps (same caveat: a concurrent truncation faults, as with any mapped
    // reader). The payload bytes are copied through the file descriptor.
    let map =
        unsafe { memmap2::Mmap::map(&input.file) }.map_err(io_fail(format!("cannot map {}", input.path.display())))?;
    Ok(Bytes::from_owner(map))
}

/// Reads the model at `path` (mapped as `input`): its weights become the
/// tensors (every initializer, of the main graph and of subgraphs, and every
/// `Constant` value that rule R1 of docs/onnx.md puts in the Kiln file: all
/// but those the graph reads as data (shapes, axes), in
/// [`kiln_onnx::weights()`]' order); its opset and producer the metadata.
/// With `--onnx-graph` (`opts.onnx_graph`), a tensor Kiln cannot hold stays
/// in the graph (named in a note) and the metadata gets a placeholder for
/// the graph's digest; without it, such a tensor refuses the conversion.
/// Side files of external data are opened beside `path` and returned in
/// [`Model::inputs`] from index 1 (index 0 is the model file itself, which the
/// caller adds).
pub fn read(input: &Input, path: &Path, opts: &ReadOptions) -> anyhow::Result<Model> {
    let shared = map_shared(input)?;
    let base = shared.as_ptr().addr();
    let mut onnx = decode(shared)?;
    let graph = onnx.graph.as_ref().ok_or_else(|| anyhow!("the model has no graph"))?;
    let mut model = Model::new(Format::Onnx, opts);
    metadata(&onnx, &mut model)?;
    if opts.onnx_graph {
        model.metadata.set_own(kiln_onnx::KEY_GRAPH_SHA256, GRAPH_DIGEST_PLACEHOLDER.to_string());
    }
    let mut left = sparse(graph, opts.onnx_graph)?;
    let mut sides = Sides::new(path);
    let mut seen = HashSet::new();
    let (mut lifted, mut nested) = (0usize, 0usize);
    let mut fault = None;
    // Each weight's typed fields are taken out of the decoded model once its
    // bytes are made: the two copies are never both whole in memory.
    kiln_onnx::each_weight_mut(&mut onnx, &mut |name, origin, t| {
        if fault.is_some() {
            return;
        }
        let what = describe(name, &origin);
        let mut step = || -> anyhow::Result<Option<TensorOut>> {
            if name.is_empty() {
                bail!("{what} has no name (Kiln tensors are found by name)");
            }
            if !seen.insert(name.to_string()) {
                bail!("{what}: the name {name:?} is taken twice in the model (Kiln tensor names are unique)");
            }
            if opts.onnx_graph && kiln_dtype(t.data_type()).is_none() {
                left.push(format!("{name} ({})", type_name(t.data_type())));
                return Ok(None);
            }
            tensor(t, name, base, &mut sides).with_context(|| what.clone()).map(Some)
        };
        match step() {
            Ok(Some(out)) => {
                free_typed(t);
                match origin {
                    Origin::Constant { .. } => lifted = lifted.saturating_add(1),
                    Origin::Subgraph { .. } => nested = nested.saturating_add(1),
                    Origin::Initializer => {}
                }
                if model.tensors.try_reserve(1).is_err() {
                    fault = Some(anyhow!("the tensor list does not fit in memory"));
                    return;
                }
                model.tensors.push(out);
            }
            Ok(None) => {}
            Err(e) => fault = Some(e),
        }
    });
    if let Some(e) = fault {
        return Err(e);
    }
    if lifted > 0 || nested > 0 {
        model.notes.push(format!(
            "{lifted} weights held in Constant nodes and {nested} subgraph initializers are tensors too (docs/onnx.md, R1)"
        ));
    }
    if !left.is_empty() {
        model.notes.push(format!(
            "{} tensors Kiln cannot hold stay inline in the graph: {}",
            left.len(),
            left.join(", ")
        ));
    }
    model.inputs = sides.inputs;
    Ok(model)
}

/// The value written for the graph's digest until the graph exists: as
/// long as the digest, so the output's layout does not move when it is set.
pub const GRAPH_DIGEST_PLACEHOLDER: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A weight, for messages.
fn describe(name: &str, origin: &Origin) -> String {
    match origin {
        Origin::Initializer => format!("initializer {name:?}"),
        Origin::Subgraph { node } => format!("initializer {name:?} of a subgraph of node {node}"),
        Origin::Constant { node } => format!("Constant node {node} (output {name:?})"),
    }
}

/// Drops a tensor's typed fields once its bytes are made (their memory goes
/// back while the rest of the model is read).
fn free_typed(t: &mut TensorProto) {
    t.float_data = Vec::new();
    t.int32_data = Vec::new();
    t.int64_data = Vec::new();
    t.double_data = Vec::new();
    t.uint64_data = Vec::new();
}

/// Sparse initializers (of any graph): Kiln has no sparse tensors, so
/// without `--onnx-graph` the conversion is refused; with it they stay in
/// the graph, and their names are returned for the note.
fn sparse(graph: &GraphProto, keep: bool) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    let mut stack: Vec<&GraphProto> = vec![graph];
    while let Some(g) = stack.pop() {
        for s in &g.sparse_initializer {
            let name = s.values.as_ref().map_or("", TensorProto::name);
            if !keep {
                return Err(limit(format!(
                    "sparse initializer {name:?}: Kiln has no sparse tensors; densify it first, or keep it in the \
                     graph with --onnx-graph (nothing was converted)"
                )));
            }
            names.push(format!("{name} (sparse)"));
        }
        for node in &g.node {
            for attr in &node.attribute {
                stack.extend(attr.g.iter().chain(attr.graphs.iter()));
            }
        }
    }
    Ok(names)
}

/// The model's opset, producer and `metadata_props`.
fn metadata(onnx: &ModelProto, model: &mut Model) -> anyhow::Result<()> {
    let opset: Vec<String> = onnx
        .opset_import
        .iter()
        .map(|o| format!("{}:{}", if o.domain().is_empty() { "ai.onnx" } else { o.domain() }, o.version()))
        .collect();
    let graph_name = onnx.graph.as_ref().map_or("", |g| g.name());
    let version = onnx.model_version.map(|v| v.to_string());
    let pairs = [
        (KEY_IR_VERSION, Some(onnx.ir_version().to_string())),
        (KEY_OPSET, Some(opset.join(","))),
        (KEY_PRODUCER_NAME, onnx.producer_name.clone()),
        (KEY_PRODUCER_VERSION, onnx.producer_version.clone()),
        (KEY_DOMAIN, onnx.domain.clone().filter(|d| !d.is_empty())),
        (KEY_MODEL_VERSION, version),
        (KEY_GRAPH_NAME, Some(graph_name.to_string()).filter(|n| !n.is_empty())),
    ];
    for (k, v) in pairs {
        if let Some(v) = v {
            model.metadata.push(k, &v, "")?;
        }
    }
    for p in &onnx.metadata_props {
        model.metadata.push(p.key(), p.value(), "")?;
    }
    let notes = model.metadata.seal(Dups::Refuse)?;
    model.notes.extend(notes);
    Ok(())
}

/// One weight named `name`: its Kiln dtype, shape and where its bytes are.
fn tensor(t: &TensorProto, name: &str, base: usize, sides: &mut Sides<'_>) -> anyhow::Result<TensorOut> {
    let code = t.data_type.unwrap_or(0);
    let dtype = kiln_dtype(code).ok_or_else(|| {
        limit(format!(
            "ONNX type {} has no Kiln dtype (docs/conversion.md lists the ones that do); nothing was converted",
            type_name(code)
        ))
    })?;
    if t.segment.is_some() {
        bail!("a segment of a larger tensor (TensorProto.segment) cannot be converted on its own");
    }
    let mut shape = Vec::with_capacity(t.dims.len().min(8));
    for &d in &t.dims {
        shape.push(u64::try_from(d).map_err(|_| anyhow!("dimension {d} is negative"))?);
    }
    let elements =
        shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or_else(|| anyhow!("{shape:?} overflows"))?;
    let len = dtype.byte_length(elements).ok_or_else(|| anyhow!("{shape:?} of {} overflows", dtype.name()))?;
    let typed = typed_fields(t);
    let external = t.data_location == Some(i32::from(DataLocation::External));
    let source = match (&t.raw_data, typed.first(), external) {
        (_, _, true) if t.raw_data.is_some() || !typed.is_empty() => {
            bail!(
                "external data, yet data inside the file too ({})",
                if t.raw_data.is_some() { "raw_data" } else { typed.first().copied().unwrap_or("") }
            )
        }
        (_, _, true) => sides.external(t, len)?,
        (Some(_), Some(field), false) => bail!("both raw_data and {field}: which one is the tensor?"),
        (Some(raw), None, false) => {
            if u64_from(raw.len()) != len {
                bail!("raw_data holds {} bytes; {} {shape:?} takes {len}", raw.len(), dtype.name());
            }
            check_inline(dtype, elements, raw)?;
            let offset = raw.as_ptr().addr().checked_sub(base).ok_or_else(|| anyhow!("raw_data outside the file"))?;
            Source::File { offset: u64_from(offset) }
        }
        (None, _, false) => {
            let bytes = from_typed(t, dtype, code, elements, &typed)?;
            check_inline(dtype, elements, &bytes)?;
            Source::Bytes(bytes.into_boxed_slice())
        }
    };
    let input = match source {
        Source::File { .. } if external => sides.last,
        _ => 0,
    };
    let mut out = TensorOut::dense(name, dtype, shape, 0, len);
    out.source = source;
    out.input = input;
    Ok(out)
}

/// The typed fields `t` holds, by name.
fn typed_fields(t: &TensorProto) -> Vec<&'static str> {
    [
        ("float_data", !t.float_data.is_empty()),
        ("int32_data", !t.int32_data.is_empty()),
        ("string_data", !t.string_data.is_empty()),
        ("int64_data", !t.int64_data.is_empty()),
        ("double_data", !t.double_data.is_empty()),
        ("uint64_data", !t.uint64_data.is_empty()),
    ]
    .into_iter()
    .filter_map(|(n, present)| present.then_some(n))
    .collect()
}

/// The field ONNX keeps `dtype`'s elements in when not in raw_data, and the
/// range each value must be in (onnx.proto, TensorProto): 4-bit types two
/// elements per `int32_data` value (one byte), 8- and 16-bit types and bool
/// one per value (bit patterns for the floats), uint32 in `uint64_data`.
fn from_typed(t: &TensorProto, dtype: DType, code: i32, elements: u64, present: &[&str]) -> anyhow::Result<Vec<u8>> {
    let (field, min, max): (&str, i128, i128) = match dtype {
        DType::F32 => ("float_data", 0, 0),
        DType::F64 => ("double_data", 0, 0),
        DType::I64 => ("int64_data", i128::from(i64::MIN), i128::from(i64::MAX)),
        DType::U64 => ("uint64_data", 0, i128::from(u64::MAX)),
        DType::U32 => ("uint64_data", 0, i128::from(u32::MAX)),
        DType::I32 => ("int32_data", i128::from(i32::MIN), i128::from(i32::MAX)),
        DType::I16 => ("int32_data", i128::from(i16::MIN), i128::from(i16::MAX)),
        DType::I8 => ("int32_data", i128::from(i8::MIN), i128::from(i8::MAX)),
        DType::Bool => ("int32_data", 0, 1),
        DType::U16 | DType::F16 | DType::BF16 => ("int32_data", 0, i128::from(u16::MAX)),
        _ => ("int32_data", 0, i128::from(u8::MAX)),
    };
    if let Some(other) = present.iter().find(|&&p| p != field) {
        bail!("{other} holds its data, but {} is kept in {field}", type_name(code));
    }
    let want = dtype.byte_length(elements).unwrap_or(0);
    let values = match field {
        "float_data" => t.float_data.len(),
        "double_data" => t.double_data.len(),
        "int64_data" => t.int64_data.len(),
        "uint64_data" => t.uint64_data.len(),
        _ => t.int32_data.len(),
    };
    let width = match dtype.width() {
        Width::Bytes(w) => usize::from(w),
        _ => 1,
    };
    let expect = if dtype.width() == Width::Nibble { want } else { elements };
    if u64_from(values) != expect {
        if values == 0 && expect > 0 {
            bail!("no data: {elements} elements, and neither raw_data nor {field}");
        }
        bail!("{field} holds {values} values; {elements} elements of {} take {expect}", type_name(code));
    }
    let mut out = Vec::new();
    out.try_reserve_exact(usize::try_from(want)?).map_err(|_| anyhow!("{want} bytes do not fit in memory"))?;
    let mut put = |v: i128, at: usize| -> anyhow::Result<()> {
        if v < min || v > max {
            bail!("{field}[{at}] = {v} is out of range for {} ({min}..={max})", type_name(code));
        }
        out.extend_from_slice(v.to_le_bytes().get(..width).unwrap_or_default());
        Ok(())
    };
    match field {
        "float_data" => t.float_data.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        "double_data" => t.double_data.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        "int64_data" => t.int64_data.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        "uint64_data" => {
            for (i, &v) in t.uint64_data.iter().enumerate() {
                put(i128::from(v), i)?;
            }
        }
        _ => {
            for (i, &v) in t.int32_data.iter().enumerate() {
                put(i128::from(v), i)?;
            }
        }
    }
    Ok(out)
}

/// The byte rules Kiln holds a payload to, checked here where the bytes are
/// already in memory (external payloads are checked when the output is
/// verified): bool bytes 0 or 1, the unused high nibble of an odd-length
/// 4-bit tensor zero.
fn check_inline(dtype: DType, elements: u64, bytes: &[u8]) -> anyhow::Result<()> {
    if dtype.byte_rule() == ByteRule::ZeroOrOne {
        if let Some((i, b)) = bytes.iter().enumerate().find(|&(_, &b)| b > 1) {
            bail!("bool element {i} is byte {b}: Kiln bools are 0 or 1");
        }
    }
    if dtype.byte_rule() == ByteRule::OddPadZero && elements % 2 == 1 {
        if let Some(&last) = bytes.last().filter(|&&b| b >> 4 != 0) {
            bail!("{elements} 4-bit elements: the last byte's high nibble must be zero (it is {:#x})", last >> 4);
        }
    }
    Ok(())
}

/// The side files of external data, opened once each.
struct Sides<'p> {
    model: &'p Path,
    by_name: HashMap<String, usize>,
    inputs: Vec<Input>,
    /// The [`Model::inputs`] index of the file the last external tensor is in.
    last: usize,
}

impl<'p> Sides<'p> {
    fn new(model: &'p Path) -> Self {
        Sides { model, by_name: HashMap::new(), inputs: Vec::new(), last: 0 }
    }

    /// An external initializer's bytes: `location` (a plain file name beside
    /// the model), `offset` (default 0) and `length` (default: the rest of
    /// the file), which must be exactly the tensor's payload length.
    fn external(&mut self, t: &TensorProto, len: u64) -> anyhow::Result<Source> {
        let (mut location, mut offset, mut length) = (None, 0u64, None);
        for entry in &t.external_data {
            let value = entry.value();
            match entry.key() {
                "location" => location = Some(value),
                "offset" => offset = number("offset", value)?,
                "length" => length = Some(number("length", value)?),
                "checksum" => {}
                other => {
                    bail!("external_data key {other:?} is not one ONNX defines (location, offset, length, checksum)")
                }
            }
        }
        let location = location.ok_or_else(|| anyhow!("external data without a location"))?;
        plain_file_name(location)
            .map_err(|why| anyhow!("external data location {why}; it must be a file in the model's own folder"))?;
        let index = self.open(location)?;
        let size = self.inputs.get(index.wrapping_sub(1)).map_or(0, |i| u64_from(i.bytes().len()));
        let length = length.unwrap_or_else(|| size.saturating_sub(offset));
        if length != len {
            bail!("external data length {length}; the tensor takes {len} bytes");
        }
        if offset.checked_add(length).is_none_or(|end| end > size) {
            bail!("external data [{offset}, +{length}) ends past {location} ({size} bytes)");
        }
        self.last = index;
        Ok(Source::File { offset })
    }

    /// Opens `name` beside the model, once; its [`Model::inputs`] index.
    fn open(&mut self, name: &str) -> anyhow::Result<usize> {
        if let Some(&i) = self.by_name.get(name) {
            return Ok(i);
        }
        let path = self.model.with_file_name(name);
        let folder = paths::folder_of(self.model);
        let followed = paths::may_open(&folder, &path)
            .map_err(|e| anyhow!("external data file {name} is missing ({e}); never a partial model"))?;
        if !followed {
            bail!("external data file {name} is a symbolic link out of the model's folder; not followed");
        }
        let input = super::open(&path)?;
        self.inputs.push(input);
        let index = self.inputs.len();
        self.by_name.insert(name.to_string(), index);
        Ok(index)
    }
}

/// An `offset` or `length` value: decimal digits.
fn number(key: &str, value: &str) -> anyhow::Result<u64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        bail!("external data {key} {value:?} is not a decimal number");
    }
    value.parse().map_err(|_| anyhow!("external data {key} {value} is too large"))
}
