//! A directory block that arrives in pieces (an over-the-air update, a
//! socket): `kiln_nostd::Incremental` in caller memory.

use core::ffi::c_int;
use core::mem::{align_of, size_of};

use kiln_nostd::incremental::Borrowed;
use kiln_nostd::{incremental::Progress, Incremental};

use crate::dir::{self, kiln_dir, kiln_options, store, View};
use crate::*;

/// Words of opaque storage in a `kiln_incremental`.
pub const KILN_INCREMENTAL_WORDS: usize = 40;

/// `kiln_incremental_feed` progress: the 64-byte header is not complete.
pub const KILN_PROGRESS_HEADER: c_int = 0;
/// The header is checked; the directory prefix is still arriving.
pub const KILN_PROGRESS_PREFIX: c_int = 1;
/// This chunk completed the directory prefix, which is valid:
/// `kiln_incremental_directory` shows the tensor table. Reported once.
pub const KILN_PROGRESS_DIRECTORY: c_int = 2;
/// Payload bytes are streaming past.
pub const KILN_PROGRESS_PAYLOAD: c_int = 3;
/// The whole block is in and valid so far; `kiln_incremental_finish` gives the verdict.
pub const KILN_PROGRESS_COMPLETE: c_int = 4;

/// An incremental validator for one standalone tensor directory block (not
/// a model file): plain memory of fixed size, filled by
/// `kiln_incremental_init`, no destructor. It keeps the directory prefix
/// (header, descriptors, name heap) in the caller's prefix buffer and checks
/// payload bytes as they stream past without copying them. Its verdict is
/// exactly `kiln_validate`'s on all the bytes fed (code, offset, rule).
#[repr(C)]
pub struct kiln_incremental {
    /// Opaque.
    pub opaque: [u64; KILN_INCREMENTAL_WORDS],
}

/// What `kiln_incremental_finish` reports for an accepted block.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_summary {
    /// Length of the block in bytes.
    pub block_len: u64,
    /// Where the payload region starts (the directory prefix's length).
    pub payload_base: u64,
    /// Number of tensors.
    pub tensor_count: u32,
}

const MAGIC: u32 = 0x4B49_4E43; // "KINC"

#[repr(C)]
struct State<'m, 's> {
    magic: u32,
    v: Incremental<Borrowed<'m, 's>>,
}

const _: () = assert!(size_of::<State<'static, 'static>>() <= size_of::<kiln_incremental>(), "too small");
const _: () = assert!(align_of::<State<'static, 'static>>() <= align_of::<kiln_incremental>(), "underaligned");

fn state<'x>(v: *mut kiln_incremental) -> Result<&'x mut Incremental<Borrowed<'static, 'static>>, Fail> {
    if v.is_null() {
        return Err(Fail::Api(KILN_ERR_NULL));
    }
    // SAFETY: not NULL; at least 4 bytes, 8-aligned.
    if unsafe { v.cast::<u32>().read() } != MAGIC {
        return Err(Fail::Api(KILN_ERR_HANDLE));
    }
    // SAFETY: the magic says kiln_incremental_init stored a State here.
    Ok(unsafe { &mut (*v.cast::<State<'static, 'static>>()).v })
}

fn state_ref<'x>(v: *const kiln_incremental) -> Result<&'x Incremental<Borrowed<'static, 'static>>, Fail> {
    if v.is_null() {
        return Err(Fail::Api(KILN_ERR_NULL));
    }
    // SAFETY: not NULL; at least 4 bytes, 8-aligned.
    if unsafe { v.cast::<u32>().read() } != MAGIC {
        return Err(Fail::Api(KILN_ERR_HANDLE));
    }
    // SAFETY: the magic says kiln_incremental_init stored a State here.
    Ok(unsafe { &(*v.cast::<State<'static, 'static>>()).v })
}

