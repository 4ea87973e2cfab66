//! Model files and directories in memory: validate, parse into a handle,
//! the tensor table, name lookups, views, copies, dequantization, metadata.

use core::ffi::{c_char, c_int};
use core::mem::{align_of, size_of};

use kiln_model::source::Opened;
use kiln_model::{self as model, Metadata, Model};
use kiln_nostd::dequant::{dequantize_into, DequantError};
use kiln_nostd::{
    directory::NameIndex,
    dtype::{Element, ViewError},
    DType, Directory, Limits, Parser, Tensor,
};

use crate::*;

/// Words of opaque storage in a `kiln_dir`.
pub const KILN_DIR_WORDS: usize = 32;

/// A checked directory (with its metadata, for a model file): the tensor
/// table and the name index, borrowed from the caller's memory. Filled by
/// `kiln_parse`, `kiln_parse_ex`, `kiln_source_open` or
/// `kiln_incremental_directory`; plain memory of fixed size, no destructor.
/// It points into the buffers given to that call (data, scratch, prefix),
/// which must stay alive and unchanged while it is used. A failed call
/// leaves it invalid (`KILN_ERR_HANDLE` from every accessor), as does
/// zero-initialisation.
#[repr(C)]
pub struct kiln_dir {
    /// Opaque.
    pub opaque: [u64; KILN_DIR_WORDS],
}

/// Caps, name scratch and hash seed for `kiln_parse_ex` and
/// `kiln_incremental_init`. Zero-initialise it for the defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_options {
    /// Name-index scratch, `scratch_len` u32 slots (4-byte aligned), or
    /// NULL. With at least `kiln_scratch_len(tensor_count)` slots, names are
    /// checked in linear time and the handle keeps an O(1) name index; with
    /// fewer, the check compares every pair and lookups scan. The verdict
    /// never depends on it. The handle keeps pointing into it.
    pub scratch: *mut u32,
    /// Slots in `scratch`.
    pub scratch_len: usize,
    /// Cap on tensor_count and metadata/list counts; 0: the default (`KILN_DEFAULT_CAP`).
    pub count_cap: u32,
    /// Cap on name_bytes and string lengths; 0: the default (`KILN_DEFAULT_CAP`).
    pub byte_cap: u32,
    /// Seeds the name hash (pass a random value for hostile input, so names
    /// cannot be crafted to collide). The verdict never depends on it.
    pub hash_seed: u64,
}

/// A string borrowed from the caller's buffer: UTF-8, NOT NUL-terminated.
/// `ptr` is NULL (and `len` 0) when there is none.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_str {
    /// First byte.
    pub ptr: *const c_char,
    /// Length in bytes.
    pub len: usize,
}

/// Quantization metadata (scheme 1: block scales; 2: scales and an outer
/// f32). Kiln checks it; `kiln_tensor_dequantize_f32` applies it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_quant {
    /// 0 (none), 1 (scales) or 2 (scales and outer).
    pub scheme: u16,
    /// The quantized dimension.
    pub axis: u16,
    /// Elements per scale.
    pub group_size: u32,
    /// Index of the scale tensor, or `KILN_NO_INDEX`.
    pub scale_index: u32,
    /// Index of the one-element f32 outer scale (scheme 2), or `KILN_NO_INDEX`.
    pub outer_index: u32,
}

/// One tensor of a checked directory.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_tensor {
    /// Position in descriptor order.
    pub index: usize,
    /// The name (ptr NULL for an unnamed tensor).
    pub name: kiln_str,
    /// The dtype's wire code (`KILN_DTYPE_F32`, ...).
    pub dtype: u16,
    /// The dtype's spec name (`"f32"`; `"opaque"` for 4096..32767), static, NUL-terminated.
    pub dtype_name: *const c_char,
    /// Rank, 0 to 8.
    pub rank: u32,
    /// The dimensions; slots at or past `rank` are 0.
    pub shape: [u64; 8],
    /// Number of elements (1 for a scalar).
    pub element_count: u64,
    /// Offset of the payload from the start of the payload region.
    pub byte_offset: u64,
    /// Absolute offset of the payload from the start of the caller's buffer
    /// (or source).
    pub offset: u64,
    /// Payload length in bytes.
    pub byte_length: u64,
    /// The payload's wire bytes (little-endian) in the caller's buffer; NULL
    /// when the directory came from `kiln_source_open` or an incremental
    /// validator (the payload is not in memory).
    pub data: *const u8,
    /// The layout name of an opaque dtype (ptr NULL otherwise).
    pub layout: kiln_str,
    /// The opaque block size in bytes (0 for other dtypes).
    pub block_size: u32,
    /// Quantization (scheme 0: none).
    pub quant: kiln_quant,
}

