//! Kiln v2 on a Cortex-M3 (LM3S6965 under QEMU): validate the bundled example
//! model (`spec/examples/digits-mlp.kiln`) in place, run it on its own
//! labelled samples in f32 and with an MXFP4 first layer dequantized on the
//! fly, show that corrupted copies are rejected with the spec's error
//! codes, and take an over-the-air update (`ota.rs`): a new model in
//! 256-byte packets, checked by `kiln_nostd::Incremental` as it is written
//! into the inactive slot and activated only when accepted; then signed
//! updates (`signed.rs`, `delta.rs`): each checked as it arrives against
//! the vendor's Ed25519 key, the bad ones refused at the packet that proves
//! them bad, and a delta rebuilt from the running model. Output goes
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

use core::ptr::addr_of_mut;

use cortex_m as _; // critical-section implementation (single core)
use cortex_m_rt::{entry, exception, ExceptionFrame};
use cortex_m_semihosting::{debug, hprintln};
use kiln_nostd::{directory::scratch_len, wire::Header, Directory, Parser};

use checks::Checks;
use model::{evaluate, load, mxfp4_fc1, Fc1, Pool, FC1_MXFP4};
use stack::{measure_stack, stack_budget};

#[cfg(feature = "digests")]
mod boot;
mod checks;
mod corruption;
#[cfg(feature = "delta")]
mod delta;
mod model;
mod model_file;
#[cfg(feature = "ota")]
mod ota;
#[cfg(feature = "signed")]
mod signed;
mod stack;
#[cfg(any(feature = "digests", feature = "signed"))]
mod ticks;

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

#[cfg(feature = "ota")]
const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}

/// RAM copy for the misaligned run and the corruption tests (+64: room for a
/// trailing byte and a copy at offset 1); afterwards slot B of the OTA
/// update, and slot B of the signed updates.
#[cfg(not(feature = "ota"))]
const RAM_LEN: usize = MODEL_LEN + 64;
#[cfg(all(feature = "ota", not(feature = "signed")))]
const RAM_LEN: usize = max(ota::SLOT_LEN, MODEL_LEN + 64);
#[cfg(feature = "signed")]
const RAM_LEN: usize = max(max(ota::SLOT_LEN, MODEL_LEN + 64), signed::SLOT_LEN);
static mut RAM: Aligned<[u8; RAM_LEN]> = Aligned([0; RAM_LEN]);

/// f32 storage for tensors that cannot be viewed in place (the misaligned
/// run copies fc1, fc2 and samples.x: 4458 values for the example model);
/// afterwards, as bytes, slot C of the signed updates.
#[cfg(not(feature = "signed"))]
const POOL_WORDS: usize = 4608;
#[cfg(feature = "signed")]
const POOL_WORDS: usize = max(4608, signed::SLOT_LEN / 4);
static mut POOL: Aligned<[f32; POOL_WORDS]> = Aligned([0.0; POOL_WORDS]);

/// The pool's memory as bytes (slot C).
#[cfg(feature = "signed")]
fn as_bytes(words: &mut [f32]) -> &mut [u8] {
    let len = core::mem::size_of_val(words);
    // SAFETY: the same memory, borrowed for as long as `words`; every bit
    // pattern is a valid u8 and a valid f32, and u8 has alignment 1.
    unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), len) }
}

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
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
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

fn run() -> bool {
    let mut chk = Checks::default();
    let model: &'static [u8] = &MODEL.0;
    // SAFETY: `run` is entered once; these are the only references to the statics.
    let ram: &'static mut [u8] = unsafe { &mut (*addr_of_mut!(RAM)).0 };
    // SAFETY: as above.
    let pool_mem: &'static mut [f32] = unsafe { &mut (*addr_of_mut!(POOL)).0 };

    hprintln!("kiln firmware demo (LM3S6965, Cortex-M3)");

    // --- 0. at boot: the flashed model file's digests, before it is used
    // (the RAM slot is free until step 5: it holds the check's prefix).
    #[cfg(any(feature = "digests", feature = "signed"))]
    let Some((mut ticks, cyccnt)) = cortex_m::Peripherals::take().map(|mut p| {
        let probe = ticks::Ticks::cyccnt_probe(&mut p.DCB, &mut p.DWT);
        (ticks::Ticks::start(p.SYST), probe)
    }) else {
        hprintln!("the core peripherals are taken");
        return false;
    };
    #[cfg(all(feature = "digests", not(feature = "signed")))]
    let _ = cyccnt;
    #[cfg(feature = "digests")]
    let model_file_ok = boot::boot_check(&MODEL_FILE.0, ram, &mut ticks, &mut chk);
    #[cfg(not(feature = "digests"))]
    let model_file_ok = true;

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
    corruption::corruption_tests(&dir, model, ram, &mut chk);
    #[cfg(feature = "digests")]
    corruption::digest_corruption(&MODEL_FILE.0, ram, &mut chk);

    // --- 7. over-the-air update into slot B (the RAM buffer), activated only when valid
    #[cfg(feature = "ota")]
    ota::run(model, ram, &mut chk);

    // --- 8. the model-file form: frame and metadata checked, then the same directory
    if model_file_ok {
        model_file::model_file(&mut chk);
    } else {
        hprintln!("model file: refused at boot, not used");
    }

    // --- 9. signed updates: each checked against the vendor's key as it
    // arrives (slot A = the factory model file, slots B and C in RAM)
    #[cfg(feature = "signed")]
    if model_file_ok {
        let slot_b = signed::run(&MODEL_FILE.0, ram, as_bytes(pool_mem), &mut ticks, cyccnt, &mut chk);
        // Then the delta to NEW, sent to the device that runs slot B.
        #[cfg(feature = "delta")]
        if let Some(b) = slot_b {
            delta::run(b.running.image, &MODEL_FILE.0, b.slot_c, b.trusted, &b.running, &mut ticks, &mut chk);
        }
        #[cfg(not(feature = "delta"))]
        let _ = slot_b;
    }

    if chk.failed != 0 {
        hprintln!("{} check(s) failed", chk.failed);
    }
    chk.failed == 0
}
