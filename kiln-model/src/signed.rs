//! Signed model files (`spec/model-file.md`, "Signed models"): an Ed25519
//! signature over every byte of the model except the payloads, so nothing
//! but a payload can change under it and the digests cover the payloads.
//!
//! The record is the digests record with two fields more: `signature`
//! first (the signer's public key and the 64 signature bytes, so a stream
//! knows the key from its first packet) and `release` after the metadata
//! (a version number and a target name, signed, for rollback and
//! wrong-device checks). The signed message is the file's bytes from the
//! start to the payload region with the 64 signature bytes left out: two
//! pieces, `0..SIG_AT` and `SIG_AT + 64..payload_start`.
//!
//! Reading a signed record needs nothing more than any model file: it
//! parses everywhere and says who signed it ([`Signature::key`]). Checking
//! the signature is `Trust` (feature `ed25519`): the caller's public key,
//! and optionally the device's target and the running version.

use super::METADATA;
use crate::bytes::u64_at;
use crate::error::{fail, Result, Rule};
use crate::frozen::{Checker, Field, Ty, FRAME_LEN};
use kiln_nostd::Rule as CoreRule;

/// The signed record's canonical type text.
pub const SIGNED_TYPE: &str = concat!(
    "struct{signature:struct{key:list<u8>,sig:list<u8>,},",
    "metadata:dict<str,str>,",
    "release:struct{version:u64,target:str,},",
    "digests:list<u8>,tensors:tensors,}"
);

/// The schema hash of [`SIGNED_TYPE`].
pub const SIGNED_HASH: u64 = crate::frozen::hash_text(SIGNED_TYPE);

/// Bytes of an Ed25519 public key.
pub const KEY_LEN: usize = 32;
/// Bytes of an Ed25519 signature.
pub const SIGNATURE_LEN: usize = 64;
/// Offset of the public key's first byte in a signed record (after the
/// frame and the key's length word).
pub const KEY_AT: usize = FRAME_LEN + 4;
/// Offset of the signature's first byte: the 64 bytes the signed message leaves out.
pub const SIG_AT: usize = KEY_AT + KEY_LEN + 4;
/// Bytes of the `signature` field: two length words, the key and the signature.
pub const SIGNATURE_FIELD_LEN: usize = 4 + KEY_LEN + 4 + SIGNATURE_LEN;

static SIGNATURE_FIELDS: [Field; 2] = [Field::new("key", &Ty::BYTES), Field::new("sig", &Ty::BYTES)];
pub(super) static SIGNATURE: Ty = Ty::structure(&SIGNATURE_FIELDS);
static RELEASE_FIELDS: [Field; 2] = [Field::new("version", &Ty::U64), Field::new("target", &Ty::STR)];
pub(super) static RELEASE: Ty = Ty::structure(&RELEASE_FIELDS);
static TENSORS_TY: Ty = Ty::TENSORS;
static FIELDS: [Field; 5] = [
    Field::new("signature", &SIGNATURE),
    Field::new("metadata", &METADATA),
    Field::new("release", &RELEASE),
    Field::new("digests", &Ty::BYTES),
    Field::new("tensors", &TENSORS_TY),
];
static RECORD: Ty = Ty::structure(&FIELDS);
const _: () = assert!(RECORD.schema_hash() == SIGNED_HASH);

/// Who signed a model and what it claims to be: its `signature` and
/// `release` fields, as read (not yet checked against any key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature<'a> {
    /// The signer's Ed25519 public key (the key id a reader shows).
    pub key: &'a [u8; KEY_LEN],
    /// The 64 signature bytes.
    pub sig: &'a [u8; SIGNATURE_LEN],
    /// The signed release: version and target.
    pub release: Release<'a>,
}

/// A signed model's `release` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release<'a> {
    /// The model's version: an update must carry a higher one than the
    /// model it replaces.
    pub version: u64,
    /// The device or product the model is for.
    pub target: &'a str,
    /// Absolute offset of the `version` field.
    pub(crate) at: usize,
}

impl Release<'_> {
    /// Absolute offset of the `version` field (the `target` length word is 8 after it).
    pub const fn offset(&self) -> usize {
        self.at
    }
}

