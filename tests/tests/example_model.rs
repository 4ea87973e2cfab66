//! The bundled example model, spec/examples/digits-mlp.kiln, read through the
//! no_std API and run in Rust.
//!
//! The expected figures are the ones `spec/examples/make_digits_model.py`
//! printed (and spec/examples/README.md records): on the 32 stored samples
//! the f32 model gets 32/32, the MXFP4 copy of fc1 gets 31/32, and the two
//! agree on 31/32. Both forward passes here accumulate in f64 from the stored
//! bits, as the script does, so the predictions are reproduced exactly.

use kiln_nostd::dequant::dequantize_into;
use kiln_nostd::{dequant::mx, DType, Directory, Tensor};

/// What the script printed for the 32 samples.
const F32_CORRECT: usize = 32;
const MXFP4_CORRECT: usize = 31;
const PREDICTIONS_F32: [usize; 32] =
    [0, 4, 1, 2, 1, 6, 6, 4, 9, 7, 5, 4, 6, 8, 0, 7, 0, 5, 0, 5, 7, 2, 4, 7, 2, 1, 2, 9, 3, 1, 0, 9];
const PREDICTIONS_MXFP4: [usize; 32] =
    [0, 4, 1, 2, 8, 6, 6, 4, 9, 7, 5, 4, 6, 8, 0, 7, 0, 5, 0, 5, 7, 2, 4, 7, 2, 1, 2, 9, 3, 1, 0, 9];
/// Stated tolerance: the MXFP4 path must agree with the f32 path on at least
/// 90% of the samples (measured: 31/32 = 96.9%).
const MIN_AGREEMENT: f64 = 0.90;

fn model_bytes() -> Vec<u8> {
    let path = kiln_conformance::repo_root().join("spec/examples/digits-mlp.kiln");
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn tensor<'a>(dir: &Directory<'a>, name: &str, dtype: DType, shape: &[u64]) -> Tensor<'a> {
    let t = dir.find(name).unwrap_or_else(|| panic!("tensor {name} missing"));
    assert_eq!(t.dtype(), dtype, "{name} dtype");
    assert_eq!(t.shape(), shape, "{name} shape");
    t
}

fn f32s(t: &Tensor<'_>) -> Vec<f32> {
    let mut out = vec![0f32; usize::try_from(t.element_count()).unwrap()];
    assert_eq!(t.copy_to(&mut out).unwrap(), out.len());
    out
}

struct Mlp {
    w1: Vec<f32>, // [32, 64]
    b1: Vec<f32>,
    w2: Vec<f32>, // [10, 32]
    b2: Vec<f32>,
}

impl Mlp {
    fn logits(&self, x: &[f32]) -> [f64; 10] {
        let hidden: Vec<f64> = (0..32)
            .map(|j| {
                let row = &self.w1[j * 64..(j + 1) * 64];
                let s: f64 = row.iter().zip(x).map(|(w, v)| f64::from(*w) * f64::from(*v)).sum();
                (s + f64::from(self.b1[j])).max(0.0)
            })
            .collect();
        let mut out = [0f64; 10];
        for (k, o) in out.iter_mut().enumerate() {
            let row = &self.w2[k * 32..(k + 1) * 32];
            *o = row.iter().zip(&hidden).map(|(w, h)| f64::from(*w) * h).sum::<f64>() + f64::from(self.b2[k]);
        }
        out
    }

    fn predict(&self, x: &[f32]) -> usize {
        let l = self.logits(x);
        (0..10).fold(0, |best, k| if l[k] > l[best] { k } else { best })
    }
}

