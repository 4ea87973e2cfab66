//! Dequantization: the optional helper of `spec/kiln-v2.md` §11.1.
//!
//! Reading never applies a scale ([`Tensor::bytes`] and the views return
//! the stored bits). This module is for callers that want values: each
//! element converted to `f32` by its dtype, times its group's scale (schemes
//! 1 and 2), times the outer scale (scheme 2), with every rounding the spec
//! fixes, so the C API, the firmware demo and the tests get the same bits.
//!
//! ```
//! use kiln_nostd::dequant::{dequantize_into, Dequantizer};
//! use kiln_nostd::{DType, Directory, writer::{QuantSpec, TensorRef}, TensorSpec, Writer};
//!
//! // MXFP4: 32 e2m1 codes of 1.0 (0x2) in one group, its e8m0 scale 2^-2.
//! let specs = [
//!     TensorSpec::new(DType::E2M1, &[32], &[0x22; 16]).named("w").quantized(QuantSpec::Scales {
//!         axis: 0,
//!         group_size: 32,
//!         scale: TensorRef::Name("w.scale"),
//!     }),
//!     TensorSpec::new(DType::E8M0, &[1], &[125]).named("w.scale"),
//! ];
//! let mut buf = [0u8; 512];
//! let len = Writer::new().write(&specs, &mut buf)?;
//! let dir = Directory::parse(&buf[..len])?;
//! let w = dir.find("w").expect("written above");
//!
//! // One element at a time, no buffer ...
//! let q = Dequantizer::new(&w).expect("e2m1 with e8m0 scales");
//! assert_eq!(q.get(31), Some(0.25));
//! assert_eq!(q.get(32), None);
//! // ... or all of them.
//! let mut out = [0f32; 32];
//! assert_eq!(dequantize_into(&w, &mut out), Ok(32));
//! assert!(out.iter().all(|&v| v == 0.25));
//! # Ok::<(), kiln_nostd::Error>(())
//! ```

use core::fmt;

pub mod mx;
pub mod quant;

use crate::directory::Tensor;
use crate::dtype::DType;

/// Why a tensor's values were not computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum DequantError {
    /// The tensor's dtype is opaque: Kiln does not interpret its blocks.
    OpaqueData {
        /// The tensor's dtype code (4096..=32767).
        dtype: u16,
    },
    /// The scale tensor's dtype is opaque.
    OpaqueScale {
        /// The scale tensor's dtype code (4096..=32767).
        dtype: u16,
    },
    /// The output holds fewer elements than the tensor.
    OutputTooSmall {
        /// The tensor's element count.
        needed: u64,
    },
    /// The tensor has more elements than this target can index.
    TooLarge {
        /// The tensor's element count.
        count: u64,
    },
    /// A payload the values need is not in memory (a directory from the
    /// incremental validator's prefix or from a ranged source).
    NoPayload,
}

impl fmt::Display for DequantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DequantError::OpaqueData { dtype } => {
                write!(f, "dtype code {dtype} is an opaque block layout: Kiln does not interpret it")
            }
            DequantError::OpaqueScale { dtype } => {
                write!(f, "the scale tensor's dtype code {dtype} is an opaque block layout")
            }
            DequantError::OutputTooSmall { needed } => write!(f, "the output needs room for {needed} elements"),
            DequantError::TooLarge { count } => write!(f, "{count} elements are more than this target can index"),
            DequantError::NoPayload => f.write_str("the payload is not in memory"),
        }
    }
}

impl core::error::Error for DequantError {}

/// Element `index` of the wire bytes `bytes` of `dtype` as `f32`, converted
/// as §11.1's table says: exact for the narrow floats, `e8m0` (2^(b−127),
/// 0xFF NaN) and the small integers; rounded to the nearest `f32`, ties to
/// even, for `f64` and the 32- and 64-bit integers. `None` for an opaque
/// dtype or an index past the bytes.
#[must_use]
pub fn element_f32(dtype: DType, bytes: &[u8], index: usize) -> Option<f32> {
    let mut one = [0f32];
    (convert_into(dtype, bytes, index, &mut one) == 1).then_some(one).map(|[v]| v)
}

