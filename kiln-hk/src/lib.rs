//! # kiln-hk
//!
//! A reader for HK model containers (`.hk`, magic `HKNT`, version 1.x), the
//! input side of `kiln convert`: no_std, no allocation, every offset and size
//! checked before a slice of the caller's buffer is handed out. It is not
//! part of the Kiln format; it lives beside the core (`kiln-nostd`), whose
//! [`ErrorCode`] table and dtypes it shares.
//!
//! [`HkFile::parse`] checks the whole file once — header, metadata pairs,
//! every TOC entry, every appendix record — and then the iterators and
//! accessors cannot fail. A hostile file gets an [`Error`] with a code, the
//! absolute byte offset and an `Hk*` [`Rule`]; never a panic.
//!
//! ```
//! use kiln_hk::{HkFile, MetaValue, StorageType};
//! # let bytes = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.hk"));
//! let hk = HkFile::parse(&bytes)?;
//! for pair in hk.metadata() {
//!     if let MetaValue::String(arch) = pair.value {
//!         assert_eq!((pair.key, arch), ("general.architecture", "mlp"));
//!     }
//! }
//! let w = hk.find("w").expect("present");
//! assert_eq!(w.storage(), StorageType::F32);
//! assert_eq!(w.shape(), &[2]);
//! assert_eq!(w.data(), &[0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0]);
//! # Ok::<(), kiln_hk::Error>(())
//! ```
//!
//! What is checked, in this order:
//!
//! 1. At least 4 bytes, magic `HKNT`, then 128 bytes (EOF / FRAME).
//! 2. version_major 1; the little-endian flag set and no undefined flag bit;
//!    HAS_APPENDIX set exactly when appendix_offset is nonzero; the 38
//!    reserved bytes zero (FRAME); split_count ≥ 1 and split_index below it (TYPE).
//! 3. The metadata and TOC sections: offset + size does not overflow
//!    (LIMIT), lies inside the file (EOF), starts after the header and, when
//!    there are tensors, ends at or before tensor_data_offset (TYPE). An
//!    empty section is not placed.
//! 4. appendix_offset, when nonzero: 8-aligned, after the header, both
//!    sections and tensor_data_offset (TYPE), not past the end (EOF).
//! 5. The counts: metadata_kv_count × 7 and tensor_count × 60 (the minimum
//!    entry sizes) fit in their sections, before any entry is read (LIMIT on
//!    overflow, else EOF) — a hostile count cannot make a caller loop or
//!    reserve past the bytes.
//! 6. Each metadata pair: inside the section (EOF), key UTF-8, a defined
//!    type tag, int64/float64 exactly 8 bytes, bool one byte 0 or 1,
//!    string/json UTF-8. No bytes after the last pair (TYPE).
//! 7. Each TOC entry: inside the section (EOF), name ≤ 128 bytes (LIMIT) and
//!    UTF-8, defined storage/tile/sparsity codes, ndim ≤ 8 (TYPE), shape
//!    product without overflow (LIMIT); data, scale and residual ranges:
//!    no overflow (LIMIT), inside the file (EOF), inside the payload region
//!    `[tensor_data_offset, appendix_offset or end)` (TYPE); a scale or
//!    residual with offset 0 has size 0; a null_ref has all six fields 0; a
//!    dense type without sparsity has data_size = elements × width; a
//!    shared_ref has the data range of an earlier, non-reference entry.
//!    No bytes after the last entry (TYPE).
//! 8. Appendix records, back to back to the end of the file: 80-byte header
//!    inside the file, entry_type 1..=6, flags bits 0..1 only, reserved 0,
//!    name/target/data inside the file, name and target UTF-8, zero padding
//!    to a multiple of 8 (the last record may stop at the end of the file).
//!
//! Not checked: the alignment value (it does not change how a file is
//! read), the checksum field (reserved, always 0), the appendix data_crc32
//! (always 0), tensor-name uniqueness, and the meaning of block formats.
//! The SHA-256 lineage is checked on request by
// Linked only where the feature builds the item, so docs without it have no broken link.
#![cfg_attr(feature = "sha2", doc = "[`HkFile::verify_lineage`]")]
#![cfg_attr(not(feature = "sha2"), doc = "`HkFile::verify_lineage`")]
//! (feature `sha2`).
#![no_std]
#![forbid(unsafe_code)]
// A published crate: every public item is documented (the workspace only warns).
#![deny(missing_docs)]
// The core's discipline for hostile input: offsets saturate, no indexing,
// no panics; each `unwrap_or` says on the line above why its fallback is
// never taken.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::as_conversions
    )
)]

