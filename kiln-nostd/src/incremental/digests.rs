//! Step 9d on a stream (`sha2` feature): each tensor of the canonical run
//! is hashed as its bytes pass, and compared with its digest once its last
//! byte is in (an empty tensor: once the tensor before it in the run is
//! done, or at the payload's start).
//!
//! A mismatch is the verdict at once: steps 1 to 9 passed before the
//! payload began, and DIGEST wins over steps 10 to 12. A fault of steps 10
//! to 12 that the payload walk finds certain is *held* until every tensor
//! of the run is hashed (a DIGEST fault in a later tensor would win), then
//! reported, in the chunk that completes the run.

use super::payload::{window, Chunk, PayloadWalk};
use super::{Incremental, Memory, Parts};
use crate::bytes::usize_from_u32;
use crate::digest::{run_entry, Digests, TensorHasher};
use crate::error::{fail_at, Error, Result, Rule};
use crate::wire::header::HEADER_LEN;

/// Where step 9d stands. The table and the SHA-256 state (about 112 bytes)
/// are in the validator's [`Memory`], so that its own state stays small (the
/// C API keeps it in a `kiln_incremental` of fixed size).
#[derive(Debug)]
pub(super) struct Hashing {
    /// Payload offset where the previous tensor of the run ends (0 before the first).
    running: u64,
    /// The next tensor of the run (descriptor index): in its bytes, or
    /// before them. Meaningless once `done`.
    next: u32,
    /// Every tensor of the run is hashed and matched.
    done: bool,
    /// A fault of steps 10 to 12, certain as far as those steps go, waiting for the run.
    pub(super) held: Option<Error>,
}

impl Hashing {
    pub(super) fn new() -> Self {
        Hashing { running: 0, next: 0, done: false, held: None }
    }

    fn next(&self) -> usize {
        usize_from_u32(self.next)
    }

    /// Hashes the payload bytes `from..to` (payload offsets) in `data` and
    /// judges every tensor of the run they complete; `base` is the payload's
    /// block offset (for the error). `data` never passes over a byte of the
    /// run: [`Incremental::next_needed`] asks for all of them.
    #[allow(clippy::too_many_arguments)] // the memory's parts, borrowed apart
    fn advance(
        &mut self,
        table: &[u8],
        hasher: &mut TensorHasher,
        descriptors: &[u8],
        count: usize,
        base: u64,
        data: Chunk<'_>,
        from: u64,
        to: u64,
    ) -> Result<()> {
        while !self.done {
            let entry = if self.next() < count { run_entry(descriptors, self.next(), self.running) } else { None };
            let Some((start, len)) = entry else {
                self.done = true;
                break;
            };
            // Steps 1 to 9 hold: the range does not overflow (it never saturates).
            let end = start.saturating_add(len);
            if let Some((bytes, _)) = window(data, from, to, start, end) {
                hasher.update(bytes);
            }
            if len != 0 && to < end {
                return Ok(()); // its last byte is still to come
            }
            let digest = Digests::new(table, 0).get(self.next());
            // The table holds one digest per tensor (step 3d, checked with the header).
            if !digest.is_some_and(|d| hasher.matches(d)) {
                return fail_at(Rule::PayloadDigest, base.saturating_add(start));
            }
            self.running = end;
            // Below the tensor count, a u32: never saturates.
            self.next = self.next.saturating_add(1);
        }
        Ok(())
    }

    /// The block offset of the next byte the run needs at or after `fed`,
    /// or `u64::MAX` once it is done.
    fn next_needed(&self, descriptors: &[u8], count: usize, base: u64, fed: u64) -> u64 {
        if self.done || self.next() >= count {
            return u64::MAX;
        }
        // `next` is a nonempty tensor of the run not yet complete (`advance`
        // judges empty ones as soon as they are next): its bytes from its start.
        let start = run_entry(descriptors, self.next(), self.running).map_or(0, |(s, _)| s);
        fed.max(base.saturating_add(start))
    }
}

