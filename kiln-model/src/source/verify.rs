//! [`verify`](super::verify): the incremental validator, fed from a source
//! through one chunk buffer, skipping what it does not need.

use super::{AsyncReadAt, Options, ReadAt, SourceError};
use crate::bytes::{u64_from, usize_from};
use crate::dtype::{DType, Width};
use crate::header::{Header, HEADER_LEN};
use crate::incremental::{Borrowed, Incremental, Summary};
use crate::layout;
use kiln_nostd::Directory;
use kiln_nostd::Rule as CoreRule;

/// [`verify`](super::verify) over the source trait `$Source`, each source
/// call wrapped in `$io!` (`ready!` or `wait!`), `async` if given: one body,
/// compiled into `blocking` and `nonblocking`.
macro_rules! verify_fns {
    ($Source:ident, $io:ident $(, $async:tt)?) => {
        pub(in crate::source) $($async)? fn run<S: $Source>(
            options: Options<'_>,
            mut source: S,
            prefix: &mut [u8],
            chunk: &mut [u8],
        ) -> Result<Summary, SourceError<S::Error>> {
            #[cfg(feature = "sha2")]
            let table = options.digests;
            let Options { parser, embedded, coalesce, .. } = options;
            let (limits, scratch, seed) = parser.into_parts();
            if chunk.is_empty() {
                return Err(SourceError::BufferTooSmall { needed: 1 });
            }
            if prefix.len() < HEADER_LEN {
                return Err(SourceError::BufferTooSmall { needed: u64_from(HEADER_LEN) });
            }
            let len = $io!(source.len()).map_err(SourceError::Read)?;
            let mut v = Incremental::new(prefix).limits(limits).hash_seed(seed);
            if let Some(s) = scratch {
                v = v.scratch(s);
            }
            if embedded {
                v = v.embedded();
            }
            // Step 9d's SHA-256 state: on this stack (about 112 bytes).
            #[cfg(feature = "sha2")]
            let mut hasher = crate::digest::TensorHasher::new();
            #[cfg(feature = "sha2")]
            if let Some(t) = table {
                v = v.digests(t, &mut hasher);
            }
            $io!(drive(&mut v, &mut source, chunk, len, coalesce)).map_err(SourceError::Read)?;
            match v.finish() {
                Ok(summary) => Ok(summary),
                Err(e) if e.rule() == CoreRule::PrefixBufferTooSmall => {
                    // The header passed steps 1 to 4 (the prefix size comes from it).
                    let mut head = [0u8; HEADER_LEN];
                    $io!(source.read_at(0, &mut head)).map_err(SourceError::Read)?;
                    let heap_end = Header::parse(&head).map_or(0, |h| layout::heap_end(h.tensor_count, h.name_bytes));
                    // Fallback: an unaligned heap end can only overflow near u64::MAX: report it as is.
                    Err(SourceError::BufferTooSmall { needed: layout::align(heap_end).unwrap_or(heap_end) })
                }
                Err(e) => Err(SourceError::Kiln(e.into())),
            }
        }

        /// Feeds `v` the source's bytes up to `len` (or the end of an embedded
        /// block), skipping what it does not need; the verdict is left in `v`.
        $($async)? fn drive<S: $Source>(
            v: &mut Incremental<Borrowed<'_, '_>>,
            source: &mut S,
            chunk: &mut [u8],
            len: u64,
            coalesce: u64,
        ) -> Result<(), S::Error> {
            let mut plan = Needed::default();
            #[cfg(feature = "sha2")]
            {
                plan.hashing = v.hashing();
            }
            loop {
                let pos = v.consumed();
                if pos >= len {
                    return Ok(());
                }
                let need = v.next_needed();
                if need > pos {
                    match v.skip(need.min(len).saturating_sub(pos)) {
                        Ok(0) => return Ok(()), // an embedded block that is complete
                        Ok(_) => continue,
                        Err(_) => {
                            conclude(v, len);
                            return Ok(());
                        }
                    }
                }
                let end = plan.read_end(v, pos, len, u64_from(chunk.len()), coalesce);
                // Fallback not taken: end - pos is at most the chunk length, a usize.
                let n = usize_from(end.saturating_sub(pos)).unwrap_or(chunk.len()).clamp(1, chunk.len());
                let Some(buf) = chunk.get_mut(..n) else { return Ok(()) };
                $io!(source.read_at(pos, buf))?;
                match v.feed(buf) {
                    Ok(_) if v.consumed() == pos => return Ok(()), // an embedded block that is complete
                    Ok(_) => {}
                    Err(_) => {
                        conclude(v, len);
                        return Ok(());
                    }
                }
            }
        }
    };
}

/// Over [`ReadAt`].
pub(super) mod blocking {
    use super::*;
    verify_fns!(ReadAt, ready);
}

/// Over [`AsyncReadAt`].
pub(super) mod nonblocking {
    use super::*;
    verify_fns!(AsyncReadAt, wait, async);
}

