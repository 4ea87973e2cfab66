//! Memory bounds, measured: a counting `#[global_allocator]` shows that no
//! decode path allocates more than a small constant (or a small multiple of
//! the bytes actually present) when counts and lengths claim gigabytes.
//!
//! Covered: tensor directories (tensor_count up to 2^32 - 1, name_bytes,
//! payload_bytes near 2^64, 8-dimensional shapes near overflow, with and
//! without name scratch), the Frozen validator and lazy reader (lists,
//! dicts, strings, byte runs, nested and zero-size elements) and, with
//! feature `alloc`, the owned decoders (Vec, String, BTreeMap). The HK
//! reader's are in kiln-hk/tests/hk_alloc_bounds.rs.
//!
//! Only allocations made by the measuring thread while a measurement runs
//! are counted (the test harness allocates on other threads).

mod support;

use support::measure;

use kiln_nostd::frozen::{self, Schema};
use kiln_nostd::{DType, Directory, ErrorCode, Limits, Parser, TensorSpec, Writer};

/// Asserts that `f` allocated nothing and returns its result.
fn no_alloc<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let (out, calls, bytes) = measure(f);
    assert_eq!((calls, bytes), (0, 0), "{what}: {calls} allocations, {bytes} bytes");
    out
}

// ---------------------------------------------------------------- directories

/// A 64-byte header with these fields (directory_bytes consistent).
fn header(count: u32, name_bytes: u32, payload_bytes: u64) -> Vec<u8> {
    let mut b = kiln_nostd::wire::EMPTY_BLOCK.to_vec();
    b[8..12].copy_from_slice(&count.to_le_bytes());
    b[12..16].copy_from_slice(&name_bytes.to_le_bytes());
    b[16..24].copy_from_slice(&payload_bytes.to_le_bytes());
    let dir = u64::from(count) * 128 + u64::from(name_bytes);
    b[24..32].copy_from_slice(&dir.to_le_bytes());
    b
}

fn code(r: &Result<Directory<'_>, kiln_nostd::Error>) -> Option<ErrorCode> {
    r.as_ref().err().map(|e| e.code())
}

#[test]
fn directory_headers_claiming_gigabytes_allocate_nothing() {
    let cases: [(&str, Vec<u8>, Limits, ErrorCode); 6] = [
        ("16,777,216 tensors (2 GiB of descriptors)", header(16_777_216, 0, 0), Limits::DEFAULT, ErrorCode::Eof),
        ("16,777,217 tensors", header(16_777_217, 0, 0), Limits::DEFAULT, ErrorCode::Limit),
        ("2^32 - 1 tensors at the wire maximum cap", header(u32::MAX, 0, 0), Limits::MAX, ErrorCode::Eof),
        ("a 4 GiB name heap", header(1, u32::MAX, 0), Limits::MAX, ErrorCode::Eof),
        ("payload_bytes 2^64 - 1", header(0, 0, u64::MAX), Limits::DEFAULT, ErrorCode::Limit),
        ("payload_bytes 2^63", header(0, 0, 1 << 63), Limits::DEFAULT, ErrorCode::Eof),
    ];
    for (what, buf, limits, want) in cases {
        let mut scratch = [0u32; 64];
        let r = no_alloc(what, || Parser::new().limits(limits).parse(&buf).map(|d| d.len()));
        assert_eq!(r.map_err(|e| e.code()), Err(want), "{what}");
        let r = no_alloc(what, || Parser::new().limits(limits).scratch(&mut scratch).parse(&buf).map(|d| d.len()));
        assert_eq!(r.map_err(|e| e.code()), Err(want), "{what} (scratch)");
    }
}