mod appendix;
mod cursor;
mod error;
mod header;
mod meta;
mod storage;
mod toc;

#[cfg(feature = "sha2")]
pub use appendix::{link_form, payload_hash, record_hash};
pub use appendix::{AppendixIter, AppendixRecord, Lineage, LinkForm, ENTRY_TYPES, RECORD_HEADER_LEN};
pub use error::{Error, ErrorCode, Result, Rule};
pub use header::{
    HkHeader, FLAGS_DEFINED, FLAG_FLEXIBLE_ALIGNMENT, FLAG_HAS_APPENDIX, FLAG_HAS_QUANT_TABLE, FLAG_IS_SHARDED,
    FLAG_LITTLE_ENDIAN, FLAG_RAW_WEIGHT_STORAGE, FLAG_SPARSITY_2_4, FLAG_TILE_ALIGNED, FLAG_UNIVERSAL_PAGE_ALIGNED,
    HK_HEADER_LEN, HK_MAGIC, HK_VERSION_MAJOR,
};
pub use meta::{tag, MetaIter, MetaPair, MetaValue};
pub use storage::{sparsity_name, tile_layout_name, Family, StorageType, SPARSITY_TYPES, TILE_LAYOUTS};
pub use toc::{Span, TocEntry, TocIter, MAX_NAME_LEN, MAX_NDIM};

use cursor::Cursor;
use error::fail;
use header::{AT_APPENDIX_OFFSET, AT_KV_COUNT, AT_METADATA_OFFSET, AT_TENSOR_COUNT, AT_TOC_OFFSET};
use kiln_nostd::int::{u64_from, usize_sat};
use toc::PayloadRegion;

// The README's example runs as a doctest, so the crate's page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;

/// A checked HK file borrowed from the caller's buffer.
#[derive(Clone, Copy, Debug)]
pub struct HkFile<'a> {
    buf: &'a [u8],
    header: HkHeader,
    meta: (usize, usize),
    toc: (usize, usize),
    region: PayloadRegion,
}

/// Start and end of a section, checked against the file and the header.
fn section(h: &HkHeader, len: u64, offset: u64, size: u64, at: usize) -> Result<(usize, usize)> {
    if size == 0 {
        return Ok((0, 0));
    }
    let Some(end) = offset.checked_add(size) else {
        return fail(Rule::HkSectionOverflow, at);
    };
    if end > len {
        return fail(Rule::HkSectionPastEnd, at);
    }
    if offset < u64_from(HK_HEADER_LEN) || (h.tensor_count > 0 && end > h.tensor_data_offset) {
        return fail(Rule::HkSectionPlacement, at);
    }
    Ok((usize_sat(offset), usize_sat(end)))
}

/// count × min must fit in the section.
fn count_fits(count: u64, min: u64, section: (usize, usize), at: usize) -> Result<()> {
    let Some(need) = count.checked_mul(min) else {
        return fail(Rule::HkCountOverflow, at);
    };
    if need > u64_from(section.1.saturating_sub(section.0)) {
        return fail(Rule::HkCountPastSection, at);
    }
    Ok(())
}

impl<'a> HkFile<'a> {
    /// Checks the whole file (see the module documentation for the order).
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        let h = HkHeader::parse(buf)?;
        let len = u64_from(buf.len());
        let meta = section(&h, len, h.metadata_offset, h.metadata_size, AT_METADATA_OFFSET)?;
        let toc = section(&h, len, h.tensor_toc_offset, h.tensor_toc_size, AT_TOC_OFFSET)?;
        if h.appendix_offset != 0 {
            let a = h.appendix_offset;
            let after_sections = a >= u64_from(HK_HEADER_LEN) && a >= u64_from(meta.1) && a >= u64_from(toc.1);
            if !after_sections || a % 8 != 0 || (h.tensor_count > 0 && a < h.tensor_data_offset) {
                return fail(Rule::HkAppendixOffset, AT_APPENDIX_OFFSET);
            }
            if a > len {
                return fail(Rule::HkAppendixTruncated, AT_APPENDIX_OFFSET);
            }
        }
        count_fits(h.metadata_kv_count, meta::MIN_PAIR, meta, AT_KV_COUNT)?;
        count_fits(h.tensor_count, toc::MIN_ENTRY, toc, AT_TENSOR_COUNT)?;
        let region = PayloadRegion {
            start: h.tensor_data_offset,
            end: if h.appendix_offset != 0 { h.appendix_offset } else { len },
            file_len: len,
        };
        let file = HkFile { buf, header: h, meta, toc, region };

