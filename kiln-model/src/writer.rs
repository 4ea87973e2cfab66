//! Writing model files: plain, digests and shard records (`spec/model-file.md`).

use super::{Kind, Model, PAD_KEY};
use crate::bytes::usize_from;
use crate::digest::DIGEST_LEN;
use crate::error::{fail, Result};
use kiln_nostd::Rule as CoreRule;

#[cfg(feature = "std")]
extern crate std;

/// Writes model files: the frame, the metadata (with the padding key when
/// the payload region is to be aligned in the file) and the canonical block.
///
/// ```
/// use kiln_model::{Model, ModelWriter};
/// use kiln_nostd::{DType, TensorSpec};
/// let w = [0u8; 16];
/// let specs = [TensorSpec::new(DType::F32, &[4], &w).named("w")];
/// let meta = [("author", "kiln")];
/// let writer = ModelWriter::new().align(4096);
/// let mut out = vec![0u8; writer.encoded_len(&meta, &specs)?];
/// let n = writer.write(&meta, &specs, &mut out)?;
/// let m = Model::parse(&out[..n])?;
/// assert_eq!(m.metadata().get("author"), Some("kiln"));
/// assert_eq!(m.directory().payload_start() % 4096, 0);   // payloads at page offsets in the file
/// # Ok::<(), kiln_model::Error>(())
/// ```
///
/// With the `sha2` feature,
// Linked only where the feature builds the item, so docs without it have no broken link.
#[cfg_attr(feature = "sha2", doc = "[`digests`](ModelWriter::digests)")]
#[cfg_attr(not(feature = "sha2"), doc = "`digests`")]
/// writes a digests record (a SHA-256 per tensor before the block) and
#[cfg_attr(feature = "sha2", doc = "[`shard`](ModelWriter::shard)")]
#[cfg_attr(not(feature = "sha2"), doc = "`shard`")]
/// a shard record of a sharded model.
#[derive(Clone, Copy, Debug, Default)]
pub struct ModelWriter {
    align: u64,
    limits: kiln_nostd::Limits,
    digests: bool,
    shard: Option<ShardFields>,
}

/// A shard record's `shard` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ShardFields {
    model: [u8; DIGEST_LEN],
    index: u32,
    count: u32,
}

/// Bytes of a shard record's `shard` field: the model id's length word and
/// bytes, `index`, `count`.
pub const SHARD_FIELD_LEN: usize = 4 + DIGEST_LEN + 4 + 4;

/// The encoding of a shard record's `shard` field (for writers that stream
/// a shard themselves and patch the model id in once it is known).
pub fn shard_field(model: &[u8; DIGEST_LEN], index: u32, count: u32) -> [u8; SHARD_FIELD_LEN] {
    let mut out = [0u8; SHARD_FIELD_LEN];
    let (len, rest) = out.split_at_mut(4);
    len.copy_from_slice(&32u32.to_le_bytes());
    let (id, rest) = rest.split_at_mut(DIGEST_LEN);
    id.copy_from_slice(model);
    let (i, c) = rest.split_at_mut(4);
    i.copy_from_slice(&index.to_le_bytes());
    c.copy_from_slice(&count.to_le_bytes());
    out
}

impl ModelWriter {
    /// No alignment beyond the format's own, default caps, a plain record.
    #[must_use]
    pub const fn new() -> Self {
        ModelWriter { align: 1, limits: kiln_nostd::Limits::DEFAULT, digests: false, shard: None }
    }

    /// Writes a digests record: the SHA-256 of every tensor's payload in a
    /// table before the block (`false`: a plain record, today's bytes).
    #[cfg(feature = "sha2")]
    #[must_use]
    pub const fn digests(mut self, on: bool) -> Self {
        self.digests = on;
        self
    }

    /// Writes a shard record (with digests) of the model whose id is
    /// `model`, at 1-based position `index` of `count`.
    #[cfg(feature = "sha2")]
    #[must_use]
    pub const fn shard(mut self, model: [u8; DIGEST_LEN], index: u32, count: u32) -> Self {
        self.shard = Some(ShardFields { model, index, count });
        self.digests = true;
        self
    }

    /// The record type this writer writes.
    pub const fn kind(&self) -> Kind {
        match (self.shard, self.digests) {
            (Some(_), _) => Kind::Shard,
            (None, true) => Kind::Digests,
            (None, false) => Kind::Plain,
        }
    }