fn progress_code(p: Progress) -> c_int {
    match p {
        Progress::Header => KILN_PROGRESS_HEADER,
        Progress::Prefix => KILN_PROGRESS_PREFIX,
        Progress::Directory => KILN_PROGRESS_DIRECTORY,
        Progress::Payload => KILN_PROGRESS_PAYLOAD,
        Progress::Complete => KILN_PROGRESS_COMPLETE,
    }
}

/// Starts a validator in `*v` that keeps the directory prefix in
/// `prefix[0..prefix_len]` (it needs 64 + 128 per tensor + the name heap,
/// rounded up to 64: `kiln_prefix_len`; a longer prefix is LIMIT
/// `PrefixBufferTooSmall` once the header is in). `opts` may be NULL; its
/// caps, scratch and seed apply as for `kiln_parse_ex`. The buffers must stay
/// alive, and untouched by the caller, while `*v` is used.
///
/// # Safety
/// `v` writable; `prefix[0..prefix_len]` writable; `opts` NULL or readable (scratch writable).
#[no_mangle]
pub unsafe extern "C" fn kiln_incremental_init(
    v: *mut kiln_incremental,
    prefix: *mut u8,
    prefix_len: usize,
    opts: *const kiln_options,
) -> c_int {
    let r = (|| {
        if v.is_null() {
            return Err(Fail::Api(KILN_ERR_NULL));
        }
        // SAFETY: the caller's buffers, per the contract.
        let prefix: &'static mut [u8] = unsafe { slice_mut(prefix, prefix_len) }?;
        // SAFETY: as above.
        let (opts, scratch) = unsafe { dir::options(opts) }?;
        let mut inc = Incremental::new(prefix);
        if let Some(o) = opts {
            inc = inc.limits(dir::limits(o)).hash_seed(o.hash_seed);
        }
        if let Some(s) = scratch {
            inc = inc.scratch(s);
        }
        // SAFETY: not NULL; large and aligned enough (the assertions above).
        unsafe { v.cast::<State<'static, 'static>>().write(State { magic: MAGIC, v: inc }) };
        Ok(())
    })();
    if r.is_err() && !v.is_null() {
        // SAFETY: not NULL; the magic is the first word.
        unsafe { v.cast::<u32>().write(0) };
    }
    report(core::ptr::null_mut(), r)
}

/// Takes the next chunk (any size, 0 included). Returns `KILN_OK` with
/// `*progress` (may be NULL) set to a `KILN_PROGRESS_*` value, or the
/// format error at the first chunk after which the verdict is certain: no
/// byte still to come could hold a fault the check order puts first (with
/// `*err` filled; it is the verdict for the complete block, unless the
/// stream ends early: `kiln_incremental_finish` then reports EOF).
///
/// # Safety
/// `v` a `kiln_incremental` filled by `kiln_incremental_init`; `chunk[0..len]` readable;
/// `progress` and `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_incremental_feed(
    v: *mut kiln_incremental,
    chunk: *const u8,
    len: usize,
    progress: *mut c_int,
    err: *mut kiln_error,
) -> c_int {
    let r = state(v).and_then(|inc| {
        // SAFETY: the caller's chunk, per the contract.
        let chunk = unsafe { slice(chunk, len) }?;
        let p = inc.feed(chunk)?;
        put(progress, progress_code(p));
        Ok(())
    });
    report(err, r)
}

/// The block offset of the next byte the verdict depends on: the bytes
/// before it may be passed over with `kiln_incremental_skip` instead of fed
/// (payloads without byte rules). UINT64_MAX when no further byte matters
/// (or for an invalid handle).
///
/// # Safety
/// `v` NULL or a `kiln_incremental`.
#[no_mangle]
pub unsafe extern "C" fn kiln_incremental_next_needed(v: *const kiln_incremental) -> u64 {
    state_ref(v).map_or(u64::MAX, |inc| inc.next_needed())
}

