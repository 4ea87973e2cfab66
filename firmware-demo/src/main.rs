//! Kiln v2 on a Cortex-M3 (LM3S6965 under QEMU): validate the bundled example
//! model (`spec/examples/digits-mlp.kiln`) in place, run it on its own
//! labelled samples in f32 and with an MXFP4 first layer dequantized on the
//! fly, show that corrupted copies are rejected with the spec's error
//! codes, and take an over-the-air update (`ota.rs`): a new model in
//! 256-byte packets, checked by `kiln_nostd::Incremental` as it is written
//! into the inactive slot and activated only when accepted. Output goes
//! through semihosting; the exit status is 0 only when every check matched
//! its expectation.
//!
//! The model (see spec/examples/README.md), read by name, shapes from the
//! directory: `logits = fc2.weight @ relu(fc1.weight @ x + fc1.bias) + fc2.bias`,
//! prediction = argmax. Weights are `[out, in]` (row = output unit).
//! `fc1.weight.mxfp4` is an e2m1 copy of `fc1.weight` whose scale tensor is
//! found through its quantization metadata; `samples.x` / `samples.y` are
//! the test images and their labels.
#![no_std]
#![no_main]

use core::ptr::{addr_of, addr_of_mut};

use cortex_m as _; // critical-section implementation (single core)
use cortex_m_rt::{entry, exception, ExceptionFrame};
use cortex_m_semihosting::{debug, hprintln};
use kiln_nostd::header::{DESCRIPTOR_LEN, HEADER_LEN};
use kiln_nostd::{mx, scratch_len, DType, Directory, Error, ErrorCode, Header, NameIndex, Parser, Rule, Tensor};

#[cfg(feature = "ota")]
mod ota;

/// 64-byte alignment: every canonical payload offset is a multiple of 64, so
/// an aligned block gives aligned payloads and `as_slice::<f32>()` works in place.
#[repr(C, align(64))]
struct Aligned<T>(T);

const MODEL_LEN: usize = include_bytes!("../../spec/examples/digits-mlp.kiln").len();
/// The bundled example model, in flash.
static MODEL: Aligned<[u8; MODEL_LEN]> = Aligned(*include_bytes!("../../spec/examples/digits-mlp.kiln"));

const MODEL_FILE_LEN: usize = include_bytes!("../../spec/examples/digits-mlp.model.kiln").len();
/// The same model as a model file (spec/model-file.md): a frame, metadata,
/// then the block, whose payload region sits at a 4 KiB offset in the file.
static MODEL_FILE: Aligned<[u8; MODEL_FILE_LEN]> =
    Aligned(*include_bytes!("../../spec/examples/digits-mlp.model.kiln"));

/// RAM copy for the misaligned run and the corruption tests (+64: room for a
/// trailing byte and a copy at offset 1); afterwards slot B of the OTA update.
#[cfg(not(feature = "ota"))]
const RAM_LEN: usize = MODEL_LEN + 64;
#[cfg(feature = "ota")]
const RAM_LEN: usize = if ota::SLOT_LEN > MODEL_LEN + 64 { ota::SLOT_LEN } else { MODEL_LEN + 64 };
static mut RAM: Aligned<[u8; RAM_LEN]> = Aligned([0; RAM_LEN]);

/// f32 storage for tensors that cannot be viewed in place (the misaligned
/// run copies fc1, fc2 and samples.x: 4458 values for the example model).
const POOL_WORDS: usize = 4608;
static mut POOL: Aligned<[f32; POOL_WORDS]> = Aligned([0.0; POOL_WORDS]);

// Tensor names of the example model.
const FC1_WEIGHT: &str = "fc1.weight";
const FC1_BIAS: &str = "fc1.bias";
const FC2_WEIGHT: &str = "fc2.weight";
const FC2_BIAS: &str = "fc2.bias";
const FC1_MXFP4: &str = "fc1.weight.mxfp4";
const SAMPLES_X: &str = "samples.x";
const SAMPLES_Y: &str = "samples.y";

