//! The example model on the device: its tensors looked up by name, viewed
//! in place or copied into a pool, the MXFP4 first layer dequantized on the
//! fly, and the forward pass over the stored samples.

use cortex_m_semihosting::hprintln;
use kiln_nostd::dequant::Dequantizer;
use kiln_nostd::{directory::NameIndex, DType, Tensor};

// Tensor names of the example model.
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
const MAX_SAMPLES: usize = 64;

/// Bump allocator over the f32 pool, for tensors copied with `copy_to`.
pub struct Pool<'a>(pub &'a mut [f32]);

impl<'a> Pool<'a> {
    fn take(&mut self, n: usize) -> Option<&'a mut [f32]> {
        if n > self.0.len() {
            return None;
        }
        let (head, tail) = core::mem::take(&mut self.0).split_at_mut(n);
        self.0 = tail;
        Some(head)
    }
}

/// An f32 tensor's values: borrowed in place when the host and alignment allow,
/// else decoded into the pool. The flag is true when borrowed.
fn load_f32<'a>(t: &Tensor<'a>, pool: &mut Pool<'a>) -> Result<(&'a [f32], bool), &'static str> {
    if t.dtype() != DType::F32 {
        return Err("expected an f32 tensor");
    }
    if let Some(s) = t.as_slice::<f32>() {
        return Ok((s, true));
    }
    let n = usize::try_from(t.element_count()).map_err(|_| "tensor too large")?;
    let buf = pool.take(n).ok_or("f32 pool exhausted")?;
    t.copy_to(buf).map_err(|_| "copy_to refused")?;
    Ok((buf, false))
}

/// `[a]` or `[a, b]` of a tensor as usizes (`b` = 1 for rank 1).
fn dims(t: &Tensor<'_>, rank: usize) -> Result<(usize, usize), &'static str> {
    let conv = |d: u64| usize::try_from(d).map_err(|_| "dimension too large");
    match (rank, t.shape()) {
        (1, &[a]) => Ok((conv(a)?, 1)),
        (2, &[a, b]) => Ok((conv(a)?, conv(b)?)),
        _ => Err("tensor has an unexpected rank"),
    }
}

fn get<'a>(index: &NameIndex<'a, '_>, name: &str) -> Result<Tensor<'a>, &'static str> {
    match index.get(name) {
        Some(t) => Ok(t),
        None => {
            hprintln!("  tensor `{}` missing", name);
            Err("a tensor of the example model is missing")
        }
    }
}

/// The f32 MLP: weights `[out, in]`, ReLU after the first layer.
#[derive(Clone, Copy)]
pub struct Net<'a> {
    pub w1: &'a [f32],
    pub b1: &'a [f32],
    pub w2: &'a [f32],
    pub b2: &'a [f32],
    pub n_in: usize,
    pub n_hidden: usize,
    pub n_out: usize,
}

/// The model and its samples, as loaded.
pub struct Loaded<'a> {
    pub net: Net<'a>,
    pub x: &'a [f32],
    pub labels: &'a [u8],
    pub n: usize,
    pub all_in_place: bool,
    pub copied_all: bool,
}

/// Looks every tensor up by name, takes the shapes from the directory and
/// checks that they chain; `verbose` prints how each tensor was obtained.
pub fn load<'a>(index: &NameIndex<'a, '_>, pool: &mut Pool<'a>, verbose: bool) -> Result<Loaded<'a>, &'static str> {
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
    let mut flags = [false; 5];
    let mut vals: [&'a [f32]; 5] = [&[]; 5];
    for (k, t) in [w1, b1, w2, b2, x].iter().enumerate() {
        let (v, in_place) = load_f32(t, pool)?;
        vals[k] = v;
        flags[k] = in_place;
        if !verbose {
            continue;
        }
        hprintln!(
            "  {:<10} {:?} {}",
            t.name().unwrap_or("?"),
            t.shape(),
            if in_place { "in place (as_slice::<f32>)" } else { "copied (copy_to::<f32>)" }
        );
    }
    // One-byte labels can always be viewed in place.
    let labels = y.as_slice::<u8>().ok_or("labels must be u8")?;
    if verbose {
        hprintln!("  {:<10} {:?} in place (as_slice::<u8>)", SAMPLES_Y, y.shape());
    }
    Ok(Loaded {
        net: Net { w1: vals[0], b1: vals[1], w2: vals[2], b2: vals[3], n_in, n_hidden, n_out },
        x: vals[4],
        labels,
        n,
        all_in_place: flags.iter().all(|&f| f),
        copied_all: flags.iter().all(|&f| !f),
    })
}

/// An MXFP4 (e2m1 elements, e8m0 block scales) `[rows, cols]` tensor, read
/// in place and dequantized one element at a time by the core's
/// `Dequantizer` (spec §11.1): no buffer, no heap.
pub struct Mxfp4<'a>(Dequantizer<'a>);