/// Elements `start..` of the wire bytes `bytes` of `dtype` into `out` as
/// [`element_f32`] converts them, as many as both hold; returns how many
/// (0 for an opaque dtype). One loop a dtype: the table of §11.1 once.
// An `as` from f64 or a wide integer to f32 rounds to the nearest f32, ties
// to even (the Rust reference), which is the spec's rule; no `From` exists.
#[allow(clippy::as_conversions)]
fn convert_into(dtype: DType, bytes: &[u8], start: usize, out: &mut [f32]) -> usize {
    let b = bytes;
    match dtype {
        DType::F64 => each(b, start, out, |e| f64::from_le_bytes(e) as f32),
        DType::F32 => each(b, start, out, f32::from_le_bytes),
        DType::F16 => each(b, start, out, |e| mx::f16_to_f32(u16::from_le_bytes(e))),
        DType::BF16 => each(b, start, out, |e| mx::bf16_to_f32(u16::from_le_bytes(e))),
        DType::F8E4M3 => each(b, start, out, |[e]| mx::f8e4m3_to_f32(e)),
        DType::F8E5M2 => each(b, start, out, |[e]| mx::f8e5m2_to_f32(e)),
        DType::E8M0 => each(b, start, out, |[e]| mx::e8m0_to_f32(e)),
        DType::Bool | DType::U8 => each(b, start, out, |[e]| f32::from(e)),
        DType::I8 => each(b, start, out, |e| f32::from(i8::from_le_bytes(e))),
        DType::I16 => each(b, start, out, |e| f32::from(i16::from_le_bytes(e))),
        DType::U16 => each(b, start, out, |e| f32::from(u16::from_le_bytes(e))),
        DType::I32 => each(b, start, out, |e| i32::from_le_bytes(e) as f32),
        DType::U32 => each(b, start, out, |e| u32::from_le_bytes(e) as f32),
        DType::I64 => each(b, start, out, |e| i64::from_le_bytes(e) as f32),
        DType::U64 => each(b, start, out, |e| u64::from_le_bytes(e) as f32),
        // The nibble in the high half of an i8, shifted back: sign-extended.
        DType::I4 => nibbles(b, start, out, |n| f32::from(i8::from_le_bytes([n << 4]).wrapping_shr(4))),
        DType::U4 => nibbles(b, start, out, f32::from),
        DType::E2M1 => nibbles(b, start, out, mx::e2m1_to_f32),
        DType::Opaque(_) => 0,
    }
}

/// `convert_into` for an `N`-byte dtype: `f` of each element's bytes.
fn each<const N: usize>(bytes: &[u8], start: usize, out: &mut [f32], f: impl Fn([u8; N]) -> f32) -> usize {
    let from = start.checked_mul(N).and_then(|at| bytes.get(at..)).unwrap_or(&[]);
    let elements = from.chunks_exact(N);
    let n = elements.len().min(out.len());
    for (o, e) in out.iter_mut().zip(elements) {
        // Fallback not taken: chunks_exact gives N bytes.
        *o = e.try_into().map_or(f32::NAN, &f);
    }
    n
}

/// `convert_into` for a packed 4-bit dtype: `f` of each nibble.
fn nibbles(bytes: &[u8], start: usize, out: &mut [f32], f: impl Fn(u8) -> f32) -> usize {
    // Two elements a byte, the low nibble first (mx::nibble's order).
    let from = bytes.get(start >> 1..).unwrap_or(&[]);
    let odd = start & 1;
    let n = from.len().saturating_mul(2).saturating_sub(odd).min(out.len());
    let elements = from.iter().flat_map(|&b| [b & 0x0F, b >> 4]).skip(odd);
    for (o, e) in out.iter_mut().zip(elements) {
        *o = f(e);
    }
    n
}

/// A tensor's values one at a time (§11.1), read in place: no buffer, no
/// copy. Built once per tensor; [`get`](Self::get) costs a few divisions.
#[derive(Clone, Copy, Debug)]
pub struct Dequantizer<'a> {
    dtype: DType,
    bytes: &'a [u8],
    /// The element `bytes` starts at (0 but for [`from_parts`](Self::from_parts)).
    first: usize,
    len: usize,
    /// The last dimension (1 for a scalar), for [`get_2d`](Self::get_2d).
    cols: usize,
    scales: Option<Scales<'a>>,
}

/// A tensor's quantization given by its parts ([`Dequantizer::from_parts`]):
/// what [`Tensor::quant`] says, with the scale tensor's dtype and bytes and
/// the outer scale's value.
#[derive(Clone, Copy, Debug)]
pub struct QuantParts<'a> {
    /// The scale tensor's dtype.
    pub scale_dtype: DType,
    /// The scale tensor's wire bytes, all of them.
    pub scales: &'a [u8],
    /// The quantized dimension.
    pub axis: usize,
    /// Elements per scale (at least 1).
    pub group_size: u32,
    /// Scheme 2's outer scale; `None` for scheme 1.
    pub outer: Option<f32>,
}

