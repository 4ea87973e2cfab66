//! The error path: once the accepting walk found a block invalid, this finds
//! the fault the spec reports, going step by step as section 14 of
//! `spec/kiln-v2.md` reads (steps 8 to 11; steps 1 to 7 and 12 are the
//! header's and the parser's). Each step reads the descriptors again, so it
//! is slower than the walk; it runs only on invalid blocks.

use crate::descriptor::{self, field_at, AT_BYTE_OFFSET};
use crate::directory::{check_values, Block};
use crate::error::{fail, Error, Result, Rule};
use crate::names::{self, same_bytes, NameCursor, Table};
use crate::ranges;

/// The first fault of steps 8 to 11 in the spec's order, or `Ok` when there is none.
pub(crate) fn first_fault(b: &Block<'_>, scratch: Option<&mut [u32]>, seed: u64) -> Result<()> {
    let scratch = step8(b, scratch, seed)?;
    step9(b, scratch)?;
    step10(b).map_err(|(_, e)| e)?;
    step11(b).map_err(|(_, e)| e)
}

/// Step 8: every descriptor's reserved bytes first; then the name flag on an
/// empty directory; then per descriptor its name rules, its name's
/// uniqueness and its layout rules; last, the heap's total length. Hands
/// the scratch back for step 9.
pub(crate) fn step8<'s>(b: &Block<'_>, scratch: Option<&'s mut [u32]>, seed: u64) -> Result<Option<&'s mut [u32]>> {
    let Block { descs, heap, has_names, .. } = *b;
    for (i, raw) in descs.raws.iter().enumerate() {
        descriptor::check_reserved(raw, i)?;
    }
    names::check_flag_on_empty(descs.count, has_names)?;
    let name_of = |i| descs.name(&heap, i);
    let (mut table, spare) = Table::claim(scratch, descs.count, has_names);
    let mut cursor = NameCursor::default();
    for (i, raw) in descs.raws.iter().enumerate() {
        cursor.check(heap, raw, i, has_names)?;
        if has_names {
            let repeated = match table.as_mut() {
                Some(t) => t.insert(i, seed, name_of).is_some(),
                None => (0..i).any(|k| same_bytes(name_of(k), name_of(i))),
            };
            if repeated {
                return fail(Rule::DuplicateName, names::duplicate_at(i));
            }
        }
        cursor.check_layout(heap, raw, i, || names::names_total(descs.raws))?;
    }
    cursor.check_heap_total(heap)?;
    Ok(table.map(Table::into_scratch).or(spare))
}

/// Step 9: per descriptor, its own range, dtype and shape rules, then
/// intersection with an earlier range; the first descriptor with a fault.
pub(crate) fn step9(b: &Block<'_>, scratch: Option<&mut [u32]>) -> Result<()> {
    let descs = &b.descs;
    let own = descs
        .raws
        .iter()
        .enumerate()
        .find_map(|(i, raw)| descriptor::check_shape_and_range(raw, i, b.payload.len).err().map(|e| (i, e)));
    // Ranges of descriptors before the first own fault are well formed.
    let upto = own.map_or(descs.count, |(i, _)| i);
    if let Some(j) = ranges::first_intersection(descs, upto, scratch) {
        return fail(Rule::RangeOverlap, field_at(j, AT_BYTE_OFFSET));
    }
    own.map_or(Ok(()), |(_, e)| Err(e))
}

/// Step 10: per descriptor, the greedy offset, then a zero gap before it
/// (when the payload is at hand); last, payload_bytes is the running end.
/// The fault comes with its descriptor's index (the count for the last rule).
pub(crate) fn step10(b: &Block<'_>) -> core::result::Result<(), (usize, Error)> {
    let mut running_end = 0u64;
    for (i, raw) in b.descs.raws.iter().enumerate() {
        ranges::check_placement(raw, i, running_end, b.payload).map_err(|e| (i, e))?;
        running_end = raw.range_end().unwrap_or(u64::MAX);
    }
    ranges::check_total(running_end, b.payload.len).map_err(|e| (b.descs.count, e))
}

/// Step 11: per descriptor, its element bytes (when the payload is at hand),
/// then its quantization. The fault comes with its descriptor's index.
pub(crate) fn step11(b: &Block<'_>) -> core::result::Result<(), (usize, Error)> {
    for (i, raw) in b.descs.raws.iter().enumerate() {
        check_values(&b.descs, raw, i, b.payload).map_err(|e| (i, e))?;
    }
    Ok(())
}
