//! The error path: once the accepting walk found a block invalid, this finds
//! the fault the spec reports, going step by step as section 14 of
//! `spec/kiln-v2.md` reads (steps 8 to 11; steps 1 to 7 and 12 are the
//! header's and the parser's). Each step reads the descriptors again, so it
//! is slower than the walk; it runs only on invalid blocks.

use crate::block::{Block, Payload};
use crate::bytes::u64_from;
use crate::dequant::quant;
use crate::error::{fail, Error, Result, Rule};
use crate::names::{self, NameTable, NameWalk};
use crate::ranges;
use crate::wire::descriptor::{self, field_at, AT_BYTE_OFFSET};
use crate::wire::descriptor::{Descriptors, RawDescriptor};

/// Steps 8 to 11 in the spec's order: the first fault, or the filled name
/// table (when there is scratch for one) of a valid block.
/// Never inlined: its stack frame stays off the accepting walk's (firmware stack budget).
#[cold]
#[inline(never)]
pub(crate) fn check<'s>(b: &Block<'_>, scratch: Option<&'s mut [u32]>, seed: u64) -> Result<Option<NameTable<'s>>> {
    let (mut table, spare) = step8(b, scratch, seed)?;
    step9(b, &mut table, spare)?;
    step10(b).map_err(|(_, e)| e)?;
    step11(b).map_err(|(_, e)| e)?;
    Ok(table)
}

/// Step 8: every descriptor's reserved bytes first; then the name flag on an
/// empty directory; then per descriptor its name rules, its name's
/// uniqueness and its layout rules; last, the heap's total length. Returns
/// the name table (in `scratch`, when it is large enough) or the unused scratch.
// Not inlined: one step's frame at a time on the stack.
#[inline(never)]
pub(crate) fn step8<'s>(
    b: &Block<'_>,
    scratch: Option<&'s mut [u32]>,
    seed: u64,
) -> Result<(Option<NameTable<'s>>, Option<&'s mut [u32]>)> {
    let Block { descs, heap, has_names, .. } = *b;
    for (i, raw) in descs.raws.iter().enumerate() {
        descriptor::check_reserved(raw, i)?;
    }
    names::check_flag_on_empty(descs.count, has_names)?;
    let (mut table, spare) = NameTable::claim(scratch, descs.count, has_names);
    NameWalk::default().walk(&descs, heap, heap.bytes.len(), has_names, table.as_mut(), seed)?;
    Ok((table, spare))
}

/// Step 9: per descriptor, its own range, dtype and shape rules, then
/// intersection with an earlier range; the first descriptor with a fault.
/// Ranges out of order make the block invalid whatever step 9 finds, so
/// the name table may then give its memory to the intersection search.
// Not inlined: one step's frame at a time on the stack.
#[inline(never)]
pub(crate) fn step9(b: &Block<'_>, table: &mut Option<NameTable<'_>>, spare: Option<&mut [u32]>) -> Result<()> {
    let descs = &b.descs;
    let own = descs
        .raws
        .iter()
        .enumerate()
        .find_map(|(i, raw)| descriptor::check_shape_and_range(raw, i, b.payload.len).err().map(|e| (i, e)));
    // Ranges of descriptors before the first own fault are well formed.
    let upto = own.map_or(descs.count, |(i, _)| i);
    if !ranges::in_order(descs, upto) {
        let scratch = table.take().map(NameTable::into_scratch).or(spare);
        if let Some(j) = ranges::first_intersection(descs, upto, scratch) {
            return fail(Rule::RangeOverlap, field_at(j, AT_BYTE_OFFSET));
        }
    }
    // In order, or out of order with no intersection (step 10 will object
    // when there is no own fault either).
    own.map_or(Ok(()), |(_, e)| Err(e))
}

/// Step 10: per descriptor, the greedy offset, then a zero gap before it
/// (when the payload is at hand); last, payload_bytes is the running end.
/// The fault comes with its descriptor's index (the count for the last rule).
// Not inlined: one step's frame at a time on the stack.
#[inline(never)]
pub(crate) fn step10(b: &Block<'_>) -> core::result::Result<(), (usize, Error)> {
    let mut running_end = 0u64;
    for (i, raw) in b.descs.raws.iter().enumerate() {
        ranges::check_placement(raw, i, running_end, b.payload).map_err(|e| (i, e))?;
        // Fallback not taken: check_placement just passed: the range end does not overflow.
        running_end = raw.range_end().unwrap_or(u64::MAX);
    }
    ranges::check_total(running_end, b.payload.len).map_err(|e| (b.descs.count, e))
}

/// Step 11: per descriptor, its element bytes (when the payload is at hand),
/// then its quantization. The fault comes with its descriptor's index.
// Not inlined: one step's frame at a time on the stack.
#[inline(never)]
pub(crate) fn step11(b: &Block<'_>) -> core::result::Result<(), (usize, Error)> {
    for (i, raw) in b.descs.raws.iter().enumerate() {
        check_values(&b.descs, raw, i, b.payload).map_err(|e| (i, e))?;
    }
    Ok(())
}

/// Step 11 for one tensor: element bytes (when the payload is at hand), then quantization.
pub(crate) fn check_values(descs: &Descriptors<'_>, d: &RawDescriptor, i: usize, payload: Payload<'_>) -> Result<()> {
    if let Some(bytes) = payload.bytes {
        let span = descriptor::payload_span(d, 0);
        // Step 9 checked the range inside the payload before step 11 runs: never empty by fallback.
        let elements = span.and_then(|(s, e)| bytes.get(s..e)).unwrap_or(&[]);
        let at = payload.at.saturating_add(span.map_or(0, |(s, _)| s));
        descriptor::check_elements(d, elements, u64_from(at))?;
    }
    quant::check_quant(d, i, descs.count, |j| descs.raw(j))
}