/// The figures spec/examples/README.md records for the 32 stored samples
/// (measured by make_digits_model.py in float64; the smallest top-2 logit gap
/// is 0.215, so f32 soft-float gives the same classes).
const EXPECT_F32_CORRECT: usize = 32;
const EXPECT_MXFP4_CORRECT: usize = 31;
const EXPECT_AGREE: usize = 31;
/// README: largest |w - dequant(w)| over fc1.
const EXPECT_MAX_DEQUANT_ERROR: f32 = 0.24784;

/// Name-index scratch: enough for 32 tensors (`scratch_len(32) == 64`).
const SCRATCH_SLOTS: usize = 64;
const MAX_IN: usize = 64;
const MAX_HIDDEN: usize = 64;
const MAX_CLASSES: usize = 16;
const MAX_SAMPLES: usize = 64;
/// Budget for the parser's stack (bytes); override at build time with
/// `KILN_STACK_BUDGET=2048 cargo run --release`.
fn stack_budget() -> usize {
    option_env!("KILN_STACK_BUDGET").and_then(|s| s.parse().ok()).unwrap_or(1024)
}

#[entry]
fn main() -> ! {
    let ok = run();
    hprintln!("result: {}", if ok { "PASS" } else { "FAIL" });
    debug::exit(if ok { debug::EXIT_SUCCESS } else { debug::EXIT_FAILURE });
    loop {
        cortex_m::asm::nop();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("panic: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::nop();
    }
}

#[exception]
unsafe fn HardFault(ef: &ExceptionFrame) -> ! {
    hprintln!("hard fault: {:?}", ef);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::nop();
    }
}

/// Counts checks that did not match their expectation.
#[derive(Default)]
struct Checks {
    failed: usize,
}

impl Checks {
    fn expect(&mut self, ok: bool, what: &str) -> bool {
        if !ok {
            self.failed += 1;
            hprintln!("  CHECK FAILED: {}", what);
        }
        ok
    }
}

