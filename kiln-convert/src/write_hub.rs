//! Writing a sharded model as the Hugging Face Hub lays it out (the way back
//! from a sharded Kiln model, or a re-split with `--max-shard-size`): the
//! shards `STEM-00001-of-0000N.safetensors` beside OUT, then the index
//! `STEM.safetensors.index.json`. STEM is OUT's file name without
//! `.safetensors.index.json` or `.safetensors`, so OUT `model.safetensors`
//! gives exactly the names `transformers` and `huggingface_hub` write
//! (`model-00001-of-00003.safetensors`, `model.safetensors.index.json`), as
//! the Kiln sharded output names its shards `OUT-00001-of-0000N.kiln`.
//!
//! Each shard is one safetensors file planned and written by the single-file
//! writer (the model's metadata in every shard's `__metadata__`), to a
//! temporary file beside its target, checked with the `safetensors` crate;
//! the index is written last, read back with our own index reader, and every
//! file is fsynced and renamed into place, the shards first and the index
//! last, so a crash never leaves an index that points at wrong shards.
//! Shards of an earlier conversion to the same name with another count (and
//! an earlier single file at OUT) are removed only after that.

use std::collections::HashSet;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};

use super::copy::Sink;
use super::error::io_fail;
use super::model::Model;
use super::outfile::{self, Target, Temp};
use super::ShardSet;
use super::{index, write_safetensors, write_sharded, Input, Progress};

/// OUT's file name without `.safetensors.index.json` or `.safetensors`.
fn stem(out: &Path) -> String {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.strip_suffix(".safetensors.index.json").or_else(|| name.strip_suffix(".safetensors"));
    stem.unwrap_or(&name).to_owned()
}

/// Shard `index` of `count` for OUT: `STEM-0000k-of-0000N.safetensors` in OUT's folder.
pub fn shard_path(out: &Path, index: usize, count: usize) -> PathBuf {
    out.with_file_name(format!("{}-{index:05}-of-{count:05}.safetensors", stem(out)))
}

/// The index for OUT: `STEM.safetensors.index.json` in OUT's folder.
pub fn index_path(out: &Path) -> PathBuf {
    out.with_file_name(format!("{}.safetensors.index.json", stem(out)))
}