/// Where a quantized tensor's scales are, and how flat indexes map to them.
#[derive(Clone, Copy, Debug)]
struct Scales<'a> {
    dtype: DType,
    bytes: &'a [u8],
    /// Π dims after the axis.
    inner: usize,
    /// dims[axis].
    along: usize,
    /// ceil(dims[axis] / group_size).
    groups: usize,
    group: usize,
    /// Scheme 2's outer scale.
    outer: Option<f32>,
}

impl<'a> Dequantizer<'a> {
    /// The values of `tensor`, its quantization (if any) applied. Refuses an
    /// opaque tensor, an opaque scale tensor, a payload that is not in
    /// memory, and a tensor with more elements than a `usize` counts.
    pub fn new(tensor: &Tensor<'a>) -> Result<Self, DequantError> {
        let dtype = tensor.dtype();
        if dtype.is_opaque() {
            return Err(DequantError::OpaqueData { dtype: dtype.code() });
        }
        let count = tensor.element_count();
        usize::try_from(count).map_err(|_| DequantError::TooLarge { count })?;
        let bytes = in_memory(tensor)?;
        let quant = match tensor.quant() {
            None => None,
            Some(q) => {
                let scale_dtype = q.scale.dtype();
                if scale_dtype.is_opaque() {
                    return Err(DequantError::OpaqueScale { dtype: scale_dtype.code() });
                }
                let outer = match q.outer {
                    // Checked by the parser to be one f32 element.
                    Some(o) => Some(element_f32(o.dtype(), in_memory(&o)?, 0).ok_or(DequantError::NoPayload)?),
                    None => None,
                };
                let scales = in_memory(&q.scale)?;
                Some(QuantParts { scale_dtype, scales, axis: q.axis, group_size: q.group_size, outer })
            }
        };
        Self::from_parts(dtype, tensor.shape(), 0, bytes, quant)
    }

    /// The values of a tensor given by its parts rather than as a
    /// [`Tensor`]: its dtype, shape and quantization, and `bytes`, which
    /// hold its elements from `first` on (the whole payload for `first` 0,
    /// or a piece of it: a binding that copies a payload into its own memory
    /// a window at a time). [`get`](Self::get) reads elements `first..` from
    /// `bytes` (`None` outside them); `first` must be even for the packed
    /// 4-bit dtypes, whose bytes hold two elements. Refuses an opaque dtype
    /// or scale dtype, and a shape whose element count a `usize` does not
    /// hold. Nothing else is checked: the parser checked the directory the
    /// parts come from (axis in range, group size at least 1, one scale per
    /// group).
    pub fn from_parts(
        dtype: DType,
        shape: &[u64],
        first: usize,
        bytes: &'a [u8],
        quant: Option<QuantParts<'a>>,
    ) -> Result<Self, DequantError> {
        if dtype.is_opaque() {
            return Err(DequantError::OpaqueData { dtype: dtype.code() });
        }
        // An element count past u64 (no parsed tensor has one) is too large as u64::MAX.
        let count = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
        let too_large = DequantError::TooLarge { count: count.unwrap_or(u64::MAX) };
        let len = count.and_then(|c| usize::try_from(c).ok()).ok_or(too_large)?;
        // Every dimension fits a usize: each is at most the element count,
        // or the count is 0 and no index is ever mapped.
        let dim = |k: usize| shape.get(k).map_or(1, |&d| usize::try_from(d).unwrap_or(0));
        let cols = dim(shape.len().saturating_sub(1));
        let Some(q) = quant else {
            return Ok(Dequantizer { dtype, bytes, first, len, cols, scales: None });
        };
        if q.scale_dtype.is_opaque() {
            return Err(DequantError::OpaqueScale { dtype: q.scale_dtype.code() });
        }
        let inner = (q.axis.saturating_add(1)..shape.len()).fold(1usize, |acc, k| acc.saturating_mul(dim(k)));
        let along = dim(q.axis);
        // Fallback not taken: the parser checked group_size >= 1.
        let group = usize::try_from(q.group_size).unwrap_or(usize::MAX).max(1);
        let groups = along.div_ceil(group);
        let scales = Scales { dtype: q.scale_dtype, bytes: q.scales, inner, along, groups, group, outer: q.outer };
        Ok(Dequantizer { dtype, bytes, first, len, cols, scales: Some(scales) })
    }

