//! Dtype codes: the closed set 1..=19 and the opaque range 4096..=32767.

/// A tensor element type.
///
/// ```
/// use kiln_nostd::DType;
/// assert_eq!(DType::from_code(2), Some(DType::F32));
/// assert_eq!(DType::F32.name(), "f32");
/// assert_eq!(DType::from_code(4096), Some(DType::Opaque(4096)));
/// assert_eq!(DType::from_code(20), None); // reserved
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DType {
    /// IEEE binary64.
    F64,
    /// IEEE binary32.
    F32,
    /// IEEE binary16.
    F16,
    /// bfloat16.
    BF16,
    /// OFP8 E4M3.
    F8E4M3,
    /// OFP8 E5M2.
    F8E5M2,
    /// One byte, 0 or 1.
    Bool,
    /// Signed byte.
    I8,
    /// Unsigned byte.
    U8,
    /// Little-endian i16.
    I16,
    /// Little-endian u16.
    U16,
    /// Little-endian i32.
    I32,
    /// Little-endian u32.
    U32,
    /// Little-endian i64.
    I64,
    /// Little-endian u64.
    U64,
    /// Packed two's-complement nibbles, low nibble first.
    I4,
    /// Packed unsigned nibbles, low nibble first.
    U4,
    /// OCP MX FP4 E2M1, packed nibbles.
    E2M1,
    /// OCP MX E8M0 scale byte.
    E8M0,
    /// An opaque foreign block layout, code 4096..=32767; the layout name says which.
    Opaque(u16),
}

/// How many bytes a dtype's elements take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// Whole bytes per element.
    Bytes(u8),
    /// Two elements per byte, low nibble first.
    Nibble,
    /// byte_length is explicit and a multiple of block_size.
    Opaque,
}

/// The first opaque code.
pub const OPAQUE_MIN: u16 = 4096;
/// The last opaque code.
pub const OPAQUE_MAX: u16 = 32767;

const CLOSED: [DType; 19] = [
    DType::F64,
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::F8E4M3,
    DType::F8E5M2,
    DType::Bool,
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
    DType::I4,
    DType::U4,
    DType::E2M1,
    DType::E8M0,
];

impl DType {
    /// The dtype for a wire code, or `None` for 0, the reserved 20..=4095, and codes above 32767.
    #[must_use]
    pub fn from_code(code: u16) -> Option<DType> {
        match code {
            OPAQUE_MIN..=OPAQUE_MAX => Some(DType::Opaque(code)),
            _ => CLOSED.get(usize::from(code).checked_sub(1)?).copied(),
        }
    }

    /// The dtype of a code the parser accepted: total, because an accepted
    /// code outside the closed set is an opaque one. Views of a checked
    /// directory decode with it, so they need no fallback and no decode
    /// when a tensor is handed out.
    #[inline]
    pub(crate) fn from_accepted_code(code: u16) -> DType {
        match CLOSED.get(usize::from(code).wrapping_sub(1)) {
            Some(&d) => d,
            None => DType::Opaque(code),
        }
    }

    /// The wire code.
    pub const fn code(self) -> u16 {
        match self {
            DType::F64 => 1,
            DType::F32 => 2,
            DType::F16 => 3,
            DType::BF16 => 4,
            DType::F8E4M3 => 5,
            DType::F8E5M2 => 6,
            DType::Bool => 7,
            DType::I8 => 8,
            DType::U8 => 9,
            DType::I16 => 10,
            DType::U16 => 11,
            DType::I32 => 12,
            DType::U32 => 13,
            DType::I64 => 14,
            DType::U64 => 15,
            DType::I4 => 16,
            DType::U4 => 17,
            DType::E2M1 => 18,
            DType::E8M0 => 19,
            DType::Opaque(code) => code,
        }
    }

    /// The spec's name (`"f32"`, `"e2m1"`); `"opaque"` for opaque codes.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::I4 => "i4",
            DType::U4 => "u4",
            DType::E2M1 => "e2m1",
            DType::E8M0 => "e8m0",
            DType::Opaque(_) => "opaque",
        }
    }

    /// The dtype with spec name `name` (closed set only).
    #[must_use]
    pub fn from_name(name: &str) -> Option<DType> {
        CLOSED.iter().copied().find(|d| d.name() == name)
    }

    /// Element width.
    pub const fn width(self) -> Width {
        match self {
            DType::F64 | DType::I64 | DType::U64 => Width::Bytes(8),
            DType::F32 | DType::I32 | DType::U32 => Width::Bytes(4),
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => Width::Bytes(2),
            DType::F8E4M3 | DType::F8E5M2 | DType::Bool | DType::I8 | DType::U8 | DType::E8M0 => Width::Bytes(1),
            DType::I4 | DType::U4 | DType::E2M1 => Width::Nibble,
            DType::Opaque(_) => Width::Opaque,
        }
    }

    /// True for codes 4096..=32767.
    #[must_use]
    pub const fn is_opaque(self) -> bool {
        matches!(self, DType::Opaque(_))
    }

    /// The payload length `count` elements need, or `None` for opaque dtypes
    /// (their length is explicit) and on overflow.
    #[must_use]
    pub fn byte_length(self, count: u64) -> Option<u64> {
        match self.width() {
            Width::Bytes(w) => count.checked_mul(u64::from(w)),
            // ceil(count / 2) without the overflow of count + 1.
            Width::Nibble => Some(count.div_ceil(2)),
            Width::Opaque => None,
        }
    }

    /// All nineteen dtypes of the closed set, in code order.
    pub const fn closed_set() -> &'static [DType] {
        &CLOSED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_reserved_are_rejected() {
        for (i, d) in CLOSED.iter().enumerate() {
            assert_eq!(usize::from(d.code()), i + 1);
            assert_eq!(DType::from_code(d.code()), Some(*d));
            assert_eq!(DType::from_name(d.name()), Some(*d));
        }
        for code in [0u16, 20, 100, 4095, 32768, 65535] {
            assert_eq!(DType::from_code(code), None, "code {code}");
        }
        assert_eq!(DType::from_code(4096), Some(DType::Opaque(4096)));
        assert_eq!(DType::from_code(32767), Some(DType::Opaque(32767)));
    }

    #[test]
    fn byte_lengths() {
        assert_eq!(DType::F32.byte_length(2), Some(8));
        assert_eq!(DType::U4.byte_length(3), Some(2));
        assert_eq!(DType::U4.byte_length(u64::MAX), Some(u64::MAX / 2 + 1));
        assert_eq!(DType::F64.byte_length(u64::MAX), None);
        assert_eq!(DType::Opaque(4096).byte_length(1), None);
    }
}
