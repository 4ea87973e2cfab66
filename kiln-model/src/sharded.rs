//! A sharded model as a whole (`spec/model-file.md`, "Opening a shard of a
//! manifest"): the one shard-by-shard check every reader runs (the CLI,
//! npm, Python, C), whatever holds the shards' bytes (a memory map, a
//! fetched buffer). Needs the `sha2` feature.

use super::{Manifest, ShardEntry};
use crate::block_digests::check_block_digests;
use crate::digest::DIGEST_LEN;
use crate::error::{Error, Result, Rule};
use kiln_nostd::Parser;
use kiln_nostd::Rule as CoreRule;

/// A fault in a sharded model: the shard it is in (its 1-based index; the
/// name is [`Manifest::shard`]'s) and the error, whose offset is in that
/// shard's file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardFault {
    /// The shard's 1-based index.
    pub shard: u32,
    /// The error, at an offset in the shard's file.
    pub error: Error,
}

/// Checks shard `entry` of `manifest`, whose file's bytes are `file`
/// (`None`: it does not exist or cannot be opened), in the spec's order:
/// missing, length, its own checks to step 9, model, position and count,
/// its tensors, its prefix digest, then its steps 9d (when `verify`) to 12.
/// `model_id` is [`Manifest::model_id`], computed once; `parser` carries
/// the caps and name scratch for the shard's directory.
pub fn check_shard(
    manifest: &Manifest<'_>,
    model_id: &[u8; DIGEST_LEN],
    entry: &ShardEntry<'_>,
    file: Option<&[u8]>,
    verify: bool,
    mut parser: Parser<'_>,
) -> Result<()> {
    let Some(file) = file else { return crate::error::fail(Rule::ShardMissing, 0) };
    let len = u64::try_from(file.len()).unwrap_or(u64::MAX);
    if len != entry.length {
        return crate::error::fail_at(Rule::ShardLength, len.min(entry.length));
    }
    let caps = parser.caps();
    // A shard's place holds a shard record: any other frame is SCHEMA.
    crate::frozen::check_frame(file, super::SHARD_HASH)?;
    let head = super::Head::check(file, &caps)?;
    let block = head.block;
    let model = head.model(parse_prefix_at(parser.reborrow(), file, block, len)?);
    manifest.check_shard(entry, model_id, file, &model)?;
    // Steps 9d to 12: the whole-buffer verdict, whose steps 1 to 9 the prefix passed. The
    // same name scratch: without it the names would be compared pairwise again.
    let dir = match (verify, model.digests()) {
        (true, Some(table)) => check_block_digests(file, block, parser, &table)?,
        _ => parser.parse_at(file, block)?,
    };
    if dir.end() != file.len() {
        return crate::error::fail(CoreRule::TrailingBytes, dir.end());
    }
    Ok(())
}

/// Steps 1 to 6 of [`check_shard`] from the shard's bytes before its
/// payload region only, for a reader that fetches a shard's payloads one
/// tensor at a time (the npm remote loader): `prefix` holds the file from
/// byte 0 at least up to its payload region (more is ignored; `None`: the
/// file does not exist) and `file_len` is the file's length. Checks, in
/// [`check_shard`]'s order: missing, length, the shard's own checks to step
/// 9 (its frame, fields and directory prefix; a `prefix` cut before the
/// payload region is EOF at its end), model, position and count, its
/// tensors, its prefix digest. Step 7 (steps 9d to 12: digests, gaps,
/// element bytes, trailing bytes) needs the payload and is the caller's, on
/// the bytes it fetches. Returns the shard, whose directory lists the
/// tensors without their bytes.
pub fn check_shard_prefix<'a>(
    manifest: &Manifest<'_>,
    model_id: &[u8; DIGEST_LEN],
    entry: &ShardEntry<'_>,
    prefix: Option<&'a [u8]>,
    file_len: u64,
    parser: Parser<'_>,
) -> Result<super::Model<'a>> {
    let Some(file) = prefix else { return crate::error::fail(Rule::ShardMissing, 0) };
    if file_len != entry.length {
        return crate::error::fail_at(Rule::ShardLength, file_len.min(entry.length));
    }
    crate::frozen::check_frame(file, super::SHARD_HASH)?;
    let head = super::Head::check(file, &parser.caps())?;
    let block = head.block;
    let model = head.model(parse_prefix_at(parser, file, block, file_len)?);
    manifest.check_shard(entry, model_id, file, &model)?;
    Ok(model)
}

