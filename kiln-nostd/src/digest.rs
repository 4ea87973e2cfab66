//! Per-tensor SHA-256 digests (`spec/model-file.md`, "Digests"): the table
//! a digests or shard record carries before its block, and step 9d, which
//! compares each tensor's payload with its digest.
//!
//! Step 9d runs after step 9 and before step 10, over the tensors in
//! descriptor order while their `byte_offset` is the canonical (greedy)
//! one, so the tensors it hashes are in ascending byte order and a mismatch
//! is certain at the end of that tensor's bytes. Hashing needs the `sha2`
//! feature; the table's shape rules do not.

#[cfg(feature = "sha2")]
use crate::bytes::{u64_from, usize_from};
use crate::descriptor::{AT_BYTE_LENGTH, AT_BYTE_OFFSET};
use crate::error::{Rule, Step};
use crate::layout::align;

/// Bytes of one digest (SHA-256).
pub const DIGEST_LEN: usize = 32;

/// A checked digest table: one SHA-256 per tensor, in descriptor order,
/// borrowed from the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Digests<'a> {
    bytes: &'a [u8],
    /// Absolute offset of the first digest byte (after the length word).
    at: usize,
}

impl<'a> Digests<'a> {
    /// The table over `bytes` (a multiple of [`DIGEST_LEN`]) whose first byte
    /// is at absolute offset `at`.
    #[cfg_attr(not(feature = "sha2"), allow(dead_code))] // the model-file reader's
    pub(crate) const fn new(bytes: &'a [u8], at: usize) -> Self {
        Digests { bytes, at }
    }

    /// A table over `bytes`, whose first byte is at absolute offset `at` of
    /// the caller's buffer (where [`offset_of`](Self::offset_of) counts
    /// from); `None` when its length is not a multiple of [`DIGEST_LEN`]
    /// (`DigestTableLength`). Whether it holds one digest per tensor
    /// (step 3d) is the block's to say.
    #[must_use]
    pub const fn from_bytes(bytes: &'a [u8], at: usize) -> Option<Self> {
        if bytes.len() % DIGEST_LEN == 0 {
            Some(Digests { bytes, at })
        } else {
            None
        }
    }

    /// The number of digests.
    pub const fn len(&self) -> usize {
        self.bytes.len() / DIGEST_LEN
    }

    /// True when the table is empty (a directory without tensors).
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Tensor `i`'s digest.
    #[must_use]
    pub fn get(&self, i: usize) -> Option<&'a [u8; DIGEST_LEN]> {
        let start = i.checked_mul(DIGEST_LEN)?;
        self.bytes.get(start..start.checked_add(DIGEST_LEN)?)?.try_into().ok()
    }

    /// The digests in descriptor order.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8; DIGEST_LEN]> + 'a {
        self.bytes.chunks_exact(DIGEST_LEN).filter_map(|c| c.try_into().ok())
    }

    /// Absolute offset of tensor `i`'s digest (where a reader that compares
    /// digest tables reports a difference).
    pub fn offset_of(&self, i: usize) -> usize {
        self.at.saturating_add(i.saturating_mul(DIGEST_LEN))
    }

    /// The table's bytes.
    pub const fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// True for the rules of steps 10 to 12, the ones step 9d comes before: a
/// parse that fails with one of them passed steps 1 to 9, so its ranges
/// are well formed and step 9d can still run.
#[cfg_attr(not(feature = "sha2"), allow(dead_code))] // the model-file reader's
pub(crate) const fn after_step9(rule: Rule) -> bool {
    Step::Directory(9, b'd').precedes(rule.step())
}

/// The payload ranges step 9d hashes, from raw descriptors (steps 1 to 9
/// hold): `(tensor index, payload-relative start, length)` in descriptor
/// order, ending before the first tensor whose offset is not the greedy one.
#[cfg_attr(not(feature = "sha2"), allow(dead_code))] // the model-file reader's
pub(crate) fn canonical_ranges(descriptors: &[u8], count: usize) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
    let mut running = 0u64;
    (0..count).map_while(move |i| {
        let (off, len) = run_entry(descriptors, i, running)?;
        running = off.checked_add(len)?;
        Some((i, off, len))
    })
}

/// Descriptor `i` of `descriptors` (raw, from descriptor 0) as the next
/// member of the canonical run, whose previous member ends at payload
/// offset `running` (0 for the first): `(start, length)` when its
/// `byte_offset` is the greedy one, `None` when the run ends before it.
/// The caller stops at the tensor count.
#[cfg_attr(not(feature = "sha2"), allow(dead_code))] // the model-file reader's
pub(crate) fn run_entry(descriptors: &[u8], i: usize, running: u64) -> Option<(u64, u64)> {
    let d = descriptors.get(i.checked_mul(crate::layout::DESCRIPTOR_LEN)?..)?;
    let off = crate::bytes::u64_at(d, AT_BYTE_OFFSET)?;
    let len = crate::bytes::u64_at(d, AT_BYTE_LENGTH)?;
    (off == align(running)?).then_some((off, len))
}

/// SHA-256 of `bytes`.
#[cfg(feature = "sha2")]
pub fn sha256(bytes: &[u8]) -> [u8; DIGEST_LEN] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

/// Step 9d over a whole block in memory: the first tensor (in descriptor
/// order, over the canonical run) whose payload does not match `table`, as
/// a DIGEST error at its first payload byte (absolute: `payload_start` is
/// where the payload region starts in the caller's buffer).
#[cfg(feature = "sha2")]
pub(crate) fn first_mismatch(
    descriptors: &[u8],
    count: usize,
    payload: &[u8],
    payload_start: usize,
    table: &Digests<'_>,
) -> Option<crate::Error> {
    for (i, off, len) in canonical_ranges(descriptors, count) {
        let bytes = usize_from(off).zip(usize_from(len)).and_then(|(o, l)| payload.get(o..o.checked_add(l)?));
        // Steps 1 to 9 put every range inside the payload: `None` cannot happen.
        let ok = bytes.zip(table.get(i)).is_some_and(|(b, d)| sha256(b) == *d);
        if !ok {
            return Some(crate::Error::at(Rule::PayloadDigest, u64_from(payload_start).saturating_add(off)));
        }
    }
    None
}

