//! The small example files in `spec/examples/small/` that the doc examples
//! read: each is rebuilt here from its description and must match the
//! committed bytes, so a format change cannot leave them stale.

use kiln_nostd::hk::{self, tag, HkFile};
use kiln_nostd::model::{self, PAD_KEY};
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

/// Writes `bytes` at `at` in `f`.
fn put(f: &mut [u8], at: usize, bytes: &[u8]) {
    f[at..at + bytes.len()].copy_from_slice(bytes);
}

/// Metadata `general.architecture = "mlp"` and one f32 tensor `w` = [1.0, -2.0] at offset 256.
fn hk_file() -> Vec<u8> {
    let mut f = vec![0u8; 264];
    put(&mut f, 0, &hk::HK_MAGIC);
    put(&mut f, 4, &1u16.to_le_bytes());
    put(&mut f, 8, &(hk::FLAG_LITTLE_ENDIAN | hk::FLAG_TILE_ALIGNED).to_le_bytes());
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
    assert_eq!(example!("f32-vector-named.hk")[..], hk_file()[..]);
    assert_eq!(example!("f32-vector.model.kiln")[..], model_file()[..]);
}

#[test]
fn the_small_examples_parse() {
    let dir = Directory::parse(example!("f32-vector-named.kiln")).unwrap();
    assert_eq!(dir.find("w").map(|t| t.bytes()), Some(&DATA[..]));
    let hk = HkFile::parse(example!("f32-vector-named.hk")).unwrap();
    assert_eq!(hk.find("w").map(|t| t.data()), Some(&DATA[..]));
    let m = model::Model::parse(example!("f32-vector.model.kiln")).unwrap();
    assert_eq!(m.directory().get(0).map(|t| t.bytes()), Some(&DATA[..]));
}
