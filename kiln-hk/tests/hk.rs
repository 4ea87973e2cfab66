//! The HK container reader (`kiln_hk`): valid files covering every
//! storage-type family, and hostile ones, built by a small writer below
//! (independent of the reader) and by spec/reference/hk_writer.py; and the
//! small example `spec/examples/small/f32-vector-named.hk`.

use kiln_hk::{
    tag, ErrorCode, Family, HkFile, MetaValue, Rule, StorageType, FLAG_LITTLE_ENDIAN, FLAG_TILE_ALIGNED, HK_MAGIC,
};
use proptest::prelude::*;

// ---------------------------------------------------------------- writer

#[derive(Clone)]
struct T {
    name: Vec<u8>,
    storage: u8,
    shape: Vec<u64>,
    data: Vec<u8>,
    scales: Option<Vec<u8>>,
    residual: Option<Vec<u8>>,
    reference: Option<Ref>,
    tile: u8,
    sparsity: u8,
}

#[derive(Clone, Copy)]
enum Ref {
    Null,
    Shared(usize),
}

#[derive(Default)]
struct Hk {
    alignment: u64,
    meta: Vec<(Vec<u8>, u8, Vec<u8>)>,
    tensors: Vec<T>,
}

/// Where things landed in a built file, for patching hostile variants.
#[derive(Debug)]
struct Layout {
    meta_at: usize,
    toc_at: usize,
    entries: Vec<usize>,
    data_at: usize,
}

const AT_FLAGS: usize = 0x08;
const AT_TENSOR_COUNT: usize = 0x10;
const AT_KV_COUNT: usize = 0x18;
const AT_META_OFF: usize = 0x20;
const AT_META_SIZE: usize = 0x28;
const AT_TOC_OFF: usize = 0x30;
const AT_TOC_SIZE: usize = 0x38;
const AT_DATA_OFF: usize = 0x40;
const AT_APPENDIX: usize = 0x48;
const AT_SPLIT_COUNT: usize = 0x58;

fn align(n: u64, a: u64) -> u64 {
    n.div_ceil(a) * a
}

fn st(s: StorageType) -> u8 {
    s.code()
}

impl Hk {
    fn new() -> Self {
        Hk { alignment: 128, ..Default::default() }
    }

    fn meta(mut self, key: &str, tag: u8, value: &[u8]) -> Self {
        self.meta.push((key.as_bytes().to_vec(), tag, value.to_vec()));
        self
    }

    fn tensor(mut self, name: &str, storage: StorageType, shape: &[u64], data: &[u8]) -> Self {
        self.tensors.push(T {
            name: name.as_bytes().to_vec(),
            storage: st(storage),
            shape: shape.to_vec(),
            data: data.to_vec(),
            scales: None,
            residual: None,
            reference: None,
            tile: 0,
            sparsity: 0,
        });
        self
    }

    fn with_scales(mut self, scales: &[u8], residual: Option<&[u8]>) -> Self {
        let t = self.tensors.last_mut().unwrap();
        t.scales = Some(scales.to_vec());
        t.residual = residual.map(<[u8]>::to_vec);
        self
    }

    fn sparse(mut self, sparsity: u8) -> Self {
        self.tensors.last_mut().unwrap().sparsity = sparsity;
        self
    }

    fn null_ref(self, name: &str, shape: &[u64]) -> Self {
        let mut s = self.tensor(name, StorageType::NullRef, shape, &[]);
        s.tensors.last_mut().unwrap().reference = Some(Ref::Null);
        s
    }

    fn shared_ref(self, name: &str, target: usize) -> Self {
        let shape = self.tensors[target].shape.clone();
        let mut s = self.tensor(name, StorageType::SharedRef, &shape, &[]);
        s.tensors.last_mut().unwrap().reference = Some(Ref::Shared(target));
        s
    }

    fn entry(t: &T, spans: [(u64, u64); 3]) -> Vec<u8> {
        let mut e = Vec::new();
        e.extend((t.name.len() as u16).to_le_bytes());
        e.extend(&t.name);
        e.extend([t.storage, t.tile, t.sparsity, t.shape.len() as u8]);
        for d in &t.shape {
            e.extend(d.to_le_bytes());
        }
        for (o, s) in spans {
            e.extend(o.to_le_bytes());
            e.extend(s.to_le_bytes());
        }
        e.extend(32u16.to_le_bytes());
        e.extend(0.5f32.to_bits().to_le_bytes());
        e
    }

