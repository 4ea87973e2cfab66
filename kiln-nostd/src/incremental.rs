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
//! use kiln_nostd::{Incremental, Progress};
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

use crate::bytes::{first_above_one, u64_from, usize_from, usize_from_u32, usize_sat};
use crate::descriptor::RawDescriptor;
use crate::directory::{check_prefix, Block, Descriptors, PrefixVerdict};
use crate::dtype::DType;
use crate::error::{fail_at, Error, Result, Rule};
use crate::header::{self, Header, Regions, HEADER_LEN, MAGIC};
use crate::limits::Limits;
use crate::views::Directory;

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
/// [`Parser::scratch`](crate::Parser::scratch); its own state is a few
/// words. A chunk costs time in proportion to the tensor boundaries it
/// crosses and the bool or gap bytes it holds, not to its length.
///
/// A prefix longer than that memory is refused with LIMIT
/// ([`Rule::PrefixBufferTooSmall`]) once the header is in; [`finish`](Self::finish)
/// still reports EOF instead when the stream ends inside the directory, as
/// [`Parser`](crate::Parser) would for those bytes.
///
/// [`feed`](Self::feed) returns an error at the first chunk after which the
/// block is certainly rejected. That error is the verdict for the complete
/// block; should the stream then end before the block does, the spec's
/// order makes the verdict EOF (a truncated block is checked first), which
/// [`finish`](Self::finish) reports. Feeding after an error only counts bytes.
pub struct Incremental<'m, 's> {
    prefix: &'m mut [u8],
    scratch: Option<&'s mut [u32]>,
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
    walk: Option<Walk>,
}

/// The header's sizes after steps 1 to 4.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    header: Header,
    heap_end: u64,
    /// (payload_base, block_len), or the step-6 overflow.
    ends: core::result::Result<(u64, u64), Error>,
}

/// The payload walk: which descriptor's gap or bytes come next.
#[derive(Clone, Copy, Debug)]
struct Walk {
    payload_base: u64,
    block_len: u64,
    /// Descriptors whose gaps are checked: all, or those before the first
    /// misplaced one.
    upto: usize,
    /// The next descriptor in stream order.
    next: usize,
    /// Its gap starts here (payload offset; the previous range's end).
    gap_from: u64,
    /// A step-10 fault of the descriptors, certain once the gaps before it passed.
    misplaced: Option<Error>,
    /// The first step-11 fault in descriptor order so far: (descriptor, error).
    values: Option<(usize, Error)>,
    /// `values` holds an element-byte fault (final: bytes stream in order),
    /// not the descriptors' quantization fault (which an element fault of a
    /// descriptor up to its own overrides).
    element_fault: bool,
}

impl<'m, 's> Incremental<'m, 's> {
    /// A validator for a standalone block (step 12 applies), default caps,
    /// keeping the directory prefix in `prefix`.
    pub fn new(prefix: &'m mut [u8]) -> Self {
        Incremental {
            prefix,
            scratch: None,
            limits: Limits::DEFAULT,
            seed: 0,
            standalone: true,
            fed: 0,
            sizes: None,
            fault: None,
            walk: None,
        }
    }

    /// Uses these caps.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Name scratch for the linear-time uniqueness check, as for
    /// [`Parser::scratch`](crate::Parser::scratch).
    pub fn scratch(mut self, scratch: &'s mut [u32]) -> Self {
        self.scratch = Some(scratch);
        self
    }

