//! Checking a block that arrives in pieces: from a socket, a radio, a
//! `fetch` stream or storage that is not memory-mapped.
//!
//! [`Incremental`] takes the block in chunks of any size and keeps only the
//! directory prefix (header, descriptors, name heap, padding) in memory the
//! caller gives it. Payload bytes stream past and are never copied: the few
//! that decide the verdict (gap bytes, bool bytes, the last byte of an odd
//! packed tensor) are checked as they pass. At the end its verdict is the
//! one [`Parser`](crate::Parser) gives on the whole block: the same code,
//! offset and rule.
//!
//! ```
//! use kiln_nostd::{Incremental, incremental::Progress};
//! # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector.kiln"));
//! let mut prefix = [0u8; 1024];
//! let mut v = Incremental::new(&mut prefix);
//! for chunk in block.chunks(7) {
//!     if v.feed(chunk)? == Progress::Directory {
//!         // The tensor table is checked: shapes and names before any payload.
//!         assert_eq!(v.directory().map(|d| d.len()), Some(1));
//!     }
//! }
//! let summary = v.finish()?;
//! assert_eq!(summary.block_len, block.len() as u64);
//! # Ok::<(), kiln_nostd::Error>(())
//! ```

#[cfg(feature = "sha2")]
mod digests;
mod memory;
mod payload;
mod prefix;

#[cfg(feature = "alloc")]
pub use memory::Owned;
pub use memory::{Borrowed, Memory, Parts};

use crate::bytes::{u64_from, usize_from, usize_from_u32, usize_sat};
use crate::directory::Directory;
use crate::directory::Limits;
use crate::error::{fail_at, Error, Result, Rule};
use crate::names::NameWalk;
use crate::steps::{check_prefix_of, PrefixVerdict};
use crate::wire::descriptor::Descriptors;
use crate::wire::header::{self, Header, Regions, HEADER_LEN};
use payload::{Chunk, PayloadWalk, Pending};

/// How far an [`Incremental`] has got, after a chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Progress {
    /// The 64-byte header is not complete yet.
    Header,
    /// The header is checked ([`Incremental::header`]); the directory
    /// prefix is still arriving.
    Prefix,
    /// The directory prefix was completed by this chunk and is valid:
    /// [`Incremental::directory`] shows the tensor table. Reported once.
    Directory,
    /// Payload bytes are streaming past.
    Payload,
    /// The whole block is in and valid so far; [`Incremental::finish`] gives
    /// the verdict (a standalone block still refuses further bytes).
    Complete,
}

/// What [`Incremental::finish`] reports for an accepted block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Summary {
    /// The checked header.
    pub header: Header,
    /// Length of the block in bytes.
    pub block_len: u64,
    /// Where the payload region starts in the block (the prefix length).
    pub payload_base: u64,
}

