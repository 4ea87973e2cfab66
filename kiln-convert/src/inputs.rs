//! What IN names, and every file it stands for: one file; a Hugging Face
//! index (`model.safetensors.index.json`) with its shards; a folder holding
//! one index or exactly one `.safetensors` file; any file of a llama.cpp
//! gguf-split set (`NAME-00001-of-00003.gguf`) with its siblings.
//!
//! Opening ([`open_all`]) only finds and opens the files (by name, and for
//! an index after reading its shard names, every one a plain file name in
//! the index's folder); reading ([`read_all`]) parses each file's header
//! and checks the set: never a partial model.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};

use kiln_model::{Kind as ModelKind, Manifest};
use kiln_nostd::Limits;

use super::error::Usage;
use super::index::{self, IndexScan};
use super::kiln_in;
use super::meta::Dups;
use super::model::{Format, Model, ReadOptions, Split};
use super::{format_of, open, read_model, Input};
use crate::paths;

/// Files beside a model's tensors in a Hugging Face folder that are not
/// tensors (configuration, tokenizer); `kiln convert` does not carry them.
const COMPANIONS: [&str; 12] = [
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "chat_template.json",
    "preprocessor_config.json",
];

/// How IN is laid out.
#[derive(Debug)]
pub enum Kind {
    /// One file (its format detected later).
    Single,
    /// A Hugging Face index: the shards are the inputs, in file name order.
    Index {
        /// The index file.
        path: PathBuf,
        /// What its first pass found.
        scan: IndexScan,
    },
    /// A Kiln manifest: its shards are the inputs, in manifest order, and
    /// the manifest itself the last one (so no output may replace it).
    Manifest {
        /// The manifest file.
        path: PathBuf,
    },
    /// A gguf-split set of `count` files, the inputs in position order.
    GgufSplit {
        /// `split.count` as the file names say it.
        count: u64,
    },
}

/// IN, opened: its layout, its files and notes about what was found.
#[derive(Debug)]
pub struct Opened {
    /// The layout.
    pub kind: Kind,
    /// Every input file, in input-shard order.
    pub files: Vec<Input>,
    /// Notes (the companion files of a folder).
    pub notes: Vec<String>,
}

impl Opened {
    /// The input's format: forced or detected for one file; safetensors for
    /// an index, GGUF for a split set.
    pub fn format(&self, from: Option<Format>) -> anyhow::Result<Format> {
        match (&self.kind, self.files.first()) {
            (Kind::Single, Some(input)) => format_of(input, &input.path, from),
            (Kind::Index { .. }, _) => Ok(Format::Safetensors),
            (Kind::GgufSplit { .. }, _) => Ok(Format::Gguf),
            (Kind::Manifest { .. }, _) => Ok(Format::Kiln),
            (Kind::Single, None) => Err(anyhow!("no input file")),
        }
    }
}

/// `name` in the folder of `path` (a bare name stays bare, for messages).
fn beside(path: &Path, name: &str) -> PathBuf {
    path.with_file_name(name)
}

/// Finds and opens every file IN stands for.
pub fn open_all(path: &Path) -> anyhow::Result<Opened> {
    let is_dir = std::fs::metadata(path).is_ok_and(|m| m.is_dir());
    if is_dir {
        return open_folder(path);
    }
    if is_index_name(path) {
        return open_index(path, Vec::new());
    }
    if let Some((prefix, no, count)) = split_name(path).filter(|&(_, _, count)| count > 1) {
        return open_split(path, &prefix, no, count);
    }
    let input = open(path)?;
    if ModelKind::of(input.bytes()) == Some(ModelKind::Manifest) {
        return open_manifest(path, input);
    }
    Ok(Opened { kind: Kind::Single, files: vec![input], notes: Vec::new() })
}

/// Parses a manifest (the frame, the Frozen rules, steps M1 to M5) with the
/// wire maximum as caps, as the converter reads every Kiln input.
fn parse_manifest<'b>(path: &Path, bytes: &'b [u8], scratch: &'b mut [u32]) -> anyhow::Result<Manifest<'b>> {
    Manifest::parse_with(bytes, &Limits::MAX, Some(scratch)).map_err(|e| {
        anyhow!(
            "{} (kiln): not a valid manifest (spec/model-file.md): {} at byte {}: {} (rule {})",
            path.display(),
            e.code(),
            e.offset_u64(),
            e.rule().description(),
            e.rule().id()
        )
    })
}

