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
use crate::bytes::u64_from;
use crate::wire::descriptor::{AT_BYTE_LENGTH, AT_BYTE_OFFSET};
use crate::wire::layout::align;

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
    #[doc(hidden)]
    pub const fn new(bytes: &'a [u8], at: usize) -> Self {
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

/// Descriptor `i` of `descriptors` (raw, from descriptor 0) as the next
/// member of the canonical run, whose previous member ends at payload
/// offset `running` (0 for the first): `(start, length)` when its
/// `byte_offset` is the greedy one, `None` when the run ends before it.
/// The caller stops at the tensor count.
#[doc(hidden)] // the model-file crate's whole-block check too
pub fn run_entry(descriptors: &[u8], i: usize, running: u64) -> Option<(u64, u64)> {
    let d = descriptors.get(i.checked_mul(crate::wire::layout::DESCRIPTOR_LEN)?..)?;
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

/// True when `table` holds one digest per tensor (step 3d).
#[cfg(feature = "sha2")]
#[doc(hidden)]
pub fn table_fits(table: &[u8], tensor_count: u32) -> bool {
    u64::from(tensor_count).checked_mul(u64_from(DIGEST_LEN)) == Some(u64_from(table.len()))
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
