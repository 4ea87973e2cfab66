//! A model file's digests checked (step 9d of spec/model-file.md): in
//! memory, or through the read callback and one chunk buffer.

#[cfg(feature = "ed25519")]
use core::ffi::c_char;
use core::ffi::c_int;

use kiln_model::source::Options;
use kiln_model::{self as model, Kind, Model};
use kiln_nostd::Parser;

use crate::source::{callback, fail_of, kiln_source};
use crate::*;

/// `kiln_model_verify` / `kiln_source_verify_model` flag: do not hash the
/// payloads (step 9d is skipped, nothing else): every other rule still
/// holds, and a flipped payload byte that breaks no other rule is accepted.
pub const KILN_VERIFY_SKIP_DIGESTS: u32 = 1;

/// `kiln_verified.record`: not a model file (a plain directory block).
pub const KILN_RECORD_NONE: u32 = 0;
/// `kiln_verified.record`: a plain model record (metadata, block; no digests).
pub const KILN_RECORD_PLAIN: u32 = 1;
/// `kiln_verified.record`: a digests record (metadata, a SHA-256 per tensor, block).
pub const KILN_RECORD_DIGESTS: u32 = 2;
/// `kiln_verified.record`: a shard record of a sharded model (checked alone).
pub const KILN_RECORD_SHARD: u32 = 3;
/// `kiln_verified.record`: a signed record (a key, a signature, a release, digests, block).
pub const KILN_RECORD_SIGNED: u32 = 4;

/// What `kiln_model_verify` and `kiln_source_verify_model` found in an
/// accepted input (all zero on failure).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_verified {
    /// The record type: `KILN_RECORD_NONE` .. `KILN_RECORD_SIGNED`.
    pub record: u32,
    /// True when every tensor's payload was hashed and matched its digest;
    /// false for an input without digests or with `KILN_VERIFY_SKIP_DIGESTS`.
    pub digests_checked: bool,
    /// Number of tensors.
    pub tensor_count: usize,
    /// Where the directory block starts (0 for a plain directory).
    pub block_offset: u64,
    /// The block's length in bytes.
    pub block_len: u64,
}

const NONE: kiln_verified =
    kiln_verified { record: KILN_RECORD_NONE, digests_checked: false, tensor_count: 0, block_offset: 0, block_len: 0 };

fn record_of(kind: Option<Kind>) -> u32 {
    match kind {
        Some(Kind::Plain) => KILN_RECORD_PLAIN,
        Some(Kind::Digests) => KILN_RECORD_DIGESTS,
        Some(Kind::Shard) => KILN_RECORD_SHARD,
        Some(Kind::Signed) => KILN_RECORD_SIGNED,
        _ => KILN_RECORD_NONE,
    }
}

/// What an accepted model file was: its record type and block.
fn verified_of(m: &Model<'_>, digests_checked: bool) -> kiln_verified {
    let dir = m.directory();
    kiln_verified {
        record: record_of(Some(m.kind())),
        digests_checked,
        tensor_count: dir.len(),
        block_offset: u64_from(dir.start()),
        block_len: u64_from(dir.end().saturating_sub(dir.start())),
    }
}

/// True unless `flags` holds a bit this library does not know.
fn skip_of(flags: u32) -> Result<bool, Fail> {
    if flags & !KILN_VERIFY_SKIP_DIGESTS != 0 {
        return Err(Fail::Api(KILN_ERR_ARGUMENT));
    }
    Ok(flags & KILN_VERIFY_SKIP_DIGESTS != 0)
}

