//! Kiln v2 on a Cortex-M3 (LM3S6965 under QEMU): validate an embedded model in
//! place, run it on its own labelled samples, and show that corrupted copies
//! are rejected with the spec's error codes. Output goes through semihosting;
//! the exit status is 0 only when every check matched its expectation.
//!
//! Model conventions (read by name, shapes from the directory):
//! - layers: every rank-2 f32 tensor whose name starts with `w` (`w`, `w1`,
//!   `w2`, ... in directory order) with its bias `b...` (same suffix, f32
//!   `[out]`). Weights are `[in, out]`; `[out, in]` is accepted when only that
//!   reading matches the bias length. Hidden layers use ReLU, the last none.
//! - samples: `x` f32 `[n, in]`, labels `y` u8 `[n]`; prediction = argmax.
#![no_std]
#![no_main]

use core::ptr::{addr_of, addr_of_mut};

use cortex_m as _; // critical-section implementation (single core)
use cortex_m_rt::{entry, exception, ExceptionFrame};
use cortex_m_semihosting::{debug, hprintln};
use kiln_nostd::{scratch_len, DType, Directory, Error, ErrorCode, Header, NameIndex, Parser, Rule, Tensor};

/// 64-byte alignment: every canonical payload offset is a multiple of 64, so
/// an aligned block gives aligned payloads and `as_slice::<f32>()` works in place.
#[repr(C, align(64))]
struct Aligned<T>(T);

const MODEL_LEN: usize = include_bytes!("../model.kiln").len();
/// The model, in flash.
static MODEL: Aligned<[u8; MODEL_LEN]> = Aligned(*include_bytes!("../model.kiln"));

/// RAM copy for the misaligned run and the corruption tests (+64: room for a
/// trailing byte and a copy at offset 1).
static mut RAM: Aligned<[u8; MODEL_LEN + 64]> = Aligned([0; MODEL_LEN + 64]);

/// f32 storage for tensors that cannot be viewed in place.
const POOL_WORDS: usize = 4096;
static mut POOL: Aligned<[f32; POOL_WORDS]> = Aligned([0.0; POOL_WORDS]);

/// Name-index scratch: enough for 32 tensors (`scratch_len(32) == 64`).
const SCRATCH_SLOTS: usize = 64;
const MAX_LAYERS: usize = 8;
const MAX_WIDTH: usize = 64;
const MAX_SAMPLES: usize = 256;
/// Every sample of the demo model is labelled with the model's own argmax.
const REQUIRED_ACCURACY_PERCENT: usize = 100;
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
    hprintln!("model.kiln: {} bytes in flash at {:#010x}", model.len(), model.as_ptr() as usize);

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
            "  [{}] {:<6} {:<5} shape {:?}, {} bytes at +{}, index.get(\"{}\") -> {:?}",
            t.index(),
            name,
            t.dtype().name(),
            t.shape(),
            t.byte_len(),
            t.absolute_offset(),
            name,
            found
        );
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

    // --- 3. run the model from flash: weights viewed in place
    hprintln!("run 1: model in flash (64-byte aligned)");
    let mut pool = Pool(&mut pool_mem[..]);
    let flash = run_model(&index, &mut pool, &mut chk);

    // --- 4. the same model from a misaligned RAM copy: as_slice refuses, copy_to decodes
    {
        let copy = &mut ram[1..1 + MODEL_LEN];
        copy.copy_from_slice(model);
        let copy: &[u8] = copy;
        let mut scratch2 = [0u32; SCRATCH_SLOTS];
        hprintln!("run 2: RAM copy at {:#010x} (misaligned by 1 byte)", copy.as_ptr() as usize);
        match Parser::new().scratch(&mut scratch2).parse_indexed(copy) {
            Ok((_, index2)) => {
                let mut pool = Pool(&mut pool_mem[..]);
                let moved = run_model(&index2, &mut pool, &mut chk);
                chk.expect(
                    flash.is_some() && moved.is_some() && flash.as_ref().map(Run::preds) == moved.as_ref().map(Run::preds),
                    "misaligned copy gives the same predictions",
                );
            }
            Err(e) => {
                chk.expect(false, "misaligned copy parses");
                hprintln!("  rejected: {}", e);
            }
        }
    }

    // --- 5. corrupted copies are rejected with the expected code
    hprintln!("corruption tests (RAM copy, 64-byte aligned):");
    corruption_tests(&dir, model, ram, &mut chk);

    if chk.failed != 0 {
        hprintln!("{} check(s) failed", chk.failed);
    }
    chk.failed == 0
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
/// else decoded into the pool. The flag says which.
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

