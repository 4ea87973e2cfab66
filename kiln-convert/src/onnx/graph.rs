//! ONNX out, runnable: `kiln convert model.onnx -o model.kiln --onnx-graph G`
//! writes the model's graph again by rules R1 and R2 of docs/onnx.md
//! ([`kiln_onnx`]): every weight (Constant values lifted to initializers of
//! their graph first; subgraph initializers where they stand) becomes
//! external data that points into the Kiln output (`location`: the Kiln
//! file, or for a sharded output the shard, holding the tensor; `offset`,
//! `length`: its payload's bytes there), except what ONNX Runtime must read
//! while it resolves the graph (shapes, axes), which stays inline. The graph names the
//! Kiln model (`kiln.model`), and the Kiln model records the graph's SHA-256.
//! A runtime that reads ONNX external data (onnxruntime) then reads the
//! weights from the Kiln file as they are; the sessions of kiln-py and the
//! npm package check the pair first ([`kiln_onnx::check`]), and so does the
//! converter, on what it wrote.
//!
//! The tensors' places are read back from the written, checked Kiln output
//! by the core's parser, not from the writer's plan, so the graph points at
//! what is on disk. Everything else in the graph is kept: the messages are
//! the whole onnx-ml.proto schema, and a model of a newer IR version (which
//! might carry fields this schema does not know, and prost would drop) is
//! refused before anything is written.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use kiln_model::{Kind, Manifest, Model as KilnModel};
use kiln_nostd::int::u64_from;
use kiln_nostd::{DType, Limits};
use kiln_onnx::rule::payload_len;
use kiln_onnx::{KilnTensor, Place};
use prost::Message;

use super::proto::tensor_proto::DataLocation;
use super::proto::{GraphProto, StringStringEntryProto, TensorProto};
use super::{decode, known_ir_version, map_shared};
use crate::error::{io_fail, Usage};
use crate::outfile::{self, Target};
use crate::platform;
use crate::Input;

/// Where a tensor's payload is in the Kiln output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spot {
    /// The file holding it: OUT, or a shard beside it (a plain file name).
    pub file: String,
    /// The tensor as the file holds it (dtype, shape, payload offset and length).
    pub tensor: KilnTensor,
}

/// What the graph written holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// Initializers that are external data in the Kiln output.
    pub external: usize,
    /// Initializers left inline (rule R1), and their payload bytes.
    pub inline: usize,
    /// See [`Written::inline`].
    pub inline_bytes: u64,
    /// Constant values and subgraph initializers moved to the main graph.
    pub lifted: usize,
}

/// The folder of `path` ("." for a bare name), canonicalized where it exists.
fn folder(path: &Path) -> PathBuf {
    let dir = crate::paths::folder_of(path);
    dir.canonicalize().unwrap_or(dir)
}

/// What `--onnx-graph` needs, checked before anything is read or written:
/// an ONNX input of a known IR version, a Kiln output, and the graph in the
/// output's folder (a runtime resolves `location` in the graph's folder).
pub fn precheck(input: &Input, graph: &Path, out: &Path) -> anyhow::Result<()> {
    if folder(graph) != folder(out) {
        return Err(Usage(format!(
            "--onnx-graph {} must be in the folder of -o {} (a runtime looks for the external data beside the graph)",
            graph.display(),
            out.display()
        ))
        .into());
    }
    if graph.file_name() == out.file_name() {
        return Err(Usage(format!("--onnx-graph {} is -o itself", graph.display())).into());
    }
    let onnx = decode(map_shared(input)?).with_context(|| format!("{} (onnx)", input.path.display()))?;
    let known = known_ir_version();
    if onnx.ir_version() > known {
        bail!(
            "{} (onnx): IR version {} is newer than this converter's schema ({known}); the graph might hold \
             fields it would drop, so --onnx-graph is refused (the tensors alone convert without it)",
            input.path.display(),
            onnx.ir_version()
        );
    }
    Ok(())
}

/// Every tensor of the Kiln output OUT (a model file, a directory, or a
/// manifest and its shards) by name, with its file and payload range.
pub fn places(out: &Path) -> anyhow::Result<HashMap<String, Spot>> {
    let input = crate::open(out)?;
    let bytes = input.bytes();
    let name_of = |p: &Path| p.file_name().and_then(|n| n.to_str()).map(str::to_string);
    let mut places = HashMap::new();
    if Kind::of(bytes) == Some(Kind::Manifest) {
        let mut scratch = kiln_model::host::manifest_scratch(bytes, &Limits::MAX);
        let m = Manifest::parse_with(bytes, &Limits::MAX, Some(&mut scratch))
            .map_err(|e| anyhow!("{}: the manifest written does not parse: {e}", out.display()))?;
        for entry in m.shards() {
            let name = entry.name.as_str();
            let shard = crate::open(&out.with_file_name(name))?;
            add(&mut places, name, shard.bytes())?;
        }
    } else {
        let name = name_of(out).ok_or_else(|| anyhow!("{}: not a UTF-8 file name", out.display()))?;
        add(&mut places, &name, bytes)?;
    }
    Ok(places)
}

