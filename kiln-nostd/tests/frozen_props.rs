//! Property tests over random Frozen types and values: canonical round trips
//! through the schema validator and the lazy `Value` API, prefixes that are
//! always EOF, and mutations that never panic and, when accepted, decode to
//! a value whose canonical encoding is exactly the mutated bytes.

mod frozen_types;

use frozen_types::{f32_block, types, T};
use kiln_derive::Kiln;
use kiln_nostd::frozen::{self, decode, encode, encoded_len, hash_text, Encoder, Kind, Reader, Schema, Value};
use kiln_nostd::{wire::EMPTY_BLOCK, ErrorCode, Limits};
use proptest::prelude::*;

#[derive(Clone, Debug, PartialEq)]
enum V {
    Bool(bool),
    I(i64),
    U(u64),
    F32(u32),
    F64(u64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<V>),
    Opt(Option<Box<V>>),
    Dict(Vec<(String, V)>),
    Struct(Vec<V>),
    Tensors(Vec<u8>),
}

fn values(t: &T) -> BoxedStrategy<V> {
    match t {
        T::Scalar(k) => match k {
            Kind::Bool => any::<bool>().prop_map(V::Bool).boxed(),
            Kind::I8 => any::<i8>().prop_map(|x| V::I(x.into())).boxed(),
            Kind::I16 => any::<i16>().prop_map(|x| V::I(x.into())).boxed(),
            Kind::I32 => any::<i32>().prop_map(|x| V::I(x.into())).boxed(),
            Kind::I64 | Kind::Int => any::<i64>().prop_map(V::I).boxed(),
            Kind::U8 => any::<u8>().prop_map(|x| V::U(x.into())).boxed(),
            Kind::U16 => any::<u16>().prop_map(|x| V::U(x.into())).boxed(),
            Kind::U32 => any::<u32>().prop_map(|x| V::U(x.into())).boxed(),
            Kind::U64 | Kind::Uint => any::<u64>().prop_map(V::U).boxed(),
            Kind::F32 => any::<u32>().prop_map(V::F32).boxed(),
            Kind::F64 => any::<u64>().prop_map(V::F64).boxed(),
            Kind::Str => ".{0,6}".prop_map(V::Str).boxed(),
            _ => prop_oneof![Just(EMPTY_BLOCK.to_vec()), Just(f32_block())].prop_map(V::Tensors).boxed(),
        },
        T::List(e) if matches!(**e, T::Scalar(Kind::U8)) => {
            prop::collection::vec(any::<u8>(), 0..6).prop_map(V::Bytes).boxed()
        }
        T::List(e) => prop::collection::vec(values(e), 0..4).prop_map(V::List).boxed(),
        T::Opt(e) => prop::option::of(values(e)).prop_map(|o| V::Opt(o.map(Box::new))).boxed(),
        T::Dict(e) => prop::collection::btree_map(".{0,3}", values(e), 0..4)
            .prop_map(|m| V::Dict(m.into_iter().collect()))
            .boxed(),
        T::Struct(fields) => fields.iter().map(values).collect::<Vec<_>>().prop_map(V::Struct).boxed(),
    }
}

fn typed_values() -> impl Strategy<Value = (T, V)> {
    types().prop_flat_map(|t| {
        let v = values(&t);
        (Just(t), v)
    })
}

/// Encodes `v` as `t` with the library's encoder pieces.
fn enc(t: &T, v: &V, e: &mut Encoder<'_>) -> kiln_nostd::error::Result<()> {
    match (t, v) {
        (T::Scalar(Kind::Bool), V::Bool(b)) => e.put_u8((*b).into()),
        (T::Scalar(k), V::I(x)) => e.put(&x.to_le_bytes()[..k.width().unwrap() as usize]),
        (T::Scalar(k), V::U(x)) => e.put(&x.to_le_bytes()[..k.width().unwrap() as usize]),
        (_, V::F32(bits)) => e.put(&bits.to_le_bytes()),
        (_, V::F64(bits)) => e.put(&bits.to_le_bytes()),
        (_, V::Str(s)) => e.put_str(s),
        (_, V::Bytes(b)) => e.put_bytes(b),
        (_, V::Tensors(b)) => e.put(b),
        (T::List(et), V::List(items)) => {
            e.put_count(items.len())?;
            items.iter().try_for_each(|x| enc(et, x, e))
        }
        (T::Opt(_), V::Opt(None)) => e.put_u8(0),
        (T::Opt(et), V::Opt(Some(x))) => {
            e.put_u8(1)?;
            enc(et, x, e)
        }
        (T::Dict(vt), V::Dict(entries)) => {
            e.put_count(entries.len())?;
            entries.iter().try_for_each(|(k, x)| {
                e.put_str(k)?;
                enc(vt, x, e)
            })
        }
        (T::Struct(fts), V::Struct(xs)) => fts.iter().zip(xs).try_for_each(|(ft, x)| enc(ft, x, e)),
        other => panic!("value does not match type: {other:?}"),
    }
}

