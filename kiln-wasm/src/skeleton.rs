//! The skeleton: how the core validator checks a block without the payload
//! being copied into wasm memory.
//!
//! `kiln_nostd::Parser` checks a block in one `&[u8]`. The payload can be a
//! gigabyte, and copying it into wasm memory would cost time, memory, and the
//! "zero payload copies" promise. But the core reads very few payload bytes:
//!
//! * step 10: the gap `[running_end, byte_offset)` before each tensor (at most
//!   63 bytes, and only where `byte_offset` is the canonical placement);
//! * step 11: every byte of a `bool` tensor, and the last byte of an odd-length
//!   packed (`i4`, `u4`, `e2m1`) tensor.
//!
//! Everything else the core looks at lies in the prefix (header, descriptors,
//! name heap, padding) or is the buffer length. So the checker builds a
//! *skeleton* in wasm memory: the real prefix, then zeros up to the length the
//! core must see, with the few payload bytes that could change a verdict copied
//! in from the caller's buffer (a [`Probe`] says where they are). The core then
//! runs unchanged over the skeleton, and its verdict (code, offset, rule) is
//! the verdict it would give for the real buffer: every byte it reads has its
//! real value. `tests` below check that claim against the core run directly.
//!
//! The zero pages of the skeleton come from `memory.grow` and are never
//! written, so a 1 GiB block costs 1 GiB of address space, not of RAM.

use kiln_nostd::descriptor::{Descriptor, RawDescriptor};
use kiln_nostd::header::{Header, DESCRIPTOR_LEN, HEADER_LEN};
use kiln_nostd::{DType, Directory, Tensor};

/// A probe range: a nonzero byte matters (the first one is enough).
pub const PROBE_GAP: u32 = 0;
/// A probe range: a byte above 1 matters (the first one is enough).
pub const PROBE_BOOL: u32 = 1;
/// A one-byte probe: a nonzero high nibble matters.
pub const PROBE_NIBBLE: u32 = 2;

/// The largest skeleton this build can lay out: the wasm32 address space,
/// less room for the module's own heap.
pub const MAX_SKELETON: u64 = 0xF000_0000;

const HEADER: u64 = HEADER_LEN as u64;
const DESCRIPTOR: u64 = DESCRIPTOR_LEN as u64;

fn align64(v: u64) -> Option<u64> {
    Some(v.checked_add(63)? & !63)
}

/// What to lay out for an input of `total` bytes whose first bytes are `head`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Plan {
    /// How many leading bytes of the input the skeleton holds verbatim (P).
    pub prefix: u64,
    /// The length of the buffer the core sees (L): the input length, or the
    /// block length plus one trailing byte when the input continues further
    /// (enough for the core to say TRAILING at the same offset).
    pub len: u64,
    /// Start of the payload region, when the header gives one.
    pub payload_base: Option<u64>,
    /// The block length the header declares, when it does not overflow.
    pub block_len: Option<u64>,
    /// tensor_count, when the header passes steps 1 and 2.
    pub count: u32,
}

/// Plans the skeleton for an input of `total` bytes starting with `head`
/// (its first `min(total, 64)` bytes).
///
/// The core's verdict depends on the input length only through "does the
/// directory fit" (step 5), "does the block fit" (step 6) and "does anything
/// follow" (step 12), so `len` keeps all three answers.
pub fn plan(head: &[u8], total: u64) -> Plan {
    let short = total.min(HEADER);
    let header_only = Plan { prefix: short, len: short, ..Plan::default() };
    let Ok(h) = Header::parse(head) else {
        // Steps 1 and 2 read the first 64 bytes and the length below 64 only.
        return header_only;
    };
    // 64 + directory_bytes overflowing means directory_bytes > 2^64 - 128,
    // which can never equal tensor_count * 128 + name_bytes (< 2^40): step 4
    // fails with TYPE whatever the length, or step 3 fails first.
    let Some(base) = HEADER.checked_add(h.directory_bytes).and_then(align64) else {
        return Plan { count: h.tensor_count, ..header_only };
    };
    let prefix = total.min(base);
    let block_len = base.checked_add(h.payload_bytes);
    let len = match block_len {
        // Step 6 overflow (LIMIT) after step 5, which only needs heap_end <= base.
        None => prefix,
        Some(end) => total.min(end.saturating_add(1)),
    };
    Plan { prefix, len, payload_base: Some(base), block_len, count: h.tensor_count }
}

