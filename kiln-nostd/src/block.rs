//! The parts of a block that passed steps 1 to 7 (its descriptors, name
//! heap and payload region), located once: what the checks of steps 8 to
//! 11, the views and the incremental validator read.

use crate::bytes::usize_from_u32;
use crate::names::Heap;
use crate::wire::descriptor::Descriptors;
use crate::wire::header::{Header, Regions};

/// The payload region of a block whose size checks passed.
#[derive(Clone, Copy)]
pub(crate) struct Payload<'a> {
    /// The region's bytes; `None` when they are not at hand (the incremental
    /// validator checks the directory before the payload streams past), so
    /// gap and element bytes are left to the caller.
    pub(crate) bytes: Option<&'a [u8]>,
    /// Block offset of the region.
    pub(crate) at: usize,
    /// payload_bytes from the header.
    pub(crate) len: u64,
}

/// What the checks of steps 8 to 11 read of one block.
#[derive(Clone, Copy)]
#[doc(hidden)]
pub struct Block<'a> {
    pub(crate) descs: Descriptors<'a>,
    pub(crate) heap: Heap<'a>,
    pub(crate) has_names: bool,
    pub(crate) payload: Payload<'a>,
}

impl<'a> Block<'a> {
    /// The parts of `block`, which passed steps 1 to 7. With `with_payload`
    /// false only the directory prefix (up to `payload_base`) need be there.
    pub(crate) fn new(block: &'a [u8], header: &Header, regions: Regions, with_payload: bool) -> Block<'a> {
        let count = usize_from_u32(header.tensor_count);
        let descs = Descriptors::new(block, count);
        // Steps 3 to 7 checked descriptors end <= heap_end <= the bytes at hand: never empty by fallback.
        let heap = Heap::new(block.get(descs.end()..regions.heap_end).unwrap_or(&[]), descs.end());
        // Step 6 checked the block length against the bytes at hand: never empty by fallback.
        let bytes = with_payload.then(|| block.get(regions.payload_base..regions.block_len).unwrap_or(&[]));
        let payload = Payload { bytes, at: regions.payload_base, len: header.payload_bytes };
        Block { descs, heap, has_names: header.has_names(), payload }
    }
}