/// A Kiln manifest: its shards by the names it gives (each a plain file
/// name, step M2), opened in the manifest's own folder only and never
/// through a symbolic link that leads out of it, as `kiln validate` opens them.
fn open_manifest(path: &Path, manifest: Input) -> anyhow::Result<Opened> {
    let mut scratch = kiln_model::host::manifest_scratch(manifest.bytes(), &Limits::MAX);
    let m = parse_manifest(path, manifest.bytes(), &mut scratch)?;
    let folder = paths::folder_of(path);
    let mut files = Vec::with_capacity(m.shard_count().saturating_add(1));
    for entry in m.shards() {
        let name = entry.name.as_str();
        let shard = beside(path, name);
        match paths::may_open(&folder, &shard) {
            Ok(true) => {}
            Ok(false) => {
                bail!("{}: shard {name} is a symbolic link out of the manifest's folder; not followed", path.display())
            }
            Err(_) => {
                bail!("{}: shard {name} is missing (the manifest names it; never a partial model)", path.display())
            }
        }
        files.push(open(&shard).with_context(|| format!("{}: shard {name}", path.display()))?);
    }
    files.push(manifest);
    Ok(Opened { kind: Kind::Manifest { path: path.to_path_buf() }, files, notes: Vec::new() })
}

/// The shards of a manifest, each checked against it as `kiln validate`
/// checks it (length, its own checks, model id, position, tensors, prefix
/// digest, gaps and element bytes) except the payload digests, which are
/// checked as the payloads are copied ([`Source::Verified`](super::model::Source)):
/// every payload byte is read once.
fn read_manifest(path: &Path, mut files: Vec<Input>, opts: &ReadOptions) -> anyhow::Result<Model> {
    let manifest = files.pop().ok_or_else(|| anyhow!("no manifest"))?;
    let mut scratch = kiln_model::host::manifest_scratch(manifest.bytes(), &Limits::MAX);
    let m = parse_manifest(path, manifest.bytes(), &mut scratch)?;
    let id = m.model_id();
    let mut model = Model::new(Format::Kiln, opts);
    // The manifest's metadata is the model's (shards carry only their padding key).
    for (k, v) in m.metadata().iter() {
        model.metadata.push(k, v, "")?;
    }
    model.metadata.seal(Dups::Refuse)?;
    model.tensors.try_reserve_exact(m.tensor_count()).ok();
    for (k, (entry, input)) in m.shards().zip(&files).enumerate() {
        let name = entry.name.as_str();
        let bytes = input.bytes();
        let fault = |e: kiln_model::Error| {
            let tensor = kiln_host::fault::tensor_of_shard(&m, &entry, bytes, &e)
                .map(|t| format!(" (tensor {t})"))
                .unwrap_or_default();
            anyhow!(
                "{}: shard {name}: {} at byte {}{tensor}: {} (rule {})",
                path.display(),
                e.code(),
                e.offset_u64(),
                e.rule().description(),
                e.rule().id()
            )
        };
        // Name scratch for both parses: without it, names are compared pairwise.
        let mut names = kiln_model::host::scratch_for(bytes, &Limits::MAX);
        let parser = kiln_model::host::parser(Limits::MAX, &mut names);
        kiln_model::check_shard(&m, &id, &entry, Some(bytes), false, parser).map_err(fault)?;
        let parser = kiln_model::host::parser(Limits::MAX, &mut names);
        let shard = kiln_model::Model::parse_with(bytes, parser).map_err(fault)?;
        let digests = shard.digests().ok_or_else(|| anyhow!("{}: shard {name} has no digests", path.display()))?;
        kiln_in::push_tensors(&mut model.tensors, &shard.directory(), Some(digests), k)
            .with_context(|| format!("{}: shard {name}", path.display()))?;
    }
    model.inputs = files;
    model.inputs.push(manifest);
    model.sharded = true;
    Ok(model)
}