    fn build(&self) -> (Vec<u8>, Layout) {
        let mut meta = Vec::new();
        for (k, tag, v) in &self.meta {
            meta.extend((k.len() as u16).to_le_bytes());
            meta.extend(k);
            meta.push(*tag);
            meta.extend((v.len() as u32).to_le_bytes());
            meta.extend(v);
        }
        let zero = [(0, 0); 3];
        let toc_size: usize = self.tensors.iter().map(|t| Self::entry(t, zero).len()).sum();
        let meta_at = 128usize;
        let toc_at = meta_at + meta.len();
        let data_at = align((toc_at + toc_size) as u64, self.alignment);
        let mut pos = data_at;
        let mut payload = Vec::new();
        let mut spans: Vec<[(u64, u64); 3]> = Vec::new();
        for t in &self.tensors {
            match t.reference {
                Some(Ref::Null) => spans.push(zero),
                Some(Ref::Shared(i)) => spans.push(spans[i]),
                None => {
                    // data, residual, scales: the TOC order.
                    let mut s = [(0, 0); 3];
                    for (slot, part) in s.iter_mut().zip([Some(&t.data), t.residual.as_ref(), t.scales.as_ref()]) {
                        let Some(part) = part else { continue };
                        let start = align(pos, self.alignment);
                        payload.resize(payload.len() + (start - pos) as usize, 0);
                        payload.extend(part);
                        pos = start + part.len() as u64;
                        *slot = (start, part.len() as u64);
                    }
                    spans.push(s);
                }
            }
        }
        let mut toc = Vec::new();
        let mut entries = Vec::new();
        for (t, s) in self.tensors.iter().zip(&spans) {
            entries.push(toc_at + toc.len());
            toc.extend(Self::entry(t, *s));
        }
        let mut f = vec![0u8; 128];
        f[0..4].copy_from_slice(b"HKNT");
        f[4..6].copy_from_slice(&1u16.to_le_bytes());
        f[8..12].copy_from_slice(&(1u32 | 1 << 4).to_le_bytes());
        f[12..14].copy_from_slice(&(self.alignment as u16).to_le_bytes());
        put64(&mut f, AT_TENSOR_COUNT, self.tensors.len() as u64);
        put64(&mut f, AT_KV_COUNT, self.meta.len() as u64);
        put64(&mut f, AT_META_OFF, meta_at as u64);
        put64(&mut f, AT_META_SIZE, meta.len() as u64);
        put64(&mut f, AT_TOC_OFF, toc_at as u64);
        put64(&mut f, AT_TOC_SIZE, toc_size as u64);
        put64(&mut f, AT_DATA_OFF, data_at);
        f[AT_SPLIT_COUNT..AT_SPLIT_COUNT + 2].copy_from_slice(&1u16.to_le_bytes());
        f.extend(meta);
        f.extend(toc);
        f.resize(data_at as usize, 0);
        f.extend(payload);
        (f, Layout { meta_at, toc_at, entries, data_at: data_at as usize })
    }
}