/// The directory as a whole.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct kiln_dir_info {
    /// Number of tensors.
    pub tensor_count: usize,
    /// Where the directory block starts in the caller's buffer (0 for a
    /// plain directory; after the metadata in a model file).
    pub block_offset: u64,
    /// Block length in bytes.
    pub block_len: u64,
    /// Absolute offset of the payload region.
    pub payload_offset: u64,
    /// Length of the payload region (payload_bytes).
    pub payload_len: u64,
    /// The tensors have names.
    pub named: bool,
    /// The buffer is a model file (a frame, metadata, then the block).
    pub is_model: bool,
    /// Lookups by name use the hash table in scratch (else a linear scan).
    pub hashed_index: bool,
    /// Payload bytes are in memory (`kiln_tensor.data` is set).
    pub has_payload: bool,
    /// Model files: metadata entries shown (the padding key is hidden).
    pub metadata_count: usize,
}

/// Wire codes of the dtypes.
pub const KILN_DTYPE_F64: u16 = 1;
/// `f32`.
pub const KILN_DTYPE_F32: u16 = 2;
/// `f16`.
pub const KILN_DTYPE_F16: u16 = 3;
/// `bf16`.
pub const KILN_DTYPE_BF16: u16 = 4;
/// `f8e4m3`.
pub const KILN_DTYPE_F8E4M3: u16 = 5;
/// `f8e5m2`.
pub const KILN_DTYPE_F8E5M2: u16 = 6;
/// `bool` (one byte, 0 or 1).
pub const KILN_DTYPE_BOOL: u16 = 7;
/// `i8`.
pub const KILN_DTYPE_I8: u16 = 8;
/// `u8`.
pub const KILN_DTYPE_U8: u16 = 9;
/// `i16`.
pub const KILN_DTYPE_I16: u16 = 10;
/// `u16`.
pub const KILN_DTYPE_U16: u16 = 11;
/// `i32`.
pub const KILN_DTYPE_I32: u16 = 12;
/// `u32`.
pub const KILN_DTYPE_U32: u16 = 13;
/// `i64`.
pub const KILN_DTYPE_I64: u16 = 14;
/// `u64`.
pub const KILN_DTYPE_U64: u16 = 15;
/// `i4` (packed, low nibble first).
pub const KILN_DTYPE_I4: u16 = 16;
/// `u4` (packed, low nibble first).
pub const KILN_DTYPE_U4: u16 = 17;
/// `e2m1` (OCP MX FP4, packed).
pub const KILN_DTYPE_E2M1: u16 = 18;
/// `e8m0` (OCP MX scale byte).
pub const KILN_DTYPE_E8M0: u16 = 19;

/// The dtype constants in code order (kiln.h needs them as literals): the
/// build fails when the core's dtype table gains a dtype that kiln.h lacks
/// or a code differs.
const DTYPE_CODES: [u16; DType::closed_set().len()] = [
    KILN_DTYPE_F64,
    KILN_DTYPE_F32,
    KILN_DTYPE_F16,
    KILN_DTYPE_BF16,
    KILN_DTYPE_F8E4M3,
    KILN_DTYPE_F8E5M2,
    KILN_DTYPE_BOOL,
    KILN_DTYPE_I8,
    KILN_DTYPE_U8,
    KILN_DTYPE_I16,
    KILN_DTYPE_U16,
    KILN_DTYPE_I32,
    KILN_DTYPE_U32,
    KILN_DTYPE_I64,
    KILN_DTYPE_U64,
    KILN_DTYPE_I4,
    KILN_DTYPE_U4,
    KILN_DTYPE_E2M1,
    KILN_DTYPE_E8M0,
];

// Compile time only, so the indexing cannot fail at run time.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const _: () = {
    let mut i = 0;
    while i < DTYPE_CODES.len() {
        assert!(DTYPE_CODES[i] == DType::closed_set()[i].code(), "a KILN_DTYPE_ code differs from the core's");
        i += 1;
    }
};