/// What the reader requires of a signed model besides a valid signature:
/// the key, and optionally the target and the version to go past. The
/// checks of the key and the release are made as soon as their fields are
/// read (a stream rejects at the packet that brings them); a false claim
/// there only ever rejects, and the signature check later covers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy<'k> {
    pub(crate) key: &'k [u8; KEY_LEN],
    pub(crate) target: Option<&'k str>,
    pub(crate) newer_than: Option<u64>,
}

/// The `signature` field at `at` (the frame's end): its Frozen checks, the
/// two lengths, then (with a policy) the key.
pub(super) fn check_signature_field<'a>(
    checker: &Checker<'a>,
    at: usize,
    policy: Option<&Policy<'_>>,
) -> Result<(&'a [u8; KEY_LEN], &'a [u8; SIGNATURE_LEN], usize)> {
    let end = checker.value(&SIGNATURE, at)?;
    let (key, after) = checker.byte_run(at)?;
    let Ok(key) = <&[u8; KEY_LEN]>::try_from(key) else {
        return fail(Rule::SignatureKeyLength, at);
    };
    let (sig, _) = checker.byte_run(after)?;
    let Ok(sig) = <&[u8; SIGNATURE_LEN]>::try_from(sig) else {
        return fail(Rule::SignatureLength, after);
    };
    if policy.is_some_and(|p| p.key != key) {
        return fail(Rule::SignatureKey, at.saturating_add(4));
    }
    Ok((key, sig, end))
}

/// The `release` field at `at`: its Frozen checks, then (with a policy)
/// the target and the version.
pub(super) fn check_release<'a>(
    checker: &Checker<'a>,
    at: usize,
    policy: Option<&Policy<'_>>,
) -> Result<(Release<'a>, usize)> {
    let end = checker.value(&RELEASE, at)?;
    // Fallback not taken: the Frozen check read the u64.
    let version = u64_at(checker.buf, at).unwrap_or(0);
    let target_at = at.saturating_add(8);
    let target = checker.buf.get(target_at.saturating_add(4)..end).and_then(|b| core::str::from_utf8(b).ok());
    // Fallback not taken: the Frozen check read the string and its UTF-8.
    let target = target.unwrap_or("");
    if let Some(p) = policy {
        if p.target.is_some_and(|t| t != target) {
            return fail(Rule::ReleaseTarget, target_at);
        }
        if p.newer_than.is_some_and(|v| version <= v) {
            return fail(Rule::ReleaseVersion, at);
        }
    }
    Ok((Release { version, target, at }, end))
}

/// The signed message of a signed record whose payload region starts at
/// `payload_start`, as its two pieces: everything before it but the 64
/// signature bytes. Pieces past the buffer's end are cut at it.
pub fn signed_message(file: &[u8], payload_start: usize) -> [&[u8]; 2] {
    let end = payload_start.min(file.len());
    let first = file.get(..SIG_AT.min(end)).unwrap_or(&[]);
    let second = file.get(SIG_AT.saturating_add(SIGNATURE_LEN).min(end)..end).unwrap_or(&[]);
    [first, second]
}

#[cfg(feature = "ed25519")]
pub use trust::Trust;

#[cfg(feature = "ed25519")]
mod trust {
    use super::{Policy, KEY_LEN, SIGNATURE_LEN, SIG_AT};
    use crate::ed25519::{self, Point};
    use crate::error::{fail, Result, Rule};

