//! Kiln v2 on RISC-V (riscv32imc, QEMU's `virt` machine, `-bios none`):
//! validate the bundled example model (`spec/examples/digits-mlp.kiln`) in
//! place, run it from flash on its 32 labelled samples in f32 and with the
//! MXFP4 first layer dequantized on the fly, and show hostile copies rejected
//! with the spec's error code, rule and offset. Then the model is read again
//! through the async flash adapter (`source::AsyncFlash` over a mock async
//! NOR flash, under `embassy_futures::block_on`) and checked with
//! `source::verify_async`, whose verdict must equal the blocking `verify`'s,
//! on the model and on a hostile copy. Output goes to the virt
//! machine's UART; the exit status (through its sifive_test device) is 0
//! only when every check matched its expectation, else the number of checks
//! that did not.
//!
//! The model (see spec/examples/README.md), read by name, shapes from the
//! directory: `logits = fc2.weight @ relu(fc1.weight @ x + fc1.bias) + fc2.bias`,
//! prediction = argmax. `fc1.weight.mxfp4` is an e2m1 copy of `fc1.weight`
//! whose scale tensor is found through its quantization metadata.
#![no_std]
#![no_main]

use core::ptr::addr_of_mut;

use embassy_futures::block_on;
use kiln_model::source::{self, AsyncFlash};
use kiln_nostd::{directory::scratch_len, wire::Header, Directory, Error, Parser, Rule};

/// `println!` to the UART (output is best effort: the UART cannot fail).
macro_rules! println {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        let _ = writeln!($crate::board::Uart, $($arg)*);
    }};
}

mod board;
mod flash;
mod model;
mod stack;

use flash::AsyncPart;
use model::{evaluate, load, mxfp4_fc1, Fc1, FC1_MXFP4};
use stack::measure_stack;

/// 64-byte alignment: every canonical payload offset is a multiple of 64, so
/// an aligned block gives aligned payloads and `as_slice::<f32>()` works in place.
#[repr(C, align(64))]
struct Aligned<T>(T);

const MODEL_LEN: usize = include_bytes!("../../spec/examples/digits-mlp.kiln").len();
/// The bundled example model, in flash (`.rodata`).
static MODEL: Aligned<[u8; MODEL_LEN]> = Aligned(*include_bytes!("../../spec/examples/digits-mlp.kiln"));

/// RAM for the hostile copies.
static mut RAM: Aligned<[u8; MODEL_LEN]> = Aligned([0; MODEL_LEN]);

/// The figures spec/examples/README.md records for the 32 stored samples.
const EXPECT_F32_CORRECT: usize = 32;
const EXPECT_MXFP4_CORRECT: usize = 31;
const EXPECT_AGREE: usize = 31;

/// Name-index scratch: enough for 32 tensors (`scratch_len(32) == 64`).
const SCRATCH_SLOTS: usize = 64;

/// Counts the checks that did not match their expectation.
#[derive(Default)]
struct Checks {
    failed: u16,
}

impl Checks {
    fn expect(&mut self, ok: bool, what: &str) -> bool {
        if !ok {
            self.failed = self.failed.saturating_add(1);
            println!("  CHECK FAILED: {}", what);
        }
        ok
    }
}

#[riscv_rt::entry]
fn main() -> ! {
    let failed = run();
    println!("result: {}", if failed == 0 { "PASS" } else { "FAIL" });
    board::exit(failed)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    println!("panic: {}", info);
    board::exit(0xFFFF)
}

/// Every exception (riscv-rt's default would spin): report it and fail.
#[export_name = "ExceptionHandler"]
fn exception_handler(_: &riscv_rt::TrapFrame) -> ! {
    let (cause, pc) = board::trap_cause();
    println!("exception: mcause {}, mepc {:#010x}", cause, pc);
    board::exit(0xFFFE)
}