/// After a fault: the verdict is certain unless the source ends before the
/// block does, which the length alone decides. Nothing more is read.
fn conclude(v: &mut Incremental<Borrowed<'_, '_>>, len: u64) {
    let _ = v.skip(len.saturating_sub(v.consumed()));
}

/// The payload bytes a rule reads, as regions in descriptor order (which is
/// payload order in any block that can be accepted). Only a hint for how
/// much to read at once: [`Incremental::next_needed`] decides what is read,
/// and feeding more or fewer bytes never changes the verdict.
#[derive(Clone, Copy, Default)]
struct Needed {
    /// The next descriptor to turn into regions.
    next: usize,
    /// The end of the ranges so far (where the next gap starts).
    prev_end: u64,
    /// Regions made and not yet passed, in order: a gap, then a tensor's own bytes.
    queue: [Option<(u64, u64)>; 2],
    /// Step 9d reads every byte of the canonical run: read it in whole chunks.
    #[cfg(feature = "sha2")]
    hashing: bool,
    /// With `hashing`: the payload offset where the run ends, once known.
    #[cfg(feature = "sha2")]
    run_end: Option<u64>,
}

impl Needed {
    /// The source offset a read from `pos` should end at.
    fn read_end(&mut self, v: &Incremental<Borrowed<'_, '_>>, pos: u64, len: u64, chunk: u64, coalesce: u64) -> u64 {
        let limit = pos.saturating_add(chunk).min(len);
        let end = match (v.directory(), v.header()) {
            (Some(dir), _) => {
                let base = u64_from(dir.payload_start());
                let q = pos.saturating_sub(base);
                #[cfg(feature = "sha2")]
                let whole = self.hashing && q < self.run_end(&dir);
                #[cfg(not(feature = "sha2"))]
                let whole = false;
                let end = if whole {
                    limit
                } else {
                    self.payload_end(&dir, q, chunk, coalesce).map_or(limit, |e| base.saturating_add(e))
                };
                // Never past the block (an embedded block's source goes on).
                end.min(base.saturating_add(dir.header().payload_bytes))
            }
            // The prefix: up to the payload base.
            (None, Some(h)) => layout::payload_base(h.tensor_count, h.name_bytes).unwrap_or(limit),
            (None, None) => u64_from(HEADER_LEN),
        };
        if end > pos {
            end.min(limit)
        } else {
            limit
        }
    }

    /// Where the canonical run ends (payload offset): the end of the last
    /// tensor, in descriptor order, whose offset is the greedy one.
    #[cfg(feature = "sha2")]
    fn run_end(&mut self, dir: &Directory<'_>) -> u64 {
        *self.run_end.get_or_insert_with(|| {
            let mut running = 0u64;
            for t in dir.iter() {
                if Some(t.byte_offset()) != layout::align(running) {
                    break;
                }
                running = t.byte_offset().saturating_add(t.descriptor().byte_length);
            }
            running
        })
    }

    /// The payload offset where a read from payload offset `q` ends: the
    /// region holding `q`, merged with the regions after it while the holes
    /// between are at most `coalesce` bytes and the span fits `chunk`.
    fn payload_end(&mut self, dir: &Directory<'_>, q: u64, chunk: u64, coalesce: u64) -> Option<u64> {
        // Drop the regions already passed.
        let (start, mut end) = loop {
            let r = self.front(dir)?;
            if r.1 > q {
                break r;
            }
            self.pop();
        };
        if start > q {
            return None; // the hint disagrees (a misplaced block): fill the chunk
        }
        let room = q.saturating_add(chunk);
        if end >= room {
            return Some(end); // this region alone fills the chunk
        }
        // Look ahead on a copy: the regions a read covers are dropped next
        // time. Once per region, so each descriptor is looked at at most twice.
        let mut ahead = *self;
        ahead.pop();
        while let Some((s, e)) = ahead.front(dir) {
            if s.saturating_sub(end) > coalesce || e > room {
                break;
            }
            end = end.max(e);
            ahead.pop();
        }
        Some(end)
    }

    /// The first region not yet passed, making more from the next descriptors.
    fn front(&mut self, dir: &Directory<'_>) -> Option<(u64, u64)> {
        loop {
            if let Some(r) = self.queue.iter().flatten().next() {
                return Some(*r);
            }
            let t = dir.get(self.next)?;
            self.next = self.next.saturating_add(1);
            let start = t.byte_offset();
            let end = start.saturating_add(t.descriptor().byte_length);
            let odd_packed = t.dtype().width() == Width::Nibble && t.element_count() % 2 == 1;
            let own = match t.dtype() {
                _ if end == start => None,
                DType::Bool => Some((start, end)),
                _ if odd_packed => Some((end.saturating_sub(1), end)),
                _ => None,
            };
            let gap = (self.prev_end < start).then_some((self.prev_end, start));
            self.prev_end = self.prev_end.max(end);
            self.queue = [gap, own];
        }
    }

    fn pop(&mut self) {
        if let Some(r) = self.queue.iter_mut().find(|r| r.is_some()) {
            *r = None;
        }
    }
}