        // Metadata pairs.
        let mut c = Cursor::new(buf, meta.0, meta.1, Rule::HkMetaTruncated);
        for _ in 0..h.metadata_kv_count {
            meta::read_pair(&mut c)?;
        }
        if c.remaining() != 0 {
            return fail(Rule::HkSectionTrailing, c.pos());
        }

        // TOC entries.
        let mut c = Cursor::new(buf, toc.0, toc.1, Rule::HkTocTruncated);
        let mut index = 0usize;
        for _ in 0..h.tensor_count {
            let e = toc::read_entry(buf, &mut c, index, &region)?;
            if e.storage() == StorageType::SharedRef && file.shared_target(&e).is_none() {
                return fail(Rule::HkSharedRef, e.entry_offset());
            }
            index = index.saturating_add(1);
        }
        if c.remaining() != 0 {
            return fail(Rule::HkSectionTrailing, c.pos());
        }

        // Appendix records.
        if h.appendix_offset != 0 {
            let mut pos = usize_sat(h.appendix_offset);
            while pos < buf.len() {
                let (_, next) = appendix::read_record(buf, pos)?;
                pos = next;
            }
        }
        Ok(file)
    }

    /// The caller's buffer.
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }

    /// The header.
    pub fn header(&self) -> &HkHeader {
        &self.header
    }

    /// Number of TOC entries.
    pub fn tensor_count(&self) -> u64 {
        self.header.tensor_count
    }

    /// The metadata pairs, in file order.
    pub fn metadata(&self) -> MetaIter<'a> {
        MetaIter {
            cursor: Cursor::new(self.buf, self.meta.0, self.meta.1, Rule::HkMetaTruncated),
            left: self.header.metadata_kv_count,
        }
    }

    /// The first metadata value with this key.
    #[must_use]
    pub fn meta(&self, key: &str) -> Option<MetaValue<'a>> {
        self.metadata().find(|p| p.key == key).map(|p| p.value)
    }

    /// The TOC entries, in file order.
    pub fn tensors(&self) -> TocIter<'a> {
        TocIter {
            buf: self.buf,
            cursor: Cursor::new(self.buf, self.toc.0, self.toc.1, Rule::HkTocTruncated),
            region: self.region,
            next: 0,
            count: self.header.tensor_count,
        }
    }

    /// The first entry named `name` (linear scan).
    #[must_use]
    pub fn find(&self, name: &str) -> Option<TocEntry<'a>> {
        self.tensors().find(|e| e.name() == name)
    }

    /// For a shared_ref, the earlier non-reference entry whose bytes it
    /// shares (the first one with the same data offset and size). For any
    /// other entry, the entry itself.
    #[must_use]
    pub fn resolve(&self, entry: &TocEntry<'a>) -> Option<TocEntry<'a>> {
        if entry.storage() == StorageType::SharedRef {
            self.shared_target(entry)
        } else {
            Some(*entry)
        }
    }

    fn shared_target(&self, entry: &TocEntry<'a>) -> Option<TocEntry<'a>> {
        self.tensors().take(entry.index()).find(|t| !t.storage().is_reference() && t.data_span() == entry.data_span())
    }

    /// The appendix records, in file order (none when appendix_offset is 0).
    pub fn appendix(&self) -> AppendixIter<'a> {
        AppendixIter { buf: self.buf, pos: usize_sat(self.header.appendix_offset) }
    }

    /// Checks the SHA-256 lineage chain: the parent_hash of every record
    /// after the first is SHA-256(name ‖ target ‖ data) of the record before
    /// it, or, in the older form, SHA-256(data). The first record's
    /// parent_hash is not checked. A mismatch is TYPE
    /// ([`Rule::HkLineageHash`]) at the offending parent_hash.
    #[cfg(feature = "sha2")]
    pub fn verify_lineage(&self) -> Result<Lineage> {
        appendix::verify(self.appendix())
    }
}
