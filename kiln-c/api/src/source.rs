//! Ranged reading through a C callback: a directory block in SPI flash, on
//! an SD card, in a file larger than RAM (`kiln_model::source`).

use core::ffi::{c_int, c_void};

use kiln_model::source::{self, Opened, ReadAt, SourceError};

use crate::dir::{self, kiln_dir, store, View};
use crate::*;

/// Reads `len` bytes at `offset` of the source into `buf`; returns 0 on
/// success, anything else on failure (reported as `KILN_ERR_READ` with
/// `kiln_error.read_status` set to it). Never asked for bytes past the
/// source's length.
pub type kiln_read_fn = Option<unsafe extern "C" fn(ctx: *mut c_void, offset: u64, buf: *mut u8, len: usize) -> c_int>;

/// A source of bytes: a callback, its context, and the length.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_source {
    /// The read callback (must not be NULL).
    pub read_at: kiln_read_fn,
    /// Passed to every call of `read_at`.
    pub ctx: *mut c_void,
    /// The source's length in bytes: a standalone block must fill it (bytes
    /// past the block are TRAILING, a shorter source is EOF).
    pub len: u64,
}

pub(crate) struct Callback {
    read: unsafe extern "C" fn(*mut c_void, u64, *mut u8, usize) -> c_int,
    ctx: *mut c_void,
    len: u64,
}

impl ReadAt for Callback {
    type Error = c_int;
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), c_int> {
        // SAFETY: the caller's callback, with a buffer of exactly `buf.len()` writable bytes.
        match unsafe { (self.read)(self.ctx, offset, buf.as_mut_ptr(), buf.len()) } {
            0 => Ok(()),
            status => Err(status),
        }
    }
    fn len(&mut self) -> Result<u64, c_int> {
        Ok(self.len)
    }
}

pub(crate) fn callback(src: *const kiln_source) -> Result<Callback, Fail> {
    // SAFETY: NULL or readable, per the contract of the exported functions.
    let s = unsafe { src.as_ref() }.ok_or(Fail::Api(KILN_ERR_NULL))?;
    let read = s.read_at.ok_or(Fail::Api(KILN_ERR_NULL))?;
    Ok(Callback { read, ctx: s.ctx, len: s.len })
}

pub(crate) fn fail_of(e: SourceError<c_int>) -> Fail {
    match e {
        SourceError::Read(status) => Fail::Read(status),
        SourceError::Kiln(e) => Fail::Kiln(e),
        SourceError::BufferTooSmall { needed } => Fail::TooSmall(needed),
        SourceError::NoSuchTensor => Fail::Api(KILN_ERR_NOT_FOUND),
        SourceError::RowRange | SourceError::RowsUnaligned => Fail::Api(KILN_ERR_ROWS),
        _ => Fail::Api(KILN_ERR_ARGUMENT),
    }
}

/// Fully validates the standalone directory block in `*src` through one
/// chunk buffer of any nonzero length, reading only the bytes a rule reads
/// (the header, the directory prefix, gap bytes, bool tensors, the last
/// byte of odd packed tensors). The verdict is `kiln_validate`'s on the
/// source's bytes (code, offset, rule); a prefix buffer shorter than the
/// directory prefix is `KILN_ERR_BUFFER_TOO_SMALL` (`err->needed`), a
/// failed read `KILN_ERR_READ`. A model file (frame, metadata, digests)
/// is not a standalone block: `kiln_source_verify_model` checks one, its
/// digests included.
///
/// # Safety
/// `src` readable with a valid callback; `prefix[0..prefix_len]` and `chunk[0..chunk_len]`
/// writable; `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_source_verify(
    src: *const kiln_source,
    prefix: *mut u8,
    prefix_len: usize,
    chunk: *mut u8,
    chunk_len: usize,
    err: *mut kiln_error,
) -> c_int {
    let r = (|| {
        let cb = callback(src)?;
        // SAFETY: the caller's buffers, per the contract.
        let prefix = unsafe { slice_mut(prefix, prefix_len) }?;
        // SAFETY: as above.
        let chunk = unsafe { slice_mut(chunk, chunk_len) }?;
        source::verify(cb, prefix, chunk).map(|_| ()).map_err(fail_of)
    })();
    report(err, r)
}

