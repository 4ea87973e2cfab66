//! The compact tensor table handed to JavaScript (`js/directory.js` reads it).
//!
//! One `u32` array per checked directory: [`META`] directory-wide slots, then
//! [`SLOTS`] per tensor, then the dims of every tensor. 64-bit values take two
//! slots, low word first, so offsets and lengths past 4 GiB survive (a remote
//! file can be 20 GiB although wasm32's `usize` is 32 bits): everything is
//! computed from the header and the descriptors in `u64`, never from the
//! core's `usize` offsets. Absent indexes are `u32::MAX`.
//!
//! Names and layout names are given as byte ranges of the name heap; the
//! heap lies in the prefix, so its absolute bounds fit one slot each. The
//! heap is exactly the names and layouts (the core rejects a heap hole), so
//! JavaScript decodes it once and slices it when it is all ASCII, and
//! decodes names one by one otherwise.

use kiln_nostd::descriptor::RawDescriptor;
use kiln_nostd::{layout, Directory};

use crate::conv::{u32_of, u32_sat};

/// u32 slots of the directory-wide part.
pub const META: usize = 10;
// Slot 9 is reserved (0).
/// u32 slots per tensor row.
pub const SLOTS: usize = 17;

/// Directory-wide slots (mirrored in `js/directory.js`).
pub mod meta {
    /// Number of tensors.
    pub const COUNT: usize = 0;
    /// Absolute start of the block (two slots).
    pub const START: usize = 1;
    /// Block length (two slots).
    pub const BLOCK_LEN: usize = 3;
    /// Absolute start of the payload region (two slots).
    pub const PAYLOAD: usize = 5;
    /// Absolute start of the name heap.
    pub const HEAP_START: usize = 7;
    /// Absolute end of the name heap.
    pub const HEAP_END: usize = 8;
}

/// Slots of a tensor row (mirrored in `js/directory.js`).
pub mod slot {
    /// dtype code (low 16 bits) | rank << 16.
    pub const DTYPE_RANK: usize = 0;
    /// Absolute payload offset (two slots).
    pub const OFFSET: usize = 1;
    /// Payload length (two slots).
    pub const LENGTH: usize = 3;
    /// Element count (two slots).
    pub const COUNT: usize = 5;
    /// Name byte offset in the heap (or u32::MAX).
    pub const NAME_AT: usize = 7;
    /// Name byte length.
    pub const NAME_LEN: usize = 8;
    /// Layout name byte offset in the heap (or u32::MAX).
    pub const LAYOUT_AT: usize = 9;
    /// Layout name byte length.
    pub const LAYOUT_LEN: usize = 10;
    /// Opaque block size in bytes (0 for other dtypes).
    pub const BLOCK_SIZE: usize = 11;
    /// quant_scheme (low 16 bits) | quant_axis << 16.
    pub const SCHEME_AXIS: usize = 12;
    /// Quantization group size.
    pub const GROUP: usize = 13;
    /// Index of the scale tensor.
    pub const SCALE: usize = 14;
    /// Index of the outer-scale tensor, or u32::MAX.
    pub const OUTER: usize = 15;
    /// Index in the table of this tensor's dims: `rank` (low, high) pairs.
    pub const SHAPE_AT: usize = 16;
}

/// [`META`], [`SLOTS`], then every [`meta`] and every [`slot`] index in
/// declaration order: `js/directory.js` states them again as constants (its
/// hot paths read them), and `test/tables.test.mjs` holds the two equal.
pub const LAYOUT: [usize; 22] = [
    META,
    SLOTS,
    meta::COUNT,
    meta::START,
    meta::BLOCK_LEN,
    meta::PAYLOAD,
    meta::HEAP_START,
    meta::HEAP_END,
    slot::DTYPE_RANK,
    slot::OFFSET,
    slot::LENGTH,
    slot::COUNT,
    slot::NAME_AT,
    slot::NAME_LEN,
    slot::LAYOUT_AT,
    slot::LAYOUT_LEN,
    slot::BLOCK_SIZE,
    slot::SCHEME_AXIS,
    slot::GROUP,
    slot::SCALE,
    slot::OUTER,
    slot::SHAPE_AT,
];

fn lo_hi(v: u64) -> [u32; 2] {
    let [a, b, c, d, e, f, g, h] = v.to_le_bytes();
    [u32::from_le_bytes([a, b, c, d]), u32::from_le_bytes([e, f, g, h])]
}

/// Writes the table of a checked directory whose block starts at absolute
/// offset `start` (0 for a standalone block; the field's offset inside a
/// Frozen value). `dir` may come from `Incremental::directory` (a prefix
/// without payload bytes) or from a parse of the whole value.
pub fn build(dir: &Directory<'_>, start: u64, out: &mut Vec<u32>) {
    let h = dir.header();
    let count = dir.len();
    let heap_start = start.saturating_add(layout::descriptors_end(h.tensor_count));
    let heap_end = start.saturating_add(layout::heap_end(h.tensor_count, h.name_bytes));
    let base = layout::payload_base(h.tensor_count, h.name_bytes).unwrap_or(u64::MAX);
    let payload = start.saturating_add(base);
    let block_len = base.saturating_add(h.payload_bytes);
    out.clear();
    // The rows and the dims of rank-2 tensors reserved at once: growing a
    // table of many MiB later copies it (the first call, before the table is kept).
    let rows_end = count.saturating_mul(SLOTS).saturating_add(META);
    out.reserve(rows_end.saturating_add(count.saturating_mul(4)));
    out.push(u32_of(count));
    out.extend_from_slice(&lo_hi(start));
    out.extend_from_slice(&lo_hi(block_len));
    out.extend_from_slice(&lo_hi(payload));
    out.extend_from_slice(&[u32_sat(heap_start), u32_sat(heap_end), 0]);
    // `count` descriptors are in wasm memory, more bytes each than a row: the rows fit too.
    out.resize(rows_end, 0);
    // The checked descriptors themselves, read field by field (no tensor
    // view decoded for each: 100,000 rows cost half the time).
    let mut at = META;
    for d in dir.raw_descriptors() {
        let shape_at = u32_of(out.len());
        for dim in d.dims() {
            out.extend_from_slice(&lo_hi(dim));
        }
        if let Some(row) = out.get_mut(at..at.saturating_add(SLOTS)) {
            fill_row(d, payload, shape_at, row);
        }
        at = at.saturating_add(SLOTS);
    }
}

fn fill_row(d: &RawDescriptor, payload: u64, shape_at: u32, row: &mut [u32]) {
    let pos = |(off, len): (u16, u16)| if len == 0 { (u32::MAX, 0) } else { (u32::from(off), u32::from(len)) };
    let (name_at, name_len) = pos(d.name_field());
    let (layout_at, layout_len) = pos(d.layout_field());
    let [off_lo, off_hi] = lo_hi(payload.saturating_add(d.byte_offset()));
    let [len_lo, len_hi] = lo_hi(d.byte_length());
    // Checked by the core: the product does not overflow.
    let [count_lo, count_hi] = lo_hi(d.element_count().unwrap_or(0));
    let values = [
        u32::from(d.dtype_code()) | u32::from(d.rank()) << 16,
        off_lo,
        off_hi,
        len_lo,
        len_hi,
        count_lo,
        count_hi,
        name_at,
        name_len,
        layout_at,
        layout_len,
        d.block_size(),
        u32::from(d.quant_scheme()) | u32::from(d.quant_axis()) << 16,
        d.group_size(),
        d.scale_index(),
        d.outer_index(),
        shape_at,
    ];
    for (dst, v) in row.iter_mut().zip(values) {
        *dst = v;
    }
}
