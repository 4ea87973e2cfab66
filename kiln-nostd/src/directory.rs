//! The check order of the spec, steps 1 to 12, in one place.
//!
//! [`Parser`] runs every step before it returns a [`Directory`], so no view
//! handed out afterwards can point outside the buffer. The first failing step
//! wins; inside a step, the first fault in descriptor order wins.

use crate::bytes::{first_nonzero, u64_from, usize_from, usize_from_u32};
use crate::check_order;
use crate::descriptor::{self, RawDescriptor};
use crate::error::{fail, Error, Result, Rule};
use crate::header::{Header, Regions, DESCRIPTOR_LEN, HEADER_LEN};
use crate::layout::Placement;
use crate::limits::Limits;
use crate::names::{self, Heap, NameCursor, Table};
use crate::quant;
use crate::ranges;
use crate::views::{Directory, NameIndex};

/// Checks directory blocks with configurable caps and optional name scratch.
///
/// Without scratch, name uniqueness compares every pair of names (no memory,
/// quadratic time). With [`Parser::scratch`] of at least
/// [`scratch_len`](crate::scratch_len)`(tensor_count)` slots, it uses a hash
/// table in that memory (linear expected time), and [`Parser::parse_indexed`]
/// hands the filled table back as a [`NameIndex`].
///
/// ```
/// # let block = kiln_nostd::EMPTY_BLOCK;
/// use kiln_nostd::{Limits, Parser};
/// let mut scratch = [0u32; 64];
/// let dir = Parser::new()
///     .limits(Limits::DEFAULT.with_count_cap(1024))
///     .scratch(&mut scratch)
///     .parse(&block)?;
/// assert_eq!(dir.len(), 0);
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
pub struct Parser<'s> {
    limits: Limits,
    scratch: Option<&'s mut [u32]>,
    seed: u64,
    /// Takes the plain-descriptor fast path where it applies (see [`PLAIN`]);
    /// tests turn it off to compare the two paths.
    plain: bool,
    /// Accepts with one walk (see [`ONE_WALK`]); tests turn it off to run
    /// the bare-metal path, the step-by-step checks alone, on the host.
    one_walk: bool,
}

impl Default for Parser<'_> {
    fn default() -> Self {
        Parser::new()
    }
}

impl<'s> Parser<'s> {
    /// Default caps (16,777,216), no scratch.
    pub const fn new() -> Self {
        Parser { limits: Limits::DEFAULT, scratch: None, seed: 0, plain: PLAIN, one_walk: ONE_WALK }
    }

    /// Uses these caps.
    pub const fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Uses `scratch` for the name table. Too small a scratch is ignored
    /// (the quadratic check runs instead), so this never changes a result.
    pub fn scratch(mut self, scratch: &'s mut [u32]) -> Self {
        self.scratch = Some(scratch);
        self
    }

    /// Seeds the name hash, so input crafted against the default seed cannot
    /// force every name into one probe chain. Results do not depend on it.
    pub const fn hash_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The caps this parser checks against.
    pub(crate) const fn caps(&self) -> Limits {
        self.limits
    }