/// An incremental, out-of-core validator for one tensor directory block.
///
/// Memory: the caller's prefix buffer (at least `payload_base` bytes: 64 +
/// 128 per tensor + the name heap, rounded up to 64; see
/// [`Incremental::prefix_len`]) and optional name scratch, as for
/// [`Parser::scratch`](crate::Parser::scratch); its own state is 200 bytes
/// on a 32-bit microcontroller (256 on a 64-bit host). With the `sha2`
/// feature it is 240 bytes (304), table or not: where step 9d's run stands
/// (`Incremental::digests`); the SHA-256 state, about 112 bytes more,
/// is the caller's.
/// A chunk costs time in proportion to the tensor boundaries it
/// crosses and the bool or gap bytes it holds, not to its length (with a
/// digest table, also to the run's bytes it holds: they are hashed).
///
/// A prefix longer than that memory is refused with LIMIT
/// ([`Rule::PrefixBufferTooSmall`]) once the header is in; [`finish`](Self::finish)
/// still reports EOF instead when the stream ends inside the directory, as
/// [`Parser`](crate::Parser) would for those bytes.
///
/// [`feed`](Self::feed) returns an error at the first chunk after which the
/// verdict for the complete block is certain: no byte still to come could
/// hold a fault the spec orders first. A nonzero gap byte, a wrong header
/// byte or padding byte is reported in the chunk that holds it; a bad bool
/// byte once no gap byte is left to come (a gap fault would win); a bad
/// descriptor once the prefix is in, or with no padding to come, once its
/// bytes are (on bare-metal targets, a name's fault then still waits for
/// the prefix's end: see the `prefix` module). Should the stream then end before
/// the block does, the spec's order makes the verdict EOF (a truncated
/// block is checked first), which [`finish`](Self::finish) reports. Feeding
/// after an error only counts bytes.
///
/// Its memory is `M` ([`Memory`]): the caller's buffers ([`Borrowed`], from
/// [`new`](Incremental::new)), or buffers it owns (`incremental::Owned`,
/// `alloc` feature, from [`with_memory`](Incremental::with_memory)).
pub struct Incremental<M> {
    limits: Limits,
    seed: u64,
    standalone: bool,
    /// Bytes of the block fed so far (past the block too, when standalone).
    fed: u64,
    /// Set once the header passed steps 1 to 4.
    sizes: Option<Sizes>,
    /// The first fault that is certain (unless the block is truncated).
    fault: Option<Error>,
    /// Set once the prefix is in and passed steps 7 to 9.
    walk: Option<PayloadWalk>,
    /// Step 8c on a prefix still arriving (a block with no padding).
    names: NameWalk,
    /// Step 9d, with a digest table ([`digests`](Self::digests)).
    #[cfg(feature = "sha2")]
    digests: Option<digests::Hashing>,
    mem: M,
}

/// The header's sizes after steps 1 to 4.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    header: Header,
    heap_end: u64,
    /// (payload_base, block_len), or the step-6 overflow.
    ends: core::result::Result<(u64, u64), Error>,
}

impl<'m, 's> Incremental<Borrowed<'m, 's>> {
    /// A validator for a standalone block (step 12 applies), default caps,
    /// keeping the directory prefix in `prefix`.
    #[must_use]
    pub fn new(prefix: &'m mut [u8]) -> Self {
        Incremental::with_memory(Borrowed {
            prefix,
            scratch: None,
            #[cfg(feature = "sha2")]
            digests: None,
        })
    }

    /// Name scratch for the linear-time uniqueness check, as for
    /// [`Parser::scratch`](crate::Parser::scratch).
    #[must_use]
    pub fn scratch(mut self, scratch: &'s mut [u32]) -> Self {
        self.mem.scratch = Some(scratch);
        self
    }

