//! Model files: what `kiln convert` writes and every reader opens without
//! being told a type. A model file is a Frozen frame whose schema hash is
//! [`MODEL_HASH`], then one value of [`MODEL_TYPE`],
//! `struct{metadata:dict<str,str>,tensors:tensors,}`: string metadata, then
//! the tensor directory. `spec/model-file.md` is the convention in full.
//!
//! A writer may align the payload region in the file (for memory maps) with
//! the value of the reserved key [`PAD_KEY`]; [`Metadata`] hides that key,
//! so padding never shows up as user metadata.
//!
//! ```
//! use kiln_nostd::model::{self, Model};
//! # let file = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector.model.kiln"));
//! let m = Model::parse(&file)?;
//! assert_eq!(m.metadata().get("author"), Some("kiln"));
//! assert_eq!(m.directory().len(), 1);
//! // Any reader: a model file or a plain directory, told apart by content.
//! let (meta, dir) = model::parse_any(&file)?;
//! assert_eq!((meta.map(|m| m.len()), dir.len()), (Some(1), 1));
//! # Ok::<(), kiln_nostd::Error>(())
//! ```

use crate::bytes::{u32_at, usize_from, usize_from_u32};
use crate::error::{fail, Result, Rule};
use crate::frozen::{check_frame, Field, Ty, FRAME_MAGIC};
use crate::views::Directory;
use crate::Parser;

/// The model record's canonical type text.
pub const MODEL_TYPE: &str = "struct{metadata:dict<str,str>,tensors:tensors,}";

static METADATA: Ty = Ty::dict(&Ty::STR);
static FIELDS: [Field; 2] = [Field::new("metadata", &METADATA), Field::new("tensors", &Ty::TENSORS)];
static RECORD: Ty = Ty::structure(&FIELDS);

/// The schema hash of [`MODEL_TYPE`], which the frame carries.
pub const MODEL_HASH: u64 = crate::frozen::hash_text(MODEL_TYPE);
// The static type and the text are the same record.
const _: () = assert!(RECORD.schema_hash() == MODEL_HASH);

/// The reserved metadata key whose value (spaces) aligns the payload region
/// in the file. Readers hide it.
pub const PAD_KEY: &str = "kiln.convert.pad";

/// Keys starting with this are the converter's own (see `spec/model-file.md`).
pub const RESERVED_PREFIX: &str = "kiln.";

/// True when `buf` starts like a model file: the frame magic and the model
/// record's schema hash. Anything else is read as a plain directory.
pub fn is_model_file(buf: &[u8]) -> bool {
    buf.get(..4) == Some(&FRAME_MAGIC[..])
        && buf.get(8..16).and_then(|h| h.try_into().ok()).map(u64::from_le_bytes) == Some(MODEL_HASH)
}

/// A checked model file, borrowed from the caller's buffer.
#[derive(Clone, Copy, Debug)]
pub struct Model<'a> {
    metadata: Metadata<'a>,
    directory: Directory<'a>,
}

impl<'a> Model<'a> {
    /// Checks `buf` as exactly one model file (frame, metadata, directory,
    /// no trailing bytes) with the default caps, in the order a Frozen reader
    /// of [`MODEL_TYPE`] checks it. Nothing is allocated.
    pub fn parse(buf: &'a [u8]) -> Result<Model<'a>> {
        Model::parse_with(buf, Parser::new())
    }

    /// Like [`parse`](Self::parse), with a configured [`Parser`] for the
    /// directory (caps, name scratch, hash seed); its caps apply to the
    /// metadata too.
    pub fn parse_with(buf: &'a [u8], parser: Parser<'_>) -> Result<Model<'a>> {
        let end = check_head(buf, &parser.caps())?;
        let at = crate::frozen::FRAME_LEN;
        let directory = parser.parse_at(buf, end)?;
        if directory.end() != buf.len() {
            return fail(Rule::TrailingBytes, directory.end());
        }
        // Fallback not taken: at..end is the metadata region checked above.
        let metadata = Metadata { bytes: buf.get(at..end).unwrap_or(&[]) };
        Ok(Model { metadata, directory })
    }