    /// Checks a standalone block: `buf` must hold exactly one block (step 12).
    pub fn parse<'a>(self, buf: &'a [u8]) -> Result<Directory<'a>> {
        self.run(buf, 0, true).map(|(dir, _)| dir)
    }

    /// Checks a block that starts at `start` inside `buf` and may be followed
    /// by other data (a `tensors` field). Error offsets are absolute in `buf`;
    /// [`Directory::end`] is where the next field starts.
    pub fn parse_at<'a>(self, buf: &'a [u8], start: usize) -> Result<Directory<'a>> {
        self.run(buf, start, false).map(|(dir, _)| dir)
    }

    /// Like [`parse`](Self::parse), and keeps the name table for O(1) lookups.
    /// Without (enough) scratch the index falls back to a linear search.
    pub fn parse_indexed<'a>(self, buf: &'a [u8]) -> Result<(Directory<'a>, NameIndex<'a, 's>)> {
        let seed = self.seed;
        let (dir, table) = self.run(buf, 0, true)?;
        Ok((dir, NameIndex::from_parts(dir, table, seed)))
    }

    /// Steps 1 to 9 of the block at `start` (and step 10's placement and
    /// step 11's quantization as far as the descriptors decide them, which
    /// are not reported): the tensor table of a block whose payload faults,
    /// if any, are left to a later check (a shard held against its manifest
    /// before its steps 9d to 12). `file_len` is the length of the file
    /// `buf` starts; `buf` need hold only its bytes up to the block's
    /// payload region (steps 5 and 6 are checked against `file_len`; a `buf`
    /// shorter than the prefix is EOF at its end).
    #[cfg(feature = "sha2")]
    pub(crate) fn parse_prefix_at<'a>(self, buf: &'a [u8], start: usize, file_len: u64) -> Result<Directory<'a>> {
        let Some(block) = buf.get(start..) else {
            return fail(Rule::HeaderTruncated, buf.len());
        };
        let shift = |e: crate::Error| e.shifted(start);
        let header = Header::parse(block).map_err(shift)?;
        let avail = file_len.saturating_sub(u64_from(start));
        let heap_end = header.check_sizes(&self.limits).map_err(shift)?;
        crate::header::check_directory_fits(heap_end, avail).map_err(shift)?;
        let (base, block_len) = header.check_payload(heap_end).map_err(shift)?;
        crate::header::check_block_fits(block_len, avail).map_err(shift)?;
        let Some(prefix) = usize_from(base).and_then(|b| block.get(..b)) else {
            return fail(Rule::DirectoryTruncated, buf.len());
        };
        // Both are at most `base`, which `prefix` holds.
        let (heap_end, payload_base) = (usize_from(heap_end).unwrap_or(0), prefix.len());
        let regions = Regions { heap_end, payload_base, block_len: usize_from(block_len).unwrap_or(usize::MAX) };
        crate::header::check_padding(prefix, heap_end, payload_base).map_err(shift)?;
        let b = Block::new(prefix, &header, regions, false);
        match check_prefix(&b, self.scratch, self.seed) {
            PrefixVerdict::Certain(e) => Err(shift(e)),
            _ => Ok(Directory::from_checked(buf, start, header, regions)),
        }
    }

    fn run<'a>(
        self,
        buf: &'a [u8],
        start: usize,
        standalone: bool,
    ) -> Result<(Directory<'a>, Option<names::LookupTable<'s>>)> {
        let Some(block) = buf.get(start..) else {
            return fail(Rule::HeaderTruncated, buf.len());
        };
        let (header, regions, table) = check_block(block, self, standalone).map_err(|e| e.shifted(start))?;
        Ok((Directory::from_checked(buf, start, header, regions), table))
    }
}

/// Steps 1 to 12 over `block` (offsets relative to it).
fn check_block<'s>(
    block: &[u8],
    parser: Parser<'s>,
    standalone: bool,
) -> Result<(Header, Regions, Option<names::LookupTable<'s>>)> {
    let header = Header::parse(block)?; // steps 1, 2
    let regions = header.regions(block, &parser.limits)?; // steps 3 to 7
    let b = Block::new(block, &header, regions, true);
    let walk = if ONE_WALK && parser.one_walk { Some(parser.plain) } else { None };
    let table = check_descriptors(&b, parser.scratch, parser.seed, walk)?; // steps 8 to 11
    if standalone && regions.block_len != block.len() {
        return fail(Rule::TrailingBytes, regions.block_len); // step 12
    }
    Ok((header, regions, table))
}

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

/// Steps 8 to 11. Accepting and reporting are kept apart: [`accept`] walks
/// the descriptors once, all rules of a descriptor together, and answers
/// only whether the block is valid; when it is not, [`check_order::first_fault`]
/// finds the fault the spec reports by going step by step (slower, and
/// faults are rare).
pub(crate) fn check_descriptors<'s>(
    b: &Block<'_>,
    scratch: Option<&'s mut [u32]>,
    seed: u64,
    walk: Option<bool>,
) -> Result<Option<names::LookupTable<'s>>> {
    // `walk`: accept in one walk (with the plain fast path or not), or step by step.
    let Some(plain) = walk else {
        return check_order::check(b, scratch, seed).map(|t| t.map(Table::freeze));
    };
    let (mut table, spare) = Table::claim(scratch, b.descs.count, b.has_names);
    match accept(b, table.as_mut(), seed, plain) {
        Ok(_) => Ok(table.map(Table::freeze)),
        Err(seen) => {
            let scratch = table.map(Table::into_scratch).or(spare);
            match check_order::check(b, scratch, seed) {
                Err(e) => Err(e),
                // Cannot happen: both paths check the same rules. Should it,
                // the block is still refused, with the fault the walk met.
                Ok(_) => Err(seen),
            }
        }
    }
}