/// `kiln_validate` with the digests: `data[0..len]` by content, a model
/// file (spec/model-file.md) as one, anything else as a standalone tensor
/// directory, and for a model file with a digest table (a digests or shard
/// record) every tensor's payload hashed (SHA-256) and compared with its
/// digest. A mismatch is `KILN_DIGEST`, `err->offset` the absolute offset
/// of the first payload byte of the first tensor (in descriptor order)
/// whose payload differs, rule `"PayloadDigest"`. Faults of steps 1 to 9
/// win over it, and it wins over the gap, element and trailing faults
/// (the spec's order). A file without digests validates exactly as with
/// `kiln_validate`. `flags`: 0, or `KILN_VERIFY_SKIP_DIGESTS` (the verdict
/// is then `kiln_validate`'s); another bit is `KILN_ERR_ARGUMENT`. `*out`
/// (may be NULL) says what was checked. Nothing is allocated.
///
/// # Safety
/// `data[0..len]` readable; `out` and `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_model_verify(
    data: *const u8,
    len: usize,
    flags: u32,
    out: *mut kiln_verified,
    err: *mut kiln_error,
) -> c_int {
    put(out, NONE);
    let r = (|| {
        let skip = skip_of(flags)?;
        // SAFETY: the caller's buffer, per the contract.
        let buf = unsafe { slice(data, len) }?;
        let found = if model::reads_as_model(buf) {
            let m = if skip { Model::parse(buf) } else { Model::parse_verified(buf) }?;
            verified_of(&m, !skip && m.digests().is_some())
        } else {
            let dir = Parser::new().parse(buf)?;
            kiln_verified { tensor_count: dir.len(), block_len: u64_from(dir.end()), ..NONE }
        };
        put(out, found);
        Ok(())
    })();
    report(err, r)
}

/// `kiln_model_verify` through the read callback: the model file (or plain
/// directory block) in `*src`, checked with the same verdict (code, rule,
/// offset from the start of the source), the payloads streamed through
/// one chunk buffer `chunk[0..chunk_len]` of any nonzero length (a tensor
/// may span many chunks; 64 bytes works). Digests are checked by default
/// (`flags` 0); `KILN_VERIFY_SKIP_DIGESTS` skips only the hashing (then only
/// the bytes a rule reads are read, as `kiln_source_verify` does).
///
/// Memory is the caller's: `prefix[0..prefix_len]` first gets the file's
/// first `prefix_len` bytes in one read, and must hold the fields before
/// the block (frame, metadata with its padding key, digest table) plus
/// the block's 64-byte header, and also 32 bytes per tensor plus the
/// directory prefix (64 + 128 per tensor + names, rounded up to 64). Too
/// short is `KILN_ERR_BUFFER_TOO_SMALL` with `err->needed` the bytes needed
/// (the larger of the two; the source's length when a length word before
/// the block runs past the source). The SHA-256 state
/// (about 112 bytes) is on the stack; nothing is allocated. A failed read
/// is `KILN_ERR_READ`. `*out` (may be NULL) says what was checked.
///
/// # Safety
/// `src` readable with a valid callback; `prefix[0..prefix_len]` and
/// `chunk[0..chunk_len]` writable; `out` and `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_source_verify_model(
    src: *const kiln_source,
    prefix: *mut u8,
    prefix_len: usize,
    chunk: *mut u8,
    chunk_len: usize,
    flags: u32,
    out: *mut kiln_verified,
    err: *mut kiln_error,
) -> c_int {
    put(out, NONE);
    let r = (|| {
        let skip = skip_of(flags)?;
        let cb = callback(src)?;
        // SAFETY: the caller's buffers, per the contract.
        let prefix = unsafe { slice_mut(prefix, prefix_len) }?;
        // SAFETY: as above.
        let chunk = unsafe { slice_mut(chunk, chunk_len) }?;
        let options = if skip { Options::new().skip_digests() } else { Options::new() };
        let s = options.verify_model(cb, prefix, chunk).map_err(fail_of)?;
        put(
            out,
            kiln_verified {
                record: record_of(s.kind),
                digests_checked: s.digests_checked,
                tensor_count: usize_from_u32(s.block.header.tensor_count),
                block_offset: s.block_start,
                block_len: s.block.block_len,
            },
        );
        Ok(())
    })();
    report(err, r)
}