fn run() -> bool {
    let mut chk = Checks::default();
    let model: &'static [u8] = &MODEL.0;
    // SAFETY: `run` is entered once; these are the only references to the statics.
    let ram: &'static mut [u8] = unsafe { &mut (*addr_of_mut!(RAM)).0 };
    let pool_mem: &'static mut [f32] = unsafe { &mut (*addr_of_mut!(POOL)).0 };

    hprintln!("kiln firmware demo (LM3S6965, Cortex-M3)");
    hprintln!("digits-mlp.kiln: {} bytes in flash at {:#010x}", model.len(), model.as_ptr() as usize);

    // --- 1. validate in place, with a fixed name-index scratch
    let count = Header::peek_count(model).unwrap_or(0);
    let want = scratch_len(count);
    hprintln!("tensor_count {}: name index needs {} scratch slots, have {}", count, want, SCRATCH_SLOTS);
    chk.expect(want <= SCRATCH_SLOTS, "scratch large enough for a hashed index");
    let mut scratch = [0u32; SCRATCH_SLOTS];
    let s = &mut scratch;
    let (parsed, stack_indexed) = measure_stack(move || Parser::new().scratch(s).parse_indexed(model));
    let (dir, index) = match parsed {
        Ok(p) => p,
        Err(e) => {
            hprintln!("model REJECTED: {}", e);
            return false;
        }
    };
    hprintln!(
        "valid: {} tensors, block {} bytes, payload at +{}, name index: {}",
        dir.len(),
        dir.block_len(),
        dir.payload_start(),
        if index.is_hashed() { "hashed (scratch)" } else { "linear scan" }
    );
    for t in dir.iter() {
        let name = t.name().unwrap_or("<unnamed>");
        let found = index.get(name).map(|u| u.index());
        hprintln!(
            "  [{}] {:<23} {:<4} {:?}, {} bytes at +{}{}",
            t.index(),
            name,
            t.dtype().name(),
            t.shape(),
            t.byte_len(),
            t.absolute_offset(),
            if found == Some(t.index()) { "" } else { ", NOT FOUND by name" }
        );
        if let Some(q) = t.quant() {
            hprintln!(
                "      quant scheme {}, axis {}, group {}, scales [{}] {}",
                q.scheme,
                q.axis,
                q.group_size,
                q.scale.index(),
                q.scale.name().unwrap_or("<unnamed>")
            );
        }
        chk.expect(found == Some(t.index()), "the name index finds every tensor");
    }
    chk.expect(index.get("no-such-tensor").is_none(), "the name index misses an absent name");

    // --- 2. stack depth of parse (stack painting)
    let (plain, stack_plain) = measure_stack(|| Directory::parse(model));
    chk.expect(plain.map(|d| d.len()).ok() == Some(dir.len()), "parse without scratch agrees");
    let stack = stack_indexed.max(stack_plain);
    hprintln!("stack used by parse: {} bytes", stack);
    let budget = stack_budget();
    hprintln!(
        "  (Parser+scratch parse_indexed: {} bytes, Directory::parse without scratch: {} bytes; budget {})",
        stack_indexed,
        stack_plain,
        budget
    );
    chk.expect(stack > 0 && stack <= budget, "parse stack within the budget (KILN_STACK_BUDGET)");

    // --- 3. f32 model from flash: every tensor viewed in place
    hprintln!("run 1: f32 model in flash (64-byte aligned, zero-copy)");
    let mut pool = Pool(&mut pool_mem[..]);
    let flash = match load(&index, &mut pool, true) {
        Ok(m) => m,
        Err(e) => {
            chk.expect(false, e);
            return false;
        }
    };
    chk.expect(flash.all_in_place, "every f32 tensor is borrowed in place from flash");
    let f32_run = evaluate(&flash, &Fc1::F32(flash.net.w1), true);
    hprintln!("  f32 accuracy: {}/{} (smallest top-2 logit gap {:.3})", f32_run.correct, f32_run.n, f32_run.min_gap);
    chk.expect(f32_run.correct == EXPECT_F32_CORRECT && f32_run.n == EXPECT_F32_CORRECT, "f32 accuracy is 32/32");

    // --- 4. MXFP4 first layer, dequantized element by element while it runs
    hprintln!("run 2: fc1 from {} (MXFP4, dequantized on the fly)", FC1_MXFP4);
    match mxfp4_fc1(&index, &flash) {
        Ok(q) => {
            let mut worst = 0f32;
            for h in 0..flash.net.n_hidden {
                for i in 0..flash.net.n_in {
                    let w = flash.net.w1.get(h * flash.net.n_in + i).copied().unwrap_or(f32::NAN);
                    let d = (w - q.weight(h, i)).abs();
                    // A NaN (bad code or scale) makes the figure NaN, and the check below fails.
                    if d > worst || d.is_nan() {
                        worst = d;
                    }
                }
            }
            hprintln!(
                "  largest |fc1.weight - dequant(fc1.weight.mxfp4)|: {:.5} (README: {:.5})",
                worst,
                EXPECT_MAX_DEQUANT_ERROR
            );
            chk.expect((worst - EXPECT_MAX_DEQUANT_ERROR).abs() < 1e-5, "dequantization error matches the README");
            let q_run = evaluate(&flash, &Fc1::Mxfp4(q), false);
            let agree = f32_run.preds().iter().zip(q_run.preds()).filter(|(a, b)| a == b).count();
            for (s, (a, b)) in f32_run.preds().iter().zip(q_run.preds()).enumerate() {
                let label = flash.labels.get(s).copied().unwrap_or(0);
                hprintln!(
                    "  sample {:>2}: mxfp4 class {} (label {}) {}{}",
                    s,
                    b,
                    label,
                    if *b == label { "ok" } else { "WRONG" },
                    if a == b { "" } else { ", differs from f32" }
                );
            }
            hprintln!(
                "  MXFP4 accuracy: {}/{} (README: {}/32, smallest top-2 logit gap {:.3}); f32 and MXFP4 agree on {}/{} (README: {}/32)",
                q_run.correct,
                q_run.n,
                EXPECT_MXFP4_CORRECT,
                q_run.min_gap,
                agree,
                q_run.n,
                EXPECT_AGREE
            );
            chk.expect(q_run.correct == EXPECT_MXFP4_CORRECT, "MXFP4 accuracy matches the README (31/32)");
            chk.expect(agree == EXPECT_AGREE, "f32/MXFP4 agreement matches the README (31/32)");
        }
        Err(e) => {
            chk.expect(false, e);
        }
    }

    // --- 5. the same model from a misaligned RAM copy: as_slice refuses, copy_to decodes
    {
        let copy = &mut ram[1..1 + MODEL_LEN];
        copy.copy_from_slice(model);
        let copy: &[u8] = copy;
        let mut scratch2 = [0u32; SCRATCH_SLOTS];
        hprintln!("run 3: f32 model from a RAM copy at {:#010x} (misaligned by 1 byte)", copy.as_ptr() as usize);
        match Parser::new().scratch(&mut scratch2).parse_indexed(copy) {
            Ok((_, index2)) => {
                let mut pool = Pool(&mut pool_mem[..]);
                match load(&index2, &mut pool, true) {
                    Ok(moved) => {
                        chk.expect(
                            moved.copied_all,
                            "every f32 tensor is copied out (copy_to) from the misaligned copy",
                        );
                        let r = evaluate(&moved, &Fc1::F32(moved.net.w1), false);
                        let same = r.preds() == f32_run.preds();
                        hprintln!(
                            "  accuracy: {}/{}; predictions {} run 1",
                            r.correct,
                            r.n,
                            if same { "identical to" } else { "DIFFER from" }
                        );
                        chk.expect(same, "misaligned copy gives the same predictions");
                    }
                    Err(e) => {
                        chk.expect(false, e);
                    }
                }
            }
            Err(e) => {
                chk.expect(false, "misaligned copy parses");
                hprintln!("  rejected: {}", e);
            }
        }
    }

    // --- 6. corrupted copies are rejected with the expected code
    hprintln!("corruption tests (RAM copy, 64-byte aligned):");
    corruption_tests(&dir, model, ram, &mut chk);

    // --- 7. over-the-air update into slot B (the RAM buffer), activated only when valid
    #[cfg(feature = "ota")]
    ota::run(model, ram, &mut chk);

    // --- 8. the model-file form: frame and metadata checked, then the same directory
    model_file(&mut chk);

    if chk.failed != 0 {
        hprintln!("{} check(s) failed", chk.failed);
    }
    chk.failed == 0
}

