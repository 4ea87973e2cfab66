//! The payload walk: which gap or element bytes come next as the payload
//! streams past, and from which byte a fault already known is certain.
//!
//! Faults in the payload region belong to steps 10 (a nonzero gap byte, and
//! the placement faults the descriptors show) and 11 (bool bytes, an odd
//! packed tensor's last nibble, and the quantization faults the descriptors
//! show). A gap fault is certain at its byte: every earlier gap has passed.
//! Any other fault is certain once no byte still to come can hold a fault
//! the spec orders first: once the last gap has passed (a step-10 fault
//! wins over any step-11 fault), and for a quantization fault also the last
//! element bytes of its own and earlier descriptors. [`PayloadWalk::certain_at`]
//! is that point.

use crate::bytes::{all_zero, first_above_one, u64_from, usize_from};
use crate::dtype::{ByteRule, DType};
use crate::error::{fail_at, Error, Result, Rule};
use crate::wire::descriptor::Descriptors;
use crate::wire::descriptor::RawDescriptor;

/// Where the payload walk stands.
#[derive(Clone, Copy, Debug)]
pub(super) struct PayloadWalk {
    pub(super) payload_base: u64,
    pub(super) block_len: u64,
    /// Descriptors whose gaps are checked: all, or those before the first
    /// misplaced one.
    pub(super) upto: usize,
    /// The next descriptor in stream order.
    pub(super) next: usize,
    /// Its gap starts here (payload offset; the previous range's end).
    gap_from: u64,
    /// A step-10 fault of the descriptors, certain once the gaps before it passed.
    pub(super) misplaced: Option<Error>,
    /// The first step-11 fault in descriptor order so far: (descriptor, error).
    values: Option<(usize, Error)>,
    /// `values` holds an element-byte fault (final: bytes stream in order),
    /// not the descriptors' quantization fault (which an element fault of a
    /// descriptor up to its own overrides).
    element_fault: bool,
    /// Payload offset from which the pending fault (`misplaced`, else
    /// `values`) is certain.
    certain_at: u64,
}

/// What the directory check left for the payload to decide.
#[derive(Clone, Copy)]
pub(super) struct Pending {
    /// Descriptors whose gaps the walk checks (see [`PayloadWalk::upto`]).
    pub(super) upto: usize,
    /// Leading descriptors with no gap and no byte rules: the walk starts after them.
    pub(super) clean_lead: usize,
    pub(super) misplaced: Option<Error>,
    /// The descriptors' first quantization fault: (descriptor, error).
    pub(super) quant: Option<(usize, Error)>,
}

impl PayloadWalk {
    /// The walk over the payload of a block whose prefix passed steps 7 to 9.
    pub(super) fn new(descs: &Descriptors<'_>, payload_base: u64, block_len: u64, open: Pending) -> PayloadWalk {
        let Pending { upto, clean_lead, misplaced, quant } = open;
        // Ranges of accepted descriptors do not overflow: the fallback is never taken.
        let gap_from = clean_lead.checked_sub(1).map_or(0, |last| descs.raw(last).range_end().unwrap_or(u64::MAX));
        let mut walk = PayloadWalk {
            payload_base,
            block_len,
            upto,
            next: clean_lead,
            gap_from,
            misplaced,
            values: quant,
            element_fault: false,
            certain_at: 0,
        };
        // Only a block with a fault pays for finding where it becomes certain.
        let gaps = || last_gap_end(descs, clean_lead, upto, gap_from);
        walk.certain_at = match (misplaced, quant) {
            (None, None) => 0,
            (None, Some((i, _))) => gaps().max(walk.last_element_end(descs, i)),
            (Some(_), _) => gaps(),
        };
        walk
    }

    /// The pending fault, once `to` payload bytes have passed and it is certain.
    pub(super) fn certain(&self, to: u64) -> Option<Error> {
        let pending = self.misplaced.or(self.values.map(|(_, e)| e))?;
        (to >= self.certain_at).then_some(pending)
    }

