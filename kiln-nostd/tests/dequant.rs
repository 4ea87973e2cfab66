//! `kiln_nostd::dequant` rule by rule (spec/kiln-v2.md §11.1): each test
//! states one rule of the section and fails when the core breaks it. The
//! expected values come from the rule's own words (an odometer over the
//! multi-index, 2^(b−127), one rounding), not from the code under test.
//! tests/tests/dequant_cases.rs checks the same code against the reference's
//! golden bits.

use kiln_nostd::dequant::{dequantize_into, element_f32, DequantError, Dequantizer};
use kiln_nostd::{
    writer::{QuantSpec, TensorRef},
    DType, Directory, Incremental, Limits, TensorSpec, Writer,
};

/// A written directory (owned bytes) for `specs`.
fn write(specs: &[TensorSpec<'_>]) -> Vec<u8> {
    let mut buf = vec![0u8; Writer::new().encoded_len(specs).unwrap()];
    Writer::new().write(specs, &mut buf).unwrap();
    buf
}

fn scales(axis: usize, group_size: u32) -> QuantSpec<'static> {
    QuantSpec::Scales { axis: u16::try_from(axis).unwrap(), group_size, scale: TensorRef::Index(1) }
}

fn outer(axis: usize, group_size: u32) -> QuantSpec<'static> {
    QuantSpec::ScalesOuter {
        axis: u16::try_from(axis).unwrap(),
        group_size,
        scale: TensorRef::Index(1),
        outer: TensorRef::Index(2),
    }
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Every value of tensor 0 of `buf`, through both entry points (which must agree).
fn values(buf: &[u8]) -> Vec<f32> {
    let dir = Directory::parse(buf).unwrap();
    let t = dir.get(0).unwrap();
    let n = usize::try_from(t.element_count()).unwrap();
    let mut out = vec![0f32; n];
    assert_eq!(dequantize_into(&t, &mut out), Ok(n));
    let d = Dequantizer::new(&t).unwrap();
    for (i, v) in out.iter().enumerate() {
        assert_eq!(d.get(i).map(f32::to_bits), Some(v.to_bits()), "element {i}");
    }
    out
}

// ---------------------------------------------------------------- element value

#[test]
fn f32_elements_keep_their_bits() {
    for bits in [0x3F80_0000u32, 0x8000_0000, 0x7FA0_0001, 0xFFC0_1234, 0x0000_0001, 0x7F80_0000] {
        assert_eq!(element_f32(DType::F32, &bits.to_le_bytes(), 0).map(f32::to_bits), Some(bits));
    }
}

#[test]
fn narrow_floats_convert_exactly() {
    // Each through its own formula: sign, exponent, mantissa.
    // Every f16 natively; under Miri a stride of them (mx's own test walks them all there).
    for h in (0u16..=0xFFFF).step_by(if cfg!(miri) { 97 } else { 1 }) {
        let got = element_f32(DType::F16, &h.to_le_bytes(), 0).unwrap();
        let (e, m) = (i32::from((h >> 10) & 0x1F), f64::from(h & 0x3FF));
        let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
        match e {
            0x1F if m == 0.0 => assert_eq!(f64::from(got), sign * f64::INFINITY),
            0x1F => assert!(got.is_nan()),
            0 => assert_eq!(f64::from(got), sign * m * 2f64.powi(-24), "{h:#06x}"),
            e => assert_eq!(f64::from(got), sign * (1.0 + m / 1024.0) * 2f64.powi(e - 15), "{h:#06x}"),
        }
        let b = element_f32(DType::BF16, &h.to_le_bytes(), 0).unwrap();
        assert_eq!(b.to_bits() & !0x0040_0000, (u32::from(h) << 16) & !0x0040_0000, "bf16 {h:#06x}");
    }
    for b in 0u8..=255 {
        let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
        let e4 = element_f32(DType::F8E4M3, &[b], 0).unwrap();
        let (e, m) = (i32::from((b >> 3) & 0xF), f64::from(b & 7));
        if b & 0x7F == 0x7F {
            assert!(e4.is_nan(), "S.1111.111 is NaN");
        } else if e == 0 {
            assert_eq!(f64::from(e4), sign * m / 8.0 * 2f64.powi(-6));
        } else {
            assert_eq!(f64::from(e4), sign * (1.0 + m / 8.0) * 2f64.powi(e - 7), "{b:#04x}");
        }
        let e5 = element_f32(DType::F8E5M2, &[b], 0).unwrap();
        assert_eq!(e5.to_bits(), element_f32(DType::F16, &(u16::from(b) << 8).to_le_bytes(), 0).unwrap().to_bits());
    }
    let e2m1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    for code in 0u8..16 {
        let want = if code & 8 != 0 { -e2m1[usize::from(code & 7)] } else { e2m1[usize::from(code)] };
        let got = element_f32(DType::E2M1, &[code], 0).unwrap();
        assert_eq!(got.to_bits(), f32::to_bits(want), "e2m1 {code:#x}: bit 3 is the sign");
    }
}