// ------------------------------------------------------------------ the handle

const MAGIC: u32 = 0x4B49_4C4E; // "KILN"

/// What a `kiln_dir` holds.
#[repr(C)]
pub(crate) struct Handle<'a> {
    /// `MAGIC` when filled by a successful call; read before anything else.
    magic: u32,
    view: View<'a>,
}

pub(crate) enum View<'a> {
    /// A whole buffer: directory or model file, payload in memory.
    Memory { index: NameIndex<'a, 'a>, metadata: Option<Metadata<'a>> },
    /// A directory prefix: the table of an incremental validator.
    Prefix(Directory<'a>),
    /// Opened from a source: the table; payload bytes stay in the source.
    Source(Opened<'a>),
}

const _: () = assert!(size_of::<Handle<'static>>() <= size_of::<kiln_dir>(), "kiln_dir is too small");
const _: () = assert!(align_of::<Handle<'static>>() <= align_of::<kiln_dir>(), "kiln_dir is underaligned");

impl<'a> View<'a> {
    pub(crate) fn directory(&self) -> Directory<'a> {
        match self {
            View::Memory { index, .. } => index.directory(),
            View::Prefix(d) => *d,
            View::Source(o) => o.directory(),
        }
    }

    fn find(&self, name: &str) -> Option<Tensor<'a>> {
        match self {
            View::Memory { index, .. } => index.get(name),
            View::Prefix(d) => d.find(name),
            View::Source(o) => o.directory().find(name),
        }
    }

    fn has_payload(&self) -> bool {
        matches!(self, View::Memory { .. })
    }
}

/// Fills `dir` with `view` (lifetimes are the caller's contract from here on).
pub(crate) fn store(dir: *mut kiln_dir, view: View<'_>) {
    // SAFETY: `dir` is not NULL (checked by every caller) and large and
    // aligned enough (the assertions above). It is written with the view's
    // own lifetime; `view()` reads it back as `'static`, which only drops
    // the lifetime the caller keeps by contract.
    unsafe { dir.cast::<Handle<'_>>().write(Handle { magic: MAGIC, view }) };
}

/// Marks `dir` invalid (after a failed call), when not NULL.
pub(crate) fn invalidate(dir: *mut kiln_dir) {
    if !dir.is_null() {
        // SAFETY: not NULL; the magic is the first field.
        unsafe { dir.cast::<u32>().write(0) };
    }
}

/// The view a valid handle holds.
pub(crate) fn view<'x>(dir: *const kiln_dir) -> Result<&'x View<'static>, Fail> {
    if dir.is_null() {
        return Err(Fail::Api(KILN_ERR_NULL));
    }
    // SAFETY: not NULL; a kiln_dir is at least 4 bytes, 8-aligned.
    if unsafe { dir.cast::<u32>().read() } != MAGIC {
        return Err(Fail::Api(KILN_ERR_HANDLE));
    }
    // SAFETY: the magic says a successful call stored a Handle here.
    Ok(unsafe { &(*dir.cast::<Handle<'static>>()).view })
}

pub(crate) fn parser<'s>(opts: Option<&kiln_options>, scratch: Option<&'s mut [u32]>) -> Parser<'s> {
    let mut p = Parser::new();
    if let Some(o) = opts {
        p = p.limits(limits(o)).hash_seed(o.hash_seed);
    }
    match scratch {
        Some(s) => p.scratch(s),
        None => p,
    }
}

pub(crate) fn limits(o: &kiln_options) -> Limits {
    let or_default = |cap: u32| if cap == 0 { kiln_nostd::directory::DEFAULT_CAP } else { cap };
    Limits::DEFAULT.with_count_cap(or_default(o.count_cap)).with_byte_cap(or_default(o.byte_cap))
}

/// The options and their scratch, checked.
///
/// # Safety
/// `opts` is NULL or a readable `kiln_options` whose scratch follows the rules of [`slice_mut`].
pub(crate) unsafe fn options<'o, 's>(
    opts: *const kiln_options,
) -> Result<(Option<&'o kiln_options>, Option<&'s mut [u32]>), Fail> {
    // SAFETY: NULL or readable, per the contract.
    let Some(o) = (unsafe { opts.as_ref() }) else { return Ok((None, None)) };
    let scratch = if o.scratch.is_null() && o.scratch_len == 0 {
        None
    } else {
        // SAFETY: the caller's scratch, per the contract.
        Some(unsafe { slice_mut(o.scratch, o.scratch_len) }?)
    };
    Ok((Some(o), scratch))
}

// ------------------------------------------------------------------ validate and parse

/// Validates `data[0..len]` by content, exactly as `kiln validate FILE`
/// without flags does: a model file (a `KLN0` frame with the model record's
/// schema hash, see spec/model-file.md) is checked as one; anything else as
/// a standalone tensor directory. Default caps; nothing is allocated.
///
/// Returns `KILN_OK` (0) when accepted, else the error code (`KILN_FRAME` ..
/// `KILN_SCHEMA`), with `*err` filled: code, absolute offset, rule id and
/// description (the same verdict as `kiln validate --json` and
/// `kiln_model::parse_any`). `err` may be NULL. `data` may be NULL
/// only when `len` is 0. API errors are negative (`KILN_ERR_*`).
///
/// Payload digests are not compared here (step 9d, which `kiln validate`
/// runs): `kiln_model_verify` (memory) and `kiln_source_verify_model` (a
/// read callback) check them too.
///
/// # Safety
/// `data[0..len]` must be readable; `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_validate(data: *const u8, len: usize, err: *mut kiln_error) -> c_int {
    // SAFETY: the caller's buffer, per the contract.
    let r = unsafe { slice(data, len) }.and_then(|buf| model::parse_any(buf).map(|_| ()).map_err(Fail::from));
    report(err, r)
}

/// `kiln_validate`, and on success fills `*dir` with the directory (and the
/// metadata of a model file). `*dir` points into `data`, which must outlive it.
///
/// # Safety
/// As for `kiln_validate`; `dir` writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_parse(data: *const u8, len: usize, dir: *mut kiln_dir, err: *mut kiln_error) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { kiln_parse_ex(data, len, core::ptr::null(), dir, err) }
}

/// `kiln_parse` with options: caps, name scratch (an O(1) name index) and a
/// hash seed. `opts` may be NULL (the defaults). With default caps the
/// verdict is `kiln_validate`'s, whatever the scratch and seed.
///
/// # Safety
/// As for `kiln_parse`; `opts` NULL or readable, its scratch writable and
/// alive (and unused elsewhere) while `*dir` is used.
#[no_mangle]
pub unsafe extern "C" fn kiln_parse_ex(
    data: *const u8,
    len: usize,
    opts: *const kiln_options,
    dir: *mut kiln_dir,
    err: *mut kiln_error,
) -> c_int {
    // SAFETY: the caller's buffers, per the contract.
    let r = unsafe { parse_into(data, len, opts, dir) };
    if r.is_err() {
        invalidate(dir);
    }
    report(err, r)
}

unsafe fn parse_into(data: *const u8, len: usize, opts: *const kiln_options, dir: *mut kiln_dir) -> Result<(), Fail> {
    if dir.is_null() {
        return Err(Fail::Api(KILN_ERR_NULL));
    }
    // SAFETY: the caller's buffers, per the contract.
    let buf: &[u8] = unsafe { slice(data, len) }?;
    // SAFETY: as above.
    let (opts, mut scratch) = unsafe { options(opts) }?;
    let view = if model::reads_as_model(buf) {
        // The same checks as model::parse_any_with; the index is built
        // afterwards in the same scratch (the parse's own table is dropped).
        let m = Model::parse_with(buf, parser(opts, scratch.as_deref_mut()))?;
        let index = NameIndex::build(m.directory(), scratch.unwrap_or(&mut []));
        View::Memory { index, metadata: Some(m.metadata()) }
    } else {
        let (_, index) = parser(opts, scratch).parse_indexed(buf)?;
        View::Memory { index, metadata: None }
    };
    store(dir, view);
    Ok(())
}

/// Name-index scratch for `tensor_count` tensors, in u32 slots (SIZE_MAX on overflow).
#[no_mangle]
pub extern "C" fn kiln_scratch_len(tensor_count: u32) -> usize {
    kiln_nostd::directory::scratch_len(tensor_count)
}

// ------------------------------------------------------------------ the table

/// Number of tensors (0 for an invalid handle).
///
/// # Safety
/// `dir` NULL or a readable `kiln_dir`.
#[no_mangle]
pub unsafe extern "C" fn kiln_count(dir: *const kiln_dir) -> usize {
    view(dir).map_or(0, |v| v.directory().len())
}

/// The directory as a whole.
///
/// # Safety
/// `dir` NULL or a readable `kiln_dir`; `info` writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_dir_get_info(dir: *const kiln_dir, info: *mut kiln_dir_info) -> c_int {
    let r = view(dir).and_then(|v| {
        if info.is_null() {
            return Err(Fail::Api(KILN_ERR_NULL));
        }
        let d = v.directory();
        let (hashed, metadata) = match v {
            View::Memory { index, metadata } => (index.is_hashed(), *metadata),
            _ => (false, None),
        };
        put(
            info,
            kiln_dir_info {
                tensor_count: d.len(),
                block_offset: u64_from(d.start()),
                block_len: u64_from(d.block_len()),
                payload_offset: u64_from(d.payload_start()),
                payload_len: d.header().payload_bytes,
                named: d.header().has_names(),
                is_model: metadata.is_some(),
                hashed_index: hashed,
                has_payload: v.has_payload(),
                metadata_count: metadata.map_or(0, |m| m.len()),
            },
        );
        Ok(())
    });
    report(core::ptr::null_mut(), r)
}

