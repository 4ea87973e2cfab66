//! Borrowing the bytes of any Python object that exports a contiguous buffer
//! (`bytes`, `bytearray`, `memoryview`, `mmap.mmap`, a NumPy array).
//!
//! `PyBUF_SIMPLE` is asked for (one run of bytes, whatever the item format):
//! PyO3's `PyUntypedBuffer` asks for `PyBUF_FULL_RO` and refuses an export
//! without a shape, which some exporters give (tried: kiln's own tests then
//! fail with "shape is null"). `PyObject_GetBuffer`, `PyBuffer_Release` and
//! `Py_buffer`'s layout are in the stable ABI from CPython 3.11, the wheel's
//! floor (`abi3-py311`), so they are declared here directly. This module
//! and the map that checks a streamed save (`write_streamed`) are the
//! crate's only `unsafe` code.

use std::ffi::{c_char, c_int, c_void};

use pyo3::ffi;
use pyo3::prelude::*;

/// `Py_buffer`, as the stable ABI (CPython 3.11+) lays it out.
#[repr(C)]
struct RawBuffer {
    buf: *mut c_void,
    obj: *mut ffi::PyObject,
    len: ffi::Py_ssize_t,
    itemsize: ffi::Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut ffi::Py_ssize_t,
    strides: *mut ffi::Py_ssize_t,
    suboffsets: *mut ffi::Py_ssize_t,
    internal: *mut c_void,
}

extern "C" {
    fn PyObject_GetBuffer(obj: *mut ffi::PyObject, view: *mut RawBuffer, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}

/// `PyBUF_SIMPLE`: one C-contiguous run of bytes; exporters that cannot
/// give one (a strided memoryview) raise `BufferError`.
const PYBUF_SIMPLE: c_int = 0;

/// A held buffer export. While it lives, the exporter keeps the bytes where
/// they are: a `bytearray` refuses to resize and an `mmap` to close.
pub struct Held {
    // Boxed: the struct's address stays put until it is released.
    raw: Box<RawBuffer>,
}

impl Held {
    /// Asks `obj` for its bytes.
    pub fn new(obj: &Bound<'_, PyAny>) -> PyResult<Held> {
        let mut raw = Box::new(RawBuffer {
            buf: std::ptr::null_mut(),
            obj: std::ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: std::ptr::null_mut(),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            suboffsets: std::ptr::null_mut(),
            internal: std::ptr::null_mut(),
        });
        // SAFETY: `obj` is a live object (we hold the GIL through `Bound`),
        // `raw` points at writable memory shaped like `Py_buffer`.
        let rc = unsafe { PyObject_GetBuffer(obj.as_ptr(), &mut *raw, PYBUF_SIMPLE) };
        if rc != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        if raw.len < 0 || (raw.buf.is_null() && raw.len != 0) {
            // SAFETY: the export succeeded, so it must be released once.
            unsafe { PyBuffer_Release(&mut *raw) };
            return Err(pyo3::exceptions::PyBufferError::new_err("the object exported an invalid buffer"));
        }
        Ok(Held { raw })
    }

    /// The exported bytes.
    pub fn bytes(&self) -> &[u8] {
        let len = usize::try_from(self.raw.len).unwrap_or(0);
        if len == 0 {
            return &[];
        }
        // SAFETY: a successful PyBUF_SIMPLE export is `len` contiguous bytes
        // at `buf`, valid until PyBuffer_Release (in `drop`), which `&self`
        // outlives. Python code may write to a writable exporter's bytes
        // meanwhile only while holding the GIL; callers release the GIL
        // only for read-only exports (see `readonly`).
        unsafe { std::slice::from_raw_parts(self.raw.buf.cast::<u8>(), len) }
    }

    /// True when the exporter promised the bytes cannot change.
    pub fn readonly(&self) -> bool {
        self.raw.readonly != 0
    }

    /// Where the bytes start, for alignment decisions.
    pub fn address(&self) -> usize {
        self.raw.buf as usize
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: exactly one release per successful export, with the GIL.
        Python::attach(|_| unsafe { PyBuffer_Release(&mut *self.raw) });
    }
}