fn encode_dyn(t: &T, v: &V) -> Vec<u8> {
    let mut out = vec![0u8; 1 << 16];
    let mut e = Encoder::new(&mut out);
    enc(t, v, &mut e).unwrap();
    let n = e.position();
    out.truncate(n);
    out
}

/// Reads a validated value back into the model, through the public API.
fn read(v: Value<'_, '_>) -> V {
    match v.kind() {
        Kind::Bool => V::Bool(v.as_bool().unwrap()),
        Kind::I8 | Kind::I16 | Kind::I32 | Kind::I64 | Kind::Int => V::I(v.as_i64().unwrap()),
        Kind::U8 | Kind::U16 | Kind::U32 | Kind::U64 | Kind::Uint => V::U(v.as_u64().unwrap()),
        Kind::F32 => V::F32(v.as_f32().unwrap().to_bits()),
        Kind::F64 => V::F64(v.as_f64().unwrap().to_bits()),
        Kind::Str => V::Str(v.as_str().unwrap().to_owned()),
        Kind::Tensors => {
            let d = v.as_tensors().unwrap();
            assert_eq!(d.start(), v.offset());
            V::Tensors(d.block().to_vec())
        }
        Kind::List => match v.as_bytes() {
            Some(b) => V::Bytes(b.to_vec()),
            None => {
                let list = v.as_list().unwrap();
                let items: Vec<V> = list.iter().map(read).collect();
                assert_eq!(items.len(), list.len());
                if let Some(last) = list.len().checked_sub(1) {
                    assert_eq!(read(list.get(last).unwrap()), *items.last().unwrap());
                }
                V::List(items)
            }
        },
        Kind::Opt => V::Opt(v.as_opt().unwrap().map(|x| Box::new(read(x)))),
        Kind::Dict => {
            let d = v.as_dict().unwrap();
            let entries: Vec<(String, V)> = d.iter().map(|(k, x)| (k.to_owned(), read(x))).collect();
            let mut scratch = vec![0usize; d.len()];
            let index = d.index(&mut scratch).unwrap();
            for (k, x) in &entries {
                assert_eq!(read(d.get(k).unwrap()), *x);
                assert_eq!(read(index.get(k).unwrap()), *x);
            }
            V::Dict(entries)
        }
        Kind::Struct => {
            let s = v.as_struct().unwrap();
            let fields: Vec<V> = s.fields().map(|(_, x)| read(x)).collect();
            for (i, f) in fields.iter().enumerate() {
                assert_eq!(read(s.field(&format!("f{i}")).unwrap()), *f);
            }
            V::Struct(fields)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 16 } else { 400 }, ..ProptestConfig::default() })]

    #[test]
    fn canonical_round_trip((t, v) in typed_values()) {
        let text = t.to_string();
        let schema: Schema<'_, 512> = Schema::parse(&text).unwrap();
        prop_assert_eq!(schema.to_string(), text.clone());
        prop_assert_eq!(schema.hash(), hash_text(&text));
        let bytes = encode_dyn(&t, &v);
        prop_assert!(schema.min_size() <= bytes.len() as u64);
        let value = Reader::new().read(&bytes, &schema).unwrap();
        prop_assert_eq!(read(value), v);
        prop_assert_eq!(value.raw(), &bytes[..]);
        prop_assert_eq!(value.end(), bytes.len());
        // Framed, the same value follows the frame.
        let mut framed = frozen::frame_bytes(schema.hash()).to_vec();
        framed.extend_from_slice(&bytes);
        prop_assert!(frozen::validate(&framed, &schema, &Limits::DEFAULT, true).is_ok());
        // Trusted reads accept what full reads accept.
        prop_assert!(Reader::new().trusted(true).read(&bytes, &schema).is_ok());
    }

    #[test]
    fn every_strict_prefix_is_eof((t, v) in typed_values()) {
        let text = t.to_string();
        let schema: Schema<'_, 512> = Schema::parse(&text).unwrap();
        let bytes = encode_dyn(&t, &v);
        for cut in 0..bytes.len() {
            let e = frozen::validate(&bytes[..cut], &schema, &Limits::DEFAULT, false).unwrap_err();
            prop_assert_eq!(e.code(), ErrorCode::Eof, "cut {} of {}: {}", cut, bytes.len(), e);
            prop_assert!(e.offset() <= cut);
        }
    }

    #[test]
    fn mutations_never_panic_and_accepted_bytes_are_canonical(
        (t, v) in typed_values(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let text = t.to_string();
        let schema: Schema<'_, 512> = Schema::parse(&text).unwrap();
        let mut bytes = encode_dyn(&t, &v);
        if bytes.is_empty() {
            return Ok(());
        }
        let i = at.index(bytes.len());
        bytes[i] = byte;
        match Reader::new().read(&bytes, &schema) {
            Ok(value) => {
                let back = read(value);
                prop_assert_eq!(encode_dyn(&t, &back), bytes);
            }
            Err(e) => prop_assert!(e.offset() <= bytes.len()),
        }
    }
}