fn str_of(s: Option<&str>) -> kiln_str {
    match s {
        Some(s) => kiln_str { ptr: s.as_ptr().cast::<c_char>(), len: s.len() },
        None => kiln_str { ptr: core::ptr::null(), len: 0 },
    }
}

pub(crate) fn tensor_info(t: &Tensor<'_>, has_payload: bool) -> kiln_tensor {
    let d = t.descriptor();
    let q = t.quant();
    kiln_tensor {
        index: t.index(),
        name: str_of(t.name()),
        dtype: t.dtype().code(),
        dtype_name: texts::dtype_name_ptr(t.dtype()),
        rank: u32::from(d.rank),
        shape: d.shape,
        element_count: t.element_count(),
        byte_offset: t.byte_offset(),
        offset: u64_from(t.absolute_offset()),
        byte_length: d.byte_length,
        data: if has_payload { t.bytes().as_ptr() } else { core::ptr::null() },
        layout: str_of(t.layout()),
        block_size: t.block_size(),
        quant: kiln_quant {
            scheme: q.map_or(0, |q| q.scheme),
            axis: q.map_or(0xFFFF, |q| u16::try_from(q.axis).unwrap_or(0xFFFF)),
            group_size: q.map_or(0, |q| q.group_size),
            scale_index: q.map_or(KILN_NO_INDEX, |q| u32::try_from(q.scale.index()).unwrap_or(KILN_NO_INDEX)),
            outer_index: q
                .and_then(|q| q.outer)
                .map_or(KILN_NO_INDEX, |o| u32::try_from(o.index()).unwrap_or(KILN_NO_INDEX)),
        },
    }
}

