//! Named regression tests of the HK reader, one per bug class from the
//! history of GGUF readers (llama.cpp / ggml CVEs and fuzzing reports); the
//! same classes against the Kiln tensor directory and the Frozen reader are
//! in kiln-nostd/tests/regressions.rs:
//!
//! 1. element-count product overflow (n_elements wrapping to a small number),
//! 2. offset + length overflow (a range that wraps below the buffer end),
//! 3. alignment/padding arithmetic that wraps (round-up near 2^64),
//! 4. count times element size overflow (n * type_size wrapping),
//! 5. a count larger than the remaining bytes (allocation or read past the end),
//! 6. type confusion between a declared storage type and its byte length.
//!
//! Every test name starts with the class. Each input is the valid example
//! file with the fields of one class set to the hostile values; the reader
//! must reject it with the stated code (never accept a wrapped value, never panic).

use kiln_hk::{ErrorCode, HkFile, Rule};

/// The HK doc example file with its one TOC entry replaced: `storage`,
/// `dims`, data range. The entry stays at 158 (ending before the data at 256).
fn hk_file(storage: u8, dims: &[u64], data_off: u64, data_size: u64) -> Vec<u8> {
    let mut f =
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.hk")).to_vec();
    let mut e = vec![1, 0, b'w', storage, 0, 0, dims.len() as u8];
    for d in dims {
        e.extend(d.to_le_bytes());
    }
    e.extend(data_off.to_le_bytes());
    e.extend(data_size.to_le_bytes());
    e.extend([0u8; 32]); // scale and residual: absent
    e.extend(32u16.to_le_bytes());
    e.extend(0u32.to_le_bytes());
    assert!(158 + e.len() <= 256);
    f[158..158 + e.len()].copy_from_slice(&e);
    f[56..64].copy_from_slice(&(e.len() as u64).to_le_bytes());
    f
}

fn hk_reject(f: &[u8]) -> (ErrorCode, Rule) {
    let e = HkFile::parse(f).expect_err("hostile HK file accepted");
    assert!(e.offset() <= f.len());
    (e.code(), e.rule())
}

#[test]
fn hk_builder_makes_valid_files() {
    assert!(HkFile::parse(&hk_file(0, &[2], 256, 8)).is_ok());
    assert!(HkFile::parse(&hk_file(0, &[1, 2], 256, 8)).is_ok());
}

#[test]
fn element_count_product_overflow_hk() {
    assert_eq!(hk_reject(&hk_file(0, &[1 << 32, 1 << 32], 256, 0)), (ErrorCode::Limit, Rule::HkShapeOverflow));
    assert_eq!(hk_reject(&hk_file(0, &[u64::MAX, 2, 1], 256, 8)), (ErrorCode::Limit, Rule::HkShapeOverflow));
}

#[test]
fn offset_plus_length_overflow_hk() {
    assert_eq!(hk_reject(&hk_file(0, &[2], u64::MAX - 3, 8)), (ErrorCode::Limit, Rule::HkRangeOverflow));
    // A section whose offset + size wraps.
    let mut f = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.hk"));
    f[40..48].copy_from_slice(&(u64::MAX - 64).to_le_bytes());
    assert_eq!(hk_reject(&f), (ErrorCode::Limit, Rule::HkSectionOverflow));
}

#[test]
fn alignment_padding_arithmetic_that_wraps_hk() {
    // appendix_offset 8-aligned just below 2^64 with the appendix flag set.
    let mut f = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.hk"));
    let flags = u32::from_le_bytes(f[8..12].try_into().unwrap()) | 2;
    f[8..12].copy_from_slice(&flags.to_le_bytes());
    f[80..88].copy_from_slice(&(u64::MAX - 7).to_le_bytes());
    assert!(HkFile::parse(&f).is_err());
    // tensor_data_offset near 2^64.
    let mut f = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.hk"));
    f[64..72].copy_from_slice(&(u64::MAX - 127).to_le_bytes());
    assert!(HkFile::parse(&f).is_err());
}

#[test]
fn count_times_element_size_overflow_hk() {
    // tensor_count * 60 (minimum entry) overflows.
    let mut f = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.hk"));
    f[16..24].copy_from_slice(&(1u64 << 62).to_le_bytes());
    assert_eq!(hk_reject(&f), (ErrorCode::Limit, Rule::HkCountOverflow));
    // Dense size: 2^62 f32 elements times 4 bytes wraps to 0.
    assert!(matches!(hk_reject(&hk_file(0, &[1 << 62], 256, 0)).0, ErrorCode::Limit | ErrorCode::Type));
}

#[test]
fn count_larger_than_the_remaining_bytes_hk() {
    // Two TOC entries claimed, one present.
    let mut f = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.hk"));
    f[16..24].copy_from_slice(&2u64.to_le_bytes());
    assert_eq!(hk_reject(&f).0, ErrorCode::Eof);
    // 2^40 metadata pairs in a 30-byte section.
    let mut f = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.hk"));
    f[24..32].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert_eq!(hk_reject(&f), (ErrorCode::Eof, Rule::HkCountPastSection));
    // A data range past the end of the file.
    assert_eq!(hk_reject(&hk_file(0, &[2], 256, 1 << 20)).0, ErrorCode::Eof);
}

#[test]
fn type_confusion_between_storage_type_and_data_size_hk() {
    // f32 storage with 6 bytes of data for 2 elements.
    assert_eq!(hk_reject(&hk_file(0, &[2], 256, 6)), (ErrorCode::Type, Rule::HkDenseSize));
    // f16 storage (code 1) over the 8 bytes of 2 f32 elements.
    assert_eq!(hk_reject(&hk_file(1, &[2], 256, 8)), (ErrorCode::Type, Rule::HkDenseSize));
    // An undefined storage code.
    assert_eq!(hk_reject(&hk_file(0xEE, &[2], 256, 8)).1, Rule::HkStorageType);
}