/// Dequantizes the MXFP4 tensor (e2m1 elements, scheme 1 on axis 1, e8m0
/// scales) with the core's `dequant` (spec §11.1), after checking that its
/// metadata is the MXFP4 layout the script wrote.
fn dequantize_mxfp4(q: &Tensor<'_>) -> Vec<f32> {
    assert_eq!(q.dtype(), DType::E2M1);
    let quant = q.quant().expect("scheme 1 metadata");
    assert_eq!((quant.scheme, quant.axis, quant.group_size), (1, 1, 32));
    assert!(quant.outer.is_none());
    let scales = quant.scale;
    assert_eq!(scales.name(), Some("fc1.weight.mxfp4.scales"));
    assert_eq!(scales.dtype(), DType::E8M0);
    let (rows, cols) = (q.shape()[0] as usize, q.shape()[1] as usize);
    assert_eq!(scales.shape(), &[rows as u64, (cols / 32) as u64]);
    let mut out = vec![0f32; rows * cols];
    assert_eq!(dequantize_into(q, &mut out), Ok(rows * cols));
    out
}

/// The largest error round-to-nearest MXFP4 can make on `w` in a block with
/// scale `s`: half the E2M1 grid spacing at |w|/s, or 2s for a saturated
/// value (|w|/s in (6, 8), since the shared exponent keeps |w|/s below 8).
fn mxfp4_bound(w: f32, s: f32) -> f32 {
    let m = w.abs() / s;
    let half_step = match m {
        m if m <= 2.0 => 0.25,
        m if m <= 4.0 => 0.5,
        m if m <= 6.0 => 1.0,
        _ => 2.0,
    };
    half_step * s
}

#[test]
fn example_model_runs_in_rust_and_reproduces_the_script() {
    let bytes = model_bytes();
    assert!(bytes.len() < 200 * 1024, "the example stays under 200 KB");
    let dir = Directory::parse(&bytes).expect("a valid standalone directory");
    assert_eq!(dir.len(), 8);

    let mlp = Mlp {
        w1: f32s(&tensor(&dir, "fc1.weight", DType::F32, &[32, 64])),
        b1: f32s(&tensor(&dir, "fc1.bias", DType::F32, &[32])),
        w2: f32s(&tensor(&dir, "fc2.weight", DType::F32, &[10, 32])),
        b2: f32s(&tensor(&dir, "fc2.bias", DType::F32, &[10])),
    };
    let x = f32s(&tensor(&dir, "samples.x", DType::F32, &[32, 64]));
    let y = tensor(&dir, "samples.y", DType::U8, &[32]).bytes().to_vec();
    assert!(x.iter().all(|v| (0.0..=1.0).contains(v)), "pixels are scaled to 0..1");

    let preds: Vec<usize> = x.chunks_exact(64).map(|img| mlp.predict(img)).collect();
    let correct = preds.iter().zip(&y).filter(|(p, l)| **p == usize::from(**l)).count();
    assert_eq!(preds, PREDICTIONS_F32, "f32 predictions");
    assert!(correct >= F32_CORRECT, "f32 accuracy {correct}/32, script printed {F32_CORRECT}/32");

    // The MXFP4 copy of fc1.
    let q = tensor(&dir, "fc1.weight.mxfp4", DType::E2M1, &[32, 64]);
    let deq = dequantize_mxfp4(&q);
    let scales = tensor(&dir, "fc1.weight.mxfp4.scales", DType::E8M0, &[32, 2]).bytes();
    let mut worst = 0f32;
    for (i, (w, d)) in mlp.w1.iter().zip(&deq).enumerate() {
        let s = mx::e8m0_to_f32(scales[(i / 64) * 2 + (i % 64) / 32]);
        let err = (w - d).abs();
        assert!(err <= mxfp4_bound(*w, s), "element {i}: |{w} - {d}| = {err} above the MXFP4 bound (scale {s})");
        worst = worst.max(err);
    }
    assert!(worst > 0.0 && worst < 0.25, "largest MXFP4 error {worst} (script: 0.24784)");

    let qmlp = Mlp { w1: deq, b1: mlp.b1.clone(), w2: mlp.w2.clone(), b2: mlp.b2.clone() };
    let qpreds: Vec<usize> = x.chunks_exact(64).map(|img| qmlp.predict(img)).collect();
    let qcorrect = qpreds.iter().zip(&y).filter(|(p, l)| **p == usize::from(**l)).count();
    assert_eq!(qpreds, PREDICTIONS_MXFP4, "MXFP4 predictions");
    assert!(qcorrect >= MXFP4_CORRECT, "MXFP4 accuracy {qcorrect}/32, script printed {MXFP4_CORRECT}/32");
    let agree = preds.iter().zip(&qpreds).filter(|(a, b)| a == b).count();
    assert!(
        agree as f64 >= MIN_AGREEMENT * preds.len() as f64,
        "MXFP4 agrees with f32 on {agree}/32, below the stated {MIN_AGREEMENT}"
    );
}

