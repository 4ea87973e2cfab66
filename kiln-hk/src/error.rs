//! The HK reader's error: a [`Rule`] of its own (the HK checks, in the
//! reader's order) reported with the Kiln core's [`ErrorCode`] table, so
//! the CLI, the fuzz oracles and the goldens see the same codes, rule ids and
//! texts as when the reader lived in `kiln_nostd::hk`.

use core::fmt;

use kiln_nostd::int::u64_from;
pub use kiln_nostd::ErrorCode;

kiln_nostd::rules! {
    /// Which HK rule a rejected file broke, in the order
    /// [`HkFile::parse`](crate::HkFile::parse) checks them.
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    #[non_exhaustive]
    pub enum Rule;

    /// Fewer than 4 bytes, or fewer than 128 once the magic matched.
    HkHeaderTruncated => Eof, "the buffer ends inside the 128-byte HK header";
    /// The first four bytes are not `HKNT`.
    HkMagic => Frame, "the HK magic is not HKNT";
    /// version_major is not 1.
    HkVersion => Frame, "the HK version_major is not 1";
    /// The little-endian flag is clear or an undefined flag bit is set.
    HkFlags => Frame, "the HK flags have an undefined bit set or the little-endian bit clear";
    /// HAS_APPENDIX disagrees with appendix_offset.
    HkAppendixFlag => Frame, "the HK HAS_APPENDIX flag disagrees with appendix_offset";
    /// A byte of the reserved header tail is nonzero.
    HkReserved => Frame, "a reserved HK header byte is nonzero";
    /// split_count is 0 or split_index is not below it.
    HkSplit => Type, "split_count is 0 or split_index is not below it";
    /// A section's offset + size overflows a u64.
    HkSectionOverflow => Limit, "an HK section's offset + size overflows";
    /// A section runs past the end of the file.
    HkSectionPastEnd => Eof, "an HK section runs past the end of the file";
    /// A section starts inside the header or ends after the tensor data starts.
    HkSectionPlacement => Type, "an HK section overlaps the header or the tensor data";
    /// count * minimum entry size overflows a u64.
    HkCountOverflow => Limit, "an HK count * minimum entry size overflows";
    /// count * minimum entry size is more than the section holds.
    HkCountPastSection => Eof, "an HK count needs more bytes than its section holds";
    /// A metadata pair runs past the end of the metadata section.
    HkMetaTruncated => Eof, "an HK metadata pair runs past the end of its section";
    /// A metadata key is not UTF-8.
    HkMetaKeyUtf8 => Utf8, "an HK metadata key is not valid UTF-8";
    /// A metadata value type tag is not 1..=6.
    HkMetaType => Type, "an HK metadata value type is not 1..=6";
    /// An int64/float64 value is not 8 bytes, or a bool is not one byte 0 or 1.
    HkMetaValue => Type, "an HK metadata value has the wrong length or an invalid bool byte";
    /// A string or json value is not UTF-8.
    HkMetaValueUtf8 => Utf8, "an HK metadata string or json value is not valid UTF-8";
    /// Bytes are left in the metadata or TOC section after its last entry.
    HkSectionTrailing => Type, "an HK section continues past its last entry";
    /// A TOC entry runs past the end of the TOC section.
    HkTocTruncated => Eof, "an HK TOC entry runs past the end of the TOC section";
    /// A tensor name is longer than 128 bytes.
    HkNameTooLong => Limit, "an HK tensor name is longer than 128 bytes";
    /// A tensor name is not UTF-8.
    HkNameUtf8 => Utf8, "an HK tensor name is not valid UTF-8";
    /// storage_type is not a defined code.
    HkStorageType => Type, "an HK storage_type is not a defined code";
    /// tile_layout is not a defined code.
    HkTileLayout => Type, "an HK tile_layout is not a defined code";
    /// sparsity_type is not a defined code.
    HkSparsityType => Type, "an HK sparsity_type is not a defined code";
    /// ndim is above 8.
    HkRankTooLarge => Type, "an HK tensor has ndim above 8";
    /// The product of the shape overflows a u64.
    HkShapeOverflow => Limit, "an HK tensor's shape product overflows";
    /// A data, scale or residual offset + size overflows a u64.
    HkRangeOverflow => Limit, "an HK payload offset + size overflows";
    /// A data, scale or residual range runs past the end of the file.
    HkRangePastEnd => Eof, "an HK payload range runs past the end of the file";
    /// A payload range starts before tensor_data_offset or runs into the appendix.
    HkRangeOutsidePayload => Type, "an HK payload range lies outside the tensor data region";
    /// An absent (offset 0) scale or residual range has a nonzero size.
    HkAbsentRange => Type, "an HK scale or residual with offset 0 has a nonzero size";
    /// A dense tensor's data_size is not element count times width.
    HkDenseSize => Type, "an HK dense tensor's data_size is not its element count times its width";
    /// A null_ref carries an offset or bytes.
    HkNullRef => Type, "an HK null_ref has a nonzero offset or size";
    /// A shared_ref does not point at the bytes of an earlier tensor.
    HkSharedRef => Type, "an HK shared_ref does not match an earlier tensor's bytes";
    /// appendix_offset lies inside the header, the sections, or past the end.
    HkAppendixOffset => Type, "the HK appendix_offset is not after the header and sections";
    /// An appendix record runs past the end of the file.
    HkAppendixTruncated => Eof, "an HK appendix record runs past the end of the file";
    /// An appendix entry_type is not 1..=6.
    HkAppendixType => Type, "an HK appendix entry_type is not 1..=6";
    /// An appendix record has undefined flag bits or a nonzero reserved field.
    HkAppendixReserved => Frame, "an HK appendix record has undefined flags or a nonzero reserved field";
    /// An appendix name or target is not UTF-8.
    HkAppendixUtf8 => Utf8, "an HK appendix name or target is not valid UTF-8";
    /// An appendix record's padding is nonzero.
    HkAppendixPadding => Type, "an HK appendix record's padding is nonzero";
    /// A parent_hash is neither SHA-256 form of the previous record.
    HkLineageHash => Type, "an HK appendix parent_hash does not match the previous record";
}