#[test]
fn e8m0_is_two_to_the_byte_minus_127_and_ff_is_nan() {
    for b in 0u8..=254 {
        let got = element_f32(DType::E8M0, &[b], 0).unwrap();
        assert_eq!(f64::from(got), 2f64.powi(i32::from(b) - 127), "byte {b}");
    }
    assert_eq!(element_f32(DType::E8M0, &[0], 0).unwrap().to_bits(), 0x0040_0000, "2^-127 is a subnormal");
    assert!(element_f32(DType::E8M0, &[0xFF], 0).unwrap().is_nan());
}

#[test]
fn small_integers_are_exact_and_i4_is_twos_complement() {
    for n in 0u8..16 {
        let want = if n >= 8 { i32::from(n) - 16 } else { i32::from(n) };
        assert_eq!(element_f32(DType::I4, &[n << 4 | 0x3], 1), Some(want as f32), "i4 {n:#x}, high nibble");
        assert_eq!(element_f32(DType::I4, &[n], 0), Some(want as f32), "i4 {n:#x}, low nibble");
        assert_eq!(element_f32(DType::U4, &[n << 4], 1), Some(f32::from(n)));
    }
    for b in 0u8..=255 {
        assert_eq!(element_f32(DType::U8, &[b], 0), Some(f32::from(b)));
        assert_eq!(element_f32(DType::I8, &[b], 0), Some(f32::from(b as i8)));
    }
    assert_eq!(element_f32(DType::Bool, &[1], 0), Some(1.0));
    assert_eq!(element_f32(DType::I16, &(-32768i16).to_le_bytes(), 0), Some(-32768.0));
    assert_eq!(element_f32(DType::U16, &65535u16.to_le_bytes(), 0), Some(65535.0));
}

/// The f32 nearest `num / 2^shift` (num > 0), ties to even, computed on the
/// integer bits: the rule's words, not a float conversion.
fn nearest_f32(v: u128) -> u32 {
    let len = 128 - v.leading_zeros();
    if len <= 24 {
        return (v as f32).to_bits(); // exact: no rounding involved
    }
    let drop = len - 24;
    let (mut m, rest, half) = (v >> drop, v & ((1u128 << drop) - 1), 1u128 << (drop - 1));
    if rest > half || (rest == half && m & 1 == 1) {
        m += 1;
    }
    let (m, e) = if m == 1 << 24 { (m >> 1, drop + 1) } else { (m, drop) };
    // m * 2^e with 2^23 <= m < 2^24: biased exponent 127 + 23 + e.
    ((127 + 23 + e) << 23) | (m as u32 & 0x7F_FFFF)
}

