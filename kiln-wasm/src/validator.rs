//! A tensor directory checked in pieces: `kiln_nostd::Incremental` with its
//! prefix memory and name scratch owned here, so JavaScript can hold one
//! across calls (and across `await`s: a stream, HTTP range requests).
//!
//! The memory is sized from the header ([`need`]): the directory prefix
//! (header, descriptors, name heap, padding), never the file. The payload
//! goes past without being stored: JavaScript asks
//! [`Session::next_needed`], copies in only the bytes a rule reads (gap
//! bytes, bool tensors, the last byte of an odd packed tensor) and passes
//! over the rest with [`Session::skip`]. [`Session::feed_zeros`] stands in
//! for bytes that are needed but not at hand (a remote file's payloads that
//! were never fetched). The verdict is the core's: `Incremental::finish`
//! equals `Parser::parse` on all the bytes fed, code, offset and rule.
//!
//! The validator works in memory it owns (`incremental::Owned`), so a
//! session holds it with no borrow and no unsafe code.

use kiln_nostd::digest::TensorHasher;
use kiln_nostd::incremental::Owned;
use kiln_nostd::wire::header::HEADER_LEN;
use kiln_nostd::wire::layout::{self, ALIGN};
use kiln_nostd::{directory::scratch_len, incremental::Progress, wire::Header, Error, Incremental, Limits, Rule};

use crate::conv::{u64_of, usize_sat};
use crate::{table, ErrorInfo};

/// What the header says about the memory a block needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    /// Bytes of prefix memory the validator needs: the directory prefix, or
    /// 64 when the header fails steps 1 to 4 (the verdict needs no more), or
    /// the heap end when payload_base + payload_bytes overflows. `None` while
    /// fewer than 64 bytes are known.
    pub prefix: Option<u64>,
    /// The block length the header declares, when it passes steps 1 to 4 and 6.
    pub block_len: Option<u64>,
    /// Where the payload region starts, likewise.
    pub payload_base: Option<u64>,
    /// tensor_count, when the header passes steps 1 and 2 (sizes the name scratch).
    pub count: u32,
}

/// Sizes the validator from the first bytes of a block (`head`, at most 64 used).
pub fn need(head: &[u8], limits: &Limits) -> Need {
    let none = Need { prefix: None, block_len: None, payload_base: None, count: 0 };
    let Some(head) = head.get(..HEADER_LEN) else { return none };
    let header_only = Need { prefix: Some(u64_of(HEADER_LEN)), ..none };
    let Ok(h) = Header::parse(head) else { return header_only };
    let count = h.tensor_count;
    let heap_end = layout::heap_end(h.tensor_count, h.name_bytes);
    match Incremental::prefix_len(head, limits) {
        // Steps 1 to 4 and 6 pass (prefix_len is None only where it exceeds
        // usize: the header's own arithmetic then says how much).
        Ok(_) => {
            let base = layout::payload_base(h.tensor_count, h.name_bytes);
            Need {
                prefix: base,
                block_len: base.and_then(|b| b.checked_add(h.payload_bytes)),
                payload_base: base,
                count,
            }
        }
        // Step 6 overflows: the verdict waits for the directory (step 5 first).
        Err(e) if e.rule() == Rule::PayloadSizeOverflow => Need { prefix: Some(heap_end), count, ..none },
        Err(_) => Need { count, ..header_only },
    }
}

/// Zeros fed for needed bytes that are not at hand.
static ZEROS: [u8; 16384] = [0; 16384];

/// One directory block being checked.
pub struct Session {
    /// The validator, in memory it owns; `None` after `finish` or when the
    /// memory could not be had.
    inner: Option<Incremental<Owned>>,
    /// The memory, while there is no validator (kept to be reused).
    spare: Owned,
    /// The caps and seed `inner` was made with (it is made again when a
    /// digest table is added to its memory).
    limits: Limits,
    seed: u64,
    table: Vec<u32>,
    table_built: bool,
    error: Option<ErrorInfo>,
    /// Bytes taken when `inner` went away.
    fed_at_end: u64,
    /// Absolute offset of the block in the file (after a model file's
    /// metadata; 0 for a plain directory): added to error offsets and table
    /// offsets. Everything else is in block offsets.
    start: u64,
}

fn boxed<T: Copy + Default>(len: usize) -> Option<Box<[T]>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).ok()?;
    v.resize(len, T::default());
    Some(v.into_boxed_slice())
}