    /// The public key a reader trusts, and what it requires of a signed
    /// model's release (feature `ed25519`). The check is Ed25519 (RFC 8032)
    /// as `spec/model-file.md` states the rule (cofactorless, `S < L`, the
    /// key canonical and not of small order, `R` compared as bytes), on
    /// curve25519-dalek's arithmetic, streamed over the signed bytes where
    /// they lie; the key is decoded and checked once, here.
    #[derive(Clone, Copy, Debug)]
    pub struct Trust<'k> {
        key: Point,
        raw: &'k [u8; KEY_LEN],
        target: Option<&'k str>,
        newer_than: Option<u64>,
    }

    impl<'k> Trust<'k> {
        /// Trusts the Ed25519 public key `key` (32 bytes, RFC 8032's
        /// encoding); `None` when those bytes are not a usable key: not a
        /// point, not the canonical encoding of one (RFC 8032 section 5.1.3
        /// refuses y >= p and x = 0 with the sign bit set), or of small
        /// order (it would verify forged signatures).
        #[must_use]
        pub fn new(key: &'k [u8; KEY_LEN]) -> Option<Self> {
            let point = ed25519::decode_key(key)?;
            Some(Trust { key: point, raw: key, target: None, newer_than: None })
        }

        /// Accepts only models whose release names `target`.
        #[must_use]
        pub const fn target(mut self, target: &'k str) -> Self {
            self.target = Some(target);
            self
        }

        /// Accepts only models whose release version is above `version` (the
        /// running model's): an older or equal version is a rollback.
        #[must_use]
        pub const fn newer_than(mut self, version: u64) -> Self {
            self.newer_than = Some(version);
            self
        }

        /// The trusted key's bytes.
        pub const fn key(&self) -> &'k [u8; KEY_LEN] {
            self.raw
        }

        pub(crate) const fn policy(&self) -> Policy<'k> {
            Policy { key: self.raw, target: self.target, newer_than: self.newer_than }
        }

        /// The Ed25519 check of `sig` over the message made of `pieces` in
        /// order (step 9s of a signed record: its two pieces, see
        /// [`signed_message`](super::signed_message)); a mismatch is
        /// [`Rule::SignatureInvalid`] at the signature's first byte.
        pub fn check_pieces(&self, sig: &[u8; SIGNATURE_LEN], pieces: &[&[u8]]) -> Result<()> {
            if ed25519::verify(&self.key, self.raw, sig, pieces) {
                Ok(())
            } else {
                fail(Rule::SignatureInvalid, SIG_AT)
            }
        }
    }
}

/// The fields of a signed record before its block, to write in front of a
/// canonical block (a signer re-heads a model it has checked: the block,
/// with its payloads, is copied as it is). The 64 signature bytes are
/// written as zeros; the signer signs [`signed_message`] of the whole
/// file and writes them with [`put_signature`].
///
/// ```
/// use kiln_model::{signed::{self, SignedHead}, Kind, Model};
/// # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
/// let dir = kiln_nostd::Parser::new().parse(&block)?;
/// # #[cfg(feature = "sha2")] {
/// let digests: Vec<u8> = dir.iter().flat_map(|t| kiln_nostd::digest::sha256(t.bytes())).collect();
/// let head = SignedHead { key: &[7; 32], version: 3, target: "board-a", metadata: &[("author", "kiln")], digests: &digests, align: None };
/// let mut file = vec![0u8; head.len(&block)? + block.len()];
/// let n = head.write(&block, &mut file)?;
/// file[n..].copy_from_slice(&block);
/// let m = Model::parse(&file)?;
/// assert_eq!(m.kind(), Kind::Signed);
/// assert_eq!(m.signature().unwrap().release.target, "board-a");
/// # }
/// # Ok::<(), kiln_model::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SignedHead<'a> {
    /// The signer's public key.
    pub key: &'a [u8; KEY_LEN],
    /// The release version.
    pub version: u64,
    /// The release target.
    pub target: &'a str,
    /// The metadata: keys strictly increasing by bytes, none of them the padding key.
    pub metadata: &'a [(&'a str, &'a str)],
    /// One SHA-256 per tensor, in descriptor order.
    pub digests: &'a [u8],
    /// Pads the metadata so that the payload region starts at this
    /// multiple in the file, or (with a remainder) at `offset % align == rem`:
    /// `(align, rem)`, `align` a power of two.
    pub align: Option<(u64, u64)>,
}