#[test]
fn wide_integers_round_to_nearest_ties_to_even_once() {
    let probes: Vec<u64> = [
        (1u64 << 24) + 1,
        (1 << 24) + 3,
        (1 << 25) + 6,
        (1 << 31) - 64,
        (1 << 32) - 1,
        (1 << 53) + 1,
        // Through an f64 this is a tie that goes down; rounded once it goes up.
        (1 << 60) + (1 << 36) + 1,
        (1 << 60) + (1 << 36),
        (1 << 63) + (1 << 39) + 1,
        u64::MAX,
        0x1234_5678_9ABC_DEF1,
    ]
    .into_iter()
    .chain((0..2000u64).map(|k| k.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1))
    .collect();
    for v in probes {
        let want = nearest_f32(u128::from(v));
        assert_eq!(element_f32(DType::U64, &v.to_le_bytes(), 0).unwrap().to_bits(), want, "u64 {v}");
        if let Ok(s) = i64::try_from(v) {
            let got = element_f32(DType::I64, &(-s).to_le_bytes(), 0).unwrap().to_bits();
            assert_eq!(got, want | 0x8000_0000, "i64 -{v}");
        }
        if let Ok(w) = u32::try_from(v) {
            assert_eq!(element_f32(DType::U32, &w.to_le_bytes(), 0).unwrap().to_bits(), want, "u32 {w}");
        }
        if let Ok(w) = i32::try_from(v) {
            assert_eq!(element_f32(DType::I32, &w.to_le_bytes(), 0).unwrap().to_bits(), want, "i32 {w}");
        }
    }
    assert_eq!(element_f32(DType::I64, &i64::MIN.to_le_bytes(), 0).unwrap().to_bits(), 0xDF00_0000);
    assert_eq!(element_f32(DType::I32, &i32::MIN.to_le_bytes(), 0).unwrap().to_bits(), 0xCF00_0000);
}

#[test]
fn f64_rounds_to_nearest_ties_to_even_and_overflows_to_infinity() {
    let cases: [(u64, u32); 10] = [
        (0x3FF0_0000_1000_0000, 0x3F80_0000), // 1 + 2^-24: tie, to even
        (0x3FF0_0000_3000_0000, 0x3F80_0002), // 1 + 3 * 2^-24: tie, to even
        (0x3FF0_0000_1000_0001, 0x3F80_0001), // above the tie
        (0x47EF_FFFF_F000_0000, 0x7F80_0000), // the tie above f32 max: infinity
        (0x47EF_FFFF_EFFF_FFFF, 0x7F7F_FFFF),
        (0xC7F0_0000_0000_0000, 0xFF80_0000), // -2^128
        (0x3690_0000_0000_0000, 0x0000_0000), // 2^-150: tie with 0, to even
        (0x3698_0000_0000_0000, 0x0000_0001), // 3 * 2^-151
        (0xB6A8_0000_0000_0000, 0x8000_0002), // -3 * 2^-150: tie, to even
        (0x8000_0000_0000_0000, 0x8000_0000), // -0.0
    ];
    for (bits, want) in cases {
        assert_eq!(element_f32(DType::F64, &bits.to_le_bytes(), 0).unwrap().to_bits(), want, "{bits:#018x}");
    }
    assert!(element_f32(DType::F64, &0x7FF8_0000_0000_0001u64.to_le_bytes(), 0).unwrap().is_nan());
}

#[test]
fn opaque_elements_have_no_value() {
    assert_eq!(element_f32(DType::Opaque(4096), &[1, 2, 3], 0), None);
    assert_eq!(element_f32(DType::F32, &[0, 0, 0x80], 0), None, "past the bytes");
}

// ---------------------------------------------------------------- scheme 0

#[test]
fn scheme_0_is_the_element_value() {
    let data = [0x00u8, 0x3C, 0x00, 0xC0, 0x01, 0x00];
    let buf = write(&[TensorSpec::new(DType::F16, &[3], &data)]);
    let got: Vec<u32> = values(&buf).iter().map(|v| v.to_bits()).collect();
    assert_eq!(got, [0x3F80_0000, 0xC000_0000, 0x3380_0000]);
}

// ---------------------------------------------------------------- scale index

/// The rule in its own words: the multi-index of `i` over `dims`, its axis
/// digit divided by the group, read row-major over dims with that dimension
/// replaced by its group count.
fn rule_scale_index(dims: &[usize], axis: usize, group: usize, i: usize) -> usize {
    let mut idx = vec![0; dims.len()];
    let mut rest = i;
    for k in (0..dims.len()).rev() {
        idx[k] = rest % dims[k];
        rest /= dims[k];
    }
    idx[axis] /= group;
    let mut scale_dims = dims.to_vec();
    scale_dims[axis] = dims[axis].div_ceil(group);
    idx.iter().zip(&scale_dims).fold(0, |flat, (&j, &d)| flat * d + j)
}