fn run() -> u16 {
    let mut chk = Checks::default();
    let model: &'static [u8] = &MODEL.0;
    // SAFETY: `run` is entered once; this is the only reference to RAM.
    let ram: &'static mut [u8] = unsafe { &mut (*addr_of_mut!(RAM)).0 };

    println!("kiln firmware demo (QEMU virt, riscv32imc)");
    println!("digits-mlp.kiln: {} bytes in flash at {:#010x}", model.len(), model.as_ptr() as usize);

    // --- 1. validate in place, with a fixed name-index scratch
    let count = Header::peek_count(model).unwrap_or(0);
    chk.expect(scratch_len(count) <= SCRATCH_SLOTS, "scratch large enough for a hashed index");
    let mut scratch = [0u32; SCRATCH_SLOTS];
    let (dir, index) = match Parser::new().scratch(&mut scratch).parse_indexed(model) {
        Ok(p) => p,
        Err(e) => {
            println!("model REJECTED: {}", e);
            return chk.failed.saturating_add(1);
        }
    };
    println!(
        "valid: {} tensors, block {} bytes, payload at +{}, name index: {}",
        dir.len(),
        dir.block_len(),
        dir.payload_start(),
        if index.is_hashed() { "hashed (scratch)" } else { "linear scan" }
    );
    for t in dir.iter() {
        let name = t.name().unwrap_or("<unnamed>");
        println!(
            "  [{}] {:<23} {:<4} {:?}, {} bytes at +{}",
            t.index(),
            name,
            t.dtype().name(),
            t.shape(),
            t.byte_len(),
            t.absolute_offset()
        );
        chk.expect(index.get(name).map(|u| u.index()) == Some(t.index()), "the name index finds every tensor");
    }

    // --- 2. the f32 model, every tensor viewed in place in flash
    let m = match load(&index) {
        Ok(m) => m,
        Err(e) => {
            chk.expect(false, e);
            return chk.failed;
        }
    };
    let f32_run = evaluate(&m, &Fc1::F32(m.w1));
    let preds = &f32_run.preds[..f32_run.n];
    println!("run 1: f32 weights in place (as_slice::<f32>, zero-copy)");
    print_digits("  labels:     ", m.labels);
    print_digits("  predictions:", preds);
    println!("  f32 accuracy: {}/{} (smallest top-2 logit gap {:.3})", f32_run.correct, f32_run.n, f32_run.min_gap);
    chk.expect(f32_run.correct == EXPECT_F32_CORRECT && f32_run.n == EXPECT_F32_CORRECT, "f32 accuracy is 32/32");

    // --- 3. the MXFP4 first layer, dequantized element by element while it runs
    match mxfp4_fc1(&index, &m) {
        Ok(q) => {
            let q_run = evaluate(&m, &Fc1::Mxfp4(&q));
            let q_preds = &q_run.preds[..q_run.n];
            let agree = preds.iter().zip(q_preds).filter(|(a, b)| a == b).count();
            println!("run 2: fc1 from {} (MXFP4, dequantized on the fly)", FC1_MXFP4);
            print_digits("  predictions:", q_preds);
            println!(
                "  MXFP4 accuracy: {}/{} (README: {}/32); agrees with f32 on {}/{} (README: {}/32)",
                q_run.correct, q_run.n, EXPECT_MXFP4_CORRECT, agree, q_run.n, EXPECT_AGREE
            );
            chk.expect(q_run.correct == EXPECT_MXFP4_CORRECT, "MXFP4 accuracy matches the README (31/32)");
            chk.expect(agree == EXPECT_AGREE, "f32/MXFP4 agreement matches the README (31/32)");
        }
        Err(e) => {
            chk.expect(false, e);
        }
    }

    // --- 4. hostile copies in RAM: rejected with the spec's code, rule and offset
    let gap = first_gap(&dir);
    chk.expect(gap.is_some(), "the example model has padding between two payloads");
    let cases = [
        ("data hidden in the padding between two payloads", gap.unwrap_or(0), 0x5A, Rule::NonzeroGap),
        ("directory version byte 2 -> 3", 4, 3, Rule::DirectoryVersion),
    ];
    for (what, at, value, rule) in cases {
        ram.copy_from_slice(model);
        let old = ram.get(at).copied().unwrap_or(0);
        if let Some(b) = ram.get_mut(at) {
            *b = value;
        }
        println!("hostile input: {} (byte {}: {:#04x} -> {:#04x})", what, at, old, value);
        let mut scratch = [0u32; SCRATCH_SLOTS];
        let expected = Error::new(rule, at);
        match Parser::new().scratch(&mut scratch).parse(ram) {
            Err(e) => println!(
                "  rejected: code {} ({}), rule {}, offset {}{}",
                e.code().as_str(),
                e.code().number(),
                e.rule().id(),
                e.offset(),
                if e == expected { ", as expected" } else { "" }
            ),
            Ok(d) => println!("  ACCEPTED ({} tensors)", d.len()),
        }
        let got = Parser::new().parse(ram).map(|d| d.len());
        chk.expect(got == Err(expected), what);
    }

    // --- 5. the model through the async flash adapter, under an executor
    async_reads(&mut chk, model, ram, gap.unwrap_or(0));

    if chk.failed != 0 {
        println!("{} check(s) failed", chk.failed);
    }
    chk.failed
}

