//! Frozen values through `FrozenCore::begin` / `FrozenCore::check` (what
//! `js/frozen.js` drives): the verdict is the core's on the same bytes, and
//! the description lists the type's nodes and every directory's table in
//! byte order.

use kiln_nostd::frozen::{Reader, Schema};
use kiln_nostd::Limits;
use kiln_wasm::frozen::{self, kind_code, NODES};
use kiln_wasm::{ErrorInfo, FrozenCore};

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// (name, type, framed, bytes, expected code or "accept"): the Frozen goldens
/// and the reference-encoded fixtures of test-support/.
fn cases() -> Vec<(String, String, bool, Vec<u8>, String)> {
    let mut out = Vec::new();
    for file in ["spec/kiln-v2-cases.json", "kiln-wasm/test-support/frozen-fixtures.json"] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for c in v["cases"].as_array().unwrap() {
            if c["type"] == "tensors" && c["framed"] == false && file.starts_with("spec") {
                continue; // directory goldens: tests/validator.rs
            }
            out.push((
                c["name"].as_str().unwrap().to_owned(),
                c["type"].as_str().unwrap().to_owned(),
                c["framed"].as_bool().unwrap(),
                hex::decode(c["hex"].as_str().unwrap()).unwrap(),
                c["expect"].as_str().unwrap().to_owned(),
            ));
        }
    }
    out
}

/// The core run directly: the tables of every directory, in byte order.
fn direct(ty: &str, framed: bool, bytes: &[u8], limits: Limits) -> Result<Vec<u32>, ErrorInfo> {
    let schema = Schema::<NODES>::parse(ty).map_err(ErrorInfo::from)?;
    let v = Reader::new().limits(limits).framed(framed).read(bytes, &schema).map_err(ErrorInfo::from)?;
    let mut out = Vec::new();
    let n = frozen::tables(v, &mut Vec::new(), &mut out);
    out.insert(0, n);
    Ok(out)
}

/// What js/frozen.js does, in Rust; returns the tables part of the description.
fn via_core(
    core: &mut FrozenCore,
    ty: &str,
    framed: bool,
    bytes: &[u8],
    limits: Limits,
) -> Result<Vec<u32>, ErrorInfo> {
    core.begin(ty, bytes.len() as u64)?;
    core.input().copy_from_slice(bytes);
    let out = core.check(framed, limits, false).map(|d| d.to_vec())?;
    assert_eq!(out[0], 0, "no schema nodes asked for");
    Ok(out[1..].to_vec())
}

#[test]
fn goldens_and_fixtures_give_the_core_s_verdict() {
    let mut core = FrozenCore::default();
    let all = cases();
    assert!(all.len() >= 7 + 30, "{} cases", all.len());
    for (name, ty, framed, bytes, expect) in &all {
        let d = direct(ty, *framed, bytes, Limits::DEFAULT);
        let c = via_core(&mut core, ty, *framed, bytes, Limits::DEFAULT);
        assert_eq!(d, c, "{name}");
        match &c {
            Ok(_) => assert_eq!(expect, "accept", "{name}"),
            Err(e) => assert_eq!(e.code, expect, "{name}"),
        }
    }
}

#[test]
fn mutations_give_the_core_s_verdict() {
    let mut core = FrozenCore::default();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut rejected = 0;
    let mut runs = 0;
    for (name, ty, framed, bytes, expect) in cases() {
        if expect != "accept" || bytes.is_empty() {
            continue;
        }
        for _ in 0..300 {
            let mut m = bytes.clone();
            match next() % 4 {
                0 => {
                    let i = (next() as usize) % m.len();
                    m[i] = next() as u8;
                }
                1 => {
                    let i = (next() as usize) % m.len();
                    m[i] ^= 1 << (next() % 8);
                }
                2 => m.truncate((next() as usize) % m.len()),
                _ => m.push(next() as u8),
            }
            let limits =
                if next() % 8 == 0 { Limits::DEFAULT.with_count_cap(2).with_byte_cap(3) } else { Limits::DEFAULT };
            let d = direct(&ty, framed, &m, limits);
            let c = via_core(&mut core, &ty, framed, &m, limits);
            assert_eq!(d, c, "{name} mutated: {m:02x?}");
            rejected += usize::from(c.is_err());
            runs += 1;
        }
    }
    assert!(runs > 5_000 && rejected > runs / 4, "{rejected} of {runs} rejected");
}

#[test]
fn the_description_lists_nodes_then_tables() {
    let ty = "struct{id:i64,m:dict<str,tensors>,xs:list<opt<f32>>,}";
    let mut value = 5i64.to_le_bytes().to_vec();
    value.extend([1, 0, 0, 0, 1, 0, 0, 0, b'k']);
    value.extend(kiln_nostd::wire::EMPTY_BLOCK);
    value.extend([1, 0, 0, 0, 1, 0, 0, 0x80, 0x3f]);
    let mut core = FrozenCore::default();
    core.begin(ty, value.len() as u64).unwrap();
    core.input().copy_from_slice(&value);
    let out = core.check(false, Limits::DEFAULT, true).unwrap().to_vec();
    use kiln_nostd::frozen::Kind::*;
    #[rustfmt::skip]
    let nodes = [
        kind_code(Struct), 0, 0, 7,
        kind_code(I64), 7, 2, 2,
        kind_code(Dict), 14, 1, 4,
        kind_code(Tensors), 0, 0, 4,
        kind_code(List), 34, 2, 7,
        kind_code(Opt), 0, 0, 7,
        kind_code(F32), 0, 0, 7,
    ];
    assert_eq!(out[0], 7);
    assert_eq!(&out[1..29], &nodes);
    assert_eq!(&ty[7..9], "id");
    assert_eq!(&ty[14..15], "m");
    assert_eq!(&ty[34..36], "xs");
    // One directory, its table with absolute offsets (u64 as two slots):
    // block at 17, 64 bytes, payload and heap at 81.
    assert_eq!(out[29], 1);
    let len = out[30] as usize;
    assert_eq!(len, kiln_wasm::table::META);
    assert_eq!(&out[31..31 + len], &[0, 17, 0, 64, 0, 81, 0, 81, 81, 0]);
    assert_eq!(out.len(), 31 + len);
}

#[test]
fn type_text_errors_come_first_and_say_so() {
    let mut core = FrozenCore::default();
    let e = core.begin("struct{a:i8}", 3).unwrap_err();
    assert_eq!((e.code, e.offset, e.rule), ("TYPE", 11, "TypeTextSyntax"));
    assert!(core.error_in_type());
    core.begin("u8", 1).unwrap();
    assert!(!core.error_in_type());
    core.input().copy_from_slice(&[7]);
    assert!(core.check(false, Limits::DEFAULT, true).is_ok());
    let e = core.begin("u8", u64::MAX).unwrap_err();
    assert_eq!((e.code, e.rule), ("LIMIT", "WasmMemory"));
    assert!(!core.error_in_type());
}