/// The whole-buffer verdict on the block at `block_at` in `buf` (a
/// `tensors` field: bytes after it are the caller's, as for
/// [`Parser::parse_at`](crate::Parser::parse_at)) with step 9d against
/// `table`: the oracle the streaming readers ([`Incremental::digests`],
/// `source::Options::digests`) agree with in every chunking.
///
/// - A fault of steps 1 to 3 (header, caps): that fault.
/// - Step 3d: a table that does not hold one digest per tensor is
///   [`Rule::DigestTableCount`] at `block_at`. A model-file reader checks
///   this itself, at the table's length word, before the block is parsed
///   (`spec/model-file.md`); here it only keeps a caller's mistake from
///   passing as a DIGEST fault.
/// - Any other fault of steps 4 to 9 (including truncation): that fault.
/// - Otherwise (the block is valid, or fails one of steps 10 and 11):
///   the first tensor of the canonical run whose payload does not match
///   its digest, [`Rule::PayloadDigest`] at its first payload byte
///   (absolute in `buf`); with none, `Parser`'s verdict.
///
/// A standalone block adds step 12 after all of these: bytes in `buf` past
/// [`Directory::end`](crate::Directory::end) are TRAILING (at that end)
/// when this returns `Ok`.
///
/// [`Incremental::digests`]: crate::Incremental::digests
#[cfg(feature = "sha2")]
pub fn check_block_digests<'a>(
    buf: &'a [u8],
    block_at: usize,
    parser: crate::Parser<'_>,
    table: &Digests<'_>,
) -> crate::Result<crate::Directory<'a>> {
    check_block_with(buf, block_at, parser, table, |_| Ok(()))
}

/// [`check_block_digests`] with a step between step 9 and step 9d:
/// `before_9d` gets the absolute offset where the payload region starts
/// (a signed model's step 9s checks its signature over the bytes before it).
#[cfg(feature = "sha2")]
pub(crate) fn check_block_with<'a>(
    buf: &'a [u8],
    block_at: usize,
    parser: crate::Parser<'_>,
    table: &Digests<'_>,
    before_9d: impl FnOnce(usize) -> crate::Result<()>,
) -> crate::Result<crate::Directory<'a>> {
    use crate::header::{Header, HEADER_LEN};
    let verdict = parser.parse_at(buf, block_at);
    if let Err(e) = verdict {
        if before_step3d(e.rule()) {
            return Err(e);
        }
    }
    let block = buf.get(block_at..).unwrap_or(&[]);
    // Steps 1 and 2 passed, so the header parses; should it not, the parse's verdict stands.
    let Ok(header) = Header::parse(block) else { return verdict };
    if !table_fits(table.as_bytes(), header.tensor_count) {
        return Err(crate::Error::new(Rule::DigestTableCount, block_at));
    }
    match verdict {
        Err(e) if !after_step9(e.rule()) => return Err(e),
        _ => {}
    }
    // Steps 1 to 9 hold: the prefix and every range of the run are in `block`.
    let base = crate::layout::payload_base(header.tensor_count, header.name_bytes).and_then(usize_from);
    let payload = base.and_then(|b| block.get(b..)).unwrap_or(&[]);
    let descriptors = block.get(HEADER_LEN..).unwrap_or(&[]);
    let count = crate::bytes::usize_from_u32(header.tensor_count);
    let at = block_at.saturating_add(base.unwrap_or(0));
    before_9d(at)?;
    match first_mismatch(descriptors, count, payload, at, table) {
        Some(e) => Err(e),
        None => verdict,
    }
}

/// True when `table` holds one digest per tensor (step 3d).
#[cfg(feature = "sha2")]
pub(crate) fn table_fits(table: &[u8], tensor_count: u32) -> bool {
    u64::from(tensor_count).checked_mul(u64_from(DIGEST_LEN)) == Some(u64_from(table.len()))
}

/// True for the rules of steps 1 to 3, the ones step 3d comes after.
#[cfg(feature = "sha2")]
pub(crate) const fn before_step3d(rule: Rule) -> bool {
    rule.step().precedes(Step::Directory(3, b'd'))
}

/// A running SHA-256 over one tensor's payload as its bytes stream past
/// (the incremental validator, ranged reads, an update written to flash).
#[cfg(feature = "sha2")]
#[derive(Clone, Debug, Default)]
pub struct TensorHasher {
    state: sha2::Sha256,
}

#[cfg(feature = "sha2")]
impl TensorHasher {
    /// A hasher with no bytes yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next bytes of the payload.
    pub fn update(&mut self, bytes: &[u8]) {
        sha2::Digest::update(&mut self.state, bytes);
    }

    /// True when the bytes added so far hash to `expected`; the hasher
    /// starts over.
    pub fn matches(&mut self, expected: &[u8; DIGEST_LEN]) -> bool {
        let got: [u8; DIGEST_LEN] = sha2::Digest::finalize_reset(&mut self.state).into();
        got == *expected
    }

    /// The SHA-256 of the bytes added so far (a digest to store, where
    /// `matches` checks one); the hasher starts over.
    pub fn finish(&mut self) -> [u8; DIGEST_LEN] {
        sha2::Digest::finalize_reset(&mut self.state).into()
    }
}
