//! Faults the directory prefix shows before all of it is in.
//!
//! The prefix (header, descriptors, name heap, padding) is checked as a
//! whole once it is in. A fault is certain earlier when no byte still to
//! come can hold one the spec orders first (truncation aside: that is
//! [`finish`](super::Incremental::finish)'s EOF). That happens
//! - in the header, steps 1 and 2 (magic, version, flags, reserved bytes),
//!   at the byte that shows the fault ([`header::check_start`]);
//! - in the padding, step 7, at a nonzero byte: steps 1 to 6 are the
//!   header's;
//! - with no padding (the heap ends on a 64-byte boundary, as in every
//!   unnamed directory): step 8a at a nonzero reserved descriptor byte; once
//!   every descriptor is in, step 8b; then step 8c descriptor by descriptor as
//!   its name and layout name arrive (UTF-8 at the first invalid byte); then
//!   step 8d.
//!
//! While padding is still to come, steps 8 to 11 wait for its last byte,
//! and steps 9 to 11 wait for the heap's last byte: a fault in either would
//! come first.
//!
//! Bare-metal targets leave out the names (see [`EARLY_NAMES`]): there a
//! step-8c or 8d fault of a directory with no padding is reported once the
//! prefix is in, at most the heap's length (under 128 KiB) after it became
//! certain. Everything else is the same on every target.

use super::{Incremental, Memory, Parts, Sizes};
use crate::bytes::{usize_from, usize_from_u32};
use crate::error::Result;
use crate::names::{self, Heap, NameTable};
use crate::wire::descriptor::Descriptors;
use crate::wire::descriptor::{self, RawDescriptor};
use crate::wire::header::{self, DESCRIPTOR_LEN, HEADER_LEN};

impl<M: Memory> Incremental<M> {
    /// Judges the prefix bytes `from..to` (block offsets) that just arrived;
    /// `base`, the prefix end, lies after `to`.
    pub(super) fn check_arrived(&mut self, sizes: &Sizes, base: u64, from: u64, to: u64) -> Result<()> {
        // The prefix fits its memory (checked with the header): every end is a usize.
        let (Some(heap_end), Some(base), Some(from), Some(to)) =
            (usize_from(sizes.heap_end), usize_from(base), usize_from(from), usize_from(to))
        else {
            return Ok(());
        };
        let have = self.mem.prefix().get(..to).unwrap_or(&[]);
        if heap_end < base {
            // Nothing past the heap is in yet when `to` is below its end.
            return header::check_padding(have, heap_end, to.max(heap_end)); // step 7
        }
        let count = usize_from_u32(sizes.header.tensor_count);
        let descs_end = count.saturating_mul(DESCRIPTOR_LEN).saturating_add(HEADER_LEN);
        check_reserved_arrived(have, from, to.min(descs_end))?; // step 8a
        if to < descs_end {
            return Ok(());
        }
        names::check_flag_on_empty(count, sizes.header.has_names())?; // step 8b
        if !EARLY_NAMES {
            return Ok(());
        }
        self.check_names_arrived(sizes, descs_end, heap_end, to) // steps 8c, 8d
    }

    /// Steps 8c and 8d over the heap bytes in so far (every descriptor is in).
    fn check_names_arrived(&mut self, sizes: &Sizes, heap_start: usize, heap_end: usize, to: usize) -> Result<()> {
        let Incremental { mem, seed, names, .. } = self;
        let Parts { prefix, scratch, .. } = mem.parts();
        let prefix: &[u8] = prefix;
        let count = usize_from_u32(sizes.header.tensor_count);
        let has_names = sizes.header.has_names();
        // The heap region lies in prefix memory (checked with the header); bytes
        // past `to` are not there yet, and the walk reads none of them.
        let heap = Heap { bytes: prefix.get(heap_start..heap_end).unwrap_or(&[]), at: heap_start, text: None };
        let descs = Descriptors::new(prefix.get(..heap_start).unwrap_or(&[]), count);
        // The name table goes on from the names already in it.
        let (mut table, _) = NameTable::claim_as(scratch, count, has_names, names.at_start());
        names.walk(&descs, heap, to.saturating_sub(heap_start), has_names, table.as_mut(), *seed)
    }
}

/// Steps 8c and 8d on a heap still arriving need a second, resumable copy
/// of step 8's name walk (the parser's is specialised to a whole heap):
/// about 1.3 KB of flash on Cortex-M, for a rare case (a named directory
/// whose heap ends on a 64-byte boundary) and a gain of at most the heap's
/// length. Hosts and browsers have it; bare-metal targets keep the flash.
const EARLY_NAMES: bool = !cfg!(target_os = "none");

/// Step 8a on the descriptor bytes `from..to` (block offsets) that just
/// arrived in `have`: a nonzero reserved byte among them. The bytes before
/// `from` passed already, so the first one found is the verdict. Whole
/// descriptors take the parser's two-compare check; only a descriptor that
/// the chunk cuts is judged byte by byte.
fn check_reserved_arrived(have: &[u8], from: usize, to: usize) -> Result<()> {
    let index = |at: usize| at.saturating_sub(HEADER_LEN) / DESCRIPTOR_LEN;
    let start_of = |i: usize| i.saturating_mul(DESCRIPTOR_LEN).saturating_add(HEADER_LEN);
    if from >= to {
        return Ok(());
    }
    let (first, last) = (index(from), index(to.saturating_sub(1)));
    // Descriptor `first` starts before `from` and `last` before `to`, inside `have`: never empty by fallback.
    let partial = |i: usize| descriptor::check_reserved_start(have.get(start_of(i)..to).unwrap_or(&[]), i);
    let whole = have.get(start_of(first)..start_of(last).saturating_add(DESCRIPTOR_LEN).min(to)).unwrap_or(&[]);
    let (whole, cut) = whole.split_at((whole.len() / DESCRIPTOR_LEN).saturating_mul(DESCRIPTOR_LEN));
    descriptor::check_reserved_all(RawDescriptor::slice(whole), first)?;
    if cut.is_empty() {
        return Ok(());
    }
    partial(last)
}