#[test]
fn example_model_is_canonical() {
    // Re-encoding the parsed tensors with the Rust writer gives the same bytes
    // as the Python reference encoder wrote.
    let bytes = model_bytes();
    let dir = Directory::parse(&bytes).unwrap();
    let shapes: Vec<Vec<u64>> = dir.iter().map(|t| t.shape().to_vec()).collect();
    let specs: Vec<kiln_nostd::TensorSpec<'_>> = dir
        .iter()
        .zip(&shapes)
        .map(|(t, shape)| {
            let mut s = kiln_nostd::TensorSpec::new(t.dtype(), shape, t.bytes()).named(t.name().unwrap());
            if let Some(q) = t.quant() {
                s = s.quantized(kiln_nostd::writer::QuantSpec::Scales {
                    axis: q.axis as u16,
                    group_size: q.group_size,
                    scale: kiln_nostd::writer::TensorRef::Index(q.scale.index() as u32),
                });
            }
            s
        })
        .collect();
    let mut out = vec![0u8; kiln_nostd::Writer::new().encoded_len(&specs).unwrap()];
    kiln_nostd::Writer::new().write(&specs, &mut out).unwrap();
    assert_eq!(out, bytes);
}

/// The metadata of the model-file form of the example.
const MODEL_METADATA: [(&str, &str); 3] = [
    ("description", "8x8 handwritten digits: a 64-32-10 MLP, an MXFP4 copy of fc1, 32 labelled samples"),
    ("license", "MIT OR Apache-2.0"),
    ("source", "spec/examples/make_digits_model.py"),
];

/// spec/examples/digits-mlp.model.kiln is the same tensors as a model file
/// with digests (spec/model-file.md), its payload region at a 4 KiB offset in
/// the file. (`spec/examples/small/*.model.kiln` are plain records: files
/// without digests stay in the tests.)
/// `KILN_WRITE_EXAMPLES=1` rewrites it; otherwise it must be current.
#[test]
fn the_model_file_form_is_current_and_opens_by_content() {
    let plain = model_bytes();
    let dir = Directory::parse(&plain).unwrap();
    let tensors: Vec<_> = dir.iter().collect();
    let specs: Vec<_> = tensors.iter().map(kiln_nostd::TensorSpec::from_tensor).collect();
    let writer = kiln_model::ModelWriter::new().digests(true).align(4096);
    let mut want = vec![0u8; writer.encoded_len(&MODEL_METADATA, &specs).unwrap()];
    writer.write(&MODEL_METADATA, &specs, &mut want).unwrap();
    let path = kiln_conformance::repo_root().join("spec/examples/digits-mlp.model.kiln");
    if std::env::var_os("KILN_WRITE_EXAMPLES").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read(&path).unwrap_or_default();
    assert!(have == want, "{} is stale: run KILN_WRITE_EXAMPLES=1 cargo test -p kiln-conformance", path.display());
    let model = kiln_model::Model::parse_verified(&have).unwrap();
    assert_eq!(model.kind(), kiln_model::Kind::Digests);
    let (meta, from_file) = kiln_model::parse_any(&have).unwrap();
    let meta: Vec<_> = meta.expect("a model file").iter().collect();
    assert_eq!(meta, MODEL_METADATA);
    assert_eq!(from_file.payload_start() % 4096, 0);
    for (a, b) in dir.iter().zip(from_file.iter()) {
        assert_eq!((a.name(), a.shape(), a.bytes()), (b.name(), b.shape(), b.bytes()));
    }
}