    /// The block offset of the next byte a check reads, at or after `fed`
    /// (see [`Incremental::next_needed`](super::Incremental::next_needed)).
    /// Walks a copy of the state.
    pub(super) fn next_needed(mut self, descs: &Descriptors<'_>, fed: u64) -> u64 {
        let fed = fed.max(self.payload_base);
        let abs = |p: u64| self.payload_base.saturating_add(p);
        while self.next < self.upto {
            let d = descs.raw(self.next);
            // Accepted ranges do not overflow: the fallback is never taken.
            let (start, end) = (d.byte_offset(), d.range_end().unwrap_or(u64::MAX));
            if self.gap_from < start && abs(start) > fed {
                return fed.max(abs(self.gap_from));
            }
            if self.reads_elements(d) && abs(end) > fed {
                let first = match d.dtype().map(DType::byte_rule) {
                    Some(ByteRule::ZeroOrOne) => start,
                    _ => end.saturating_sub(1), // an odd packed tensor's last byte
                };
                return fed.max(abs(first));
            }
            self.gap_from = end;
            self.next = self.next.saturating_add(1);
        }
        u64::MAX
    }

    /// The runs of bytes (block offsets, `[start, end)`) that
    /// [`next_needed`](Self::next_needed) asks for from `fed` on, in stream
    /// order, adjacent runs joined: those that end by `limit`, at most
    /// `out.len()` of them and `budget` bytes in all; returns how many. Walks a copy of the state as
    /// the descriptors leave it (a fault the bytes hold does not shorten
    /// the plan: feeding a byte no rule reads changes no verdict).
    pub(super) fn needed_runs(
        mut self,
        descs: &Descriptors<'_>,
        fed: u64,
        (limit, budget): (u64, u64),
        out: &mut [[u64; 2]],
    ) -> usize {
        let mut runs = Runs { out, n: 0, from: fed.max(self.payload_base), limit, budget };
        self.walk_needs(descs, |a, b| runs.push(a, b));
        runs.n
    }

    /// The walk after a plan of [`needed_runs`](Self::needed_runs) made at
    /// `fed` was taken, when `bytes` holds its bytes, every one zero, and
    /// no fault is pending (then no byte of it can hold a fault): `runs`
    /// must be the plan's runs exactly, which one walk confirms. `None`
    /// otherwise (the caller takes the runs one by one). The walk may
    /// stand past descriptors after the plan that need no byte, as it does
    /// after the leading ones ([`Pending::clean_lead`]).
    pub(super) fn after_zero_plan(
        mut self,
        descs: &Descriptors<'_>,
        fed: u64,
        runs: &[[u64; 2]],
        bytes: &[u8],
    ) -> Option<PayloadWalk> {
        // The plan's runs lie in the payload region (step 9 holds the ranges
        // to it), so they end by the block's end: no step-12 fault to see.
        let limit = runs.last()?[1];
        if self.misplaced.is_some() || self.values.is_some() {
            return None;
        }
        let mut follow = Follow { runs, matched: 0, held: 0, from: fed.max(self.payload_base), limit, open: None };
        self.walk_needs(descs, |a, b| follow.push(a, b));
        let held = follow.done()?;
        all_zero(bytes.get(..usize_from(held)?)?).then_some(self)
    }

    /// Walks the descriptors from `next`, handing `needs` each run of bytes
    /// a check reads (payload gaps, element bytes, as block offsets) and
    /// passing each descriptor once its runs are handed; stops when `needs`
    /// returns false, before that descriptor.
    fn walk_needs(&mut self, descs: &Descriptors<'_>, mut needs: impl FnMut(u64, u64) -> bool) {
        let base = self.payload_base;
        let abs = |p: u64| base.saturating_add(p);
        while self.next < self.upto {
            let d = descs.raw(self.next);
            // Accepted ranges do not overflow: the fallback is never taken.
            let (start, end) = (d.byte_offset(), d.range_end().unwrap_or(u64::MAX));
            if self.gap_from < start && !needs(abs(self.gap_from), abs(start)) {
                return;
            }
            if self.reads_elements(d) {
                let first = match d.dtype().map(DType::byte_rule) {
                    Some(ByteRule::ZeroOrOne) => start,
                    _ => end.saturating_sub(1), // an odd packed tensor's last byte
                };
                if !needs(abs(first), abs(end)) {
                    return;
                }
            }
            self.gap_from = end;
            self.next = self.next.saturating_add(1);
        }
    }

