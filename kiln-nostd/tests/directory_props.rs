//! Property tests: arbitrary tensor sets round-trip through writer and
//! parser; any single-byte change or truncation of a valid block never
//! panics and never yields a view outside the buffer.

use kiln_nostd::{
    dtype::Width,
    writer::{QuantSpec, TensorRef},
    DType, Directory, Parser, Tensor, TensorSpec, Writer,
};
use owned::{specs, OwnedTensor};
use proptest::prelude::*;

mod owned;

fn data_len(dtype: DType, shape: &[u64], blocks: u64, block_size: u32) -> usize {
    let n: u64 = shape.iter().product();
    match dtype.width() {
        Width::Bytes(w) => (n * u64::from(w)) as usize,
        Width::Nibble => n.div_ceil(2) as usize,
        Width::Opaque => (blocks * u64::from(block_size)) as usize,
    }
}

/// Legal payload bytes: bools are 0/1, odd packed tails have a zero high nibble.
fn legalise(dtype: DType, shape: &[u64], mut data: Vec<u8>) -> Vec<u8> {
    let n: u64 = shape.iter().product();
    match dtype {
        DType::Bool => data.iter_mut().for_each(|b| *b &= 1),
        DType::I4 | DType::U4 | DType::E2M1 if n % 2 == 1 => {
            if let Some(last) = data.last_mut() {
                *last &= 0x0F;
            }
        }
        _ => {}
    }
    data
}

fn tensor() -> impl Strategy<Value = OwnedTensor> {
    let dtype = prop_oneof![
        8 => proptest::sample::select(DType::closed_set().to_vec()),
        1 => (4096u16..=32767).prop_map(DType::Opaque),
    ];
    (dtype, proptest::collection::vec(0u64..5, 0..4), 0u64..4, 1u32..20, any::<u64>()).prop_flat_map(
        |(dtype, shape, blocks, block_size, seed)| {
            let len = data_len(dtype, &shape, blocks, block_size);
            proptest::collection::vec(any::<u8>(), len..=len).prop_map(move |data| {
                let opaque = dtype.is_opaque();
                OwnedTensor {
                    name: None,
                    dtype,
                    data: legalise(dtype, &shape, data),
                    shape: shape.clone(),
                    layout: opaque.then(|| format!("L{}", seed % 7)),
                    block_size: if opaque { block_size } else { 0 },
                    quant: QuantSpec::None,
                }
            })
        },
    )
}

/// A set of tensors, all named or none, optionally with one quantized pair.
fn tensor_set() -> impl Strategy<Value = Vec<OwnedTensor>> {
    (proptest::collection::vec(tensor(), 0..6), any::<bool>(), any::<bool>(), 1u32..9).prop_map(
        |(mut ts, named, quantize, group)| {
            if quantize {
                // data: 1-D e2m1 of `len` elements, scale: e8m0 with one byte per group.
                let len = u64::from(group) * 3 + 1;
                let scales = len.div_ceil(u64::from(group));
                let scale_index = ts.len() as u32 + 1;
                ts.push(OwnedTensor {
                    name: None,
                    dtype: DType::E2M1,
                    shape: vec![len],
                    data: vec![0x21; len.div_ceil(2) as usize - 1].into_iter().chain([0x01]).collect(),
                    layout: None,
                    block_size: 0,
                    quant: QuantSpec::Scales { axis: 0, group_size: group, scale: TensorRef::Index(scale_index) },
                });
                ts.push(OwnedTensor {
                    name: None,
                    dtype: DType::E8M0,
                    shape: vec![scales],
                    data: vec![127; scales as usize],
                    layout: None,
                    block_size: 0,
                    quant: QuantSpec::None,
                });
            }
            if named {
                for (i, t) in ts.iter_mut().enumerate() {
                    t.name = Some(format!("t{i}.é"));
                }
            }
            ts
        },
    )
}

fn write(ts: &[OwnedTensor]) -> Vec<u8> {
    let specs = specs(ts);
    let len = Writer::new().encoded_len(&specs).unwrap();
    let mut out = vec![0xAA; len + 7];
    assert_eq!(Writer::new().write(&specs, &mut out).unwrap(), len);
    assert!(out[len..].iter().all(|&b| b == 0xAA), "writer touched bytes past the block");
    out.truncate(len);
    out
}

/// Re-encodes a parsed directory from its views alone.
fn rewrite(dir: &Directory<'_>) -> Vec<u8> {
    let tensors: Vec<_> = dir.iter().collect();
    let specs: Vec<_> = tensors.iter().map(TensorSpec::from_tensor).collect();
    let mut out = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    Writer::new().write(&specs, &mut out).unwrap();
    out
}