/// Opens the model-file form of the example from flash by content (as any
/// reader without a type does), prints its metadata and runs it in place.
fn model_file(chk: &mut Checks) {
    let file: &'static [u8] = &MODEL_FILE.0;
    hprintln!("model file: digits-mlp.model.kiln, {} bytes in flash", file.len());
    chk.expect(kiln_nostd::model::is_model_file(file), "the model file is told apart by content");
    let (metadata, dir) = match kiln_nostd::model::parse_any(file) {
        Ok((Some(m), dir)) => (m, dir),
        Ok((None, _)) | Err(_) => {
            chk.expect(false, "the model file parses as a model file");
            return;
        }
    };
    for (k, v) in metadata.iter() {
        hprintln!("  {} = {}", k, v);
    }
    chk.expect(metadata.get("license").is_some() && metadata.padding() > 0, "metadata shown, padding hidden");
    let mut scratch = [0u32; SCRATCH_SLOTS];
    let index = NameIndex::build(dir, &mut scratch);
    // Everything in place: the payload region is 4 KiB aligned in the file.
    let mut none: [f32; 0] = [];
    let mut pool = Pool(&mut none[..]);
    match load(&index, &mut pool, false) {
        Ok(m) => {
            let run = evaluate(&m, &Fc1::F32(m.net.w1), false);
            hprintln!("  f32 accuracy from the model file: {}/{} (every tensor in place)", run.correct, run.n);
            chk.expect(m.all_in_place && run.correct == EXPECT_F32_CORRECT, "the model file runs in place, 32/32");
        }
        Err(e) => {
            chk.expect(false, e);
        }
    }
    // One byte of damage in the metadata: the Frozen reader's error, at that byte.
    let key_len_at = kiln_nostd::frozen::FRAME_LEN + 4;
    let mut bad = [0u8; 64];
    if let Some(head) = file.get(..64) {
        bad.copy_from_slice(head);
    }
    bad[key_len_at] = 0xff;
    let e = kiln_nostd::model::parse_any(&bad).err();
    hprintln!("  damaged metadata: {}", e.map_or(0, |e| e.offset()));
    chk.expect(e.is_some_and(|e| e.code() == ErrorCode::Eof && e.offset() == key_len_at), "damaged metadata is EOF at its length word");
}

