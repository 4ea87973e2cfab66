//! The accepting walk of steps 8 to 11: one pass over the descriptors, every
//! rule of a descriptor together, with a fast path for runs of plain
//! descriptors. It answers only whether a block is valid; which fault the
//! spec reports is [`check_order`](crate::check_order)'s to find.

use crate::block::{Block, Payload};
use crate::bytes::{first_nonzero, usize_from};
use crate::check_order::check_values;
use crate::error::{fail, Result, Rule};
use crate::names::{self, Heap, NameCursor, NameTable};
use crate::ranges;
use crate::wire::descriptor::{self, RawDescriptor};
use crate::wire::layout::Placement;

/// One walk over the descriptors, every rule of each descriptor together, so
/// a large directory is read from memory once (plain runs read the name
/// fields once more, see [`plain_run`]). `Ok` exactly when steps 8 to 11 hold;
/// the error is the first fault met, which need not be the one the spec's
/// order reports. `Ok` holds how many leading descriptors are plain and
/// follow each other with no gap bytes: the payload bytes up to their end
/// decide nothing, so a caller that streams the payload past need not
/// look at them (nor at those descriptors again).
///
/// No overlap check is needed: a block whose offsets all sit at the greedy
/// placement has its ranges in increasing order, so none can intersect.
///
/// Not inlined, so its frame and the error path's are never on the stack
/// together (the firmware's stack budget).
#[inline(never)]
pub(crate) fn accept(b: &Block<'_>, mut table: Option<&mut NameTable<'_>>, seed: u64, plain: bool) -> Result<usize> {
    let Block { descs, heap, has_names, payload } = *b;
    names::check_flag_on_empty(descs.count, has_names)?;
    let name_of = |i| heap.name(descs.raw(i));
    let mut names = NameCursor::default();
    let mut running_end = 0u64;
    let mut next = 0;
    let mut clean_lead = 0;
    loop {
        if PLAIN && plain {
            let from = next;
            let first_gap;
            (next, first_gap) = plain_run(b, from, &mut names, &mut running_end);
            if clean_lead == from {
                clean_lead = first_gap;
            }
            if let Some((_, later)) = table.as_deref_mut().and_then(|t| index_names(t, from..next, seed, name_of)) {
                return duplicate(later);
            }
        }
        let Some(raw) = descs.raws.get(next) else { break };
        let i = next;
        next = next.saturating_add(1);
        descriptor::check_reserved(raw, i)?;
        names.check(heap, raw, i, has_names)?;
        // A repeated name is reported at the later descriptor.
        if table.as_deref_mut().and_then(|t| t.insert(i, seed, name_of)).is_some() {
            return duplicate(i);
        }
        names.check_layout(heap, raw, i, || names::names_total(descs.raws))?;
        descriptor::check_shape_and_range(raw, i, payload.len)?;
        ranges::check_placement(raw, i, running_end, payload)?;
        // Checked just above (check_shape_and_range): the fallback is never taken.
        running_end = raw.range_end().unwrap_or(u64::MAX);
        check_values(&descs, raw, i, payload)?;
    }
    if has_names && table.is_none() {
        if let Some((_, later)) = names::find_duplicate_quadratic(descs.count, name_of) {
            return duplicate(later);
        }
    }
    names.check_heap_total(heap)?;
    ranges::check_total(running_end, payload.len)?;
    Ok(clean_lead)
}

/// Most descriptors are plain (a whole-byte dtype other than bool, no
/// layout, no quantization) and valid. On 64-bit hosts and wasm a run of them is
/// judged by a few compares each ([`plain_run`]) instead of rule by rule,
/// and their names then go into the table in a loop of their own
/// ([`index_names`]). Any other descriptor, and every fault, goes through
/// the rule-by-rule walk. Bare-metal 32-bit targets keep only that walk, for code size.
pub(crate) const PLAIN: bool = cfg!(any(target_pointer_width = "64", target_arch = "wasm32"));