// ---------------------------------------------------------------- typed

#[derive(Kiln, Debug, Clone, PartialEq)]
struct Inner<'a> {
    flag: bool,
    label: Option<&'a str>,
}

#[derive(Kiln, Debug)]
struct Outer<'a> {
    id: i64,
    small: u8,
    ratio: f64,
    name: &'a str,
    blob: &'a [u8],
    inner: Inner<'a>,
    maybe: Option<Option<u16>>,
    items: frozen::Seq<'a, Inner<'a>>,
}

proptest! {
    #[test]
    fn derived_structs_round_trip(
        id in any::<i64>(), small in any::<u8>(), ratio in any::<u64>(),
        name in ".{0,8}", blob in prop::collection::vec(any::<u8>(), 0..8),
        flag in any::<bool>(), label in prop::option::of(".{0,4}"),
        maybe in prop::option::of(prop::option::of(any::<u16>())),
        n in 0usize..4,
    ) {
        let inner = Inner { flag, label: label.as_deref() };
        // Build the Seq through its wire form.
        let mut seq_bytes = vec![0u8; 4 + n * encoded_len(&inner)];
        {
            let mut e = Encoder::new(&mut seq_bytes);
            e.put_count(n).unwrap();
            for _ in 0..n {
                frozen::Encode::encode(&inner, &mut e).unwrap();
            }
        }
        let items: frozen::Seq<'_, Inner<'_>> = decode(&seq_bytes).unwrap();
        let value = Outer { id, small, ratio: f64::from_bits(ratio), name: &name, blob: &blob, inner: inner.clone(), maybe, items };
        let mut out = vec![0u8; encoded_len(&value)];
        prop_assert_eq!(encode(&value, &mut out), Ok(out.len()));
        let schema: Schema<'_> = Schema::parse(Outer::TYPE_TEXT).unwrap();
        prop_assert!(frozen::validate(&out, &schema, &Limits::DEFAULT, false).is_ok());
        let back: Outer<'_> = decode(&out).unwrap();
        prop_assert_eq!((back.id, back.small, back.ratio.to_bits(), back.name, back.blob), (id, small, ratio, &name[..], &blob[..]));
        prop_assert_eq!(&back.inner, &inner);
        prop_assert_eq!(back.maybe, maybe);
        prop_assert_eq!(back.items.iter().collect::<Vec<_>>(), vec![inner; n]);
        let mut again = vec![0u8; out.len()];
        encode(&back, &mut again).unwrap();
        prop_assert_eq!(again, out);
    }
}