#[test]
fn eight_dimensional_shapes_near_overflow_allocate_nothing() {
    let data = [0u8; 1];
    let specs = [TensorSpec::new(DType::U8, &[1; 8], &data)];
    let mut block = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    Writer::new().write(&specs, &mut block).unwrap();
    let shape = 64 + 48;
    // 2^8 ^ 8 = 2^64: overflow (LIMIT); 255^8 < 2^64: fits, length mismatch (TYPE);
    // 2^63 * 2 * 1 ...: overflow; a zero dimension after huge ones: count 0 (TYPE: length 1 != 0).
    let dims: [([u64; 8], ErrorCode); 4] = [
        ([256; 8], ErrorCode::Limit),
        ([255; 8], ErrorCode::Type),
        ([1 << 63, 2, 1, 1, 1, 1, 1, 1], ErrorCode::Limit),
        ([u64::MAX, u64::MAX, 0, 1, 1, 1, 1, 1], ErrorCode::Type),
    ];
    for (d, want) in dims {
        let mut b = block.clone();
        for (i, v) in d.iter().enumerate() {
            b[shape + 8 * i..shape + 8 * i + 8].copy_from_slice(&v.to_le_bytes());
        }
        let r = no_alloc("8-d shape", || Directory::parse(&b));
        assert_eq!(code(&r), Some(want), "{d:?}");
    }
}

fn write_named(names: &[String]) -> Vec<u8> {
    let data = [1u8; 3];
    let specs: Vec<TensorSpec<'_>> = names.iter().map(|n| TensorSpec::new(DType::U8, &[3], &data).named(n)).collect();
    let mut block = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    // Scratch for the writer's own check (else it is quadratic in the names).
    let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(names.len() as u32)];
    Writer::new().scratch(&mut scratch).write(&specs, &mut block).unwrap();
    block
}

#[test]
fn a_large_valid_directory_parses_and_indexes_without_allocating() {
    // name_off is a u16: 10,000 six-byte names fill 60,000 bytes of heap.
    // Interpreted under Miri, a tenth of each count (the same code paths).
    let (hashed, quadratic) = if cfg!(miri) { (1_000, 100) } else { (10_000, 1_000) };
    let names: Vec<String> = (0..hashed).map(|i| format!("w{i:05}")).collect();
    let block = write_named(&names);
    let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(hashed as u32)];
    let last = format!("w{:05}", hashed - 1);
    let found = no_alloc("named tensors with scratch", || {
        let (dir, index) = Parser::new().scratch(&mut scratch).parse_indexed(&block).expect("valid");
        (dir.len(), index.get(&last).map(|t| t.index()))
    });
    assert_eq!(found, (hashed, Some(hashed - 1)));
    // Without scratch the name check is quadratic (no memory).
    let small = write_named(&names[..quadratic]);
    let n = no_alloc("named tensors without scratch (quadratic)", || Directory::parse(&small).map(|d| d.len()));
    assert_eq!(n, Ok(quadratic));
}

// ---------------------------------------------------------------- Frozen

fn validate(ty: &str, buf: &[u8], limits: Limits) -> Result<(), kiln_nostd::Error> {
    let schema: Schema<'_> = Schema::parse(ty).expect("type text");
    no_alloc(ty, || frozen::validate(buf, &schema, &limits, false))
}

#[test]
fn frozen_counts_claiming_gigabytes_allocate_nothing() {
    let claim_16m = [0, 0, 0, 1, 1, 2, 3, 4]; // 16,777,216 claimed, 4 bytes present
    let claim_max = [0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4]; // 4,294,967,295 claimed
    for ty in ["list<u64>", "list<str>", "list<list<u8>>", "dict<str,u8>", "list<tensors>", "list<opt<bool>>"] {
        assert_eq!(validate(ty, &claim_16m, Limits::DEFAULT).map_err(|e| e.code()), Err(ErrorCode::Eof), "{ty}");
        assert_eq!(validate(ty, &claim_max, Limits::DEFAULT).map_err(|e| e.code()), Err(ErrorCode::Limit), "{ty}");
        assert_eq!(validate(ty, &claim_max, Limits::MAX).map_err(|e| e.code()), Err(ErrorCode::Eof), "{ty}");
    }
    for ty in ["str", "list<u8>"] {
        assert_eq!(validate(ty, &claim_16m, Limits::DEFAULT).map_err(|e| e.code()), Err(ErrorCode::Eof), "{ty}");
        assert_eq!(validate(ty, &claim_max, Limits::MAX).map_err(|e| e.code()), Err(ErrorCode::Eof), "{ty}");
    }
    // Zero-size elements: the cap bounds the count; 16,777,216 of them pass
    // (no bytes needed) and still allocate nothing.
    assert_eq!(validate("list<struct{}>", &[0, 0, 0, 1], Limits::DEFAULT), Ok(()));
    // A struct whose tensors field claims 16,777,216 tensors.
    let mut rec = 7i64.to_le_bytes().to_vec();
    rec.extend(header(16_777_216, 0, 0));
    assert_eq!(
        validate("struct{id:i64,batch:tensors,}", &rec, Limits::DEFAULT).map_err(|e| e.code()),
        Err(ErrorCode::Eof)
    );
}

