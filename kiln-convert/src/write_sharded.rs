//! Writing a sharded model (spec/model-file.md, "Writing a sharded model"):
//! the shards `OUT-00001-of-0000N.kiln` beside OUT, then the manifest OUT.
//!
//! Each shard streams once (payloads read, hashed and written once) with a
//! zeroed model id and digest table; once every digest is known the
//! manifest's tensor table gives the model id, which is patched into every
//! shard with its digests, and each shard's prefix digest is taken from
//! the bytes before its payloads. Everything goes to temporary files in
//! OUT's folder, is checked and fsynced, and is renamed into place shards
//! first and the manifest last; shards of an earlier conversion to the same
//! name with another count are removed only after that.

use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use kiln_model::{
    self as model, EntrySpec, EntryTable, Kind, Manifest, ManifestQuant, ManifestWriter, ShardSpec, SHARD_FIELD_LEN,
};
use kiln_nostd::digest::{sha256, DIGEST_LEN};
use kiln_nostd::int::{u64_from, usize_from};
use kiln_nostd::Limits;

use super::copy::Sink;
use super::error::io_fail;
use super::meta::Metadata;
use super::model::TensorOut;
use super::outfile::{self, Target, Temp};
use super::write_kiln;
use super::ShardSet;
use super::{Input, Progress};
use crate::platform;

/// The file name of shard `index` of `count` for the manifest `out`:
/// `STEM-0000k-of-0000N.kiln` in OUT's folder (STEM: OUT's name without `.kiln`).
pub fn shard_path(out: &Path, index: usize, count: usize) -> PathBuf {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.strip_suffix(".kiln").unwrap_or(&name);
    out.with_file_name(format!("{stem}-{index:05}-of-{count:05}.kiln"))
}

/// One shard after its first pass: its temporary file and what is patched in later.
struct Written {
    temp: Temp,
    target: Target,
    /// Where the model id's bytes and the digest table's bytes sit.
    model_at: u64,
    table_at: u64,
    /// Bytes before the payload region (what the prefix digest covers).
    prefix_len: u64,
    length: u64,
    digests: Vec<[u8; DIGEST_LEN]>,
}

