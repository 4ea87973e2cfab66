//! The check order of the spec, steps 1 to 12, in one place.
//!
//! [`Parser`] runs every step before it returns a [`Directory`], so no view
//! handed out afterwards can point outside the buffer. The first failing step
//! wins; inside a step, the first fault in descriptor order wins.

use crate::bytes::{align64, first_nonzero, u16_at, usize_from};
use crate::descriptor::{self, field_at, Descriptor, AT_BYTE_OFFSET};
use crate::error::{fail, Error, Result, Rule};
use crate::header::{Header, Regions, DESCRIPTOR_LEN, HEADER_LEN};
use crate::limits::Limits;
use crate::names::{self, Heap, NameFields, Table};
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

    fn run<'a>(self, buf: &'a [u8], start: usize, standalone: bool) -> Result<(Directory<'a>, Option<names::FrozenTable<'s>>)> {
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
    let heap = Heap {
        bytes: block.get(descs.end()..regions.heap_end).unwrap_or(&[]),
        at: descs.end(),
    };
    check_descriptor_reserved(&descs)?; // step 8
    names::check_heap(heap, count, header.has_names(), |i| NameFields::read(descs.raw(i)))?;
    let table = check_unique_names(&descs, heap, header.has_names(), scratch, seed)?;
    let payload = block.get(regions.payload_base..regions.block_len).unwrap_or(&[]);
    check_tensors(&descs, header.payload_bytes, payload, regions.payload_base)?; // steps 9 to 11
    if standalone && regions.block_len != block.len() {
        return fail(Rule::TrailingBytes, regions.block_len); // step 12
    }
    Ok((header, regions, table))
}

/// The descriptor table of a block whose directory is known to fit.
#[derive(Clone, Copy)]
pub(crate) struct Descriptors<'a> {
    bytes: &'a [u8],
    count: usize,
}

impl<'a> Descriptors<'a> {
    pub(crate) fn new(block: &'a [u8], count: usize) -> Self {
        let end = count.saturating_mul(DESCRIPTOR_LEN).saturating_add(HEADER_LEN);
        Descriptors { bytes: block.get(HEADER_LEN..end).unwrap_or(&[]), count }
    }

    /// Block offset just past the last descriptor.
    pub(crate) fn end(&self) -> usize {
        HEADER_LEN.saturating_add(self.bytes.len())
    }

    pub(crate) fn raw(&self, i: usize) -> &'a [u8] {
        let at = i.saturating_mul(DESCRIPTOR_LEN);
        self.bytes.get(at..at.saturating_add(DESCRIPTOR_LEN)).unwrap_or(&[])
    }

    pub(crate) fn get(&self, i: usize) -> Descriptor {
        Descriptor::decode(self.raw(i))
    }

    /// Name bytes of tensor `i` (empty when unnamed).
    pub(crate) fn name<'h>(&self, heap: &Heap<'h>, i: usize) -> &'h [u8] {
        let raw = self.raw(i);
        let off = u16_at(raw, descriptor::AT_NAME_OFF).unwrap_or(0);
        let len = u16_at(raw, descriptor::AT_NAME_LEN).unwrap_or(0);
        heap.slice(off, len).unwrap_or(&[])
    }
}

// Step 8, reserved bytes (before the name rules, as ruled).
fn check_descriptor_reserved(descs: &Descriptors<'_>) -> Result<()> {
    (0..descs.count).try_for_each(|i| descriptor::check_reserved(descs.raw(i), i))
}

// Step 8, unique names. Returns the filled table when scratch sufficed.
fn check_unique_names<'s>(
    descs: &Descriptors<'_>,
    heap: Heap<'_>,
    has_names: bool,
    scratch: Option<&'s mut [u32]>,
    seed: u64,
) -> Result<Option<names::FrozenTable<'s>>> {
    let name_of = |i| descs.name(&heap, i);
    let table = scratch.and_then(|s| Table::new(s, descs.count));
    let (dup, table) = match (has_names, table) {
        (false, _) => (None, None),
        (true, Some(mut t)) => (names::find_duplicate_hashed(&mut t, descs.count, seed, name_of), Some(t.freeze())),
        (true, None) => (names::find_duplicate_quadratic(descs.count, name_of), None),
    };
    match dup {
        Some((_, later)) => fail(Rule::DuplicateName, names::duplicate_at(later)),
        None => Ok(table),
    }
}

/// Steps 9, 10 and 11 in one pass. A step-9 fault returns at once (it is the
/// earliest step); the first step-10 and step-11 faults wait until every
/// descriptor has passed step 9.
fn check_tensors(descs: &Descriptors<'_>, payload_bytes: u64, payload: &[u8], payload_base: usize) -> Result<()> {
    let mut step10: Option<Error> = None;
    let mut step11: Option<Error> = None;
    let mut overlap_end = 0u64; // end of the furthest non-empty range so far
    let mut running_end = 0u64; // canonical greedy end
    for i in 0..descs.count {
        let d = descs.get(i);
        descriptor::check_shape_and_range(&d, i, payload_bytes)?;
        let end = d.range_end().unwrap_or(u64::MAX);
        if d.byte_length != 0 {
            if d.byte_offset < overlap_end {
                return fail(Rule::RangeOverlap, field_at(i, AT_BYTE_OFFSET));
            }
            overlap_end = end;
        }
        if step10.is_none() {
            step10 = check_placement(&d, i, running_end, payload, payload_base).err();
            running_end = end;
        }
        if step11.is_none() {
            step11 = check_values(descs, &d, i, payload, payload_base).err();
        }
    }
    if step10.is_none() && running_end != payload_bytes {
        step10 = Some(Error::new(Rule::NonCanonicalPayloadBytes, AT_PAYLOAD_BYTES));
    }
    step10.or(step11).map_or(Ok(()), Err)
}

// Step 10 for one tensor: offset is the greedy placement, the gap before it is zero.
fn check_placement(d: &Descriptor, i: usize, running_end: u64, payload: &[u8], payload_base: usize) -> Result<()> {
    let expected = align64(running_end);
    if expected != Some(d.byte_offset) {
        return fail(Rule::NonCanonicalOffset, field_at(i, AT_BYTE_OFFSET));
    }
    let gap_start = usize_from(running_end).unwrap_or(usize::MAX);
    let gap_end = usize_from(d.byte_offset).unwrap_or(usize::MAX);
    match payload.get(gap_start..gap_end).and_then(first_nonzero) {
        Some(k) => fail(Rule::NonzeroGap, payload_base.saturating_add(gap_start).saturating_add(k)),
        None => Ok(()),
    }
}

// Step 11 for one tensor: element bytes, then quantization.
fn check_values(descs: &Descriptors<'_>, d: &Descriptor, i: usize, payload: &[u8], payload_base: usize) -> Result<()> {
    let span = descriptor::payload_span(d, 0);
    let bytes = span.and_then(|(s, e)| payload.get(s..e)).unwrap_or(&[]);
    let at = payload_base.saturating_add(span.map_or(0, |(s, _)| s));
    descriptor::check_elements(d, bytes, at)?;
    quant::check_quant(d, i, descs.count, |j| descs.get(j))
}