#[derive(Clone, Copy)]
struct Layer<'a> {
    w: &'a [f32],
    b: &'a [f32],
    n_in: usize,
    n_out: usize,
    /// Weights stored `[out, in]` instead of `[in, out]`.
    out_major: bool,
}

impl Layer<'_> {
    fn weight(&self, i: usize, j: usize) -> f32 {
        let k = if self.out_major { j * self.n_in + i } else { i * self.n_out + j };
        self.w[k]
    }
}

struct Run {
    preds: [u8; MAX_SAMPLES],
    n: usize,
}

impl Run {
    fn preds(&self) -> &[u8] {
        &self.preds[..self.n]
    }
}

fn in_place(flag: bool) -> &'static str {
    if flag {
        "in place (as_slice)"
    } else {
        "copied (copy_to)"
    }
}

/// Finds the layers and samples by name, classifies every sample, prints
/// predictions and accuracy. `None` when the model does not fit the conventions.
fn run_model<'a>(index: &NameIndex<'a, '_>, pool: &mut Pool<'a>, chk: &mut Checks) -> Option<Run> {
    match try_run_model(index, pool, chk) {
        Ok(run) => Some(run),
        Err(e) => {
            chk.expect(false, e);
            None
        }
    }
}

fn try_run_model<'a>(index: &NameIndex<'a, '_>, pool: &mut Pool<'a>, chk: &mut Checks) -> Result<Run, &'static str> {
    let dir = index.directory();
    let mut layers: [Option<Layer<'a>>; MAX_LAYERS] = [None; MAX_LAYERS];
    let mut n_layers = 0;
    for w in dir.iter() {
        let Some(name) = w.name() else { continue };
        if !name.starts_with('w') || w.rank() != 2 {
            continue;
        }
        let mut buf = [0u8; 64];
        let bias = bias_name(name, &mut buf).ok_or("weight name too long")?;
        let b = index.get(bias).ok_or("a weight tensor has no bias tensor")?;
        let &[rows, cols] = w.shape() else { return Err("weight is not rank 2") };
        let out = b.element_count();
        let (n_in, n_out, out_major) = if cols == out {
            (rows, cols, false)
        } else if rows == out {
            (cols, rows, true)
        } else {
            return Err("bias length matches neither weight dimension");
        };
        let (n_in, n_out) = (usize::try_from(n_in).map_err(|_| "too wide")?, usize::try_from(n_out).map_err(|_| "too wide")?);
        if n_in > MAX_WIDTH || n_out > MAX_WIDTH {
            return Err("layer wider than MAX_WIDTH");
        }
        let (wv, w_in_place) = load_f32(&w, pool)?;
        let (bv, b_in_place) = load_f32(&b, pool)?;
        hprintln!(
            "  layer {}: {} {:?} {}, {} {:?} {}{}",
            n_layers,
            name,
            w.shape(),
            in_place(w_in_place),
            bias,
            b.shape(),
            in_place(b_in_place),
            if out_major { ", [out, in] layout" } else { "" }
        );
        let slot = layers.get_mut(n_layers).ok_or("more than MAX_LAYERS layers")?;
        *slot = Some(Layer { w: wv, b: bv, n_in, n_out, out_major });
        n_layers += 1;
    }
    let mut chain: [Layer<'a>; MAX_LAYERS] = [Layer { w: &[], b: &[], n_in: 0, n_out: 0, out_major: false }; MAX_LAYERS];
    for (dst, src) in chain.iter_mut().zip(layers.iter().flatten()) {
        *dst = *src;
    }
    let layers = &chain[..n_layers];
    if layers.is_empty() {
        return Err("no layers (w*/b* tensors) found");
    }
    for pair in layers.windows(2) {
        if pair[0].n_out != pair[1].n_in {
            return Err("layer widths do not chain");
        }
    }

    let x = index.get("x").ok_or("no samples tensor `x`")?;
    let y = index.get("y").ok_or("no labels tensor `y`")?;
    let (xv, x_in_place) = load_f32(&x, pool)?;
    let labels: &[u8] = y.as_slice::<u8>().ok_or("labels `y` must be u8")?;
    let &[n, width] = x.shape() else { return Err("samples `x` must be [n, in]") };
    let (n, width) = (usize::try_from(n).map_err(|_| "too many")?, usize::try_from(width).map_err(|_| "too wide")?);
    hprintln!("  samples: x {:?} {}, labels y {:?} in place", x.shape(), in_place(x_in_place), y.shape());
    if width != layers[0].n_in || labels.len() != n || n > MAX_SAMPLES {
        return Err("samples do not match the first layer or the labels");
    }

    let mut run = Run { preds: [0; MAX_SAMPLES], n };
    let mut correct = 0;
    for (s, (sample, &label)) in xv.chunks_exact(width).zip(labels).enumerate() {
        let mut scores = [0f32; MAX_WIDTH];
        let (class, n_out) = classify(layers, sample, &mut scores);
        let ok = usize::from(label) == class;
        correct += usize::from(ok);
        run.preds[s] = class as u8;
        hprintln!(
            "  sample {}: x {:?} -> scores {:.3?} -> class {} (label {}) {}",
            s,
            sample,
            &scores[..n_out],
            class,
            label,
            if ok { "ok" } else { "WRONG" }
        );
    }
    let percent = (correct * 100).checked_div(n).unwrap_or(0);
    hprintln!("  accuracy: {}/{} ({}%)", correct, n, percent);
    chk.expect(n > 0 && percent >= REQUIRED_ACCURACY_PERCENT, "accuracy meets the expectation");
    Ok(run)
}

/// `w<suffix>` -> `b<suffix>`.
fn bias_name<'b>(weight: &str, buf: &'b mut [u8; 64]) -> Option<&'b str> {
    let rest = weight.get(1..)?.as_bytes();
    let out = buf.get_mut(..rest.len() + 1)?;
    out[0] = b'b';
    out[1..].copy_from_slice(rest);
    core::str::from_utf8(out).ok()
}