fn put64(f: &mut [u8], at: usize, v: u64) {
    f[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn put32(f: &mut [u8], at: usize, v: u32) {
    f[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put16(f: &mut [u8], at: usize, v: u16) {
    f[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn get64(f: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(f[at..at + 8].try_into().unwrap())
}

/// Appends an appendix record; `parent`: Some(hash) or zeros.
fn append(f: &mut Vec<u8>, entry_type: u8, name: &str, target: &str, data: &[u8], parent: [u8; 32]) -> usize {
    f.resize(align(f.len() as u64, 8) as usize, 0);
    let start = f.len();
    f.extend([entry_type, 1]);
    f.extend((name.len() as u16).to_le_bytes());
    f.extend(7u32.to_le_bytes());
    f.extend(1234u64.to_le_bytes());
    f.extend(parent);
    for m in [0.25f32, 0.5, 1.0, 0.0] {
        f.extend(m.to_bits().to_le_bytes());
    }
    f.extend((target.len() as u16).to_le_bytes());
    f.extend([0, 0, 0, 0, 0, 0]);
    f.extend((data.len() as u64).to_le_bytes());
    f.extend(name.as_bytes());
    f.extend(target.as_bytes());
    f.extend(data);
    f.resize(align(f.len() as u64, 8) as usize, 0);
    if get64(f, AT_APPENDIX) == 0 {
        put64(f, AT_APPENDIX, start as u64);
        let flags = u32::from_le_bytes(f[AT_FLAGS..AT_FLAGS + 4].try_into().unwrap());
        put32(f, AT_FLAGS, flags | 2);
    }
    start
}

// ---------------------------------------------------------------- fixtures

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed.wrapping_mul(17)).wrapping_add(7)).collect()
}

/// ggml (elements, bytes) per block of the GGUF-compatible types.
fn ggml_block(s: StorageType) -> Option<(u64, usize)> {
    Some(match s.ggml_type()? {
        2 => (32, 18),
        3 => (32, 20),
        6 => (32, 22),
        7 => (32, 24),
        8 => (32, 34),
        9 => (32, 36),
        10 => (256, 84),
        11 => (256, 110),
        12 => (256, 144),
        13 => (256, 176),
        14 => (256, 210),
        15 => (256, 292),
        16 => (256, 66),
        17 => (256, 74),
        18 => (256, 98),
        19 => (256, 50),
        20 => (32, 18),
        21 => (256, 110),
        22 => (256, 82),
        23 => (256, 136),
        29 => (256, 56),
        34 => (256, 54),
        35 => (256, 66),
        39 => (32, 17),
        40 => (64, 36),
        _ => return None,
    })
}

/// One tensor of every storage type (shared_ref to the first tensor).
fn every_type() -> Hk {
    let mut hk = Hk::new()
        .meta("general.architecture", tag::STRING, b"test")
        .meta("general.count", tag::INT64, &(-5i64).to_le_bytes())
        .meta("general.eps", tag::FLOAT64, &1e-5f64.to_le_bytes())
        .meta("general.flag", tag::BOOL, &[1])
        .meta("general.json", tag::JSON, br#"{"a":[1,2]}"#)
        .meta("general.blob", tag::BYTES, &[0, 0xff, 0x80]);
    for (i, s) in StorageType::ALL.iter().enumerate() {
        let name = format!("t{i:02}.{}", s.name());
        let seed = i as u8;
        hk = match s.family() {
            Family::Dense => {
                let w = s.dense_width().unwrap() as usize;
                let data = if *s == StorageType::Bool { vec![1, 0, 1, 1, 0, 0] } else { pattern(6 * w, seed) };
                hk.tensor(&name, *s, &[2, 3], &data)
            }
            Family::Reference => match s {
                StorageType::NullRef => hk.null_ref(&name, &[4, 4]),
                StorageType::SharedRef => hk.shared_ref(&name, 0),
                _ => hk.tensor(&name, *s, &[2, 2], &pattern(16, seed)),
            },
            Family::DualMode => hk
                .tensor(&name, *s, &[64], &pattern(32, seed))
                .with_scales(&pattern(8, seed.wrapping_add(1)), Some(&pattern(5, seed.wrapping_add(2)))),
            Family::Sparse => hk.tensor(&name, *s, &[16], &pattern(20, seed)).sparse(1),
            _ => {
                let (elems, bytes) = ggml_block(*s).expect("ggml layout");
                hk.tensor(&name, *s, &[2, elems], &pattern(2 * bytes, seed))
            }
        };
    }
    hk
}

fn reject(f: &[u8], rule: Rule, at: usize) {
    match HkFile::parse(f) {
        Ok(_) => panic!("accepted; expected {rule:?} at {at}"),
        Err(e) => {
            assert_eq!((e.rule(), e.offset()), (rule, at), "{e}");
            assert_eq!(e.code(), rule.code());
        }
    }
}

/// Walks everything a caller can reach; must not panic.
fn touch(hk: &HkFile<'_>) -> usize {
    let mut n = 0usize;
    for p in hk.metadata() {
        n += p.key.len() + p.raw.len();
    }
    for t in hk.tensors() {
        n += t.name().len() + t.data().len() + t.shape().len();
        n += t.scales().map_or(0, <[u8]>::len) + t.residual().map_or(0, <[u8]>::len);
        n += usize::from(hk.resolve(&t).is_some());
        let _ = t.element_count();
    }
    for r in hk.appendix() {
        n += r.data.len() + r.name.len() + r.target.len();
    }
    n
}

// ---------------------------------------------------------------- valid files

#[test]
fn every_storage_type_family_reads_back() {
    let hk_def = every_type();
    let (f, _) = hk_def.build();
    let hk = HkFile::parse(&f).unwrap();
    assert_eq!(hk.tensor_count() as usize, StorageType::ALL.len());
    assert_eq!(hk.header().version_major, 1);
    assert_eq!(hk.header().alignment, 128);

    let entries: Vec<_> = hk.tensors().collect();
    assert_eq!(entries.len(), StorageType::ALL.len());
    for (e, (def, s)) in entries.iter().zip(hk_def.tensors.iter().zip(StorageType::ALL)) {
        assert_eq!(e.storage(), *s);
        assert_eq!(e.name().as_bytes(), def.name.as_slice());
        assert_eq!(e.shape(), def.shape.as_slice());
        assert_eq!(e.block_size(), 32);
        assert_eq!(e.sparsity_ratio(), 0.5);
        match s {
            StorageType::NullRef => {
                assert!(e.data().is_empty());
                assert_eq!(e.data_span().offset, 0);
            }
            StorageType::SharedRef => {
                let target = hk.resolve(e).unwrap();
                assert_eq!(target.index(), 0);
                assert_eq!(e.data(), entries[0].data());
                assert_eq!(e.data().as_ptr(), entries[0].data().as_ptr(), "the same bytes, not a copy");
            }
            _ => {
                assert_eq!(e.data(), def.data.as_slice(), "{}", s.name());
                assert_eq!(e.scales(), def.scales.as_deref());
                assert_eq!(e.residual(), def.residual.as_deref());
                assert_eq!(e.data_span().offset % 128, 0, "aligned payload");
                assert_eq!(hk.resolve(e).unwrap().index(), e.index());
            }
        }
    }
    assert_eq!(hk.find("t00.f32").map(|e| e.index()), Some(0));
    assert!(hk.find("missing").is_none());
    assert_eq!(hk.appendix().count(), 0);
}

#[test]
fn metadata_values_of_every_type() {
    let (f, _) = every_type().build();
    let hk = HkFile::parse(&f).unwrap();
    let pairs: Vec<_> = hk.metadata().collect();
    assert_eq!(pairs.len(), 6);
    assert_eq!(pairs[0].value, MetaValue::String("test"));
    assert_eq!(pairs[1].value, MetaValue::Int64(-5));
    assert_eq!(pairs[2].value, MetaValue::Float64(1e-5));
    assert_eq!(pairs[3].value, MetaValue::Bool(true));
    assert_eq!(pairs[4].value, MetaValue::Json(r#"{"a":[1,2]}"#));
    assert_eq!(pairs[5].value, MetaValue::Bytes(&[0, 0xff, 0x80]));
    assert_eq!(pairs[0].offset, 128);
    assert_eq!(hk.meta("general.flag"), Some(MetaValue::Bool(true)));
    let tags: Vec<u8> = pairs.iter().map(|p| p.value.tag()).collect();
    assert_eq!(tags, [1, 2, 3, 4, 5, 6]);
}

#[test]
fn empty_file_and_page_alignment() {
    let (f, _) = Hk::new().build();
    let hk = HkFile::parse(&f).unwrap();
    assert_eq!((hk.tensors().count(), hk.metadata().count()), (0, 0));
    let mut hk = every_type();
    hk.alignment = 4096;
    let (f, _) = hk.build();
    let parsed = HkFile::parse(&f).unwrap();
    assert!(parsed.tensors().all(|e| e.data_span().offset % 4096 == 0));
}

#[test]
fn appendix_records_and_lineage() {
    let (mut f, _) = every_type().build();
    append(&mut f, 1, "adapter", "t00.f32", b"first", [0xAA; 32]);
    let first = (b"adapter".to_vec(), b"t00.f32".to_vec(), b"first".to_vec());
    let full = sha256(&[&first.0[..], &first.1, &first.2].concat());
    append(&mut f, 2, "patch", "", b"second!", full);
    let legacy = sha256(b"second!");
    let third = append(&mut f, 4, "eval", "x", b"", legacy);
    let hk = HkFile::parse(&f).unwrap();
    let recs: Vec<_> = hk.appendix().collect();
    assert_eq!(recs.len(), 3);
    assert_eq!(
        (recs[0].entry_type_name(), recs[0].name, recs[0].target, recs[0].data),
        (Some("lora_adapter"), "adapter", "t00.f32", &b"first"[..])
    );
    assert_eq!(recs[1].parent_hash, full);
    assert_eq!(recs[2].offset, third);
    assert_eq!(recs[0].metrics, [0.25, 0.5, 1.0, 0.0]);
    assert_eq!((recs[0].generation, recs[0].timestamp), (7, 1234));
    assert!(hk.header().has_appendix());
    lineage_checks(&f, recs[1].parent_hash_offset());
}

#[cfg(feature = "sha2")]
fn lineage_checks(f: &[u8], second_parent_at: usize) {
    use kiln_hk::Lineage;
    let hk = HkFile::parse(f).unwrap();
    assert_eq!(hk.verify_lineage(), Ok(Lineage { records: 3, full: 1, payload_only: 1 }));
    let mut bad = f.to_vec();
    bad[second_parent_at] ^= 1;
    let e = HkFile::parse(&bad).unwrap().verify_lineage().unwrap_err();
    assert_eq!((e.rule(), e.offset(), e.code()), (Rule::HkLineageHash, second_parent_at, ErrorCode::Type));
    // Changing the first record's data breaks the link to it.
    let hk = HkFile::parse(f).unwrap();
    let first = hk.appendix().next().unwrap();
    let data_at = first.data.as_ptr() as usize - f.as_ptr() as usize;
    let mut bad = f.to_vec();
    bad[data_at] ^= 0x20;
    assert_eq!(HkFile::parse(&bad).unwrap().verify_lineage().unwrap_err().rule(), Rule::HkLineageHash);
}

#[cfg(not(feature = "sha2"))]
fn lineage_checks(_: &[u8], _: usize) {
    eprintln!("NOTE: built without the `sha2` feature; lineage checks skipped");
}

/// SHA-256 in the test, independent of the `sha2` crate (FIPS 180-4).
fn sha256(msg: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
        0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
        0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
        0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
        0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
        0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
        0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] =
        [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut m = msg.to_vec();
    m.push(0x80);
    while m.len() % 64 != 56 {
        m.push(0);
    }
    m.extend(((msg.len() as u64) * 8).to_be_bytes());
    for chunk in m.chunks(64) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes(chunk[i * 4..i * 4 + 4].try_into().unwrap());
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7].wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [t1.wrapping_add(t2), v[0], v[1], v[2], v[3].wrapping_add(t1), v[4], v[5], v[6]];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    let mut out = [0u8; 32];
    for (o, x) in out.chunks_mut(4).zip(h) {
        o.copy_from_slice(&x.to_be_bytes());
    }
    out
}

#[test]
fn sha256_self_check() {
    assert_eq!(hex::encode(sha256(b"abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/// A file from the Python writer (spec/reference/hk_writer.py), a second,
/// independent implementation of the format.
#[test]
#[cfg_attr(miri, ignore = "spawns python3, which Miri cannot run")]
fn python_writer_sample() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = std::env::temp_dir().join(format!("kiln-hk-sample-{}.hk", std::process::id()));
    let status = std::process::Command::new("python3")
        .arg(root.join("spec/reference/hk_writer.py"))
        .arg("sample")
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => {
            eprintln!("\n!!! SKIPPED python_writer_sample: python3 spec/reference/hk_writer.py failed: {other:?}\n");
            return;
        }
    }
    let f = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let hk = HkFile::parse(&f).unwrap();
    assert_eq!(hk.meta("general.architecture"), Some(MetaValue::String("mlp")));
    assert_eq!(hk.meta("general.name"), Some(MetaValue::String("hk sample ✓")));
    assert_eq!(hk.meta("mlp.block_count"), Some(MetaValue::Int64(2)));
    assert_eq!(hk.meta("mlp.eps"), Some(MetaValue::Float64(1e-5)));
    assert_eq!(hk.meta("mlp.tied"), Some(MetaValue::Bool(true)));
    assert_eq!(hk.meta("tokenizer.config"), Some(MetaValue::Json(r#"{"bos": 1, "eos": 2}"#)));
    assert_eq!(hk.meta("tokenizer.blob"), Some(MetaValue::Bytes(&[0, 1, 0xfe, 0xff])));
    let families: std::collections::BTreeSet<String> =
        hk.tensors().map(|t| format!("{:?}", t.storage().family())).collect();
    assert_eq!(families.len(), 8, "every family: {families:?}");
    let embed = hk.find("embed.weight").unwrap();
    let mut vals = [0f32; 32];
    for (v, c) in vals.iter_mut().zip(embed.data().chunks_exact(4)) {
        *v = f32::from_le_bytes(c.try_into().unwrap());
    }
    assert_eq!(vals[9], 9.0 / 8.0);
    let head = hk.find("lm_head.weight").unwrap();
    assert_eq!(head.storage(), StorageType::SharedRef);
    assert_eq!(hk.resolve(&head).unwrap().name(), "embed.weight");
    assert!(hk.find("pruned.weight").unwrap().data().is_empty());
    let dq4 = hk.find("dq.dq4").unwrap();
    assert_eq!((dq4.scales().map(<[u8]>::len), dq4.residual().map(<[u8]>::len)), (Some(8), Some(5)));
    assert_eq!(hk.find("tiled.weight").unwrap().tile_layout(), 2);
    let recs: Vec<_> = hk.appendix().collect();
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[2].entry_type_name(), Some("code_eval"));
    #[cfg(feature = "sha2")]
    assert_eq!(hk.verify_lineage().map(|l| (l.records, l.full, l.payload_only)), Ok((3, 1, 1)));
}

// ---------------------------------------------------------------- hostile files

fn small() -> (Vec<u8>, Layout) {
    Hk::new()
        .meta("k", tag::STRING, b"v")
        .tensor("w", StorageType::F32, &[2], &[0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0])
        .tensor("q", StorageType::Q4_0, &[32], &pattern(18, 3))
        .with_scales(&[1, 2], None)
        .build()
}

#[test]
fn header_faults() {
    let (f, _) = small();
    assert!(HkFile::parse(&f).is_ok());
    reject(&f[..3], Rule::HkHeaderTruncated, 3);
    reject(&f[..100], Rule::HkHeaderTruncated, 100);
    reject(&[], Rule::HkHeaderTruncated, 0);
    let mut b = f.clone();
    b[0] = b'G';
    reject(&b, Rule::HkMagic, 0);
    reject(b"GGUF", Rule::HkMagic, 0);
    let mut b = f.clone();
    put16(&mut b, 4, 2);
    reject(&b, Rule::HkVersion, 4);
    let mut b = f.clone();
    put16(&mut b, 4, 0);
    reject(&b, Rule::HkVersion, 4);
    let mut b = f.clone();
    put16(&mut b, 6, 9); // any minor version is fine
    assert!(HkFile::parse(&b).is_ok());
    let mut b = f.clone();
    put32(&mut b, AT_FLAGS, 1 << 4); // little-endian bit clear
    reject(&b, Rule::HkFlags, AT_FLAGS);
    let mut b = f.clone();
    put32(&mut b, AT_FLAGS, 1 | 1 << 9);
    reject(&b, Rule::HkFlags, AT_FLAGS);
    let mut b = f.clone();
    put32(&mut b, AT_FLAGS, 1 | 2); // HAS_APPENDIX with appendix_offset 0
    reject(&b, Rule::HkAppendixFlag, AT_FLAGS);
    let mut b = f.clone();
    b[0x7F] = 1;
    reject(&b, Rule::HkReserved, 0x7F);
    let mut b = f.clone();
    put16(&mut b, AT_SPLIT_COUNT, 0);
    reject(&b, Rule::HkSplit, 0x0E);
    let mut b = f.clone();
    put16(&mut b, 0x0E, 1); // split_index 1 of 1
    reject(&b, Rule::HkSplit, 0x0E);
}

#[test]
fn section_faults() {
    let (f, l) = small();
    let mut b = f.clone();
    put64(&mut b, AT_META_OFF, u64::MAX - 3);
    reject(&b, Rule::HkSectionOverflow, AT_META_OFF);
    let mut b = f.clone();
    put64(&mut b, AT_META_OFF, f.len() as u64);
    reject(&b, Rule::HkSectionPastEnd, AT_META_OFF);
    let mut b = f.clone();
    put64(&mut b, AT_META_OFF, 64);
    reject(&b, Rule::HkSectionPlacement, AT_META_OFF);
    let mut b = f.clone();
    put64(&mut b, AT_TOC_OFF, u64::MAX);
    reject(&b, Rule::HkSectionOverflow, AT_TOC_OFF);
    let mut b = f.clone();
    put64(&mut b, AT_TOC_SIZE, f.len() as u64);
    reject(&b, Rule::HkSectionPastEnd, AT_TOC_OFF);
    let mut b = f.clone();
    put64(&mut b, AT_DATA_OFF, l.toc_at as u64 + 4); // TOC runs into the tensor data
    reject(&b, Rule::HkSectionPlacement, AT_TOC_OFF);
    // Counts are checked against the section before any entry is read.
    let mut b = f.clone();
    put64(&mut b, AT_TENSOR_COUNT, u64::MAX);
    reject(&b, Rule::HkCountOverflow, AT_TENSOR_COUNT);
    let mut b = f.clone();
    put64(&mut b, AT_TENSOR_COUNT, 1 << 40);
    reject(&b, Rule::HkCountPastSection, AT_TENSOR_COUNT);
    let mut b = f.clone();
    put64(&mut b, AT_KV_COUNT, u64::MAX / 2);
    reject(&b, Rule::HkCountOverflow, AT_KV_COUNT);
    let mut b = f.clone();
    put64(&mut b, AT_KV_COUNT, 2);
    reject(&b, Rule::HkCountPastSection, AT_KV_COUNT);
    // A count that fits the minimum but not the real entries.
    let (f3, l3) = Hk::new()
        .tensor(&"a".repeat(100), StorageType::Uint8, &[1], &[1])
        .tensor(&"b".repeat(100), StorageType::Uint8, &[1], &[2])
        .build();
    let toc3 = get64(&f3, AT_TOC_SIZE);
    assert!(3 * 60 <= toc3);
    let mut b = f3.clone();
    put64(&mut b, AT_TENSOR_COUNT, 3);
    reject(&b, Rule::HkTocTruncated, l3.toc_at + toc3 as usize);
    let toc_size = get64(&f, AT_TOC_SIZE);
    // A TOC one byte short: the last entry is truncated.
    let mut b = f.clone();
    put64(&mut b, AT_TOC_SIZE, toc_size - 1);
    reject(&b, Rule::HkTocTruncated, l.entries[1] + 2 + 1 + 4 + 8 + 48 + 2);
    // Bytes after the last entry / pair.
    let mut b = f.clone();
    put64(&mut b, AT_TENSOR_COUNT, 1);
    reject(&b, Rule::HkSectionTrailing, l.entries[1]);
    let (f2, l2) = Hk::new().meta("a", tag::BOOL, &[1]).meta("b", tag::BOOL, &[0]).build();
    let mut b = f2.clone();
    put64(&mut b, AT_KV_COUNT, 1);
    reject(&b, Rule::HkSectionTrailing, l2.meta_at + 2 + 1 + 1 + 4 + 1);
}

#[test]
fn metadata_faults() {
    let at = 128usize;
    let (f, _) = Hk::new().meta("k", 7, b"x").build();
    reject(&f, Rule::HkMetaType, at + 3);
    let (f, _) = Hk::new().meta("k", tag::BOOL, &[2]).build();
    reject(&f, Rule::HkMetaValue, at + 8);
    let (f, _) = Hk::new().meta("k", tag::INT64, &[0; 7]).build();
    reject(&f, Rule::HkMetaValue, at + 8);
    let (f, _) = Hk::new().meta("k", tag::FLOAT64, &[0; 9]).build();
    reject(&f, Rule::HkMetaValue, at + 8);
    let (f, _) = Hk::new().meta("k", tag::STRING, &[0xff, 0xfe]).build();
    reject(&f, Rule::HkMetaValueUtf8, at + 8);
    let (f, _) = Hk::new().meta("k", tag::JSON, &[0xc3]).build();
    reject(&f, Rule::HkMetaValueUtf8, at + 8);
    let (mut f, _) = Hk::new().meta("k", tag::STRING, b"v").build();
    f[at + 2] = 0xff;
    reject(&f, Rule::HkMetaKeyUtf8, at + 2);
    // value_len past the section.
    let (mut f, _) = Hk::new().meta("k", tag::BYTES, b"abc").meta("z", tag::BYTES, b"").build();
    put32(&mut f, at + 4, u32::MAX);
    reject(&f, Rule::HkMetaTruncated, at + 8);
    // key_len past the section.
    let (mut f, _) = Hk::new().meta("k", tag::BYTES, b"abc").build();
    put16(&mut f, at, 200);
    reject(&f, Rule::HkMetaTruncated, at + 2);
}

fn entry_fields(l: &Layout, i: usize, name_len: usize, ndim: usize) -> (usize, usize) {
    let storage_at = l.entries[i] + 2 + name_len;
    let spans_at = storage_at + 4 + 8 * ndim;
    (storage_at, spans_at)
}

#[test]
fn toc_faults() {
    // name too long: 129 bytes.
    let long = "n".repeat(129);
    let (f, l) = Hk::new().tensor(&long, StorageType::Uint8, &[1], &[7]).build();
    reject(&f, Rule::HkNameTooLong, l.entries[0]);
    let ok = "n".repeat(128);
    assert!(HkFile::parse(&Hk::new().tensor(&ok, StorageType::Uint8, &[1], &[7]).build().0).is_ok());
    // bad UTF-8 name.
    let (mut f, l) = Hk::new().tensor("ab", StorageType::Uint8, &[1], &[7]).build();
    f[l.entries[0] + 3] = 0xff;
    reject(&f, Rule::HkNameUtf8, l.entries[0] + 2);

    let (f, l) = Hk::new().tensor("w", StorageType::F32, &[2], &[0; 8]).build();
    let (sa, spans) = entry_fields(&l, 0, 1, 1);
    let mut b = f.clone();
    b[sa] = 0x0F;
    reject(&b, Rule::HkStorageType, sa);
    let mut b = f.clone();
    b[sa] = 0x64;
    reject(&b, Rule::HkStorageType, sa);
    let mut b = f.clone();
    b[sa + 1] = 8;
    reject(&b, Rule::HkTileLayout, sa + 1);
    let mut b = f.clone();
    b[sa + 2] = 6;
    reject(&b, Rule::HkSparsityType, sa + 2);
    let mut b = f.clone();
    b[sa + 3] = 9;
    reject(&b, Rule::HkRankTooLarge, sa + 3);
    // data range faults
    let mut b = f.clone();
    put64(&mut b, spans, f.len() as u64 - 4);
    reject(&b, Rule::HkRangePastEnd, spans);
    let mut b = f.clone();
    put64(&mut b, spans, u64::MAX - 4);
    reject(&b, Rule::HkRangeOverflow, spans);
    let mut b = f.clone();
    put64(&mut b, spans + 8, u64::MAX);
    reject(&b, Rule::HkRangeOverflow, spans);
    let mut b = f.clone();
    put64(&mut b, spans, 0); // data inside the header
    reject(&b, Rule::HkRangeOutsidePayload, spans);
    let mut b = f.clone();
    put64(&mut b, spans + 8, 4); // dense size mismatch
    reject(&b, Rule::HkDenseSize, spans + 8);
    // scale with offset 0 but a size
    let mut b = f.clone();
    put64(&mut b, spans + 40, 4);
    reject(&b, Rule::HkAbsentRange, spans + 40);
    // residual past the end
    let mut b = f.clone();
    put64(&mut b, spans + 16, l.data_at as u64);
    put64(&mut b, spans + 24, 1 << 20);
    reject(&b, Rule::HkRangePastEnd, spans + 16);
    // shape overflow
    let (f, l) = Hk::new().tensor("w", StorageType::Q4K, &[u64::MAX, 3], &[0; 144]).build();
    reject(&f, Rule::HkShapeOverflow, l.entries[0] + 2 + 1 + 4);
}

#[test]
fn reference_faults() {
    // null_ref with bytes.
    let (f, l) = Hk::new().tensor("w", StorageType::F32, &[1], &[0; 4]).null_ref("n", &[3]).build();
    assert!(HkFile::parse(&f).is_ok());
    let (_, spans) = entry_fields(&l, 1, 1, 1);
    let mut b = f.clone();
    put64(&mut b, spans + 8, 4);
    reject(&b, Rule::HkNullRef, spans);
    let mut b = f.clone();
    put64(&mut b, spans + 32, l.data_at as u64);
    reject(&b, Rule::HkNullRef, spans + 32);
    // shared_ref whose offsets match no earlier tensor.
    let (f, l) = Hk::new().tensor("w", StorageType::F32, &[1], &[0; 4]).shared_ref("s", 0).build();
    assert!(HkFile::parse(&f).is_ok());
    let (_, spans) = entry_fields(&l, 1, 1, 1);
    let mut b = f.clone();
    put64(&mut b, spans + 8, 2);
    reject(&b, Rule::HkSharedRef, l.entries[1]);
    // A shared_ref before its target (forward reference) is rejected.
    let mut hk = Hk::new().tensor("w", StorageType::F32, &[1], &[0; 4]).shared_ref("s", 0);
    hk.tensors.swap(0, 1);
    hk.tensors[0].reference = None;
    let (mut f, l) = hk.build();
    let (_, s0) = entry_fields(&l, 0, 1, 1);
    let (_, s1) = entry_fields(&l, 1, 1, 1);
    let span = f[s0..s0 + 16].to_vec();
    f[s1..s1 + 16].copy_from_slice(&span);
    f[s0..s0 + 16].copy_from_slice(&span);
    reject(&f, Rule::HkSharedRef, l.entries[0]);
}

#[test]
fn appendix_faults() {
    let (f, _) = small();
    let mut good = f.clone();
    let rec = append(&mut good, 3, "layer", "w", b"12345", [0; 32]);
    assert!(HkFile::parse(&good).is_ok());
    let mut b = good.clone();
    b[rec] = 0;
    reject(&b, Rule::HkAppendixType, rec);
    let mut b = good.clone();
    b[rec] = 7;
    reject(&b, Rule::HkAppendixType, rec);
    let mut b = good.clone();
    b[rec + 1] = 4;
    reject(&b, Rule::HkAppendixReserved, rec + 1);
    let mut b = good.clone();
    b[rec + 66] = 1;
    reject(&b, Rule::HkAppendixReserved, rec + 66);
    let mut b = good.clone();
    put64(&mut b, rec + 72, 1 << 50);
    reject(&b, Rule::HkAppendixTruncated, rec + 80 + 5 + 1);
    let mut b = good.clone();
    b[rec + 80] = 0xff;
    reject(&b, Rule::HkAppendixUtf8, rec + 80);
    let last = good.len() - 1;
    let mut b = good.clone();
    b[last] = 1;
    reject(&b, Rule::HkAppendixPadding, last);
    // A record header cut short.
    reject(&good[..rec + 40], Rule::HkAppendixTruncated, rec + 16);
    // The last record may end without its padding.
    let unpadded = rec + 80 + 5 + 1 + 5;
    assert!(HkFile::parse(&good[..unpadded]).is_ok());
    // appendix_offset placement.
    let mut b = good.clone();
    put64(&mut b, AT_APPENDIX, rec as u64 + 1);
    reject(&b, Rule::HkAppendixOffset, AT_APPENDIX);
    let mut b = good.clone();
    put64(&mut b, AT_APPENDIX, 64);
    reject(&b, Rule::HkAppendixOffset, AT_APPENDIX);
    let mut b = good.clone();
    put64(&mut b, AT_APPENDIX, good.len() as u64 + 8);
    reject(&b, Rule::HkAppendixTruncated, AT_APPENDIX);
    // The appendix ends the payload region: a tensor may not run into it.
    let (f, l) = Hk::new().tensor("w", StorageType::Uint8, &[16], &[1; 16]).build();
    let mut b = f.clone();
    let data_end = l.data_at + 16;
    b.resize(data_end + 8, 0);
    b.truncate(data_end);
    append(&mut b, 1, "a", "", b"", [0; 32]);
    assert!(HkFile::parse(&b).is_ok());
    put64(&mut b, AT_APPENDIX, (l.data_at + 8) as u64);
    reject(&b, Rule::HkRangeOutsidePayload, entry_fields(&l, 0, 1, 1).1);
}

#[test]
fn every_prefix_is_rejected_or_complete_and_never_panics() {
    let (mut f, _) = every_type().build();
    append(&mut f, 1, "a", "b", b"c", [0; 32]);
    let data_end = HkFile::parse(&f).unwrap().header().appendix_offset as usize;
    for n in 0..f.len() {
        match HkFile::parse(&f[..n]) {
            Ok(hk) => {
                assert!(n >= data_end, "prefix {n} accepted before the appendix");
                touch(&hk);
            }
            Err(e) => assert!(e.offset() <= f.len(), "{e}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Random byte and word corruptions of a valid file: parse never panics,
    /// and whatever it accepts can be walked completely.
    #[test]
    fn corrupted_files_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u64>(), 0u8..3), 1..6)
    ) {
        let (mut f, _) = every_type().build();
        append(&mut f, 2, "p", "t", b"data", [0; 32]);
        for (i, v, kind) in edits {
            let at = i.index(f.len());
            match kind {
                0 => f[at] = v as u8,
                1 => { let end = (at + 8).min(f.len()); let b = v.to_le_bytes(); f[at..end].copy_from_slice(&b[..end - at]); }
                _ => f.truncate(at.max(1)),
            }
        }
        if let Ok(hk) = HkFile::parse(&f) {
            touch(&hk);
            #[cfg(feature = "sha2")]
            let _ = hk.verify_lineage();
        }
    }

    /// Headers pointing anywhere: random section offsets, sizes and counts.
    #[test]
    fn random_header_fields_never_panic(fields in proptest::array::uniform8(any::<u64>()), small_vals in proptest::array::uniform8(0u64..512)) {
        let (base, _) = small();
        for vals in [fields, small_vals] {
            let mut f = base.clone();
            for (k, v) in vals.iter().enumerate() {
                put64(&mut f, 0x10 + 8 * k, *v);
            }
            if let Ok(hk) = HkFile::parse(&f) { touch(&hk); }
        }
    }
}

// ---------------------------------------------------------------- the small example

/// The f32 vector [1.0, -2.0] as little-endian bytes.
const DATA: [u8; 8] = [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0];

/// Writes `bytes` at `at` in `f`.
fn put(f: &mut [u8], at: usize, bytes: &[u8]) {
    f[at..at + bytes.len()].copy_from_slice(bytes);
}

/// Metadata `general.architecture = "mlp"` and one f32 tensor `w` = [1.0, -2.0] at offset 256.
fn example_file() -> Vec<u8> {
    let mut f = vec![0u8; 264];
    put(&mut f, 0, &HK_MAGIC);
    put(&mut f, 4, &1u16.to_le_bytes());
    put(&mut f, 8, &(FLAG_LITTLE_ENDIAN | FLAG_TILE_ALIGNED).to_le_bytes());
    put(&mut f, 12, &128u16.to_le_bytes());
    put(&mut f, 16, &1u64.to_le_bytes()); // tensor_count
    put(&mut f, 24, &1u64.to_le_bytes()); // kv count
    put(&mut f, 32, &128u64.to_le_bytes()); // metadata offset
    put(&mut f, 40, &30u64.to_le_bytes()); // metadata size: 2 + 20 + 1 + 4 + 3
    put(&mut f, 48, &158u64.to_le_bytes()); // toc offset
    put(&mut f, 56, &(2 + 1 + 4 + 8 + 48 + 6u64).to_le_bytes()); // toc size: 69
    put(&mut f, 64, &256u64.to_le_bytes()); // data offset
    put(&mut f, 88, &1u16.to_le_bytes()); // split_count
    put(&mut f, 128, &20u16.to_le_bytes()); // metadata
    put(&mut f, 130, b"general.architecture");
    put(&mut f, 150, &[tag::STRING]);
    put(&mut f, 151, &3u32.to_le_bytes());
    put(&mut f, 155, b"mlp");
    put(&mut f, 158, &1u16.to_le_bytes()); // toc
    put(&mut f, 160, b"w");
    put(&mut f, 161, &[0, 0, 0, 1]);
    put(&mut f, 165, &2u64.to_le_bytes());
    put(&mut f, 173, &256u64.to_le_bytes());
    put(&mut f, 181, &8u64.to_le_bytes());
    put(&mut f, 221, &32u16.to_le_bytes());
    put(&mut f, 256, &DATA); // data
    f
}

/// The example the doc examples read: rebuilt from its description, it must
/// match the committed bytes (as kiln-model/tests/small_examples.rs does for
/// the Kiln examples beside it).
#[test]
fn the_small_example_is_current() {
    let committed = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.hk"));
    assert_eq!(committed[..], example_file()[..]);
    let hk = HkFile::parse(committed).unwrap();
    assert_eq!(hk.find("w").map(|t| t.data()), Some(&DATA[..]));
}