    /// The metadata, without the padding key.
    pub fn metadata(&self) -> Metadata<'a> {
        self.metadata
    }

    /// The tensor directory.
    pub fn directory(&self) -> Directory<'a> {
        self.directory
    }

    /// Where the directory block starts in the file.
    pub fn directory_offset(&self) -> usize {
        self.directory.start()
    }
}

/// Checks a model file's frame and metadata (the first two of
/// [`Model::parse`]'s checks, in its order) and returns where its directory
/// block starts: for sizing name scratch from that block's header
/// ([`Header::peek_count`](crate::Header::peek_count)) before the full parse.
pub fn block_start(buf: &[u8], limits: &crate::Limits) -> Result<usize> {
    check_head(buf, limits)
}

fn check_head(buf: &[u8], limits: &crate::Limits) -> Result<usize> {
    let at = check_frame(buf, MODEL_HASH)?;
    let checker = crate::frozen::Checker { buf, limits: *limits, utf8: true };
    checker.value(&METADATA, at)
}

/// Opens `buf` by content: a model file (metadata and directory) when it
/// starts like one ([`is_model_file`]), otherwise a plain directory (no
/// metadata), checked exactly as [`Parser::parse`] checks it.
pub fn parse_any<'a>(buf: &'a [u8]) -> Result<(Option<Metadata<'a>>, Directory<'a>)> {
    parse_any_with(buf, Parser::new())
}

/// [`parse_any`] with a configured [`Parser`].
pub fn parse_any_with<'a>(buf: &'a [u8], parser: Parser<'_>) -> Result<(Option<Metadata<'a>>, Directory<'a>)> {
    if is_model_file(buf) {
        let m = Model::parse_with(buf, parser)?;
        return Ok((Some(m.metadata), m.directory));
    }
    parser.parse(buf).map(|d| (None, d))
}

/// A model file's metadata: a checked `dict<str,str>` (keys in byte order,
/// UTF-8), read in place. [`PAD_KEY`] is not shown.
#[derive(Clone, Copy, Debug)]
pub struct Metadata<'a> {
    /// The dict's encoding: a u32 count, then (key, value) strings.
    bytes: &'a [u8],
}

impl<'a> Metadata<'a> {
    /// The entries, in key order, without the padding key.
    pub fn iter(&self) -> MetadataIter<'a> {
        // Fallback not taken: checked metadata starts with its count word.
        let count = u32_at(self.bytes, 0).map(usize_from_u32).unwrap_or(0);
        MetadataIter { bytes: self.bytes, at: 4, left: count, hide_pad: true }
    }

    /// The value of `key` (never the padding key's).
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The number of entries shown.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// True when no entry is shown.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// The padding key's length in bytes (0 without it): what aligns the
    /// payload region in the file.
    pub fn padding(&self) -> usize {
        self.all().find(|(k, _)| *k == PAD_KEY).map_or(0, |(_, v)| v.len())
    }

    fn all(&self) -> MetadataIter<'a> {
        let mut it = self.iter();
        it.hide_pad = false;
        it
    }
}

impl<'a> IntoIterator for Metadata<'a> {
    type Item = (&'a str, &'a str);
    type IntoIter = MetadataIter<'a>;
    fn into_iter(self) -> MetadataIter<'a> {
        self.iter()
    }
}

/// Iterator over a model file's metadata entries.
#[derive(Clone, Debug)]
pub struct MetadataIter<'a> {
    bytes: &'a [u8],
    at: usize,
    left: usize,
    hide_pad: bool,
}

impl<'a> MetadataIter<'a> {
    /// The string at the cursor (length word, then UTF-8 bytes, checked at parse time).
    fn string(&mut self) -> Option<&'a str> {
        let len = usize_from_u32(u32_at(self.bytes, self.at)?);
        let start = self.at.checked_add(4)?;
        let end = start.checked_add(len)?;
        self.at = end;
        core::str::from_utf8(self.bytes.get(start..end)?).ok()
    }
}

impl<'a> Iterator for MetadataIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        while self.left > 0 {
            self.left = self.left.saturating_sub(1);
            let entry = self.string().zip(self.string())?;
            if !(self.hide_pad && entry.0 == PAD_KEY) {
                return Some(entry);
            }
        }
        None
    }
}