/// Dense layers, ReLU between them; returns (argmax, output width) and the scores.
fn classify(layers: &[Layer<'_>], x: &[f32], scores: &mut [f32; MAX_WIDTH]) -> (usize, usize) {
    let mut a = [0f32; MAX_WIDTH];
    a[..x.len()].copy_from_slice(x);
    let mut width = x.len();
    for (k, l) in layers.iter().enumerate() {
        let last = k + 1 == layers.len();
        let mut next = [0f32; MAX_WIDTH];
        for (j, out) in next.iter_mut().enumerate().take(l.n_out) {
            let mut s = l.b[j];
            for (i, ai) in a.iter().enumerate().take(l.n_in) {
                s += ai * l.weight(i, j);
            }
            *out = if last { s } else { s.max(0.0) };
        }
        a = next;
        width = l.n_out;
    }
    scores[..width].copy_from_slice(&a[..width]);
    let mut best = 0;
    for (j, v) in a[..width].iter().enumerate() {
        if *v > a[best] {
            best = j;
        }
    }
    (best, width)
}

// ----------------------------------------------------------- corruption tests

struct Case {
    what: &'static str,
    /// Byte to overwrite (`None`: length change only).
    at: Option<usize>,
    value: u8,
    /// Buffer length relative to the model.
    len: usize,
    code: ErrorCode,
    rule: Rule,
    offset: usize,
}

fn corruption_tests(dir: &Directory<'_>, model: &[u8], ram: &mut [u8], chk: &mut Checks) {
    let len = model.len();
    let heap_at = 64 + 128 * dir.len();
    let mut cases = [
        Case { what: "magic byte", at: Some(0), value: b'X', len, code: ErrorCode::Frame, rule: Rule::DirectoryMagic, offset: 0 },
        Case { what: "version byte", at: Some(4), value: 3, len, code: ErrorCode::Frame, rule: Rule::DirectoryVersion, offset: 4 },
        Case {
            what: "descriptor 0, reserved byte 3",
            at: Some(64 + 3),
            value: 1,
            len,
            code: ErrorCode::Frame,
            rule: Rule::DescriptorReserved,
            offset: 67,
        },
        Case {
            what: "descriptor 0, dtype code -> 20 (reserved)",
            at: Some(64),
            value: 20,
            len,
            code: ErrorCode::Type,
            rule: Rule::UnknownDtype,
            offset: 64,
        },
        Case {
            what: "first name byte -> 0xFF",
            at: Some(heap_at),
            value: 0xFF,
            len,
            code: ErrorCode::Utf8,
            rule: Rule::NameUtf8,
            offset: heap_at,
        },
        Case { what: "last byte cut off", at: None, value: 0, len: len - 1, code: ErrorCode::Eof, rule: Rule::BlockTruncated, offset: len - 1 },
        Case { what: "one trailing byte", at: None, value: 0, len: len + 1, code: ErrorCode::Trailing, rule: Rule::TrailingBytes, offset: len },
        // Filled in below when the model has a gap between two payloads.
        Case { what: "payload gap byte", at: None, value: 0, len: 0, code: ErrorCode::Type, rule: Rule::NonzeroGap, offset: 0 },
    ];
    if let Some(gap) = first_gap(dir) {
        let c = &mut cases[7];
        c.at = Some(gap);
        c.value = 0x5A;
        c.len = len;
        c.offset = gap;
    }
    for c in cases.iter().filter(|c| c.len != 0) {
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
    let tensors = dir.iter();
    let mut prev_end = None;
    for t in tensors {
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