impl Session {
    /// A validator with `mem` bytes of prefix memory (see [`need`]) and name
    /// scratch for `count` tensors when the memory holds their descriptors.
    /// When wasm memory cannot hold that, every call reports LIMIT `WasmMemory`.
    /// The block starts at byte 0 of the file; see [`place_at`](Self::place_at).
    pub fn new(mem: u64, count: u32, limits: Limits, seed: u64) -> Session {
        let mut s = Session {
            inner: None,
            spare: Owned::default(),
            limits,
            seed,
            table: Vec::new(),
            table_built: false,
            error: None,
            fed_at_end: 0,
            start: 0,
        };
        s.reset(mem, count, limits, seed);
        s
    }

    /// Places the block at absolute offset `start` of the file (a model
    /// file's block follows the frame and the metadata): error offsets and
    /// the table's offsets are then absolute in the file. A standalone block
    /// checked at `start` gives `Parser::parse_at(file, start)`'s verdict,
    /// then TRAILING at its end when the file goes on: a model file's checks.
    /// Lasts until the next [`reset`](Self::reset).
    pub fn place_at(&mut self, start: u64) {
        self.start = start;
        if let Some(e) = self.error.as_mut() {
            e.offset = e.offset.saturating_add(start);
        }
    }

    /// The memory, from the validator or the spare.
    fn memory(&mut self) -> Owned {
        match self.inner.take() {
            Some(v) => v.into_memory(),
            None => core::mem::take(&mut self.spare),
        }
    }

    /// Starts over on a new block, as [`new`](Self::new) would, reusing the
    /// memory already held when it is large enough.
    pub fn reset(&mut self, mem: u64, count: u32, limits: Limits, seed: u64) {
        let mut m = self.memory();
        m.digests = None;
        (self.limits, self.seed) = (limits, seed);
        self.table.clear();
        self.table_built = false;
        self.error = None;
        self.fed_at_end = 0;
        self.start = 0;
        let memory = ErrorInfo {
            code: "LIMIT",
            offset: 0,
            rule: "WasmMemory",
            description: "wasm memory cannot hold the directory (header, descriptors and names)",
        };
        let Ok(mem) = usize::try_from(mem) else {
            self.spare = m;
            self.error = Some(memory);
            return;
        };
        if m.prefix.len() < mem {
            m.prefix = boxed::<u8>(mem).unwrap_or_default();
        }
        let want = if count > 0 && layout::descriptors_end(count) <= u64_of(mem) { scratch_len(count) } else { 0 };
        if want > 0 && m.scratch.as_ref().is_none_or(|s| s.len() < want) {
            m.scratch = boxed::<u32>(want);
        }
        if m.prefix.len() < mem || (want > 0 && m.scratch.is_none()) {
            self.spare = m;
            self.error = Some(memory);
            return;
        }
        self.inner = Some(Incremental::with_memory(m).limits(limits).hash_seed(seed));
    }

    /// Checks the payload against `table` too (step 9d: the core's
    /// `Incremental::digests`, the table of a digests or shard record, one
    /// SHA-256 per tensor): from then on every payload byte of the canonical
    /// run is needed ([`next_needed`](Self::next_needed)). Call before the
    /// first byte is fed, once per block; false otherwise (or when wasm
    /// memory cannot hold the copy).
    pub fn digests(&mut self, table: &[u8]) -> bool {
        let hashing = self.inner.as_ref().is_some_and(Incremental::hashing);
        if hashing || self.inner.is_none() || self.fed() > 0 {
            return false;
        }
        let Some(mut copy) = boxed::<u8>(table.len()) else { return false };
        copy.copy_from_slice(table);
        let mut m = self.memory();
        m.digests = Some((copy, Box::new(TensorHasher::new())));
        self.inner = Some(Incremental::with_memory(m).limits(self.limits).hash_seed(self.seed));
        true
    }

    fn record(&mut self, e: Error) -> ErrorInfo {
        let info = self.located(ErrorInfo::from(e));
        self.error = Some(info);
        info
    }

    /// A core error's block offset made absolute in the file.
    fn located(&self, mut info: ErrorInfo) -> ErrorInfo {
        info.offset = info.offset.saturating_add(self.start);
        info
    }

    fn gone(&self) -> ErrorInfo {
        self.error.unwrap_or(ErrorInfo {
            code: "LIMIT",
            offset: 0,
            rule: "ValidatorFinished",
            description: "the validator has already given its verdict",
        })
    }