/// One payload range of the input whose bytes may decide the verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Absolute start in the input.
    pub start: u64,
    /// Absolute end (exclusive).
    pub end: u64,
    /// [`PROBE_GAP`], [`PROBE_BOOL`] or [`PROBE_NIBBLE`].
    pub kind: u32,
}

/// The probes of a planned skeleton whose prefix is `prefix` (the input's
/// first `plan.prefix` bytes), in payload order when the directory is
/// canonical. Descriptors are decoded without trusting them: every range is
/// clipped to `[payload_base, plan.len)`, and a range the core would refuse
/// before reading it only costs a useless probe.
pub fn probes(prefix: &[u8], plan: &Plan, mut out: impl FnMut(Probe)) {
    let Some(base) = plan.payload_base else {
        return;
    };
    if plan.prefix < base {
        // The input ends before the payload: len == prefix, nothing to probe.
        return;
    }
    let count = u64::from(plan.count);
    let Some(end) = count.checked_mul(DESCRIPTOR).and_then(|d| d.checked_add(HEADER)) else {
        return;
    };
    let Some(table) = usize::try_from(end).ok().and_then(|e| prefix.get(HEADER_LEN..e)) else {
        return;
    };
    let limit = plan.len;
    let mut push = |start: Option<u64>, end: Option<u64>, kind: u32| {
        if let (Some(s), Some(e)) = (start.and_then(|s| base.checked_add(s)), end.and_then(|e| base.checked_add(e))) {
            let e = e.min(limit);
            if s < e {
                out(Probe { start: s, end: e, kind });
            }
        }
    };
    let mut running_end = 0u64;
    for raw in RawDescriptor::slice(table) {
        let d = Descriptor::from_raw(raw);
        // Step 10 reads [running_end, byte_offset) only at the canonical offset.
        if align64(running_end) == Some(d.byte_offset) && d.byte_offset > running_end {
            push(Some(running_end), Some(d.byte_offset), PROBE_GAP);
        }
        running_end = d.range_end().unwrap_or(u64::MAX);
        match DType::from_code(d.dtype) {
            Some(DType::Bool) => push(Some(d.byte_offset), d.range_end(), PROBE_BOOL),
            Some(DType::I4 | DType::U4 | DType::E2M1)
                if d.element_count().is_some_and(|n| n % 2 == 1) && d.byte_length > 0 =>
            {
                push(d.range_end().map(|e| e - 1), d.range_end(), PROBE_NIBBLE)
            }
            _ => {}
        }
    }
}

/// The one byte of `real` inside a probe that has to reach the skeleton,
/// as (position relative to `real`, value): the first nonzero gap byte, the
/// first bool byte above 1, a last packed byte with a high nibble. The same
/// rule is written in JavaScript (`js/check.js`); both must agree.
pub fn probe_hit(real: &[u8], kind: u32) -> Option<(usize, u8)> {
    let pos = match kind {
        PROBE_GAP => real.iter().position(|&b| b != 0),
        PROBE_BOOL => real.iter().position(|&b| b > 1),
        _ => real.first().and_then(|&b| (b & 0xF0 != 0).then_some(0)),
    }?;
    real.get(pos).map(|&b| (pos, b))
}

/// u32 slots per tensor row in the table handed to JavaScript.
pub const SLOTS: usize = 15;
/// u32 slots of the directory-wide header of that table.
pub const META: usize = 8;

/// Slot indexes of a row (mirrored in `js/directory.js`). 64-bit values are
/// two slots, low word first; absent indexes are `u32::MAX`.
pub mod slot {
    /// dtype code (low 16 bits) | rank << 16.
    pub const DTYPE_RANK: usize = 0;
    /// Absolute payload offset (the skeleton is below 4 GiB).
    pub const OFFSET: usize = 1;
    /// Payload length.
    pub const LENGTH: usize = 2;
    /// Element count, low then high word.
    pub const COUNT: usize = 3;
    /// Name position in the decoded heap (UTF-16 units), or u32::MAX.
    pub const NAME_AT: usize = 5;
    pub const NAME_LEN: usize = 6;
    pub const LAYOUT_AT: usize = 7;
    pub const LAYOUT_LEN: usize = 8;
    pub const BLOCK_SIZE: usize = 9;
    /// quant_scheme (low 16 bits) | quant_axis << 16 (0xFFFF when none).
    pub const SCHEME_AXIS: usize = 10;
    pub const GROUP: usize = 11;
    pub const SCALE: usize = 12;
    pub const OUTER: usize = 13;
    /// Index in the table of this tensor's dims: `rank` (low, high) pairs.
    pub const SHAPE_AT: usize = 14;
}

