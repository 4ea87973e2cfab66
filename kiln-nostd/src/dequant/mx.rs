//! Bit-exact conversions of the narrow float dtypes to `f32`.
//!
//! Kiln stores the bits of `f16`, `bf16`, `f8e4m3`, `f8e5m2`, `e2m1` and
//! `e8m0` and never converts them itself. These helpers are for callers
//! that want values: every finite input maps to the exactly equal `f32`
//! (all of these formats are subsets of binary32), infinities map to
//! infinities, the sign of zero is kept, and NaN inputs give a NaN (an
//! `f16`/`bf16`/`f8e5m2` NaN keeps its payload bits, shifted into place).
//!
//! ```
//! use kiln_nostd::dequant::mx;
//! assert_eq!(mx::e2m1_to_f32(0b0111), 6.0);
//! assert_eq!(mx::e2m1_to_f32(0b1011), -1.5);
//! assert_eq!(mx::e8m0_to_f32(127), 1.0);
//! assert_eq!(mx::f16_to_f32(0x3C00), 1.0);
//! assert_eq!(mx::bf16_to_f32(0x3F80), 1.0);
//! assert_eq!(mx::f8e4m3_to_f32(0x38), 1.0);
//! assert_eq!(mx::f8e5m2_to_f32(0x3C), 1.0);
//!
//! // One MXFP4 element: e2m1 nibble times its block's e8m0 scale.
//! let packed = [0x72u8];                 // elements 0x2 (1.0), then 0x7 (6.0)
//! let scale = mx::e8m0_to_f32(125);      // 2^-2
//! assert_eq!(mx::nibble(&packed, 1).map(|n| mx::e2m1_to_f32(n) * scale), Some(1.5));
//! ```

/// E2M1 magnitudes for codes 0..=7 (OCP MX v1.0): 0, 0.5, 1, 1.5, 2, 3, 4, 6.
pub const E2M1_MAGNITUDES: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// The canonical quiet NaN this module returns for formats whose NaN has
/// no payload to carry (`e8m0` 0xFF, `f8e4m3` S.1111.111).
const QUIET_NAN: u32 = 0x7FC0_0000;

/// An OCP MX FP4 (E2M1) element from the low 4 bits of `nibble`
/// (bit 3 sign, bits 2..1 exponent with bias 1, bit 0 mantissa).
/// The high 4 bits are ignored. There is no NaN or infinity; 0b1000 is −0.0.
pub fn e2m1_to_f32(nibble: u8) -> f32 {
    let code = usize::from(nibble & 0x7);
    // Fallback not taken: code is masked to 0..8, the table's length.
    let mag = E2M1_MAGNITUDES.get(code).copied().unwrap_or(0.0);
    if nibble & 0x8 != 0 {
        -mag
    } else {
        mag
    }
}

/// An OCP MX E8M0 scale byte: 2^(byte − 127). 0 is 2^−127 (an `f32`
/// subnormal, exact); 0xFF is NaN.
pub fn e8m0_to_f32(byte: u8) -> f32 {
    match byte {
        0xFF => f32::from_bits(QUIET_NAN),
        // 2^-127 = 2^-126 * 0.5: the subnormal with only mantissa bit 22 set.
        0 => f32::from_bits(0x0040_0000),
        b => f32::from_bits(u32::from(b) << 23),
    }
}

/// Element `index` of a packed nibble stream (low nibble of each byte first),
/// or `None` past the end.
#[must_use]
pub fn nibble(bytes: &[u8], index: usize) -> Option<u8> {
    let byte = *bytes.get(index / 2)?;
    Some(if index % 2 == 0 { byte & 0x0F } else { byte >> 4 })
}

/// IEEE binary16 bits to `f32` (exact, including subnormals; NaN payload kept).
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits & 0x8000) << 16;
    let exp = u32::from((bits >> 10) & 0x1F);
    let man = u32::from(bits & 0x03FF);
    let magnitude = match exp {
        0 if man == 0 => 0,
        // Subnormal: man * 2^-24, exact in f32 (man < 2^10).
        0 => (f32_from_u16(man) * f32::from_bits(0x3380_0000)).to_bits(),
        0x1F => 0x7F80_0000 | (man << 13),
        // Rebias 15 -> 127: exp + 112 (exp is 1..=30, no overflow).
        e => ((e.wrapping_add(112)) << 23) | (man << 13),
    };
    f32::from_bits(sign | magnitude)
}

/// bfloat16 bits to `f32`: the upper half of the binary32 bits (exact).
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

/// OFP8 E4M3 (bias 7, no infinities, S.1111.111 is NaN, largest finite 448).
pub fn f8e4m3_to_f32(byte: u8) -> f32 {
    let sign = u32::from(byte & 0x80) << 24;
    let exp = u32::from((byte >> 3) & 0x0F);
    let man = u32::from(byte & 0x07);
    let magnitude = match exp {
        0x0F if man == 0x07 => return f32::from_bits(QUIET_NAN | sign),
        0 if man == 0 => 0,
        // Subnormal: man/8 * 2^-6 = man * 2^-9, exact.
        0 => (f32_from_u16(man) * f32::from_bits(0x3B00_0000)).to_bits(),
        // Rebias 7 -> 127: exp + 120.
        e => ((e.wrapping_add(120)) << 23) | (man << 20),
    };
    f32::from_bits(sign | magnitude)
}

/// OFP8 E5M2 (bias 15, IEEE-style infinities and NaN): the upper byte of a
/// binary16, so it converts through [`f16_to_f32`].
pub fn f8e5m2_to_f32(byte: u8) -> f32 {
    f16_to_f32(u16::from(byte) << 8)
}

/// A small integer (below 2^16, so exact) as `f32`.
fn f32_from_u16(v: u32) -> f32 {
    // Fallback not taken: callers pass values below 2^16.
    f32::from(u16::try_from(v).unwrap_or(0))
}
