//! Rule R1 (docs/onnx.md): which tensors stay inline in the graph.
//!
//! ONNX Runtime reads the small inputs that shape-consuming operators take
//! (Reshape's shape, Split's sizes, Slice's starts, Resize's scales,
//! ConstantOfShape's shape, ...) while it resolves the graph, and refuses
//! them as external data ("Cannot parse data from external tensors"). The
//! `onnx` package's own external-data writer keeps every tensor under 1,024
//! bytes inline for this reason; so does Kiln, by the same threshold, so
//! that no operator's table has to be kept here. On the corpus of real
//! exports (docs/conversion.md) what stays inline is a small fraction of
//! the weights.

use kiln_nostd::DType;

use crate::dtype::kiln_dtype;

/// A tensor whose payload is under this many bytes stays inline in the graph.
pub const INLINE_LIMIT: u64 = 1024;

/// Where rule R1 puts a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Its bytes are a tensor of the Kiln file; the graph points at them.
    Kiln,
    /// It stays in the graph (under [`INLINE_LIMIT`] bytes, or of a type Kiln cannot hold).
    Inline,
}

/// The payload length of `dims` elements of `dtype` (4-bit types two per
/// byte), or `None` for a negative dimension or a length past `u64`.
pub fn payload_len(dtype: DType, dims: &[i64]) -> Option<u64> {
    let elements = dims.iter().try_fold(1u64, |n, &d| n.checked_mul(u64::try_from(d).ok()?))?;
    dtype.byte_length(elements)
}

/// Where rule R1 puts a tensor of ONNX type `code` and dimensions `dims`:
/// inline when Kiln has no dtype for it or its payload is under
/// [`INLINE_LIMIT`] bytes; in the Kiln file otherwise (including dimensions
/// that do not give a length, which the converter then refuses by name).
pub fn place(code: i32, dims: &[i64]) -> Place {
    match kiln_dtype(code) {
        None => Place::Inline,
        Some(dtype) => match payload_len(dtype, dims) {
            Some(n) if n < INLINE_LIMIT => Place::Inline,
            _ => Place::Kiln,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threshold_is_exclusive_and_counts_bytes_not_elements() {
        assert_eq!(place(1, &[255]), Place::Inline); // 1,020 bytes
        assert_eq!(place(1, &[256]), Place::Kiln); // 1,024 bytes
        assert_eq!(place(2, &[1023]), Place::Inline);
        assert_eq!(place(2, &[1024]), Place::Kiln);
        assert_eq!(place(7, &[]), Place::Inline); // a scalar
        assert_eq!(place(21, &[2047]), Place::Kiln); // 4-bit: 2,047 elements take 1,024 bytes
        assert_eq!(place(21, &[2046]), Place::Inline);
        assert_eq!(place(21, &[2048]), Place::Kiln);
        assert_eq!(place(1, &[0, 1 << 40]), Place::Inline); // no elements
    }

    #[test]
    fn types_kiln_cannot_hold_stay_inline_whatever_their_size() {
        for code in [8, 14, 15, 18, 20, 25, 0] {
            assert_eq!(place(code, &[1 << 20]), Place::Inline, "{code}");
        }
    }

    #[test]
    fn dimensions_without_a_length_go_to_kiln_where_they_are_refused() {
        assert_eq!(place(1, &[-1]), Place::Kiln);
        assert_eq!(place(1, &[i64::MAX, i64::MAX]), Place::Kiln);
    }
}