/// A name of a Hugging Face index: `*.json` (`model.safetensors.index.json`).
fn is_index_name(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// A folder: one `*.safetensors.index.json`, or exactly one `.safetensors` file.
fn open_folder(dir: &Path) -> anyhow::Result<Opened> {
    let read = std::fs::read_dir(dir).map_err(super::error::io_fail(format!("cannot list {}", dir.display())))?;
    let mut names = BTreeSet::new();
    for entry in read {
        let entry = entry.map_err(super::error::io_fail(format!("cannot list {}", dir.display())))?;
        names.insert(entry.file_name().to_string_lossy().into_owned());
    }
    let indexes: Vec<&String> = names.iter().filter(|n| n.ends_with(".safetensors.index.json")).collect();
    let files: Vec<&String> = names.iter().filter(|n| n.ends_with(".safetensors")).collect();
    let notes = companions_note(dir, &names).into_iter().collect();
    match (indexes.as_slice(), files.as_slice()) {
        ([index], _) => open_index(&dir.join(index.as_str()), notes),
        ([], [file]) => {
            let input = open(&dir.join(file.as_str()))?;
            Ok(Opened { kind: Kind::Single, files: vec![input], notes })
        }
        _ => Err(Usage(format!(
            "{}: a folder must hold one *.safetensors.index.json or exactly one .safetensors file; it holds {}",
            dir.display(),
            listing(&indexes, &files)
        ))
        .into()),
    }
}

/// "2 index files (a, b) and 3 .safetensors files (x, y, z)", for the usage error.
fn listing(indexes: &[&String], files: &[&String]) -> String {
    let list = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
    let mut parts = Vec::new();
    if !indexes.is_empty() {
        parts.push(format!("{} index files ({})", indexes.len(), list(indexes)));
    }
    parts.push(format!(
        "{} .safetensors files{}",
        files.len(),
        if files.is_empty() { String::new() } else { format!(" ({})", list(files)) }
    ));
    parts.join(" and ")
}

/// The note naming a folder's configuration and tokenizer files, which are not carried.
fn companions_note(dir: &Path, names: &BTreeSet<String>) -> Option<String> {
    let found: Vec<&str> = COMPANIONS.iter().copied().filter(|c| names.contains(*c)).collect();
    if found.is_empty() {
        return None;
    }
    Some(format!(
        "{} holds {}: not tensors, NOT carried into the Kiln file; copy them beside the output by hand if a loader needs them",
        dir.display(),
        found.join(", ")
    ))
}

/// An index: its shard names (each checked before anything is opened), then the shards.
fn open_index(path: &Path, notes: Vec<String>) -> anyhow::Result<Opened> {
    let scan = index::scan(path)?;
    let mut files = Vec::with_capacity(scan.shards.len());
    for name in &scan.shards {
        // A plain file name (checked by the scan): never outside the index's folder.
        let shard = beside(path, name);
        if !shard.is_file() && std::fs::symlink_metadata(&shard).is_err() {
            bail!("{}: shard {name} is missing (the weight_map names it)", path.display());
        }
        files.push(open(&shard).with_context(|| format!("{}: shard {name}", path.display()))?);
    }
    Ok(Opened { kind: Kind::Index { path: path.to_path_buf(), scan }, files, notes })
}

/// `PREFIX-00001-of-00003.gguf`: (PREFIX, 1, 3), as llama.cpp names a split set.
fn split_name(path: &Path) -> Option<(String, u64, u64)> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".gguf")?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, no) = rest.rsplit_once('-')?;
    let digits = |s: &str| s.len() >= 5 && s.bytes().all(|b| b.is_ascii_digit());
    if prefix.is_empty() || !digits(no) || !digits(count) {
        return None;
    }
    Some((prefix.to_string(), no.parse().ok()?, count.parse().ok()?))
}

/// The file name of position `no` of `count` (llama.cpp's `%s-%05d-of-%05d.gguf`).
fn split_file(prefix: &str, no: u64, count: u64) -> String {
    format!("{prefix}-{no:05}-of-{count:05}.gguf")
}

