//! The C API against the Rust core it wraps: `kiln_validate` (and the
//! parse, incremental and ranged-reading entry points) give exactly
//! `kiln_model::parse_any`'s verdict (code, offset, rule) on the
//! golden, check-order and regression cases, the example model as a plain
//! directory and as a model file, and mutations of both; the accessors show
//! what the Rust views show; API misuse is an error code, never a crash.
//!
//! `kiln_model_verify` and `kiln_source_verify_model` give
//! `Model::parse_verified`'s verdict (digests compared) on the same inputs,
//! model files with digests and their mutations among them, and
//! `parse_any`'s with `KILN_VERIFY_SKIP_DIGESTS`.
//!
//! With `KILN_C_VECTORS=FILE`, `write_vectors_for_the_c_test` also writes
//! every input with its Rust verdicts for the C test program
//! (`kiln-c/tests/c/test_kiln.c`, run by kiln-c/ci.sh).

// Every unsafe block here is a C API call made as C would make it, on the
// buffers and handles built just above it: one SAFETY line each would repeat that.
#![allow(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_int, c_void, CStr};
use std::path::PathBuf;
use std::ptr::{null, null_mut};

use kiln_c_api::*;
use kiln_model::{self as model, Model, ModelWriter};
use kiln_nostd::{Directory, Incremental, Parser, TensorSpec};

fn root() -> PathBuf {
    kiln_conformance::repo_root()
}

fn example() -> Vec<u8> {
    std::fs::read(root().join("spec/examples/digits-mlp.kiln")).expect("the example model")
}

/// The example's tensors as a model file, with metadata (and, aligned, the padding key).
fn example_model_file(align: u64) -> Vec<u8> {
    write_example(ModelWriter::new().align(align))
}

/// The example's tensors through `w` (a plain, digests or shard record).
fn write_example(w: ModelWriter) -> Vec<u8> {
    let block = example();
    let dir = Directory::parse(&block).unwrap();
    let tensors: Vec<_> = dir.iter().collect();
    let specs: Vec<TensorSpec<'_>> = tensors.iter().map(TensorSpec::from_tensor).collect();
    let meta = [("author", "kiln"), ("kiln.convert.source_format", "kiln"), ("task", "digits")];
    let mut out = vec![0u8; w.encoded_len(&meta, &specs).unwrap()];
    let n = w.write(&meta, &specs, &mut out).unwrap();
    out.truncate(n);
    out
}

fn cstr(p: *const std::ffi::c_char) -> &'static str {
    assert!(!p.is_null());
    unsafe { CStr::from_ptr(p) }.to_str().unwrap()
}

/// A verdict as the C API and the Rust core both can state it.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Verdict {
    code: c_int,
    offset: u64,
    rule: String,
}

impl Verdict {
    fn ok() -> Self {
        Verdict { code: 0, offset: 0, rule: String::new() }
    }
    fn of(r: Result<(), impl Into<kiln_model::Error>>) -> Self {
        match r.map_err(Into::into) {
            Ok(()) => Verdict::ok(),
            Err(e) => {
                let code = match e.code().as_str() {
                    "FRAME" => KILN_FRAME,
                    "LIMIT" => KILN_LIMIT,
                    "EOF" => KILN_EOF,
                    "TYPE" => KILN_TYPE,
                    "UTF8" => KILN_UTF8,
                    "TRAILING" => KILN_TRAILING,
                    "SCHEMA" => KILN_SCHEMA,
                    "DIGEST" => KILN_DIGEST,
                    "SHARD" => KILN_SHARD,
                    "PATH" => KILN_PATH,
                    "SIGNATURE" => KILN_SIGNATURE,
                    other => panic!("unknown code {other}"),
                };
                Verdict { code, offset: e.offset_u64(), rule: e.rule().id().to_owned() }
            }
        }
    }
    fn from_c(rc: c_int, e: &kiln_error) -> Self {
        assert_eq!(rc, e.code, "return value and err->code agree");
        let v = Verdict { code: e.code, offset: e.offset, rule: cstr(e.rule).to_owned() };
        if rc == 0 {
            assert_eq!((e.offset, cstr(e.rule), cstr(e.description)), (0, "", ""));
        } else {
            assert!(!cstr(e.description).is_empty());
        }
        v
    }
}

fn rust_verdict(buf: &[u8]) -> Verdict {
    Verdict::of(model::parse_any(buf).map(|_| ()))
}

/// The verdict with step 9d: `Model::parse_verified` for a model file, the
/// directory's otherwise (what `kiln_model_verify` gives).
fn rust_verified_verdict(buf: &[u8]) -> Verdict {
    if model::is_model_file(buf) {
        Verdict::of(Model::parse_verified(buf).map(|_| ()))
    } else {
        Verdict::of(Parser::new().parse(buf).map(|_| ()))
    }
}

fn new_err() -> kiln_error {
    kiln_error { code: 99, offset: 99, rule: null(), description: null(), needed: 0, read_status: 0 }
}

fn c_validate(buf: &[u8]) -> Verdict {
    let mut e = new_err();
    let rc = unsafe { kiln_validate(buf.as_ptr(), buf.len(), &mut e) };
    Verdict::from_c(rc, &e)
}

fn new_dir() -> kiln_dir {
    kiln_dir { opaque: [0; KILN_DIR_WORDS] }
}

fn c_parse(buf: &[u8], scratch: Option<&mut [u32]>) -> (Verdict, kiln_dir) {
    let mut e = new_err();
    let mut d = new_dir();
    let opts = scratch.map(|s| kiln_options {
        scratch: s.as_mut_ptr(),
        scratch_len: s.len(),
        count_cap: 0,
        byte_cap: 0,
        hash_seed: 0x5eed,
    });
    let rc = unsafe {
        kiln_parse_ex(buf.as_ptr(), buf.len(), opts.as_ref().map_or(null(), |o| o as *const _), &mut d, &mut e)
    };
    (Verdict::from_c(rc, &e), d)
}

