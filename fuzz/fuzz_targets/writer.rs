//! The writer: tensor sets from `arbitrary` must produce blocks that parse
//! back identically.
//!
//! Two modes. Legal sets (built legal from the arbitrary description: data
//! lengths from dtype and shape, bools 0/1, odd packed tails clear, unique
//! names, well-formed quantization) must be written, parse back to the same
//! tensors, re-encode identically, and fill exactly `encoded_len` bytes
//! without touching the output past the block. Raw sets (the arbitrary
//! fields as given) either do all of that or are refused with an error
//! (no panic either way).
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use kiln_fuzz::check_directory;
use kiln_nostd::dequant::quant::scale_count;
use kiln_nostd::{
    dtype::Width,
    writer::{QuantSpec, TensorRef},
    DType, Directory, Writer,
};
use libfuzzer_sys::fuzz_target;

// The owned tensor the kiln-nostd tests generate, shared so the owned-to-spec step exists once.
#[path = "../../kiln-nostd/tests/owned/mod.rs"]
mod owned;
use owned::{specs, OwnedTensor};

#[derive(Arbitrary, Debug)]
struct T {
    dtype: u16,
    shape: Vec<u8>,
    data: Vec<u8>,
    name: Option<String>,
    layout: Option<String>,
    block_size: u8,
    quant: Option<(u8, u8)>, // (axis, group)
}

#[derive(Arbitrary, Debug)]
struct Input {
    legal: bool,
    named: bool,
    tensors: Vec<T>,
}

fn legalise(inp: &Input) -> Vec<OwnedTensor> {
    let mut out = Vec::new();
    for (i, t) in inp.tensors.iter().take(12).enumerate() {
        let closed = DType::closed_set();
        let dtype = if t.dtype % 8 == 7 {
            DType::Opaque(4096 + t.dtype % 28672)
        } else {
            closed[usize::from(t.dtype) % closed.len()]
        };
        // Up to 8 dims, at most 4096 elements (zero dims allowed anywhere).
        let mut n_so_far = 1u64;
        let shape: Vec<u64> = t
            .shape
            .iter()
            .take(8)
            .map(|&d| {
                let d = u64::from(d % 9);
                let d = if n_so_far * d > 4096 { 1 } else { d };
                n_so_far = (n_so_far * d).max(1);
                d
            })
            .collect();
        let n: u64 = shape.iter().product();
        let (data, layout, block_size) = match dtype.width() {
            Width::Opaque => {
                let block = u32::from(t.block_size.max(1));
                let blocks = t.data.len() / block as usize;
                (t.data[..blocks * block as usize].to_vec(), Some(t.layout.clone().unwrap_or_default() + "L"), block)
            }
            w => {
                let len = match w {
                    Width::Bytes(b) => n as usize * usize::from(b),
                    _ => n.div_ceil(2) as usize,
                };
                let mut d: Vec<u8> = t.data.iter().copied().cycle().take(len).collect();
                d.resize(len, 0);
                match dtype {
                    DType::Bool => d.iter_mut().for_each(|b| *b &= 1),
                    DType::I4 | DType::U4 | DType::E2M1 if n % 2 == 1 => {
                        if let Some(l) = d.last_mut() {
                            *l &= 0x0F
                        }
                    }
                    _ => {}
                }
                (d, None, 0)
            }
        };
        let name = inp.named.then(|| format!("{}#{i}", t.name.as_deref().unwrap_or("")));
        out.push(OwnedTensor { name, dtype, shape, data, layout, block_size, quant: QuantSpec::None });
    }
    // One quantized tensor with a fresh scale tensor appended, when asked for.
    if let Some((k, (axis, group))) = inp.tensors.iter().take(out.len()).enumerate().find_map(|(k, t)| t.quant.map(|q| (k, q))) {
        let t = &out[k];
        if !t.shape.is_empty() && !t.dtype.is_opaque() {
            let axis = usize::from(axis) % t.shape.len();
            let group = u32::from(group.max(1));
            if let Some(scales) = scale_count(&t.shape, axis, group) {
                let scale_index = out.len() as u32;
                out[k].quant =
                    QuantSpec::Scales { axis: axis as u16, group_size: group, scale: TensorRef::Index(scale_index) };
                let name = inp.named.then(|| format!("scale#{scale_index}"));
                out.push(OwnedTensor {
                    name,
                    dtype: DType::E8M0,
                    shape: vec![scales],
                    data: vec![127; scales as usize],
                    layout: None,
                    block_size: 0,
                    quant: QuantSpec::None,
                });
            }
        }
    }
    out
}

fn raw(inp: &Input) -> Vec<OwnedTensor> {
    inp.tensors
        .iter()
        .take(12)
        .map(|t| OwnedTensor {
            name: t.name.clone(),
            dtype: DType::from_code(t.dtype).unwrap_or(DType::U8),
            shape: t.shape.iter().map(|&d| u64::from(d)).collect(),
            data: t.data.clone(),
            layout: t.layout.clone(),
            block_size: u32::from(t.block_size),
            quant: match t.quant {
                None => QuantSpec::None,
                Some((a, g)) => QuantSpec::Scales { axis: u16::from(a), group_size: u32::from(g), scale: TensorRef::Index(u32::from(a)) },
            },
        })
        .collect()
}

fn round_trip(ts: &[OwnedTensor], must_write: bool) {
    let specs = specs(ts);
    let len = match Writer::new().encoded_len(&specs) {
        Ok(l) => l,
        Err(e) => {
            assert!(!must_write, "legal set has no length: {e}");
            return;
        }
    };
    if len > 1 << 22 {
        return;
    }
    let mut out = vec![0xA5u8; len + 9];
    let n = match Writer::new().write(&specs, &mut out) {
        Ok(n) => n,
        Err(e) => {
            assert!(!must_write, "writer refuses a legal set: {e}\n{specs:?}");
            return;
        }
    };
    assert_eq!(n, len, "written length differs from encoded_len");
    assert!(out[len..].iter().all(|&b| b == 0xA5), "writer touched bytes past the block");
    let block = &out[..len];
    let dir = Directory::parse(block).unwrap_or_else(|e| panic!("written block does not parse: {e}"));
    assert_eq!(dir.len(), specs.len());
    for (t, s) in dir.iter().zip(&specs) {
        assert_eq!(t.name(), s.name);
        assert_eq!(t.dtype(), s.dtype);
        assert_eq!(t.shape(), s.shape);
        assert_eq!(t.bytes(), s.data);
        assert_eq!(t.layout(), s.layout);
        assert_eq!(t.block_size(), s.block_size);
        match (t.quant(), s.quant) {
            (None, QuantSpec::None) => {}
            (Some(q), QuantSpec::Scales { axis, group_size, scale: TensorRef::Index(i) }) => {
                assert_eq!((q.axis, q.group_size, q.scale.index()), (usize::from(axis), group_size, i as usize));
            }
            (q, s) => panic!("quantization differs: {q:?} vs {s:?}"),
        }
    }
    check_directory(block, &dir);
}

fuzz_target!(|data: &[u8]| {
    let Ok(inp) = Input::arbitrary(&mut Unstructured::new(data)) else { return };
    if inp.legal {
        round_trip(&legalise(&inp), true);
    } else {
        round_trip(&raw(&inp), false);
    }
});