    /// True when step 11 still reads this descriptor's bytes: while no
    /// step-10 fault and no earlier element fault is known, for bool and
    /// odd packed tensors, up to the descriptors' own step-11 fault.
    fn reads_elements(&self, d: &RawDescriptor) -> bool {
        let open = self.misplaced.is_none() && !self.element_fault;
        open && has_byte_rules(d) && self.values.is_none_or(|(i, _)| self.next <= i)
    }

    /// End (payload offset) of the last descriptor from `next` to `i` whose
    /// element bytes step 11 reads; 0 when there is none.
    fn last_element_end(&self, descs: &Descriptors<'_>, i: usize) -> u64 {
        let mut d = i.saturating_add(1);
        while d > self.next {
            d = d.saturating_sub(1);
            let raw = descs.raw(d);
            if has_byte_rules(raw) {
                // Accepted ranges do not overflow: the fallback is never taken.
                return raw.range_end().unwrap_or(u64::MAX);
            }
        }
        0
    }

    /// Checks the payload bytes `from..to` (payload offsets) held in `chunk`
    /// (or passed over: see [`Incremental::skip`](super::Incremental::skip),
    /// which passes over none that a check reads).
    pub(super) fn scan(&mut self, descs: &Descriptors<'_>, chunk: Chunk<'_>, from: u64, to: u64) -> Result<()> {
        while self.next < self.upto {
            let d = descs.raw(self.next);
            // Accepted ranges do not overflow: the fallback is never taken.
            let (start, end) = (d.byte_offset(), d.range_end().unwrap_or(u64::MAX));
            // Most tensors need nothing: no gap before them, no byte rules.
            if self.gap_from == start && !self.reads_elements(d) {
                if to < end {
                    return Ok(());
                }
                self.gap_from = end;
                self.next = self.next.saturating_add(1);
                continue;
            }
            // The gap before this descriptor (step 10): every earlier gap
            // passed, so a nonzero byte is the verdict.
            if let Some((bytes, at)) = window(chunk, from, to, self.gap_from, start) {
                if let Some(k) = bytes.iter().position(|&b| b != 0) {
                    let abs = self.payload_base.saturating_add(at).saturating_add(u64_from(k));
                    return fail_at(Rule::NonzeroGap, abs);
                }
            }
            if to <= start {
                return Ok(()); // the chunk ends inside the gap
            }
            // Its element bytes (step 11), only while no step-10 fault is known.
            if self.reads_elements(d) {
                if let Some((bytes, at)) = window(chunk, from, to, start, end) {
                    self.check_elements(descs, d, bytes, at, end);
                }
            }
            if to < end {
                return Ok(()); // the chunk ends inside this tensor
            }
            self.gap_from = end;
            self.next = self.next.saturating_add(1);
        }
        Ok(())
    }

    /// Takes the payload bytes `from..to` (payload offsets) held in `chunk`
    /// or passed over: [`scan`](Self::scan), then the pending fault once it
    /// is certain, then for a standalone block step 12 once the bytes go
    /// past its end. What every chunk of the payload goes through.
    #[inline]
    pub(super) fn take(
        &mut self,
        descs: &Descriptors<'_>,
        chunk: Chunk<'_>,
        (from, to): (u64, u64),
        standalone: bool,
    ) -> Result<()> {
        self.scan(descs, chunk, from, to)?;
        if let Some(e) = self.certain(to) {
            return Err(e);
        }
        if standalone && to.saturating_add(self.payload_base) > self.block_len {
            // Step 12: every earlier step is settled once the block is whole.
            return fail_at(Rule::TrailingBytes, self.block_len);
        }
        Ok(())
    }