/// Writes `tensors` as the shards `ranges` (in order) and the manifest for
/// `out` with `metadata`. `inputs` hold the payloads; `progress` sees the
/// copy of all of them; `(fsync, follow_input)`: fsync every file, keep the
/// input's payload offsets modulo 4 KiB.
///
/// Memory: the tensor table (one row per tensor) and the digests, never a
/// second table or the manifest's bytes: the manifest streams to its file
/// from the table, and the table is dropped before the written set is
/// read back, one shard at a time (a 500,000-tensor model's manifest is
/// 70 MB, as large as its index).
pub fn write(
    out: &Target,
    inputs: &[Input],
    tensors: Vec<TensorOut>,
    ranges: &[Range<usize>],
    metadata: &Metadata,
    progress: &dyn Progress,
    (fsync, follow_input): (bool, bool),
) -> anyhow::Result<ShardSet> {
    let count = ranges.len();
    let total: u64 = tensors.iter().map(|t| t.len).fold(0, u64::saturating_add);
    progress.start(total);
    let mut shards = Vec::with_capacity(count);
    for (k, range) in ranges.iter().enumerate() {
        let given = shard_path(&out.given, k.saturating_add(1), count);
        let target = super::resolve_out(&given, inputs)?;
        let part = tensors.get(range.clone()).ok_or_else(|| anyhow!("a shard range past the tensors"))?;
        let index = u32::try_from(k.saturating_add(1)).map_err(|_| anyhow!("too many shards"))?;
        let shard_count = u32::try_from(count).map_err(|_| anyhow!("too many shards"))?;
        let shard = write_shard(target, inputs, part, (index, shard_count, follow_input), progress)
            .with_context(|| format!("shard {}", given.display()))?;
        shards.push(shard);
    }
    progress.finish();
    let entries = Table::new(&tensors, ranges, &shards)?;
    let id = ManifestWriter::model_id_of(&entries)?;
    let mut listed = Vec::with_capacity(count);
    let mut bytes = 0u64;
    for s in &shards {
        let f = s.temp.file()?;
        let err = |e| io_fail(format!("cannot write {}", s.target.given.display()))(e);
        platform::write_all_at(&f, &id, s.model_at).map_err(err)?;
        platform::write_all_at(&f, &write_kiln::digest_table(&s.digests), s.table_at).map_err(err)?;
        let mut prefix = vec![0u8; usize_from(s.prefix_len).ok_or_else(|| anyhow!("a shard prefix past memory"))?];
        platform::read_exact_at(&f, &mut prefix, 0).map_err(err)?;
        listed.push((s.target.given.clone(), s.length, sha256(&prefix)));
        bytes = bytes.saturating_add(s.length);
    }
    let names_owned: Vec<String> = listed
        .iter()
        .map(|(p, _, _)| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
        .collect();
    let specs: Vec<ShardSpec<'_>> = listed
        .iter()
        .zip(&names_owned)
        .map(|((_, length, digest), name)| ShardSpec { name, length: *length, prefix_digest: *digest })
        .collect();
    let meta: Vec<(&str, &str)> = metadata.iter().filter(|(k, _)| *k != write_kiln::KEY_PAD).collect();
    let m_temp = out.temp()?;
    let m_len = stream_manifest(&m_temp, &meta, &specs, &entries)
        .map_err(io_fail(format!("cannot write {}", out.given.display())))??;
    bytes = bytes.saturating_add(m_len);
    let tensor_count = entries.count();
    drop(specs);
    drop(tensors);
    crate::platform::release_freed_memory();
    check_written(&m_temp, tensor_count, &shards, &names_owned)?;
    if fsync {
        for s in &shards {
            outfile::sync(&s.temp)?;
        }
        outfile::sync(&m_temp)?;
    }
    let stale = stale_shards(&out.given, count, inputs);
    let mut files: Vec<(Temp, Target)> = shards.into_iter().map(|s| (s.temp, s.target)).collect();
    files.push((m_temp, Target { given: out.given.clone(), path: out.path.clone(), existing: out.existing.clone() }));
    Ok(ShardSet { files, bytes, stale })
}

/// Streams one shard with a zeroed model id and digest table.
fn write_shard(
    target: Target,
    inputs: &[Input],
    part: &[TensorOut],
    (index, count, follow_input): (u32, u32, bool),
    progress: &dyn Progress,
) -> anyhow::Result<Written> {
    let plan = write_kiln::plan(part)?;
    let placeholder = write_kiln::digest_placeholder(part.len())?;
    let fields = u64_from(SHARD_FIELD_LEN).saturating_add(u64_from(placeholder.len()));
    let total: u64 = part.iter().map(|t| t.len).fold(0, u64::saturating_add);
    let mut metadata = Metadata::new(1 << 20);
    metadata.seal(super::meta::Dups::Refuse)?;
    let pad = write_kiln::pad_len(part, &plan, &metadata, write_kiln::pad_modulus(total), fields, follow_input)?;
    metadata.set_own(write_kiln::KEY_PAD, " ".repeat(pad));
    let temp = target.temp()?;
    let mut sink = Sink::new(temp.file()?, inputs, progress, target.given.display().to_string());
    sink.bytes(&write_kiln::frame(Kind::Shard))?;
    write_kiln::write_dict(&mut sink, &metadata)?;
    let model_at = sink.written().saturating_add(4);
    sink.bytes(&model::shard_field(&[0; DIGEST_LEN], index, count))?;
    let table_at = sink.written().saturating_add(4);
    sink.bytes(&placeholder)?;
    let prefix_len = sink.written().saturating_add(u64_from(plan.head.len()));
    let digests = write_kiln::write_block(&mut sink, part, &plan, true)?;
    let length = sink.written();
    drop(sink.finish()?);
    Ok(Written { temp, target, model_at, table_at, prefix_len, length, digests })
}

/// The manifest's tensor table, read from the converter's rows: entry `j`
/// is row `ranges[k].start + i` of shard `k`, with that shard's digest `i`.
struct Table<'t> {
    tensors: &'t [TensorOut],
    ranges: &'t [Range<usize>],
    shards: &'t [Written],
    /// Entries before shard `k`: `starts[k]`.
    starts: Vec<usize>,
    count: usize,
}