/// The incremental validator, fed in `chunk`-byte pieces.
fn c_incremental(buf: &[u8], chunk: usize) -> Verdict {
    let mut prefix = vec![0u8; 64 << 10];
    let mut v = kiln_incremental { opaque: [0; KILN_INCREMENTAL_WORDS] };
    assert_eq!(unsafe { kiln_incremental_init(&mut v, prefix.as_mut_ptr(), prefix.len(), null()) }, 0);
    for piece in buf.chunks(chunk.max(1)) {
        let mut e = new_err();
        let mut p = -1;
        let rc = unsafe { kiln_incremental_feed(&mut v, piece.as_ptr(), piece.len(), &mut p, &mut e) };
        if rc == 0 {
            assert!((KILN_PROGRESS_HEADER..=KILN_PROGRESS_COMPLETE).contains(&p));
        }
    }
    let mut e = new_err();
    let mut s = kiln_summary { block_len: 0, payload_base: 0, tensor_count: 0 };
    let rc = unsafe { kiln_incremental_finish(&mut v, &mut s, &mut e) };
    let verdict = Verdict::from_c(rc, &e);
    if rc == 0 {
        assert_eq!(s.block_len, buf.len() as u64);
    }
    // Spent: a second finish is an API error.
    assert_eq!(unsafe { kiln_incremental_finish(&mut v, null_mut(), null_mut()) }, KILN_ERR_HANDLE);
    verdict
}

unsafe extern "C" fn read_slice(ctx: *mut c_void, offset: u64, buf: *mut u8, len: usize) -> c_int {
    let src = unsafe { &*(ctx as *const Vec<u8>) };
    let Some(bytes) = usize::try_from(offset).ok().and_then(|o| src.get(o..o.checked_add(len)?)) else { return 9 };
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf, len) };
    0
}

fn source_of(buf: &Vec<u8>) -> kiln_source {
    kiln_source { read_at: Some(read_slice), ctx: buf as *const Vec<u8> as *mut c_void, len: buf.len() as u64 }
}

fn c_source_verify(buf: &Vec<u8>) -> Verdict {
    let src = source_of(buf);
    let mut prefix = vec![0u8; 64 << 10];
    let mut chunk = [0u8; 97];
    let mut e = new_err();
    let rc =
        unsafe { kiln_source_verify(&src, prefix.as_mut_ptr(), prefix.len(), chunk.as_mut_ptr(), chunk.len(), &mut e) };
    Verdict::from_c(rc, &e)
}

fn c_model_verify(buf: &[u8], flags: u32) -> (Verdict, kiln_verified) {
    let mut e = new_err();
    let mut out =
        kiln_verified { record: 99, digests_checked: true, tensor_count: 99, block_offset: 99, block_len: 99 };
    let rc = unsafe { kiln_model_verify(buf.as_ptr(), buf.len(), flags, &mut out, &mut e) };
    (Verdict::from_c(rc, &e), out)
}

fn c_source_verify_model(buf: &Vec<u8>, prefix_len: usize, chunk_len: usize, flags: u32) -> (Verdict, kiln_error) {
    let src = source_of(buf);
    let mut prefix = vec![0u8; prefix_len];
    let mut chunk = vec![0u8; chunk_len];
    let mut e = new_err();
    let rc = unsafe {
        kiln_source_verify_model(
            &src,
            prefix.as_mut_ptr(),
            prefix.len(),
            chunk.as_mut_ptr(),
            chunk.len(),
            flags,
            null_mut(),
            &mut e,
        )
    };
    (Verdict::from_c(rc, &e), e)
}

/// Every C verdict on `buf` equals the core's. Model files are checked
/// through the in-memory entry points; the streaming ones take plain blocks.
fn check_all(buf: &[u8], what: &str) -> Verdict {
    let want = rust_verdict(buf);
    assert_eq!(c_validate(buf), want, "kiln_validate: {what}");
    assert_eq!(c_parse(buf, None).0, want, "kiln_parse: {what}");
    let mut scratch = [0u32; 64];
    assert_eq!(c_parse(buf, Some(&mut scratch)).0, want, "kiln_parse_ex with scratch: {what}");
    if !model::is_model_file(buf) {
        // The directory verdict of the streaming paths is Parser::parse's, which parse_any gives here.
        assert_eq!(Verdict::of(Parser::new().parse(buf).map(|_| ())), want);
        for chunk in [1, 7, 4096, buf.len()] {
            assert_eq!(c_incremental(buf, chunk), want, "incremental in {chunk}-byte chunks: {what}");
        }
        assert_eq!(c_source_verify(&buf.to_vec()), want, "kiln_source_verify: {what}");
    }
    let verified = rust_verified_verdict(buf);
    assert_eq!(c_model_verify(buf, 0).0, verified, "kiln_model_verify: {what}");
    assert_eq!(c_model_verify(buf, KILN_VERIFY_SKIP_DIGESTS).0, want, "kiln_model_verify, skipping: {what}");
    let owned = buf.to_vec();
    for chunk in [1, 64, 4096] {
        let got = c_source_verify_model(&owned, 64 << 10, chunk, 0).0;
        assert_eq!(got, verified, "kiln_source_verify_model in {chunk}-byte chunks: {what}");
    }
    let skipped = c_source_verify_model(&owned, 64 << 10, 64, KILN_VERIFY_SKIP_DIGESTS).0;
    assert_eq!(skipped, want, "kiln_source_verify_model, skipping: {what}");
    want
}