    /// Step 11's byte checks on the part of tensor `self.next` at payload
    /// offset `at`. A fault is certain once the gaps after this tensor passed.
    fn check_elements(&mut self, descs: &Descriptors<'_>, d: &RawDescriptor, bytes: &[u8], at: u64, end: u64) {
        let abs = |k: usize| self.payload_base.saturating_add(at).saturating_add(u64_from(k));
        let bad = match d.dtype().map(DType::byte_rule) {
            Some(ByteRule::ZeroOrOne) => first_above_one(bytes).map(|k| (Rule::BoolByte, k)),
            // An odd packed tensor (has_byte_rules): its last byte's high nibble.
            _ => match bytes.last() {
                Some(&b) if at.saturating_add(u64_from(bytes.len())) == end && b & 0xF0 != 0 => {
                    Some((Rule::PackedHighNibble, bytes.len().saturating_sub(1)))
                }
                _ => None,
            },
        };
        if let Some((rule, k)) = bad {
            self.values = Some((self.next, Error::at(rule, abs(k))));
            self.element_fault = true;
            self.certain_at = last_gap_end(descs, self.next.saturating_add(1), self.upto, end);
        }
    }

    /// Once the whole payload passed: a step-10 fault of the descriptors,
    /// then the first step-11 fault.
    pub(super) fn verdict_at_end(&self) -> Result<()> {
        match self.certain(u64::MAX) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The plan [`PayloadWalk::needed_runs`] writes.
struct Runs<'o> {
    out: &'o mut [[u64; 2]],
    n: usize,
    /// Bytes before this are taken already.
    from: u64,
    limit: u64,
    /// Bytes the runs may still add up to.
    budget: u64,
}

impl Runs<'_> {
    /// Adds `a..b` (the part from `from` on); false once the plan is full,
    /// or the run ends past `limit` or does not fit the budget.
    fn push(&mut self, a: u64, b: u64) -> bool {
        let a = a.max(self.from);
        if b <= a {
            return true;
        }
        let len = b.saturating_sub(a);
        if b > self.limit || len > self.budget {
            return false;
        }
        self.budget = self.budget.saturating_sub(len);
        if let Some(last) = self.n.checked_sub(1).and_then(|i| self.out.get_mut(i)) {
            if last[1] == a {
                last[1] = b;
                return true;
            }
        }
        let Some(slot) = self.out.get_mut(self.n) else { return false };
        *slot = [a, b];
        self.n = self.n.saturating_add(1);
        true
    }
}

/// A plan checked against the one [`PayloadWalk::walk_needs`] makes:
/// the same runs, joined the same way.
struct Follow<'r> {
    runs: &'r [[u64; 2]],
    /// Runs confirmed so far, and their bytes.
    matched: usize,
    held: u64,
    from: u64,
    limit: u64,
    /// The run being joined, not compared yet.
    open: Option<[u64; 2]>,
}

impl Follow<'_> {
    /// Takes the walk's next run; false once it ends past `limit` (or a
    /// run differs: [`done`](Self::done) is then false).
    fn push(&mut self, a: u64, b: u64) -> bool {
        let a = a.max(self.from);
        if b <= a {
            return true;
        }
        if b > self.limit {
            return false;
        }
        match self.open {
            Some([s, e]) if e == a => self.open = Some([s, b]),
            Some(run) => {
                if !self.confirm(run) {
                    return false;
                }
                self.open = Some([a, b]);
            }
            None => self.open = Some([a, b]),
        }
        true
    }

    fn confirm(&mut self, run: [u64; 2]) -> bool {
        let same = self.runs.get(self.matched) == Some(&run);
        if same {
            self.matched = self.matched.saturating_add(1);
            self.held = self.held.saturating_add(run[1].saturating_sub(run[0]));
        }
        same
    }

    /// The runs' bytes, when the walk made exactly the given runs.
    fn done(mut self) -> Option<u64> {
        let closed = match self.open.take() {
            Some(run) => self.confirm(run),
            None => true,
        };
        (closed && self.matched == self.runs.len()).then_some(self.held)
    }
}

