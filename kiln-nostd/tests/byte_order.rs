//! Byte order: the same tests pass on little- and big-endian hosts, and
//! prove that views are refused or correct, copies are byte-swapped, and
//! nothing writes host order as wire bytes.
//!
//! `scripts/big-endian.sh` runs this (and the whole kiln-nostd suite) on
//! s390x under qemu-user with `KILN_EXPECT_BIG_ENDIAN=1`, which makes
//! [`the_host_is_big_endian_when_the_script_says_so`] assert that the
//! tests really ran big-endian. `scripts/miri.sh` runs it under Miri on
//! x86_64 and s390x.
// The assertions on cfg!(target_endian) are the point: they are constant per host.
#![allow(clippy::assertions_on_constants)]

use kiln_nostd::frozen::{self, ListView};
use kiln_nostd::{
    dtype::{encode_le, le_bytes, Element, ViewError},
    DType, Directory, TensorSpec, Writer,
};

/// The golden cases, embedded (no file access under Miri or qemu).
const GOLDEN: &str = include_str!("../../spec/kiln-v2-cases.json");

/// The parsed golden file (parsed once: JSON parsing is slow under Miri).
fn cases() -> &'static serde_json::Value {
    static CASES: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();
    CASES.get_or_init(|| serde_json::from_str(GOLDEN).expect("golden json"))
}

fn golden(name: &str) -> Vec<u8> {
    let case = cases()["cases"].as_array().unwrap().iter().find(|c| c["name"] == name).expect("case");
    hex::decode(case["hex"].as_str().unwrap()).unwrap()
}