// ---------------------------------------------------------------- the model

/// Bump allocator over the f32 pool, for tensors copied with `copy_to`.
struct Pool<'a>(&'a mut [f32]);

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
struct Net<'a> {
    w1: &'a [f32],
    b1: &'a [f32],
    w2: &'a [f32],
    b2: &'a [f32],
    n_in: usize,
    n_hidden: usize,
    n_out: usize,
}

/// The model and its samples, as loaded.
struct Loaded<'a> {
    net: Net<'a>,
    x: &'a [f32],
    labels: &'a [u8],
    n: usize,
    all_in_place: bool,
    copied_all: bool,
}

/// Looks every tensor up by name, takes the shapes from the directory and
/// checks that they chain; `verbose` prints how each tensor was obtained.
fn load<'a>(index: &NameIndex<'a, '_>, pool: &mut Pool<'a>, verbose: bool) -> Result<Loaded<'a>, &'static str> {
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
/// in place and dequantized one element at a time: no buffer, no heap.
struct Mxfp4<'a> {
    /// Packed e2m1 codes, low nibble first.
    codes: &'a [u8],
    /// e8m0 scale bytes, row-major over `[rows, groups]` (axis 1) or `[groups, cols]` (axis 0).
    scales: &'a [u8],
    cols: usize,
    axis: usize,
    group: usize,
    groups_per_row: usize,
    /// Scheme 2's outer f32 scale, else 1.
    outer: f32,
}

impl Mxfp4<'_> {
    fn weight(&self, r: usize, c: usize) -> f32 {
        let s =
            if self.axis == 1 { r * self.groups_per_row + c / self.group } else { (r / self.group) * self.cols + c };
        match (mx::nibble(self.codes, r * self.cols + c), self.scales.get(s)) {
            (Some(code), Some(&scale)) => mx::e2m1_to_f32(code) * mx::e8m0_to_f32(scale) * self.outer,
            _ => f32::NAN,
        }
    }
}

/// Finds `fc1.weight.mxfp4` by name and its scales through `Tensor::quant()`,
/// and checks that it can stand in for `fc1.weight`.
fn mxfp4_fc1<'a>(index: &NameIndex<'a, '_>, f32_model: &Loaded<'_>) -> Result<Mxfp4<'a>, &'static str> {
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
    let group = usize::try_from(quant.group_size).map_err(|_| "group too large")?;
    let groups_per_row = cols.div_ceil(group.max(1));
    // The validator checked the scale count; the row-major layout is the convention.
    let outer = match quant.outer {
        Some(o) => {
            let mut v = [0f32; 1];
            o.copy_to(&mut v).map_err(|_| "outer scale is not one f32")?;
            v[0]
        }
        None => 1.0,
    };
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
    Ok(Mxfp4 {
        codes: q.bytes(),
        scales: scale.bytes(),
        cols,
        axis: quant.axis,
        group: group.max(1),
        groups_per_row,
        outer,
    })
}

