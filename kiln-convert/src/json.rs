//! JSON text for metadata values (typed sources: GGUF, HK).

/// A JSON string literal.
pub fn string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// An f32 as the shortest decimal that reads back to the same f32;
/// non-finite values as the strings "NaN", "inf", "-inf".
pub fn f32(x: f32) -> String {
    if x.is_finite() {
        decimal(format!("{x}"), format!("{x:e}"), f64::from(x).abs())
    } else {
        non_finite(f64::from(x))
    }
}

/// An f64, likewise.
pub fn f64(x: f64) -> String {
    if x.is_finite() {
        decimal(format!("{x}"), format!("{x:e}"), x.abs())
    } else {
        non_finite(x)
    }
}

/// A float as a JSON number with the shortest round-tripping digits, in
/// JavaScript's choice of form: plain decimals for 1e-7 <= |x| < 1e21 (and
/// 0), exponent form outside (`5e-324`, `1e300`), so no value prints more
/// than about 25 characters (`Display` alone prints 5e-324 with 327 digits).
/// A whole number gets ".0" so it reads back as a float.
fn decimal(plain: String, exp: String, abs: f64) -> String {
    if abs != 0.0 && !(1e-7..1e21).contains(&abs) {
        return exp;
    }
    if plain.contains(['.', 'e', 'E']) {
        plain
    } else {
        plain + ".0"
    }
}

fn non_finite(x: f64) -> String {
    string(if x.is_nan() {
        "NaN"
    } else if x > 0.0 {
        "inf"
    } else {
        "-inf"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_json() {
        assert_eq!(f32(1e-5), "0.00001");
        assert_eq!(f32(2.0), "2.0");
        assert_eq!(f64(0.1), "0.1");
        assert_eq!(f32(f32::NAN), "\"NaN\"");
        assert_eq!(f64(f64::NEG_INFINITY), "\"-inf\"");
        assert_eq!(string("a\"b"), r#""a\"b""#);
        for s in [f32(3.25e30), f32(-1.5e-30), f64(1e300)] {
            assert!(serde_json::from_str::<f64>(&s).is_ok(), "{s}");
        }
        // The shortest form, never hundreds of digits.
        assert_eq!(f64(5e-324), "5e-324");
        assert_eq!(f64(-1e300), "-1e300");
        assert_eq!(f64(1.5e21), "1.5e21");
        assert_eq!(f64(1e20), "100000000000000000000.0");
        assert_eq!(f32(f32::MIN_POSITIVE), "1.1754944e-38");
        assert_eq!(f64(0.0), "0.0");
        for x in [5e-324, f64::MAX, -f64::MIN_POSITIVE, 1e-7, 9.999e-8, 123.456, 1e21] {
            let s = f64(x);
            assert!(s.len() <= 25, "{s}");
            assert_eq!(serde_json::from_str::<f64>(&s).unwrap(), x, "{s}");
        }
    }
}