impl SignedHead<'_> {
    fn fields_len(&self, pad: Option<usize>) -> Result<usize> {
        let mut n = FRAME_LEN.saturating_add(SIGNATURE_FIELD_LEN).saturating_add(4);
        for (i, &(k, v)) in self.metadata.iter().enumerate() {
            let prev = i.checked_sub(1).and_then(|j| self.metadata.get(j)).map(|&(p, _)| p);
            if k == super::PAD_KEY || prev.is_some_and(|p| p.as_bytes() >= k.as_bytes()) {
                return fail(CoreRule::DictKeyOrder, 0);
            }
            n = n.saturating_add(8).saturating_add(k.len()).saturating_add(v.len());
        }
        if let Some(p) = pad {
            n = n.saturating_add(8).saturating_add(super::PAD_KEY.len()).saturating_add(p);
        }
        Ok(n.saturating_add(12).saturating_add(self.target.len()).saturating_add(4).saturating_add(self.digests.len()))
    }

    /// The padding value's length for the block's payload base.
    fn pad(&self, block: &[u8]) -> Result<Option<usize>> {
        let Some((align, rem)) = self.align.filter(|&(a, _)| a > 1 && a.is_power_of_two()) else {
            return Ok(None);
        };
        let h = kiln_nostd::wire::Header::parse(block)?;
        let Some(base) = crate::layout::payload_base(h.tensor_count, h.name_bytes) else {
            return fail(CoreRule::PayloadSizeOverflow, 16);
        };
        let without = crate::bytes::u64_from(self.fields_len(Some(0))?).saturating_add(base);
        // The distance up to the next offset congruent to `rem` (align is a power of two).
        let pad = rem.wrapping_sub(without) & align.wrapping_sub(1);
        Ok(Some(usize::try_from(pad).unwrap_or(usize::MAX)))
    }

    /// Bytes of these fields before `block` (a canonical block: its header gives the payload base).
    pub fn len(&self, block: &[u8]) -> Result<usize> {
        self.fields_len(self.pad(block)?)
    }

    /// Writes the fields into `out` (signature zeroed) and returns their
    /// length: the block goes right after.
    pub fn write(&self, block: &[u8], out: &mut [u8]) -> Result<usize> {
        let pad = self.pad(block)?;
        let total = self.fields_len(pad)?;
        let Some(file) = out.get_mut(..total) else {
            return fail(CoreRule::ValueOutputTooSmall, out.len());
        };
        let mut at = 0usize;
        let mut put = |file: &mut [u8], bytes: &[u8]| {
            if let Some(dst) = at.checked_add(bytes.len()).and_then(|end| file.get_mut(at..end)) {
                dst.copy_from_slice(bytes);
            }
            at = at.saturating_add(bytes.len());
        };
        put(file, &crate::frozen::frame_bytes(SIGNED_HASH));
        put(file, &32u32.to_le_bytes());
        put(file, self.key);
        put(file, &64u32.to_le_bytes());
        put(file, &[0u8; SIGNATURE_LEN]);
        let count = self.metadata.len().saturating_add(usize::from(pad.is_some()));
        put(file, &u32::try_from(count).unwrap_or(u32::MAX).to_le_bytes());
        let mut pad_written = pad.is_none();
        for &(k, v) in self.metadata {
            if !pad_written && k.as_bytes() > super::PAD_KEY.as_bytes() {
                super::writer::put_pad(file, &mut put, pad.unwrap_or(0));
                pad_written = true;
            }
            super::writer::put_str(file, &mut put, k);
            super::writer::put_str(file, &mut put, v);
        }
        if !pad_written {
            super::writer::put_pad(file, &mut put, pad.unwrap_or(0));
        }
        put(file, &self.version.to_le_bytes());
        super::writer::put_str(file, &mut put, self.target);
        put(file, &u32::try_from(self.digests.len()).unwrap_or(u32::MAX).to_le_bytes());
        put(file, self.digests);
        Ok(total)
    }
}

/// Writes the 64 signature bytes of a signed record (`file` starts with
/// its frame and `signature` field).
pub fn put_signature(file: &mut [u8], sig: &[u8; SIGNATURE_LEN]) -> Result<()> {
    match file.get_mut(SIG_AT..SIG_AT.saturating_add(SIGNATURE_LEN)) {
        Some(dst) => {
            dst.copy_from_slice(sig);
            Ok(())
        }
        None => fail(CoreRule::ValueOutputTooSmall, file.len()),
    }
}

/// Signs a checked model file (`alloc` and `ed25519` features): a plain,
/// digests or signed record, whose digests (when it has them) must match.
/// The result is a signed record with the same metadata, digests (computed
/// when the input has none) and block, byte for byte, `release` as given,
/// and the payload region at the same offset modulo 4096 when the input
/// had the padding key. `sign` gets the message and returns the
/// signature of the key whose public half is `key` (the private key never
/// passes through the core); the result is checked with
/// [`Model::parse_trusted`](super::Model::parse_trusted) before it is returned.
#[cfg(all(feature = "alloc", feature = "ed25519"))]
pub fn sign_model(
    file: &[u8],
    key: &[u8; KEY_LEN],
    version: u64,
    target: &str,
    sign: impl FnOnce(&[u8]) -> [u8; SIGNATURE_LEN],
) -> Result<alloc::vec::Vec<u8>> {
    sign_model_aligned(file, key, version, target, None, sign)
}

