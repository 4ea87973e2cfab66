//! Every golden case through the Rust decoder, and the writer reproducing
//! every accepted directory's bytes.

use kiln_conformance::cases;
use kiln_nostd::{Directory, TensorSpec, Writer};

#[test]
fn there_are_exactly_the_46_cases_of_the_spec() {
    let cases = cases();
    assert_eq!(cases.len(), 46);
    let accepts = cases.iter().filter(|c| c.expect == "accept").count();
    assert_eq!(accepts, 17);
}

#[test]
fn directory_goldens_give_their_recorded_result() {
    let mut checked = 0;
    for case in cases().iter().filter(|c| c.is_directory()) {
        let bytes = case.bytes();
        let got = match Directory::parse(&bytes) {
            Ok(_) => "accept".to_owned(),
            Err(e) => {
                assert!(e.offset() <= bytes.len(), "{}: offset {} past the buffer", case.name, e.offset());
                e.code().as_str().to_owned()
            }
        };
        assert_eq!(got, case.expect, "{}: {}", case.name, case.note);
        checked += 1;
    }
    assert_eq!(checked, 39);
}

/// Re-encodes a directory from its views alone.
fn rewrite(dir: &Directory<'_>) -> Vec<u8> {
    let tensors: Vec<_> = dir.iter().collect();
    let specs: Vec<TensorSpec<'_>> = tensors.iter().map(TensorSpec::from_tensor).collect();
    let mut out = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    Writer::new().write(&specs, &mut out).unwrap();
    out
}

#[test]
fn the_writer_reproduces_every_accepted_directory_golden() {
    let mut n = 0;
    for case in cases().iter().filter(|c| c.is_directory() && c.expect == "accept") {
        let bytes = case.bytes();
        let dir = Directory::parse(&bytes).unwrap();
        assert_eq!(rewrite(&dir), bytes, "{}", case.name);
        n += 1;
    }
    assert_eq!(n, 14);
}

#[test]
fn spec_byte_patterns() {
    let by_name = |n: &str| cases().into_iter().find(|c| c.name == n).unwrap().bytes();
    let empty = by_name("kiln-v2-empty");
    assert_eq!(empty, kiln_nostd::wire::EMPTY_BLOCK);
    let f32v = by_name("kiln-v2-f32");
    assert_eq!(f32v.len(), 200);
    let dir = Directory::parse(&f32v).unwrap();
    let t = dir.get(0).unwrap();
    assert_eq!(t.bytes(), [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0]);
    let mut v = [0f32; 2];
    t.copy_to(&mut v).unwrap();
    assert_eq!(v, [1.0, -2.0]);

    let negzero = by_name("kiln-v2-f32-negzero");
    let t = Directory::parse(&negzero).unwrap().get(0).unwrap();
    assert_eq!(t.bytes(), [0, 0, 0, 0x80]);
    let nan = by_name("kiln-v2-f64-nan");
    let t = Directory::parse(&nan).unwrap().get(0).unwrap();
    let mut x = [0f64; 1];
    t.copy_to(&mut x).unwrap();
    assert_eq!(x[0].to_bits(), 0x7FF8_0000_0000_0001);

    let pair = by_name("kiln-v2-f8-pair");
    let dir = Directory::parse(&pair).unwrap();
    let (a, b) = (dir.get(0).unwrap(), dir.get(1).unwrap());
    assert_eq!((a.byte_offset(), b.byte_offset()), (0, 64));
    assert_eq!((a.bytes(), b.bytes()), (&[0x38][..], &[0x3c][..]));

    let u4 = by_name("kiln-v2-u4");
    assert_eq!(Directory::parse(&u4).unwrap().get(0).unwrap().bytes(), [0x21, 0x03]);
    let bf16 = by_name("kiln-v2-bf16");
    assert_eq!(Directory::parse(&bf16).unwrap().get(0).unwrap().bytes(), [0x80, 0x3f]);

    let opaque = by_name("kiln-v2-opaque");
    let t = Directory::parse(&opaque).unwrap().get(0).unwrap();
    assert_eq!((t.dtype().code(), t.layout(), t.block_size(), t.byte_len()), (4096, Some("Q4_K"), 18, 18));

    let scales = by_name("kiln-v2-scales");
    let dir = Directory::parse(&scales).unwrap();
    let q = dir.iter().find_map(|t| t.quant()).unwrap();
    assert_eq!((q.scheme, q.group_size, q.scale.bytes()), (1, 32, &[127u8][..]));
    let outer = by_name("kiln-v2-scales-outer");
    let dir = Directory::parse(&outer).unwrap();
    let q = dir.iter().find_map(|t| t.quant()).unwrap();
    assert_eq!(q.scheme, 2);
    assert_eq!(q.outer.unwrap().dtype(), kiln_nostd::DType::F32);
}

#[test]
fn the_committed_cases_equal_a_fresh_regeneration() {
    let root = kiln_conformance::repo_root();
    let out = std::process::Command::new("python3")
        .arg(root.join("spec/reference/gen_v2_cases.py"))
        .arg("--check")
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}