    /// Seeds the name hash, as [`Parser::hash_seed`](crate::Parser::hash_seed).
    pub fn hash_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The block is a `tensors` field: bytes after it belong to the next
    /// field, so [`feed`](Self::feed) stops consuming at the block's end
    /// (see [`consumed`](Self::consumed)) and step 12 does not apply.
    pub fn embedded(mut self) -> Self {
        self.standalone = false;
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

    /// Bytes taken so far (for an embedded block, at most the block length).
    pub fn consumed(&self) -> u64 {
        self.fed
    }

    /// The header, once the first 64 bytes are in and pass steps 1 to 4.
    pub fn header(&self) -> Option<&Header> {
        self.sizes.as_ref().map(|s| &s.header)
    }

    /// The tensor table (names, dtypes, shapes, offsets, quantization) once
    /// the directory prefix is in and valid, before any payload byte. Its
    /// tensors' [`bytes`](crate::Tensor::bytes) are empty: the payload
    /// is not kept.
    pub fn directory(&self) -> Option<Directory<'_>> {
        let walk = self.walk.as_ref()?;
        let sizes = self.sizes.as_ref()?;
        let regions = self.regions(sizes, walk.payload_base)?;
        let prefix = self.prefix.get(..regions.payload_base)?;
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
        self.take(Data::Bytes(chunk))
    }