impl<'t> Table<'t> {
    fn new(tensors: &'t [TensorOut], ranges: &'t [Range<usize>], shards: &'t [Written]) -> anyhow::Result<Self> {
        let mut starts = Vec::with_capacity(ranges.len());
        let mut count = 0usize;
        for (range, shard) in ranges.iter().zip(shards) {
            if tensors.get(range.clone()).is_none() || shard.digests.len() != range.len() {
                return Err(anyhow!("a shard range past the tensors"));
            }
            starts.push(count);
            count = count.saturating_add(range.len());
        }
        Ok(Table { tensors, ranges, shards, starts, count })
    }
}

impl EntryTable for Table<'_> {
    fn count(&self) -> usize {
        self.count
    }
    fn entry(&self, j: usize) -> Option<EntrySpec<'_>> {
        let k = self.starts.partition_point(|&s| s <= j).checked_sub(1)?;
        let within = j.checked_sub(*self.starts.get(k)?)?;
        let t = self.tensors.get(self.ranges.get(k)?.start.checked_add(within)?)?;
        Some(EntrySpec {
            name: &t.name,
            shard: u32::try_from(k.checked_add(1)?).ok()?,
            dtype: t.dtype,
            shape: &t.shape,
            byte_length: t.len,
            layout: t.layout.as_deref().unwrap_or(""),
            block_size: t.block_size,
            quant: t.quant.as_ref().map(|q| ManifestQuant {
                scheme: q.scheme,
                axis: q.axis,
                group_size: q.group_size,
                scale: &q.scale,
                outer: q.outer.as_deref().unwrap_or(""),
            }),
            digest: *self.shards.get(k)?.digests.get(within)?,
        })
    }
}