/// The tensor at `index` (descriptor order) into `*out`.
///
/// # Safety
/// `dir` NULL or a readable `kiln_dir`; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_at(dir: *const kiln_dir, index: usize, out: *mut kiln_tensor) -> c_int {
    let r = view(dir).and_then(|v| {
        if out.is_null() {
            return Err(Fail::Api(KILN_ERR_NULL));
        }
        let t = v.directory().get(index).ok_or(Fail::Api(KILN_ERR_NOT_FOUND))?;
        put(out, tensor_info(&t, v.has_payload()));
        Ok(())
    });
    report(core::ptr::null_mut(), r)
}

fn find_bytes(v: &View<'static>, name: &[u8]) -> Result<Tensor<'static>, Fail> {
    // Every name is UTF-8 (checked), so other bytes name nothing.
    let name = core::str::from_utf8(name).map_err(|_| Fail::Api(KILN_ERR_NOT_FOUND))?;
    v.find(name).ok_or(Fail::Api(KILN_ERR_NOT_FOUND))
}

/// The index of the tensor named `name` (NUL-terminated) into `*index`;
/// `KILN_ERR_NOT_FOUND` when there is none. O(1) with a scratch index.
///
/// # Safety
/// `dir` NULL or a readable `kiln_dir`; `name` NULL or NUL-terminated; `index` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_find(dir: *const kiln_dir, name: *const c_char, index: *mut usize) -> c_int {
    // SAFETY: the caller's string, per the contract.
    let r = view(dir).and_then(|v| find_bytes(v, unsafe { c_string(name) }?)).map(|t| put(index, t.index()));
    report(core::ptr::null_mut(), r)
}

