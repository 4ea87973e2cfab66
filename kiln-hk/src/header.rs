//! The 128-byte HK file header.

use crate::error::{fail, Result, Rule};

use super::cursor::Cursor;

/// HK magic, `HKNT`.
pub const HK_MAGIC: [u8; 4] = *b"HKNT";
/// The only major version this reader accepts.
pub const HK_VERSION_MAJOR: u16 = 1;
/// Header length.
pub const HK_HEADER_LEN: usize = 128;

/// Flag bit 0: always set.
pub const FLAG_LITTLE_ENDIAN: u32 = 1 << 0;
/// Flag bit 1: appendix_offset is nonzero.
pub const FLAG_HAS_APPENDIX: u32 = 1 << 1;
/// Flag bit 2: reserved.
pub const FLAG_HAS_QUANT_TABLE: u32 = 1 << 2;
/// Flag bit 3: informational.
pub const FLAG_SPARSITY_2_4: u32 = 1 << 3;
/// Flag bit 4: alignment is a multiple of 128.
pub const FLAG_TILE_ALIGNED: u32 = 1 << 4;
/// Flag bit 5: alignment is not a multiple of 128.
pub const FLAG_FLEXIBLE_ALIGNMENT: u32 = 1 << 5;
/// Flag bit 6: one shard of a multi-file model.
pub const FLAG_IS_SHARDED: u32 = 1 << 6;
/// Flag bit 7: informational.
pub const FLAG_RAW_WEIGHT_STORAGE: u32 = 1 << 7;
/// Flag bit 8: alignment >= 4096.
pub const FLAG_UNIVERSAL_PAGE_ALIGNED: u32 = 1 << 8;
/// Every defined flag bit.
pub const FLAGS_DEFINED: u32 = (1 << 9) - 1;

pub(crate) const AT_VERSION: usize = 0x04;
pub(crate) const AT_FLAGS: usize = 0x08;
pub(crate) const AT_SPLIT_INDEX: usize = 0x0E;
pub(crate) const AT_TENSOR_COUNT: usize = 0x10;
pub(crate) const AT_KV_COUNT: usize = 0x18;
pub(crate) const AT_METADATA_OFFSET: usize = 0x20;
pub(crate) const AT_TOC_OFFSET: usize = 0x30;
pub(crate) const AT_APPENDIX_OFFSET: usize = 0x48;
pub(crate) const AT_RESERVED: usize = 0x5A;

/// The decoded HK header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HkHeader {
    /// 1.
    pub version_major: u16,
    /// Any.
    pub version_minor: u16,
    /// Flag bits (see the `FLAG_*` constants).
    pub flags: u32,
    /// Payload alignment the writer used.
    pub alignment: u16,
    /// Shard index, 0-based.
    pub split_index: u16,
    /// Number of TOC entries.
    pub tensor_count: u64,
    /// Number of metadata pairs.
    pub metadata_kv_count: u64,
    /// Absolute offset of the metadata section.
    pub metadata_offset: u64,
    /// Metadata section length.
    pub metadata_size: u64,
    /// Absolute offset of the TOC.
    pub tensor_toc_offset: u64,
    /// TOC length.
    pub tensor_toc_size: u64,
    /// Absolute offset of the first aligned payload.
    pub tensor_data_offset: u64,
    /// Offset of the first appendix record, 0 if none.
    pub appendix_offset: u64,
    /// Reserved (written as 0, not verified).
    pub checksum: u64,
    /// Total shards, at least 1.
    pub split_count: u16,
}

impl HkHeader {
    /// Reads and checks the header: length, magic, version, flags, reserved tail, split fields.
    pub fn parse(buf: &[u8]) -> Result<HkHeader> {
        if buf.get(..4).is_none() {
            return fail(Rule::HkHeaderTruncated, buf.len());
        }
        if buf.get(..4) != Some(&HK_MAGIC[..]) {
            return fail(Rule::HkMagic, 0);
        }
        if buf.len() < HK_HEADER_LEN {
            return fail(Rule::HkHeaderTruncated, buf.len());
        }
        let mut c = Cursor::new(buf, 4, HK_HEADER_LEN, Rule::HkHeaderTruncated);
        let h = HkHeader {
            version_major: c.u16()?,
            version_minor: c.u16()?,
            flags: c.u32()?,
            alignment: c.u16()?,
            split_index: c.u16()?,
            tensor_count: c.u64()?,
            metadata_kv_count: c.u64()?,
            metadata_offset: c.u64()?,
            metadata_size: c.u64()?,
            tensor_toc_offset: c.u64()?,
            tensor_toc_size: c.u64()?,
            tensor_data_offset: c.u64()?,
            appendix_offset: c.u64()?,
            checksum: c.u64()?,
            split_count: c.u16()?,
        };
        if h.version_major != HK_VERSION_MAJOR {
            return fail(Rule::HkVersion, AT_VERSION);
        }
        if h.flags & !FLAGS_DEFINED != 0 || h.flags & FLAG_LITTLE_ENDIAN == 0 {
            return fail(Rule::HkFlags, AT_FLAGS);
        }
        if (h.flags & FLAG_HAS_APPENDIX != 0) != (h.appendix_offset != 0) {
            return fail(Rule::HkAppendixFlag, AT_FLAGS);
        }
        let tail = c.take(HK_HEADER_LEN.saturating_sub(AT_RESERVED))?;
        if let Some(i) = tail.iter().position(|&b| b != 0) {
            return fail(Rule::HkReserved, AT_RESERVED.saturating_add(i));
        }
        if h.split_count == 0 || h.split_index >= h.split_count {
            return fail(Rule::HkSplit, AT_SPLIT_INDEX);
        }
        Ok(h)
    }

    /// True when the appendix flag is set.
    #[must_use]
    pub fn has_appendix(&self) -> bool {
        self.flags & FLAG_HAS_APPENDIX != 0
    }
}
