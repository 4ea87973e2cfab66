//! Named regression tests, one per bug class from the history of GGUF
//! readers (llama.cpp / ggml CVEs and fuzzing reports), each against the
//! Kiln tensor directory and the Frozen reader (the HK reader's are in
//! kiln-hk/tests/hk_regressions.rs):
//!
//! 1. element-count product overflow (n_elements wrapping to a small number),
//! 2. offset + length overflow (a range that wraps below the buffer end),
//! 3. alignment/padding arithmetic that wraps (round-up near 2^64),
//! 4. count times element size overflow (n * type_size wrapping),
//! 5. a count larger than the remaining bytes (allocation or read past the end),
//! 6. type confusion between a declared dtype and its byte length.
//!
//! Every test name starts with the class. Each input is a valid block with
//! the fields of one class set to the hostile values; the reader must
//! reject it with the stated code (never accept a wrapped value, never panic).

use kiln_nostd::frozen::{self, Schema};
use kiln_nostd::{dtype::ViewError, DType, Directory, ErrorCode, Limits, Parser, Rule, TensorSpec, Writer};

const F32: [u8; 8] = [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0];
/// Descriptor 0 field offsets.
const D0: usize = 64;
const AT_DTYPE: usize = D0;
const AT_RANK: usize = D0 + 2;
const AT_OFFSET: usize = D0 + 32;
const AT_LENGTH: usize = D0 + 40;
const AT_SHAPE: usize = D0 + 48;