/// The manifest's bytes into its temporary file through a buffer; its length.
fn stream_manifest(
    temp: &Temp,
    meta: &[(&str, &str)],
    specs: &[ShardSpec<'_>],
    entries: &Table<'_>,
) -> std::io::Result<anyhow::Result<u64>> {
    use std::io::Write as _;
    let mut w = std::io::BufWriter::with_capacity(1 << 16, temp.file().map_err(std::io::Error::other)?);
    let mut failed: Option<std::io::Error> = None;
    let mut len = 0u64;
    let emitted = ManifestWriter::stream(meta, specs, entries, &mut |b| {
        if failed.is_none() {
            failed = w.write_all(b).err();
            len = len.saturating_add(u64_from(b.len()));
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    w.flush()?;
    Ok(emitted.map(|()| len).map_err(|e| anyhow!("cannot write the manifest: {e} (rule {})", e.rule().id())))
}

/// The whole written set checked as a reader checks it, without hashing
/// the payloads again (their digests were taken as they were written).
///
/// Each shard is mapped only while it is checked, so the shards' headers
/// are never all resident at once.
fn check_written(manifest: &Temp, tensors: usize, shards: &[Written], names: &[String]) -> anyhow::Result<()> {
    let most = shards.iter().map(|s| s.digests.len()).max().unwrap_or(0);
    let mut scratch = vec![0u32; Manifest::scratch_len(tensors.max(shards.len()))];
    let map_of = |temp: &Temp, given: &Path| -> anyhow::Result<memmap2::Mmap> {
        let f = temp.file()?;
        // SAFETY: read-only map of our own temporary file, which nothing else writes.
        unsafe { memmap2::Mmap::map(&f) }.map_err(io_fail(format!("cannot read back {}", given.display())))
    };
    let manifest_map = map_of(manifest, Path::new("the manifest"))?;
    let m = Manifest::parse_with(&manifest_map, &Limits::MAX, Some(&mut scratch))
        .map_err(|e| anyhow!("the written manifest did not check out: {e} (rule {})", e.rule().id()))?;
    let open = |e: &kiln_model::ShardEntry<'_>| {
        let s = names.iter().position(|n| n == e.name.as_str()).and_then(|i| shards.get(i))?;
        map_of(&s.temp, &s.target.given).ok()
    };
    let mut names_scratch = vec![0u32; kiln_nostd::directory::scratch_len(u32::try_from(most).unwrap_or(u32::MAX))];
    model::check_all(&m, open, false, Some(&mut names_scratch)).map_err(|f| {
        let name = names.get(usize_from(u64::from(f.shard.saturating_sub(1))).unwrap_or(0));
        anyhow!(
            "the written shard {} did not check out: {} (rule {})",
            name.map_or("?", String::as_str),
            f.error,
            f.error.rule().id()
        )
    })
}

/// Shards `STEM-*-of-M.kiln` beside `out` with M other than `count`: an
/// earlier conversion's, removed once the new set is in place.
fn stale_shards(out: &Path, count: usize, inputs: &[Input]) -> Vec<PathBuf> {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.strip_suffix(".kiln").unwrap_or(&name).to_owned();
    stale_beside(out, &stem, ".kiln", count, inputs)
}

/// Files `STEM-DDDDD-of-DDDDD{ext}` in `out`'s folder whose count is not
/// `count` (shards of an earlier conversion to the same name). A file that
/// is one of the `inputs` (a manifest may give its shards any names) is
/// never one of them.
pub(super) fn stale_beside(out: &Path, stem: &str, ext: &str, count: usize, inputs: &[Input]) -> Vec<PathBuf> {
    let dir = crate::paths::folder_of(out);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let ours = format!("-of-{count:05}{ext}");
    entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| is_shard_name_ext(n, stem, ext) && !n.ends_with(&ours))
        .map(|n| dir.join(n))
        .filter(|p| !is_input(p, inputs))
        .collect()
}

/// `path` is one of the input files (same device and inode), or cannot be checked.
pub(super) fn is_input(path: &Path, inputs: &[Input]) -> bool {
    let Ok(meta) = std::fs::metadata(path) else { return false };
    inputs.iter().any(|i| platform::same_file(path, &meta, &i.file).unwrap_or(true))
}

/// `STEM-DDDDD-of-DDDDD.kiln`.
#[cfg(test)]
fn is_shard_name(name: &str, stem: &str) -> bool {
    is_shard_name_ext(name, stem, ".kiln")
}

/// `STEM-DDDDD-of-DDDDD{ext}`.
pub(super) fn is_shard_name_ext(name: &str, stem: &str, ext: &str) -> bool {
    let Some(rest) = name.strip_prefix(stem).and_then(|r| r.strip_prefix('-')) else { return false };
    let Some(rest) = rest.strip_suffix(ext) else { return false };
    let mut parts = rest.split("-of-");
    let digits = |s: Option<&str>| s.is_some_and(|s| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit()));
    digits(parts.next()) && digits(parts.next()) && parts.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names() {
        assert_eq!(shard_path(Path::new("d/m.kiln"), 2, 3), PathBuf::from("d/m-00002-of-00003.kiln"));
        assert_eq!(shard_path(Path::new("m"), 1, 1), PathBuf::from("m-00001-of-00001.kiln"));
        assert!(is_shard_name("m-00002-of-00003.kiln", "m"));
        assert!(!is_shard_name("m-2-of-3.kiln", "m"));
        assert!(!is_shard_name("mx-00002-of-00003.kiln", "m"));
        assert!(!is_shard_name("m-00002-of-00003.kiln.tmp", "m"));
    }
}