/// `kiln_find` with a name of `name_len` bytes (not NUL-terminated).
///
/// # Safety
/// `dir` NULL or a readable `kiln_dir`; `name[0..name_len]` readable; `index` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_find_n(
    dir: *const kiln_dir,
    name: *const c_char,
    name_len: usize,
    index: *mut usize,
) -> c_int {
    let r = view(dir)
        // SAFETY: the caller's bytes, per the contract.
        .and_then(|v| find_bytes(v, unsafe { slice(name.cast::<u8>(), name_len) }?))
        .map(|t| put(index, t.index()));
    report(core::ptr::null_mut(), r)
}

fn tensor_of(dir: *const kiln_dir, index: usize) -> Result<Tensor<'static>, Fail> {
    view(dir)?.directory().get(index).ok_or(Fail::Api(KILN_ERR_NOT_FOUND))
}

// ------------------------------------------------------------------ views

/// A zero-copy view of tensor `index` as `T`, or NULL.
fn view_as<T: Element>(dir: *const kiln_dir, index: usize, count: *mut usize) -> *const T {
    let view = view(dir).ok().filter(|v| v.has_payload()).and_then(|_| tensor_of(dir, index).ok());
    match view.and_then(|t| t.as_slice::<T>()) {
        Some(s) => {
            put(count, s.len());
            s.as_ptr()
        }
        None => {
            put(count, 0);
            core::ptr::null()
        }
    }
}

fn copy_as<T: Element>(dir: *const kiln_dir, index: usize, out: *mut T, out_len: usize, count: *mut usize) -> c_int {
    let r = view(dir).and_then(|v| {
        if !v.has_payload() {
            return Err(Fail::Api(KILN_ERR_HANDLE));
        }
        let t = tensor_of(dir, index)?;
        // SAFETY: the caller's buffer, per the contract of the exported functions.
        let out = unsafe { slice_mut(out, out_len) }?;
        match t.copy_to(out) {
            Ok(n) => {
                put(count, n);
                Ok(())
            }
            Err(ViewError::OutputTooShort { needed }) => {
                put(count, needed);
                Err(Fail::TooSmall(u64_from(needed)))
            }
            Err(_) => Err(Fail::Api(KILN_ERR_ELEMENT_TYPE)),
        }
    });
    if let Err(f) = r {
        if !matches!(f, Fail::TooSmall(_)) {
            put(count, 0);
        }
    }
    report(core::ptr::null_mut(), r)
}