/// Checks every shard of `manifest` in order, the first fault in shard
/// order being the verdict. `open` gives a shard's bytes (`None` when it is
/// missing); it is called only with names that passed step M2, and a
/// caller resolves them inside the manifest's folder only.
pub fn check_all<F: AsRef<[u8]>>(
    manifest: &Manifest<'_>,
    mut open: impl FnMut(&ShardEntry<'_>) -> Option<F>,
    verify: bool,
    mut scratch: Option<&mut [u32]>,
) -> core::result::Result<(), ShardFault> {
    let id = manifest.model_id();
    for entry in manifest.shards() {
        let file = open(&entry);
        let parser = match scratch.as_deref_mut() {
            Some(s) => Parser::new().scratch(s),
            None => Parser::new(),
        };
        check_shard(manifest, &id, &entry, file.as_ref().map(AsRef::as_ref), verify, parser)
            .map_err(|error| ShardFault { shard: entry.index, error })?;
    }
    Ok(())
}

/// Writing a sharded model in memory (feature `alloc`): the manifest and
/// its shards from tensors already grouped by shard.
#[cfg(feature = "alloc")]
pub mod write {
    extern crate alloc;
    use alloc::vec;
    use alloc::vec::Vec;

    use super::super::{EntrySpec, ManifestQuant, ManifestWriter, ModelWriter, ShardSpec};
    use crate::digest::sha256;
    use crate::error::Result;
    use kiln_nostd::{
        writer::{QuantSpec, TensorRef},
        TensorSpec,
    };

    /// The files of a sharded model: the manifest's bytes, and each shard's
    /// name and bytes in order.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct ShardedFiles {
        /// The manifest.
        pub manifest: Vec<u8>,
        /// The shards, in order: (file name, bytes).
        pub shards: Vec<(alloc::string::String, Vec<u8>)>,
    }

    /// The quantization of `spec` with its scale and outer by name (inside its own shard).
    fn quant_of<'a>(spec: &TensorSpec<'a>, shard: &[TensorSpec<'a>]) -> Option<ManifestQuant<'a>> {
        let name = |r: &TensorRef<'a>| match *r {
            TensorRef::Name(n) => Some(n),
            TensorRef::Index(i) => shard.get(crate::bytes::usize_from_u32(i)).and_then(|s| s.name),
        };
        match &spec.quant {
            QuantSpec::None => None,
            QuantSpec::Scales { axis, group_size, scale } => {
                Some(ManifestQuant { scheme: 1, axis: *axis, group_size: *group_size, scale: name(scale)?, outer: "" })
            }
            QuantSpec::ScalesOuter { axis, group_size, scale, outer } => Some(ManifestQuant {
                scheme: 2,
                axis: *axis,
                group_size: *group_size,
                scale: name(scale)?,
                outer: name(outer)?,
            }),
        }
    }

    /// Writes a sharded model: `shards` holds each shard's file name and
    /// tensors (all named; a quantized tensor's scale and outer in its own
    /// shard), `metadata` the model's (keys in byte order). Shards are
    /// written with payloads aligned to `align` bytes in the file (as
    /// [`ModelWriter::align`]). The result is checked as a whole before it
    /// is returned.
    pub fn write_sharded(
        metadata: &[(&str, &str)],
        shards: &[(&str, &[TensorSpec<'_>])],
        align: u64,
    ) -> Result<ShardedFiles> {
        let mut entries = Vec::new();
        for (k, (_, specs)) in shards.iter().enumerate() {
            let shard = u32::try_from(k.saturating_add(1)).map_err(|_| too_wide())?;
            for s in specs.iter() {
                entries.push(EntrySpec {
                    name: s.name.unwrap_or(""),
                    shard,
                    dtype: s.dtype,
                    shape: s.shape,
                    byte_length: u64::try_from(s.data.len()).map_err(|_| too_wide())?,
                    layout: s.layout.unwrap_or(""),
                    block_size: s.block_size,
                    quant: quant_of(s, specs),
                    digest: sha256(s.data),
                });
            }
        }
        let id = ManifestWriter::model_id(&entries)?;
        let count = u32::try_from(shards.len()).map_err(|_| too_wide())?;
        let mut files = Vec::new();
        let mut listed = Vec::new();
        for (k, (name, specs)) in shards.iter().enumerate() {
            let index = u32::try_from(k.saturating_add(1)).map_err(|_| too_wide())?;
            let writer = ModelWriter::new().align(align).shard(id, index, count);
            let mut out = vec![0u8; writer.encoded_len(&[], specs)?];
            let mut names = vec![0u32; crate::names::table_words(specs.len())];
            writer.write_with_scratch(&[], specs, &mut out, Some(&mut names))?;
            let parsed = super::super::Model::parse(&out)?;
            let prefix = out.get(..parsed.payload_start()).unwrap_or(&[]);
            listed.push(ShardSpec {
                name,
                length: u64::try_from(out.len()).map_err(|_| too_wide())?,
                prefix_digest: sha256(prefix),
            });
            files.push((alloc::string::String::from(*name), out));
        }
        let mut manifest = vec![0u8; ManifestWriter::encoded_len(metadata, &listed, &entries)?];
        let mut scratch = vec![0u32; super::Manifest::scratch_len(entries.len().max(shards.len()))];
        ManifestWriter::write_with_scratch(metadata, &listed, &entries, &mut manifest, Some(&mut scratch))?;
        let m = super::Manifest::parse_with(&manifest, &kiln_nostd::Limits::DEFAULT, Some(&mut scratch))?;
        let biggest = shards.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
        let mut names = vec![0u32; crate::names::table_words(biggest)];
        let by_name = |e: &super::ShardEntry<'_>| files.iter().find(|(n, _)| n == e.name.as_str()).map(|(_, b)| b);
        super::check_all(&m, by_name, true, Some(&mut names)).map_err(|f| f.error)?;
        Ok(ShardedFiles { manifest, shards: files })
    }

    fn too_wide() -> crate::Error {
        crate::Error::new(kiln_nostd::Rule::FieldTooWide, 0)
    }
}
/// Steps 1 to 9 of the block at `start` (and step 10's placement and step
/// 11's quantization as far as the descriptors decide them, which are not
/// reported): the tensor table of a shard whose payload faults, if any, are
/// left to a later check (held against its manifest before its steps 9d to
/// 12). `file_len` is the length of the file `buf` starts; `buf` need hold
/// only its bytes up to the block's payload region (steps 5 and 6 are
/// checked against `file_len`; a `buf` shorter than the prefix is EOF at its end).
fn parse_prefix_at<'a>(
    parser: Parser<'_>,
    buf: &'a [u8],
    start: usize,
    file_len: u64,
) -> Result<kiln_nostd::Directory<'a>> {
    use crate::bytes::{u64_from, usize_from};
    use crate::error::fail;
    use kiln_nostd::steps::{check_prefix_of, PrefixVerdict};
    use kiln_nostd::wire::header::{Header, Regions};
    let Some(block) = buf.get(start..) else {
        return fail(kiln_nostd::Rule::HeaderTruncated, buf.len());
    };
    let (limits, scratch, seed) = parser.into_parts();
    let shift = |e: kiln_nostd::Error| Error::from(e).shifted(u64_from(start));
    let header = Header::parse(block).map_err(shift)?;
    let avail = file_len.saturating_sub(u64_from(start));
    let (heap_end, base, block_len) = header.check_extent(&limits, avail).map_err(shift)?;
    let Some(prefix) = usize_from(base).and_then(|b| block.get(..b)) else {
        return fail(kiln_nostd::Rule::DirectoryTruncated, buf.len());
    };
    // Both are at most `base`, which `prefix` holds.
    let (heap_end, payload_base) = (usize_from(heap_end).unwrap_or(0), prefix.len());
    let regions = Regions { heap_end, payload_base, block_len: usize_from(block_len).unwrap_or(usize::MAX) };
    match check_prefix_of(prefix, &header, regions, scratch, seed).map_err(shift)? {
        (_, PrefixVerdict::Certain(e)) => Err(shift(e)),
        _ => Ok(kiln_nostd::Directory::from_checked(buf, start, header, regions)),
    }
}
