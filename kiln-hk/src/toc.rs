//! The HK tensor table of contents: variable-length entries, back to back.

use crate::error::{fail, Error, Result, Rule};

use super::cursor::Cursor;
use super::storage::{StorageType, SPARSITY_TYPES, TILE_LAYOUTS};
use kiln_nostd::int::usize_sat;

/// Longest tensor name, in bytes.
pub const MAX_NAME_LEN: usize = 128;
/// Largest ndim.
pub const MAX_NDIM: usize = 8;
/// Minimum bytes of one TOC entry (empty name, ndim 0).
pub(crate) const MIN_ENTRY: u64 = 2 + 4 + 6 * 8 + 2 + 4;

/// Where payloads may lie: `[start, end)` of the file, and the file length.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PayloadRegion {
    pub start: u64,
    pub end: u64,
    pub file_len: u64,
}

/// An (offset, size) pair of a TOC entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Span {
    /// Absolute offset in the file.
    pub offset: u64,
    /// Length in bytes.
    pub size: u64,
}

/// One TOC entry of a checked file. Its byte accessors borrow the caller's buffer.
#[derive(Clone, Copy, Debug)]
pub struct TocEntry<'a> {
    buf: &'a [u8],
    index: usize,
    offset: usize,
    name: &'a str,
    storage: StorageType,
    tile_layout: u8,
    sparsity: u8,
    ndim: u8,
    shape: [u64; MAX_NDIM],
    data: Span,
    residual: Span,
    scales: Span,
    block_size: u16,
    sparsity_ratio: u32,
}

impl<'a> TocEntry<'a> {
    /// Position in the TOC.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Absolute offset of the entry in the file.
    pub fn entry_offset(&self) -> usize {
        self.offset
    }

    /// The tensor name (UTF-8, at most 128 bytes).
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The storage type.
    pub fn storage(&self) -> StorageType {
        self.storage
    }

    /// The tile layout code (0 = row_major).
    pub fn tile_layout(&self) -> u8 {
        self.tile_layout
    }

    /// The sparsity type code (0 = none).
    pub fn sparsity(&self) -> u8 {
        self.sparsity
    }

    /// The stored dimensions (`ndim` of them).
    pub fn shape(&self) -> &[u64] {
        // Fallback not taken: ndim was checked to be at most the slot count.
        self.shape.get(..usize::from(self.ndim)).unwrap_or(&[])
    }

    /// The product of the dimensions (1 for ndim 0); checked not to overflow.
    pub fn element_count(&self) -> u64 {
        // Fallback not taken: the product was checked not to overflow at parse time.
        element_count(self.shape()).unwrap_or(0)
    }

    /// Offset and size of the data.
    pub fn data_span(&self) -> Span {
        self.data
    }

    /// Offset and size of the scales (offset 0: none).
    pub fn scale_span(&self) -> Span {
        self.scales
    }

    /// Offset and size of the residual (offset 0: none).
    pub fn residual_span(&self) -> Span {
        self.residual
    }

    /// The data bytes (empty for a null_ref; the target's bytes for a shared_ref).
    pub fn data(&self) -> &'a [u8] {
        slice(self.buf, self.data)
    }

    /// The scale bytes, when the entry has a scale region.
    #[must_use]
    pub fn scales(&self) -> Option<&'a [u8]> {
        (self.scales.offset != 0).then(|| slice(self.buf, self.scales))
    }

    /// The residual bytes, when the entry has a residual region.
    #[must_use]
    pub fn residual(&self) -> Option<&'a [u8]> {
        (self.residual.offset != 0).then(|| slice(self.buf, self.residual))
    }

    /// The quantization block size field (weights per block; default 32).
    pub fn block_size(&self) -> u16 {
        self.block_size
    }

    /// The sparsity ratio (stored as f32 bits).
    pub fn sparsity_ratio(&self) -> f32 {
        f32::from_bits(self.sparsity_ratio)
    }

    /// The sparsity ratio's bits.
    pub fn sparsity_ratio_bits(&self) -> u32 {
        self.sparsity_ratio
    }
}

fn slice(buf: &[u8], s: Span) -> &[u8] {
    let start = usize_sat(s.offset);
    let end = start.saturating_add(usize_sat(s.size));
    // Fallback not taken: the section was checked to lie inside the buffer.
    buf.get(start..end).unwrap_or(&[])
}

