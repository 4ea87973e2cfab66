//! Links against `memory.x` (as kiln-nopanic's build.rs does), gives the defmt
//! binary defmt's linker script, and builds the over-the-air updates the demo
//! streams in: the unsigned one (below), and the signed ones and the delta
//! of step 9 (`signed_updates`).
//!
//! The update (`$OUT_DIR/digits-mlp-ota.kiln`) is `spec/examples/digits-mlp.kiln`
//! written again with kiln-nostd's `Writer` (every tensor through
//! `TensorSpec::from_tensor`, so the eight tensors are unchanged) plus a ninth,
//! `samples.correct`: bool `[N]`, true where a float64 forward pass of the
//! model on the host classifies sample i correctly. The canonical layout
//! places it last, so its bytes are the last bytes of the block: the demo's
//! "bad bool byte in the last packet" needs that. The writer refuses anything
//! a reader would reject, and the block is parsed again here before it is saved.
use std::path::{Path, PathBuf};
use std::{env, fs};

use kiln_nostd::{DType, Directory, TensorSpec, Writer};

#[path = "build/signing.rs"]
mod signing;

const MODEL: &str = "../spec/examples/digits-mlp.kiln";
/// The appended tensor's name (the firmware looks it up by this name).
const FLAGS: &str = "samples.correct";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    link_memory_x(&out);
    // The defmt binary links defmt's linker script too (it places the log strings).
    if env::var_os("CARGO_FEATURE_DEFMT").is_some() {
        println!("cargo:rustc-link-arg-bin=firmware-defmt=-Tdefmt.x");
    }

    // The update is made from the model: remade when it changes.
    println!("cargo:rerun-if-changed={MODEL}");
    let model = fs::read(MODEL).expect("read the example model");
    let update = ota_update(&model);
    fs::write(out.join("digits-mlp-ota.kiln"), update).expect("write the OTA update");

    // Step 9: signed updates of the model file, the bad ones, and a delta.
    println!("cargo:rerun-if-changed={}", signing::FACTORY);
    println!("cargo:rerun-if-changed=build/signing.rs");
    signing::signed_updates(&out);
}

/// cortex-m-rt's `link.x` includes `memory.x` from the linker's search path:
/// this crate's copy goes into `OUT_DIR`, which is put on that path. The same
/// in both firmware crates (firmware-demo, kiln-nopanic).
fn link_memory_x(out: &Path) {
    fs::copy("memory.x", out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=memory.x");
    println!("cargo:rerun-if-changed=build.rs");
}

/// The values of an f32 tensor (host order) and its shape.
fn f32s(dir: &Directory<'_>, name: &str) -> (Vec<f64>, Vec<usize>) {
    let t = dir.find(name).unwrap_or_else(|| panic!("{name} missing"));
    assert_eq!(t.dtype(), DType::F32, "{name} is not f32");
    let mut v = vec![0f32; t.element_count() as usize];
    t.copy_to(&mut v).expect("copy_to");
    (v.into_iter().map(f64::from).collect(), t.shape().iter().map(|&d| d as usize).collect())
}

/// The example's MLP on the host, in float64:
/// `logits = fc2.weight @ relu(fc1.weight @ x + fc1.bias) + fc2.bias`, weights `[out, in]`.
struct Mlp {
    w1: Vec<f64>,
    b1: Vec<f64>,
    w2: Vec<f64>,
    b2: Vec<f64>,
    x: Vec<f64>,
    y: Vec<u8>,
    n_in: usize,
    hidden: usize,
    classes: usize,
    n: usize,
}

impl Mlp {
    fn of(dir: &Directory<'_>) -> Mlp {
        let (w1, s1) = f32s(dir, "fc1.weight");
        let (b1, _) = f32s(dir, "fc1.bias");
        let (w2, s2) = f32s(dir, "fc2.weight");
        let (b2, _) = f32s(dir, "fc2.bias");
        let (x, sx) = f32s(dir, "samples.x");
        let y = dir.find("samples.y").and_then(|t| t.as_slice::<u8>()).expect("samples.y u8").to_vec();
        let (hidden, n_in, classes, n) = (s1[0], s1[1], s2[0], sx[0]);
        assert_eq!((s2[1], sx[1], y.len()), (hidden, n_in, n), "shapes chain");
        Mlp { w1, b1, w2, b2, x, y, n_in, hidden, classes, n }
    }

    /// The hidden layer for sample `s`.
    fn hidden_of(&self, s: usize) -> Vec<f64> {
        let xs = &self.x[s * self.n_in..(s + 1) * self.n_in];
        (0..self.hidden)
            .map(|j| {
                let row = &self.w1[j * self.n_in..(j + 1) * self.n_in];
                (row.iter().zip(xs).map(|(w, v)| w * v).sum::<f64>() + self.b1[j]).max(0.0)
            })
            .collect()
    }

    /// The logits from a hidden layer, with the second layer `w2`, `b2`.
    fn logits_of(&self, w2: &[f64], b2: &[f64], h: &[f64]) -> Vec<f64> {
        (0..self.classes)
            .map(|k| w2[k * self.hidden..(k + 1) * self.hidden].iter().zip(h).map(|(w, v)| w * v).sum::<f64>() + b2[k])
            .collect()
    }
}

fn ota_update(model: &[u8]) -> Vec<u8> {
    let dir = Directory::parse(model).expect("the example model is valid");
    let net = Mlp::of(&dir);
    let n = net.n;
    let correct: Vec<u8> = (0..n)
        .map(|s| {
            let logits = net.logits_of(&net.w2, &net.b2, &net.hidden_of(s));
            let best = (0..net.classes).fold(0, |b, k| if logits[k] > logits[b] { k } else { b });
            u8::from(best == usize::from(net.y[s]))
        })
        .collect();

    let tensors: Vec<_> = dir.iter().collect();
    let mut specs: Vec<TensorSpec<'_>> = tensors.iter().map(TensorSpec::from_tensor).collect();
    let shape = [n as u64];
    specs.push(TensorSpec::new(DType::Bool, &shape, &correct).named(FLAGS));
    let mut block = vec![0u8; Writer::new().encoded_len(&specs).expect("encoded_len")];
    Writer::new().write(&specs, &mut block).expect("write the update");

    // The eight tensors are unchanged, and the bool tensor ends the block.
    let again = Directory::parse(&block).expect("the update is valid");
    for t in dir.iter() {
        let u = again.get(t.index()).expect("same index");
        assert_eq!((u.name(), u.dtype(), u.shape(), u.bytes()), (t.name(), t.dtype(), t.shape(), t.bytes()));
    }
    let flags = again.find(FLAGS).expect("appended");
    assert_eq!(flags.absolute_offset() + flags.byte_len(), block.len(), "{FLAGS} ends the block");
    block
}