/// The key a reader trusts and what it requires of a signed model's
/// release, for `kiln_model_verify_signed`.
#[cfg(feature = "ed25519")]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_trust {
    /// The trusted Ed25519 public key (RFC 8032's 32-byte encoding).
    pub key: [u8; 32],
    /// NULL: any target; otherwise the NUL-terminated target name the
    /// model's release must carry (the device or product).
    pub target: *const c_char,
    /// True: the release version must be above `newer_than` (the running
    /// model's version: an older or equal one is a rollback).
    pub check_version: bool,
    /// The version a model must be newer than, when `check_version`.
    pub newer_than: u64,
}

/// A signed model's release and signer, as `kiln_model_verify_signed`
/// accepted them (all zero on failure).
#[cfg(feature = "ed25519")]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_release {
    /// The release version.
    pub version: u64,
    /// The target name (bytes in the caller's buffer, not NUL-terminated).
    pub target: kiln_str,
    /// The signer's public key.
    pub key: [u8; 32],
}

/// `kiln_model_verify` for a signed model file (spec/model-file.md,
/// "Signed models"): the record's key must be `trust->key`, its release
/// must name `trust->target` (unless NULL) and carry a version above
/// `trust->newer_than` (when `trust->check_version`), its Ed25519
/// signature must verify over the signed message (step 9s: every byte
/// before the payload region but the signature's own), then every
/// tensor's digest (step 9d) and every other rule, so one changed byte
/// anywhere fails it. Each of those faults is `KILN_SIGNATURE` (rules
/// `"SignatureKey"`, `"ReleaseTarget"`, `"ReleaseVersion"`,
/// `"SignatureInvalid"`; a model that is not signed: `"NotSigned"`);
/// the key and release are checked before the signature, and the
/// signature before the digests. A `trust->key` that is not a usable
/// Ed25519 key (one of small order, which would accept forged
/// signatures) is `KILN_ERR_ARGUMENT`. `*out` and `*release` (each may be
/// NULL) say what was accepted. Nothing is allocated; the check is
/// ed25519-dalek's, streamed over the signed bytes where they lie.
///
/// # Safety
/// `data[0..len]` readable; `trust` NULL or a readable `kiln_trust` whose
/// `target` is NULL or NUL-terminated; `out`, `release` and `err` NULL or writable.
#[cfg(feature = "ed25519")]
#[no_mangle]
pub unsafe extern "C" fn kiln_model_verify_signed(
    data: *const u8,
    len: usize,
    trust: *const kiln_trust,
    out: *mut kiln_verified,
    release: *mut kiln_release,
    err: *mut kiln_error,
) -> c_int {
    put(out, NONE);
    put(release, kiln_release { version: 0, target: kiln_str { ptr: core::ptr::null(), len: 0 }, key: [0; 32] });
    let r = (|| {
        if trust.is_null() {
            return Err(Fail::Api(KILN_ERR_NULL));
        }
        // SAFETY: not NULL; the caller passes a readable kiln_trust.
        let t = unsafe { trust.read() };
        let mut policy = model::Trust::new(&t.key).ok_or(Fail::Api(KILN_ERR_ARGUMENT))?;
        if !t.target.is_null() {
            // SAFETY: NUL-terminated, per the contract.
            let target = unsafe { c_string(t.target) }?;
            policy = policy.target(core::str::from_utf8(target).map_err(|_| Fail::Api(KILN_ERR_ARGUMENT))?);
        }
        if t.check_version {
            policy = policy.newer_than(t.newer_than);
        }
        // SAFETY: the caller's buffer, per the contract.
        let buf = unsafe { slice(data, len) }?;
        let m = Model::parse_trusted(buf, &policy)?;
        put(out, verified_of(&m, true));
        if let Some(sig) = m.signature() {
            let target = kiln_str { ptr: sig.release.target.as_ptr().cast::<c_char>(), len: sig.release.target.len() };
            put(release, kiln_release { version: sig.release.version, target, key: *sig.key });
        }
        Ok(())
    })();
    report(err, r)
}
