//! The narrow-float and nibble conversions of `kiln_nostd::dequant::mx`
//! (spec section 11.1): every code of the 4- and 8-bit formats, and known
//! values and edge cases of f16 and bf16.

use kiln_nostd::dequant::mx::*;

fn bits(x: f32) -> u32 {
    x.to_bits()
}

#[test]
fn e2m1_all_codes() {
    let want = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0];
    for (code, w) in want.iter().enumerate() {
        let code = u8::try_from(code).unwrap();
        assert_eq!(bits(e2m1_to_f32(code)), bits(*w), "code {code:#x}");
        assert_eq!(bits(e2m1_to_f32(code | 0xF0)), bits(*w), "high bits ignored");
    }
}

#[test]
fn e8m0_all_bytes() {
    for b in 0u8..=254 {
        let want = 2f64.powi(i32::from(b) - 127);
        assert_eq!(f64::from(e8m0_to_f32(b)), want, "byte {b}");
    }
    assert_eq!(bits(e8m0_to_f32(0)), 0x0040_0000);
    assert_eq!(e8m0_to_f32(127), 1.0);
    assert_eq!(e8m0_to_f32(254), 2f32.powi(127));
    assert!(e8m0_to_f32(255).is_nan());
}

#[test]
fn f16_known_values() {
    let cases: [(u16, u32); 14] = [
        (0x3C00, bits(1.0)),
        (0xC000, bits(-2.0)),
        (0x7BFF, bits(65504.0)),
        (0x0001, bits(5.960_464_5e-8)), // 2^-24, smallest subnormal
        (0x03FF, bits(6.097_555e-5)),   // largest subnormal
        (0x0400, bits(6.103_515_6e-5)), // 2^-14, smallest normal
        (0x3555, bits(0.333_251_95)),
        (0x0000, 0x0000_0000),
        (0x8000, 0x8000_0000),
        (0x7C00, 0x7F80_0000),
        (0xFC00, 0xFF80_0000),
        (0x7E00, 0x7FC0_0000),
        (0x7C01, 0x7F80_2000), // signalling NaN payload kept
        (0xFE01, 0xFFC0_2000),
    ];
    for (h, want) in cases {
        assert_eq!(bits(f16_to_f32(h)), want, "f16 {h:#06x}");
    }
}

#[test]
fn f16_every_finite_value_matches_the_formula() {
    for h in 0u16..=0xFFFF {
        let exp = i32::from((h >> 10) & 0x1F);
        let man = f64::from(h & 0x3FF);
        let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
        let got = f64::from(f16_to_f32(h));
        match exp {
            0x1F => assert!(if man == 0.0 { got.is_infinite() } else { got.is_nan() }),
            0 => assert_eq!(got, sign * man * 2f64.powi(-24), "{h:#06x}"),
            e => assert_eq!(got, sign * (1.0 + man / 1024.0) * 2f64.powi(e - 15), "{h:#06x}"),
        }
    }
}

#[test]
fn bf16_known_values() {
    assert_eq!(bf16_to_f32(0x3F80), 1.0);
    assert_eq!(bf16_to_f32(0x4049), 3.140_625);
    assert_eq!(bits(bf16_to_f32(0x8000)), 0x8000_0000);
    assert_eq!(bits(bf16_to_f32(0x7F80)), 0x7F80_0000);
    assert_eq!(bits(bf16_to_f32(0x0001)), 0x0001_0000);
}

#[test]
fn f8e4m3_known_values() {
    assert_eq!(f8e4m3_to_f32(0x38), 1.0);
    assert_eq!(f8e4m3_to_f32(0x3C), 1.5);
    assert_eq!(f8e4m3_to_f32(0x7E), 448.0);
    assert_eq!(f8e4m3_to_f32(0xFE), -448.0);
    assert_eq!(f8e4m3_to_f32(0x78), 256.0); // exponent 15 is finite in E4M3
    assert_eq!(f8e4m3_to_f32(0x01), 0.001_953_125); // 2^-9
    assert_eq!(f8e4m3_to_f32(0x07), 0.013_671_875); // 7 * 2^-9
    assert_eq!(f8e4m3_to_f32(0x08), 0.015_625); // 2^-6
    assert_eq!(bits(f8e4m3_to_f32(0x80)), 0x8000_0000);
    assert!(f8e4m3_to_f32(0x7F).is_nan());
    assert!(f8e4m3_to_f32(0xFF).is_nan() && f8e4m3_to_f32(0xFF).is_sign_negative());
    for b in 0u8..=255 {
        let exp = i32::from((b >> 3) & 0xF);
        let man = f64::from(b & 7);
        let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
        let got = f64::from(f8e4m3_to_f32(b));
        if b & 0x7F == 0x7F {
            assert!(got.is_nan());
        } else if exp == 0 {
            assert_eq!(got, sign * man / 8.0 * 2f64.powi(-6), "{b:#04x}");
        } else {
            assert_eq!(got, sign * (1.0 + man / 8.0) * 2f64.powi(exp - 7), "{b:#04x}");
        }
    }
}

#[test]
fn f8e5m2_known_values() {
    assert_eq!(f8e5m2_to_f32(0x3C), 1.0);
    assert_eq!(f8e5m2_to_f32(0x7B), 57344.0);
    assert_eq!(f8e5m2_to_f32(0x01), 1.525_878_9e-5); // 2^-16
    assert_eq!(f8e5m2_to_f32(0x04), 6.103_515_6e-5); // 2^-14
    assert_eq!(f8e5m2_to_f32(0x7C), f32::INFINITY);
    assert_eq!(f8e5m2_to_f32(0xFC), f32::NEG_INFINITY);
    assert!(f8e5m2_to_f32(0x7D).is_nan());
    assert_eq!(bits(f8e5m2_to_f32(0x80)), 0x8000_0000);
}

#[test]
fn nibbles_low_first() {
    // The spec's example: values 1, 2, 3 are the bytes 21 03.
    let b = [0x21, 0x03];
    assert_eq!([nibble(&b, 0), nibble(&b, 1), nibble(&b, 2), nibble(&b, 3)], [Some(1), Some(2), Some(3), Some(0)]);
    assert_eq!(nibble(&b, 4), None);
    assert_eq!(nibble(&b, usize::MAX), None);
}