/// Passes over up to `n` bytes the verdict does not depend on (at most up
/// to `kiln_incremental_next_needed`); `*skipped` (may be NULL) gets how many.
///
/// # Safety
/// `v` a filled `kiln_incremental`; `skipped` and `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_incremental_skip(
    v: *mut kiln_incremental,
    n: u64,
    skipped: *mut u64,
    err: *mut kiln_error,
) -> c_int {
    put(skipped, 0);
    let r = state(v).and_then(|inc| {
        put(skipped, inc.skip(n)?);
        Ok(())
    });
    report(err, r)
}

/// Bytes taken so far.
///
/// # Safety
/// `v` NULL or a `kiln_incremental`.
#[no_mangle]
pub unsafe extern "C" fn kiln_incremental_consumed(v: *const kiln_incremental) -> u64 {
    state_ref(v).map_or(0, |inc| inc.consumed())
}

/// Once the directory prefix is in and valid (progress
/// `KILN_PROGRESS_DIRECTORY` or later): the tensor table into `*dir`
/// (names, dtypes, shapes, offsets; `kiln_tensor.data` is NULL, no payload
/// is kept). `KILN_ERR_NOT_READY` before. `*dir` is valid until the next
/// call on `*v`.
///
/// # Safety
/// `v` a filled `kiln_incremental`; `dir` writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_incremental_directory(v: *const kiln_incremental, dir: *mut kiln_dir) -> c_int {
    let r = state_ref(v).and_then(|inc| {
        if dir.is_null() {
            return Err(Fail::Api(KILN_ERR_NULL));
        }
        let d = inc.directory().ok_or(Fail::Api(KILN_ERR_NOT_READY))?;
        store(dir, View::Prefix(d));
        Ok(())
    });
    if r.is_err() {
        dir::invalidate(dir);
    }
    report(core::ptr::null_mut(), r)
}

/// Ends the stream: the verdict on all the bytes fed, exactly
/// `kiln_validate`'s (code, offset, rule) for a standalone directory block;
/// `*summary` (may be NULL) on success. `*v` is spent afterwards
/// (`KILN_ERR_HANDLE` until initialised again).
///
/// # Safety
/// `v` a filled `kiln_incremental`; `summary` and `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_incremental_finish(
    v: *mut kiln_incremental,
    summary: *mut kiln_summary,
    err: *mut kiln_error,
) -> c_int {
    let r = state(v).and_then(|_| {
        // SAFETY: a valid State (checked); it is read out once and its magic cleared.
        let st = unsafe { v.cast::<State<'static, 'static>>().read() };
        // SAFETY: not NULL (checked).
        unsafe { v.cast::<u32>().write(0) };
        let s = st.v.finish()?;
        put(
            summary,
            kiln_summary { block_len: s.block_len, payload_base: s.payload_base, tensor_count: s.header.tensor_count },
        );
        Ok(())
    });
    report(err, r)
}

/// The prefix memory a block needs, from its first bytes (`len` of them, at
/// least 64 to know): `*needed` (may be NULL) gets 64 + 128 per tensor + the
/// name heap, rounded up to 64; 0 when fewer than 64 bytes are given. A
/// header that fails the checks is its format error.
///
/// # Safety
/// `header[0..len]` readable; `needed` and `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_prefix_len(
    header: *const u8,
    len: usize,
    needed: *mut u64,
    err: *mut kiln_error,
) -> c_int {
    put(needed, 0);
    // SAFETY: the caller's buffer, per the contract.
    let r = unsafe { slice(header, len) }.and_then(|h| {
        let n = Incremental::prefix_len(h, &kiln_nostd::Limits::DEFAULT)?;
        put(needed, n.map_or(0, u64_from));
        Ok(())
    });
    report(err, r)
}

#[cfg(test)]
mod tests {
    /// How much of the opaque storage the validator uses on this host.
    #[test]
    fn state_fits() {
        std::println!(
            "Incremental: {} of {} bytes",
            core::mem::size_of::<super::State<'static, 'static>>(),
            core::mem::size_of::<super::kiln_incremental>()
        );
    }
}
