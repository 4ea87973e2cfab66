//! Fixed opaque dtype codes and the dtype tables of every input format.
//! docs/conversion.md prints the same tables; `tables_are_consistent` below
//! keeps the code ranges from colliding.

use kiln_hk::StorageType;
use kiln_nostd::DType;

/// Opaque code of ggml type `id`: 4096 + id (ids 0..=255).
pub const GGML_BASE: u16 = 4096;
/// Opaque codes of HK-only storage types: 4352 + storage_type code.
pub const HK_BASE: u16 = 4352;
/// Opaque codes of safetensors dtypes without a Kiln equivalent: 4608 + k.
pub const SAFETENSORS_BASE: u16 = 4608;

/// A ggml block format: (type id, name, elements per block, bytes per block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GgmlBlock {
    pub id: u32,
    pub name: &'static str,
    pub elements: u64,
    pub bytes: u64,
}

/// ggml's block formats (`ggml_type_traits`: blck_size, type_size).
pub const GGML_BLOCKS: &[GgmlBlock] = &[
    GgmlBlock { id: 2, name: "Q4_0", elements: 32, bytes: 18 },
    GgmlBlock { id: 3, name: "Q4_1", elements: 32, bytes: 20 },
    GgmlBlock { id: 6, name: "Q5_0", elements: 32, bytes: 22 },
    GgmlBlock { id: 7, name: "Q5_1", elements: 32, bytes: 24 },
    GgmlBlock { id: 8, name: "Q8_0", elements: 32, bytes: 34 },
    // sizeof(block_q8_1) == 36 in ggml (two halves + 32 quants); gguf-py's table says 40.
    GgmlBlock { id: 9, name: "Q8_1", elements: 32, bytes: 36 },
    GgmlBlock { id: 10, name: "Q2_K", elements: 256, bytes: 84 },
    GgmlBlock { id: 11, name: "Q3_K", elements: 256, bytes: 110 },
    GgmlBlock { id: 12, name: "Q4_K", elements: 256, bytes: 144 },
    GgmlBlock { id: 13, name: "Q5_K", elements: 256, bytes: 176 },
    GgmlBlock { id: 14, name: "Q6_K", elements: 256, bytes: 210 },
    GgmlBlock { id: 15, name: "Q8_K", elements: 256, bytes: 292 },
    GgmlBlock { id: 16, name: "IQ2_XXS", elements: 256, bytes: 66 },
    GgmlBlock { id: 17, name: "IQ2_XS", elements: 256, bytes: 74 },
    GgmlBlock { id: 18, name: "IQ3_XXS", elements: 256, bytes: 98 },
    GgmlBlock { id: 19, name: "IQ1_S", elements: 256, bytes: 50 },
    GgmlBlock { id: 20, name: "IQ4_NL", elements: 32, bytes: 18 },
    GgmlBlock { id: 21, name: "IQ3_S", elements: 256, bytes: 110 },
    GgmlBlock { id: 22, name: "IQ2_S", elements: 256, bytes: 82 },
    GgmlBlock { id: 23, name: "IQ4_XS", elements: 256, bytes: 136 },
    GgmlBlock { id: 29, name: "IQ1_M", elements: 256, bytes: 56 },
    GgmlBlock { id: 34, name: "TQ1_0", elements: 256, bytes: 54 },
    GgmlBlock { id: 35, name: "TQ2_0", elements: 256, bytes: 66 },
    GgmlBlock { id: 39, name: "MXFP4", elements: 32, bytes: 17 },
    GgmlBlock { id: 40, name: "NVFP4", elements: 64, bytes: 36 },
    GgmlBlock { id: 41, name: "Q1_0", elements: 128, bytes: 18 },
];

/// ggml's element types with a Kiln dtype: (id, name, dtype).
pub const GGML_DENSE: &[(u32, &str, DType)] = &[
    (0, "F32", DType::F32),
    (1, "F16", DType::F16),
    (24, "I8", DType::I8),
    (25, "I16", DType::I16),
    (26, "I32", DType::I32),
    (27, "I64", DType::I64),
    (28, "F64", DType::F64),
    (30, "BF16", DType::BF16),
];

pub fn ggml_block(id: u32) -> Option<GgmlBlock> {
    GGML_BLOCKS.iter().copied().find(|b| b.id == id)
}

pub fn ggml_dense(id: u32) -> Option<DType> {
    GGML_DENSE.iter().find(|(i, _, _)| *i == id).map(|(_, _, d)| *d)
}

/// The opaque code of a ggml block format.
pub fn ggml_code(block: &GgmlBlock) -> u16 {
    // ggml type ids are below 64, so the code stays inside the reserved range.
    u16::try_from(block.id).ok().and_then(|id| GGML_BASE.checked_add(id)).unwrap_or(GGML_BASE)
}

/// The opaque code of an HK-only storage type.
pub fn hk_code(s: StorageType) -> u16 {
    HK_BASE + u16::from(s.code())
}

/// safetensors dtypes without a Kiln dtype: (name, code, block bytes, elements per block).
pub const SAFETENSORS_OPAQUE: &[(&str, u16, u32, u64)] = &[
    ("F6_E2M3", SAFETENSORS_BASE, 3, 4),
    ("F6_E3M2", SAFETENSORS_BASE + 1, 3, 4),
    ("F8_E4M3FNUZ", SAFETENSORS_BASE + 2, 1, 1),
    ("F8_E5M2FNUZ", SAFETENSORS_BASE + 3, 1, 1),
    ("C64", SAFETENSORS_BASE + 4, 8, 1),
];

/// safetensors dtype name <-> Kiln dtype, for the types both have.
pub const SAFETENSORS_DENSE: &[(&str, DType)] = &[
    ("BOOL", DType::Bool),
    ("F4", DType::E2M1),
    ("U8", DType::U8),
    ("I8", DType::I8),
    ("F8_E5M2", DType::F8E5M2),
    ("F8_E4M3", DType::F8E4M3),
    ("F8_E8M0", DType::E8M0),
    ("I16", DType::I16),
    ("U16", DType::U16),
    ("F16", DType::F16),
    ("BF16", DType::BF16),
    ("I32", DType::I32),
    ("U32", DType::U32),
    ("F32", DType::F32),
    ("F64", DType::F64),
    ("I64", DType::I64),
    ("U64", DType::U64),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_consistent() {
        for b in GGML_BLOCKS {
            let code = ggml_code(b);
            assert!((GGML_BASE..HK_BASE).contains(&code), "{}", b.name);
            assert!(ggml_dense(b.id).is_none());
        }
        for s in StorageType::ALL {
            let code = hk_code(*s);
            assert!((HK_BASE..SAFETENSORS_BASE).contains(&code));
            if let Some(id) = s.ggml_type() {
                assert!(ggml_block(id).is_some(), "{} has a ggml layout", s.name());
                assert_eq!(ggml_block(id).unwrap().name.to_ascii_lowercase(), s.name());
            }
        }
        for (_, code, _, _) in SAFETENSORS_OPAQUE {
            assert!(DType::from_code(*code).is_some_and(DType::is_opaque));
        }
    }
}