    /// Checks every tensor's payload against its SHA-256 digest (step 9d of
    /// `spec/model-file.md`; `sha2` feature), keeping the running SHA-256
    /// state in `hasher` (about 112 bytes of the caller's memory, like the
    /// prefix; what it holds on entry does not matter). `table` is the digest table's
    /// bytes: 32 per tensor, in descriptor order, which the caller has
    /// checked to be 32 x `tensor_count` (step 3d, at the table's length
    /// word: a model-file reader does that before the block starts). Should
    /// the header arrive with another tensor count, that is the caller's
    /// error: [`Rule::DigestTableCount`] at offset 0 of the block, as soon
    /// as the header passed steps 1 to 3.
    ///
    /// The tensors of the canonical run (descriptor order, while each
    /// `byte_offset` is the greedy one) are hashed as their bytes pass, so
    /// [`next_needed`](Self::next_needed) asks for every byte of them and
    /// none is skipped. The verdict is
    /// `kiln_model::check_block_digests`'s
    /// on the whole block (plus step 12 for a standalone one), and each
    /// fault still comes with the first chunk after which it is certain:
    /// - steps 1 to 9 as without a table;
    /// - [`Rule::PayloadDigest`] (DIGEST, at the tensor's first payload
    ///   byte) with the chunk that holds the mismatching tensor's last byte
    ///   (an empty tensor: once the tensor before it in the run is done, or
    ///   with the prefix's last byte when it is the first);
    /// - a fault of steps 10 to 12 (gap, bool or packed byte, quantization,
    ///   placement, `payload_bytes`, trailing bytes) once it is certain
    ///   without digests *and* every tensor of the run is hashed: until then
    ///   a DIGEST fault could still win.
    ///
    /// [`finish`](Self::finish) reports truncation (EOF) first, as always.
    ///
    /// ```
    /// use kiln_nostd::{digest::{sha256, TensorHasher}, Incremental, Parser, Rule};
    /// # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector.kiln"));
    /// let mut table = sha256(Parser::new().parse(&block)?.get(0).unwrap().bytes()); // one tensor
    /// let (mut prefix, mut hasher) = ([0u8; 1024], TensorHasher::new());
    /// let mut v = Incremental::new(&mut prefix).digests(&table, &mut hasher);
    /// for chunk in block.chunks(7) {
    ///     v.feed(chunk)?;
    /// }
    /// v.finish()?;
    ///
    /// table[0] ^= 1;
    /// let mut v = Incremental::new(&mut prefix).digests(&table, &mut hasher);
    /// let err = block.chunks(7).find_map(|c| v.feed(c).err()).unwrap();
    /// assert_eq!(err.rule(), Rule::PayloadDigest);
    /// # Ok::<(), kiln_nostd::Error>(())
    /// ```
    #[cfg(feature = "sha2")]
    #[must_use]
    pub fn digests(mut self, table: &'m [u8], hasher: &'m mut crate::digest::TensorHasher) -> Self {
        *hasher = crate::digest::TensorHasher::new();
        self.mem.digests = Some((table, hasher));
        self.digests = Some(digests::Hashing::new());
        self
    }

    /// The prefix memory a block needs, from its first 64 bytes: `Ok(None)`
    /// when fewer are given, an error for a header that fails steps 1 to 4.
    pub fn prefix_len(header: &[u8], limits: &Limits) -> Result<Option<usize>> {
        if header.len() < HEADER_LEN {
            return Ok(None);
        }
        let h = Header::parse(header)?;
        let heap_end = h.check_sizes(limits)?;
        let (base, _) = h.check_payload(heap_end)?;
        Ok(usize_from(base))
    }
}

impl<M: Memory> Incremental<M> {
    /// A validator for a standalone block (step 12 applies), default caps,
    /// working in `mem`. Payloads are checked against digests when `mem`
    /// holds a table (its SHA-256 state is reset), as with
    /// `Incremental::digests` (`sha2` feature).
    #[must_use]
    pub fn with_memory(mut mem: M) -> Self {
        #[cfg(feature = "sha2")]
        let digests = mem.parts().digests.map(|(_, hasher)| {
            *hasher = crate::digest::TensorHasher::new();
            digests::Hashing::new()
        });
        #[cfg(not(feature = "sha2"))]
        let _ = &mut mem;
        Incremental {
            mem,
            limits: Limits::DEFAULT,
            seed: 0,
            standalone: true,
            fed: 0,
            sizes: None,
            fault: None,
            walk: None,
            names: NameWalk::default(),
            #[cfg(feature = "sha2")]
            digests,
        }
    }

    /// The memory back, to reuse for another block (the validator's
    /// verdict is then lost: see [`finish_with_memory`](Self::finish_with_memory)).
    #[must_use]
    pub fn into_memory(self) -> M {
        self.mem
    }

    /// Uses these caps.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Seeds the name hash, as [`Parser::hash_seed`](crate::Parser::hash_seed).
    #[must_use]
    pub fn hash_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The block is a `tensors` field: bytes after it belong to the next
    /// field, so [`feed`](Self::feed) stops consuming at the block's end
    /// (see [`consumed`](Self::consumed)) and step 12 does not apply.
    #[must_use]
    pub fn embedded(mut self) -> Self {
        self.standalone = false;
        self
    }

    /// The memory the validator works in (to read what it holds).
    #[doc(hidden)] // the signed-update check's (kiln-model)
    pub fn memory(&self) -> &M {
        &self.mem
    }

