//! ONNX out, runnable: `kiln convert model.onnx -o model.kiln --onnx-graph G`
//! writes the model's graph again with every initializer turned into
//! external data that points into the Kiln output (`location`: the Kiln
//! file, or for a sharded output the shard, holding the tensor; `offset`,
//! `length`: its payload's bytes there). A runtime that reads ONNX external
//! data (onnxruntime) then reads the weights from the Kiln file as they are.
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
use kiln_nostd::int::u64_from;
use kiln_nostd::model::{Kind, Manifest, Model as KilnModel};
use kiln_nostd::Limits;
use prost::Message;

use super::proto::tensor_proto::DataLocation;
use super::proto::StringStringEntryProto;
use super::{decode, known_ir_version, map_shared};
use crate::convert::error::{io_fail, Usage};
use crate::convert::outfile::{self, Target};
use crate::convert::Input;
use crate::platform;

/// Where a tensor's payload is in the Kiln output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The file holding it: OUT, or a shard beside it (a plain file name).
    pub file: String,
    /// Its payload's first byte in that file.
    pub offset: u64,
    /// Its payload's length.
    pub len: u64,
}

/// The folder of `path` ("." for a bare name), canonicalized where it exists.
fn folder(path: &Path) -> PathBuf {
    let dir = crate::models::folder_of(path);
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
pub fn places(out: &Path) -> anyhow::Result<HashMap<String, Place>> {
    let input = crate::convert::open(out)?;
    let bytes = input.bytes();
    let name_of = |p: &Path| p.file_name().and_then(|n| n.to_str()).map(str::to_string);
    let mut places = HashMap::new();
    if Kind::of(bytes) == Some(Kind::Manifest) {
        let mut scratch = kiln_nostd::host::manifest_scratch(bytes, &Limits::MAX);
        let m = Manifest::parse_with(bytes, &Limits::MAX, Some(&mut scratch))
            .map_err(|e| anyhow!("{}: the manifest written does not parse: {e}", out.display()))?;
        for entry in m.shards() {
            let name = entry.name.as_str();
            let shard = crate::convert::open(&out.with_file_name(name))?;
            add(&mut places, name, shard.bytes())?;
        }
    } else {
        let name = name_of(out).ok_or_else(|| anyhow!("{}: not a UTF-8 file name", out.display()))?;
        add(&mut places, &name, bytes)?;
    }
    Ok(places)
}

/// The tensors of one Kiln file (a model file, or a bare directory block).
fn add(places: &mut HashMap<String, Place>, file: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let directory = match KilnModel::parse(bytes) {
        Ok(m) => m.directory(),
        Err(_) => kiln_nostd::Parser::new().parse(bytes).map_err(|e| anyhow!("{file}: not Kiln: {e}"))?,
    };
    for t in directory.iter() {
        let name = t.name().ok_or_else(|| anyhow!("{file}: tensor {} has no name", t.index()))?;
        let place =
            Place { file: file.to_string(), offset: u64_from(t.absolute_offset()), len: u64_from(t.byte_len()) };
        places.insert(name.to_string(), place);
    }
    Ok(())
}

/// Writes the graph of the ONNX model `input` to `graph`, its initializers
/// pointing into the Kiln output OUT; returns the number of initializers.
pub fn write(input: &Input, out: &Path, graph: &Path, fsync: bool) -> anyhow::Result<usize> {
    let mut onnx = decode(map_shared(input)?)?;
    let places = places(out)?;
    let g = onnx.graph.as_mut().ok_or_else(|| anyhow!("the model has no graph"))?;
    for t in &mut g.initializer {
        let place =
            places.get(t.name()).ok_or_else(|| anyhow!("initializer {:?} is not in {}", t.name(), out.display()))?;
        t.raw_data = None;
        t.float_data.clear();
        t.int32_data.clear();
        t.int64_data.clear();
        t.double_data.clear();
        t.uint64_data.clear();
        t.data_location = Some(i32::from(DataLocation::External));
        let entry = |k: &str, v: String| StringStringEntryProto { key: Some(k.to_string()), value: Some(v) };
        t.external_data = vec![
            entry("location", place.file.clone()),
            entry("offset", place.offset.to_string()),
            entry("length", place.len.to_string()),
        ];
    }
    let count = g.initializer.len();
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
    Ok(count)
}
