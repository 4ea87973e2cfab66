//! Typed access to payloads: zero-copy slices where the host allows it,
//! byte-swapping copies everywhere else. Nothing here hands out host-order
//! bytes as if they were wire bytes.

use byteorder::{ByteOrder, LittleEndian};
use core::fmt;

use crate::dtype::DType;

mod sealed {
    pub trait Sealed {}
}

/// A fixed-width element type that tensor payloads (and Frozen lists) can be read as.
///
/// `u16` also reads `f16` and `bf16` payloads as their bits; `u8` also reads
/// the one-byte float codes (`f8e4m3`, `f8e5m2`, `e8m0`) and `bool` as bits.
pub trait Element: bytemuck::Pod + sealed::Sealed {
    /// Bytes per element on the wire.
    const WIDTH: usize;
    /// True when a payload of `dtype` can be read as `Self`.
    fn reads(dtype: DType) -> bool;
    /// Decodes one little-endian element from exactly `WIDTH` bytes.
    fn from_le(bytes: &[u8]) -> Self;
    /// Encodes into exactly `WIDTH` little-endian bytes.
    fn to_le(self, out: &mut [u8]);
}

macro_rules! element {
    ($t:ty, $w:expr, [$($d:ident),*], $read:expr, $write:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const WIDTH: usize = $w;
            fn reads(dtype: DType) -> bool {
                matches!(dtype, $(DType::$d)|*)
            }
            #[inline]
            fn from_le(bytes: &[u8]) -> Self {
                $read(bytes)
            }
            #[inline]
            fn to_le(self, out: &mut [u8]) {
                $write(out, self)
            }
        }
    };
}

fn byte(b: &[u8]) -> u8 {
    // Fallback not taken: callers pass one-byte chunks: never empty.
    b.first().copied().unwrap_or(0)
}
fn put_byte(out: &mut [u8], v: u8) {
    if let Some(o) = out.first_mut() {
        *o = v;
    }
}

element!(u8, 1, [U8, Bool, F8E4M3, F8E5M2, E8M0], byte, put_byte);
element!(i8, 1, [I8], |b| i8::from_le_bytes([byte(b)]), |o, v: i8| put_byte(o, v.to_le_bytes()[0]));
element!(u16, 2, [U16, F16, BF16], LittleEndian::read_u16, LittleEndian::write_u16);
element!(i16, 2, [I16], LittleEndian::read_i16, LittleEndian::write_i16);
element!(u32, 4, [U32], LittleEndian::read_u32, LittleEndian::write_u32);
element!(i32, 4, [I32], LittleEndian::read_i32, LittleEndian::write_i32);
element!(u64, 8, [U64], LittleEndian::read_u64, LittleEndian::write_u64);
element!(i64, 8, [I64], LittleEndian::read_i64, LittleEndian::write_i64);
element!(f32, 4, [F32], LittleEndian::read_f32, LittleEndian::write_f32);
element!(f64, 8, [F64], LittleEndian::read_f64, LittleEndian::write_f64);

/// Why a typed read was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ViewError {
    /// The requested element type cannot read this dtype.
    WrongType {
        /// The tensor's dtype code.
        dtype: u16,
    },
    /// The output slice is shorter than the element count.
    OutputTooShort {
        /// Elements needed.
        needed: usize,
    },
}

impl fmt::Display for ViewError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ViewError::WrongType { dtype } => write!(f, "the element type cannot read dtype code {dtype}"),
            ViewError::OutputTooShort { needed } => write!(f, "the output needs room for {needed} elements"),
        }
    }
}

impl core::error::Error for ViewError {}

/// Zero-copy view of wire bytes as `&[T]` (see [`Tensor::as_slice`](crate::Tensor::as_slice)).
#[must_use]
pub fn view<T: Element>(dtype: DType, bytes: &[u8]) -> Option<&[T]> {
    // Wire order equals host order only on little-endian hosts (or for bytes).
    if !T::reads(dtype) || (cfg!(target_endian = "big") && T::WIDTH > 1) {
        return None;
    }
    bytemuck::try_cast_slice(bytes).ok()
}

/// Decodes little-endian `bytes` into host-order `out`; returns the count.
pub fn copy<T: Element>(dtype: DType, bytes: &[u8], out: &mut [T]) -> Result<usize, ViewError> {
    if !T::reads(dtype) {
        return Err(ViewError::WrongType { dtype: dtype.code() });
    }
    // Fallback not taken: WIDTH is a nonzero constant: never 0 by fallback.
    let n = bytes.len().checked_div(T::WIDTH).unwrap_or(0);
    let Some(out) = out.get_mut(..n) else {
        return Err(ViewError::OutputTooShort { needed: n });
    };
    for (dst, src) in out.iter_mut().zip(bytes.chunks_exact(T::WIDTH)) {
        *dst = T::from_le(src);
    }
    Ok(n)
}

/// Encodes host-order `values` as little-endian wire bytes into `out`
/// (`values.len() * T::WIDTH` bytes); returns the byte count, or `None`
/// when `out` is too short. Use it to build writer input on any host.
pub fn encode_le<T: Element>(values: &[T], out: &mut [u8]) -> Option<usize> {
    let n = values.len().checked_mul(T::WIDTH)?;
    let out = out.get_mut(..n)?;
    for (v, dst) in values.iter().zip(out.chunks_exact_mut(T::WIDTH)) {
        v.to_le(dst);
    }
    Some(n)
}

/// Wire bytes of `values` without copying: only on little-endian hosts,
/// where host order is wire order. Big-endian hosts get `None` (use
/// [`encode_le`]); returning host bytes there would not be Kiln.
pub fn le_bytes<T: Element>(values: &[T]) -> Option<&[u8]> {
    if cfg!(target_endian = "big") && T::WIDTH > 1 {
        return None;
    }
    Some(bytemuck::cast_slice(values))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_decode_little_endian_on_any_host() {
        let bytes = [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0];
        let mut out = [0f32; 2];
        assert_eq!(copy(DType::F32, &bytes, &mut out), Ok(2));
        assert_eq!(out, [1.0, -2.0]);
        let mut bits = [0u16; 1];
        assert_eq!(copy(DType::BF16, &[0x80, 0x3f], &mut bits), Ok(1));
        assert_eq!(bits, [0x3F80]);
        assert_eq!(copy(DType::F32, &bytes, &mut [0f32; 1]), Err(ViewError::OutputTooShort { needed: 2 }));
        assert_eq!(copy::<i32>(DType::F32, &bytes, &mut [0; 2]), Err(ViewError::WrongType { dtype: 2 }));
    }

    #[test]
    fn views_only_where_wire_order_is_host_order() {
        let words = [1.0f32, -2.0];
        let bytes: &[u8] = bytemuck::cast_slice(&words); // aligned storage
        let wire = [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0];
        if cfg!(target_endian = "little") {
            assert_eq!(bytes, wire);
            assert_eq!(view::<f32>(DType::F32, bytes), Some(&words[..]));
        } else {
            assert_eq!(view::<f32>(DType::F32, bytes), None);
            assert_eq!(le_bytes(&words), None);
        }
        assert_eq!(view::<i8>(DType::I8, &[0xff]), Some(&[-1i8][..]));
        assert_eq!(view::<u32>(DType::F32, bytes), None);
    }

    #[test]
    fn encode_le_writes_wire_order() {
        let mut out = [0u8; 8];
        assert_eq!(encode_le(&[1.0f32, -2.0], &mut out), Some(8));
        assert_eq!(out, [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0]);
        assert_eq!(encode_le(&[1u64], &mut [0u8; 7]), None);
    }
}