    /// Elements `first..` into `out`, as [`get`](Self::get) gives them,
    /// until `out` is full or an element is not there (past the end, or
    /// outside the bytes [`from_parts`](Self::from_parts) was given);
    /// returns how many were written.
    pub fn fill(&self, first: usize, out: &mut [f32]) -> usize {
        let want = out.len().min(self.len.saturating_sub(first));
        let (Some(out), Some(start)) = (out.get_mut(..want), first.checked_sub(self.first)) else {
            return 0;
        };
        let n = convert_into(self.dtype, self.bytes, start, out);
        let Some(s) = &self.scales else {
            return n;
        };
        // Neighbours mostly share a scale (a group along the last axis): read each once.
        let mut last: Option<(usize, f32)> = None;
        for (k, x) in out.iter_mut().take(n).enumerate() {
            let Some(at) = first.checked_add(k).and_then(|i| self.scale_index(i)) else {
                return k;
            };
            let scale = match last {
                Some((l, v)) if l == at => v,
                _ => match element_f32(s.dtype, s.bytes, at) {
                    Some(v) => {
                        last = Some((at, v));
                        v
                    }
                    None => return k,
                },
            };
            // x times its scale, rounded to f32; scheme 2: that times the outer scale, rounded again.
            let scaled = *x * scale;
            *x = match s.outer {
                Some(o) => scaled * o,
                None => scaled,
            };
        }
        n
    }

    /// The tensor's element count.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a tensor with no elements.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The flat index in the scale tensor of element `index` (§11.1's
    /// `s_index`), or `None` for an unquantized tensor or an index past the
    /// end.
    #[must_use]
    pub fn scale_index(&self, index: usize) -> Option<usize> {
        let s = self.scales.as_ref()?;
        if index >= self.len {
            return None;
        }
        let row = index.checked_div(s.inner)?;
        let group = row.checked_rem(s.along)?.checked_div(s.group)?;
        let outer = row.checked_div(s.along)?;
        outer.checked_mul(s.groups)?.checked_add(group)?.checked_mul(s.inner)?.checked_add(index.checked_rem(s.inner)?)
    }

    /// Element `index` (row-major) as `f32`, with its scale (and the outer
    /// scale) applied; `None` past the end.
    #[must_use]
    pub fn get(&self, index: usize) -> Option<f32> {
        let mut one = [0f32];
        (self.fill(index, &mut one) == 1).then_some(one).map(|[v]| v)
    }

    /// Element `col` of row `row`, the rows being the tensor's last
    /// dimension (of a rank-2 tensor, its own (`row`, `col`)):
    /// [`get`](Self::get)`(row * cols + col)`; `None` when `col` is not below
    /// the last dimension or past the end.
    #[must_use]
    pub fn get_2d(&self, row: usize, col: usize) -> Option<f32> {
        if col >= self.cols {
            return None;
        }
        self.get(row.checked_mul(self.cols)?.checked_add(col)?)
    }
}

/// The tensor's payload, or [`DequantError::NoPayload`] when it is shorter
/// than its element count needs (a directory whose payload is elsewhere).
fn in_memory<'a>(t: &Tensor<'a>) -> Result<&'a [u8], DequantError> {
    let needed = t.dtype().byte_length(t.element_count());
    match needed {
        Some(n) if crate::bytes::u64_from(t.bytes().len()) >= n => Ok(t.bytes()),
        _ => Err(DequantError::NoPayload),
    }
}

/// Writes `tensor`'s values (§11.1) into `out` and returns their count.
///
/// The checks, in this order: the count fits a `usize`, else
/// [`OutputTooSmall`](DequantError::OutputTooSmall) (no buffer can hold
/// it); the dtype is not opaque ([`OpaqueData`](DequantError::OpaqueData));
/// `out` holds the count ([`OutputTooSmall`](DequantError::OutputTooSmall));
/// then [`Dequantizer::new`]'s (opaque scales, payload in memory). Nothing
/// is written when one fails.
pub fn dequantize_into(tensor: &Tensor<'_>, out: &mut [f32]) -> Result<usize, DequantError> {
    let count = tensor.element_count();
    let too_small = DequantError::OutputTooSmall { needed: count };
    let n = usize::try_from(count).map_err(|_| too_small)?;
    let dtype = tensor.dtype();
    if dtype.is_opaque() {
        return Err(DequantError::OpaqueData { dtype: dtype.code() });
    }
    let out = out.get_mut(..n).ok_or(too_small)?;
    // Every index below the count has its bytes and its scale: all n are written.
    Dequantizer::new(tensor)?.fill(0, out);
    Ok(n)
}
