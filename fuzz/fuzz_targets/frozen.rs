//! Frozen values of a set of types that together use every construct:
//! bool, every integer width, int/uint, f32/f64, str, list<u8>, list<T>,
//! opt<T> (nested), dict<str,V>, struct (nested, empty), tensors (alone, in a
//! struct, in a list, in a dict), framed and unframed.
//!
//! Input: byte 0 picks the type, byte 1 the mode (bits 0-1: 0 unframed,
//! 1 framed as given, 2 framed with the correct frame prepended; bits 2-3:
//! caps), the rest is the value.
//!
//! Oracles: the dynamic validator (`frozen::validate` on the parsed type
//! text) and the typed decoder (derived structs, owned Vec/String/BTreeMap,
//! borrowed Directory) return the same result, rule and offset; an
//! accepted value re-encodes with the typed encoder to the input bytes
//! (canonical form); the lazy `Value` tree of an accepted value lies inside
//! the buffer and its directories pass the view and canonical oracles; an
//! error offset lies inside the buffer (or at its end for EOF).
#![no_main]

use std::collections::BTreeMap;

use kiln_fuzz::{check_directory, check_error};
use kiln_nostd::frozen::{self, Decode, Encode, Int, Kiln, Schema, Uint, Value};
use kiln_nostd::{Directory, Error, Limits};
use libfuzzer_sys::fuzz_target;

#[derive(Kiln, Debug)]
struct Rec {
    id: u32,
    name: String,
}

#[derive(Kiln, Debug)]
struct Empty {}

#[derive(Kiln, Debug)]
struct Batch<'a> {
    id: i64,
    batch: Directory<'a>,
}

#[derive(Kiln, Debug)]
struct Mixed<'a> {
    a: bool,
    b: Option<f64>,
    c: BTreeMap<String, Vec<u8>>,
    d: Vec<Directory<'a>>,
    e: Uint,
    f: Empty,
    g: i16,
}

#[derive(Kiln, Debug)]
struct Scalars {
    a: i8,
    b: i16,
    c: i32,
    d: i64,
    e: u8,
    f: u16,
    g: u32,
    h: u64,
    i: Int,
    j: Uint,
    k: f32,
    l: f64,
    m: bool,
}

/// Typed decode, then the typed re-encoding of an accepted value.
fn typed<'a, T: Decode<'a> + Encode>(text: &str, data: &'a [u8], limits: &Limits, framed: bool) -> (Result<(), Error>, Option<Vec<u8>>) {
    assert_eq!(T::TY.to_string_in::<256>().as_deref(), Some(text), "typed mirror of the wrong type");
    match frozen::decode_with::<T>(data, limits, framed) {
        Err(e) => (Err(e), None),
        Ok(v) => {
            let n = if framed { frozen::encoded_len_framed(&v) } else { frozen::encoded_len(&v) };
            let mut out = vec![0u8; n];
            let m = if framed { frozen::encode_framed(&v, &mut out) } else { frozen::encode(&v, &mut out) };
            assert_eq!(m, Ok(n), "encoded_len and encode disagree");
            (Ok(()), Some(out))
        }
    }
}

/// (type text, count cap). Types whose elements can be 0 bytes get a small
/// count cap so a hostile count cannot make an input slow.
const TYPES: [(&str, u32); 17] = [
    ("tensors", 1 << 24),
    ("struct{id:i64,batch:tensors,}", 1 << 24),
    ("list<f32>", 1 << 24),
    ("list<str>", 1 << 24),
    ("list<struct{id:u32,name:str,}>", 1 << 24),
    ("dict<str,opt<i16>>", 1 << 24),
    ("opt<list<u8>>", 1 << 24),
    ("struct{a:bool,b:opt<f64>,c:dict<str,list<u8>>,d:list<tensors>,e:uint,f:struct{},g:i16,}", 4096),
    ("list<struct{}>", 4096),
    ("list<opt<bool>>", 1 << 24),
    ("dict<str,tensors>", 1 << 24),
    ("list<list<i8>>", 1 << 24),
    ("opt<opt<int>>", 1 << 24),
    ("str", 1 << 24),
    ("list<u64>", 1 << 24),
    ("struct{a:i8,b:i16,c:i32,d:i64,e:u8,f:u16,g:u32,h:u64,i:int,j:uint,k:f32,l:f64,m:bool,}", 1 << 24),
    ("list<tensors>", 1 << 24),
];

