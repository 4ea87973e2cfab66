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
//! # let file = kiln_nostd::model::doc_example_file();
//! let m = Model::parse(&file)?;
//! assert_eq!(m.metadata().get("author"), Some("kiln"));
//! assert_eq!(m.directory().len(), 1);
//! // Any reader: a model file or a plain directory, told apart by content.
//! let (meta, dir) = model::parse_any(&file)?;
//! assert_eq!((meta.map(|m| m.len()), dir.len()), (Some(1), 1));
//! # Ok::<(), kiln_nostd::Error>(())
//! ```

use crate::bytes::{u32_at, usize_from};
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
        let limits = parser.caps();
        let at = check_frame(buf, RECORD.schema_hash())?;
        let checker = crate::frozen::Checker { buf, limits, utf8: true };
        let end = checker.value(&METADATA, at)?;
        let directory = parser.parse_at(buf, end)?;
        if directory.end() != buf.len() {
            return fail(Rule::TrailingBytes, directory.end());
        }
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
        let count = u32_at(self.bytes, 0).and_then(|n| usize_from(u64::from(n))).unwrap_or(0);
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
        let len = usize_from(u64::from(u32_at(self.bytes, self.at)?))?;
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

#[doc(hidden)]
/// A small model file for the examples: metadata {author: kiln, kiln.convert.pad: "  "}, one f32 [2].
pub fn doc_example_file() -> [u8; 16 + 4 + 4 + 6 + 4 + 4 + 4 + 16 + 4 + 2 + 200] {
    let mut out = [0u8; 16 + 4 + 4 + 6 + 4 + 4 + 4 + 16 + 4 + 2 + 200];
    let mut at = 0usize;
    let mut put = |bytes: &[u8]| {
        if let Some(dst) = out.get_mut(at..at.saturating_add(bytes.len())) {
            dst.copy_from_slice(bytes);
        }
        at = at.saturating_add(bytes.len());
    };
    put(&crate::frozen::frame_bytes(MODEL_HASH));
    put(&2u32.to_le_bytes());
    for s in ["author", "kiln", PAD_KEY, "  "] {
        put(&u32::try_from(s.len()).unwrap_or(0).to_le_bytes());
        put(s.as_bytes());
    }
    put(&crate::doc_example_block());
    out
}