    /// Bytes taken so far (for an embedded block, at most the block length).
    pub fn consumed(&self) -> u64 {
        self.fed
    }

    /// The header, once the first 64 bytes are in and pass steps 1 to 4.
    #[must_use]
    pub fn header(&self) -> Option<&Header> {
        self.sizes.as_ref().map(|s| &s.header)
    }

    /// The tensor table (names, dtypes, shapes, offsets, quantization) once
    /// the directory prefix is in and valid, before any payload byte. Its
    /// tensors' [`bytes`](crate::Tensor::bytes) are empty: the payload
    /// is not kept.
    #[must_use]
    pub fn directory(&self) -> Option<Directory<'_>> {
        let walk = self.walk.as_ref()?;
        let sizes = self.sizes.as_ref()?;
        let regions = self.regions(sizes, walk.payload_base)?;
        let prefix = self.mem.prefix().get(..regions.payload_base)?;
        Some(Directory::from_checked_prefix(prefix, sizes.header, regions))
    }

    fn regions(&self, sizes: &Sizes, payload_base: u64) -> Option<Regions> {
        let (_, block_len) = sizes.ends.ok()?;
        Some(Regions {
            heap_end: usize_from(sizes.heap_end)?,
            payload_base: usize_from(payload_base)?,
            block_len: usize_sat(block_len),
        })
    }

    /// Takes the next chunk. See the type's documentation for what an error means.
    #[inline]
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Progress> {
        if self.count_only(u64_from(chunk.len())) {
            return Ok(Progress::Payload);
        }
        self.take(Chunk::Bytes(chunk))
    }

    /// Most chunks of a large block are payload that no rule reads, short
    /// of the block's end: counting them is all there is to do, inline in
    /// the caller's loop.
    #[inline]
    fn count_only(&mut self, len: u64) -> bool {
        let (Some(walk), None) = (&self.walk, &self.fault) else { return false };
        let end = self.fed.saturating_add(len);
        let idle = walk.next >= walk.upto && walk.misplaced.is_none() && end < walk.block_len;
        #[cfg(feature = "sha2")]
        let idle = idle && self.hashed();
        if idle {
            self.fed = end;
        }
        idle
    }

    /// The block offset of the next byte the verdict depends on: the caller
    /// may [`skip`](Self::skip) the bytes before it instead of feeding them
    /// (payload bytes of tensors without byte rules). `u64::MAX` when no
    /// further byte matters, only how many there are.
    pub fn next_needed(&self) -> u64 {
        match (self.walk, self.fault) {
            #[cfg(feature = "sha2")]
            (Some(walk), None) if self.digests.is_some() => {
                let needed = walk.next_needed(&self.descriptors(&walk), self.fed);
                self.next_needed_hashing(needed, walk.payload_base)
            }
            (Some(walk), None) => walk.next_needed(&self.descriptors(&walk), self.fed),
            (None, None) => self.fed,
            (_, Some(_)) => u64::MAX,
        }
    }

    /// The plan of what [`next_needed`](Self::next_needed) will ask for:
    /// the runs of bytes (block offsets, `[start, end)`, in stream order,
    /// adjacent runs joined) that the verdict reads from here on, as the
    /// descriptors tell, up to those that end by `limit`, at most
    /// `out.len()` of them and at most `budget` bytes in all (the
    /// caller's buffer for them); returns how many. A caller that holds the bytes
    /// (a browser with the whole file) gathers them in one pass and then
    /// [`skip`](Self::skip)s to each run and [`feed`](Self::feed)s it,
    /// without a call per tensor to ask where the next needed byte is.
    /// `None` while the prefix is not in, after a rejection, and with a
    /// digest table (every byte of the canonical run is needed then).
    pub fn needed_runs(&self, limit: u64, budget: u64, out: &mut [[u64; 2]]) -> Option<usize> {
        #[cfg(feature = "sha2")]
        if self.digests.is_some() {
            return None;
        }
        match (self.walk, self.fault) {
            (Some(walk), None) => Some(walk.needed_runs(&self.descriptors(&walk), self.fed, (limit, budget), out)),
            _ => None,
        }
    }

    /// Takes a plan of [`needed_runs`](Self::needed_runs) in one call:
    /// `bytes` holds the runs' bytes one after another, and each run is
    /// passed over up to and taken, as [`skip`](Self::skip) and
    /// [`feed`](Self::feed) would, run by run (the same checks, faults and
    /// offsets), without the per-call work. Returns how many runs were
    /// taken: fewer when the next one would pass over a needed byte, does
    /// not follow the last, or `bytes` runs short (the caller goes on with
    /// `skip` and `feed` from [`consumed`](Self::consumed)); 0 outside the
    /// payload and with a digest table. A fault is returned as `feed` would.
    /// Runs that are exactly the plan made from this state, with every
    /// byte zero (gaps, the usual case), are confirmed and passed in one
    /// walk of the descriptors, not taken one by one.
    pub fn feed_runs(&mut self, runs: &[[u64; 2]], bytes: &[u8]) -> Result<usize> {
        if let Some(e) = self.fault {
            return Err(e);
        }
        #[cfg(feature = "sha2")]
        if self.digests.is_some() {
            return Ok(0);
        }
        let Some(mut walk) = self.walk else { return Ok(0) };
        let descs = self.descriptors(&walk);
        // Most plans hold only zero bytes (gaps): then one walk confirms the
        // runs and passes them, with no byte that could hold a fault.
        if let Some(&[_, end]) = runs.last() {
            if let Some(after) = walk.after_zero_plan(&descs, self.fed, runs, bytes) {
                self.fed = end;
                self.walk = Some(after);
                return Ok(runs.len());
            }
        }
        let (standalone, mut fed, mut at, mut taken) = (self.standalone, self.fed, 0usize, 0usize);
        let mut fault = None;
        for &[a, b] in runs {
            let fits = a >= fed && b > a && (standalone || b <= walk.block_len);
            let Some(end) = usize_from(b.saturating_sub(a)).and_then(|n| at.checked_add(n)) else { break };
            let (true, Some(chunk)) = (fits, bytes.get(at..end)) else { break };
            if walk.next_needed(&descs, fed) < a {
                break; // a byte before the run is needed
            }
            // Payload offsets: passed over from `fed` to `a`, then the run,
            // each as `skip` and `feed` take a chunk.
            let base = walk.payload_base;
            let (pf, pa, pb) = (fed.saturating_sub(base), a.saturating_sub(base), b.saturating_sub(base));
            let step = walk
                .take(&descs, Chunk::Skipped(a.saturating_sub(fed)), (pf, pa), standalone)
                .and_then(|()| walk.take(&descs, Chunk::Bytes(chunk), (pa, pb), standalone));
            (fed, at, taken) = (b, end, taken.saturating_add(1));
            if let Err(e) = step {
                fault = Some(e);
                break;
            }
        }
        self.fed = fed;
        self.walk = Some(walk);
        match fault {
            Some(e) => {
                self.fault = Some(e);
                Err(e)
            }
            None => Ok(taken),
        }
    }

    /// Passes over `n` bytes the verdict does not depend on, without their
    /// contents: at most up to [`next_needed`](Self::next_needed). Returns
    /// how many were passed over (fewer than `n` when a needed byte came first).
    pub fn skip(&mut self, n: u64) -> Result<u64> {
        let n = n.min(self.next_needed().saturating_sub(self.fed));
        let before = self.fed;
        self.take(Chunk::Skipped(n))?;
        Ok(self.fed.saturating_sub(before))
    }

    fn take(&mut self, data: Chunk<'_>) -> Result<Progress> {
        let mut data = data;
        if let Some(e) = self.fault {
            self.fed = self.fed.saturating_add(self.take_len(data.len()));
            return Err(e);
        }
        let in_prefix = self.walk.is_none();
        loop {
            self.settle();
            if data.is_empty() || self.fault.is_some() {
                break;
            }
            let used = self.step(data);
            self.fed = self.fed.saturating_add(used);
            data = data.after(used);
            if used == 0 {
                break; // an embedded block that is complete
            }
        }
        if let Some(e) = self.fault {
            self.fed = self.fed.saturating_add(self.take_len(data.len()));
            return Err(e);
        }
        Ok(self.progress(in_prefix))
    }

    /// Checks the prefix once it is all in (steps 6 to 11 as far as the
    /// descriptors decide them), and a block with no payload bytes once it ends.
    fn settle(&mut self) {
        let (Some(sizes), None, None) = (self.sizes, self.walk, self.fault) else { return };
        let Ok((base, block_len)) = sizes.ends else {
            // Steps 1 to 5 hold once the directory is in: the overflow is the verdict.
            if self.fed >= sizes.heap_end {
                self.fault = sizes.ends.err();
            }
            return;
        };
        if self.fed < base {
            return;
        }
        self.fault = self.check_whole_prefix(sizes, base, block_len).err();
        if let (Some(walk), None) = (self.walk, self.fault) {
            if self.fed >= block_len {
                let verdict = walk.verdict_at_end().err();
                #[cfg(feature = "sha2")]
                let verdict = self.gate(verdict);
                self.fault = verdict;
            }
        }
    }

    /// How much of `len` more bytes a validator that only counts takes.
    fn take_len(&self, len: u64) -> u64 {
        match (self.standalone, self.sizes.and_then(|s| s.ends.ok())) {
            (false, Some((_, block_len))) => block_len.saturating_sub(self.fed).min(len),
            _ => len,
        }
    }

    /// Where the stream stands; `was_prefix`: the prefix was incomplete
    /// before this chunk (so a complete one is announced exactly once).
    fn progress(&self, was_prefix: bool) -> Progress {
        match (&self.sizes, &self.walk) {
            (None, _) => Progress::Header,
            (Some(_), None) => Progress::Prefix,
            (Some(_), Some(_)) if was_prefix => Progress::Directory,
            (Some(_), Some(w)) if self.fed >= w.block_len => Progress::Complete,
            _ => Progress::Payload,
        }
    }

    /// Consumes a prefix of `data` in the current phase; returns its length.
    /// Only payload bytes are ever skipped ([`skip`](Self::skip) allows none before).
    fn step(&mut self, data: Chunk<'_>) -> u64 {
        match (self.sizes, self.walk, data) {
            (None, _, Chunk::Bytes(chunk)) => u64_from(self.take_header(chunk)),
            (Some(sizes), None, Chunk::Bytes(chunk)) => u64_from(self.take_prefix(sizes, chunk)),
            (Some(_), Some(walk), data) => self.take_payload(walk, data),
            (_, _, Chunk::Skipped(_)) => 0,
        }
    }

    /// Steps 1 to 4 as the first 64 bytes arrive; a wrong magic, version,
    /// flag or reserved byte at the byte that shows it.
    fn take_header(&mut self, chunk: &[u8]) -> usize {
        let used = self.copy_in(chunk, u64_from(HEADER_LEN));
        // The header's bytes are in prefix memory (fed < 64 here): never empty by fallback.
        let have = self.mem.prefix().get(..usize_sat(self.fed).saturating_add(used)).unwrap_or(&[]);
        if let Err(e) = header::check_start(have) {
            self.fault = Some(e);
        } else if have.len() == HEADER_LEN {
            let parsed = Header::parse(have);
            #[cfg(feature = "sha2")]
            if let Err(e) = self.check_table_early(parsed) {
                self.fault = Some(e);
                return used;
            }
            match parsed.and_then(|h| Ok((h, h.check_sizes(&self.limits)?))) {
                Ok((header, heap_end)) => {
                    let ends = header.check_payload(heap_end);
                    self.sizes = Some(Sizes { header, heap_end, ends });
                    self.check_prefix_memory(heap_end, ends);
                }
                Err(e) => self.fault = Some(e),
            }
        }
        used
    }

    /// Step 3d on a complete header: after steps 1 to 3, before step 4.
    #[cfg(feature = "sha2")]
    fn check_table_early(&mut self, header: Result<Header>) -> Result<()> {
        let Ok(h) = header else { return Ok(()) };
        let caps = h.tensor_count <= self.limits.count_cap && h.name_bytes <= self.limits.byte_cap;
        if caps {
            self.check_table(h.tensor_count)
        } else {
            Ok(()) // step 3 reports it
        }
    }

    /// The prefix must fit the caller's memory: known once the header is in.
    fn check_prefix_memory(&mut self, heap_end: u64, ends: core::result::Result<(u64, u64), Error>) {
        let need = ends.map_or(heap_end, |(base, _)| base);
        if need > u64_from(self.mem.prefix().len()) {
            self.fault = Some(Error::new(Rule::PrefixBufferTooSmall, 0));
        }
    }

    /// Copies up to `end` (block offset) of the prefix into memory.
    // Not inlined: the flash of a copy in every phase of `take` (Cortex-M3: 88 B).
    #[inline(never)]
    fn copy_in(&mut self, chunk: &[u8], end: u64) -> usize {
        let at = usize_sat(self.fed);
        let want = usize_sat(end.saturating_sub(self.fed)).min(chunk.len());
        match (at.checked_add(want).and_then(|end| self.mem.parts().prefix.get_mut(at..end)), chunk.get(..want)) {
            (Some(dst), Some(src)) => {
                dst.copy_from_slice(src);
                want
            }
            // Cannot happen: the prefix was checked to fit the memory.
            _ => {
                self.fault = Some(Error::new(Rule::PrefixBufferTooSmall, at));
                0
            }
        }
    }

    /// Collects the prefix (see [`settle`](Self::settle) for its check once
    /// it is in), judging what a chunk that ends inside it already decides.
    fn take_prefix(&mut self, sizes: Sizes, chunk: &[u8]) -> usize {
        let end = sizes.ends.map_or(sizes.heap_end, |(base, _)| base);
        let from = self.fed;
        let used = self.copy_in(chunk, end);
        let to = from.saturating_add(u64_from(used));
        if let (Ok((base, _)), None, true) = (sizes.ends, self.fault, to < end) {
            self.fault = self.check_arrived(&sizes, base, from, to).err();
        }
        used
    }

    fn check_whole_prefix(&mut self, sizes: Sizes, base: u64, block_len: u64) -> Result<()> {
        // Called once the prefix fits its memory (checked with the header): the fallbacks are never taken.
        let regions = self.regions(&sizes, base).unwrap_or(Regions { heap_end: 0, payload_base: 0, block_len: 0 });
        let parts = self.mem.parts();
        let prefix = parts.prefix.get(..regions.payload_base).unwrap_or(&[]);
        let (b, verdict) = check_prefix_of(prefix, &sizes.header, regions, parts.scratch, self.seed)?;
        let count = b.descs.count;
        let open = match verdict {
            PrefixVerdict::Clean(clean_lead) => Pending { upto: count, clean_lead, misplaced: None, quant: None },
            PrefixVerdict::Certain(e) => return Err(e),
            PrefixVerdict::Misplaced(i, e) => Pending { upto: i, clean_lead: 0, misplaced: Some(e), quant: None },
            PrefixVerdict::Quant(i, e) => Pending { upto: count, clean_lead: 0, misplaced: None, quant: Some((i, e)) },
        };
        let walk = PayloadWalk::new(&b.descs, base, block_len, open);
        #[cfg(feature = "sha2")]
        if self.digests.is_some() {
            // Empty tensors at the run's start are judged now; a fault of
            // steps 10 to 11 that no payload byte can precede waits for the run.
            self.walk = Some(walk);
            self.hash_payload(base, Chunk::Bytes(&[]), 0, 0)?;
            return match self.gate(walk.certain(0)) {
                Some(e) => Err(e),
                None => Ok(()),
            };
        }
        // A fault that no payload byte can precede is certain now.
        if let Some(e) = walk.certain(0) {
            return Err(e);
        }
        self.walk = Some(walk);
        Ok(())
    }

    /// Streams payload bytes past the descriptors' gaps and element checks.
    fn take_payload(&mut self, mut walk: PayloadWalk, data: Chunk<'_>) -> u64 {
        #[cfg(feature = "sha2")]
        if self.digests.is_some() {
            return self.take_payload_hashing(walk, data);
        }
        let end = if self.standalone { u64::MAX } else { walk.block_len };
        let data = data.first(end.saturating_sub(self.fed));
        // Payload offsets of the data.
        let from = self.fed.saturating_sub(walk.payload_base);
        let to = from.saturating_add(data.len());
        let descs = self.descriptors(&walk);
        let result = walk.take(&descs, data, (from, to), self.standalone);
        self.walk = Some(walk);
        if let Err(e) = result {
            self.fault = Some(e);
        }
        data.len()
    }

    fn descriptors(&self, walk: &PayloadWalk) -> Descriptors<'_> {
        // The walk exists only once the prefix is in its memory: never empty by fallback.
        let prefix = self.mem.prefix().get(..usize_sat(walk.payload_base)).unwrap_or(&[]);
        let count = self.sizes.map_or(0, |s| usize_from_u32(s.header.tensor_count));
        Descriptors::new(prefix, count)
    }

    /// The verdict once the stream has ended: the same as
    /// [`Parser::parse`](crate::Parser::parse) on all the bytes fed (or
    /// [`Parser::parse_at`](crate::Parser::parse_at) for an embedded block).
    pub fn finish(mut self) -> Result<Summary> {
        self.verdict()
    }

    /// [`finish`](Self::finish), and the memory back to reuse.
    pub fn finish_with_memory(mut self) -> (Result<Summary>, M) {
        let verdict = self.verdict();
        (verdict, self.mem)
    }

    fn verdict(&mut self) -> Result<Summary> {
        self.settle();
        let fed = self.fed;
        let Some(sizes) = self.sizes else {
            return Err(match (self.fault, self.mem.prefix().get(..usize_sat(fed))) {
                (Some(e), _) if e.rule() == Rule::PrefixBufferTooSmall => e,
                // Fewer than 64 bytes, all in prefix memory: Parser's verdict on
                // them (too short, or a wrong magic once 4 bytes are in).
                (_, Some(have)) if fed < u64_from(HEADER_LEN) => {
                    Header::parse(have).err().unwrap_or(Error::at(Rule::HeaderTruncated, fed))
                }
                // A header fault (steps 2 to 4) stands whatever follows.
                (fault, _) => fault.unwrap_or(Error::at(Rule::HeaderTruncated, fed)),
            });
        };
        // `sizes` is set only once the header passed steps 1 to 4, so every
        // fault held now is of a later step: steps 5 and 6 of the bytes fed
        // come first.
        header::check_directory_fits(sizes.heap_end, fed)?; // step 5
        let (_, block_len) = sizes.ends?; // step 6
        header::check_block_fits(block_len, fed)?;
        if let Some(e) = self.fault {
            return Err(e);
        }
        match self.walk {
            #[cfg(feature = "sha2")]
            Some(walk) if self.digests.is_some() => {
                // The block is whole, so the run is hashed: this judges nothing
                // new (were a byte of the run missing, its tensor would not match).
                let end = sizes.header.payload_bytes;
                self.hash_payload(walk.payload_base, Chunk::Skipped(0), end, end)?;
                match self.gate(walk.verdict_at_end().err()) {
                    Some(e) => Err(e),
                    None => Ok(Summary { header: sizes.header, block_len, payload_base: walk.payload_base }),
                }
            }
            Some(walk) => {
                // A block whose payload is empty never saw a payload chunk.
                walk.verdict_at_end()?;
                Ok(Summary { header: sizes.header, block_len, payload_base: walk.payload_base })
            }
            // Cannot happen: the prefix is in (fed >= block_len) and faultless.
            None => fail_at(Rule::BlockTruncated, fed),
        }
    }
}