/// The tensors of one Kiln file (a model file, or a bare directory block).
fn add(places: &mut HashMap<String, Spot>, file: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let directory = match KilnModel::parse(bytes) {
        Ok(m) => m.directory(),
        Err(_) => kiln_nostd::Parser::new().parse(bytes).map_err(|e| anyhow!("{file}: not Kiln: {e}"))?,
    };
    for t in directory.iter() {
        let name = t.name().ok_or_else(|| anyhow!("{file}: tensor {} has no name", t.index()))?;
        let tensor = KilnTensor {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            offset: u64_from(t.absolute_offset()),
            len: u64_from(t.byte_len()),
        };
        places.insert(name.to_string(), Spot { file: file.to_string(), tensor });
    }
    Ok(())
}

/// Where OUT records the graph's digest: the byte offset of the
/// `kiln.convert.onnx_graph_sha256` value, and the value.
fn recorded(bytes: &[u8]) -> anyhow::Result<Option<(u64, String)>> {
    let value = if Kind::of(bytes) == Some(Kind::Manifest) {
        let mut scratch = kiln_model::host::manifest_scratch(bytes, &Limits::MAX);
        let m = Manifest::parse_with(bytes, &Limits::MAX, Some(&mut scratch))
            .map_err(|e| anyhow!("the manifest written does not parse: {e}"))?;
        m.metadata().get(kiln_onnx::KEY_GRAPH_SHA256)
    } else {
        KilnModel::parse(bytes).ok().and_then(|m| m.metadata().get(kiln_onnx::KEY_GRAPH_SHA256))
    };
    Ok(value.map(|v| (u64_from(v.as_ptr().addr().wrapping_sub(bytes.as_ptr().addr())), v.to_string())))
}

/// Writes the graph of the ONNX model `input` to `graph` by rules R1 and R2,
/// its weights pointing into the Kiln output OUT, records the graph's
/// digest in OUT, and checks the pair as a session would.
pub fn write(input: &Input, out: &Path, graph: &Path, fsync: bool) -> anyhow::Result<Written> {
    let mut onnx = decode(map_shared(input)?)?;
    let read = kiln_onnx::data_read(&onnx);
    let lifted = kiln_onnx::lift(&mut onnx);
    let places = places(out)?;
    let out_name = out
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow!("{}: not a UTF-8 file name", out.display()))?
        .to_string();
    let g = onnx.graph.as_mut().ok_or_else(|| anyhow!("the model has no graph"))?;
    let mut written = Written { lifted, ..Written::default() };
    let mut fault = None;
    let mut opened: HashMap<String, Input> = HashMap::new();
    // A tensor's payload as the Kiln output holds it (for one R1 keeps inline
    // that the input held as external data).
    let mut payload = |spot: &Spot| -> anyhow::Result<prost::bytes::Bytes> {
        if !opened.contains_key(&spot.file) {
            opened.insert(spot.file.clone(), crate::open(&out.with_file_name(&spot.file))?);
        }
        let bytes = opened.get(&spot.file).map(Input::bytes).unwrap_or_default();
        let start = usize::try_from(spot.tensor.offset).ok();
        let end = start.zip(usize::try_from(spot.tensor.len).ok()).and_then(|(s, n)| s.checked_add(n));
        start
            .zip(end)
            .and_then(|(s, e)| bytes.get(s..e))
            .map(prost::bytes::Bytes::copy_from_slice)
            .ok_or_else(|| anyhow!("{}: the payload range is past its end", spot.file))
    };
    each_initializer(g, &mut |t| {
        if fault.is_none() {
            fault = point(t, &read, &places, &mut written, &mut payload).err();
        }
    });
    if let Some(e) = fault {
        return Err(e.context(format!("the Kiln output {}", out.display())));
    }
    onnx.metadata_props.retain(|p| p.key() != kiln_onnx::KEY_MODEL);
    onnx.metadata_props
        .push(StringStringEntryProto { key: Some(kiln_onnx::KEY_MODEL.to_string()), value: Some(out_name.clone()) });
    let encoded = onnx.encode_to_vec();
    let target = Target::resolve(graph, &input.file)?;
    let temp = target.temp()?;
    let file = temp.file()?;
    platform::write_all_at(&file, &encoded, 0).map_err(io_fail(format!("cannot write {}", graph.display())))?;
    drop(file);
    if fsync {
        outfile::sync(&temp)?;
    }
    outfile::persist(vec![(temp, &target)])?;
    record_digest(out, &kiln_onnx::sha256_hex(&encoded), fsync)?;
    verify(&encoded, out, &places)
        .with_context(|| format!("{}: the graph written fails its own check", graph.display()))?;
    Ok(written)
}