/// Writes model files: the frame, the metadata (with the padding key when
/// the payload region is to be aligned in the file) and the canonical block.
///
/// ```
/// use kiln_nostd::model::{Model, ModelWriter};
/// use kiln_nostd::{DType, TensorSpec};
/// let w = [0u8; 16];
/// let specs = [TensorSpec::new(DType::F32, &[4], &w).named("w")];
/// let meta = [("author", "kiln")];
/// let writer = ModelWriter::new().align(4096);
/// let mut out = vec![0u8; writer.encoded_len(&meta, &specs)?];
/// let n = writer.write(&meta, &specs, &mut out)?;
/// let m = Model::parse(&out[..n])?;
/// assert_eq!(m.metadata().get("author"), Some("kiln"));
/// assert_eq!(m.directory().payload_start() % 4096, 0);   // payloads at page offsets in the file
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ModelWriter {
    align: u64,
    limits: crate::Limits,
}

impl ModelWriter {
    /// No alignment beyond the format's own, default caps.
    pub const fn new() -> Self {
        ModelWriter { align: 1, limits: crate::Limits::DEFAULT }
    }

    /// Places the payload region at a multiple of `align` bytes from the
    /// start of the file (a power of two, e.g. 4096 for memory maps), with
    /// the padding key. 0 or 1: no padding key.
    pub const fn align(mut self, align: u64) -> Self {
        self.align = align;
        self
    }