// The view and copy function of each element type, from one table: a row
// is the Rust type, its C name, the dtypes it reads, and the two symbols.
// kiln.h is generated from the expansion (cbindgen's `parse.expand`), so
// the docs built here are the header's; f32's are the family's reference.
macro_rules! element_functions {
    ($( $t:ident $c:literal $dtypes:literal $view:ident $copy:ident; )*) => {
        $( element_functions!(@view $t $c $dtypes $view); )*
        $( element_functions!(@copy $t $c $dtypes $copy); )*
    };
    (@view f32 $c:literal $dtypes:literal $view:ident) => {
        element_functions!(@view_fn f32 $view
            /// The elements of tensor `index` in place, as `float` (dtype f32), with
            /// `*count` (may be NULL) set to their number: zero-copy. NULL (and 0) when
            /// the dtype does not match, the host is big-endian (multi-byte types), the
            /// payload is not aligned for the type (keep the buffer 64-byte aligned:
            /// every payload offset is a multiple of 64), or the payload is not in
            /// memory; then use `kiln_tensor_copy_f32`. The `_u8`, `_i8`, `_u16`,
            /// `_i16`, `_u32`, `_i32`, `_u64`, `_i64` and `_f64` variants do the same
            /// for their types.
            ///
            /// # Safety
            /// `dir` NULL or a readable `kiln_dir`; `count` NULL or writable.
        );
    };
    (@view $t:ident $c:literal $dtypes:literal $view:ident) => {
        element_functions!(@view_fn $t $view
            #[doc = concat!(" `", $c, "` view of tensor `index` (dtypes ", $dtypes, "): see `kiln_tensor_view_f32`.")]
            ///
            /// # Safety
            /// As for `kiln_tensor_view_f32`.
        );
    };
    (@copy f32 $c:literal $dtypes:literal $copy:ident) => {
        element_functions!(@copy_fn f32 $copy
            /// Copies tensor `index` into `out[0..out_len]` as host-order `float`
            /// (dtype f32; byte-swapped on big-endian hosts) and sets `*count` (may be
            /// NULL) to the number of elements. `KILN_ERR_ELEMENT_TYPE` for another
            /// dtype; `KILN_ERR_BUFFER_TOO_SMALL` with `*count` = the elements needed
            /// when `out_len` is smaller (pass NULL and 0 to ask). `out` must be aligned
            /// for the type. The `_u8`, `_i8`, `_u16`, `_i16`, `_u32`, `_i32`, `_u64`,
            /// `_i64` and `_f64` variants do the same for their types (`_u16` reads f16
            /// and bf16 as bits, `_u8` bool and the one-byte floats).
            ///
            /// # Safety
            /// `dir` NULL or a readable `kiln_dir`; `out[0..out_len]` writable; `count` NULL or writable.
        );
    };
    (@copy $t:ident $c:literal $dtypes:literal $copy:ident) => {
        element_functions!(@copy_fn $t $copy
            #[doc = concat!(" Copies tensor `index` as `", $c, "` (dtypes ", $dtypes, "): see `kiln_tensor_copy_f32`.")]
            ///
            /// # Safety
            /// As for `kiln_tensor_copy_f32`.
        );
    };
    (@view_fn $t:ident $view:ident $(#[$doc:meta])*) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "C" fn $view(dir: *const kiln_dir, index: usize, count: *mut usize) -> *const $t {
            view_as::<$t>(dir, index, count)
        }
    };
    (@copy_fn $t:ident $copy:ident $(#[$doc:meta])*) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "C" fn $copy(
            dir: *const kiln_dir,
            index: usize,
            out: *mut $t,
            out_len: usize,
            count: *mut usize,
        ) -> c_int {
            copy_as::<$t>(dir, index, out, out_len, count)
        }
    };
}

element_functions! {
    u8 "uint8_t" "u8, bool, f8e4m3, f8e5m2 and e8m0 (as bits)" kiln_tensor_view_u8 kiln_tensor_copy_u8;
    i8 "int8_t" "i8" kiln_tensor_view_i8 kiln_tensor_copy_i8;
    u16 "uint16_t" "u16, f16 and bf16 (as bits)" kiln_tensor_view_u16 kiln_tensor_copy_u16;
    i16 "int16_t" "i16" kiln_tensor_view_i16 kiln_tensor_copy_i16;
    u32 "uint32_t" "u32" kiln_tensor_view_u32 kiln_tensor_copy_u32;
    i32 "int32_t" "i32" kiln_tensor_view_i32 kiln_tensor_copy_i32;
    u64 "uint64_t" "u64" kiln_tensor_view_u64 kiln_tensor_copy_u64;
    i64 "int64_t" "i64" kiln_tensor_view_i64 kiln_tensor_copy_i64;
    f32 "float" "f32" kiln_tensor_view_f32 kiln_tensor_copy_f32;
    f64 "double" "f64" kiln_tensor_view_f64 kiln_tensor_copy_f64;
}

// ------------------------------------------------------------------ dequantization

/// The tensor's values as f32, its quantization applied (the core's
/// `dequant`, spec §11.1), with the C error codes.
fn dequantize(t: &Tensor<'_>, out: &mut [f32]) -> Result<usize, Fail> {
    dequantize_into(t, out).map_err(|e| match e {
        DequantError::OutputTooSmall { needed } | DequantError::TooLarge { count: needed } => Fail::TooSmall(needed),
        // The caller checked that the payload is in memory.
        DequantError::NoPayload => Fail::Api(KILN_ERR_HANDLE),
        // An opaque dtype, of the tensor or of its scales.
        _ => Fail::Api(KILN_ERR_ELEMENT_TYPE),
    })
}