/// [`sign_model`], with the payload region placed at a multiple of
/// `align` in the file (`Some(1)`: no padding key, the smallest file, as a
/// device that streams the update wants; `None`: as the input had it).
#[cfg(all(feature = "alloc", feature = "ed25519"))]
pub fn sign_model_aligned(
    file: &[u8],
    key: &[u8; KEY_LEN],
    version: u64,
    target: &str,
    align: Option<u64>,
    sign: impl FnOnce(&[u8]) -> [u8; SIGNATURE_LEN],
) -> Result<alloc::vec::Vec<u8>> {
    let mut plan = SigningPlan::new(file, key, version, target, align)?;
    plan.sign(file, sign)?;
    let mut out = plan.head;
    out.extend_from_slice(file.get(plan.block_at..).unwrap_or(&[]));
    let trust = Trust::new(key).ok_or(crate::Error::new(Rule::SignatureInvalid, SIG_AT))?;
    super::Model::parse_trusted(&out, &trust)?;
    Ok(out)
}

/// A signed record's fields for a checked input model (`alloc` and
/// `ed25519` features): the signed file is [`head`](Self::head) followed by
/// the input's bytes from [`block_at`](Self::block_at) on, so a signer of a
/// large model writes the head and copies the block without holding it.
#[cfg(all(feature = "alloc", feature = "ed25519"))]
#[derive(Clone, Debug)]
pub struct SigningPlan {
    /// The fields before the block (the signature zeroed until [`sign`](Self::sign)).
    pub head: alloc::vec::Vec<u8>,
    /// Where the block starts in the input.
    pub block_at: usize,
    /// The block's payload base: the signed message ends this far into the block.
    pub payload_base: usize,
}

#[cfg(all(feature = "alloc", feature = "ed25519"))]
impl SigningPlan {
    /// Checks `file` (a plain, digests or signed record; its digests must
    /// match) and lays out the signed record's fields, as [`sign_model_aligned`].
    pub fn new(file: &[u8], key: &[u8; KEY_LEN], version: u64, target: &str, align: Option<u64>) -> Result<Self> {
        use alloc::vec::Vec;
        let m = super::Model::parse_verified(file)?;
        if m.kind() == super::Kind::Shard {
            // A shard is checked against its manifest; the manifest is what a signer signs.
            return fail(CoreRule::SchemaHash, 8);
        }
        let block_at = m.directory_offset();
        let block = file.get(block_at..).unwrap_or(&[]);
        let digests: Vec<u8> = match m.digests() {
            Some(d) => d.as_bytes().to_vec(),
            None => m.directory().iter().flat_map(|t| crate::digest::sha256(t.bytes())).collect(),
        };
        let metadata: Vec<(&str, &str)> = m.metadata().iter().collect();
        let align = match align {
            Some(a) => Some((a, 0)),
            None => m.metadata().padding_key().then(|| (4096, crate::bytes::u64_from(m.payload_start() % 4096))),
        };
        let head = SignedHead { key, version, target, metadata: &metadata, digests: &digests, align };
        let mut bytes = alloc::vec![0u8; head.len(block)?];
        head.write(block, &mut bytes)?;
        Ok(SigningPlan { head: bytes, block_at, payload_base: m.payload_start().saturating_sub(block_at) })
    }

    /// The signed message, with `input` the file the plan was made from.
    pub fn message(&self, input: &[u8]) -> alloc::vec::Vec<u8> {
        let [a, b] = signed_message(&self.head, self.head.len());
        let prefix = input.get(self.block_at..self.block_at.saturating_add(self.payload_base)).unwrap_or(&[]);
        [a, b, prefix].concat()
    }

    /// Signs the message with `sign` and writes the signature into the head.
    pub fn sign(&mut self, input: &[u8], sign: impl FnOnce(&[u8]) -> [u8; SIGNATURE_LEN]) -> Result<()> {
        let sig = sign(&self.message(input));
        put_signature(&mut self.head, &sig)
    }
}