/// Every shape of rank 1 and 2 with dimensions from {1, 2, 3, 5} and five of
/// rank 3, every axis, groups that divide and groups that do not (1, 2, 3, 4,
/// 7). Under Miri, fewer of each (every rank, axis and kind of group stays).
#[test]
fn scales_are_read_row_major_with_the_axis_counted_in_groups() {
    let sizes: &[usize] = if cfg!(miri) { &[2, 5] } else { &[1, 2, 3, 5] };
    let mut shapes: Vec<Vec<usize>> = [1usize, 2, 3, 5].iter().map(|&a| vec![a]).collect();
    for &a in sizes {
        for &b in sizes {
            shapes.push(vec![a, b]);
        }
    }
    let cubes = [(2, 3, 5), (5, 2, 3), (3, 5, 2), (1, 5, 3), (3, 1, 2)];
    for &(a, b, c) in cubes.iter().take(if cfg!(miri) { 2 } else { cubes.len() }) {
        shapes.push(vec![a, b, c]);
    }
    let groups: &[usize] = if cfg!(miri) { &[2, 3] } else { &[1, 2, 3, 4, 7] };
    let mut checked = 0;
    for dims in &shapes {
        let shape: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        let n: usize = dims.iter().product();
        let data: Vec<u8> = (0..n).map(|i| (i % 200) as u8 + 1).collect();
        for axis in 0..dims.len() {
            for &group in groups {
                let mut scale_dims = dims.clone();
                scale_dims[axis] = dims[axis].div_ceil(group);
                let ns: usize = scale_dims.iter().product();
                // Scale k is k + 1 as a u16: a value names its own index.
                let s: Vec<u8> = (1..=ns as u16).flat_map(u16::to_le_bytes).collect();
                let scale_shape = [ns as u64];
                let specs = [
                    TensorSpec::new(DType::U8, &shape, &data).quantized(scales(axis, group as u32)),
                    TensorSpec::new(DType::U16, &scale_shape, &s),
                ];
                let buf = write(&specs);
                let dir = Directory::parse(&buf).unwrap();
                let d = Dequantizer::new(&dir.get(0).unwrap()).unwrap();
                for (i, &byte) in data.iter().enumerate() {
                    let want = rule_scale_index(dims, axis, group, i);
                    assert_eq!(d.scale_index(i), Some(want), "{dims:?} axis {axis} group {group} element {i}");
                    let x = f32::from(byte);
                    assert_eq!(d.get(i), Some(x * (want + 1) as f32), "{dims:?} axis {axis} group {group} element {i}");
                }
                assert_eq!(d.scale_index(n), None);
                checked += 1;
            }
        }
    }
    assert!(checked > if cfg!(miri) { 30 } else { 100 });
}

#[test]
fn the_scale_tensors_own_shape_is_not_read() {
    let data = [1u8, 2, 3, 4, 5, 6];
    let s = f32s(&[10.0, 100.0, 1000.0, 10000.0]);
    let q = TensorSpec::new(DType::U8, &[2, 3], &data).quantized(scales(1, 2));
    let as_matrix = write(&[q, TensorSpec::new(DType::F32, &[2, 2], &s)]);
    let as_vector = write(&[q, TensorSpec::new(DType::F32, &[4], &s)]);
    let as_other = write(&[q, TensorSpec::new(DType::F32, &[4, 1], &s)]);
    let want = vec![10.0, 20.0, 300.0, 4000.0, 5000.0, 60000.0];
    assert_eq!(values(&as_matrix), want);
    assert_eq!(values(&as_vector), want);
    assert_eq!(values(&as_other), want);
}

// ---------------------------------------------------------------- scale value