    /// Takes the next bytes of the block.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Progress, ErrorInfo> {
        let Some(v) = self.inner.as_mut() else { return Err(self.gone()) };
        match v.feed(bytes) {
            Ok(p) => Ok(p),
            Err(e) => Err(self.record(e)),
        }
    }

    /// Takes `n` zero bytes: stands in for bytes that are needed but unknown.
    pub fn feed_zeros(&mut self, n: u64) -> Result<Progress, ErrorInfo> {
        let mut left = n;
        let mut p = Progress::Header;
        while left > 0 {
            let zeros = ZEROS.get(..usize_sat(left)).unwrap_or(&ZEROS);
            p = self.feed(zeros)?;
            left = left.saturating_sub(u64_of(zeros.len()));
        }
        Ok(p)
    }

    /// Passes over `n` bytes the verdict does not depend on (at most up to
    /// [`next_needed`](Self::next_needed)); returns how many. After a
    /// rejection it only counts bytes (and reports the rejection).
    pub fn skip(&mut self, n: u64) -> Result<u64, ErrorInfo> {
        let Some(v) = self.inner.as_mut() else { return Err(self.gone()) };
        match v.skip(n) {
            Ok(k) => Ok(k),
            Err(e) => Err(self.record(e)),
        }
    }

    /// The runs of bytes the verdict reads next (block offsets `[start,
    /// end)`, see `Incremental::needed_runs`): those that end by `limit`, at
    /// most `runs.len()` and `budget` bytes in all; returns how many (0
    /// when there is no plan: the caller asks [`next_needed`](Self::next_needed)).
    pub fn plan(&self, limit: u64, budget: u64, runs: &mut [[u64; 2]]) -> usize {
        self.inner.as_ref().and_then(|v| v.needed_runs(limit, budget, runs)).unwrap_or(0)
    }

    /// Takes the planned `runs`, their bytes one after another in `bytes`
    /// (`Incremental::feed_runs`). Returns how many runs were taken (fewer:
    /// the caller goes on byte by byte from where the validator stands).
    pub fn feed_runs(&mut self, runs: &[[u64; 2]], bytes: &[u8]) -> Result<usize, ErrorInfo> {
        let Some(v) = self.inner.as_mut() else { return Err(self.gone()) };
        match v.feed_runs(runs, bytes) {
            Ok(k) => Ok(k),
            Err(e) => Err(self.record(e)),
        }
    }

    /// Advances to block offset `to` with none of the bytes at hand: passes
    /// over what no rule reads and feeds zeros for what one does (up to the
    /// next [`ALIGN`] boundary first, where a gap ends, then in growing pieces).
    pub fn pass_unknown(&mut self, to: u64) -> Result<(), ErrorInfo> {
        let mut run = 0u64;
        loop {
            let fed = self.fed();
            if fed >= to {
                return Ok(());
            }
            // (`fed < to` from here on.)
            if self.skip(to.saturating_sub(fed))? > 0 {
                run = 0;
                continue;
            }
            let piece = if run == 0 {
                ALIGN.saturating_sub(fed % ALIGN)
            } else {
                run.saturating_mul(2).min(u64_of(ZEROS.len()))
            };
            let n = piece.min(to.saturating_sub(fed));
            self.feed_zeros(n)?;
            run = n;
        }
    }

    /// The block offset of the next byte a rule reads (`u64::MAX`: none).
    pub fn next_needed(&self) -> u64 {
        self.inner.as_ref().map_or(u64::MAX, |v| v.next_needed())
    }

    /// Bytes taken so far.
    pub fn fed(&self) -> u64 {
        self.inner.as_ref().map_or(self.fed_at_end, |v| v.consumed())
    }

    /// The tensor table, once the directory prefix is in and valid.
    pub fn table(&mut self) -> Option<&[u32]> {
        if !self.table_built {
            let dir = self.inner.as_ref()?.directory()?;
            table::build(&dir, self.start, &mut self.table);
            self.table_built = true;
        }
        Some(&self.table)
    }

    /// Where the table's `u32`s are (valid until the next call).
    pub fn table_ptr(&self) -> *const u32 {
        self.table.as_ptr()
    }

    /// The verdict on all the bytes fed: the table, or the core's error.
    pub fn finish(&mut self) -> Result<&[u32], ErrorInfo> {
        self.table();
        let fed = self.fed();
        let Some(v) = self.inner.take() else { return Err(self.gone()) };
        self.fed_at_end = fed;
        let (verdict, m) = v.finish_with_memory();
        self.spare = m;
        match verdict {
            Ok(_) if self.table_built => Ok(&self.table),
            Ok(_) => Err(self.gone()),
            Err(e) => {
                let info = self.located(ErrorInfo::from(e));
                self.error = Some(info);
                Err(info)
            }
        }
    }

    /// The last error.
    pub fn error(&self) -> Option<ErrorInfo> {
        self.error
    }
}