fn u32_of(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn lo_hi(v: u64) -> [u32; 2] {
    [(v & 0xFFFF_FFFF) as u32, (v >> 32) as u32]
}

/// Writes the table of a checked directory: [`META`] slots (count, block
/// start, block length, payload start, heap start, heap end, UTF-16 heap
/// flag, 0), then [`SLOTS`] per tensor, then the dims of every tensor. Name
/// and layout positions are UTF-16 code units into the decoded name heap
/// (the heap is the concatenation of valid UTF-8 names, so it decodes as one
/// string). The block lies below 4 GiB (the skeleton does), so offsets and
/// lengths fit one slot.
pub fn table(dir: &Directory<'_>, utf16: &mut alloc_free::Utf16Map, out: &mut Vec<u32>) {
    let count = dir.len();
    let block = dir.block();
    let heap_start = HEADER_LEN + count * DESCRIPTOR_LEN;
    let heap_end = HEADER_LEN + usize::try_from(dir.header().directory_bytes).unwrap_or(0);
    let heap = block.get(heap_start..heap_end).unwrap_or(&[]);
    let ascii = heap.is_ascii();
    if !ascii {
        utf16.build(heap);
    }
    out.clear();
    out.extend_from_slice(&[
        u32_of(count),
        u32_of(dir.start()),
        u32_of(dir.block_len()),
        u32_of(dir.payload_start()),
        u32_of(dir.start() + heap_start),
        u32_of(dir.start() + heap_end),
        u32::from(!ascii),
        0,
    ]);
    let rows_end = META + count * SLOTS;
    out.resize(rows_end, 0);
    let mut at = META;
    for t in dir.iter() {
        let shape_at = out.len();
        for &dim in t.shape() {
            out.extend_from_slice(&lo_hi(dim));
        }
        if let Some(row) = out.get_mut(at..at + SLOTS) {
            fill_row(&t, ascii, utf16, u32_of(shape_at), row);
        }
        at += SLOTS;
    }
}

fn fill_row(t: &Tensor<'_>, ascii: bool, utf16: &alloc_free::Utf16Map, shape_at: u32, row: &mut [u32]) {
    let d = t.descriptor();
    let pos = |off: u16, len: u16| -> (u32, u32) {
        if len == 0 {
            return (u32::MAX, 0);
        }
        if ascii {
            return (u32::from(off), u32::from(len));
        }
        let a = utf16.at(usize::from(off));
        let b = utf16.at(usize::from(off) + usize::from(len));
        (a, b - a)
    };
    let (name_at, name_len) = pos(d.name_off, d.name_len);
    let (layout_at, layout_len) = pos(d.layout_off, d.layout_len);
    let [count_lo, count_hi] = lo_hi(t.element_count());
    let values = [
        u32::from(d.dtype) | u32::from(d.rank) << 16,
        u32_of(t.absolute_offset()),
        u32_of(t.byte_len()),
        count_lo,
        count_hi,
        name_at,
        name_len,
        layout_at,
        layout_len,
        d.block_size,
        u32::from(d.quant_scheme) | u32::from(d.quant_axis) << 16,
        d.group_size,
        d.scale_index,
        d.outer_index,
        shape_at,
    ];
    for (dst, v) in row.iter_mut().zip(values) {
        *dst = v;
    }
}

pub mod alloc_free {
    //! Byte offset -> UTF-16 offset map for a non-ASCII name heap.

    /// Reused between parses so a large heap allocates once.
    #[derive(Default)]
    pub struct Utf16Map {
        map: Vec<u32>,
    }

    impl Utf16Map {
        /// Maps every char boundary of `heap` (a concatenation of valid UTF-8
        /// names) to the UTF-16 length of the bytes before it.
        pub fn build(&mut self, heap: &[u8]) {
            self.map.clear();
            self.map.resize(heap.len() + 1, 0);
            let text = core::str::from_utf8(heap).unwrap_or("");
            let mut units = 0u32;
            for (i, c) in text.char_indices() {
                if let Some(m) = self.map.get_mut(i) {
                    *m = units;
                }
                units += u32::try_from(c.len_utf16()).unwrap_or(0);
            }
            if let Some(m) = self.map.get_mut(heap.len()) {
                *m = units;
            }
        }

        /// The UTF-16 offset of char boundary `byte`.
        pub fn at(&self, byte: usize) -> u32 {
            self.map.get(byte).copied().unwrap_or(0)
        }
    }
}