#[test]
fn scales_convert_by_the_element_table() {
    let data = [2u8, 3];
    let cases: [(DType, Vec<u8>, [f32; 2]); 5] = [
        (DType::E8M0, vec![125], [0.5, 0.75]),
        (DType::I8, vec![0xFD], [-6.0, -9.0]),
        (DType::F16, vec![0x00, 0x3E], [3.0, 4.5]),
        (DType::BF16, vec![0x20, 0xC0], [-5.0, -7.5]),
        (DType::U4, vec![0x07], [14.0, 21.0]),
    ];
    for (dtype, s, want) in cases {
        let buf =
            write(&[TensorSpec::new(DType::U8, &[2], &data).quantized(scales(0, 2)), TensorSpec::new(dtype, &[1], &s)]);
        assert_eq!(values(&buf), want, "{} scale", dtype.name());
    }
    // An e8m0 scale of 0xFF is NaN, so is every product with it.
    let buf = write(&[
        TensorSpec::new(DType::U8, &[4], &[0, 1, 2, 3]).quantized(scales(0, 2)),
        TensorSpec::new(DType::E8M0, &[2], &[0xFF, 127]),
    ]);
    let v = values(&buf);
    assert!(v[0].is_nan() && v[1].is_nan());
    assert_eq!(&v[2..], &[2.0, 3.0]);
}

#[test]
fn opaque_data_or_scales_are_refused() {
    let buf = write(&[TensorSpec::opaque(4096, "Q8", 2, &[2], &[1, 2])]);
    let dir = Directory::parse(&buf).unwrap();
    let t = dir.get(0).unwrap();
    let mut out = [7.0f32; 2];
    assert_eq!(dequantize_into(&t, &mut out), Err(DequantError::OpaqueData { dtype: 4096 }));
    assert_eq!(Dequantizer::new(&t).unwrap_err(), DequantError::OpaqueData { dtype: 4096 });
    assert_eq!(out, [7.0; 2], "nothing written");

    let buf = write(&[
        TensorSpec::new(DType::U8, &[4], &[1, 2, 3, 4]).quantized(scales(0, 2)),
        TensorSpec::opaque(4100, "Q8", 1, &[2], &[1, 2]),
    ]);
    let dir = Directory::parse(&buf).unwrap();
    let t = dir.get(0).unwrap();
    let mut out = [7.0f32; 4];
    assert_eq!(dequantize_into(&t, &mut out), Err(DequantError::OpaqueScale { dtype: 4100 }));
    assert_eq!(Dequantizer::new(&t).unwrap_err(), DequantError::OpaqueScale { dtype: 4100 });
    assert_eq!(out, [7.0; 4], "nothing written");
    // The refusal names what failed.
    assert!(DequantError::OpaqueScale { dtype: 4100 }.to_string().contains("scale"));
}

// ---------------------------------------------------------------- outer scale and result

/// f32 bits from a hex literal.
fn f(bits: u32) -> f32 {
    f32::from_bits(bits)
}

#[test]
fn scheme_1_is_one_f32_product() {
    // x * s rounded once: 1.1343642 * 1.8474337 in f32.
    let (x, s) = (f(0x3F91_32D9), f(0x3FEC_78B5));
    let buf = write(&[
        TensorSpec::new(DType::F32, &[1], &f32s(&[x])).quantized(scales(0, 1)),
        TensorSpec::new(DType::F32, &[1], &f32s(&[s])),
    ]);
    let want = (f64::from(x) * f64::from(s)) as f32; // exact in f64, then one rounding
    assert_eq!(values(&buf)[0].to_bits(), want.to_bits());
}

#[test]
fn scheme_2_rounds_x_times_s_then_times_the_outer_scale() {
    let (x, s, o) = (f(0x3F91_32D9), f(0x3FEC_78B5), f(0x3FE1_C35E));
    let buf = write(&[
        TensorSpec::new(DType::F32, &[1], &f32s(&[x])).quantized(outer(0, 1)),
        TensorSpec::new(DType::F32, &[1], &f32s(&[s])),
        TensorSpec::new(DType::F32, &[1], &f32s(&[o])),
    ]);
    let got = values(&buf)[0];
    let xs = (f64::from(x) * f64::from(s)) as f32;
    let want = (f64::from(xs) * f64::from(o)) as f32;
    assert_eq!(got.to_bits(), want.to_bits());
    // One rounding of the exact product gives other bits for this triple, so
    // the two roundings are pinned.
    let once = (f64::from(x) * f64::from(s) * f64::from(o)) as f32;
    assert_ne!(got.to_bits(), once.to_bits());
}

