//! JSON text for metadata values (typed sources: GGUF, HK).

/// A JSON string literal.
pub fn string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// An f32 as the shortest decimal that reads back to the same f32;
/// non-finite values as the strings "NaN", "inf", "-inf".
pub fn f32(x: f32) -> String {
    if x.is_finite() {
        decimal(format!("{x}"))
    } else {
        non_finite(f64::from(x))
    }
}

/// An f64, likewise.
pub fn f64(x: f64) -> String {
    if x.is_finite() {
        decimal(format!("{x}"))
    } else {
        non_finite(x)
    }
}

/// A float's Display text as a JSON number. Display prints the shortest
/// round-tripping digits, and never an exponent form JSON rejects; a whole
/// number gets ".0" so it reads back as a float.
fn decimal(s: String) -> String {
    if s.contains(['.', 'e', 'E']) {
        s
    } else {
        s + ".0"
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

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
    }
}
