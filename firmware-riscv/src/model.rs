//! The example model on the device: tensors found by name and viewed in place
//! in flash, the MXFP4 first layer dequantized on the fly, the forward pass
//! over the stored samples (as firmware-demo's `model.rs`, without the
//! copied-tensor path).

use kiln_nostd::dequant::Dequantizer;
use kiln_nostd::{directory::NameIndex, DType, Tensor};

const FC1_WEIGHT: &str = "fc1.weight";
const FC1_BIAS: &str = "fc1.bias";
const FC2_WEIGHT: &str = "fc2.weight";
const FC2_BIAS: &str = "fc2.bias";
pub const FC1_MXFP4: &str = "fc1.weight.mxfp4";
const SAMPLES_X: &str = "samples.x";
const SAMPLES_Y: &str = "samples.y";

/// Largest model the fixed buffers hold.
const MAX_IN: usize = 64;
const MAX_HIDDEN: usize = 64;
const MAX_CLASSES: usize = 16;
pub const MAX_SAMPLES: usize = 64;

/// The f32 MLP, `logits = w2 @ relu(w1 @ x + b1) + b2`, weights `[out, in]`,
/// and its samples, all borrowed from the model in flash.
pub struct Model<'a> {
    pub w1: &'a [f32],
    b1: &'a [f32],
    w2: &'a [f32],
    b2: &'a [f32],
    x: &'a [f32],
    pub labels: &'a [u8],
    pub n_in: usize,
    pub n_hidden: usize,
    n_out: usize,
}

fn get<'a>(index: &NameIndex<'a, '_>, name: &str) -> Result<Tensor<'a>, &'static str> {
    index.get(name).ok_or("a tensor of the example model is missing")
}

/// `[a]` or `[a, b]` of a tensor (`b` = 1 for rank 1).
fn dims(t: &Tensor<'_>, rank: usize) -> Result<(usize, usize), &'static str> {
    let conv = |d: u64| usize::try_from(d).map_err(|_| "dimension too large");
    match (rank, t.shape()) {
        (1, &[a]) => Ok((conv(a)?, 1)),
        (2, &[a, b]) => Ok((conv(a)?, conv(b)?)),
        _ => Err("tensor has an unexpected rank"),
    }
}

/// An f32 tensor viewed in place (`as_slice`: the model is 64-byte aligned in
/// flash and RISC-V is little-endian, so no copy is needed).
fn view_f32<'a>(t: &Tensor<'a>) -> Result<&'a [f32], &'static str> {
    if t.dtype() != DType::F32 {
        return Err("expected an f32 tensor");
    }
    t.as_slice::<f32>().ok_or("an f32 tensor cannot be viewed in place")
}

/// Looks every tensor up by name, takes the shapes from the directory and
/// checks that they chain.
pub fn load<'a>(index: &NameIndex<'a, '_>) -> Result<Model<'a>, &'static str> {
    let (w1, b1, w2, b2) =
        (get(index, FC1_WEIGHT)?, get(index, FC1_BIAS)?, get(index, FC2_WEIGHT)?, get(index, FC2_BIAS)?);
    let (x, y) = (get(index, SAMPLES_X)?, get(index, SAMPLES_Y)?);
    let (n_hidden, n_in) = dims(&w1, 2)?;
    let (n_out, hidden2) = dims(&w2, 2)?;
    let (n, x_width) = dims(&x, 2)?;
    if dims(&b1, 1)?.0 != n_hidden || hidden2 != n_hidden || dims(&b2, 1)?.0 != n_out {
        return Err("layer shapes do not chain");
    }
    if x_width != n_in || dims(&y, 1)?.0 != n || y.dtype() != DType::U8 {
        return Err("samples do not match the first layer or the labels");
    }
    if n_in > MAX_IN || n_hidden > MAX_HIDDEN || n_out > MAX_CLASSES || n > MAX_SAMPLES {
        return Err("model larger than MAX_IN / MAX_HIDDEN / MAX_CLASSES / MAX_SAMPLES");
    }
    Ok(Model {
        w1: view_f32(&w1)?,
        b1: view_f32(&b1)?,
        w2: view_f32(&w2)?,
        b2: view_f32(&b2)?,
        x: view_f32(&x)?,
        labels: y.as_slice::<u8>().ok_or("labels must be u8")?,
        n_in,
        n_hidden,
        n_out,
    })
}

