//! Writes the tiny demo model embedded by `firmware-demo/` (a linear
//! classifier plus labelled samples) as a Kiln v2 tensor directory.
//!
//! ```sh
//! cargo run -p kiln-nostd --example make_demo_model -- firmware-demo/model.kiln
//! ```
//!
//! Tensors (all named, canonical dict order):
//! - `b` f32 `[3]`     bias
//! - `w` f32 `[4, 3]`  weights, row-major `[in, out]`: `score[j] = b[j] + sum_i x[i] * w[i][j]`
//! - `x` f32 `[8, 4]`  samples
//! - `y` u8  `[8]`     labels (argmax of the scores, so the expected accuracy is 8/8)

use kiln_nostd::{encode_le, sort_dict, DType, TensorSpec, Writer};

const IN: usize = 4;
const OUT: usize = 3;

const W: [[f32; OUT]; IN] = [
    [1.0, -0.5, 0.0],
    [-0.5, 1.0, -0.25],
    [0.0, -0.5, 1.0],
    [0.25, 0.25, -0.5],
];
const B: [f32; OUT] = [0.1, 0.0, -0.1];
const X: [[f32; IN]; 8] = [
    [2.0, 0.0, 0.0, 1.0],
    [0.0, 2.0, 0.0, 1.0],
    [0.0, 0.0, 2.0, 0.0],
    [1.5, 0.5, 0.0, 0.0],
    [0.5, 1.5, 0.5, 0.5],
    [0.0, 0.5, 1.5, -1.0],
    [3.0, 1.0, 1.0, 0.0],
    [-1.0, 0.0, 1.0, 2.0],
];

fn scores(x: &[f32; IN]) -> [f32; OUT] {
    let mut s = B;
    for (i, xi) in x.iter().enumerate() {
        for (j, sj) in s.iter_mut().enumerate() {
            *sj += xi * W[i][j];
        }
    }
    s
}

fn argmax(s: &[f32]) -> usize {
    let mut best = 0;
    for (j, v) in s.iter().enumerate() {
        if *v > s[best] {
            best = j;
        }
    }
    best
}

fn le<T: kiln_nostd::Element>(values: &[T]) -> Vec<u8> {
    let mut out = vec![0u8; values.len() * T::WIDTH];
    encode_le(values, &mut out).expect("sized above");
    out
}

fn main() {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        eprintln!("usage: make_demo_model OUT.kiln");
        std::process::exit(2);
    });
    let labels: Vec<u8> = X
        .iter()
        .map(|x| {
            let s = scores(x);
            let k = argmax(&s);
            // Keep a clear margin so soft-float firmware gets the same argmax.
            let mut sorted = s;
            sorted.sort_by(|a, b| b.partial_cmp(a).expect("finite"));
            assert!(sorted[0] - sorted[1] > 0.2, "margin too small for sample {x:?}: {s:?}");
            k as u8
        })
        .collect();
    let w = le(&W.concat());
    let b = le(&B);
    let x = le(&X.concat());
    let n = X.len() as u64;
    let shape_w = [IN as u64, OUT as u64];
    let shape_b = [OUT as u64];
    let shape_x = [n, IN as u64];
    let shape_y = [n];
    let mut specs = [
        TensorSpec::new(DType::F32, &shape_w, &w).named("w"),
        TensorSpec::new(DType::F32, &shape_b, &b).named("b"),
        TensorSpec::new(DType::F32, &shape_x, &x).named("x"),
        TensorSpec::new(DType::U8, &shape_y, &labels).named("y"),
    ];
    sort_dict(&mut specs).expect("all named");
    let len = Writer::new().encoded_len(&specs).expect("plan");
    let mut out = vec![0u8; len];
    let written = Writer::new().write(&specs, &mut out).expect("write");
    assert_eq!(written, len);
    std::fs::write(&path, &out).unwrap_or_else(|e| panic!("write {path}: {e}"));
    println!("wrote {path}: {len} bytes, labels {labels:?}");
}