/// Opens the standalone directory block in `*src`: reads the header and the
/// directory prefix (two reads) into `prefix[0..prefix_len]`, checks every
/// rule the prefix decides, and fills `*dir` with the tensor table
/// (`kiln_tensor.data` is NULL; `kiln_tensor.offset` is the payload's source
/// offset). Payload bytes are read by `kiln_source_read_tensor` and
/// `kiln_source_read_rows` (which check the bool and packed-tail bytes they
/// copy); gap bytes only by `kiln_source_verify`. `*dir` points into `prefix`.
///
/// # Safety
/// `src` readable with a valid callback; `prefix[0..prefix_len]` writable and kept while
/// `*dir` is used; `dir` writable; `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_source_open(
    src: *const kiln_source,
    prefix: *mut u8,
    prefix_len: usize,
    dir: *mut kiln_dir,
    err: *mut kiln_error,
) -> c_int {
    let r = (|| {
        if dir.is_null() {
            return Err(Fail::Api(KILN_ERR_NULL));
        }
        let cb = callback(src)?;
        // SAFETY: the caller's buffer, per the contract.
        let prefix: &'static mut [u8] = unsafe { slice_mut(prefix, prefix_len) }?;
        let opened = source::open(cb, prefix).map_err(fail_of)?;
        store(dir, View::Source(opened));
        Ok(())
    })();
    if r.is_err() {
        dir::invalidate(dir);
    }
    report(err, r)
}

fn opened(dir: *const kiln_dir) -> Result<Opened<'static>, Fail> {
    match dir::view(dir)? {
        View::Source(o) => Ok(*o),
        _ => Err(Fail::Api(KILN_ERR_HANDLE)),
    }
}

/// Copies tensor `index`'s payload (wire bytes, little-endian) from `*src`
/// into `out` with one read; `*written` (may be NULL) gets its length. `*dir`
/// must come from `kiln_source_open` on the same source.
///
/// # Safety
/// `src` readable with a valid callback; `dir` a filled `kiln_dir`; `out[0..out_len]`
/// writable; `written` and `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_source_read_tensor(
    src: *const kiln_source,
    dir: *const kiln_dir,
    index: usize,
    out: *mut u8,
    out_len: usize,
    written: *mut usize,
    err: *mut kiln_error,
) -> c_int {
    put(written, 0);
    let r = (|| {
        let o = opened(dir)?;
        let cb = callback(src)?;
        // SAFETY: the caller's buffer, per the contract.
        let out = unsafe { slice_mut(out, out_len) }?;
        let n = source::read_tensor(cb, &o, index, out).map_err(fail_of)?;
        put(written, n);
        Ok(())
    })();
    report(err, r)
}

/// Copies rows `row_start..row_end` (along dimension 0) of tensor `index`
/// from `*src` into `out` with one read; `*written` (may be NULL) gets the
/// byte count. Packed rows must start and end on byte boundaries, opaque
/// rows must be whole blocks (`KILN_ERR_ROWS`).
///
/// # Safety
/// As for `kiln_source_read_tensor`.
#[no_mangle]
pub unsafe extern "C" fn kiln_source_read_rows(
    src: *const kiln_source,
    dir: *const kiln_dir,
    index: usize,
    row_start: u64,
    row_end: u64,
    out: *mut u8,
    out_len: usize,
    written: *mut usize,
    err: *mut kiln_error,
) -> c_int {
    put(written, 0);
    let r = (|| {
        let o = opened(dir)?;
        let cb = callback(src)?;
        // SAFETY: the caller's buffer, per the contract.
        let out = unsafe { slice_mut(out, out_len) }?;
        let n = source::read_rows(cb, &o, index, row_start..row_end, out).map_err(fail_of)?;
        put(written, n);
        Ok(())
    })();
    report(err, r)
}