/// (name, bytes, the recorded expectation: "accept" or a code, for cases that have one)
fn inputs() -> Vec<(String, Vec<u8>, Option<String>)> {
    let mut out = Vec::new();
    for c in kiln_conformance::cases() {
        // Only standalone, unframed directories have a recorded result that
        // applies to kiln_validate; the other goldens are Frozen values of
        // other types, which it reads as (rejected) directories.
        let expect = c.is_directory().then(|| c.expect.clone());
        out.push((format!("golden/{}", c.name), c.bytes(), expect));
    }
    let json = |p: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(root().join(p)).unwrap()).unwrap()
    };
    for case in json("spec/check-order-matrix.json")["cases"].as_array().unwrap() {
        if case["type"] != "tensors" || case["framed"] != false {
            continue; // Frozen values of other types: their expectation is not kiln_validate's
        }
        let expect = case["expect"].as_str().unwrap().to_owned();
        out.push((
            format!("check-order/{}", case["name"].as_str().unwrap()),
            hex::decode(case["hex"].as_str().unwrap()).unwrap(),
            Some(expect),
        ));
    }
    for entry in std::fs::read_dir(root().join("spec/regressions")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            for case in v["cases"].as_array().unwrap() {
                if case["type"] == "tensors" && case["framed"] == false {
                    let expect = case["expect"].as_str().unwrap().to_owned();
                    out.push((
                        format!("regression/{}", case["name"].as_str().unwrap()),
                        hex::decode(case["hex"].as_str().unwrap()).unwrap(),
                        Some(expect),
                    ));
                }
            }
        }
    }
    let block = example();
    out.push(("example/digits-mlp.kiln".into(), block.clone(), Some("accept".into())));
    let file = example_model_file(1);
    out.push(("example/model-file".into(), file.clone(), Some("accept".into())));
    out.push(("example/model-file-aligned".into(), example_model_file(4096), Some("accept".into())));
    // Deterministic mutations of the model file's frame, metadata and directory.
    let dir_at = 16 + 4 + (4 + 6 + 4 + 4) + (4 + 26 + 4 + 4) + (4 + 4 + 4 + 6);
    for (i, at) in [0usize, 3, 4, 5, 8, 15, 16, 19, 20, 24, 30, 40, dir_at, dir_at + 4, dir_at + 64 + 3, file.len() - 1]
        .into_iter()
        .enumerate()
    {
        for v in [0x00u8, 0xff] {
            let mut m = file.clone();
            m[at] ^= v ^ 0x5a;
            out.push((format!("model-mutation/{i}/{at}/{v:02x}"), m, None));
        }
    }
    for len in [0, 4, 15, 16, 19, dir_at, dir_at + 63, file.len() - 1] {
        out.push((format!("model-truncated/{len}"), file[..len].to_vec(), None));
    }
    let mut longer = file.clone();
    longer.push(0);
    out.push(("model-trailing".into(), longer, Some("TRAILING".into())));
    // Digests and shard records, and mutations of the digests record: in
    // the table, the block's header and descriptors, and payload bytes
    // (which only the digests catch: `kiln_validate` accepts those).
    let digests = write_example(ModelWriter::new().digests(true));
    out.push(("example/model-file-digests".into(), digests.clone(), Some("accept".into())));
    let aligned = write_example(ModelWriter::new().digests(true).align(4096));
    out.push(("example/model-file-digests-aligned".into(), aligned, Some("accept".into())));
    let shard = write_example(ModelWriter::new().shard([7; 32], 1, 1));
    out.push(("example/shard".into(), shard, Some("accept".into())));
    let m = Model::parse(&digests).unwrap();
    let table_at = m.digests().unwrap().offset_of(0);
    let block_at = m.directory_offset();
    let mut places = vec![table_at - 4, table_at, table_at + 33, block_at + 8, block_at + 64 + 5];
    for t in m.directory().iter() {
        let (at, len) = (t.absolute_offset(), t.bytes().len());
        if len > 0 {
            places.extend([at, at + len / 2, at + len - 1]);
        }
    }
    for at in places {
        let mut bad = digests.clone();
        bad[at] ^= 0x01;
        out.push((format!("digests-mutation/{at}"), bad, None));
    }
    for len in [table_at, block_at + 63, digests.len() - 1] {
        out.push((format!("digests-truncated/{len}"), digests[..len].to_vec(), None));
    }
    out
}

#[test]
fn a_flipped_payload_byte_is_digest_at_its_tensor_through_memory_and_the_callback() {
    let file = write_example(ModelWriter::new().digests(true).align(4096));
    let m = Model::parse(&file).unwrap();
    let t = m.directory().iter().max_by_key(|t| t.bytes().len()).unwrap();
    let (at, len) = (t.absolute_offset(), t.bytes().len());
    assert!(len > 256);
    let mut bad = file.clone();
    bad[at + len / 2 + 3] ^= 0x10;
    let want = Verdict { code: KILN_DIGEST, offset: at as u64, rule: "PayloadDigest".into() };
    assert_eq!(c_validate(&bad), Verdict::ok(), "every structural rule holds");
    let (v, out) = c_model_verify(&bad, 0);
    assert_eq!(v, want);
    assert_eq!((out.record, out.digests_checked), (KILN_RECORD_NONE, false), "zero on failure");
    assert_eq!(c_source_verify_model(&bad, 64 << 10, 64, 0).0, want);
    assert_eq!(c_model_verify(&bad, KILN_VERIFY_SKIP_DIGESTS).0, Verdict::ok());
    assert_eq!(c_source_verify_model(&bad, 64 << 10, 64, KILN_VERIFY_SKIP_DIGESTS).0, Verdict::ok());
    let (v, out) = c_model_verify(&file, 0);
    assert_eq!(v, Verdict::ok());
    assert_eq!((out.record, out.digests_checked, out.tensor_count), (KILN_RECORD_DIGESTS, true, m.directory().len()));
    assert_eq!(out.block_offset, m.directory_offset() as u64);
    assert_eq!(c_model_verify(&file, 2).0.code, KILN_ERR_ARGUMENT, "an unknown flag");
}