/// Hosts and browsers accept with [`accept`] (one walk) and report with
/// [`check_order`]; bare-metal targets link only the step-by-step checks,
/// which accept as well (four passes over a small directory), for code size.
const ONE_WALK: bool = !cfg!(target_os = "none");

/// Steps 8 to 11 over a block whose payload is not at hand (the incremental
/// validator, once the directory prefix is in), sorted by how much of the
/// payload must still be seen before the verdict is certain.
pub(crate) enum PrefixVerdict {
    /// Steps 8 and 9 hold, and step 10's placement and step 11's
    /// quantization; only gap and element bytes are left, and none of
    /// the first `.0` descriptors has any (see [`accept`]).
    Clean(usize),
    /// A step 8 or 9 fault: the verdict, whatever the payload holds.
    Certain(Error),
    /// The first step-10 fault the descriptors show, at descriptor `.0`
    /// (the count for payload_bytes): the verdict unless a gap before that
    /// descriptor holds a nonzero byte.
    Misplaced(usize, Error),
    /// The first quantization fault, at descriptor `.0`: the verdict unless
    /// a gap byte, or an element byte of a descriptor up to `.0`, is bad.
    Quant(usize, Error),
}

/// Classifies the descriptor-only faults of `b` (built without payload).
pub(crate) fn check_prefix(b: &Block<'_>, scratch: Option<&mut [u32]>, seed: u64) -> PrefixVerdict {
    let (mut table, spare) = Table::claim(scratch, b.descs.count, b.has_names);
    // Bare metal: `ONE_WALK` is false, so `accept` is not linked.
    if let Some(Ok(tight)) = ONE_WALK.then(|| accept(b, table.as_mut(), seed, PLAIN)) {
        return PrefixVerdict::Clean(tight);
    }
    let scratch = table.map(Table::into_scratch).or(spare);
    let (mut table, spare) = match check_order::step8(b, scratch, seed) {
        Ok(kept) => kept,
        Err(e) => return PrefixVerdict::Certain(e),
    };
    if let Err(e) = check_order::step9(b, &mut table, spare) {
        return PrefixVerdict::Certain(e);
    }
    if let Err((i, e)) = check_order::step10(b) {
        return PrefixVerdict::Misplaced(i, e);
    }
    match check_order::step11(b) {
        Err((i, e)) => PrefixVerdict::Quant(i, e),
        Ok(()) => PrefixVerdict::Clean(0),
    }
}

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
fn accept(b: &Block<'_>, mut table: Option<&mut Table<'_>>, seed: u64, plain: bool) -> Result<usize> {
    let Block { descs, heap, has_names, payload } = *b;
    names::check_flag_on_empty(descs.count, has_names)?;
    let name_of = |i| descs.name(&heap, i);
    let mut names = NameCursor::default();
    let mut running_end = 0u64;
    let mut next = 0;
    let mut tight = 0;
    loop {
        if PLAIN && plain {
            let from = next;
            let first_gap;
            (next, first_gap) = plain_run(b, from, &mut names, &mut running_end);
            if tight == from {
                tight = first_gap;
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
    Ok(tight)
}

/// Most descriptors are plain (a whole-byte dtype other than bool, no
/// layout, no quantization) and valid. On 64-bit hosts and wasm a run of them is
/// judged by a few compares each ([`plain_run`]) instead of rule by rule,
/// and their names then go into the table in a loop of their own
/// ([`index_names`]). Any other descriptor, and every fault, goes through
/// the rule-by-rule walk. Bare-metal 32-bit targets keep only that walk, for code size.
const PLAIN: bool = cfg!(any(target_pointer_width = "64", target_arch = "wasm32"));

/// What the checks of steps 8 to 11 read of one block.
#[derive(Clone, Copy)]
pub(crate) struct Block<'a> {
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
    t: &mut Table<'_>,
    range: core::ops::Range<usize>,
    seed: u64,
    name_of: impl Fn(usize) -> &'n [u8] + Copy,
) -> Option<(usize, usize)> {
    range.into_iter().find_map(|k| t.insert(k, seed, name_of).map(|earlier| (earlier, k)))
}

/// Steps 8 to 11 for a plain descriptor when every earlier descriptor
/// passed: its own rules ([`RawDescriptor::is_plain_and_valid`]), its name
/// starts at the heap cursor and is UTF-8 (or it is unnamed in an unnamed
/// directory), and its payload sits at the greedy placement after zero gap
/// bytes. Returns the heap cursor after the name; uniqueness is the caller's.
#[inline]
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

/// Debug builds: the rule-by-rule checks accept what [`plain`] accepted,
/// from the same state (`names` is a copy, so nothing moves on).
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

/// The descriptor table of a block whose directory is known to fit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Descriptors<'a> {
    /// The descriptors (at most `count`, all inside the block).
    pub(crate) raws: &'a [RawDescriptor],
    pub(crate) count: usize,
}

impl<'a> Descriptors<'a> {
    pub(crate) fn new(block: &'a [u8], count: usize) -> Self {
        let end = count.saturating_mul(DESCRIPTOR_LEN).saturating_add(HEADER_LEN);
        // Step 5 checked the descriptors are all in the block: never empty by fallback.
        let raws = RawDescriptor::slice(block.get(HEADER_LEN..end).unwrap_or(&[]));
        Descriptors { raws, count: raws.len() }
    }

    /// Block offset just past the last descriptor.
    pub(crate) fn end(&self) -> usize {
        HEADER_LEN.saturating_add(self.count.saturating_mul(DESCRIPTOR_LEN))
    }

    #[inline]
    pub(crate) fn raw(&self, i: usize) -> &'a RawDescriptor {
        // Callers pass indexes below `count` (= raws.len()): ZERO is never returned.
        self.raws.get(i).unwrap_or(&RawDescriptor::ZERO)
    }

    /// Name bytes of tensor `i` (empty when unnamed).
    #[inline]
    pub(crate) fn name<'h>(&self, heap: &Heap<'h>, i: usize) -> &'h [u8] {
        let (off, len) = self.raw(i).name_field();
        // A name is compared only after step 8's name checks put it in the heap: never empty by fallback.
        heap.slice(off, len).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::{DType, Quant, TensorRef, TensorSpec, Writer};
    use std::vec;
    use std::vec::Vec;

    /// Blocks that exercise both paths: all plain, and plain runs broken by
    /// a bool, a packed, an opaque and a quantized tensor; named and unnamed.
    fn blocks() -> Vec<Vec<u8>> {
        let f32s = [0u8; 24];
        let bools = [1u8, 0, 1];
        let nibbles = [0x21u8, 0x03];
        let scales = [0u8; 2];
        let plain = |n: Option<&'static str>| {
            let t = TensorSpec::new(DType::F32, &[2, 3], &f32s);
            n.map_or(t, |n| t.named(n))
        };
        let sets: Vec<Vec<TensorSpec<'_>>> = vec![
            vec![plain(Some("a")), plain(Some("bb")), TensorSpec::new(DType::U8, &[3], &bools).named("c")],
            vec![plain(None), TensorSpec::new(DType::U16, &[0, 4], &[]), plain(None)],
            vec![
                plain(Some("w")),
                TensorSpec::new(DType::Bool, &[3], &bools).named("flags"),
                plain(Some("x")),
                TensorSpec::new(DType::U4, &[3], &nibbles).named("q").quantized(Quant::Scales {
                    axis: 0,
                    group_size: 2,
                    scale: TensorRef::Name("s"),
                }),
                TensorSpec::new(DType::E8M0, &[2], &scales).named("s"),
                TensorSpec::opaque(4096, "blk", 4, &[8], &[0; 8]).named("o"),
                plain(Some("y")),
            ],
        ];
        sets.iter()
            .map(|specs| {
                let mut out = vec![0u8; Writer::new().encoded_len(specs).unwrap()];
                Writer::new().write(specs, &mut out).unwrap();
                out
            })
            .collect()
    }

    fn parse(bytes: &[u8], plain: bool, scratch: bool) -> Result<usize> {
        let mut s = [0u32; 64];
        let p = Parser { plain, ..Parser::new() };
        let p = if scratch { p.scratch(&mut s) } else { p };
        p.parse(bytes).map(|d| d.len())
    }

    /// The bare-metal path: the step-by-step checks alone. An accepted
    /// block's name index finds every tensor.
    fn parse_steps(bytes: &[u8], scratch: bool) -> Result<usize> {
        let mut s = [0u32; 64];
        let p = Parser { one_walk: false, ..Parser::new() };
        let p = if scratch { p.scratch(&mut s) } else { p };
        let (dir, index) = p.parse_indexed(bytes)?;
        assert_eq!(index.is_hashed(), scratch && dir.iter().any(|t| t.name().is_some()));
        for t in dir.iter() {
            if let Some(n) = t.name() {
                assert_eq!(index.get(n).map(|f| f.index()), Some(t.index()));
            }
        }
        Ok(dir.len())
    }

    /// The fast path is an optimisation only: on every single-byte change
    /// and truncation of the blocks above, it gives exactly the result
    /// (accept, or the same code, rule and offset) of the rule-by-rule path.
    /// Debug builds also assert, descriptor by descriptor, that the
    /// rule-by-rule path accepts whatever the fast path accepted.
    #[test]
    fn fast_path_agrees_with_the_rules_on_every_mutation() {
        // Interpreted under Miri: a sample (every 61st byte, two values).
        let (stride, values): (usize, &[u8]) = if cfg!(miri) {
            (61, &[0x00, 0xff])
        } else {
            (1, &[0x00, 0x01, 0x02, 0x3f, 0x40, 0x7f, 0x80, 0xc0, 0xfe, 0xff])
        };
        let mut compared = 0;
        for block in blocks() {
            assert!(parse(&block, true, true).is_ok());
            for at in (0..block.len()).step_by(stride) {
                for &v in values {
                    let mut m = block.clone();
                    m[at] = v;
                    for scratch in [true, false] {
                        let want = parse(&m, false, scratch);
                        assert_eq!(parse(&m, true, scratch), want, "byte {at} = {v:#x}");
                        assert_eq!(parse_steps(&m, scratch), want, "steps only: byte {at} = {v:#x}");
                        compared += 1;
                    }
                }
            }
            for len in (0..block.len()).step_by(stride) {
                let want = parse(&block[..len], false, true);
                assert_eq!(parse(&block[..len], true, true), want, "len {len}");
                assert_eq!(parse_steps(&block[..len], true), want, "steps only: len {len}");
            }
        }
        assert!(compared > 10_000 / (stride * stride), "{compared}");
    }

    /// A duplicate inside a plain run is reported as the rules report it,
    /// and a reserved byte in a later descriptor still wins over it.
    #[test]
    fn duplicates_in_a_plain_run() {
        let data = [0u8; 4];
        let specs: Vec<_> = ["a", "b", "c"].iter().map(|n| TensorSpec::new(DType::F32, &[1], &data).named(n)).collect();
        let mut block = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
        Writer::new().write(&specs, &mut block).unwrap();
        // Rename "c" to "a" in the heap (names start after 3 descriptors).
        let heap = HEADER_LEN + 3 * DESCRIPTOR_LEN;
        block[heap + 2] = b'a';
        let dup = parse(&block, true, true).unwrap_err();
        assert_eq!(dup.rule(), Rule::DuplicateName);
        assert_eq!(dup, parse(&block, false, true).unwrap_err());
        assert_eq!(dup, parse(&block, true, false).unwrap_err());
        block[HEADER_LEN + 2 * DESCRIPTOR_LEN + 3] = 1; // reserved byte of descriptor 2
        assert_eq!(parse(&block, true, true).unwrap_err().rule(), Rule::DescriptorReserved);
    }
}
