//! The canonical layout's arithmetic in one place: the header and
//! descriptor sizes, where each descriptor, the heap and the payload region
//! start, where each payload goes and how long a block is. The writer, the validators, Frozen's block length and the
//! converter's streaming planner all use it, so no two of them can drift.
//!
//! ```
//! use kiln_nostd::wire::layout::{self, Placement};
//! // Two tensors of 5 and 8 bytes, unnamed: the second starts at offset 64.
//! let mut p = Placement::new();
//! assert_eq!((p.place(5), p.place(8)), (Some(0), Some(64)));
//! assert_eq!(p.payload_bytes(), 72);
//! assert_eq!(layout::payload_base(2, 0), Some(64 + 2 * 128));
//! assert_eq!(layout::block_len(2, 0, [5, 8]), Some(64 + 2 * 128 + 72));
//! assert_eq!(layout::descriptors_end(2), 64 + 2 * 128);
//! ```

use crate::bytes::u64_from;

/// Header length in bytes.
pub const HEADER_LEN: usize = 64;
/// Descriptor length in bytes.
pub const DESCRIPTOR_LEN: usize = 128;

/// Payload offsets and the payload region's start are multiples of this.
pub const ALIGN: u64 = 64;

/// The next multiple of 64 at or after `v`; `None` on overflow.
#[inline]
#[must_use]
pub const fn align(v: u64) -> Option<u64> {
    match v.checked_add(ALIGN - 1) {
        Some(x) => Some(x & !(ALIGN - 1)),
        None => None,
    }
}

/// Where descriptor `i` starts, from the block's start: after the 64-byte
/// header, 128 bytes each (saturating: a saturated offset lies past every
/// buffer, so the bounds check that follows fails as it should).
pub fn descriptor_offset(i: u64) -> u64 {
    i.saturating_mul(u64_from(DESCRIPTOR_LEN)).saturating_add(u64_from(HEADER_LEN))
}

/// Where descriptor `i` starts in a block held in memory (saturating).
pub const fn descriptor_at(i: usize) -> usize {
    i.saturating_mul(DESCRIPTOR_LEN).saturating_add(HEADER_LEN)
}

/// The end of the descriptors (and the start of the name heap) of a block
/// of `tensor_count` tensors: 64 + 128 per tensor.
pub fn descriptors_end(tensor_count: u32) -> u64 {
    descriptor_offset(u64::from(tensor_count))
}

/// directory_bytes: 128 per descriptor plus the heap (at most 2^32 * 129: no overflow).
pub fn directory_bytes(tensor_count: u32, name_bytes: u32) -> u64 {
    u64::from(tensor_count).saturating_mul(u64_from(DESCRIPTOR_LEN)).saturating_add(u64::from(name_bytes))
}

/// The end of the name heap: the header, then the directory.
pub fn heap_end(tensor_count: u32, name_bytes: u32) -> u64 {
    directory_bytes(tensor_count, name_bytes).saturating_add(u64_from(HEADER_LEN))
}

/// Where the payload region starts: the heap end rounded up to 64.
#[must_use]
pub fn payload_base(tensor_count: u32, name_bytes: u32) -> Option<u64> {
    align(heap_end(tensor_count, name_bytes))
}

/// The greedy placement: payload lengths in descriptor order in, offsets out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    running_end: u64,
}

impl Placement {
    /// Nothing placed yet (the running end is 0).
    #[must_use]
    pub const fn new() -> Self {
        Placement { running_end: 0 }
    }

    /// Continues after a tensor that ended at `running_end`.
    #[must_use]
    pub const fn after(running_end: u64) -> Self {
        Placement { running_end }
    }

    /// Where the next tensor (at the current running end) must start.
    #[must_use]
    pub const fn next_offset(&self) -> Option<u64> {
        align(self.running_end)
    }

    /// Places a tensor of `byte_length` bytes; returns its offset, `None`
    /// when the end overflows a u64 (and then places nothing).
    pub fn place(&mut self, byte_length: u64) -> Option<u64> {
        let at = self.next_offset()?;
        self.running_end = at.checked_add(byte_length)?;
        Some(at)
    }

    /// payload_bytes of the block so far: the running end.
    pub const fn payload_bytes(&self) -> u64 {
        self.running_end
    }
}

/// The length of a canonical block whose tensors have these payload
/// lengths, in descriptor order; `None` on overflow.
pub fn block_len(tensor_count: u32, name_bytes: u32, lengths: impl IntoIterator<Item = u64>) -> Option<u64> {
    let mut p = Placement::new();
    for len in lengths {
        p.place(len)?;
    }
    payload_base(tensor_count, name_bytes)?.checked_add(p.payload_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::header::Header;

    #[test]
    fn header_round_trips_and_zero_length_tensors_follow_the_greedy_rule() {
        let h = Header::canonical(3, 7, 200, true);
        assert_eq!(Header::parse(&h.encode()), Ok(h));
        assert_eq!(crate::wire::EMPTY_BLOCK, Header::canonical(0, 0, 0, false).encode());
        // After a 5-byte tensor a 0-byte tensor sits at 64 and the end becomes 64.
        let mut p = Placement::new();
        assert_eq!([p.place(5), p.place(0), p.place(1)], [Some(0), Some(64), Some(64)]);
        assert_eq!(p.payload_bytes(), 65);
        assert_eq!(Placement::after(u64::MAX - 3).place(1), None);
        assert_eq!(block_len(1, 0, [u64::MAX]), None);
    }
}
