//! HK storage types (`storage_type`), tile layouts and sparsity types.

use kiln_nostd::DType;

macro_rules! storage_types {
    ($( $(#[$doc:meta])* $name:ident = $code:literal, $text:literal, $family:ident; )*) => {
        /// An HK `storage_type` code (section 5 of the HK format).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub enum StorageType {
            $( $(#[$doc])* $name, )*
        }

        impl StorageType {
            /// Every defined storage type, in code order.
            pub const ALL: &'static [StorageType] = &[ $( StorageType::$name, )* ];

            /// The storage type for a code, `None` for an undefined code.
            pub const fn from_code(code: u8) -> Option<StorageType> {
                match code {
                    $( $code => Some(StorageType::$name), )*
                    _ => None,
                }
            }

            /// The wire code.
            pub const fn code(self) -> u8 {
                match self { $( StorageType::$name => $code, )* }
            }

            /// The HK name (`"f32"`, `"q4_k"`, `"shared_ref"`).
            pub const fn name(self) -> &'static str {
                match self { $( StorageType::$name => $text, )* }
            }

            /// Which family the type belongs to.
            pub const fn family(self) -> Family {
                match self { $( StorageType::$name => Family::$family, )* }
            }
        }
    };
}

/// The families of section 5.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Family {
    /// Raw dense element types (0x00..=0x0E).
    Dense,
    /// HK "dual-mode" quantization containers (0x10..=0x14).
    DualMode,
    /// GGUF-compatible legacy block formats (0x15..=0x1A).
    Legacy,
    /// Sparse storage (0x20..=0x23).
    Sparse,
    /// Virtual references (0x30..=0x32).
    Reference,
    /// K-quants, 256-weight super-blocks (0x40..=0x45).
    KQuant,
    /// I-quants (0x50..=0x58).
    IQuant,
    /// Ternary and microscaling (0x60..=0x63).
    Microscaling,
}

storage_types! {
    /// IEEE binary32.
    F32 = 0x00, "f32", Dense;
    /// IEEE binary16.
    F16 = 0x01, "f16", Dense;
    /// bfloat16.
    Bf16 = 0x02, "bf16", Dense;
    /// OFP8 E4M3.
    Fp8E4m3 = 0x03, "fp8_e4m3", Dense;
    /// OFP8 E5M2.
    Fp8E5m2 = 0x04, "fp8_e5m2", Dense;
    /// Signed byte.
    Int8 = 0x05, "int8", Dense;
    /// Little-endian i32.
    Int32 = 0x06, "int32", Dense;
    /// Little-endian i64.
    Int64 = 0x07, "int64", Dense;
    /// Unsigned byte.
    Uint8 = 0x08, "uint8", Dense;
    /// One byte per bool.
    Bool = 0x09, "bool", Dense;
    /// Little-endian i16.
    Int16 = 0x0A, "int16", Dense;
    /// Little-endian u16.
    Uint16 = 0x0B, "uint16", Dense;
    /// Little-endian u32.
    Uint32 = 0x0C, "uint32", Dense;
    /// Little-endian u64.
    Uint64 = 0x0D, "uint64", Dense;
    /// IEEE binary64.
    F64 = 0x0E, "f64", Dense;
    /// HK dual-mode 4-bit.
    Dq4 = 0x10, "dq4", DualMode;
    /// HK dual-mode 8-bit.
    Dq8 = 0x11, "dq8", DualMode;
    /// HK dual-mode 6-bit.
    Dq6 = 0x12, "dq6", DualMode;
    /// HK dual-mode 12-bit.
    Dq12 = 0x13, "dq12", DualMode;
    /// HK dual-mode ternary.
    Dqt = 0x14, "dqt", DualMode;
    /// ggml Q4_0.
    Q4_0 = 0x15, "q4_0", Legacy;
    /// ggml Q8_0.
    Q8_0 = 0x16, "q8_0", Legacy;
    /// ggml Q4_1.
    Q4_1 = 0x17, "q4_1", Legacy;
    /// ggml Q5_0.
    Q5_0 = 0x18, "q5_0", Legacy;
    /// ggml Q5_1.
    Q5_1 = 0x19, "q5_1", Legacy;
    /// ggml Q8_1.
    Q8_1 = 0x1A, "q8_1", Legacy;
    /// Sparse f16.
    SparseF16 = 0x20, "sparse_f16", Sparse;
    /// Sparse dq8.
    SparseDq8 = 0x21, "sparse_dq8", Sparse;
    /// 2:4 structured sparse.
    Sparse2_4 = 0x22, "sparse_2_4", Sparse;
    /// 2:4 structured sparse dq4.
    SparseDq4_2_4 = 0x23, "sparse_dq4_2_4", Sparse;
    /// No bytes stored (data_offset = data_size = 0).
    NullRef = 0x30, "null_ref", Reference;
    /// Tied weights: the offsets of an earlier tensor.
    SharedRef = 0x31, "shared_ref", Reference;
    /// A LoRA reference.
    LoraRef = 0x32, "lora_ref", Reference;
    /// ggml Q2_K.
    Q2K = 0x40, "q2_k", KQuant;
    /// ggml Q3_K.
    Q3K = 0x41, "q3_k", KQuant;
    /// ggml Q4_K.
    Q4K = 0x42, "q4_k", KQuant;
    /// ggml Q5_K.
    Q5K = 0x43, "q5_k", KQuant;
    /// ggml Q6_K.
    Q6K = 0x44, "q6_k", KQuant;
    /// ggml Q8_K.
    Q8K = 0x45, "q8_k", KQuant;
    /// ggml IQ1_S.
    Iq1S = 0x50, "iq1_s", IQuant;
    /// ggml IQ1_M.
    Iq1M = 0x51, "iq1_m", IQuant;
    /// ggml IQ2_XXS.
    Iq2Xxs = 0x52, "iq2_xxs", IQuant;
    /// ggml IQ2_XS.
    Iq2Xs = 0x53, "iq2_xs", IQuant;
    /// ggml IQ3_XXS.
    Iq3Xxs = 0x54, "iq3_xxs", IQuant;
    /// ggml IQ4_NL.
    Iq4Nl = 0x55, "iq4_nl", IQuant;
    /// ggml IQ4_XS.
    Iq4Xs = 0x56, "iq4_xs", IQuant;
    /// ggml IQ2_S.
    Iq2S = 0x57, "iq2_s", IQuant;
    /// ggml IQ3_S.
    Iq3S = 0x58, "iq3_s", IQuant;
    /// ggml TQ1_0.
    Tq1_0 = 0x60, "tq1_0", Microscaling;
    /// ggml TQ2_0.
    Tq2_0 = 0x61, "tq2_0", Microscaling;
    /// MXFP4.
    Mxfp4 = 0x62, "mxfp4", Microscaling;
    /// NVFP4.
    Nvfp4 = 0x63, "nvfp4", Microscaling;
}

impl StorageType {
    /// The Kiln dtype with the same element bits, for the dense family.
    #[must_use]
    pub const fn kiln_dtype(self) -> Option<DType> {
        Some(match self {
            StorageType::F32 => DType::F32,
            StorageType::F16 => DType::F16,
            StorageType::Bf16 => DType::BF16,
            StorageType::Fp8E4m3 => DType::F8E4M3,
            StorageType::Fp8E5m2 => DType::F8E5M2,
            StorageType::Int8 => DType::I8,
            StorageType::Int32 => DType::I32,
            StorageType::Int64 => DType::I64,
            StorageType::Uint8 => DType::U8,
            StorageType::Bool => DType::Bool,
            StorageType::Int16 => DType::I16,
            StorageType::Uint16 => DType::U16,
            StorageType::Uint32 => DType::U32,
            StorageType::Uint64 => DType::U64,
            StorageType::F64 => DType::F64,
            _ => return None,
        })
    }

    /// Bytes per element of a dense type.
    #[must_use]
    pub const fn dense_width(self) -> Option<u8> {
        match self.kiln_dtype() {
            Some(d) => match d.width() {
                kiln_nostd::dtype::Width::Bytes(w) => Some(w),
                _ => None,
            },
            None => None,
        }
    }

    /// The ggml type id (`enum ggml_type`) of a GGUF-compatible block format,
    /// which HK says these types share. `None` for HK-only types.
    #[must_use]
    pub const fn ggml_type(self) -> Option<u32> {
        Some(match self {
            StorageType::Q4_0 => 2,
            StorageType::Q4_1 => 3,
            StorageType::Q5_0 => 6,
            StorageType::Q5_1 => 7,
            StorageType::Q8_0 => 8,
            StorageType::Q8_1 => 9,
            StorageType::Q2K => 10,
            StorageType::Q3K => 11,
            StorageType::Q4K => 12,
            StorageType::Q5K => 13,
            StorageType::Q6K => 14,
            StorageType::Q8K => 15,
            StorageType::Iq2Xxs => 16,
            StorageType::Iq2Xs => 17,
            StorageType::Iq3Xxs => 18,
            StorageType::Iq1S => 19,
            StorageType::Iq4Nl => 20,
            StorageType::Iq3S => 21,
            StorageType::Iq2S => 22,
            StorageType::Iq4Xs => 23,
            StorageType::Iq1M => 29,
            StorageType::Tq1_0 => 34,
            StorageType::Tq2_0 => 35,
            StorageType::Mxfp4 => 39,
            StorageType::Nvfp4 => 40,
            _ => return None,
        })
    }

    /// True for null_ref, shared_ref and lora_ref.
    #[must_use]
    pub const fn is_reference(self) -> bool {
        matches!(self.family(), Family::Reference)
    }
}

/// Names of the tile layouts (section 6), indexed by code.
pub const TILE_LAYOUTS: [&str; 8] =
    ["row_major", "col_major", "tile_16x16", "tile_16x8", "tile_32x16", "block_sparse_2_4", "tile_32x32", "tile_64x64"];

/// Names of the sparsity types (section 7), indexed by code.
pub const SPARSITY_TYPES: [&str; 6] = ["none", "bitmask", "csr", "structured_2_4", "physical_pruned", "bsr"];

/// The name of a tile layout code.
#[must_use]
pub fn tile_layout_name(code: u8) -> Option<&'static str> {
    TILE_LAYOUTS.get(usize::from(code)).copied()
}

/// The name of a sparsity type code.
#[must_use]
pub fn sparsity_name(code: u8) -> Option<&'static str> {
    SPARSITY_TYPES.get(usize::from(code)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        assert_eq!(StorageType::ALL.len(), 15 + 5 + 6 + 4 + 3 + 6 + 9 + 4);
        for s in StorageType::ALL {
            assert_eq!(StorageType::from_code(s.code()), Some(*s));
        }
        let defined = StorageType::ALL.iter().map(|s| s.code()).collect::<heapless::Vec<u8, 64>>();
        for code in 0u8..=255 {
            assert_eq!(StorageType::from_code(code).is_some(), defined.contains(&code), "{code:#x}");
        }
        assert_eq!(StorageType::from_code(0x44).map(StorageType::name), Some("q6_k"));
        assert_eq!(StorageType::from_code(0x58).map(StorageType::name), Some("iq3_s"));
        assert_eq!(StorageType::Uint8.kiln_dtype(), Some(DType::U8));
        assert_eq!(StorageType::F64.dense_width(), Some(8));
        assert_eq!(StorageType::Q4_0.dense_width(), None);
    }
}