    /// Bytes between the metadata and the block: the shard field and the digest table.
    fn fields_len(&self, tensors: usize) -> usize {
        let shard = if self.shard.is_some() { SHARD_FIELD_LEN } else { 0 };
        let digests = if self.digests { tensors.saturating_mul(DIGEST_LEN).saturating_add(4) } else { 0 };
        shard.saturating_add(digests)
    }

    /// Places the payload region at a multiple of `align` bytes from the
    /// start of the file (a power of two, e.g. 4096 for memory maps), with
    /// the padding key. 0 or 1: no padding key.
    #[must_use]
    pub const fn align(mut self, align: u64) -> Self {
        self.align = align;
        self
    }

    /// Caps the written file must respect (a reader with the same caps accepts it).
    #[must_use]
    pub const fn limits(mut self, limits: kiln_nostd::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The exact length of the model file for `metadata` (keys strictly
    /// increasing by bytes, none of them [`PAD_KEY`]) and `specs`.
    pub fn encoded_len(&self, metadata: &[(&str, &str)], specs: &[kiln_nostd::TensorSpec<'_>]) -> Result<usize> {
        self.plan(metadata, specs).map(|p| p.total)
    }

    /// Writes the model file into `out`, checks it with [`Model::parse`] and
    /// returns its length. The name checks compare every pair; give
    /// [`write_with_scratch`](Self::write_with_scratch) scratch for large sets.
    pub fn write(
        &self,
        metadata: &[(&str, &str)],
        specs: &[kiln_nostd::TensorSpec<'_>],
        out: &mut [u8],
    ) -> Result<usize> {
        self.write_with_scratch(metadata, specs, out, None)
    }

    /// [`write`](Self::write) with name scratch of at least
    /// [`scratch_len`](kiln_nostd::directory::scratch_len)`(specs.len())` slots, so the
    /// name checks take linear time.
    pub fn write_with_scratch(
        &self,
        metadata: &[(&str, &str)],
        specs: &[kiln_nostd::TensorSpec<'_>],
        out: &mut [u8],
        mut scratch: Option<&mut [u32]>,
    ) -> Result<usize> {
        let plan = self.plan(metadata, specs)?;
        let Some(file) = out.get_mut(..plan.total) else {
            return fail(CoreRule::ValueOutputTooSmall, out.len());
        };
        let table_at = self.put_head(metadata, specs, &plan, file);
        // The digest table (when there is one) is the rest of the head: it is
        // filled while the block is written (see `digests_while`).
        // Fallback not taken: head_len <= file.len(): the plan sized the file.
        let (head, block) = file.split_at_mut(plan.head_len.min(file.len()));
        let table = head.get_mut(table_at..).unwrap_or(&mut []);
        let writer = kiln_nostd::Writer::new().limits(self.limits);
        let write_block = || match scratch.as_deref_mut() {
            Some(s) => writer.scratch(s).write(specs, block),
            None => writer.write(specs, block),
        };
        if self.digests {
            digests_while(table, specs, write_block)?;
        } else {
            write_block()?;
        }
        self.check(file, scratch)?;
        Ok(plan.total)
    }

    /// The check every file this writer writes passes before it is handed
    /// out: [`Model::parse`] with the writer's caps (and name scratch, as for
    /// [`write_with_scratch`](Self::write_with_scratch)). For files written
    /// by `write_to` (feature `std`), once they are written.
    pub fn check(&self, file: &[u8], scratch: Option<&mut [u32]>) -> Result<()> {
        let parser = kiln_nostd::Parser::new().limits(self.limits);
        match scratch {
            Some(s) => Model::parse_with(file, parser.scratch(s))?,
            None => Model::parse_with(file, parser)?,
        };
        Ok(())
    }

    /// Writes the model file [`write`](Self::write) would write to `out`, in
    /// order, without a buffer of the file's size: the head and directory
    /// (the layout computed without the payloads), then each payload with
    /// one `write_all` straight from the spec's bytes (zeros between), while
    /// helper threads hash them (see `digests_while`); the digest table,
    /// written as zeros at first, is then written over at its offset and
    /// `out` is left at the end of the file. Returns the file's length. The
    /// result is not checked (it is not in memory): pass the written bytes
    /// to [`check`](Self::check).
    #[cfg(feature = "std")]
    pub fn write_to<W: std::io::Write + std::io::Seek>(
        &self,
        metadata: &[(&str, &str)],
        specs: &[kiln_nostd::TensorSpec<'_>],
        out: &mut W,
    ) -> core::result::Result<usize, WriteToError> {
        use kiln_nostd::int::u64_from;
        use std::io::SeekFrom;
        let plan = self.plan(metadata, specs)?;
        let payload_base = block_payload_base(specs)?;
        let mut head = std::vec![0u8; plan.head_len.saturating_add(payload_base)];
        let table_at = self.put_head(metadata, specs, &plan, &mut head);
        let directory = head.get_mut(plan.head_len..).unwrap_or(&mut []);
        kiln_nostd::Writer::new().limits(self.limits).write_directory(specs, directory)?;
        let start = out.stream_position()?;
        out.write_all(&head)?;
        // The digest table: the rest of the head (empty without digests).
        let mut table = std::vec![0u8; plan.head_len.saturating_sub(table_at)];
        let mut write_payloads = || -> std::io::Result<()> {
            const ZEROS: [u8; 64] = [0; 64];
            let mut placement = crate::layout::Placement::new();
            for s in specs {
                let gap_from = placement.payload_bytes();
                // Fallback not taken: the plan placed these lengths without overflow.
                let at = placement.place(u64_from(s.data.len())).unwrap_or(gap_from);
                // Fallback not taken: a gap is below the 64-byte payload alignment.
                out.write_all(ZEROS.get(..usize::try_from(at.saturating_sub(gap_from)).unwrap_or(0)).unwrap_or(&[]))?;
                out.write_all(s.data)?;
            }
            Ok(())
        };
        if self.digests {
            digests_while(&mut table, specs, write_payloads)?;
        } else {
            write_payloads()?;
        }
        let end = out.stream_position()?;
        if end.checked_sub(start) != Some(u64_from(plan.total)) {
            // Fallback not taken: the plan and the placement agree on every length.
            return Err(WriteToError::Io(std::io::Error::other("the streamed model file is not the planned length")));
        }
        if !table.is_empty() {
            out.seek(SeekFrom::Start(start.saturating_add(u64_from(table_at))))?;
            out.write_all(&table)?;
            out.seek(SeekFrom::Start(end))?;
        }
        Ok(plan.total)
    }

    /// Writes the head up to the digest table (frame, metadata with the
    /// padding entry, shard field, the table's length word) into `file`;
    /// returns where the digest table starts (the directory when there is none).
    fn put_head(
        &self,
        metadata: &[(&str, &str)],
        specs: &[kiln_nostd::TensorSpec<'_>],
        plan: &Plan,
        file: &mut [u8],
    ) -> usize {
        let mut at = 0usize;
        let mut put = |file: &mut [u8], bytes: &[u8]| {
            if let Some(dst) = at.checked_add(bytes.len()).and_then(|end| file.get_mut(at..end)) {
                dst.copy_from_slice(bytes);
            }
            at = at.saturating_add(bytes.len());
        };
        put(file, &crate::frozen::frame_bytes(self.kind().hash()));
        // Fallback: over u32::MAX entries (32 GiB of keys) write a count the parse of the written file refuses.
        let shown = u32::try_from(metadata.len().saturating_add(usize::from(plan.pad.is_some()))).unwrap_or(u32::MAX);
        put(file, &shown.to_le_bytes());
        let mut pad_written = plan.pad.is_none();
        for &(k, v) in metadata {
            if !pad_written && k.as_bytes() > PAD_KEY.as_bytes() {
                // Fallback: no pad planned: a zero-length pad entry.
                put_pad(file, &mut put, plan.pad.unwrap_or(0));
                pad_written = true;
            }
            put_str(file, &mut put, k);
            put_str(file, &mut put, v);
        }
        if !pad_written {
            // Fallback: no pad planned: a zero-length pad entry.
            put_pad(file, &mut put, plan.pad.unwrap_or(0));
        }
        if let Some(s) = &self.shard {
            put(file, &shard_field(&s.model, s.index, s.count));
        }
        if self.digests {
            // Fallback: over u32::MAX bytes of digests, a length the parse of the written file refuses.
            let len = u32::try_from(specs.len().saturating_mul(DIGEST_LEN)).unwrap_or(u32::MAX);
            put(file, &len.to_le_bytes());
        }
        at
    }

    fn plan(&self, metadata: &[(&str, &str)], specs: &[kiln_nostd::TensorSpec<'_>]) -> Result<Plan> {
        let mut dict = 4usize; // the count word
        for (i, &(k, v)) in metadata.iter().enumerate() {
            let prev = i.checked_sub(1).and_then(|j| metadata.get(j)).map(|&(p, _)| p);
            if k == PAD_KEY || prev.is_some_and(|p| p.as_bytes() >= k.as_bytes()) {
                return fail(CoreRule::DictKeyOrder, 0);
            }
            for s in [k, v] {
                if u32::try_from(s.len()).is_err() {
                    return fail(CoreRule::CountTooWide, 0);
                }
                dict = dict.saturating_add(4).saturating_add(s.len());
            }
        }
        let block = kiln_nostd::Writer::new().encoded_len(specs)?;
        let payload_in_block = block_payload_base(specs)?;
        let pad = match self.align {
            0 | 1 => None,
            a => {
                // Frame, metadata and an empty padding entry (two length words and the key).
                // Then the shard field and the digest table.
                let without = 16usize
                    .saturating_add(dict)
                    .saturating_add(8)
                    .saturating_add(PAD_KEY.len())
                    .saturating_add(self.fields_len(specs.len()));
                // Fallback not taken: a usize fits a u64 on every supported target.
                let at = u64::try_from(without.saturating_add(payload_in_block)).unwrap_or(u64::MAX);
                // Fallback not taken: a is a nonzero alignment: the remainder exists.
                let pad = at.checked_rem(a).map_or(0, |r| a.saturating_sub(r).checked_rem(a).unwrap_or(0));
                // Fallback: a pad past usize::MAX fits no buffer, so the size check refuses it.
                Some(usize::try_from(pad).unwrap_or(usize::MAX))
            }
        };
        let pad_entry = pad.map_or(0, |p| 8usize.saturating_add(PAD_KEY.len()).saturating_add(p));
        let head_len =
            16usize.saturating_add(dict).saturating_add(pad_entry).saturating_add(self.fields_len(specs.len()));
        Ok(Plan { pad, head_len, total: head_len.saturating_add(block) })
    }
}

/// Sizes of a model file before it is written.
struct Plan {
    /// The padding value's length, when there is a padding key.
    pad: Option<usize>,
    /// Bytes before the block: frame, metadata, shard field, digest table.
    head_len: usize,
    total: usize,
}

/// Why [`ModelWriter::write_to`] failed: a rule the model would break
/// (nothing was written then), or the output's error.
#[cfg(feature = "std")]
#[derive(Debug)]
pub enum WriteToError {
    /// A rule the model breaks, found before anything was written.
    Model(crate::Error),
    /// Writing to the output failed (what was written is incomplete).
    Io(std::io::Error),
}

#[cfg(feature = "std")]
impl From<crate::Error> for WriteToError {
    fn from(e: crate::Error) -> Self {
        WriteToError::Model(e)
    }
}

#[cfg(feature = "std")]
impl From<kiln_nostd::Error> for WriteToError {
    fn from(e: kiln_nostd::Error) -> Self {
        WriteToError::Model(e.into())
    }
}

#[cfg(feature = "std")]
impl From<std::io::Error> for WriteToError {
    fn from(e: std::io::Error) -> Self {
        WriteToError::Io(e)
    }
}

/// Where the payload region starts in the canonical block of `specs`.
fn block_payload_base(specs: &[kiln_nostd::TensorSpec<'_>]) -> Result<usize> {
    let heap =
        specs.iter().flat_map(|s| s.name.iter().chain(s.layout.iter())).fold(0usize, |n, t| n.saturating_add(t.len()));
    let count = u32::try_from(specs.len()).or(fail(CoreRule::FieldTooWide, 8))?;
    let heap = u32::try_from(heap).or(fail(CoreRule::FieldTooWide, 12))?;
    match crate::layout::payload_base(count, heap).and_then(usize_from) {
        Some(b) => Ok(b),
        None => fail(CoreRule::PayloadSizeOverflow, 16),
    }
}

/// The digest of each tensor's payload, in order.
#[cfg(feature = "sha2")]
fn put_digests(table: &mut [u8], specs: &[kiln_nostd::TensorSpec<'_>]) {
    for (slot, s) in table.chunks_exact_mut(DIGEST_LEN).zip(specs) {
        slot.copy_from_slice(&crate::digest::sha256(s.data));
    }
}

/// Without `sha2` no writer asks for digests.
#[cfg(not(feature = "sha2"))]
fn put_digests(_: &mut [u8], _: &[kiln_nostd::TensorSpec<'_>]) {}

/// Runs `work` (the block's write) and fills `table` with the SHA-256 of
/// every payload of `specs`: one after the other without `std`.
#[cfg(not(all(feature = "std", feature = "sha2")))]
fn digests_while<R>(table: &mut [u8], specs: &[kiln_nostd::TensorSpec<'_>], work: impl FnOnce() -> R) -> R {
    put_digests(table, specs);
    work()
}

#[cfg(all(feature = "std", feature = "sha2"))]
use parallel::digests_while;

/// Hashing beside the block's write, on threads (`std`).
#[cfg(all(feature = "std", feature = "sha2"))]
mod parallel {
    extern crate std;
    use super::{put_digests, DIGEST_LEN};
    use core::sync::atomic::{AtomicUsize, Ordering};
    use std::vec::Vec;

    /// Payloads below this many bytes in all are hashed on the calling thread:
    /// on a loaded machine a thread waits to be scheduled longer than it saves
    /// on them (measured: 1 MiB in 8 tensors took 5.9 ms threaded, 1.2 ms not).
    const PARALLEL_DIGESTS_MIN: usize = 8 << 20;

    /// Runs `work` (the block's write) and fills `table` with the SHA-256 of
    /// every payload of `specs`. With `std`, the payloads are hashed by helper
    /// threads (one per CPU but one) while `work` copies them, and the calling
    /// thread joins the hashing when its work is done: hashing was the larger
    /// half of a save (measured 1.2 s of 1.7 s for 1 GiB in 300 tensors), and
    /// the copy and the hashes read the same payloads independently.
    pub(super) fn digests_while<R>(
        table: &mut [u8],
        specs: &[kiln_nostd::TensorSpec<'_>],
        work: impl FnOnce() -> R,
    ) -> R {
        let total = specs.iter().fold(0usize, |n, s| n.saturating_add(s.data.len()));
        let helpers = std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1)).max(1);
        if total < PARALLEL_DIGESTS_MIN || specs.len() < 2 {
            put_digests(table, specs);
            return work();
        }
        // Tensors are claimed one at a time (`hash_claimed`), so a large one does not hold back the rest.
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..helpers).map(|_| scope.spawn(|| hash_claimed(specs, &next))).collect();
            let out = work();
            let mut done = hash_claimed(specs, &next);
            let mut joined = true;
            for h in handles {
                match h.join() {
                    Ok(d) => done.extend(d),
                    Err(_) => joined = false,
                }
            }
            if joined && done.len() == specs.len() {
                done.sort_unstable_by_key(|&(i, _)| i);
                for (slot, (_, d)) in table.chunks_exact_mut(DIGEST_LEN).zip(&done) {
                    slot.copy_from_slice(d);
                }
            } else {
                // Fallback: a helper that failed (it cannot: hashing does not panic) leaves the work here.
                put_digests(table, specs);
            }
            out
        })
    }

    /// The (index, SHA-256) of every tensor this thread claims from `next` until none is left.
    fn hash_claimed(specs: &[kiln_nostd::TensorSpec<'_>], next: &AtomicUsize) -> Vec<(usize, [u8; DIGEST_LEN])> {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(s) = specs.get(i) else { return done };
            done.push((i, crate::digest::sha256(s.data)));
        }
    }
}

pub(super) fn put_str(file: &mut [u8], put: &mut impl FnMut(&mut [u8], &[u8]), s: &str) {
    // Fallback not taken: keys and values were checked against the u32 length cap.
    put(file, &u32::try_from(s.len()).unwrap_or(u32::MAX).to_le_bytes());
    put(file, s.as_bytes());
}

pub(super) fn put_pad(file: &mut [u8], put: &mut impl FnMut(&mut [u8], &[u8]), len: usize) {
    put_str(file, put, PAD_KEY);
    // Fallback: a pad of 4 GiB or more is refused by the parse of the written file.
    put(file, &u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
    const SPACES: [u8; 256] = [b' '; 256];
    let mut left = len;
    while left > 0 {
        let n = left.min(SPACES.len());
        // Fallback not taken: n <= SPACES.len() by the min above.
        put(file, SPACES.get(..n).unwrap_or(&[]));
        left = left.saturating_sub(n);
    }
}