#[test]
fn the_outer_scale_is_its_f32_value() {
    let buf = write(&[
        TensorSpec::new(DType::I8, &[2, 2], &[1, 2, 3, 0xFC]).quantized(outer(0, 2)),
        TensorSpec::new(DType::E8M0, &[1, 2], &[128, 126]),
        TensorSpec::new(DType::F32, &[1], &f32s(&[-0.25])),
    ]);
    assert_eq!(values(&buf), [-0.5, -0.25, -1.5, 0.5]);
    // A zero product keeps its sign.
    let buf = write(&[
        TensorSpec::new(DType::F32, &[1], &f32s(&[0.0])).quantized(outer(0, 1)),
        TensorSpec::new(DType::F32, &[1], &f32s(&[2.0])),
        TensorSpec::new(DType::F32, &[1], &f32s(&[-1.0])),
    ]);
    assert_eq!(values(&buf)[0].to_bits(), 0x8000_0000);
}

#[test]
fn products_past_f32_range_are_infinite_and_small_ones_exact() {
    let buf = write(&[
        TensorSpec::new(DType::E2M1, &[4], &[0x77, 0x27]).quantized(scales(0, 2)),
        TensorSpec::new(DType::E8M0, &[2], &[254, 0]),
    ]);
    let v = values(&buf);
    assert_eq!(v[0], f32::INFINITY, "6 * 2^127");
    assert_eq!(v[2].to_bits(), 0x0140_0000, "6 * 2^-127 = 1.5 * 2^-125, exact");
    assert_eq!(v[3].to_bits(), 0x0040_0000, "1 * 2^-127, a subnormal");
}

// ---------------------------------------------------------------- by parts, in windows

/// `Dequantizer::from_parts` over pieces of the payload (what kiln-wasm does with its window)
/// gives every element `Dequantizer::new` gives over the whole, for each dtype width, scheme 2
/// with scales along an inner axis, and window lengths that split elements' groups.
#[test]
fn from_parts_in_windows_equals_the_whole_tensor() {
    use kiln_nostd::dequant::QuantParts;
    let data: Vec<u8> = (0u8..=255).cycle().take(4 * 6 * 8).collect();
    for dtype in [DType::E2M1, DType::I8, DType::F16, DType::F32, DType::F64] {
        let per = usize::try_from(dtype.byte_length(2).unwrap()).unwrap(); // bytes of two elements
        let dims = [4u64, 6];
        let bytes = &data[..usize::try_from(dtype.byte_length(24).unwrap()).unwrap()];
        let outer_scale = f32s(&[-0.75]);
        let specs = [
            TensorSpec::new(dtype, &dims, bytes).quantized(outer(1, 4)),
            TensorSpec::new(DType::E8M0, &[4, 2], &[120, 121, 122, 123, 124, 125, 126, 127]),
            TensorSpec::new(DType::F32, &[1], &outer_scale),
        ];
        let buf = write(&specs);
        let dir = Directory::parse(&buf).unwrap();
        let whole = Dequantizer::new(&dir.get(0).unwrap()).unwrap();
        let scales = [120u8, 121, 122, 123, 124, 125, 126, 127];
        let quant =
            QuantParts { scale_dtype: DType::E8M0, scales: &scales, axis: 1, group_size: 4, outer: Some(-0.75) };
        for window in [per, 2 * per, 3 * per, 5 * per, bytes.len()] {
            let mut got = Vec::new();
            for (k, piece) in bytes.chunks(window).enumerate() {
                let first = k * window * 2 / per;
                let d = Dequantizer::from_parts(dtype, &dims, first, piece, Some(quant)).unwrap();
                let mut out = vec![0f32; 2 * window];
                let n = d.fill(first, &mut out);
                got.extend_from_slice(&out[..n]);
            }
            let want: Vec<u32> = (0..24).map(|i| whole.get(i).unwrap().to_bits()).collect();
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                want,
                "{dtype:?}, windows of {window} bytes"
            );
        }
    }
    assert_eq!(
        Dequantizer::from_parts(DType::Opaque(4096), &[1], 0, &[0], None).unwrap_err(),
        DequantError::OpaqueData { dtype: 4096 }
    );
    let opaque_scales =
        QuantParts { scale_dtype: DType::Opaque(4100), scales: &[0], axis: 0, group_size: 1, outer: None };
    assert_eq!(
        Dequantizer::from_parts(DType::F32, &[1], 0, &[0; 4], Some(opaque_scales)).unwrap_err(),
        DequantError::OpaqueScale { dtype: 4100 }
    );
    assert_eq!(
        Dequantizer::from_parts(DType::U8, &[u64::MAX, 2], 0, &[], None).unwrap_err(),
        DequantError::TooLarge { count: u64::MAX }
    );
}