fn write(specs: &[TensorSpec<'_>]) -> Vec<u8> {
    let mut out = vec![0xEE; Writer::new().encoded_len(specs).unwrap()];
    Writer::new().write(specs, &mut out).unwrap();
    out
}

/// Wire bytes of host values on any host.
fn wire<T: Element>(values: &[T]) -> Vec<u8> {
    let mut out = vec![0u8; values.len() * T::WIDTH];
    assert_eq!(encode_le(values, &mut out), Some(out.len()));
    out
}

#[test]
fn the_host_is_big_endian_when_the_script_says_so() {
    let expect_big = std::env::var("KILN_EXPECT_BIG_ENDIAN").is_ok_and(|v| v == "1");
    if expect_big {
        assert!(cfg!(target_endian = "big"), "scripts/big-endian.sh must run these tests on a big-endian host");
        println!("byte_order: running on a big-endian host ({})", std::env::consts::ARCH);
    }
    // The host order really is what cfg says.
    let native = 1u32.to_ne_bytes();
    assert_eq!(native[0] == 1, cfg!(target_endian = "little"));
}

/// Checks the tensor's copy gives `want` and its view is refused on a
/// big-endian host (for multi-byte elements) or equal to the copy.
fn check_tensor<T: Element + PartialEq + std::fmt::Debug>(block: &[u8], want: &[T]) {
    let dir = Directory::parse(block).expect("valid");
    let t = dir.get(0).unwrap();
    let mut out = vec![<T as bytemuck::Zeroable>::zeroed(); want.len()];
    assert_eq!(t.copy_to(&mut out), Ok(want.len()));
    assert_eq!(out, want, "copy_to is not the host value of the wire bytes");
    match t.as_slice::<T>() {
        Some(v) => {
            assert!(cfg!(target_endian = "little") || T::WIDTH == 1, "a multi-byte view on a big-endian host");
            assert_eq!(v, want);
        }
        None => {
            // Refused: big-endian host, or a payload not aligned for T.
            assert!(cfg!(target_endian = "big") || (t.bytes().as_ptr() as usize) % std::mem::align_of::<T>() != 0);
        }
    }
}

#[test]
fn golden_float_bits_copy_to_host_values() {
    check_tensor(&golden("kiln-v2-f32"), &[1.0f32, -2.0]);
    let neg = golden("kiln-v2-f32-negzero");
    let dir = Directory::parse(&neg).unwrap();
    let mut z = [1.0f32];
    dir.get(0).unwrap().copy_to(&mut z).unwrap();
    assert_eq!(z[0].to_bits(), 0x8000_0000);
    let nan = golden("kiln-v2-f64-nan");
    let dir = Directory::parse(&nan).unwrap();
    let mut f = [0f64];
    dir.get(0).unwrap().copy_to(&mut f).unwrap();
    assert_eq!(f[0].to_bits(), 0x7FF8_0000_0000_0001);
    // f16 and bf16 read as their u16 bits.
    check_tensor(&golden("kiln-v2-f16-named"), &[0x3C00u16]);
    check_tensor(&golden("kiln-v2-bf16"), &[0x3F80u16]);
    // One-byte dtypes: views are fine on any host.
    check_tensor(&golden("kiln-v2-i8"), &[-1i8, -128, 127]);
    check_tensor(&golden("kiln-v2-bool"), &[1u8, 0, 1]);
}

#[test]
fn every_integer_width_round_trips_through_wire_order() {
    fn one<T: Element + PartialEq + std::fmt::Debug>(dtype: DType, values: &[T], le: &[u8]) {
        let data = wire(values);
        assert_eq!(data, le, "{dtype:?}: encode_le is not little-endian");
        let shape = [values.len() as u64];
        let block = write(&[TensorSpec::new(dtype, &shape, &data)]);
        assert_eq!(&block[192..192 + le.len()], le, "{dtype:?}: the writer changed the payload bytes");
        check_tensor(&block, values);
        // le_bytes: zero-copy wire bytes only where host order is wire order.
        match le_bytes(values) {
            Some(b) => {
                assert!(cfg!(target_endian = "little") || T::WIDTH == 1);
                assert_eq!(b, le);
            }
            None => assert!(cfg!(target_endian = "big") && T::WIDTH > 1),
        }
    }
    one(DType::I16, &[-2i16, 0x1234], &[0xfe, 0xff, 0x34, 0x12]);
    one(DType::U16, &[0xBEEFu16], &[0xef, 0xbe]);
    one(DType::I32, &[-2i32], &[0xfe, 0xff, 0xff, 0xff]);
    one(DType::U32, &[0x0102_0304u32], &[4, 3, 2, 1]);
    one(DType::I64, &[-2i64], &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    one(DType::U64, &[0x0102_0304_0506_0708u64], &[8, 7, 6, 5, 4, 3, 2, 1]);
    one(DType::F32, &[1.0f32, -2.0], &[0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0]);
    one(DType::F64, &[1.0f64], &[0, 0, 0, 0, 0, 0, 0xf0, 0x3f]);
    one(DType::F16, &[0x3C00u16], &[0x00, 0x3c]);
    one(DType::BF16, &[0x3F80u16], &[0x80, 0x3f]);
    one(DType::U8, &[1u8, 2, 255], &[1, 2, 255]);
    one(DType::I8, &[-1i8], &[0xff]);
}

#[test]
fn the_writer_on_this_host_writes_the_golden_bytes() {
    // Host values -> encode_le -> Writer must give exactly the golden bytes.
    let f32s = wire(&[1.0f32, -2.0]);
    assert_eq!(write(&[TensorSpec::new(DType::F32, &[2], &f32s)]), golden("kiln-v2-f32"));
    let neg = wire(&[-0.0f32]);
    assert_eq!(write(&[TensorSpec::new(DType::F32, &[1], &neg)]), golden("kiln-v2-f32-negzero"));
    let nan = wire(&[f64::from_bits(0x7FF8_0000_0000_0001)]);
    assert_eq!(write(&[TensorSpec::new(DType::F64, &[1], &nan)]), golden("kiln-v2-f64-nan"));
    let half = wire(&[0x3C00u16]);
    assert_eq!(write(&[TensorSpec::new(DType::F16, &[1], &half).named("half")]), golden("kiln-v2-f16-named"));
    let bf = wire(&[0x3F80u16]);
    assert_eq!(write(&[TensorSpec::new(DType::BF16, &[1], &bf)]), golden("kiln-v2-bf16"));
    // Every accepted golden directory re-encodes from its views to itself.
    let mut n = 0;
    for c in cases()["cases"].as_array().unwrap() {
        if c["type"] != "tensors" || c["expect"] != "accept" {
            continue;
        }
        let b = golden(c["name"].as_str().unwrap());
        let dir = Directory::parse(&b).unwrap();
        let tensors: Vec<_> = dir.iter().collect();
        let specs: Vec<TensorSpec<'_>> = tensors.iter().map(TensorSpec::from_tensor).collect();
        assert_eq!(write(&specs), b, "{}", c["name"]);
        n += 1;
    }
    assert!(n >= 13);
}

#[test]
fn frozen_scalars_and_lists_are_little_endian_on_this_host() {
    let mut out = [0u8; 16];
    assert_eq!(frozen::encode(&1.0f32, &mut out), Ok(4));
    assert_eq!(out[..4], [0, 0, 0x80, 0x3f]);
    assert_eq!(frozen::encode(&0x0102_0304u32, &mut out), Ok(4));
    assert_eq!(out[..4], [4, 3, 2, 1]);
    assert_eq!(frozen::encode(&-2i64, &mut out), Ok(8));
    assert_eq!(out[..8], [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(frozen::encode(&f64::from_bits(0x7FF8_0000_0000_0001), &mut out), Ok(8));
    assert_eq!(out[..8], [1, 0, 0, 0, 0, 0, 0xf8, 0x7f]);
    assert_eq!(frozen::decode::<u16>(&[0xef, 0xbe]), Ok(0xBEEF));
    assert_eq!(frozen::decode::<f32>(&[0, 0, 0, 0x80]).map(f32::to_bits), Ok(0x8000_0000));
    // kiln-pod-list-f32: a list view copies swapped and views only on LE.
    let buf = golden("kiln-pod-list-f32");
    let list: ListView<'_, f32> = frozen::decode(&buf).unwrap();
    let mut vals = [0f32; 2];
    assert_eq!(list.copy_to(&mut vals), Ok(2));
    assert_eq!(vals, [1.0, -2.0]);
    if let Some(v) = list.as_slice() {
        assert!(cfg!(target_endian = "little"));
        assert_eq!(v, [1.0, -2.0]);
    } else {
        assert!(cfg!(target_endian = "big") || (buf[4..].as_ptr() as usize) % 4 != 0);
    }
    let mut enc = [0u8; 12];
    assert_eq!(frozen::encode(&[1.0f32, -2.0][..], &mut enc), Ok(12));
    assert_eq!(enc[..], buf[..]);
}

#[test]
fn wrong_element_types_are_refused_on_every_host() {
    let b = golden("kiln-v2-f32");
    let dir = Directory::parse(&b).unwrap();
    let t = dir.get(0).unwrap();
    assert_eq!(t.copy_to(&mut [0u32; 2]), Err(ViewError::WrongType { dtype: 2 }));
    assert!(t.as_slice::<u32>().is_none());
}