#[cfg(feature = "alloc")]
mod owned {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Kiln, Debug, Clone, PartialEq)]
    struct Owned {
        id: u32,
        name: String,
        scores: Vec<f32>,
        tags: BTreeMap<String, i32>,
        nested: Vec<Vec<String>>,
        note: Option<String>,
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 16 } else { 256 }, ..ProptestConfig::default() })]
        #[test]
        fn owned_values_round_trip_and_match_borrowed(
            id in any::<u32>(), name in ".{0,8}",
            scores in prop::collection::vec(any::<u32>(), 0..16),
            tags in prop::collection::btree_map(".{0,4}", any::<i32>(), 0..6),
            nested in prop::collection::vec(prop::collection::vec(".{0,3}", 0..3), 0..3),
            note in prop::option::of(".{0,4}"),
        ) {
            let value = Owned { id, name, scores: scores.iter().copied().map(f32::from_bits).collect(), tags, nested, note };
            let mut out = vec![0u8; encoded_len(&value)];
            encode(&value, &mut out).unwrap();
            let back: Owned = decode(&out).unwrap();
            prop_assert_eq!(back.scores.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), scores);
            prop_assert_eq!((&back.name, &back.tags, &back.nested, &back.note), (&value.name, &value.tags, &value.nested, &value.note));
            let schema: Schema<'_> = Schema::parse(Owned::TYPE_TEXT).unwrap();
            let v = Reader::new().read(&out, &schema).unwrap();
            prop_assert_eq!(v.field("tags").unwrap().as_dict().unwrap().len(), value.tags.len());
        }
    }
}

// ---------------------------------------------------------------- reference

/// The same random types and buffers (valid, truncated, mutated, extended)
/// through this crate and spec/reference/kiln_ref.py: the same verdict, the
/// same code and the same offset. Skipped when python3 is not available.
#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn agrees_with_the_python_reference() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use std::io::Write;
    use std::process::{Command, Stdio};

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/reference/kiln_ref.py");
    if Command::new("python3").arg("--version").output().is_err() || !std::path::Path::new(script).exists() {
        eprintln!("python3 or kiln_ref.py missing: reference comparison skipped");
        return;
    }
    let mut runner = TestRunner::deterministic();
    let mut compared = 0;
    for case in 0..48 {
        let (t, v) = typed_values().new_tree(&mut runner).unwrap().current();
        let text = t.to_string();
        let schema: Schema<'_, 512> = Schema::parse(&text).unwrap();
        let good = encode_dyn(&t, &v);
        let mut inputs = vec![good.clone()];
        let mut extended = good.clone();
        extended.push(0);
        inputs.push(extended);
        for i in 0..good.len().min(24) {
            inputs.push(good[..good.len() * i / 24].to_vec());
            let mut m = good.clone();
            let at = (i * 7919 + case * 31) % good.len();
            m[at] = m[at].wrapping_add((i as u8).wrapping_mul(37).wrapping_add(1));
            inputs.push(m);
        }
        let mut child = Command::new("python3")
            .args([script, "validate", "--type", &text])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        for b in &inputs {
            writeln!(stdin, "{}", hex::encode(b)).unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let lines: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect();
        assert_eq!(lines.len(), inputs.len(), "reference output for {text}");
        for (b, want) in inputs.iter().zip(&lines) {
            // Offsets of errors raised inside a tensor directory come from the
            // directory parser, whose EOF offsets (end of buffer) differ from
            // the reference's (the header field): compare their codes only.
            let (got, words) = match frozen::validate(b, &schema, &Limits::DEFAULT, false) {
                Ok(()) => ("accept".to_owned(), 1),
                Err(e) if !is_frozen_rule(e.rule()) => (format!("reject {}", e.code()), 2),
                Err(e) => (format!("reject {} {}", e.code(), e.offset()), 3),
            };
            let want_short: String = want.split(' ').take(words).collect::<Vec<_>>().join(" ");
            assert_eq!(got, want_short, "type {text}, input {}", hex::encode(b));
            compared += 1;
        }
    }
    assert!(compared > 500);
}

fn is_frozen_rule(rule: kiln_nostd::Rule) -> bool {
    use kiln_nostd::Rule::*;
    matches!(
        rule,
        ValueTruncated
            | CountTruncated
            | CountCap
            | ByteLengthCap
            | CountOverflow
            | CountPastEnd
            | ByteLengthPastEnd
            | StrUtf8
            | BoolValue
            | OptTag
            | DictKeyOrder
            | TrailingBytes
    )
}