    /// Caps the written file must respect (a reader with the same caps accepts it).
    pub const fn limits(mut self, limits: crate::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The exact length of the model file for `metadata` (keys strictly
    /// increasing by bytes, none of them [`PAD_KEY`]) and `specs`.
    pub fn encoded_len(&self, metadata: &[(&str, &str)], specs: &[crate::TensorSpec<'_>]) -> Result<usize> {
        self.plan(metadata, specs).map(|p| p.total)
    }

    /// Writes the model file into `out`, checks it with [`Model::parse`] and
    /// returns its length. The name checks compare every pair; give
    /// [`write_with_scratch`](Self::write_with_scratch) scratch for large sets.
    pub fn write(&self, metadata: &[(&str, &str)], specs: &[crate::TensorSpec<'_>], out: &mut [u8]) -> Result<usize> {
        self.write_with_scratch(metadata, specs, out, None)
    }

    /// [`write`](Self::write) with name scratch of at least
    /// [`scratch_len`](crate::scratch_len)`(specs.len())` slots, so the
    /// name checks take linear time.
    pub fn write_with_scratch(
        &self,
        metadata: &[(&str, &str)],
        specs: &[crate::TensorSpec<'_>],
        out: &mut [u8],
        mut scratch: Option<&mut [u32]>,
    ) -> Result<usize> {
        let plan = self.plan(metadata, specs)?;
        let Some(file) = out.get_mut(..plan.total) else {
            return fail(Rule::ValueOutputTooSmall, out.len());
        };
        let mut at = 0usize;
        let mut put = |file: &mut [u8], bytes: &[u8]| {
            if let Some(dst) = at.checked_add(bytes.len()).and_then(|end| file.get_mut(at..end)) {
                dst.copy_from_slice(bytes);
            }
            at = at.saturating_add(bytes.len());
        };
        put(file, &crate::frozen::frame_bytes(MODEL_HASH));
        // Fallback: over u32::MAX entries (32 GiB of keys) write a count the parse of the written file refuses.
        let shown = u32::try_from(metadata.len().saturating_add(usize::from(plan.pad.is_some()))).unwrap_or(u32::MAX);
        put(file, &shown.to_le_bytes());
        let mut pad_written = plan.pad.is_none();
        for &(k, v) in metadata {
            if !pad_written && k.as_bytes() > PAD_KEY.as_bytes() {
                // Fallback: no pad planned: a zero-length pad entry.
                put_pad(file, &mut put, plan.pad.unwrap_or(0));
                pad_written = true;
            }
            put_str(file, &mut put, k);
            put_str(file, &mut put, v);
        }
        if !pad_written {
            // Fallback: no pad planned: a zero-length pad entry.
            put_pad(file, &mut put, plan.pad.unwrap_or(0));
        }
        // Fallback not taken: at <= file.len(): the plan sized the file.
        let block = file.get_mut(at..).unwrap_or(&mut []);
        let writer = crate::Writer::new().limits(self.limits);
        match scratch.as_deref_mut() {
            Some(s) => writer.scratch(s).write(specs, block)?,
            None => writer.write(specs, block)?,
        };
        let parser = crate::Parser::new().limits(self.limits);
        match scratch {
            Some(s) => Model::parse_with(file, parser.scratch(s))?,
            None => Model::parse_with(file, parser)?,
        };
        Ok(plan.total)
    }

    fn plan(&self, metadata: &[(&str, &str)], specs: &[crate::TensorSpec<'_>]) -> Result<Plan> {
        let mut dict = 4usize; // the count word
        for (i, &(k, v)) in metadata.iter().enumerate() {
            let prev = i.checked_sub(1).and_then(|j| metadata.get(j)).map(|&(p, _)| p);
            if k == PAD_KEY || prev.is_some_and(|p| p.as_bytes() >= k.as_bytes()) {
                return fail(Rule::DictKeyOrder, 0);
            }
            for s in [k, v] {
                if u32::try_from(s.len()).is_err() {
                    return fail(Rule::CountTooWide, 0);
                }
                dict = dict.saturating_add(4).saturating_add(s.len());
            }
        }
        let block = crate::Writer::new().encoded_len(specs)?;
        let payload_in_block = block_payload_base(specs)?;
        let pad = match self.align {
            0 | 1 => None,
            a => {
                // Frame, metadata and an empty padding entry (two length words and the key).
                let without = 16usize.saturating_add(dict).saturating_add(8).saturating_add(PAD_KEY.len());
                // Fallback not taken: a usize fits a u64 on every supported target.
                let at = u64::try_from(without.saturating_add(payload_in_block)).unwrap_or(u64::MAX);
                // Fallback not taken: a is a nonzero alignment: the remainder exists.
                let pad = at.checked_rem(a).map_or(0, |r| a.saturating_sub(r).checked_rem(a).unwrap_or(0));
                // Fallback: a pad past usize::MAX fits no buffer, so the size check refuses it.
                Some(usize::try_from(pad).unwrap_or(usize::MAX))
            }
        };
        let pad_entry = pad.map_or(0, |p| 8usize.saturating_add(PAD_KEY.len()).saturating_add(p));
        let total = 16usize.saturating_add(dict).saturating_add(pad_entry).saturating_add(block);
        Ok(Plan { pad, total })
    }
}

/// Sizes of a model file before it is written.
struct Plan {
    /// The padding value's length, when there is a padding key.
    pad: Option<usize>,
    total: usize,
}

/// Where the payload region starts in the canonical block of `specs`.
fn block_payload_base(specs: &[crate::TensorSpec<'_>]) -> Result<usize> {
    let heap =
        specs.iter().flat_map(|s| s.name.iter().chain(s.layout.iter())).fold(0usize, |n, t| n.saturating_add(t.len()));
    let count = u32::try_from(specs.len()).or(fail(Rule::FieldTooWide, 8))?;
    let heap = u32::try_from(heap).or(fail(Rule::FieldTooWide, 12))?;
    match crate::layout::payload_base(count, heap).and_then(usize_from) {
        Some(b) => Ok(b),
        None => fail(Rule::PayloadSizeOverflow, 16),
    }
}

fn put_str(file: &mut [u8], put: &mut impl FnMut(&mut [u8], &[u8]), s: &str) {
    // Fallback not taken: keys and values were checked against the u32 length cap.
    put(file, &u32::try_from(s.len()).unwrap_or(u32::MAX).to_le_bytes());
    put(file, s.as_bytes());
}

fn put_pad(file: &mut [u8], put: &mut impl FnMut(&mut [u8], &[u8]), len: usize) {
    put_str(file, put, PAD_KEY);
    // Fallback: a pad of 4 GiB or more is refused by the parse of the written file.
    put(file, &u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
    const SPACES: [u8; 256] = [b' '; 256];
    let mut left = len;
    while left > 0 {
        let n = left.min(SPACES.len());
        // Fallback not taken: n <= SPACES.len() by the min above.
        put(file, SPACES.get(..n).unwrap_or(&[]));
        left = left.saturating_sub(n);
    }
}