#[test]
fn the_lazy_reader_allocates_nothing() {
    let schema: Schema<'_> = Schema::parse("dict<str,list<f32>>").unwrap();
    let mut buf = Vec::new();
    buf.extend(2u32.to_le_bytes());
    for key in ["a", "b"] {
        buf.extend(1u32.to_le_bytes());
        buf.extend(key.as_bytes());
        buf.extend(2u32.to_le_bytes());
        buf.extend(1.0f32.to_le_bytes());
        buf.extend((-2.0f32).to_le_bytes());
    }
    let n = no_alloc("read + walk", || {
        let v = frozen::read(&buf, &schema, &Limits::DEFAULT, false).expect("valid");
        let d = v.as_dict().expect("dict");
        d.get("b").and_then(|l| l.as_list()).map(|l| l.len())
    });
    assert_eq!(n, Some(2));
}

#[cfg(feature = "alloc")]
mod owned {
    use super::*;
    use std::collections::BTreeMap;

    /// Decodes `buf` as `T`; returns the error code and the bytes allocated.
    fn owned<T: for<'a> frozen::Decode<'a>>(buf: &[u8], limits: Limits) -> (Option<ErrorCode>, usize) {
        let (r, _calls, bytes) = measure(|| frozen::decode_with::<T>(buf, &limits, false).map(drop));
        (r.err().map(|e| e.code()), bytes)
    }

    #[test]
    fn owned_decoders_allocate_only_for_what_is_present() {
        let claim_16m = [0, 0, 0, 1, 1, 2, 3, 4];
        let claim_max = [0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4];
        for buf in [&claim_16m, &claim_max] {
            for limits in [Limits::DEFAULT, Limits::MAX] {
                let results = [
                    owned::<Vec<u64>>(buf, limits),
                    owned::<Vec<String>>(buf, limits),
                    owned::<String>(buf, limits),
                    owned::<Vec<u8>>(buf, limits),
                    owned::<Vec<Vec<u8>>>(buf, limits),
                    owned::<BTreeMap<String, u64>>(buf, limits),
                    owned::<Vec<Option<bool>>>(buf, limits),
                ];
                for (i, (code, bytes)) in results.into_iter().enumerate() {
                    assert!(code.is_some(), "case {i} accepted a hostile count");
                    assert_eq!(bytes, 0, "case {i}: {bytes} bytes allocated for a hostile count");
                }
            }
        }
    }

    #[test]
    fn a_count_that_fits_the_minimum_allocates_a_small_multiple_of_the_input() {
        // 1,000 strings claimed in 4,000 bytes (4 each, the minimum): the
        // count check passes and the Vec is reserved; the first string then
        // claims 3,999 bytes and fails. Reserved: 1,000 String headers.
        let mut buf = 1000u32.to_le_bytes().to_vec();
        buf.extend(3999u32.to_le_bytes());
        buf.extend([0u8; 3996]);
        let (code, bytes) = owned::<Vec<String>>(&buf, Limits::DEFAULT);
        assert_eq!(code, Some(ErrorCode::Eof));
        assert!(bytes <= 8 * buf.len(), "{bytes} bytes for a {}-byte input", buf.len());
        // Nested: each level only reserves what its own count proved.
        let mut nested = 500u32.to_le_bytes().to_vec();
        nested.extend([0xff; 2000]);
        let (code, bytes) = owned::<Vec<Vec<Vec<u64>>>>(&nested, Limits::DEFAULT);
        assert!(code.is_some());
        assert!(bytes <= 8 * nested.len(), "{bytes} bytes for a {}-byte input", nested.len());
    }
}