/// True for the tensors whose bytes step 11 reads (the dtype table's
/// [`ByteRule`]): bool, and packed nibbles with an odd count (only the last
/// byte's high nibble); empty tensors have none.
fn has_byte_rules(d: &RawDescriptor) -> bool {
    let reads = match d.dtype().map(DType::byte_rule) {
        Some(ByteRule::ZeroOrOne) => true,
        // Accepted shapes do not overflow: the fallback is never taken.
        Some(ByteRule::OddPadZero) => d.element_count().unwrap_or(0) % 2 == 1,
        Some(ByteRule::Any) | None => false,
    };
    reads && d.byte_length() != 0
}

/// Where the last gap before one of the descriptors `from..upto` ends
/// (payload offset; 0 when there is none), `from_gap` being where the gap
/// before `from` starts. Searched from the back, where it usually is; run
/// only on a block with a fault.
// Not inlined: its two callers would each carry a copy (firmware flash).
#[inline(never)]
fn last_gap_end(descs: &Descriptors<'_>, from: usize, upto: usize, from_gap: u64) -> u64 {
    let mut d = upto;
    while d > from {
        d = d.saturating_sub(1);
        let start = descs.raw(d).byte_offset();
        // Ranges of descriptors before `upto` passed step 9: the fallback is never taken.
        let prev_end = if d == from { from_gap } else { descs.raw(d.saturating_sub(1)).range_end().unwrap_or(0) };
        if prev_end < start {
            return start;
        }
    }
    0
}

/// Payload data handed to the walk: bytes, or a length passed over.
#[derive(Clone, Copy)]
pub(super) enum Chunk<'c> {
    Bytes(&'c [u8]),
    Skipped(u64),
}

impl<'c> Chunk<'c> {
    pub(super) fn len(&self) -> u64 {
        match self {
            Chunk::Bytes(b) => u64_from(b.len()),
            Chunk::Skipped(n) => *n,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first `n` bytes (or all, when fewer).
    pub(super) fn first(self, n: u64) -> Chunk<'c> {
        match self {
            // More than the chunk holds means all of it (the `unwrap_or` is never taken).
            Chunk::Bytes(b) => Chunk::Bytes(b.get(..usize_from(n).map_or(b.len(), |n| n.min(b.len()))).unwrap_or(b)),
            Chunk::Skipped(m) => Chunk::Skipped(m.min(n)),
        }
    }

    /// What follows the first `n` bytes.
    pub(super) fn after(self, n: u64) -> Chunk<'c> {
        match self {
            // Past the chunk's end nothing follows.
            Chunk::Bytes(b) => Chunk::Bytes(usize_from(n).and_then(|n| b.get(n..)).unwrap_or(&[])),
            Chunk::Skipped(m) => Chunk::Skipped(m.saturating_sub(n)),
        }
    }
}

/// The part of `chunk` (payload offsets `from..to`) that lies in `lo..hi`,
/// with its payload offset; `None` when there is none, or it was passed over.
pub(super) fn window<'c>(chunk: Chunk<'c>, from: u64, to: u64, lo: u64, hi: u64) -> Option<(&'c [u8], u64)> {
    let Chunk::Bytes(chunk) = chunk else { return None };
    let (a, b) = (lo.max(from), hi.min(to));
    if a >= b {
        return None;
    }
    let s = usize_from(a.saturating_sub(from))?;
    let e = usize_from(b.saturating_sub(from))?;
    Some((chunk.get(s..e)?, a))
}