/// Finds `fc1.weight.mxfp4` by name, checks that it can stand in for
/// `fc1.weight`, and reads it through the core's `Dequantizer` (its scales
/// found through the quantization metadata): no buffer, no heap.
pub fn mxfp4_fc1<'a>(index: &NameIndex<'a, '_>, m: &Model<'_>) -> Result<Dequantizer<'a>, &'static str> {
    let q = get(index, FC1_MXFP4)?;
    if q.dtype() != DType::E2M1 || dims(&q, 2)? != (m.n_hidden, m.n_in) {
        return Err("fc1.weight.mxfp4 is not an e2m1 tensor of fc1.weight's shape");
    }
    Dequantizer::new(&q).map_err(|_| "fc1.weight.mxfp4 cannot be dequantized")
}

/// Where fc1's weights come from.
pub enum Fc1<'a, 'q> {
    F32(&'a [f32]),
    Mxfp4(&'q Dequantizer<'a>),
}

impl Fc1<'_, '_> {
    pub fn weight(&self, n_in: usize, h: usize, i: usize) -> f32 {
        match self {
            Fc1::F32(w) => w.get(h * n_in + i).copied().unwrap_or(f32::NAN),
            Fc1::Mxfp4(q) => q.get_2d(h, i).unwrap_or(f32::NAN),
        }
    }
}

/// The forward pass of one sample: (argmax, top-1 minus top-2 logit).
fn classify(m: &Model<'_>, fc1: &Fc1<'_, '_>, x: &[f32]) -> (usize, f32) {
    let mut hidden = [0f32; MAX_HIDDEN];
    for (h, out) in hidden.iter_mut().enumerate().take(m.n_hidden) {
        let mut s = 0f32;
        for (i, xi) in x.iter().enumerate().take(m.n_in) {
            s += fc1.weight(m.n_in, h, i) * xi;
        }
        *out = (s + m.b1.get(h).copied().unwrap_or(0.0)).max(0.0);
    }
    let mut logits = [0f32; MAX_CLASSES];
    for (k, out) in logits.iter_mut().enumerate().take(m.n_out) {
        let row = m.w2.get(k * m.n_hidden..(k + 1) * m.n_hidden).unwrap_or(&[]);
        *out = row.iter().zip(&hidden).fold(0.0, |acc, (w, a)| acc + w * a) + m.b2.get(k).copied().unwrap_or(0.0);
    }
    let logits = &logits[..m.n_out];
    let best = (0..logits.len()).fold(0, |b, k| if logits[k] > logits[b] { k } else { b });
    let second = logits.iter().enumerate().filter(|&(k, _)| k != best).fold(f32::NEG_INFINITY, |a, (_, v)| a.max(*v));
    (best, logits[best] - second)
}

/// The predictions over every sample.
pub struct Eval {
    pub preds: [u8; MAX_SAMPLES],
    pub n: usize,
    pub correct: usize,
    pub min_gap: f32,
}

pub fn evaluate(m: &Model<'_>, fc1: &Fc1<'_, '_>) -> Eval {
    let mut e = Eval { preds: [0; MAX_SAMPLES], n: m.labels.len(), correct: 0, min_gap: f32::INFINITY };
    for (s, (sample, &label)) in m.x.chunks_exact(m.n_in.max(1)).zip(m.labels).enumerate().take(MAX_SAMPLES) {
        let (class, gap) = classify(m, fc1, sample);
        e.correct += usize::from(usize::from(label) == class);
        e.preds[s] = class as u8;
        e.min_gap = e.min_gap.min(gap);
    }
    e
}