fn assert_views_inside(buf: &[u8], t: &Tensor<'_>) {
    let range = buf.as_ptr_range();
    let b = t.bytes();
    assert!(range.start <= b.as_ptr() && b.as_ptr_range().end <= range.end);
    assert_eq!(b.len(), t.byte_len());
    assert!(t.absolute_offset() + b.len() <= buf.len());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 8 } else { 256 }, ..ProptestConfig::default() })]

    #[test]
    fn written_sets_parse_back_identically(ts in tensor_set()) {
        let bytes = write(&ts);
        let dir = Directory::parse(&bytes).unwrap();
        prop_assert_eq!(dir.len(), ts.len());
        for (t, o) in dir.iter().zip(&ts) {
            prop_assert_eq!(t.name(), o.name.as_deref());
            prop_assert_eq!(t.dtype(), o.dtype);
            prop_assert_eq!(t.shape(), &o.shape[..]);
            prop_assert_eq!(t.bytes(), &o.data[..]);
            prop_assert_eq!(t.layout(), o.layout.as_deref());
            prop_assert_eq!(t.block_size(), o.block_size);
            prop_assert_eq!(t.bytes().as_ptr() as usize % 64 == (bytes.as_ptr() as usize) % 64, true);
            if let Some(name) = &o.name {
                prop_assert_eq!(dir.find(name).map(|f| f.index()), Some(t.index()));
            }
        }
        prop_assert_eq!(rewrite(&dir), bytes.clone());
        // The hashed name check agrees with the quadratic one.
        let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(ts.len() as u32)];
        let (d2, index) = Parser::new().scratch(&mut scratch).parse_indexed(&bytes).unwrap();
        prop_assert_eq!(d2.len(), dir.len());
        for t in dir.iter() {
            if let Some(n) = t.name() {
                prop_assert_eq!(index.get(n).map(|f| f.index()), Some(t.index()));
            }
        }
    }

    #[test]
    fn single_byte_changes_never_escape_the_buffer(ts in tensor_set(), pos in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = write(&ts);
        let i = pos.index(bytes.len());
        bytes[i] = byte;
        check_any(&bytes);
    }

    #[test]
    fn truncations_are_eof_or_trailing_free(ts in tensor_set(), cut in any::<prop::sample::Index>()) {
        let bytes = write(&ts);
        let n = cut.index(bytes.len());
        let err = Directory::parse(&bytes[..n]).unwrap_err();
        prop_assert!(err.offset() <= n, "offset {} past {}", err.offset(), n);
        // A block cut short never validates; the first fault is running out of bytes.
        prop_assert_eq!(err.code(), kiln_nostd::ErrorCode::Eof);
    }
}

/// Whatever the bytes, parsing returns; accepted blocks have in-bounds,
/// non-overlapping views and are canonical; errors point inside the buffer.
fn check_any(bytes: &[u8]) {
    match Directory::parse(bytes) {
        Ok(dir) => {
            let mut last_end = 0usize;
            for t in dir.iter() {
                assert_views_inside(bytes, &t);
                if t.byte_len() > 0 {
                    assert!(t.absolute_offset() >= last_end, "views overlap");
                    last_end = t.absolute_offset() + t.byte_len();
                }
                let _ = (t.name(), t.layout(), t.quant(), t.as_slice::<f32>(), t.element_count());
            }
            assert_eq!(rewrite(&dir), bytes, "accepted block is not canonical");
        }
        Err(e) => assert!(e.offset() <= bytes.len(), "error offset {} past {}", e.offset(), bytes.len()),
    }
}

/// The writer zeroes the padding and the gaps itself: a dirty output buffer
/// gives the same block as a zeroed one.
#[test]
fn the_writer_does_not_need_a_zeroed_buffer() {
    use kiln_nostd::{DType, TensorSpec, Writer};
    let data = [7u8; 5];
    let specs = [
        TensorSpec::new(DType::U8, &[5], &data).named("a"),
        TensorSpec::new(DType::U8, &[0], &[]).named("bb"),
        TensorSpec::new(DType::U8, &[3], &data[..3]).named("c"),
    ];
    let n = Writer::new().encoded_len(&specs).unwrap();
    let mut clean = vec![0u8; n];
    let mut dirty = vec![0xAAu8; n + 3];
    Writer::new().write(&specs, &mut clean).unwrap();
    assert_eq!(Writer::new().write(&specs, &mut dirty).unwrap(), n);
    assert_eq!(&dirty[..n], &clean[..]);
    assert_eq!(&dirty[n..], &[0xAA; 3], "bytes past the block are left as they were");
}