#[test]
fn a_short_prefix_buffer_says_how_much_it_needs() {
    let file = write_example(ModelWriter::new().digests(true).align(4096));
    let m = Model::parse(&file).unwrap();
    let (v, e) = c_source_verify_model(&file, 100, 64, 0);
    assert_eq!(v.code, KILN_ERR_BUFFER_TOO_SMALL);
    let needed = e.needed as usize;
    assert_eq!(c_source_verify_model(&file, needed, 64, 0).0, Verdict::ok());
    assert!(needed >= m.directory_offset() + 64, "{needed}");
    assert_eq!(c_source_verify_model(&file, needed - 1, 64, 0).0.code, KILN_ERR_BUFFER_TOO_SMALL, "{needed} is exact");
}

#[test]
fn every_case_gives_the_cores_verdict_through_every_entry_point() {
    let mut n = 0;
    for (name, bytes, expect) in inputs() {
        let got = check_all(&bytes, &name);
        if let Some(expect) = expect {
            let code = if got.code == 0 { "accept".to_owned() } else { cstr(kiln_code_name(got.code)).to_owned() };
            assert_eq!(code, expect, "{name}: the recorded result");
        }
        n += 1;
    }
    assert!(n > 2300, "{n}");
}

/// xorshift64*, deterministic.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `kiln_validate` equals `model::parse_any` on mutated model files and
/// directories: single bytes, runs of bytes, truncations and extensions.
#[test]
fn kiln_validate_equals_parse_any_on_mutations() {
    let bases = [example(), example_model_file(1), example_model_file(64)];
    let mut rng = Rng(0x4b494c4e_00c0ffee);
    let mut rejected = 0;
    let rounds = if cfg!(debug_assertions) { 3_000 } else { 20_000 };
    for round in 0..rounds {
        let base = &bases[round % bases.len()];
        let mut m = base.clone();
        match rng.below(6) {
            0 | 1 => {
                // A byte of the directory prefix or metadata (where most rules live).
                let at = rng.below(m.len().min(1400));
                m[at] = rng.next() as u8;
            }
            2 => {
                let at = rng.below(m.len());
                m[at] = [0, 1, 0x7f, 0x80, 0xff][rng.below(5)];
            }
            3 => {
                let at = rng.below(m.len());
                for b in m.iter_mut().skip(at).take(1 + rng.below(8)) {
                    *b ^= 1 << rng.below(8);
                }
            }
            4 => m.truncate(rng.below(m.len())),
            _ => m.extend(std::iter::repeat_n(0, 1 + rng.below(64))),
        }
        let want = rust_verdict(&m);
        assert_eq!(c_validate(&m), want, "round {round}");
        if round % 16 == 0 {
            assert_eq!(c_parse(&m, None).0, want, "kiln_parse, round {round}");
        }
        rejected += usize::from(want.code != 0);
    }
    assert!(rejected > rounds / 2, "{rejected}");
    // Every single-byte change of the model file's frame, metadata and directory prefix.
    let file = example_model_file(1);
    let block = example();
    let prefix_end = 200 + Directory::parse(&block).unwrap().payload_start();
    for at in 0..prefix_end.min(file.len()) {
        for v in [0u8, 0x41, 0xff] {
            let mut m = file.clone();
            m[at] = v;
            assert_eq!(c_validate(&m), rust_verdict(&m), "byte {at} = {v:#x}");
        }
    }
}