/// Tensor `index`'s values as f32, with its quantization applied: each
/// element (any dtype but opaque: f16, bf16, f8, e2m1, e8m0, integers, bool
/// converted exactly where f32 can) times its group's scale (e8m0 scales as
/// 2^(byte-127), others by value; the scale tensor row-major over the shape
/// with the quantized axis counted in groups) times the outer scale of
/// scheme 2, each product rounded to f32 in turn (spec/kiln-v2.md §11.1).
/// MXFP4 (e2m1 + e8m0 scales) is dequantized this way. An unquantized
/// tensor is only converted. `*count` (may be NULL) gets the
/// element count; `KILN_ERR_BUFFER_TOO_SMALL` when `out_len` is smaller.
///
/// # Safety
/// `dir` NULL or a readable `kiln_dir`; `out[0..out_len]` writable (4-byte aligned); `count` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_tensor_dequantize_f32(
    dir: *const kiln_dir,
    index: usize,
    out: *mut f32,
    out_len: usize,
    count: *mut usize,
) -> c_int {
    let r = view(dir).and_then(|v| {
        if !v.has_payload() {
            return Err(Fail::Api(KILN_ERR_HANDLE));
        }
        let t = tensor_of(dir, index)?;
        // SAFETY: the caller's buffer, per the contract.
        let out = unsafe { slice_mut(out, out_len) }?;
        dequantize(&t, out)
    });
    match r {
        Ok(n) => put(count, n),
        Err(Fail::TooSmall(n)) => put(count, usize_sat(n)),
        Err(_) => put(count, 0),
    }
    report(core::ptr::null_mut(), r.map(|_| ()))
}

// ------------------------------------------------------------------ metadata

fn metadata_of(dir: *const kiln_dir) -> Result<Metadata<'static>, Fail> {
    match view(dir)? {
        View::Memory { metadata: Some(m), .. } => Ok(*m),
        _ => Err(Fail::Api(KILN_ERR_NOT_FOUND)),
    }
}

fn put_str(out: *mut kiln_str, s: &str) {
    put(out, str_of(Some(s)));
}

/// Model files: number of metadata entries (the padding key is hidden); 0
/// for a plain directory or an invalid handle.
///
/// # Safety
/// `dir` NULL or a readable `kiln_dir`.
#[no_mangle]
pub unsafe extern "C" fn kiln_metadata_count(dir: *const kiln_dir) -> usize {
    metadata_of(dir).map_or(0, |m| m.len())
}

/// Model files: metadata entry `i` (key order) into `*key` and `*value`
/// (either may be NULL); `KILN_ERR_NOT_FOUND` past the end or for a plain directory.
///
/// # Safety
/// `dir` NULL or a readable `kiln_dir`; `key`, `value` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_metadata_at(
    dir: *const kiln_dir,
    i: usize,
    key: *mut kiln_str,
    value: *mut kiln_str,
) -> c_int {
    let r = metadata_of(dir).and_then(|m| {
        let (k, v) = m.iter().nth(i).ok_or(Fail::Api(KILN_ERR_NOT_FOUND))?;
        put_str(key, k);
        put_str(value, v);
        Ok(())
    });
    report(core::ptr::null_mut(), r)
}

/// Model files: the value of metadata key `key` (NUL-terminated) into `*value`.
///
/// # Safety
/// `dir` NULL or a readable `kiln_dir`; `key` NULL or NUL-terminated; `value` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kiln_metadata_get(dir: *const kiln_dir, key: *const c_char, value: *mut kiln_str) -> c_int {
    let r = metadata_of(dir).and_then(|m| {
        // SAFETY: the caller's string, per the contract.
        let key = core::str::from_utf8(unsafe { c_string(key) }?).map_err(|_| Fail::Api(KILN_ERR_NOT_FOUND))?;
        put_str(value, m.get(key).ok_or(Fail::Api(KILN_ERR_NOT_FOUND))?);
        Ok(())
    });
    report(core::ptr::null_mut(), r)
}

#[cfg(test)]
mod tests {
    /// How much of the opaque storage the handle uses on this host.
    #[test]
    fn handle_fits() {
        std::println!(
            "Handle: {} of {} bytes",
            core::mem::size_of::<super::Handle<'static>>(),
            core::mem::size_of::<super::kiln_dir>()
        );
    }
}