/// Calls `f` on every initializer of `g` and of its subgraphs.
fn each_initializer(g: &mut GraphProto, f: &mut dyn FnMut(&mut TensorProto)) {
    g.initializer.iter_mut().for_each(&mut *f);
    for node in &mut g.node {
        for attr in &mut node.attribute {
            for sub in attr.g.iter_mut().chain(attr.graphs.iter_mut()) {
                each_initializer(sub, f);
            }
        }
    }
}

/// Rule R1 for one initializer: left inline (counted), or made external
/// data pointing at its tensor in the Kiln output. One that R1 keeps inline
/// but the input held as external data (in a side file) is made inline, its
/// bytes the Kiln tensor's (`payload`): the graph points at no side file.
fn point(
    t: &mut TensorProto,
    read: &kiln_onnx::DataRead,
    places: &HashMap<String, Spot>,
    written: &mut Written,
    payload: &mut dyn FnMut(&Spot) -> anyhow::Result<prost::bytes::Bytes>,
) -> anyhow::Result<()> {
    if kiln_onnx::place(read, t.name(), t.data_type(), &t.dims) == Place::Inline {
        if t.data_location == Some(i32::from(DataLocation::External)) {
            let spot = places.get(t.name()).ok_or_else(|| {
                anyhow!(
                    "initializer {:?} is external data of type {}, which the Kiln output does not hold",
                    t.name(),
                    kiln_onnx::dtype::type_name(t.data_type())
                )
            })?;
            let bytes = payload(spot)?;
            clear_data(t);
            t.external_data.clear();
            t.data_location = None;
            t.raw_data = Some(bytes);
        }
        written.inline = written.inline.saturating_add(1);
        let size = kiln_onnx::dtype::kiln_dtype(t.data_type()).and_then(|d: DType| payload_len(d, &t.dims));
        let bytes = size.unwrap_or_else(|| t.raw_data.as_ref().map_or(0, |r| u64_from(r.len())));
        written.inline_bytes = written.inline_bytes.saturating_add(bytes);
        return Ok(());
    }
    let spot = places.get(t.name()).ok_or_else(|| anyhow!("initializer {:?} is not in it", t.name()))?;
    clear_data(t);
    t.data_location = Some(i32::from(DataLocation::External));
    let entry = |k: &str, v: String| StringStringEntryProto { key: Some(k.to_string()), value: Some(v) };
    t.external_data = vec![
        entry("location", spot.file.clone()),
        entry("offset", spot.tensor.offset.to_string()),
        entry("length", spot.tensor.len.to_string()),
    ];
    written.external = written.external.saturating_add(1);
    Ok(())
}

/// Takes the tensor's data out of the graph (raw and typed fields).
fn clear_data(t: &mut TensorProto) {
    t.raw_data = None;
    t.float_data.clear();
    t.int32_data.clear();
    t.int64_data.clear();
    t.double_data.clear();
    t.uint64_data.clear();
}

/// Sets the digest in OUT, where the reader left a placeholder of the same length.
fn record_digest(out: &Path, digest: &str, fsync: bool) -> anyhow::Result<()> {
    let input = crate::open(out)?;
    let (at, old) = recorded(input.bytes())?.ok_or_else(|| {
        anyhow!("{}: no {} placeholder to record the graph's digest in", out.display(), kiln_onnx::KEY_GRAPH_SHA256)
    })?;
    if old.len() != digest.len() {
        bail!("{}: the digest placeholder is {} bytes, not {}", out.display(), old.len(), digest.len());
    }
    drop(input);
    let file =
        std::fs::OpenOptions::new().write(true).open(out).map_err(io_fail(format!("cannot open {}", out.display())))?;
    platform::write_all_at(&file, digest.as_bytes(), at).map_err(io_fail(format!("cannot write {}", out.display())))?;
    if fsync {
        file.sync_all().map_err(io_fail(format!("cannot sync {}", out.display())))?;
    }
    Ok(())
}

/// The check a session makes ([`kiln_onnx::check`]), on what was written.
fn verify(encoded: &[u8], out: &Path, places: &HashMap<String, Spot>) -> anyhow::Result<()> {
    let req = kiln_onnx::requirements(encoded)?;
    let input = crate::open(out)?;
    let digest = recorded(input.bytes())?.map(|(_, v)| v);
    kiln_onnx::pair(&req, encoded, digest.as_deref(), |file, name| {
        places.get(name).filter(|s| s.file == file).map(|s| s.tensor.clone())
    })?;
    Ok(())
}