/// Where fc1's weights come from.
enum Fc1<'a> {
    F32(&'a [f32]),
    Mxfp4(Mxfp4<'a>),
}

impl Fc1<'_> {
    fn weight(&self, n_in: usize, h: usize, i: usize) -> f32 {
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

struct Eval {
    preds: [u8; MAX_SAMPLES],
    n: usize,
    correct: usize,
    min_gap: f32,
}

impl Eval {
    fn preds(&self) -> &[u8] {
        &self.preds[..self.n]
    }
}

/// Classifies every sample; `verbose` prints one line per sample.
fn evaluate(m: &Loaded<'_>, fc1: &Fc1<'_>, verbose: bool) -> Eval {
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

// ----------------------------------------------------------- corruption tests

// Descriptor field offsets (spec §8 table).
const AT_DTYPE: usize = 0;
const AT_RESERVED: usize = 3;
const AT_GROUP_SIZE: usize = 20;
const AT_SCALE_INDEX: usize = 24;

struct Case {
    what: &'static str,
    /// Byte to overwrite (`None`: length change only).
    at: Option<usize>,
    value: u8,
    /// Buffer length (0: case not applicable to this model).
    len: usize,
    code: ErrorCode,
    rule: Rule,
    offset: usize,
}

fn corruption_tests(dir: &Directory<'_>, model: &[u8], ram: &mut [u8], chk: &mut Checks) {
    let len = model.len();
    // Positions from the directory: descriptor i starts at 64 + 128 i, the
    // name heap right after the last descriptor.
    let desc = |i: usize, field: usize| HEADER_LEN + DESCRIPTOR_LEN * i + field;
    let heap = HEADER_LEN + DESCRIPTOR_LEN * dir.len();
    let first_name = dir.get(0).map(|t| heap + usize::from(t.descriptor().name_off));
    let quantized = dir.iter().find(|t| t.quant().is_some());
    let mut cases = [
        Case {
            what: "magic byte",
            at: Some(0),
            value: b'X',
            len,
            code: ErrorCode::Frame,
            rule: Rule::DirectoryMagic,
            offset: 0,
        },
        Case {
            what: "version byte",
            at: Some(4),
            value: 3,
            len,
            code: ErrorCode::Frame,
            rule: Rule::DirectoryVersion,
            offset: 4,
        },
        Case {
            what: "descriptor 0, reserved byte 3",
            at: Some(desc(0, AT_RESERVED)),
            value: 1,
            len,
            code: ErrorCode::Frame,
            rule: Rule::DescriptorReserved,
            offset: desc(0, AT_RESERVED),
        },
        Case {
            what: "descriptor 0, dtype code -> 20 (reserved)",
            at: Some(desc(0, AT_DTYPE)),
            value: 20,
            len,
            code: ErrorCode::Type,
            rule: Rule::UnknownDtype,
            offset: desc(0, AT_DTYPE),
        },
        Case {
            what: "first name byte -> 0xFF",
            at: None,
            value: 0xFF,
            len: 0,
            code: ErrorCode::Utf8,
            rule: Rule::NameUtf8,
            offset: 0,
        },
        Case {
            what: "MXFP4 group_size halved",
            at: None,
            value: 0,
            len: 0,
            code: ErrorCode::Type,
            rule: Rule::ScaleCount,
            offset: 0,
        },
        Case {
            what: "last byte cut off",
            at: None,
            value: 0,
            len: len - 1,
            code: ErrorCode::Eof,
            rule: Rule::BlockTruncated,
            offset: len - 1,
        },
        Case {
            what: "one trailing byte",
            at: None,
            value: 0,
            len: len + 1,
            code: ErrorCode::Trailing,
            rule: Rule::TrailingBytes,
            offset: len,
        },
        Case {
            what: "first payload gap byte -> 0x5A",
            at: None,
            value: 0x5A,
            len: 0,
            code: ErrorCode::Type,
            rule: Rule::NonzeroGap,
            offset: 0,
        },
    ];
    if let Some(at) = first_name {
        let c = &mut cases[4];
        (c.at, c.len, c.offset) = (Some(at), len, at);
    }
    // The quantized tensor's group_size (u32, < 256 here) halved: the scale
    // tensor no longer holds one element per group (reported at scale_index).
    if let Some(q) = quantized.filter(|t| (2..256).contains(&t.descriptor().group_size)) {
        let c = &mut cases[5];
        let at = desc(q.index(), AT_GROUP_SIZE);
        (c.at, c.value, c.len, c.offset) =
            (Some(at), (q.descriptor().group_size / 2) as u8, len, desc(q.index(), AT_SCALE_INDEX));
    }
    if let Some(gap) = first_gap(dir) {
        let c = &mut cases[8];
        (c.at, c.len, c.offset) = (Some(gap), len, gap);
    }
    for c in cases.iter() {
        if c.len == 0 {
            hprintln!("  {}: not applicable to this model", c.what);
            continue;
        }
        ram[..len].copy_from_slice(model);
        ram[len..].fill(0);
        let mut change = [0u8; 2];
        if let Some(at) = c.at {
            change = [ram[at], c.value];
            ram[at] = c.value;
        }
        let buf = &ram[..c.len];
        let mut scratch = [0u32; SCRATCH_SLOTS];
        let with_scratch = Parser::new().scratch(&mut scratch).parse(buf).map(|d| d.len());
        let without = Directory::parse(buf).map(|d| d.len());
        match c.at {
            Some(at) => hprintln!("  {} (byte {}: {:#04x} -> {:#04x}):", c.what, at, change[0], change[1]),
            None => hprintln!("  {} ({} bytes):", c.what, c.len),
        }
        let expected = Error::new(c.rule, c.offset);
        match with_scratch {
            Err(e) => hprintln!(
                "    rejected {} at byte {} ({}){}",
                e.code().as_str(),
                e.offset(),
                e.rule().id(),
                if e == expected { ", as expected" } else { "" }
            ),
            Ok(n) => hprintln!("    ACCEPTED ({} tensors)", n),
        }
        if with_scratch != Err(expected) {
            hprintln!("    expected {} at byte {} ({})", c.code.as_str(), c.offset, c.rule.id());
        }
        chk.expect(c.rule.code() == c.code, "case table: rule and code agree");
        chk.expect(with_scratch == Err(expected), c.what);
        chk.expect(without == with_scratch, "parse with and without scratch agree");
    }
}

/// Absolute offset of the first padding byte between two payloads, if any.
fn first_gap(dir: &Directory<'_>) -> Option<usize> {
    let mut prev_end = None;
    for t in dir.iter() {
        if let Some(end) = prev_end {
            if t.absolute_offset() > end {
                return Some(end);
            }
        }
        prev_end = Some(t.absolute_offset() + t.byte_len());
    }
    None
}

// ------------------------------------------------------------ stack painting

const PAINT: u32 = 0xC0DE_5AFE;
const PAINT_BYTES: usize = 4096;

extern "C" {
    /// Start of the heap = end of .bss/.uninit (cortex-m-rt's link.x); the stack grows down towards it.
    static __sheap: u32;
}

#[inline(always)]
fn sp() -> usize {
    let sp: usize;
    // SAFETY: reads the stack pointer only.
    unsafe { core::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}

/// Fills `[bottom, own SP - 64)` with the pattern. Volatile stores so no
/// memset call (whose frame would sit inside the region being filled); the
/// 64-byte margin covers registers this function may push after reading SP
/// (shrink-wrapped prologue). `f` goes far deeper than that margin.
#[inline(never)]
fn paint(bottom: usize) {
    let top = (sp() & !3).saturating_sub(64);
    let mut p = bottom;
    while p < top {
        // SAFETY: free stack below the current SP, above the end of .bss.
        unsafe { core::ptr::write_volatile(p as *mut u32, PAINT) };
        p += 4;
    }
}

/// The lowest address in `[bottom, top)` whose pattern word was overwritten.
#[inline(never)]
fn lowest_touched(bottom: usize, top: usize) -> usize {
    let mut p = bottom;
    // SAFETY: the same region `paint` filled.
    while p < top && unsafe { core::ptr::read_volatile(p as *const u32) } == PAINT {
        p += 4;
    }
    p
}

#[inline(never)]
fn call<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Runs `f` below this frame and returns how many bytes of stack it used
/// (the deepest overwritten word below the caller's SP; the result slot lives
/// in the caller's frame and is not counted).
#[inline(never)]
fn measure_stack<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let top = sp();
    let floor = (addr_of!(__sheap) as usize + 3) & !3;
    let bottom = top.saturating_sub(PAINT_BYTES).max(floor);
    paint(bottom);
    let r = call(f);
    let touched = lowest_touched(bottom, top);
    if touched == bottom {
        hprintln!("  warning: the painted {} bytes were all used", top - bottom);
    }
    (r, top - touched)
}