/// A rejected HK file: the rule that failed and the absolute byte offset, in
/// the caller's buffer, of the field that broke it.
///
/// ```
/// let err = kiln_hk::HkFile::parse(b"GGUF").unwrap_err();
/// assert_eq!((err.code(), err.rule(), err.offset()), (kiln_hk::ErrorCode::Frame, kiln_hk::Rule::HkMagic, 0));
/// assert_eq!(err.to_string(), "FRAME at byte 0: the HK magic is not HKNT");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Error {
    rule: Rule,
    offset: usize,
}

impl Error {
    /// An error for `rule` at absolute byte `offset`.
    #[must_use]
    pub const fn new(rule: Rule, offset: usize) -> Self {
        Error { rule, offset }
    }

    /// The error code (the core's table: FRAME, LIMIT, EOF, TYPE, UTF8).
    pub const fn code(&self) -> ErrorCode {
        self.rule.code()
    }

    /// The absolute byte offset of the field or byte that broke the rule; for
    /// EOF, where the missing bytes would have started or the end of the buffer.
    pub const fn offset(&self) -> usize {
        self.offset
    }

    /// [`offset`](Self::offset) as a `u64`, as `kiln_nostd::Error` reports it.
    pub const fn offset_u64(&self) -> u64 {
        u64_from(self.offset)
    }

    /// The rule that failed.
    pub const fn rule(&self) -> Rule {
        self.rule
    }
}

// The core's form, so a caller prints both readers' errors alike.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}: {}", self.code(), self.offset, self.rule.description())
    }
}

impl core::error::Error for Error {}

/// Result alias for this crate.
pub type Result<T> = core::result::Result<T, Error>;

/// Shorthand used by the checks: `fail(Rule::X, at)`.
pub(crate) const fn fail<T>(rule: Rule, at: usize) -> Result<T> {
    Err(Error::new(rule, at))
}

#[cfg(test)]
mod tests {
    use super::{Error, ErrorCode, Rule};

    #[test]
    fn every_rule_has_a_unique_id_and_a_core_code() {
        extern crate std;
        let mut ids = std::vec::Vec::new();
        for rule in Rule::ALL {
            assert!(rule.id().starts_with("Hk") && !rule.description().is_empty(), "{rule:?}");
            assert!(ErrorCode::ALL.contains(&rule.code()));
            ids.push(rule.id());
        }
        ids.sort_unstable();
        ids.dedup();
        assert_eq!((ids.len(), Rule::ALL.len()), (40, 40));
        let e = Error::new(Rule::HkLineageHash, 1204);
        assert_eq!(
            std::format!("{e}"),
            "TYPE at byte 1204: an HK appendix parent_hash does not match the previous record"
        );
        assert_eq!((e.code(), e.offset_u64()), (ErrorCode::Type, 1204));
    }
}