/// The table, lookups, views and copies show what the Rust views show.
#[test]
fn accessors_mirror_the_rust_views() {
    for buf in [example(), example_model_file(1), example_model_file(4096)] {
        let (_, want) = model::parse_any(&buf).unwrap();
        for with_scratch in [false, true] {
            let mut scratch = [0u32; 64];
            let (v, d) = c_parse(&buf, with_scratch.then_some(&mut scratch[..]));
            assert_eq!(v, Verdict::ok());
            assert_eq!(unsafe { kiln_count(&d) }, want.len());
            let mut info = std::mem::MaybeUninit::<kiln_dir_info>::uninit();
            assert_eq!(unsafe { kiln_dir_get_info(&d, info.as_mut_ptr()) }, 0);
            let info = unsafe { info.assume_init() };
            assert_eq!(info.tensor_count, want.len());
            assert_eq!(info.block_offset, want.start() as u64);
            assert_eq!(info.payload_offset, want.payload_start() as u64);
            assert_eq!(info.block_len, want.block_len() as u64);
            assert_eq!(info.hashed_index, with_scratch);
            assert_eq!(info.is_model, model::is_model_file(&buf));
            assert!(info.has_payload && info.named);
            for t in want.iter() {
                let mut ct = std::mem::MaybeUninit::<kiln_tensor>::uninit();
                assert_eq!(unsafe { kiln_tensor_at(&d, t.index(), ct.as_mut_ptr()) }, 0);
                let ct = unsafe { ct.assume_init() };
                let name = t.name().unwrap();
                let cname = unsafe { std::slice::from_raw_parts(ct.name.ptr.cast::<u8>(), ct.name.len) };
                assert_eq!(cname, name.as_bytes());
                assert_eq!(ct.dtype, t.dtype().code());
                assert_eq!(cstr(ct.dtype_name), t.dtype().name());
                assert_eq!(&ct.shape[..ct.rank as usize], t.shape());
                assert!(ct.shape[ct.rank as usize..].iter().all(|&d| d == 0));
                assert_eq!(ct.element_count, t.element_count());
                assert_eq!(
                    (ct.byte_offset, ct.offset, ct.byte_length),
                    (t.byte_offset(), t.absolute_offset() as u64, t.byte_len() as u64)
                );
                assert_eq!(ct.data, t.bytes().as_ptr());
                assert_eq!(ct.quant.scheme, t.quant().map_or(0, |q| q.scheme));
                assert_eq!(ct.quant.scale_index, t.quant().map_or(KILN_NO_INDEX, |q| q.scale.index() as u32));
                let mut idx = usize::MAX;
                let cname = std::ffi::CString::new(name).unwrap();
                assert_eq!(unsafe { kiln_find(&d, cname.as_ptr(), &mut idx) }, 0);
                assert_eq!(idx, t.index());
                idx = usize::MAX;
                assert_eq!(unsafe { kiln_find_n(&d, name.as_ptr().cast(), name.len(), &mut idx) }, 0);
                assert_eq!(idx, t.index());
                // f32 copies and views.
                let mut n = 0usize;
                let mut out = vec![0f32; t.element_count() as usize];
                let rc = unsafe { kiln_tensor_copy_f32(&d, t.index(), out.as_mut_ptr(), out.len(), &mut n) };
                let mut want_out = vec![0f32; out.len()];
                match t.copy_to(&mut want_out) {
                    Ok(k) => {
                        assert_eq!((rc, n), (0, k));
                        assert_eq!(out, want_out);
                        let mut vn = 0;
                        let p = unsafe { kiln_tensor_view_f32(&d, t.index(), &mut vn) };
                        match t.as_slice::<f32>() {
                            Some(s) => assert_eq!((p, vn), (s.as_ptr(), s.len())),
                            None => assert_eq!((p, vn), (null(), 0)),
                        }
                        // Asking for the size.
                        let rc = unsafe { kiln_tensor_copy_f32(&d, t.index(), null_mut(), 0, &mut n) };
                        assert_eq!((rc, n), (KILN_ERR_BUFFER_TOO_SMALL, k));
                    }
                    Err(_) => assert_eq!((rc, n), (KILN_ERR_ELEMENT_TYPE, 0)),
                }
            }
            let missing = c"no-such-tensor";
            assert_eq!(unsafe { kiln_find(&d, missing.as_ptr(), null_mut()) }, KILN_ERR_NOT_FOUND);
            let bad = [0xffu8, 0xfe];
            assert_eq!(unsafe { kiln_find_n(&d, bad.as_ptr().cast(), 2, null_mut()) }, KILN_ERR_NOT_FOUND);
            // Model metadata: the padding key is hidden.
            if info.is_model {
                assert_eq!(unsafe { kiln_metadata_count(&d) }, 3);
                let mut val = kiln_str { ptr: null(), len: 0 };
                assert_eq!(unsafe { kiln_metadata_get(&d, c"task".as_ptr(), &mut val) }, 0);
                assert_eq!(unsafe { std::slice::from_raw_parts(val.ptr.cast::<u8>(), val.len) }, b"digits");
                assert_eq!(
                    unsafe { kiln_metadata_get(&d, c"kiln.convert.pad".as_ptr(), &mut val) },
                    KILN_ERR_NOT_FOUND
                );
                let (mut k, mut v) = (val, val);
                assert_eq!(unsafe { kiln_metadata_at(&d, 0, &mut k, &mut v) }, 0);
                assert_eq!(unsafe { std::slice::from_raw_parts(k.ptr.cast::<u8>(), k.len) }, b"author");
                assert_eq!(unsafe { kiln_metadata_at(&d, 3, &mut k, &mut v) }, KILN_ERR_NOT_FOUND);
            } else {
                assert_eq!(unsafe { kiln_metadata_count(&d) }, 0);
            }
        }
    }
}

/// MXFP4 dequantization: e2m1 code times its block's e8m0 scale, per row
/// (axis 1, group 32), as firmware-demo computes it element by element.
#[test]
fn dequantize_mxfp4_matches_the_formula() {
    let buf = example();
    let dir = Directory::parse(&buf).unwrap();
    let (_, d) = c_parse(&buf, None);
    let q = dir.find("fc1.weight.mxfp4").unwrap();
    let quant = q.quant().unwrap();
    let (rows, cols) = (q.shape()[0] as usize, q.shape()[1] as usize);
    let group = quant.group_size as usize;
    let mut out = vec![0f32; rows * cols];
    let mut n = 0;
    let rc = unsafe { kiln_tensor_dequantize_f32(&d, q.index(), out.as_mut_ptr(), out.len(), &mut n) };
    assert_eq!((rc, n), (0, rows * cols));
    let scales = quant.scale.bytes();
    let groups = cols.div_ceil(group);
    let mut worst = 0f32;
    let mut w = vec![0f32; rows * cols];
    dir.find("fc1.weight").unwrap().copy_to(&mut w).unwrap();
    for r in 0..rows {
        for c in 0..cols {
            let code = kiln_nostd::dequant::mx::nibble(q.bytes(), r * cols + c).unwrap();
            let want = kiln_nostd::dequant::mx::e2m1_to_f32(code)
                * kiln_nostd::dequant::mx::e8m0_to_f32(scales[r * groups + c / group]);
            assert_eq!(out[r * cols + c].to_bits(), want.to_bits(), "({r}, {c})");
            worst = worst.max((w[r * cols + c] - out[r * cols + c]).abs());
        }
    }
    // spec/examples/README.md: largest |w - dequant(w)| over fc1.
    assert!((worst - 0.24784).abs() < 1e-5, "{worst}");
    // Unquantized tensors are converted only; the f32 weights come back exactly.
    let mut again = vec![0f32; rows * cols];
    let fc1 = dir.find("fc1.weight").unwrap().index();
    assert_eq!(unsafe { kiln_tensor_dequantize_f32(&d, fc1, again.as_mut_ptr(), again.len(), &mut n) }, 0);
    assert_eq!(again, w);
    let mut small = [0f32; 3];
    assert_eq!(
        unsafe { kiln_tensor_dequantize_f32(&d, q.index(), small.as_mut_ptr(), 3, &mut n) },
        KILN_ERR_BUFFER_TOO_SMALL
    );
    assert_eq!(n, rows * cols);
}