/// Writes `model`'s tensors as the safetensors shards `ranges` (in order) and
/// the index, for OUT `out`. `inputs` hold the payloads; `progress` sees
/// the copy of all of them; `fsync`: every file. Every output name is resolved (and
/// refused when it is one of the input files) before anything is written.
pub fn write(
    out: &Target,
    inputs: &[Input],
    model: &mut Model,
    ranges: &[Range<usize>],
    notes: &mut Vec<String>,
    progress: &dyn Progress,
    fsync: bool,
) -> anyhow::Result<ShardSet> {
    let count = ranges.len();
    let mut targets = Vec::with_capacity(count);
    for k in 1..=count {
        targets.push(super::resolve_out(&shard_path(&out.given, k, count), inputs)?);
    }
    let index_target = super::resolve_out(&index_path(&out.given), inputs)?;
    let total = model.payload_bytes();
    progress.start(total);
    // A note every shard's plan repeats (the converter keys left out) is said once.
    let mut said: HashSet<String> = notes.iter().cloned().collect();
    let mut files = Vec::with_capacity(count.saturating_add(1));
    let mut names = Vec::with_capacity(count);
    let mut bytes = 0u64;
    for (range, target) in ranges.iter().zip(targets) {
        let shown = target.given.display().to_string();
        let part = model.tensors.get(range.clone()).ok_or_else(|| anyhow!("a shard range past the tensors"))?;
        // One shard's header at a time: each holds the whole metadata.
        let mut part_notes = Vec::new();
        let plan = write_safetensors::plan_part(&model.metadata, part, &mut part_notes)
            .with_context(|| format!("shard {shown}"))?;
        for n in part_notes {
            if said.insert(n.clone()) {
                notes.push(n);
            }
        }
        let temp = target.temp()?;
        let mut sink = Sink::new(temp.file()?, inputs, progress, shown.clone());
        write_safetensors::write_part(&mut sink, part, &plan).with_context(|| format!("shard {shown}"))?;
        bytes = bytes.saturating_add(sink.written());
        drop(sink.finish()?);
        super::verify(temp.path(), super::To::Safetensors)
            .map_err(|e| anyhow!("the written shard {shown} did not check out: {e}"))?;
        names.push(target.given.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
        files.push((temp, target));
    }
    progress.finish();
    let index_temp = index_target.temp()?;
    let shown = index_target.given.display().to_string();
    bytes = bytes.saturating_add(write_index(&index_temp, model, ranges, &names, total, &shown)?);
    check_index(&index_temp, model, ranges, &names, total).map_err(|e| anyhow!("the written index {shown}: {e:#}"))?;
    if fsync {
        for (temp, _) in &files {
            outfile::sync(temp)?;
        }
        outfile::sync(&index_temp)?;
    }
    let mut stale = write_sharded::stale_beside(&out.given, &stem(&out.given), ".safetensors", count, inputs);
    // An earlier single file at OUT: beside the index, a loader would take it
    // instead (transformers looks for model.safetensors first).
    if out.given != index_target.given && std::fs::symlink_metadata(&out.given).is_ok_and(|m| m.is_file()) {
        stale.push(out.given.clone());
    }
    files.push((index_temp, index_target));
    Ok(ShardSet { files, bytes, stale })
}

/// The index, as `transformers` writes it (`json.dumps(index, indent=2,
/// sort_keys=True)` and a newline): `total_size`, the tensors' payload bytes,
/// and every tensor's shard file, keys sorted. Returns the bytes written.
fn write_index(
    temp: &Temp,
    model: &Model,
    ranges: &[Range<usize>],
    names: &[String],
    total: u64,
    shown: &str,
) -> anyhow::Result<u64> {
    let mut rows: Vec<(usize, usize)> = Vec::with_capacity(model.tensors.len());
    for (k, range) in ranges.iter().enumerate() {
        rows.extend(range.clone().map(|i| (i, k)));
    }
    let name = |i: usize| model.tensors.get(i).map_or("", |t| &*t.name);
    rows.sort_unstable_by(|a, b| name(a.0).cmp(name(b.0)));
    let file = temp.file()?;
    let mut w = std::io::BufWriter::with_capacity(1 << 16, &file);
    let mut emit = || -> std::io::Result<()> {
        write!(w, "{{\n  \"metadata\": {{\n    \"total_size\": {total}\n  }},\n  \"weight_map\": {{")?;
        for (j, &(i, k)) in rows.iter().enumerate() {
            w.write_all(if j == 0 { b"\n    " } else { b",\n    " })?;
            serde_json::to_writer(&mut w, name(i))?;
            w.write_all(b": ")?;
            serde_json::to_writer(&mut w, names.get(k).map_or("", String::as_str))?;
        }
        w.write_all(if rows.is_empty() { b"}\n}\n" } else { b"\n  }\n}\n" })?;
        w.flush()
    };
    emit().map_err(io_fail(format!("cannot write {shown}")))?;
    drop(w);
    let len = file.metadata().map_err(io_fail(format!("cannot write {shown}")))?.len();
    Ok(len)
}

/// The written index read back by our own index reader: the shard names,
/// `total_size`, and every `weight_map` entry against the shards' tensors.
fn check_index(
    temp: &Temp,
    model: &mut Model,
    ranges: &[Range<usize>],
    names: &[String],
    total: u64,
) -> anyhow::Result<()> {
    let scan = index::scan(temp.path())?;
    if scan.shards != names {
        bail!("it names the shards {:?}, not {names:?}", scan.shards);
    }
    if scan.total_size != Some(total) {
        bail!("its total_size is {:?}, not {total}", scan.total_size);
    }
    // The reader checks tensors against the shard each is in: the output shard now.
    for (k, range) in ranges.iter().enumerate() {
        for t in model.tensors.get_mut(range.clone()).unwrap_or_default() {
            t.shard = k;
        }
    }
    index::check(temp.path(), &scan, model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_hub() {
        let out = Path::new("back/model.safetensors");
        assert_eq!(shard_path(out, 2, 3), PathBuf::from("back/model-00002-of-00003.safetensors"));
        assert_eq!(index_path(out), PathBuf::from("back/model.safetensors.index.json"));
        // The index's own name as OUT, and a name without the extension.
        let out = Path::new("d/x.safetensors.index.json");
        assert_eq!(shard_path(out, 1, 12), PathBuf::from("d/x-00001-of-00012.safetensors"));
        assert_eq!(index_path(out), PathBuf::from("d/x.safetensors.index.json"));
        assert_eq!(shard_path(Path::new("m"), 1, 2), PathBuf::from("m-00001-of-00002.safetensors"));
        assert_eq!(index_path(Path::new("m")), PathBuf::from("m.safetensors.index.json"));
    }
}
