//! Dtype codes: the closed set 1..=19 and the opaque range 4096..=32767.
//! One table (`dtypes!` below) states each dtype's code, name and width.
//! The [`Element`] types a tensor's bytes can be viewed or copied as
//! ([`view`], [`copy`], [`encode_le`], [`le_bytes`]) live here too.

mod element;
pub use element::{copy, encode_le, le_bytes, view, Element, ViewError};

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

/// What step 11 checks in a tensor's bytes, by dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ByteRule {
    /// Any byte is an element (or an opaque block's byte).
    Any,
    /// Every byte is 0 or 1 (BOOL_BYTE).
    ZeroOrOne,
    /// Packed nibbles: with an odd element count, the last byte's high
    /// nibble is 0 (PACKED_HIGH_NIBBLE).
    OddPadZero,
}

/// The first opaque code.
pub const OPAQUE_MIN: u16 = 4096;
/// The last opaque code.
pub const OPAQUE_MAX: u16 = 32767;

macro_rules! dtypes {
    ($( $(#[$doc:meta])* $name:ident = $code:literal, $text:literal, $width:expr, $bytes:expr; )*) => {
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
            $( $(#[$doc])* $name, )*
            /// An opaque foreign block layout, code 4096..=32767; the layout name says which.
            Opaque(u16),
        }

        const CLOSED: [DType; [$($code),*].len()] = [$(DType::$name),*];

        impl DType {
            /// The wire code.
            pub const fn code(self) -> u16 {
                match self {
                    $( DType::$name => $code, )*
                    DType::Opaque(code) => code,
                }
            }

            /// The spec's name (`"f32"`, `"e2m1"`); `"opaque"` for opaque codes.
            pub const fn name(self) -> &'static str {
                match self {
                    $( DType::$name => $text, )*
                    DType::Opaque(_) => "opaque",
                }
            }

            /// [`name`](Self::name) NUL-terminated, for C.
            pub const fn name_c_str(self) -> &'static core::ffi::CStr {
                match self {
                    $( DType::$name => crate::__c_str!($text), )*
                    DType::Opaque(_) => c"opaque",
                }
            }

            /// Element width.
            pub const fn width(self) -> Width {
                match self {
                    $( DType::$name => $width, )*
                    DType::Opaque(_) => Width::Opaque,
                }
            }

            /// What step 11 checks in this dtype's bytes.
            pub const fn byte_rule(self) -> ByteRule {
                match self {
                    $( DType::$name => $bytes, )*
                    DType::Opaque(_) => ByteRule::Any,
                }
            }
        }
    };
}

// The closed set, in code order (`from_code` indexes it by code - 1; a
// test holds the order).
dtypes! {
    /// IEEE binary64.
    F64 = 1, "f64", Width::Bytes(8), ByteRule::Any;
    /// IEEE binary32.
    F32 = 2, "f32", Width::Bytes(4), ByteRule::Any;
    /// IEEE binary16.
    F16 = 3, "f16", Width::Bytes(2), ByteRule::Any;
    /// bfloat16.
    BF16 = 4, "bf16", Width::Bytes(2), ByteRule::Any;
    /// OFP8 E4M3.
    F8E4M3 = 5, "f8e4m3", Width::Bytes(1), ByteRule::Any;
    /// OFP8 E5M2.
    F8E5M2 = 6, "f8e5m2", Width::Bytes(1), ByteRule::Any;
    /// One byte, 0 or 1.
    Bool = 7, "bool", Width::Bytes(1), ByteRule::ZeroOrOne;
    /// Signed byte.
    I8 = 8, "i8", Width::Bytes(1), ByteRule::Any;
    /// Unsigned byte.
    U8 = 9, "u8", Width::Bytes(1), ByteRule::Any;
    /// Little-endian i16.
    I16 = 10, "i16", Width::Bytes(2), ByteRule::Any;
    /// Little-endian u16.
    U16 = 11, "u16", Width::Bytes(2), ByteRule::Any;
    /// Little-endian i32.
    I32 = 12, "i32", Width::Bytes(4), ByteRule::Any;
    /// Little-endian u32.
    U32 = 13, "u32", Width::Bytes(4), ByteRule::Any;
    /// Little-endian i64.
    I64 = 14, "i64", Width::Bytes(8), ByteRule::Any;
    /// Little-endian u64.
    U64 = 15, "u64", Width::Bytes(8), ByteRule::Any;
    /// Packed two's-complement nibbles, low nibble first.
    I4 = 16, "i4", Width::Nibble, ByteRule::OddPadZero;
    /// Packed unsigned nibbles, low nibble first.
    U4 = 17, "u4", Width::Nibble, ByteRule::OddPadZero;
    /// OCP MX FP4 E2M1, packed nibbles.
    E2M1 = 18, "e2m1", Width::Nibble, ByteRule::OddPadZero;
    /// OCP MX E8M0 scale byte.
    E8M0 = 19, "e8m0", Width::Bytes(1), ByteRule::Any;
}

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

    /// The dtype with spec name `name` (closed set only).
    #[must_use]
    pub fn from_name(name: &str) -> Option<DType> {
        CLOSED.iter().copied().find(|d| d.name() == name)
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
            Width::Bytes(w) => crate::bytes::mul_u64(count, u64::from(w)),
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
            assert_eq!(d.name_c_str().to_str(), Ok(d.name()));
        }
        for code in [0u16, 20, 100, 4095, 32768, 65535] {
            assert_eq!(DType::from_code(code), None, "code {code}");
        }
        assert_eq!(DType::from_code(4096), Some(DType::Opaque(4096)));
        assert_eq!(DType::from_code(32767), Some(DType::Opaque(32767)));
    }

    /// Step 11's byte rules (spec section 11): bool bytes are 0 or 1, every
    /// packed-nibble dtype pads an odd count with a zero high nibble, and
    /// no other dtype constrains its bytes.
    #[test]
    fn byte_rules_follow_the_spec() {
        for d in CLOSED {
            let want = match (d, d.width()) {
                (DType::Bool, _) => ByteRule::ZeroOrOne,
                (_, Width::Nibble) => ByteRule::OddPadZero,
                _ => ByteRule::Any,
            };
            assert_eq!(d.byte_rule(), want, "{}", d.name());
        }
        assert_eq!(DType::Opaque(4096).byte_rule(), ByteRule::Any);
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