/// Axis-0 groups, a scheme-2 outer scale, integer elements and f16 scales
/// through `kiln_tensor_dequantize_f32`, against a direct computation.
#[test]
fn dequantize_general_layouts() {
    use kiln_nostd::{
        writer::{QuantSpec, TensorRef},
        DType, Writer,
    };
    // q: i4 [5, 3] along axis 0 in groups of 2 -> 3 x 3 f16 scales; outer 0.5.
    let mut nibbles = [0u8; 8];
    for i in 0..15 {
        let v = ((i as i8 % 16) - 8) as u8 & 0xF;
        nibbles[i / 2] |= v << (4 * (i % 2));
    }
    let scale_vals: Vec<u16> = (0..9).map(|k| kiln_nostd_f16(1.0 + k as f32)).collect();
    let scale_bytes: Vec<u8> = scale_vals.iter().flat_map(|s| s.to_le_bytes()).collect();
    let outer = 0.5f32.to_le_bytes();
    let specs = [
        TensorSpec::new(DType::I4, &[5, 3], &nibbles).named("q").quantized(QuantSpec::ScalesOuter {
            axis: 0,
            group_size: 2,
            scale: TensorRef::Name("s"),
            outer: TensorRef::Name("o"),
        }),
        TensorSpec::new(DType::F16, &[3, 3], &scale_bytes).named("s"),
        TensorSpec::new(DType::F32, &[1], &outer).named("o"),
    ];
    let mut block = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    Writer::new().write(&specs, &mut block).unwrap();
    let (v, d) = c_parse(&block, None);
    assert_eq!(v, Verdict::ok());
    let mut out = [0f32; 15];
    let mut n = 0;
    assert_eq!(unsafe { kiln_tensor_dequantize_f32(&d, 0, out.as_mut_ptr(), 15, &mut n) }, 0);
    for r in 0..5 {
        for c in 0..3 {
            let i = r * 3 + c;
            let x = ((i as i8 % 16) - 8) as f32;
            let s = 1.0 + ((r / 2) * 3 + c) as f32;
            assert_eq!(out[i], x * s * 0.5, "({r}, {c})");
        }
    }
    // The scale tensor itself (f16) converts exactly.
    let mut s = [0f32; 9];
    assert_eq!(unsafe { kiln_tensor_dequantize_f32(&d, 1, s.as_mut_ptr(), 9, &mut n) }, 0);
    assert_eq!(s.to_vec(), (0..9).map(|k| 1.0 + k as f32).collect::<Vec<_>>());
}

/// f16 bits of a small integer-valued f32 (exact).
fn kiln_nostd_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    (((bits >> 16) & 0x8000) | ((exp as u32) << 10) | ((bits >> 13) & 0x3ff)) as u16
}

#[test]
fn the_incremental_validator_shows_the_table_before_the_payload() {
    let buf = example();
    let mut prefix = vec![0u8; 4096];
    let mut v = kiln_incremental { opaque: [0; KILN_INCREMENTAL_WORDS] };
    let mut needed = 0;
    assert_eq!(unsafe { kiln_prefix_len(buf.as_ptr(), 64, &mut needed, null_mut()) }, 0);
    assert_eq!(needed, Incremental::prefix_len(&buf[..64], &kiln_nostd::Limits::DEFAULT).unwrap().unwrap() as u64);
    assert_eq!(unsafe { kiln_incremental_init(&mut v, prefix.as_mut_ptr(), needed as usize, null()) }, 0);
    let mut d = new_dir();
    assert_eq!(unsafe { kiln_incremental_directory(&v, &mut d) }, KILN_ERR_NOT_READY);
    let mut saw = false;
    let mut pos = 0usize;
    while pos < buf.len() {
        let need = unsafe { kiln_incremental_next_needed(&v) };
        if need > pos as u64 && need != u64::MAX {
            let mut skipped = 0;
            assert_eq!(unsafe { kiln_incremental_skip(&mut v, need - pos as u64, &mut skipped, null_mut()) }, 0);
            pos += skipped as usize;
            continue;
        }
        let end = (pos + 256).min(buf.len());
        let mut p = 0;
        assert_eq!(unsafe { kiln_incremental_feed(&mut v, buf[pos..end].as_ptr(), end - pos, &mut p, null_mut()) }, 0);
        if p == KILN_PROGRESS_DIRECTORY {
            saw = true;
            assert_eq!(unsafe { kiln_incremental_directory(&v, &mut d) }, 0);
            assert_eq!(unsafe { kiln_count(&d) }, 8);
            let mut idx = 0;
            assert_eq!(unsafe { kiln_find(&d, c"samples.y".as_ptr(), &mut idx) }, 0);
            let mut t = std::mem::MaybeUninit::<kiln_tensor>::uninit();
            assert_eq!(unsafe { kiln_tensor_at(&d, idx, t.as_mut_ptr()) }, 0);
            assert!(unsafe { t.assume_init() }.data.is_null());
            let mut out = [0u8; 32];
            assert_eq!(unsafe { kiln_tensor_copy_u8(&d, idx, out.as_mut_ptr(), 32, null_mut()) }, KILN_ERR_HANDLE);
        }
        pos = end;
    }
    assert!(saw);
    assert_eq!(unsafe { kiln_incremental_consumed(&v) }, buf.len() as u64);
    let mut s = kiln_summary { block_len: 0, payload_base: 0, tensor_count: 0 };
    assert_eq!(unsafe { kiln_incremental_finish(&mut v, &mut s, null_mut()) }, 0);
    assert_eq!((s.block_len, s.tensor_count), (buf.len() as u64, 8));
    // A prefix buffer that is too small: LIMIT once the header is in.
    let mut tiny = [0u8; 128];
    assert_eq!(unsafe { kiln_incremental_init(&mut v, tiny.as_mut_ptr(), 128, null()) }, 0);
    let mut e = new_err();
    let rc = unsafe { kiln_incremental_feed(&mut v, buf.as_ptr(), 4096, null_mut(), &mut e) };
    assert_eq!((rc, cstr(e.rule)), (KILN_LIMIT, "PrefixBufferTooSmall"));
}

