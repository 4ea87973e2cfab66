//! ONNX `TensorProto.DataType` codes and the Kiln dtypes with the same bytes.

use kiln_nostd::DType;

use crate::proto::tensor_proto::DataType;

/// ONNX `TensorProto.DataType` code, its name, and the Kiln dtype, for the
/// types both have (the bytes are the same: little-endian elements, 4-bit
/// types two per byte, low nibble first). ONNX's FLOAT8E4M3FN is OFP8 E4M3
/// (no infinities; NaN is S.1111.111), Kiln's f8e4m3. Every other code
/// (STRING, COMPLEX64/128, the FNUZ float8 types, UINT2/INT2 and later ones)
/// has no Kiln dtype.
pub const DTYPES: &[(i32, &str, DType)] = &[
    (1, "FLOAT", DType::F32),
    (2, "UINT8", DType::U8),
    (3, "INT8", DType::I8),
    (4, "UINT16", DType::U16),
    (5, "INT16", DType::I16),
    (6, "INT32", DType::I32),
    (7, "INT64", DType::I64),
    (9, "BOOL", DType::Bool),
    (10, "FLOAT16", DType::F16),
    (11, "DOUBLE", DType::F64),
    (12, "UINT32", DType::U32),
    (13, "UINT64", DType::U64),
    (16, "BFLOAT16", DType::BF16),
    (17, "FLOAT8E4M3FN", DType::F8E4M3),
    (19, "FLOAT8E5M2", DType::F8E5M2),
    (21, "UINT4", DType::U4),
    (22, "INT4", DType::I4),
    (23, "FLOAT4E2M1", DType::E2M1),
    (24, "FLOAT8E8M0", DType::E8M0),
];

/// The Kiln dtype of ONNX type `code`, if Kiln has one.
pub fn kiln_dtype(code: i32) -> Option<DType> {
    DTYPES.iter().find(|(c, ..)| *c == code).map(|&(_, _, d)| d)
}

/// The ONNX type code of Kiln dtype `dtype`, if ONNX has it.
pub fn onnx_code(dtype: DType) -> Option<i32> {
    DTYPES.iter().find(|(.., d)| *d == dtype).map(|&(c, ..)| c)
}

/// The ONNX name of a `data_type` code (`"STRING"`, `"FLOAT8E4M3FNUZ"`), or `data_type N`.
pub fn type_name(code: i32) -> String {
    DataType::try_from(code).map_or_else(|_| format!("data_type {code}"), |t| t.as_str_name().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_are_the_schemas_own_and_each_kiln_dtype_appears_once() {
        let mut seen = std::collections::HashSet::new();
        for &(code, name, dtype) in DTYPES {
            assert_eq!(type_name(code), name);
            assert!(seen.insert(dtype), "{name}");
            assert_eq!(onnx_code(dtype), Some(code));
            assert_eq!(kiln_dtype(code), Some(dtype));
        }
        for code in [0, 8, 14, 15, 18, 20, 25, 26, 99] {
            assert_eq!(kiln_dtype(code), None, "{code}");
        }
    }
}