pub(crate) fn element_count(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// Checks one payload range. `absent_ok`: offset 0 means "none" (scales, residual).
fn check_span(s: Span, at: usize, region: &PayloadRegion, absent_ok: bool) -> Result<()> {
    if absent_ok && s.offset == 0 {
        return if s.size == 0 { Ok(()) } else { fail(Rule::HkAbsentRange, at.saturating_add(8)) };
    }
    if s.size == 0 {
        return Ok(());
    }
    let Some(end) = s.offset.checked_add(s.size) else {
        return fail(Rule::HkRangeOverflow, at);
    };
    if end > region.file_len {
        return fail(Rule::HkRangePastEnd, at);
    }
    if s.offset < region.start || end > region.end {
        return fail(Rule::HkRangeOutsidePayload, at);
    }
    Ok(())
}

/// Reads and checks one entry at the cursor (everything but shared_ref
/// resolution, which needs the earlier entries).
pub(crate) fn read_entry<'a>(
    buf: &'a [u8],
    c: &mut Cursor<'a>,
    index: usize,
    region: &PayloadRegion,
) -> Result<TocEntry<'a>> {
    let offset = c.pos();
    let name_len = usize::from(c.u16()?);
    if name_len > MAX_NAME_LEN {
        return fail(Rule::HkNameTooLong, offset);
    }
    let name_at = c.pos();
    let name = c.take(name_len)?;
    let name = core::str::from_utf8(name).map_err(|_| Error::new(Rule::HkNameUtf8, name_at))?;
    let storage_at = c.pos();
    let [st, tile_layout, sparsity, ndim] = c.array::<4>()?;
    let Some(storage) = StorageType::from_code(st) else {
        return fail(Rule::HkStorageType, storage_at);
    };
    if usize::from(tile_layout) >= TILE_LAYOUTS.len() {
        return fail(Rule::HkTileLayout, storage_at.saturating_add(1));
    }
    if usize::from(sparsity) >= SPARSITY_TYPES.len() {
        return fail(Rule::HkSparsityType, storage_at.saturating_add(2));
    }
    if usize::from(ndim) > MAX_NDIM {
        return fail(Rule::HkRankTooLarge, storage_at.saturating_add(3));
    }
    let shape_at = c.pos();
    let mut shape = [0u64; MAX_NDIM];
    for slot in shape.iter_mut().take(usize::from(ndim)) {
        *slot = c.u64()?;
    }
    let spans_at = c.pos();
    let data = Span { offset: c.u64()?, size: c.u64()? };
    let residual = Span { offset: c.u64()?, size: c.u64()? };
    let scales = Span { offset: c.u64()?, size: c.u64()? };
    let block_size = c.u16()?;
    let sparsity_ratio = c.u32()?;

    // Fallback not taken: ndim was checked to be at most the slot count just above.
    let dims = shape.get(..usize::from(ndim)).unwrap_or(&[]);
    let Some(count) = element_count(dims) else {
        return fail(Rule::HkShapeOverflow, shape_at);
    };
    let data_at = spans_at;
    let residual_at = spans_at.saturating_add(16);
    let scales_at = spans_at.saturating_add(32);
    if storage == StorageType::NullRef {
        if data != Span::default() {
            return fail(Rule::HkNullRef, data_at);
        }
        if residual != Span::default() {
            return fail(Rule::HkNullRef, residual_at);
        }
        if scales != Span::default() {
            return fail(Rule::HkNullRef, scales_at);
        }
    }
    check_span(data, data_at, region, false)?;
    check_span(residual, residual_at, region, true)?;
    check_span(scales, scales_at, region, true)?;
    if let (Some(width), 0) = (storage.dense_width(), sparsity) {
        if count.checked_mul(u64::from(width)) != Some(data.size) {
            return fail(Rule::HkDenseSize, data_at.saturating_add(8));
        }
    }
    Ok(TocEntry {
        buf,
        index,
        offset,
        name,
        storage,
        tile_layout,
        sparsity,
        ndim,
        shape,
        data,
        residual,
        scales,
        block_size,
        sparsity_ratio,
    })
}

/// Iterator over the TOC of a checked file.
#[derive(Clone, Debug)]
pub struct TocIter<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) cursor: Cursor<'a>,
    pub(crate) region: PayloadRegion,
    pub(crate) next: usize,
    pub(crate) count: u64,
}

impl<'a> Iterator for TocIter<'a> {
    type Item = TocEntry<'a>;
    fn next(&mut self) -> Option<TocEntry<'a>> {
        if u64::try_from(self.next).ok()? >= self.count {
            return None;
        }
        let e = read_entry(self.buf, &mut self.cursor, self.next, &self.region).ok()?;
        self.next = self.next.saturating_add(1);
        Some(e)
    }
}