impl Mxfp4<'_> {
    pub fn weight(&self, r: usize, c: usize) -> f32 {
        self.0.get_2d(r, c).unwrap_or(f32::NAN)
    }
}

/// Finds `fc1.weight.mxfp4` by name and its scales through `Tensor::quant()`,
/// and checks that it can stand in for `fc1.weight`.
pub fn mxfp4_fc1<'a>(index: &NameIndex<'a, '_>, f32_model: &Loaded<'_>) -> Result<Mxfp4<'a>, &'static str> {
    let q = get(index, FC1_MXFP4)?;
    if q.dtype() != DType::E2M1 {
        return Err("fc1.weight.mxfp4 is not e2m1");
    }
    let (rows, cols) = dims(&q, 2)?;
    if (rows, cols) != (f32_model.net.n_hidden, f32_model.net.n_in) {
        return Err("fc1.weight.mxfp4 does not have the shape of fc1.weight");
    }
    let quant = q.quant().ok_or("fc1.weight.mxfp4 carries no quantization metadata")?;
    let scale = quant.scale;
    if scale.dtype() != DType::E8M0 || quant.axis > 1 {
        return Err("expected e8m0 scales on axis 0 or 1");
    }
    hprintln!(
        "  {} {:?} e2m1, scheme {} axis {} group {}: scales via quant() -> [{}] {} {:?} {}{}",
        FC1_MXFP4,
        q.shape(),
        quant.scheme,
        quant.axis,
        quant.group_size,
        scale.index(),
        scale.name().unwrap_or("<unnamed>"),
        scale.shape(),
        scale.dtype().name(),
        if quant.outer.is_some() { ", outer scale" } else { "" }
    );
    Dequantizer::new(&q).map(Mxfp4).map_err(|_| "fc1.weight.mxfp4 cannot be dequantized")
}

/// Where fc1's weights come from.
pub enum Fc1<'a> {
    F32(&'a [f32]),
    Mxfp4(Mxfp4<'a>),
}

impl Fc1<'_> {
    pub fn weight(&self, n_in: usize, h: usize, i: usize) -> f32 {
        match self {
            Fc1::F32(w) => w.get(h * n_in + i).copied().unwrap_or(f32::NAN),
            Fc1::Mxfp4(q) => q.weight(h, i),
        }
    }
}

/// The forward pass; returns (argmax, top-1 minus top-2 logit).
fn classify(net: &Net<'_>, fc1: &Fc1<'_>, x: &[f32]) -> (usize, f32) {
    let mut hidden = [0f32; MAX_HIDDEN];
    for (h, out) in hidden.iter_mut().enumerate().take(net.n_hidden) {
        let mut s = 0f32;
        for (i, xi) in x.iter().enumerate().take(net.n_in) {
            s += fc1.weight(net.n_in, h, i) * xi;
        }
        *out = (s + net.b1.get(h).copied().unwrap_or(0.0)).max(0.0);
    }
    let mut logits = [0f32; MAX_CLASSES];
    for (k, out) in logits.iter_mut().enumerate().take(net.n_out) {
        let row = net.w2.get(k * net.n_hidden..(k + 1) * net.n_hidden).unwrap_or(&[]);
        let s: f32 = row.iter().zip(&hidden).fold(0.0, |acc, (w, a)| acc + w * a);
        *out = s + net.b2.get(k).copied().unwrap_or(0.0);
    }
    let logits = &logits[..net.n_out];
    let mut best = 0;
    for (k, v) in logits.iter().enumerate() {
        if *v > logits[best] {
            best = k;
        }
    }
    let second = logits.iter().enumerate().filter(|&(k, _)| k != best).fold(f32::NEG_INFINITY, |m, (_, v)| m.max(*v));
    (best, logits[best] - second)
}

pub struct Eval {
    preds: [u8; MAX_SAMPLES],
    pub n: usize,
    pub correct: usize,
    pub min_gap: f32,
}

impl Eval {
    pub fn preds(&self) -> &[u8] {
        &self.preds[..self.n]
    }
}

/// Classifies every sample; `verbose` prints one line per sample.
pub fn evaluate(m: &Loaded<'_>, fc1: &Fc1<'_>, verbose: bool) -> Eval {
    let mut e = Eval { preds: [0; MAX_SAMPLES], n: m.n, correct: 0, min_gap: f32::INFINITY };
    let width = m.net.n_in.max(1);
    for (s, (sample, &label)) in m.x.chunks_exact(width).zip(m.labels).enumerate().take(m.n) {
        let (class, gap) = classify(&m.net, fc1, sample);
        let ok = usize::from(label) == class;
        e.correct += usize::from(ok);
        e.preds[s] = class as u8;
        e.min_gap = e.min_gap.min(gap);
        if verbose {
            hprintln!(
                "  sample {:>2}: class {} (label {}) {}, top-2 gap {:.3}",
                s,
                class,
                label,
                if ok { "ok" } else { "WRONG" },
                gap
            );
        }
    }
    e
}