// ---------------------------------------------------------------- the caller's buffer

#[test]
fn a_short_buffer_is_refused_and_nothing_written() {
    let buf = write(&[
        TensorSpec::new(DType::U8, &[5], &[1, 2, 3, 4, 5]).quantized(scales(0, 2)),
        TensorSpec::new(DType::E8M0, &[3], &[127, 128, 129]),
    ]);
    let dir = Directory::parse(&buf).unwrap();
    let t = dir.get(0).unwrap();
    let mut out = [9.0f32; 4];
    assert_eq!(dequantize_into(&t, &mut out), Err(DequantError::OutputTooSmall { needed: 5 }));
    assert_eq!(out, [9.0; 4]);
    let mut big = [9.0f32; 7];
    assert_eq!(dequantize_into(&t, &mut big), Ok(5));
    assert_eq!(big, [1.0, 2.0, 6.0, 8.0, 20.0, 9.0, 9.0], "only the count is written");
    assert!(DequantError::OutputTooSmall { needed: 5 }.to_string().contains('5'));
}

#[test]
fn the_accessor_reads_in_place_by_flat_index_or_row_and_column() {
    let data = [0x21u8, 0x43, 0x65];
    let buf = write(&[
        TensorSpec::new(DType::U4, &[2, 3], &data).quantized(scales(1, 2)),
        TensorSpec::new(DType::U8, &[4], &[1, 10, 100, 200]),
    ]);
    let dir = Directory::parse(&buf).unwrap();
    let d = Dequantizer::new(&dir.get(0).unwrap()).unwrap();
    assert_eq!((d.len(), d.is_empty()), (6, false));
    assert_eq!(d.get_2d(0, 2), Some(30.0));
    assert_eq!(d.get_2d(1, 0), Some(400.0));
    assert_eq!(d.get_2d(1, 2), d.get(5));
    assert_eq!(d.get_2d(0, 3), None, "past the row");
    assert_eq!(d.get_2d(2, 0), None, "past the end");
    let empty = write(&[
        TensorSpec::new(DType::E2M1, &[0, 4], &[]).quantized(scales(1, 2)),
        TensorSpec::new(DType::E8M0, &[0], &[]),
    ]);
    let dir = Directory::parse(&empty).unwrap();
    let d = Dequantizer::new(&dir.get(0).unwrap()).unwrap();
    assert!(d.is_empty() && d.get(0).is_none());
    assert_eq!(dequantize_into(&dir.get(0).unwrap(), &mut []), Ok(0));
}

#[test]
fn a_directory_without_its_payload_is_refused() {
    let buf = write(&[TensorSpec::new(DType::F32, &[2], &f32s(&[1.0, 2.0]))]);
    let need = Incremental::prefix_len(&buf[..64], &Limits::DEFAULT).unwrap().unwrap();
    let mut prefix = vec![0u8; need];
    let mut v = Incremental::new(&mut prefix);
    let _ = v.feed(&buf[..need]).unwrap();
    let dir = v.directory().expect("the table is in");
    let t = dir.get(0).unwrap();
    assert_eq!(Dequantizer::new(&t).unwrap_err(), DequantError::NoPayload);
    assert_eq!(dequantize_into(&t, &mut [0.0; 2]), Err(DequantError::NoPayload));
}