    /// Most chunks of a large block are payload that no rule reads, short
    /// of the block's end: counting them is all there is to do, inline in
    /// the caller's loop.
    #[inline]
    fn count_only(&mut self, len: u64) -> bool {
        let (Some(walk), None) = (&self.walk, &self.fault) else { return false };
        let end = self.fed.saturating_add(len);
        let idle = walk.next >= walk.upto && walk.misplaced.is_none() && end < walk.block_len;
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
            (Some(walk), None) => walk.next_needed(&self.descriptors(&walk), self.fed),
            (None, None) => self.fed,
            (_, Some(_)) => u64::MAX,
        }
    }

    /// Passes over `n` bytes the verdict does not depend on, without their
    /// contents: at most up to [`next_needed`](Self::next_needed). Returns
    /// how many were passed over (fewer than `n` when a needed byte came first).
    pub fn skip(&mut self, n: u64) -> Result<u64> {
        let n = n.min(self.next_needed().saturating_sub(self.fed));
        let before = self.fed;
        self.take(Data::Skipped(n))?;
        Ok(self.fed.saturating_sub(before))
    }

    fn take(&mut self, data: Data<'_>) -> Result<Progress> {
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
        if let (Some(mut walk), None) = (self.walk, self.fault) {
            if self.fed >= block_len {
                self.fault = walk.verdict_at_end().err();
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
    fn step(&mut self, data: Data<'_>) -> u64 {
        match (self.sizes, self.walk, data) {
            (None, _, Data::Bytes(chunk)) => u64_from(self.take_header(chunk)),
            (Some(sizes), None, Data::Bytes(chunk)) => u64_from(self.take_prefix(sizes, chunk)),
            (Some(_), Some(walk), data) => self.take_payload(walk, data),
            (_, _, Data::Skipped(_)) => 0,
        }
    }

    /// Steps 1 to 4 as the first 64 bytes arrive.
    fn take_header(&mut self, chunk: &[u8]) -> usize {
        let used = self.copy_in(chunk, u64_from(HEADER_LEN));
        // The header's bytes are in prefix memory (fed < 64 here): never empty by fallback.
        let have = self.prefix.get(..usize_sat(self.fed).saturating_add(used)).unwrap_or(&[]);
        if have.len() >= MAGIC.len() && have.get(..MAGIC.len()) != Some(&MAGIC[..]) {
            self.fault = Some(Error::new(Rule::DirectoryMagic, 0));
        } else if have.len() == HEADER_LEN {
            match Header::parse(have).and_then(|h| Ok((h, h.check_sizes(&self.limits)?))) {
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

    /// The prefix must fit the caller's memory: known once the header is in.
    fn check_prefix_memory(&mut self, heap_end: u64, ends: core::result::Result<(u64, u64), Error>) {
        let need = ends.map_or(heap_end, |(base, _)| base);
        if need > u64_from(self.prefix.len()) {
            self.fault = Some(Error::new(Rule::PrefixBufferTooSmall, 0));
        }
    }

    /// Copies up to `end` (block offset) of the prefix into memory.
    fn copy_in(&mut self, chunk: &[u8], end: u64) -> usize {
        let at = usize_sat(self.fed);
        let want = usize_sat(end.saturating_sub(self.fed)).min(chunk.len());
        match (at.checked_add(want).and_then(|end| self.prefix.get_mut(at..end)), chunk.get(..want)) {
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

    /// Collects the prefix (see [`settle`](Self::settle) for its check).
    fn take_prefix(&mut self, sizes: Sizes, chunk: &[u8]) -> usize {
        let end = sizes.ends.map_or(sizes.heap_end, |(base, _)| base);
        self.copy_in(chunk, end)
    }

    fn check_whole_prefix(&mut self, sizes: Sizes, base: u64, block_len: u64) -> Result<()> {
        // Called once the prefix fits its memory (checked with the header): the fallbacks are never taken.
        let regions = self.regions(&sizes, base).unwrap_or(Regions { heap_end: 0, payload_base: 0, block_len: 0 });
        let prefix = self.prefix.get(..regions.payload_base).unwrap_or(&[]);
        header::check_padding(prefix, regions.heap_end, regions.payload_base)?; // step 7
        let b = Block::new(prefix, &sizes.header, regions, false);
        let count = b.descs.count;
        let (upto, misplaced, values, tight) = match check_prefix(&b, self.scratch.as_deref_mut(), self.seed) {
            PrefixVerdict::Clean(tight) => (count, None, None, tight),
            PrefixVerdict::Certain(e) => return Err(e),
            PrefixVerdict::Misplaced(i, e) => (i, Some(e), None, 0),
            PrefixVerdict::Quant(i, e) => (count, None, Some((i, e)), 0),
        };
        // The walk starts after the leading descriptors whose bytes decide nothing.
        // Ranges of accepted descriptors do not overflow: the fallback is never taken.
        let gap_from = tight.checked_sub(1).map_or(0, |last| b.descs.raw(last).range_end().unwrap_or(u64::MAX));
        let walk = Walk {
            payload_base: base,
            block_len,
            upto,
            next: tight,
            gap_from,
            misplaced,
            values,
            element_fault: false,
        };
        // A misplacement of the first descriptor has no gap before it.
        if let Some(e) = walk.certain_misplacement() {
            return Err(e);
        }
        self.walk = Some(walk);
        Ok(())
    }

    /// Streams payload bytes past the descriptors' gaps and element checks.
    fn take_payload(&mut self, mut walk: Walk, data: Data<'_>) -> u64 {
        let end = if self.standalone { u64::MAX } else { walk.block_len };
        let data = data.first(end.saturating_sub(self.fed));
        // Payload offsets of the data.
        let from = self.fed.saturating_sub(walk.payload_base);
        let to = from.saturating_add(data.len());
        let descs = self.descriptors(&walk);
        let result = walk.scan(&descs, data, from, to);
        let result = result.and_then(|()| {
            if self.standalone && to.saturating_add(walk.payload_base) > walk.block_len {
                // Step 12: every earlier step is settled once the block is whole.
                walk.verdict_at_end()?;
                return fail_at(Rule::TrailingBytes, walk.block_len);
            }
            if to.saturating_add(walk.payload_base) >= walk.block_len {
                walk.verdict_at_end()?;
            }
            Ok(())
        });
        self.walk = Some(walk);
        if let Err(e) = result {
            self.fault = Some(e);
        }
        data.len()
    }

    fn descriptors(&self, walk: &Walk) -> Descriptors<'_> {
        // The walk exists only once the prefix is in its memory: never empty by fallback.
        let prefix = self.prefix.get(..usize_sat(walk.payload_base)).unwrap_or(&[]);
        let count = self.sizes.map_or(0, |s| usize_from_u32(s.header.tensor_count));
        Descriptors::new(prefix, count)
    }

    /// The verdict once the stream has ended: the same as
    /// [`Parser::parse`](crate::Parser::parse) on all the bytes fed (or
    /// [`Parser::parse_at`](crate::Parser::parse_at) for an embedded block).
    pub fn finish(mut self) -> Result<Summary> {
        self.settle();
        let fed = self.fed;
        let Some(sizes) = self.sizes else {
            // Steps 1 and 2: a wrong magic is certain at 4 bytes; else too short.
            // No header yet: a wrong magic is the fault, else the block is too short.
            return Err(self.fault.unwrap_or(Error::at(Rule::HeaderTruncated, fed)));
        };
        if let Some(e) = self.fault.filter(|e| is_header_fault(e.rule())) {
            return Err(e); // steps 2 to 4
        }
        header::check_directory_fits(sizes.heap_end, fed)?; // step 5
        let (_, block_len) = sizes.ends?; // step 6
        header::check_block_fits(block_len, fed)?;
        if let Some(e) = self.fault {
            return Err(e);
        }
        match self.walk {
            Some(walk) => {
                // A block whose payload is empty never saw a payload chunk.
                let mut walk = walk;
                walk.verdict_at_end()?;
                Ok(Summary { header: sizes.header, block_len, payload_base: walk.payload_base })
            }
            // Cannot happen: the prefix is in (fed >= block_len) and faultless.
            None => fail_at(Rule::BlockTruncated, fed),
        }
    }
}

/// Faults found in the header alone (steps 1 to 4), which no truncation
/// later in the block can override.
fn is_header_fault(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::DirectoryMagic
            | Rule::DirectoryVersion
            | Rule::UnknownFlag
            | Rule::LittleEndianFlagClear
            | Rule::HeaderReserved
            | Rule::TensorCountCap
            | Rule::NameBytesCap
            | Rule::DirectorySizeOverflow
            | Rule::DirectoryBytesMismatch
    )
}

impl Walk {
    /// A misplacement is certain once every gap before its descriptor passed.
    fn certain_misplacement(&self) -> Option<Error> {
        self.misplaced.filter(|_| self.next >= self.upto)
    }

    /// The block offset of the next byte a check reads, at or after `fed`
    /// (see [`Incremental::next_needed`]). Walks a copy of the state.
    fn next_needed(mut self, descs: &Descriptors<'_>, fed: u64) -> u64 {
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
                let first = match d.dtype() {
                    Some(DType::Bool) => start,
                    _ => end.saturating_sub(1), // an odd packed tensor's last byte
                };
                return fed.max(abs(first));
            }
            self.gap_from = end;
            self.next = self.next.saturating_add(1);
        }
        u64::MAX
    }

    /// True when step 11 still reads this descriptor's bytes: while no
    /// step-10 fault and no earlier element fault is known, for bool and
    /// odd packed tensors, up to the descriptors' own step-11 fault.
    fn reads_elements(&self, d: &RawDescriptor) -> bool {
        if !has_byte_rules(d.dtype_code()) {
            return false; // most tensors: one compare
        }
        // Accepted shapes do not overflow: the fallback is never taken (here and below).
        let odd_packed =
            matches!(d.dtype(), Some(DType::I4 | DType::U4 | DType::E2M1)) && d.element_count().unwrap_or(0) % 2 == 1;
        let byte_rules = d.dtype() == Some(DType::Bool) || odd_packed;
        let open = self.misplaced.is_none() && !self.element_fault;
        open && byte_rules && d.byte_length() != 0 && self.values.is_none_or(|(i, _)| self.next <= i)
    }

    /// Checks the payload bytes `from..to` (payload offsets) held in `chunk`
    /// (or passed over: see [`Incremental::skip`], which passes over none that a check reads).
    fn scan(&mut self, descs: &Descriptors<'_>, chunk: Data<'_>, from: u64, to: u64) -> Result<()> {
        while self.next < self.upto {
            let d = descs.raw(self.next);
            // Accepted ranges do not overflow: the fallback is never taken.
            let (start, end) = (d.byte_offset(), d.range_end().unwrap_or(u64::MAX));
            // Most tensors need nothing: no gap before them, no byte rules.
            if self.gap_from == start && self.misplaced.is_none() && !self.reads_elements(d) {
                if to < end {
                    return Ok(());
                }
                self.gap_from = end;
                self.next = self.next.saturating_add(1);
                continue;
            }
            // The gap before this descriptor (step 10).
            let gap = self.gap_from < start;
            if let Some((bytes, at)) = window(chunk, from, to, self.gap_from, start).filter(|_| gap) {
                if let Some(k) = bytes.iter().position(|&b| b != 0) {
                    let abs = self.payload_base.saturating_add(at).saturating_add(u64_from(k));
                    return fail_at(Rule::NonzeroGap, abs);
                }
            }
            if to <= start {
                return Ok(()); // the chunk ends inside the gap
            }
            if self.next.saturating_add(1) >= self.upto {
                if let Some(e) = self.misplaced {
                    return Err(e); // every gap before the misplaced descriptor passed
                }
            }
            // Its element bytes (step 11), only while no step-10 fault is known.
            if self.reads_elements(d) {
                if let Some((bytes, at)) = window(chunk, from, to, start, end) {
                    self.check_elements(d, bytes, at, end);
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

    /// Step 11's byte checks on the part of tensor `self.next` at payload offset `at`.
    fn check_elements(&mut self, d: &RawDescriptor, bytes: &[u8], at: u64, end: u64) {
        let abs = |k: usize| self.payload_base.saturating_add(at).saturating_add(u64_from(k));
        let bad = match d.dtype() {
            Some(DType::Bool) => first_above_one(bytes).map(|k| (Rule::BoolByte, k)),
            Some(DType::I4 | DType::U4 | DType::E2M1) => {
                // Accepted shapes do not overflow: the fallback is never taken.
                let odd = d.element_count().unwrap_or(0) % 2 == 1;
                let last_here = at.saturating_add(u64_from(bytes.len())) == end;
                match bytes.last() {
                    Some(&b) if odd && last_here && b & 0xF0 != 0 => {
                        Some((Rule::PackedHighNibble, bytes.len().saturating_sub(1)))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some((rule, k)) = bad {
            self.values = Some((self.next, Error::at(rule, abs(k))));
            self.element_fault = true;
        }
    }

    /// Once the whole payload passed: a step-10 fault of the descriptors,
    /// then the first step-11 fault.
    fn verdict_at_end(&mut self) -> Result<()> {
        if let Some(e) = self.misplaced {
            return Err(e);
        }
        match self.values {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }
}

/// Dtype codes whose bytes step 11 reads: bool (7) and the packed nibbles
/// (16 to 18; only an odd count's last byte).
fn has_byte_rules(code: u16) -> bool {
    code == DType::Bool.code() || (DType::I4.code()..=DType::E2M1.code()).contains(&code)
}

/// Payload data handed to the walk: bytes, or a length passed over.
#[derive(Clone, Copy)]
enum Data<'c> {
    Bytes(&'c [u8]),
    Skipped(u64),
}

impl<'c> Data<'c> {
    fn len(&self) -> u64 {
        match self {
            Data::Bytes(b) => u64_from(b.len()),
            Data::Skipped(n) => *n,
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first `n` bytes (or all, when fewer).
    fn first(self, n: u64) -> Data<'c> {
        match self {
            // More than the chunk holds means all of it (the `unwrap_or` is never taken).
            Data::Bytes(b) => Data::Bytes(b.get(..usize_from(n).map_or(b.len(), |n| n.min(b.len()))).unwrap_or(b)),
            Data::Skipped(m) => Data::Skipped(m.min(n)),
        }
    }

    /// What follows the first `n` bytes.
    fn after(self, n: u64) -> Data<'c> {
        match self {
            // Past the chunk's end nothing follows.
            Data::Bytes(b) => Data::Bytes(usize_from(n).and_then(|n| b.get(n..)).unwrap_or(&[])),
            Data::Skipped(m) => Data::Skipped(m.saturating_sub(n)),
        }
    }
}

/// The part of `chunk` (payload offsets `from..to`) that lies in `lo..hi`,
/// with its payload offset; `None` when there is none, or it was passed over.
fn window<'c>(chunk: Data<'c>, from: u64, to: u64, lo: u64, hi: u64) -> Option<(&'c [u8], u64)> {
    let Data::Bytes(chunk) = chunk else { return None };
    let (a, b) = (lo.max(from), hi.min(to));
    if a >= b {
        return None;
    }
    let s = usize_from(a.saturating_sub(from))?;
    let e = usize_from(b.saturating_sub(from))?;
    Some((chunk.get(s..e)?, a))
}
