//! The check order of the spec, steps 1 to 12, in one place.
//!
//! [`Parser`] runs every step before it returns a [`Directory`], so no view
//! handed out afterwards can point outside the buffer. The first failing step
//! wins; inside a step, the first fault in descriptor order wins.

use crate::bytes::{align64, first_nonzero, usize_from};
use crate::descriptor::{self, field_at, RawDescriptor, AT_BYTE_OFFSET};
use crate::error::{fail, Error, Result, Rule};
use crate::header::{Header, Regions, DESCRIPTOR_LEN, HEADER_LEN};
use crate::limits::Limits;
use crate::names::{self, Heap, NameCursor, Table};
use crate::quant;
use crate::views::{Directory, NameIndex};

/// Header field offset of payload_bytes (for step 10's report).
const AT_PAYLOAD_BYTES: usize = 16;

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
}

impl Default for Parser<'_> {
    fn default() -> Self {
        Parser::new()
    }
}

impl<'s> Parser<'s> {
    /// Default caps (16,777,216), no scratch.
    pub const fn new() -> Self {
        Parser { limits: Limits::DEFAULT, scratch: None, seed: 0 }
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

    fn run<'a>(
        self,
        buf: &'a [u8],
        start: usize,
        standalone: bool,
    ) -> Result<(Directory<'a>, Option<names::FrozenTable<'s>>)> {
        let Some(block) = buf.get(start..) else {
            return fail(Rule::HeaderTruncated, buf.len());
        };
        let (header, regions, table) =
            check_block(block, &self.limits, self.scratch, self.seed, standalone).map_err(|e| e.shifted(start))?;
        Ok((Directory::from_checked(buf, start, header, regions), table))
    }
}

/// Steps 1 to 12 over `block` (offsets relative to it).
fn check_block<'s>(
    block: &[u8],
    limits: &Limits,
    scratch: Option<&'s mut [u32]>,
    seed: u64,
    standalone: bool,
) -> Result<(Header, Regions, Option<names::FrozenTable<'s>>)> {
    let header = Header::parse(block)?; // steps 1, 2
    let regions = header.regions(block, limits)?; // steps 3 to 7
    let count = usize_from(u64::from(header.tensor_count)).unwrap_or(0);
    let descs = Descriptors::new(block, count);
    let heap = Heap::new(block.get(descs.end()..regions.heap_end).unwrap_or(&[]), descs.end());
    let payload = Payload {
        bytes: block.get(regions.payload_base..regions.block_len).unwrap_or(&[]),
        at: regions.payload_base,
        len: header.payload_bytes,
    };
    let table = check_descriptors(&descs, heap, header.has_names(), payload, scratch, seed)?; // steps 8 to 11
    if standalone && regions.block_len != block.len() {
        return fail(Rule::TrailingBytes, regions.block_len); // step 12
    }
    Ok((header, regions, table))
}

/// The payload region of a block whose size checks passed.
#[derive(Clone, Copy)]
struct Payload<'a> {
    bytes: &'a [u8],
    /// Block offset of the region.
    at: usize,
    /// payload_bytes from the header.
    len: u64,
}

/// Where a fault sits in the check order: step 8 has sub-steps (reserved
/// bytes, which return at once; then per descriptor its name rules, name
/// uniqueness and layout rules; then the heap total).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Names,
    HeapTotal,
    Ranges,    // step 9
    Placement, // step 10
    Values,    // step 11
}

/// The first fault by (stage, descriptor order) seen so far.
#[derive(Default)]
struct FirstFault(Option<(Stage, Error)>);

impl FirstFault {
    /// True while a fault at `stage` could still be the one reported.
    fn open(&self, stage: Stage) -> bool {
        self.0.is_none_or(|(s, _)| stage < s)
    }

    /// Records `r`'s fault unless an earlier-ranked one is already held.
    fn note(&mut self, stage: Stage, r: Result<()>) {
        if let Err(e) = r {
            if self.open(stage) {
                self.0 = Some((stage, e));
            }
        }
    }

    /// Replaces the held fault (a duplicate found after the walk that comes
    /// before the step-8 fault the walk stopped at).
    fn replace(&mut self, stage: Stage, e: Error) {
        self.0 = Some((stage, e));
    }

    fn into_result(self) -> Result<()> {
        self.0.map_or(Ok(()), |(_, e)| Err(e))
    }
}

