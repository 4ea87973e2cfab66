//! The core's dequantization (`kiln_nostd::dequant`, spec/kiln-v2.md §11.1)
//! against `spec/dequant-cases.json`, whose f32 bits the Python reference
//! (spec/reference/dequant_ref.py: exact arithmetic, written from the spec)
//! computed. kiln-wasm/test/dequant.test.mjs holds the JS copy to the same
//! file, so the two implementations cannot drift apart.

use std::collections::BTreeSet;

use kiln_conformance::repo_root;
use kiln_nostd::dequant::{dequantize_into, DequantError, Dequantizer};
use kiln_nostd::{DType, Directory};
use serde::Deserialize;

#[derive(Deserialize)]
struct File {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    note: String,
    hex: String,
    tensor: usize,
    expect: Option<Vec<String>>,
    refused: Option<String>,
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(repo_root().join("spec/dequant-cases.json")).expect("read");
    serde_json::from_str::<File>(&text).expect("parse").cases
}

fn same(got: f32, want: u32) -> bool {
    if f32::from_bits(want).is_nan() {
        got.is_nan()
    } else {
        got.to_bits() == want
    }
}

#[test]
fn every_case_gives_the_reference_bits_or_is_refused() {
    let cases = cases();
    assert!(cases.len() >= 50, "{} cases", cases.len());
    for c in &cases {
        let buf = hex::decode(&c.hex).expect("hex");
        let dir = Directory::parse(&buf).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let t = dir.get(c.tensor).expect("tensor");
        let mut out = vec![f32::from_bits(0x7F80_0001); usize::try_from(t.element_count()).unwrap()];
        match (&c.expect, c.refused.as_deref()) {
            (Some(want), None) => {
                assert_eq!(dequantize_into(&t, &mut out), Ok(want.len()), "{}", c.name);
                let one = Dequantizer::new(&t).unwrap();
                assert_eq!(one.len(), want.len());
                for (i, w) in want.iter().enumerate() {
                    let w = u32::from_str_radix(w, 16).unwrap();
                    assert!(same(out[i], w), "{}[{i}]: {:08x}, want {w:08x} ({})", c.name, out[i].to_bits(), c.note);
                    let g = one.get(i).unwrap();
                    assert!(same(g, w), "{}[{i}] by get: {:08x}, want {w:08x}", c.name, g.to_bits());
                }
                assert_eq!(one.get(want.len()), None);
            }
            (None, Some(why)) => {
                let want = match why {
                    "opaque data" => DequantError::OpaqueData { dtype: t.dtype().code() },
                    "opaque scale" => DequantError::OpaqueScale { dtype: t.quant().unwrap().scale.dtype().code() },
                    other => panic!("{}: unknown refusal {other}", c.name),
                };
                assert_eq!(dequantize_into(&t, &mut out).unwrap_err(), want, "{}", c.name);
                assert_eq!(Dequantizer::new(&t).unwrap_err(), want, "{}", c.name);
            }
            _ => panic!("{}: a case has expect or refused", c.name),
        }
    }
}

/// The file covers what the section's rules speak of: every element dtype
/// unquantized and quantized, e8m0 and other scale dtypes, axis 0, a middle
/// axis and the last of ranks 1 to 3, groups that do not divide their
/// dimension, scheme 2 and both refusals.
#[test]
fn the_cases_cover_the_rules_of_the_section() {
    let (mut plain, mut quantized, mut scale_dtypes) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let (mut axes, mut short_group, mut scheme2, mut refusals) = (BTreeSet::new(), false, false, BTreeSet::new());
    for c in cases() {
        let buf = hex::decode(&c.hex).expect("hex");
        let dir = Directory::parse(&buf).unwrap();
        let t = dir.get(c.tensor).unwrap();
        if let Some(r) = &c.refused {
            refusals.insert(r.clone());
            continue;
        }
        match t.quant() {
            None => {
                plain.insert(t.dtype().name());
            }
            Some(q) => {
                quantized.insert(t.dtype().name());
                scale_dtypes.insert(q.scale.dtype().name());
                let rank = t.rank();
                axes.insert((rank, if q.axis + 1 == rank { "last".to_owned() } else { q.axis.to_string() }));
                short_group |= !t.shape()[q.axis].is_multiple_of(u64::from(q.group_size));
                scheme2 |= q.outer.is_some();
            }
        }
    }
    let all: BTreeSet<_> = DType::closed_set().iter().map(|d| d.name()).collect();
    assert_eq!(plain, all, "every dtype unquantized");
    assert_eq!(quantized, all, "every dtype quantized");
    assert!(scale_dtypes.contains("e8m0") && scale_dtypes.len() >= 6, "{scale_dtypes:?}");
    for want in [(1, "last"), (2, "0"), (2, "last"), (3, "0"), (3, "1"), (3, "last")] {
        assert!(axes.contains(&(want.0, want.1.to_owned())), "rank {} axis {}: {axes:?}", want.0, want.1);
    }
    assert!(short_group && scheme2);
    assert_eq!(refusals, BTreeSet::from(["opaque data".to_owned(), "opaque scale".to_owned()]));
}