/// Walks plain, valid descriptors from `from` (see [`PLAIN`]) and returns
/// the index of the first one that is not (or the count), and of the first
/// one with gap bytes before it (or that same index). Names are left
/// for [`index_names`]: kept apart, each loop keeps its own data in cache
/// (the descriptors here; the table there), which is faster than one loop
/// that evicts the table while streaming the descriptors.
fn plain_run(b: &Block<'_>, from: usize, names: &mut NameCursor, running_end: &mut u64) -> (usize, usize) {
    // The state lives in locals while the run lasts, so it stays in registers.
    let (mut cursor, mut end) = (names.cursor, *running_end);
    let mut i = from;
    let mut first_gap = usize::MAX;
    while let Some(raw) = b.descs.raws.get(i) {
        let Some(next) = plain(raw, b.has_names, b.heap, cursor, end, b.payload) else { break };
        #[cfg(debug_assertions)]
        slow_path_agrees(b, raw, i, NameCursor { cursor, ..*names }, end);
        if raw.byte_offset() != end && first_gap == usize::MAX {
            first_gap = i;
        }
        cursor = next;
        // `plain` accepted the range: the fallback is never taken.
        end = raw.range_end().unwrap_or(u64::MAX);
        i = i.saturating_add(1);
    }
    (names.cursor, *running_end) = (cursor, end);
    (i, first_gap.min(i))
}

/// Adds the names of descriptors `range` to the table in descriptor order.
/// Returns the first duplicate as (earlier, later).
fn index_names<'n>(
    t: &mut NameTable<'_>,
    range: core::ops::Range<usize>,
    seed: u64,
    name_of: impl Fn(usize) -> &'n [u8] + Copy,
) -> Option<(usize, usize)> {
    range.into_iter().find_map(|k| t.insert(k, seed, name_of).map(|earlier| (earlier, k)))
}

/// Steps 8 to 11 for a plain descriptor when every earlier one passed: its own
/// rules ([`RawDescriptor::is_plain_and_valid`]), its name starts at the heap
/// cursor and is UTF-8 (or it is unnamed in an unnamed directory), and its payload
/// sits at the greedy placement after zero gap bytes. Returns the heap cursor after
/// the name; uniqueness is the caller's. Out of line in wasm: V8 optimises a function
/// only between its calls, and inlined it would run unoptimised for a whole first parse.
#[cfg_attr(target_arch = "wasm32", inline(never))]
#[cfg_attr(not(target_arch = "wasm32"), inline)]
fn plain(
    raw: &RawDescriptor,
    has_names: bool,
    heap: Heap<'_>,
    cursor: usize,
    running_end: u64,
    payload: Payload<'_>,
) -> Option<usize> {
    if !raw.is_plain_and_valid(payload.len) {
        return None;
    }
    let (off, len) = raw.name_field();
    let cursor = match has_names {
        true if len != 0 && usize::from(off) == cursor => cursor.checked_add(heap.str(off, len)?.len())?,
        false if (off, len) == (descriptor::NO_NAME, 0) => cursor,
        _ => return None,
    };
    let start = Placement::after(running_end).next_offset()?;
    if raw.byte_offset() != start {
        return None;
    }
    match payload.bytes {
        Some(bytes) => {
            first_nonzero(bytes.get(usize_from(running_end)?..usize_from(start)?)?).is_none().then_some(cursor)
        }
        None => Some(cursor),
    }
}

/// Debug builds: the rule-by-rule checks accept what [`plain`] accepted, from a copy of its state.
#[cfg(debug_assertions)]
fn slow_path_agrees(b: &Block<'_>, raw: &RawDescriptor, i: usize, mut names: NameCursor, running_end: u64) {
    let ok = descriptor::check_reserved(raw, i).is_ok()
        && names.check(b.heap, raw, i, b.has_names).is_ok()
        && names.check_layout(b.heap, raw, i, || 0).is_ok()
        && descriptor::check_shape_and_range(raw, i, b.payload.len).is_ok()
        && ranges::check_placement(raw, i, running_end, b.payload).is_ok()
        && check_values(&b.descs, raw, i, b.payload).is_ok();
    debug_assert!(ok, "fast path accepted descriptor {i}, which the rules reject");
}

fn duplicate<T>(later: usize) -> Result<T> {
    fail(Rule::DuplicateName, names::duplicate_at(later))
}