/// The directory prefix buffer and the chunk of the ranged reads.
const PREFIX: usize = 2048;
const CHUNK: usize = 256;

/// `source::verify_async` of `bytes` through `AsyncFlash` under `block_on`,
/// and the blocking `source::verify` of the same bytes: both verdicts (as
/// format errors: the sources' read errors differ in type), the flash
/// reads, and the stack each call used.
fn both_verdicts(bytes: &[u8]) -> (VerifyVerdict, VerifyVerdict, usize, (usize, usize)) {
    let (mut prefix, mut chunk) = ([0u8; PREFIX], [0u8; CHUNK]);
    let mut flash = AsyncFlash::<_>::new(AsyncPart::new(bytes));
    let (got, stack_async) = measure_stack(|| block_on(source::verify_async(&mut flash, &mut prefix, &mut chunk)));
    let (want, stack_blocking) = measure_stack(|| source::verify(bytes, &mut prefix, &mut chunk));
    let reads = flash.inner().reads;
    (got.map_err(|e| e.kiln()), want.map_err(|e| e.kiln()), reads, (stack_blocking, stack_async))
}

type VerifyVerdict = Result<kiln_nostd::incremental::Summary, Option<kiln_model::Error>>;

fn verdict_text(v: &VerifyVerdict) -> VerdictText<'_> {
    VerdictText(v)
}

struct VerdictText<'a>(&'a VerifyVerdict);

impl core::fmt::Display for VerdictText<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            Ok(s) => write!(f, "valid, block {} bytes", s.block_len),
            Err(Some(e)) => write!(
                f,
                "rejected: code {} ({}), rule {}, offset {}",
                e.code().as_str(),
                e.code().number(),
                e.rule().id(),
                e.offset()
            ),
            Err(None) => f.write_str("not a format verdict (a read or buffer error)"),
        }
    }
}

/// Step 5: the model, and a copy with a byte hidden in its padding, read
/// through the async flash adapter and verified with `verify_async`; each
/// verdict must equal the blocking `verify`'s on the same bytes.
fn async_reads(chk: &mut Checks, model: &'static [u8], ram: &'static mut [u8], gap: usize) {
    println!("async: source::verify_async through source::AsyncFlash (a mock async NOR flash, 4-byte reads, each read Pending once) under embassy_futures::block_on");
    let (got, want, reads, (stack_blocking, stack_async)) = both_verdicts(model);
    println!(
        "  model: {} ({} flash reads); blocking verify: {}; async verdict equals the blocking one: {}",
        verdict_text(&got),
        reads,
        verdict_text(&want),
        if got == want { "yes" } else { "NO" }
    );
    chk.expect(got == want, "the async verdict on the model equals the blocking one");
    chk.expect(got.is_ok(), "verify_async accepts the model");
    println!("  stack: verify {} bytes, verify_async under block_on {} bytes", stack_blocking, stack_async);

    ram.copy_from_slice(model);
    if let Some(b) = ram.get_mut(gap) {
        *b = 0x5A;
    }
    let (got, want, reads, _) = both_verdicts(ram);
    println!(
        "  hostile copy (byte {} -> 0x5a): {} ({} flash reads); async verdict equals the blocking one: {}",
        gap,
        verdict_text(&got),
        reads,
        if got == want { "yes" } else { "NO" }
    );
    chk.expect(got == want, "the async verdict on the hostile copy equals the blocking one");
    chk.expect(
        got == Err(Some(kiln_model::Error::new(Rule::NonzeroGap, gap))),
        "verify_async rejects the hostile copy (NonzeroGap)",
    );
}

/// One line of digits (classes and labels are 0..9).
fn print_digits(head: &str, v: &[u8]) {
    use core::fmt::Write as _;
    let mut u = board::Uart;
    let _ = u.write_str(head);
    for d in v {
        let _ = write!(u, " {}", d);
    }
    let _ = u.write_str("\n");
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
