//! The compact tensor table handed to JavaScript (`js/directory.js` reads it).
//!
//! One `u32` array per checked directory: [`META`] directory-wide slots, then
//! a row of [`SLOTS`] per tensor, then each tensor's dims and, for a tensor
//! with an opaque layout or quantization, its extra record of
//! [`EXTRA_SLOTS`] (a plain tensor has none: its row's `EXTRA` is absent, and
//! those fields are their defaults). 64-bit values take two slots, low word
//! first, so offsets and lengths past 4 GiB survive (a remote file can be
//! 20 GiB although wasm32's `usize` is 32 bits): everything is computed from
//! the header and the descriptors in `u64`, never from the core's `usize`
//! offsets. Absent indexes are `u32::MAX`. The element count is not stored:
//! it is the product of the dims (JavaScript multiplies them on access).
//!
//! Names and layout names are given as byte ranges of the name heap; the
//! heap lies in the prefix, so its absolute bounds fit one slot each. The
//! heap is exactly the names and layouts (the core rejects a heap hole), so
//! JavaScript decodes it once and slices it when it is all ASCII, and
//! decodes names one by one otherwise.

use kiln_nostd::wire::descriptor::RawDescriptor;
use kiln_nostd::{wire::layout, Directory};

use crate::conv::{u32_of, u32_sat};

/// u32 slots of the directory-wide part.
pub const META: usize = 10;
// Slot 9 is reserved (0).
/// u32 slots per tensor row: what every tensor has (9 words, not the 17 a
/// row with every field took: a table of 100,000 tensors is 4.4 MB, not
/// 7.6, to build and to copy out of wasm memory).
pub const SLOTS: usize = 9;
/// u32 slots of an extra record.
pub const EXTRA_SLOTS: usize = 7;

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
    /// Name byte offset in the heap (or u32::MAX).
    pub const NAME_AT: usize = 5;
    /// Name byte length.
    pub const NAME_LEN: usize = 6;
    /// Index in the table of this tensor's dims: `rank` (low, high) pairs.
    pub const SHAPE_AT: usize = 7;
    /// Index in the table of this tensor's extra record, or u32::MAX.
    pub const EXTRA: usize = 8;
}

/// Slots of an extra record (mirrored in `js/directory.js`).
pub mod extra {
    /// Layout name byte offset in the heap (or u32::MAX).
    pub const LAYOUT_AT: usize = 0;
    /// Layout name byte length.
    pub const LAYOUT_LEN: usize = 1;
    /// Opaque block size in bytes (0 for other dtypes).
    pub const BLOCK_SIZE: usize = 2;
    /// quant_scheme (low 16 bits) | quant_axis << 16.
    pub const SCHEME_AXIS: usize = 3;
    /// Quantization group size.
    pub const GROUP: usize = 4;
    /// Index of the scale tensor.
    pub const SCALE: usize = 5;
    /// Index of the outer-scale tensor, or u32::MAX.
    pub const OUTER: usize = 6;
}

/// [`META`], [`SLOTS`], every [`meta`] and every [`slot`] index, then
/// [`EXTRA_SLOTS`] and every [`extra`] index, in declaration order:
/// `js/directory.js` states them again as constants (its hot paths read
/// them), and `test/tables.test.mjs` holds the two equal.
pub const LAYOUT: [usize; 23] = [
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
    slot::NAME_AT,
    slot::NAME_LEN,
    slot::SHAPE_AT,
    slot::EXTRA,
    EXTRA_SLOTS,
    extra::LAYOUT_AT,
    extra::LAYOUT_LEN,
    extra::BLOCK_SIZE,
    extra::SCHEME_AXIS,
    extra::GROUP,
    extra::SCALE,
    extra::OUTER,
];

fn lo_hi(v: u64) -> [u32; 2] {
    let [a, b, c, d, e, f, g, h] = v.to_le_bytes();
    [u32::from_le_bytes([a, b, c, d]), u32::from_le_bytes([e, f, g, h])]
}

/// One tensor's fields as the table holds them (a directory's or a
/// manifest's): [`put`] lays them out, in the one place that knows the order.
pub(crate) struct Entry {
    /// dtype code | rank << 16.
    pub dtype_rank: u32,
    /// Absolute payload offset (`u64::MAX`: not known yet, a manifest's).
    pub offset: u64,
    pub length: u64,
    /// The name's heap range ([`heap_range`]).
    pub name: [u32; 2],
    /// The extra record, for a tensor with an opaque layout or quantization.
    pub extra: Option<Extra>,
}

/// The fields of an extra record.
pub(crate) struct Extra {
    /// The layout name's heap range ([`heap_range`]).
    pub layout: [u32; 2],
    pub block_size: u32,
    /// quant_scheme | quant_axis << 16.
    pub scheme_axis: u32,
    pub group: u32,
    /// Indices of the scale and outer-scale tensors (u32::MAX: none).
    pub scale: u32,
    pub outer: u32,
}

/// A byte range of the heap: `[at, len]`, or `[u32::MAX, 0]` when empty.
pub(crate) fn heap_range(at: u32, len: u32) -> [u32; 2] {
    if len == 0 {
        [u32::MAX, 0]
    } else {
        [at, len]
    }
}

/// Writes tensor `index`'s row (reserved already), appending its `dims`
/// and its extra record; returns where the extra record starts.
pub(crate) fn put(out: &mut Vec<u32>, index: usize, dims: impl IntoIterator<Item = u64>, e: Entry) -> Option<usize> {
    let shape_at = u32_of(out.len());
    for dim in dims {
        out.extend_from_slice(&lo_hi(dim));
    }
    let extra_at = e.extra.map(|x| {
        let at = out.len();
        let [layout_at, layout_len] = x.layout;
        out.extend_from_slice(&[layout_at, layout_len, x.block_size, x.scheme_axis, x.group, x.scale, x.outer]);
        at
    });
    let [off_lo, off_hi] = lo_hi(e.offset);
    let [len_lo, len_hi] = lo_hi(e.length);
    let [name_at, name_len] = e.name;
    let row =
        [e.dtype_rank, off_lo, off_hi, len_lo, len_hi, name_at, name_len, shape_at, extra_at.map_or(u32::MAX, u32_of)];
    let at = META.saturating_add(index.saturating_mul(SLOTS));
    if let Some(dst) = out.get_mut(at..at.saturating_add(SLOTS)) {
        dst.copy_from_slice(&row);
    }
    extra_at
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
    for (i, d) in dir.raw_descriptors().iter().enumerate() {
        put(out, i, d.dims(), entry(d, payload));
    }
}

/// Descriptor `d`'s fields, its payload region starting at absolute offset `payload`.
fn entry(d: &RawDescriptor, payload: u64) -> Entry {
    let range = |(off, len): (u16, u16)| heap_range(u32::from(off), u32::from(len));
    let (layout, block_size, scheme) = (d.layout_field(), d.block_size(), d.quant_scheme());
    let plain = layout.1 == 0 && block_size == 0 && scheme == 0;
    Entry {
        dtype_rank: u32::from(d.dtype_code()) | u32::from(d.rank()) << 16,
        offset: payload.saturating_add(d.byte_offset()),
        length: d.byte_length(),
        name: range(d.name_field()),
        extra: (!plain).then(|| Extra {
            layout: range(layout),
            block_size,
            scheme_axis: u32::from(scheme) | u32::from(d.quant_axis()) << 16,
            group: d.group_size(),
            scale: d.scale_index(),
            outer: d.outer_index(),
        }),
    }
}