impl<M: Memory> Incremental<M> {
    /// [`take_payload`](Incremental::take_payload) with digests: the walk's
    /// checks (the same as there; kept apart so that a build without the
    /// feature compiles exactly the code it did), then step 9d, which wins.
    pub(super) fn take_payload_hashing(&mut self, mut walk: PayloadWalk, data: Chunk<'_>) -> u64 {
        let end = if self.standalone { u64::MAX } else { walk.block_len };
        let data = data.first(end.saturating_sub(self.fed));
        // Payload offsets of the data.
        let from = self.fed.saturating_sub(walk.payload_base);
        let to = from.saturating_add(data.len());
        // A held fault of steps 10 to 12 is the walk's verdict: it reads no more.
        let result = if self.walk_settled() {
            Ok(())
        } else {
            let descs = self.descriptors(&walk);
            walk.scan(&descs, data, from, to).and_then(|()| {
                if let Some(e) = walk.certain(to) {
                    return Err(e);
                }
                if self.standalone && to.saturating_add(walk.payload_base) > walk.block_len {
                    // Step 12: every earlier step is settled once the block is whole.
                    return fail_at(Rule::TrailingBytes, walk.block_len);
                }
                Ok(())
            })
        };
        self.walk = Some(walk);
        // DIGEST first: it wins over any fault of steps 10 to 12.
        self.fault = match self.hash_payload(walk.payload_base, data, from, to) {
            Err(e) => Some(e),
            Ok(()) => self.gate(result.err()),
        };
        data.len()
    }

    /// The descriptors (raw, from descriptor 0) and the tensor count, for step 9d.
    fn run_parts(&self) -> (&[u8], usize) {
        let count = self.sizes.map_or(0, |s| usize_from_u32(s.header.tensor_count));
        // The descriptors are in prefix memory once the walk exists.
        (self.mem.prefix().get(HEADER_LEN..).unwrap_or(&[]), count)
    }

    /// Step 3d once the header passed steps 1 to 3: a table of another
    /// length is the caller's error, at the block's first byte.
    pub(super) fn check_table(&mut self, tensor_count: u32) -> Result<()> {
        if self.digests.is_none() {
            return Ok(());
        }
        match self.mem.parts().digests {
            Some((table, _)) if crate::digest::table_fits(table, tensor_count) => Ok(()),
            // A memory that lost its table has none that fits.
            _ => fail_at(Rule::DigestTableCount, 0),
        }
    }

    /// Step 9d over the payload bytes `from..to` in `data` (see [`Hashing::advance`]).
    pub(super) fn hash_payload(&mut self, base: u64, data: Chunk<'_>, from: u64, to: u64) -> Result<()> {
        let Incremental { mem, sizes, digests, .. } = self;
        let Some(h) = digests.as_mut() else { return Ok(()) };
        let Parts { prefix, digests: Some((table, hasher)), .. } = mem.parts() else {
            // A memory that lost its table has none that fits.
            return fail_at(Rule::DigestTableCount, 0);
        };
        let count = sizes.map_or(0, |s| usize_from_u32(s.header.tensor_count));
        // The descriptors are in prefix memory once the walk exists.
        h.advance(table, hasher, prefix.get(HEADER_LEN..).unwrap_or(&[]), count, base, data, from, to)
    }

    /// What a fault of steps 10 to 12 (`fault`, certain as far as those
    /// steps go) makes certain now: with digests, it is held until the run
    /// is hashed, and the first one held is the one reported.
    pub(super) fn gate(&mut self, fault: Option<Error>) -> Option<Error> {
        let Some(h) = self.digests.as_mut() else { return fault };
        if let Some(e) = fault {
            h.held.get_or_insert(e);
        }
        if h.done {
            h.held
        } else {
            None
        }
    }

    /// True when payloads are checked against a digest table.
    #[must_use]
    pub fn hashing(&self) -> bool {
        self.digests.is_some()
    }

    /// True unless the run still has bytes to hash.
    pub(super) fn hashed(&self) -> bool {
        self.digests.as_ref().is_none_or(|h| h.done)
    }

    /// A fault of steps 10 to 12 is held: the payload walk has its verdict.
    pub(super) fn walk_settled(&self) -> bool {
        self.digests.as_ref().is_some_and(|h| h.held.is_some())
    }

    /// [`Incremental::next_needed`] with digests: the bytes the walk reads
    /// (none once its verdict is held) and every byte of the run.
    pub(super) fn next_needed_hashing(&self, walk_needed: u64, base: u64) -> u64 {
        let Some(h) = &self.digests else { return walk_needed };
        let walk_needed = if h.held.is_some() { u64::MAX } else { walk_needed };
        let (descriptors, count) = self.run_parts();
        walk_needed.min(h.next_needed(descriptors, count, base, self.fed))
    }
}
