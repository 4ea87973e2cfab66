//! The small example files in `spec/examples/small/` that the doc examples
//! read: each is rebuilt here from its description and must match the
//! committed bytes, so a format change cannot leave them stale (the HK one,
//! `f32-vector-named.hk`, in kiln-hk/tests/hk.rs).

use kiln_model::{self as model, PAD_KEY};
use kiln_nostd::{DType, Directory, TensorSpec, Writer};

macro_rules! example {
    ($name:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/", $name))
    };
}

/// The f32 vector [1.0, -2.0] as little-endian bytes.
const DATA: [u8; 8] = [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0];

fn block(name: Option<&str>) -> Vec<u8> {
    let mut spec = TensorSpec::new(DType::F32, &[2], &DATA);
    spec.name = name;
    let mut out = vec![0u8; 512];
    let n = Writer::new().write(&[spec], &mut out).unwrap();
    out.truncate(n);
    out
}

/// A model file: metadata {author: kiln, kiln.convert.pad: "  "}, then the unnamed block.
fn model_file() -> Vec<u8> {
    let mut f = kiln_nostd::frozen::frame_bytes(model::MODEL_HASH).to_vec();
    f.extend(2u32.to_le_bytes());
    for s in ["author", "kiln", PAD_KEY, "  "] {
        f.extend(u32::try_from(s.len()).unwrap().to_le_bytes());
        f.extend(s.as_bytes());
    }
    f.extend(block(None));
    f
}

#[test]
fn the_small_examples_are_current() {
    assert_eq!(example!("f32-vector.kiln")[..], block(None)[..]);
    assert_eq!(example!("f32-vector-named.kiln")[..], block(Some("w"))[..]);
    assert_eq!(example!("f32-vector.model.kiln")[..], model_file()[..]);
}

#[test]
fn the_small_examples_parse() {
    let dir = Directory::parse(example!("f32-vector-named.kiln")).unwrap();
    assert_eq!(dir.find("w").map(|t| t.bytes()), Some(&DATA[..]));
    let m = model::Model::parse(example!("f32-vector.model.kiln")).unwrap();
    assert_eq!(m.directory().get(0).map(|t| t.bytes()), Some(&DATA[..]));
}