/// The typed decoder mirroring `TYPES[index]`.
fn typed_check(index: usize, data: &[u8], limits: &Limits, framed: bool) -> (Result<(), Error>, Option<Vec<u8>>) {
    match index {
        0 => typed::<Directory<'_>>(TYPES[index].0, data, limits, framed),
        1 => typed::<Batch<'_>>(TYPES[index].0, data, limits, framed),
        2 => typed::<Vec<f32>>(TYPES[index].0, data, limits, framed),
        3 => typed::<Vec<String>>(TYPES[index].0, data, limits, framed),
        4 => typed::<Vec<Rec>>(TYPES[index].0, data, limits, framed),
        5 => typed::<BTreeMap<String, Option<i16>>>(TYPES[index].0, data, limits, framed),
        6 => typed::<Option<Vec<u8>>>(TYPES[index].0, data, limits, framed),
        7 => typed::<Mixed<'_>>(TYPES[index].0, data, limits, framed),
        8 => typed::<Vec<Empty>>(TYPES[index].0, data, limits, framed),
        9 => typed::<Vec<Option<bool>>>(TYPES[index].0, data, limits, framed),
        10 => typed::<BTreeMap<String, Directory<'_>>>(TYPES[index].0, data, limits, framed),
        11 => typed::<Vec<Vec<i8>>>(TYPES[index].0, data, limits, framed),
        12 => typed::<Option<Option<Int>>>(TYPES[index].0, data, limits, framed),
        13 => typed::<String>(TYPES[index].0, data, limits, framed),
        14 => typed::<Vec<u64>>(TYPES[index].0, data, limits, framed),
        15 => typed::<Scalars>(TYPES[index].0, data, limits, framed),
        16 => typed::<Vec<Directory<'_>>>(TYPES[index].0, data, limits, framed),
        _ => unreachable!(),
    }
}

/// Walks the lazy value tree: every value's bytes lie inside the buffer.
fn walk(buf: &[u8], v: &Value<'_, '_>, depth: usize) {
    assert!(depth <= 70);
    let raw = v.raw();
    assert!(v.offset() <= v.end() && v.end() <= buf.len());
    assert_eq!(raw.len(), v.end() - v.offset());
    let _ = (v.as_bool(), v.as_i64(), v.as_u64(), v.as_f32(), v.as_f64(), v.as_str(), v.as_bytes());
    if let Some(l) = v.as_list() {
        assert_eq!(l.iter().count(), l.len());
        for (i, e) in l.iter().enumerate() {
            assert!(e.offset() >= v.offset() && e.end() <= v.end());
            if i < 4 {
                walk(buf, &e, depth + 1);
            }
        }
        let _ = l.bytes();
    }
    if let Some(Some(inner)) = v.as_opt() {
        walk(buf, &inner, depth + 1);
    }
    if let Some(d) = v.as_dict() {
        let mut prev: Option<&[u8]> = None;
        for (k, val) in d.entries() {
            assert!(prev.is_none_or(|p| p < k), "dict keys out of order in an accepted value");
            prev = Some(k);
            walk(buf, &val, depth + 1);
            let key = core::str::from_utf8(k).expect("checked UTF-8");
            assert_eq!(d.get(key).map(|x| x.offset()), Some(val.offset()));
        }
    }
    if let Some(s) = v.as_struct() {
        for (name, f) in s.fields() {
            assert_eq!(v.field(name).map(|x| x.offset()), Some(f.offset()));
            walk(buf, &f, depth + 1);
        }
    }
    if let Some(dir) = v.as_tensors() {
        assert_eq!((dir.start(), dir.end()), (v.offset(), v.end()));
        check_directory(buf, &dir);
    }
}

fuzz_target!(|input: &[u8]| {
    let [sel, mode, body @ ..] = input else { return };
    let index = usize::from(*sel) % TYPES.len();
    let (text, count_cap) = TYPES[index];
    let schema: Schema<'_> = Schema::parse(text).expect("type text");
    let limits = match (mode >> 2) & 3 {
        0 => Limits::DEFAULT.with_count_cap(count_cap),
        1 => Limits { count_cap: u32::from(mode >> 4), byte_cap: Limits::DEFAULT.byte_cap },
        2 => Limits { count_cap: count_cap.min(1 << 16), byte_cap: u32::from(mode >> 4) },
        _ => Limits { count_cap: count_cap.min(1 << 16), byte_cap: u32::MAX },
    };
    let (framed, owned);
    let data: &[u8] = match mode & 3 {
        0 => {
            framed = false;
            body
        }
        2 => {
            framed = true;
            owned = [&frozen::frame_bytes(schema.hash())[..], body].concat();
            &owned
        }
        _ => {
            framed = true;
            body
        }
    };

    let dynamic = frozen::validate(data, &schema, &limits, framed);
    let (stat, re) = typed_check(index, data, &limits, framed);
    assert_eq!(dynamic, stat, "{text}: dynamic and typed decoding disagree");
    match dynamic {
        Err(e) => check_error(&e, data.len()),
        Ok(()) => {
            let re = re.expect("accepted");
            assert!(re == data, "{text}: accepted value is not canonical: re-encoding differs");
            let v = frozen::read(data, &schema, &limits, framed).expect("validated");
            walk(data, &v, 0);
        }
    }
});
