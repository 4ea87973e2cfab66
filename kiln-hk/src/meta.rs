//! The HK metadata section: typed key/value pairs.

use crate::error::{fail, Error, Result, Rule};

use super::cursor::Cursor;

/// Metadata value tags.
pub mod tag {
    /// UTF-8 text.
    pub const STRING: u8 = 0x01;
    /// 8 bytes, little-endian.
    pub const INT64: u8 = 0x02;
    /// 8 bytes, IEEE-754.
    pub const FLOAT64: u8 = 0x03;
    /// 1 byte.
    pub const BOOL: u8 = 0x04;
    /// UTF-8 JSON text.
    pub const JSON: u8 = 0x05;
    /// Opaque bytes.
    pub const BYTES: u8 = 0x06;
}

/// Minimum bytes of one pair: key_len u16, type u8, value_len u32.
pub(crate) const MIN_PAIR: u64 = 7;

/// A typed metadata value, borrowed from the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MetaValue<'a> {
    /// Tag 0x01.
    String(&'a str),
    /// Tag 0x02.
    Int64(i64),
    /// Tag 0x03 (bits kept: NaN payloads survive).
    Float64(f64),
    /// Tag 0x04.
    Bool(bool),
    /// Tag 0x05 (the text is UTF-8; it is not parsed as JSON).
    Json(&'a str),
    /// Tag 0x06.
    Bytes(&'a [u8]),
}

impl MetaValue<'_> {
    /// The wire tag.
    pub fn tag(&self) -> u8 {
        match self {
            MetaValue::String(_) => tag::STRING,
            MetaValue::Int64(_) => tag::INT64,
            MetaValue::Float64(_) => tag::FLOAT64,
            MetaValue::Bool(_) => tag::BOOL,
            MetaValue::Json(_) => tag::JSON,
            MetaValue::Bytes(_) => tag::BYTES,
        }
    }

    /// The tag's name (`"string"`, `"int64"`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            MetaValue::String(_) => "string",
            MetaValue::Int64(_) => "int64",
            MetaValue::Float64(_) => "float64",
            MetaValue::Bool(_) => "bool",
            MetaValue::Json(_) => "json",
            MetaValue::Bytes(_) => "bytes",
        }
    }
}

/// One metadata pair.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetaPair<'a> {
    /// The key (UTF-8).
    pub key: &'a str,
    /// The value.
    pub value: MetaValue<'a>,
    /// Absolute offset of the pair in the caller's buffer.
    pub offset: usize,
    /// The value's raw bytes.
    pub raw: &'a [u8],
}

/// Reads one pair at the cursor.
pub(crate) fn read_pair<'a>(c: &mut Cursor<'a>) -> Result<MetaPair<'a>> {
    let offset = c.pos();
    let key_len = c.u16()?;
    let key_at = c.pos();
    let key = c.take(usize::from(key_len))?;
    let key = core::str::from_utf8(key).map_err(|_| Error::new(Rule::HkMetaKeyUtf8, key_at))?;
    let tag_at = c.pos();
    let tag = c.u8()?;
    let len = c.u32()?;
    let value_at = c.pos();
    let raw = c.take_u64_len(u64::from(len))?;
    let utf8 = |b: &'a [u8]| core::str::from_utf8(b).map_err(|_| Error::new(Rule::HkMetaValueUtf8, value_at));
    let eight = || -> Result<[u8; 8]> { raw.try_into().map_err(|_| Error::new(Rule::HkMetaValue, value_at)) };
    let value = match tag {
        tag::STRING => MetaValue::String(utf8(raw)?),
        tag::INT64 => MetaValue::Int64(i64::from_le_bytes(eight()?)),
        tag::FLOAT64 => MetaValue::Float64(f64::from_le_bytes(eight()?)),
        tag::BOOL => match raw {
            [0] => MetaValue::Bool(false),
            [1] => MetaValue::Bool(true),
            _ => return fail(Rule::HkMetaValue, value_at),
        },
        tag::JSON => MetaValue::Json(utf8(raw)?),
        tag::BYTES => MetaValue::Bytes(raw),
        _ => return fail(Rule::HkMetaType, tag_at),
    };
    Ok(MetaPair { key, value, offset, raw })
}

/// Iterator over the metadata pairs of a checked file.
#[derive(Clone, Debug)]
pub struct MetaIter<'a> {
    pub(crate) cursor: Cursor<'a>,
    pub(crate) left: u64,
}

impl<'a> Iterator for MetaIter<'a> {
    type Item = MetaPair<'a>;
    fn next(&mut self) -> Option<MetaPair<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left = self.left.saturating_sub(1);
        // The file was checked by HkFile::parse, so this cannot fail.
        read_pair(&mut self.cursor).ok()
    }
}