/// Steps 8 to 11 in one pass over the descriptors, so a large directory is
/// read from memory once. Faults of later stages wait in [`FirstFault`]
/// until no earlier stage can fail; a reserved byte (the first rule of
/// step 8) returns at once.
fn check_descriptors<'s>(
    descs: &Descriptors<'_>,
    heap: Heap<'_>,
    has_names: bool,
    payload: Payload<'_>,
    scratch: Option<&'s mut [u32]>,
    seed: u64,
) -> Result<Option<names::FrozenTable<'s>>> {
    names::check_flag_on_empty(descs.count, has_names)?;
    let name_of = |i| descs.name(&heap, i);
    let mut table = if has_names { scratch.and_then(|s| Table::new(s, descs.count)) } else { None };
    let mut first = FirstFault::default();
    let mut names = NameCursor::default();
    // How many descriptors' names passed their own rules before the first
    // step-8 name/layout fault, if there is one.
    let mut names_fault: Option<usize> = None;
    let mut ranges = RangeWalk::default();
    let mut hashes = [0u64; RING];
    if let Some(t) = table.as_ref() {
        warm(t, &mut hashes, 0, descs.count.min(BATCH), seed, name_of);
    }
    for (i, raw) in descs.raws.iter().enumerate() {
        descriptor::check_reserved(raw, i)?;
        if first.open(Stage::Names) {
            let name = names.check(heap, raw, i, has_names);
            let r = name
                .and_then(|()| match table.as_mut() {
                    Some(t) => insert_ahead(t, &mut hashes, i, descs.count, seed, name_of)
                        .map_or(Ok(()), |earlier| duplicate(earlier, i)),
                    None => Ok(()),
                })
                .and_then(|()| names.check_layout(heap, raw, i, || names::names_total(descs.raws)));
            if r.is_err() {
                names_fault = Some(if name.is_ok() { i.saturating_add(1) } else { i });
            }
            first.note(Stage::Names, r);
        }
        if first.open(Stage::Ranges) {
            ranges.check(raw, i, payload, &mut first);
            if first.open(Stage::Values) {
                first.note(Stage::Values, check_values(descs, raw, i, payload));
            }
        }
    }
    if has_names && table.is_none() && (names_fault.is_some() || first.open(Stage::Names)) {
        // Without scratch, duplicates are found after the walk. One among
        // the names that passed their own rules comes before the walk's
        // step-8 fault (uniqueness is checked before a descriptor's layout).
        let upto = names_fault.unwrap_or(descs.count);
        if let Some((earlier, later)) = names::find_duplicate_quadratic(upto, name_of) {
            if let Err(e) = duplicate(earlier, later) {
                first.replace(Stage::Names, e);
            }
        }
    }
    if first.open(Stage::HeapTotal) {
        first.note(Stage::HeapTotal, names.check_heap_total(heap));
    }
    if first.open(Stage::Placement) {
        first.note(Stage::Placement, ranges.check_total(payload.len));
    }
    first.into_result()?;
    Ok(table.map(Table::freeze))
}

/// Names are hashed and their home slots read a batch ahead of the inserts.
/// Large tables miss the cache on every insert; a tight loop of independent
/// reads lets a batch of misses overlap instead of queueing one behind
/// another. Microcontrollers have no such caches, so 32-bit targets skip it
/// and save the code.
const BATCH: usize = if cfg!(target_pointer_width = "64") { 16 } else { 0 };
const RING: usize = BATCH * 2;

/// Hashes names `from..to` into the ring and reads their home slots.
fn warm<'n>(
    t: &Table<'_>,
    hashes: &mut [u64; RING],
    from: usize,
    to: usize,
    seed: u64,
    name_of: impl Fn(usize) -> &'n [u8],
) {
    let mut seen = 0u32;
    for k in from..to {
        let h = names::name_hash(name_of(k), seed);
        seen ^= t.peek(h);
        if let Some(slot) = k.checked_rem(RING).and_then(|k| hashes.get_mut(k)) {
            *slot = h;
        }
    }
    // Keeps the reads: their values are not needed, their cache lines are.
    core::hint::black_box(seen);
}

/// Inserts name `i` (hashed a batch ago); at each batch start, warms the next batch.
fn insert_ahead<'n>(
    t: &mut Table<'_>,
    hashes: &mut [u64; RING],
    i: usize,
    count: usize,
    seed: u64,
    name_of: impl Fn(usize) -> &'n [u8] + Copy,
) -> Option<usize> {
    let Some(h) = i.checked_rem(RING).and_then(|k| hashes.get(k)).copied() else {
        return t.insert(name_of(i), i, seed, name_of);
    };
    if i.checked_rem(BATCH) == Some(0) {
        let from = i.saturating_add(BATCH);
        warm(t, hashes, from, from.saturating_add(BATCH).min(count), seed, name_of);
    }
    t.insert_hashed(h, name_of(i), i, name_of)
}