fn write(specs: &[TensorSpec<'_>]) -> Vec<u8> {
    let mut out = vec![0; Writer::new().encoded_len(specs).unwrap()];
    Writer::new().write(specs, &mut out).unwrap();
    out
}

/// The spec's 200-byte block: one unnamed f32 vector [1.0, -2.0].
fn f32_block() -> Vec<u8> {
    write(&[TensorSpec::new(DType::F32, &[2], &F32)])
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn reject(b: &[u8]) -> (ErrorCode, Rule) {
    let e = Directory::parse(b).expect_err("hostile block accepted");
    assert!(e.offset() <= b.len());
    (e.code(), e.rule())
}

fn frozen_reject(ty: &str, b: &[u8], limits: Limits) -> (ErrorCode, Rule) {
    let s: Schema<'_> = Schema::parse(ty).unwrap();
    let e = frozen::validate(b, &s, &limits, false).expect_err("hostile value accepted");
    assert!(e.offset() <= b.len());
    (e.code(), e.rule())
}

// ---------------------------------------------------------------- 1

#[test]
fn element_count_product_overflow_is_limit_not_a_wrapped_count() {
    // 2^32 * 2^32 = 2^64 wraps to 0; with byte_length 0 a wrapping reader
    // would accept a tensor that claims 2^64 elements.
    let mut b = f32_block();
    b[AT_RANK] = 2;
    put_u64(&mut b, AT_SHAPE, 1 << 32);
    put_u64(&mut b, AT_SHAPE + 8, 1 << 32);
    assert_eq!(reject(&b), (ErrorCode::Limit, Rule::ShapeOverflow));
    // Eight dimensions of 2^8: the product reaches 2^64 only at the last one.
    b[AT_RANK] = 8;
    for i in 0..8 {
        put_u64(&mut b, AT_SHAPE + 8 * i, 256);
    }
    assert_eq!(reject(&b), (ErrorCode::Limit, Rule::ShapeOverflow));
    // The exact product is what counts: a zero dimension makes it 0, so
    // huge other dimensions do not overflow (then the length decides: TYPE).
    put_u64(&mut b, AT_SHAPE + 8 * 7, 0);
    put_u64(&mut b, AT_SHAPE, u64::MAX);
    assert_eq!(reject(&b), (ErrorCode::Type, Rule::LengthMismatch));
    // Opaque dtypes skip the width check but not the product.
    let mut o = write(&[TensorSpec::opaque(4096, "Q4_K", 18, &[32], &[7; 18])]);
    o[AT_RANK] = 2;
    put_u64(&mut o, AT_SHAPE, u64::MAX);
    put_u64(&mut o, AT_SHAPE + 8, 2);
    assert_eq!(reject(&o), (ErrorCode::Limit, Rule::ShapeOverflow));
}

#[test]
fn element_count_product_overflow_in_a_quant_scale_count_is_not_wrapped() {
    // A scheme-1 tensor whose scale count (groups * other dims) would wrap
    // to the scale tensor's element count: must be TYPE (count mismatch) or
    // the shape's own LIMIT, never accepted.
    let q = TensorSpec::new(DType::U8, &[1], &[0]).quantized(kiln_nostd::writer::QuantSpec::Scales {
        axis: 0,
        group_size: 1,
        scale: kiln_nostd::writer::TensorRef::Index(1),
    });
    let s = TensorSpec::new(DType::E8M0, &[1], &[127]);
    let mut b = write(&[q, s]);
    b[AT_RANK] = 2;
    put_u64(&mut b, AT_SHAPE, 1 << 32);
    put_u64(&mut b, AT_SHAPE + 8, (1 << 32) + 1);
    assert_eq!(reject(&b).0, ErrorCode::Limit);
}

// ---------------------------------------------------------------- 2

#[test]
fn offset_plus_length_overflow_is_limit_even_past_the_payload() {
    // byte_offset + byte_length wraps to 4: inside an 8-byte payload for a
    // wrapping reader.
    let mut b = f32_block();
    put_u64(&mut b, AT_OFFSET, u64::MAX - 3);
    assert_eq!(reject(&b), (ErrorCode::Limit, Rule::RangeOverflow));
    let mut b = f32_block();
    put_u64(&mut b, AT_LENGTH, u64::MAX);
    put_u64(&mut b, AT_OFFSET, 1);
    assert_eq!(reject(&b), (ErrorCode::Limit, Rule::RangeOverflow));
    // payload_base + payload_bytes: the block end wraps.
    let mut h = kiln_nostd::wire::EMPTY_BLOCK;
    put_u64(&mut h, 16, u64::MAX - 32);
    assert_eq!(reject(&h), (ErrorCode::Limit, Rule::PayloadSizeOverflow));
}

#[test]
fn offset_plus_length_overflow_in_a_struct_field_reports_absolute_offsets() {
    let mut rec = 7i64.to_le_bytes().to_vec();
    let mut b = f32_block();
    put_u64(&mut b, AT_OFFSET, u64::MAX - 3);
    rec.extend(&b);
    let e = Parser::new().parse_at(&rec, 8).unwrap_err();
    assert_eq!((e.code(), e.rule(), e.offset()), (ErrorCode::Limit, Rule::RangeOverflow, 8 + AT_OFFSET));
    let s: Schema<'_> = Schema::parse("struct{id:i64,batch:tensors,}").unwrap();
    assert_eq!(frozen::validate(&rec, &s, &Limits::DEFAULT, false), Err(e));
}

// ---------------------------------------------------------------- 3

#[test]
fn alignment_padding_arithmetic_that_wraps_is_rejected() {
    // A tensor placed at the last 64-aligned offset below 2^64: rounding the
    // running end up to it must not wrap to 0.
    let mut b = write(&[TensorSpec::new(DType::U8, &[1], &[1]), TensorSpec::new(DType::U8, &[1], &[2])]);
    put_u64(&mut b, D0 + 128 + 32, u64::MAX - 63);
    assert!(matches!(reject(&b).0, ErrorCode::Limit | ErrorCode::Type));
    // First tensor ends 1 byte below 2^64; the next aligned offset does not exist.
    let mut b = write(&[TensorSpec::new(DType::U8, &[1], &[1]), TensorSpec::new(DType::U8, &[0], &[])]);
    put_u64(&mut b, AT_OFFSET, u64::MAX - 1);
    put_u64(&mut b, D0 + 128 + 32, 0);
    assert!(matches!(reject(&b).0, ErrorCode::Limit | ErrorCode::Type));
    // payload_bytes that makes payload_base + payload_bytes land exactly on 2^64.
    let mut h = kiln_nostd::wire::EMPTY_BLOCK;
    put_u64(&mut h, 16, u64::MAX - 63);
    assert_eq!(reject(&h), (ErrorCode::Limit, Rule::PayloadSizeOverflow));
    // One below: no overflow, so the block simply does not fit (EOF).
    put_u64(&mut h, 16, u64::MAX - 64);
    assert_eq!(reject(&h), (ErrorCode::Eof, Rule::BlockTruncated));
    // A heap end that is not 64-aligned pads up; nonzero padding is TYPE.
    let mut n = write(&[TensorSpec::new(DType::U8, &[1], &[1]).named("abc")]);
    let pad = 64 + 128 + 3;
    n[pad] = 1;
    assert_eq!(reject(&n), (ErrorCode::Type, Rule::NonzeroPadding));
}

#[test]
fn alignment_padding_arithmetic_writer_rounds_at_64_byte_boundaries() {
    // Payload lengths around 64 and empty tensors: each offset is the next
    // multiple of 64 at or after the running end (an empty tensor after a
    // 5-byte one sits at 64 and moves the running end to 64).
    for (lens, offsets) in [
        (&[63usize, 1][..], &[0u64, 64][..]),
        (&[64, 1], &[0, 64]),
        (&[65, 1], &[0, 128]),
        (&[5, 0, 1], &[0, 64, 64]),
        (&[0, 0, 1], &[0, 0, 0]),
    ] {
        let data: Vec<Vec<u8>> = lens.iter().map(|&n| vec![1u8; n]).collect();
        let shapes: Vec<[u64; 1]> = lens.iter().map(|&n| [n as u64]).collect();
        let specs: Vec<TensorSpec<'_>> =
            data.iter().zip(&shapes).map(|(d, s)| TensorSpec::new(DType::U8, s, d)).collect();
        let b = write(&specs);
        let dir = Directory::parse(&b).unwrap();
        let got: Vec<u64> = dir.iter().map(|t| t.byte_offset()).collect();
        assert_eq!(got, offsets, "lengths {lens:?}");
        assert_eq!(dir.payload_start() % 64, 0);
    }
}

// ---------------------------------------------------------------- 4

#[test]
fn count_times_element_size_overflow_is_limit() {
    // 2^61 f64 elements: n fits a u64, n * 8 = 2^64 does not. A wrapping
    // reader computes byte length 0 and accepts byte_length 0.
    let mut b = f32_block();
    b[AT_DTYPE] = 1; // f64
    put_u64(&mut b, AT_SHAPE, 1 << 61);
    put_u64(&mut b, AT_LENGTH, 0);
    put_u64(&mut b, 16, 0); // payload_bytes 0: the range is empty
    b.truncate(192);
    assert_eq!(reject(&b), (ErrorCode::Limit, Rule::ShapeOverflow));
    // The same for a 4-byte dtype at 2^62 and a 2-byte dtype at 2^63.
    b[AT_DTYPE] = 2;
    put_u64(&mut b, AT_SHAPE, 1 << 62);
    assert_eq!(reject(&b), (ErrorCode::Limit, Rule::ShapeOverflow));
    b[AT_DTYPE] = 3;
    put_u64(&mut b, AT_SHAPE, 1 << 63);
    assert_eq!(reject(&b), (ErrorCode::Limit, Rule::ShapeOverflow));
    // Packed dtypes: ceil(n / 2) never overflows; 2^64 - 1 nibbles need 2^63 bytes.
    b[AT_DTYPE] = 17;
    put_u64(&mut b, AT_SHAPE, u64::MAX);
    assert_eq!(reject(&b), (ErrorCode::Type, Rule::LengthMismatch));
}

#[test]
fn count_times_element_size_overflow_tensor_count() {
    // tensor_count * 128 cannot overflow a u64, but tensor_count is capped:
    let mut h = kiln_nostd::wire::EMPTY_BLOCK;
    put_u32(&mut h, 8, u32::MAX);
    put_u64(&mut h, 24, u64::from(u32::MAX) * 128);
    assert_eq!(reject(&h), (ErrorCode::Limit, Rule::TensorCountCap));
    assert_eq!(Parser::new().limits(Limits::MAX).parse(&h).unwrap_err().code(), ErrorCode::Eof);
}

// ---------------------------------------------------------------- 5

#[test]
fn count_larger_than_the_remaining_bytes_is_eof_before_any_allocation() {
    // 16,777,216 tensors claimed in a 64-byte buffer (directory_bytes consistent).
    let mut h = kiln_nostd::wire::EMPTY_BLOCK;
    put_u32(&mut h, 8, 16_777_216);
    put_u64(&mut h, 24, 16_777_216 * 128);
    assert_eq!(reject(&h), (ErrorCode::Eof, Rule::DirectoryTruncated));
    // One past the cap is LIMIT first.
    put_u32(&mut h, 8, 16_777_217);
    put_u64(&mut h, 24, 16_777_217 * 128);
    assert_eq!(reject(&h), (ErrorCode::Limit, Rule::TensorCountCap));
    // A name heap claimed larger than the buffer.
    let mut n = write(&[TensorSpec::new(DType::U8, &[1], &[1]).named("a")]);
    put_u32(&mut n, 12, 1 << 20);
    put_u64(&mut n, 24, 128 + (1 << 20));
    assert_eq!(reject(&n), (ErrorCode::Eof, Rule::DirectoryTruncated));
    // A payload claimed larger than the buffer.
    let mut b = f32_block();
    put_u64(&mut b, 16, 1 << 40);
    assert_eq!(reject(&b), (ErrorCode::Eof, Rule::BlockTruncated));
}

#[test]
fn count_larger_than_the_remaining_bytes_frozen() {
    let claim = [0, 0, 0, 1, 0, 0, 0, 0]; // 16,777,216 claimed, 4 bytes present
    for ty in ["list<u64>", "list<str>", "dict<str,u8>", "list<tensors>", "list<struct{id:u32,name:str,}>"] {
        assert_eq!(frozen_reject(ty, &claim, Limits::DEFAULT), (ErrorCode::Eof, Rule::CountPastEnd), "{ty}");
    }
    assert_eq!(frozen_reject("str", &claim, Limits::DEFAULT), (ErrorCode::Eof, Rule::ByteLengthPastEnd));
    assert_eq!(frozen_reject("list<u8>", &claim, Limits::DEFAULT), (ErrorCode::Eof, Rule::ByteLengthPastEnd));
    // Above the cap: LIMIT before the byte check.
    let over = [1, 0, 0, 1, 0, 0, 0, 0];
    assert_eq!(frozen_reject("list<u64>", &over, Limits::DEFAULT), (ErrorCode::Limit, Rule::CountCap));
}

// ---------------------------------------------------------------- 6

#[test]
fn type_confusion_between_dtype_and_byte_length_is_type() {
    // An f32 vector of 2 relabelled f64: 16 bytes expected, 8 present.
    let mut b = f32_block();
    b[AT_DTYPE] = 1;
    assert_eq!(reject(&b), (ErrorCode::Type, Rule::LengthMismatch));
    // Relabelled f16: 4 bytes expected.
    b[AT_DTYPE] = 3;
    assert_eq!(reject(&b), (ErrorCode::Type, Rule::LengthMismatch));
    // Relabelled u4 (packed): ceil(2 / 2) = 1 byte expected.
    b[AT_DTYPE] = 17;
    assert_eq!(reject(&b), (ErrorCode::Type, Rule::LengthMismatch));
    // An opaque code on dense data: needs a layout name.
    b[AT_DTYPE..AT_DTYPE + 2].copy_from_slice(&4096u16.to_le_bytes());
    assert_eq!(reject(&b), (ErrorCode::Type, Rule::OpaqueWithoutLayout));
    // Codes that name no dtype.
    for code in [0u16, 20, 4095, 32768, u16::MAX] {
        b[AT_DTYPE..AT_DTYPE + 2].copy_from_slice(&code.to_le_bytes());
        assert_eq!(reject(&b), (ErrorCode::Type, Rule::UnknownDtype), "code {code}");
    }
    // Opaque: byte_length not a multiple of block_size.
    let mut o = write(&[TensorSpec::opaque(4096, "Q4_K", 18, &[32], &[7; 18])]);
    put_u32(&mut o, D0 + 12, 17);
    assert_eq!(reject(&o), (ErrorCode::Type, Rule::OpaqueBlockSize));
}

#[test]
fn type_confusion_typed_access_refuses_other_element_types() {
    let b = f32_block();
    let dir = Directory::parse(&b).unwrap();
    let t = dir.get(0).unwrap();
    // f32 bytes are not f64, i32 or u32 values.
    assert_eq!(t.copy_to(&mut [0f64; 4]), Err(ViewError::WrongType { dtype: 2 }));
    assert_eq!(t.copy_to(&mut [0i32; 4]), Err(ViewError::WrongType { dtype: 2 }));
    assert!(t.as_slice::<u32>().is_none() && t.as_slice::<f64>().is_none());
    let mut out = [0f32; 2];
    assert_eq!(t.copy_to(&mut out), Ok(2));
    assert_eq!(out, [1.0, -2.0]);
    assert_eq!(t.copy_to(&mut [0f32; 1]), Err(ViewError::OutputTooShort { needed: 2 }));
}