/// A gguf-split set: every sibling `PREFIX-0000K-of-0000N.gguf`, none missing, none extra.
fn open_split(path: &Path, prefix: &str, no: u64, count: u64) -> anyhow::Result<Opened> {
    let dir = paths::folder_of(path);
    if no == 0 || no > count {
        bail!("{}: file {no} of a gguf-split set of {count} (positions run from 1 to {count})", path.display());
    }
    let cap = u64::from(kiln_nostd::directory::DEFAULT_CAP);
    if count > cap {
        bail!("{}: a gguf-split set of {count} files, above the count cap {cap}", path.display());
    }
    check_no_extra_sibling(path, &dir, prefix, count)?;
    let mut files = Vec::new();
    for k in 1..=count {
        let sibling = beside(path, &split_file(prefix, k, count));
        if std::fs::symlink_metadata(&sibling).is_err() {
            bail!(
                "{}: the gguf-split set of {count} files is incomplete: {} is missing (never a partial model)",
                path.display(),
                sibling.display()
            );
        }
        files.push(open(&sibling)?);
    }
    Ok(Opened { kind: Kind::GgufSplit { count }, files, notes: Vec::new() })
}

/// A file beside the set named as part of a set with the same prefix but
/// another count, or a position past the count, is an error naming it.
fn check_no_extra_sibling(path: &Path, dir: &Path, prefix: &str, count: u64) -> anyhow::Result<()> {
    let read = std::fs::read_dir(dir).map_err(super::error::io_fail(format!("cannot list {}", dir.display())))?;
    for entry in read {
        let entry = entry.map_err(super::error::io_fail(format!("cannot list {}", dir.display())))?;
        let file = beside(path, &entry.file_name().to_string_lossy());
        let Some((p, k, n)) = split_name(&file) else { continue };
        if p == prefix && (n != count || k == 0 || k > count) {
            bail!(
                "{}: an extra file beside the gguf-split set of {count} ({}): which set is the model is not clear",
                file.display(),
                split_file(prefix, 1, count)
            );
        }
    }
    Ok(())
}

/// Reads every opened file and checks the set; the model holds the files.
pub fn read_all(opened: Opened, from: Option<Format>, opts: &ReadOptions) -> anyhow::Result<Model> {
    let Opened { kind, files, notes } = opened;
    let mut model = match kind {
        Kind::Single => read_single(files, from, opts)?,
        Kind::Index { path, scan } => read_index(&path, &scan, files, opts)?,
        Kind::GgufSplit { count } => read_split(files, count, opts)?,
        Kind::Manifest { path } => read_manifest(&path, files, opts)?,
    };
    model.notes.splice(0..0, notes);
    model.release_maps();
    Ok(model)
}

/// One file; a GGUF file that says it is part of a larger split set is refused.
fn read_single(files: Vec<Input>, from: Option<Format>, opts: &ReadOptions) -> anyhow::Result<Model> {
    let input = files.into_iter().next().ok_or_else(|| anyhow!("no input file"))?;
    let format = format_of(&input, &input.path, from)?;
    let mut model = read_model(format, &input, &input.path, opts, true)?;
    if let Some(split) = model.split.filter(|s| s.count > 1) {
        bail!(
            "{}: file {} of a gguf-split set of {} (split.no {}), but its name is not NAME-0000K-of-0000N.gguf, \
             so its siblings cannot be found (never a partial model)",
            input.path.display(),
            split.no.saturating_add(1),
            split.count,
            split.no
        );
    }
    // The file itself is input 0 (an ONNX model's side files follow it).
    model.inputs.insert(0, input);
    Ok(model)
}