fn duplicate(_earlier: usize, later: usize) -> Result<()> {
    fail(Rule::DuplicateName, names::duplicate_at(later))
}

/// Step 9 overlap and step 10 greedy placement, tracked across descriptors.
#[derive(Default)]
struct RangeWalk {
    /// End of the furthest non-empty range so far (overlap).
    overlap_end: u64,
    /// The canonical running end (placement).
    running_end: u64,
}

impl RangeWalk {
    fn check(&mut self, d: &RawDescriptor, i: usize, payload: Payload<'_>, first: &mut FirstFault) {
        if let Err(e) = descriptor::check_shape_and_range(d, i, payload.len) {
            return first.note(Stage::Ranges, Err(e));
        }
        let end = d.range_end().unwrap_or(u64::MAX);
        if d.byte_length() != 0 {
            if d.byte_offset() < self.overlap_end {
                return first.note(Stage::Ranges, fail(Rule::RangeOverlap, field_at(i, AT_BYTE_OFFSET)));
            }
            self.overlap_end = end;
        }
        if first.open(Stage::Placement) {
            first.note(Stage::Placement, check_placement(d, i, self.running_end, payload));
            self.running_end = end;
        }
    }

    // Step 10: payload_bytes is the end of the last tensor.
    fn check_total(&self, payload_bytes: u64) -> Result<()> {
        if self.running_end != payload_bytes {
            return fail(Rule::NonCanonicalPayloadBytes, AT_PAYLOAD_BYTES);
        }
        Ok(())
    }
}

// Step 10 for one tensor: offset is the greedy placement, the gap before it is zero.
fn check_placement(d: &RawDescriptor, i: usize, running_end: u64, payload: Payload<'_>) -> Result<()> {
    if align64(running_end) != Some(d.byte_offset()) {
        return fail(Rule::NonCanonicalOffset, field_at(i, AT_BYTE_OFFSET));
    }
    let gap_start = usize_from(running_end).unwrap_or(usize::MAX);
    let gap_end = usize_from(d.byte_offset()).unwrap_or(usize::MAX);
    match payload.bytes.get(gap_start..gap_end).and_then(first_nonzero) {
        Some(k) => fail(Rule::NonzeroGap, payload.at.saturating_add(gap_start).saturating_add(k)),
        None => Ok(()),
    }
}

// Step 11 for one tensor: element bytes, then quantization.
fn check_values(descs: &Descriptors<'_>, d: &RawDescriptor, i: usize, payload: Payload<'_>) -> Result<()> {
    let span = descriptor::payload_span(d, 0);
    let bytes = span.and_then(|(s, e)| payload.bytes.get(s..e)).unwrap_or(&[]);
    let at = payload.at.saturating_add(span.map_or(0, |(s, _)| s));
    descriptor::check_elements(d, bytes, at)?;
    quant::check_quant(d, i, descs.count, |j| descs.raw(j))
}

/// The descriptor table of a block whose directory is known to fit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Descriptors<'a> {
    pub(crate) raws: &'a [RawDescriptor],
    count: usize,
}

impl<'a> Descriptors<'a> {
    pub(crate) fn new(block: &'a [u8], count: usize) -> Self {
        let end = count.saturating_mul(DESCRIPTOR_LEN).saturating_add(HEADER_LEN);
        let raws = RawDescriptor::slice(block.get(HEADER_LEN..end).unwrap_or(&[]));
        Descriptors { raws, count: raws.len() }
    }

    /// Block offset just past the last descriptor.
    pub(crate) fn end(&self) -> usize {
        HEADER_LEN.saturating_add(self.count.saturating_mul(DESCRIPTOR_LEN))
    }

    #[inline]
    pub(crate) fn raw(&self, i: usize) -> &'a RawDescriptor {
        self.raws.get(i).unwrap_or(&RawDescriptor::ZERO)
    }

    /// Name bytes of tensor `i` (empty when unnamed).
    #[inline]
    pub(crate) fn name<'h>(&self, heap: &Heap<'h>, i: usize) -> &'h [u8] {
        let (off, len) = self.raw(i).name_field();
        heap.slice(off, len).unwrap_or(&[])
    }
}