#[test]
fn ranged_reading_through_the_callback() {
    let buf = example();
    let dir = Directory::parse(&buf).unwrap();
    let src = source_of(&buf);
    let mut prefix = vec![0u8; 2048];
    let mut d = new_dir();
    let mut e = new_err();
    assert_eq!(unsafe { kiln_source_open(&src, prefix.as_mut_ptr(), prefix.len(), &mut d, &mut e) }, 0);
    let mut info = std::mem::MaybeUninit::<kiln_dir_info>::uninit();
    assert_eq!(unsafe { kiln_dir_get_info(&d, info.as_mut_ptr()) }, 0);
    assert!(!unsafe { info.assume_init() }.has_payload);
    for t in dir.iter() {
        let mut out = vec![0u8; t.byte_len()];
        let mut n = 0;
        assert_eq!(
            unsafe { kiln_source_read_tensor(&src, &d, t.index(), out.as_mut_ptr(), out.len(), &mut n, null_mut()) },
            0
        );
        assert_eq!(&out[..n], t.bytes());
    }
    let w = dir.find("fc1.weight").unwrap();
    let mut rows = [0u8; 2 * 64 * 4];
    let mut n = 0;
    let rc =
        unsafe { kiln_source_read_rows(&src, &d, w.index(), 3, 5, rows.as_mut_ptr(), rows.len(), &mut n, null_mut()) };
    assert_eq!((rc, n), (0, rows.len()));
    assert_eq!(&rows[..], &w.bytes()[3 * 256..5 * 256]);
    let rc =
        unsafe { kiln_source_read_rows(&src, &d, w.index(), 5, 3, rows.as_mut_ptr(), rows.len(), &mut n, null_mut()) };
    assert_eq!(rc, KILN_ERR_ROWS);
    // Too small a prefix buffer; a failing callback.
    let mut small = [0u8; 100];
    let rc = unsafe { kiln_source_open(&src, small.as_mut_ptr(), small.len(), &mut d, &mut e) };
    assert_eq!((rc, e.needed), (KILN_ERR_BUFFER_TOO_SMALL, dir.payload_start() as u64));
    assert_eq!(unsafe { kiln_count(&d) }, 0, "a failed open invalidates the handle");
    let short = buf[..100].to_vec();
    let lying = kiln_source { len: buf.len() as u64, ..source_of(&short) };
    let rc = unsafe { kiln_source_open(&lying, prefix.as_mut_ptr(), prefix.len(), &mut d, &mut e) };
    assert_eq!((rc, e.read_status), (KILN_ERR_READ, 9));
    let none = kiln_source { read_at: None, ctx: null_mut(), len: 0 };
    assert_eq!(unsafe { kiln_source_open(&none, prefix.as_mut_ptr(), prefix.len(), &mut d, &mut e) }, KILN_ERR_NULL);
}