/// The shards of an index, read in file name order and checked against it.
fn read_index(path: &Path, scan: &IndexScan, files: Vec<Input>, opts: &ReadOptions) -> anyhow::Result<Model> {
    let mut model: Option<Model> = None;
    for (shard, input) in files.into_iter().enumerate() {
        let first = shard == 0;
        let format = format_of(&input, &input.path, None)?;
        if format != Format::Safetensors {
            bail!("{}: shard {} is {}, not safetensors", path.display(), input.path.display(), format.name());
        }
        let mut part = read_model(format, &input, &input.path, opts, true)?;
        if first {
            // One allocation for the whole table, sized by the index's entry
            // count (address space only until written): growing it by
            // doubling would hold two copies at the last step.
            let more = usize::try_from(scan.entries).unwrap_or(0).saturating_sub(part.tensors.len());
            part.tensors.try_reserve_exact(more).ok();
        }
        merge(&mut model, part, input, shard);
    }
    let mut model = model.unwrap_or_else(|| Model::new(Format::Safetensors, opts));
    model.sharded = true;
    model.release_maps();
    index::check(path, scan, &mut model)?;
    Ok(model)
}

/// Adds input shard `shard` (its tensors and file) to the model; the first
/// shard's metadata is the model's, another shard's differing one is noted.
fn merge(model: &mut Option<Model>, mut part: Model, mut input: Input, shard: usize) {
    for t in &mut part.tensors {
        t.input = shard;
        t.shard = shard;
    }
    // The header is read: unmap it now, so the shards' headers are never all resident at once.
    input.map = None;
    match model {
        None => {
            part.inputs.push(input);
            *model = Some(part);
        }
        Some(m) => {
            if m.format == Format::Safetensors && !part.metadata.iter().eq(m.metadata.iter()) {
                m.note(format!(
                    "{}: its metadata differs from the first shard's; the first shard's is kept",
                    input.path.display()
                ));
            }
            m.tensors.append(&mut part.tensors);
            m.notes.append(&mut part.notes);
            m.inputs.push(input);
        }
    }
}

/// A gguf-split set: every file agrees on `split.count` and
/// `split.tensors.count`, sits at its position, and the tensors add up.
fn read_split(files: Vec<Input>, count: u64, opts: &ReadOptions) -> anyhow::Result<Model> {
    let mut model: Option<Model> = None;
    let mut first: Option<Split> = None;
    let mut file_tensors = 0u64;
    for (shard, input) in files.into_iter().enumerate() {
        let format = format_of(&input, &input.path, None)?;
        if format != Format::Gguf {
            bail!("{}: {} in a gguf-split set", input.path.display(), format.name());
        }
        let part = read_model(format, &input, &input.path, opts, true)?;
        let split = check_split_file(&input.path, part.split, shard, count, first)?;
        first.get_or_insert(split);
        file_tensors = file_tensors.saturating_add(split.file_tensors);
        let mut part = part;
        let extra = part.metadata.user_types().count();
        if shard > 0 && extra > 0 {
            part.note(format!(
                "{}: {extra} metadata keys NOT carried (the first file's metadata is the model's)",
                input.path.display()
            ));
        }
        merge(&mut model, part, input, shard);
    }
    let mut model = model.ok_or_else(|| anyhow!("an empty gguf-split set"))?;
    let want = first.map_or(0, |s| s.tensors);
    if file_tensors != want {
        bail!(
            "{}: the gguf-split set holds {file_tensors} tensors in its {count} files, split.tensors.count says {want}",
            model.inputs.first().map(|i| i.path.display().to_string()).unwrap_or_default()
        );
    }
    model.sharded = true;
    model.split = None;
    model.release_maps();
    Ok(model)
}

/// File `shard` (0-based) of a set of `count`: its split keys, checked.
fn check_split_file(
    path: &Path,
    split: Option<Split>,
    shard: usize,
    count: u64,
    first: Option<Split>,
) -> anyhow::Result<Split> {
    let name = path.display();
    let split =
        split.ok_or_else(|| anyhow!("{name}: no split.* keys, but its name makes it part of a gguf-split set"))?;
    if split.count != count {
        bail!("{name}: split.count is {}, its name and the set say {count}", split.count);
    }
    let at = u64::try_from(shard).unwrap_or(u64::MAX);
    if split.no != at {
        bail!("{name}: split.no is {}, its position in the set is {at}", split.no);
    }
    if let Some(f) = first.filter(|f| f.tensors != split.tensors) {
        bail!("{name}: split.tensors.count is {}, the first file's is {}", split.tensors, f.tensors);
    }
    Ok(split)
}