/// NULL pointers, misaligned and overflowing buffers, invalid handles:
/// error codes, never a crash.
#[test]
fn misuse_is_an_error_code() {
    let buf = example();
    let mut e = new_err();
    assert_eq!(unsafe { kiln_validate(null(), 0, &mut e) }, KILN_EOF);
    assert_eq!((e.offset, cstr(e.rule)), (0, "HeaderTruncated"));
    assert_eq!(unsafe { kiln_validate(null(), 10, &mut e) }, KILN_ERR_NULL);
    assert_eq!(cstr(e.rule), "");
    assert_eq!(unsafe { kiln_validate(buf.as_ptr(), usize::MAX, &mut e) }, KILN_ERR_ARGUMENT);
    assert_eq!(unsafe { kiln_validate(buf.as_ptr(), isize::MAX as usize + 1, null_mut()) }, KILN_ERR_ARGUMENT);
    assert_eq!(unsafe { kiln_validate(buf.as_ptr(), buf.len(), null_mut()) }, 0);
    assert_eq!(unsafe { kiln_parse(buf.as_ptr(), buf.len(), null_mut(), &mut e) }, KILN_ERR_NULL);
    let zeroed = new_dir();
    assert_eq!(unsafe { kiln_count(&zeroed) }, 0);
    assert_eq!(unsafe { kiln_count(null()) }, 0);
    assert_eq!(unsafe { kiln_tensor_at(&zeroed, 0, null_mut()) }, KILN_ERR_HANDLE);
    assert_eq!(unsafe { kiln_find(&zeroed, c"x".as_ptr(), null_mut()) }, KILN_ERR_HANDLE);
    let (_, d) = c_parse(&buf, None);
    assert_eq!(unsafe { kiln_tensor_at(&d, 0, null_mut()) }, KILN_ERR_NULL);
    assert_eq!(unsafe { kiln_tensor_at(&d, 8, &mut std::mem::zeroed()) }, KILN_ERR_NOT_FOUND);
    assert_eq!(unsafe { kiln_find(&d, null(), null_mut()) }, KILN_ERR_NULL);
    assert_eq!(unsafe { kiln_dir_get_info(&d, null_mut()) }, KILN_ERR_NULL);
    // A misaligned f32 output buffer.
    let mut words = [0u32; 2049];
    let misaligned = unsafe { (words.as_mut_ptr() as *mut u8).add(1) } as *mut f32;
    assert_eq!(unsafe { kiln_tensor_copy_f32(&d, 0, misaligned, 2048, null_mut()) }, KILN_ERR_ARGUMENT);
    // The wrong element type, a view that does not apply.
    let mut n = 7;
    assert_eq!(
        unsafe { kiln_tensor_copy_i32(&d, 0, words.as_mut_ptr() as *mut i32, 2048, &mut n) },
        KILN_ERR_ELEMENT_TYPE
    );
    assert_eq!(n, 0);
    assert!(unsafe { kiln_tensor_view_u16(&d, 0, &mut n) }.is_null());
    assert_eq!(n, 0);
    // A failed parse invalidates a handle that was valid.
    let (_, mut d2) = c_parse(&buf, None);
    assert_eq!(unsafe { kiln_parse(buf.as_ptr(), 10, &mut d2, null_mut()) }, KILN_EOF);
    assert_eq!(unsafe { kiln_count(&d2) }, 0);
    // A scratch pointer that is not 4-byte aligned.
    let opts =
        kiln_options { scratch: misaligned as *mut u32, scratch_len: 8, count_cap: 0, byte_cap: 0, hash_seed: 0 };
    assert_eq!(unsafe { kiln_parse_ex(buf.as_ptr(), buf.len(), &opts, &mut d2, null_mut()) }, KILN_ERR_ARGUMENT);
    // Caps apply: a count cap of 4 refuses the 8-tensor example.
    let opts = kiln_options { scratch: null_mut(), scratch_len: 0, count_cap: 4, byte_cap: 0, hash_seed: 0 };
    assert_eq!(unsafe { kiln_parse_ex(buf.as_ptr(), buf.len(), &opts, &mut d2, &mut e) }, KILN_LIMIT);
    assert_eq!(cstr(e.rule), "TensorCountCap");
    // Incremental and source misuse.
    assert_eq!(unsafe { kiln_incremental_init(null_mut(), null_mut(), 0, null()) }, KILN_ERR_NULL);
    let mut v = kiln_incremental { opaque: [0; KILN_INCREMENTAL_WORDS] };
    assert_eq!(unsafe { kiln_incremental_feed(&mut v, buf.as_ptr(), 1, null_mut(), null_mut()) }, KILN_ERR_HANDLE);
    assert_eq!(unsafe { kiln_incremental_next_needed(&v) }, u64::MAX);
    assert_eq!(unsafe { kiln_source_verify(null(), null_mut(), 0, null_mut(), 0, null_mut()) }, KILN_ERR_NULL);
    // Names of codes.
    for (code, name) in [
        (0, "OK"),
        (1, "FRAME"),
        (2, "LIMIT"),
        (3, "EOF"),
        (4, "TYPE"),
        (5, "UTF8"),
        (6, "TRAILING"),
        (7, "SCHEMA"),
        (-1, "ERR_NULL"),
        (-6, "ERR_BUFFER_TOO_SMALL"),
        (42, "UNKNOWN"),
    ] {
        assert_eq!(cstr(kiln_code_name(code)), name);
    }
    assert_eq!(kiln_scratch_len(8), kiln_nostd::directory::scratch_len(8));
    assert_eq!(KILN_DEFAULT_CAP, kiln_nostd::directory::DEFAULT_CAP);
}

/// The handles' opaque storage, for the record (the crate asserts at
/// compile time that it is large enough).
#[test]
fn handle_sizes() {
    println!(
        "kiln_dir: {} bytes, kiln_incremental: {} bytes",
        std::mem::size_of::<kiln_dir>(),
        std::mem::size_of::<kiln_incremental>()
    );
}

/// Writes every input and its Rust verdict for the C test program, when
/// `KILN_C_VECTORS` names a file: one line per input,
/// `name<TAB>hex<TAB>code<TAB>offset<TAB>rule<TAB>expect<TAB>is_model` (`-` when none).
#[test]
fn write_vectors_for_the_c_test() {
    let Some(path) = std::env::var_os("KILN_C_VECTORS") else { return };
    let mut text = String::new();
    for (name, bytes, expect) in inputs() {
        let v = rust_verdict(&bytes);
        let d = rust_verified_verdict(&bytes);
        let drule = if d.rule.is_empty() { "-" } else { &d.rule };
        let hex = hex::encode(&bytes);
        let rule = if v.rule.is_empty() { "-" } else { &v.rule };
        let expect = expect.as_deref().unwrap_or("-");
        let hex = if hex.is_empty() { "-" } else { &hex };
        let is_model = u8::from(model::is_model_file(&bytes));
        text.push_str(&format!(
            "{name}\t{hex}\t{}\t{}\t{rule}\t{expect}\t{is_model}\t{}\t{}\t{drule}\n",
            v.code, v.offset, d.code, d.offset
        ));
    }
    std::fs::write(path, text).unwrap();
}
