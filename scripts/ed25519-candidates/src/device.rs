//! The device side of the harness (see main.rs).

use core::ptr::read_volatile;

use ed25519_candidates::vectors::{DEVICE_CUTS, DEVICE_KEY, DEVICE_MSG_LEN, DEVICE_SIG, MODEL, RFC8032};
use rt::entry;

#[cfg(any(
    all(feature = "dalek", any(feature = "compact", feature = "salty", feature = "dalek-small")),
    all(feature = "compact", any(feature = "salty", feature = "dalek-small")),
    all(feature = "salty", feature = "dalek-small")
))]
compile_error!("one backend per device build");

#[cfg(feature = "compact")]
use ed25519_candidates::compact as backend;
#[cfg(feature = "dalek")]
use ed25519_candidates::dalek as backend;
#[cfg(feature = "dalek-small")]
use ed25519_candidates::dalek_small as backend;
#[cfg(feature = "salty")]
use ed25519_candidates::salty as backend;

/// The baseline: the inputs folded into a value, no cryptography.
#[cfg(not(any(feature = "dalek", feature = "dalek-small", feature = "compact", feature = "salty")))]
mod backend {
    pub const STREAMS: bool = true;
    pub fn verify(k: &[u8; 32], sig: &[u8; 64], pieces: &[&[u8]]) -> bool {
        let mut x = 0u8;
        for p in [&k[..], &sig[..]].iter().chain(pieces) {
            for b in p.iter() {
                x = x.rotate_left(1) ^ b;
            }
        }
        x & 1 == 0
    }
    pub fn key_ok(k: &[u8; 32]) -> bool {
        k.iter().fold(0u8, |x, b| x ^ b) & 1 == 0
    }
}
const BASELINE: bool =
    cfg!(not(any(feature = "dalek", feature = "dalek-small", feature = "compact", feature = "salty")));

#[cfg(not(feature = "locate-panics"))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    extern "Rust" {
        #[link_name = "\n\nERROR: a panic path survived optimisation\n\n"]
        fn undefined() -> !;
    }
    // SAFETY: never runs; the symbol does not exist, so any reference fails the link.
    unsafe { undefined() }
}

/// Diagnosis only: a handler that links, so the panic calls can be found.
#[cfg(feature = "locate-panics")]
#[panic_handler]
#[inline(never)]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    rt::exit(false)
}

/// Runtime of each architecture: entry, console, exit, stack pointer.
#[cfg(target_arch = "arm")]
mod rt {
    use cortex_m as _; // critical-section implementation
    pub use cortex_m_rt::entry;
    use cortex_m_semihosting::{debug, hio};

    pub fn print(s: &[u8]) {
        if let Ok(mut out) = hio::hstdout() {
            let _ = out.write_all(s);
        }
    }

    pub fn exit(ok: bool) -> ! {
        debug::exit(if ok { debug::EXIT_SUCCESS } else { debug::EXIT_FAILURE });
        loop {
            cortex_m::asm::nop();
        }
    }

    #[inline(always)]
    pub fn sp() -> usize {
        let sp: usize;
        // SAFETY: reads the stack pointer only.
        unsafe { core::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
        sp
    }

    /// SysTick's control, reload and current-value registers.
    const SYST_CSR: *mut u32 = 0xE000_E010 as *mut u32;
    const SYST_RVR: *mut u32 = 0xE000_E014 as *mut u32;
    const SYST_CVR: *mut u32 = 0xE000_E018 as *mut u32;
    /// SysTick counts 24 bits.
    pub const TIMER_MASK: u32 = 0x00FF_FFFF;

    /// SysTick free-running on the core clock, no interrupt.
    pub fn timer_start() {
        // SAFETY: the architecture's SysTick registers; 32-bit stores.
        unsafe {
            core::ptr::write_volatile(SYST_RVR, TIMER_MASK);
            core::ptr::write_volatile(SYST_CVR, 0);
            core::ptr::write_volatile(SYST_CSR, 0b101); // enable, core clock
        }
    }

    /// Ticks, counting up (SysTick counts down).
    #[inline(always)]
    pub fn now() -> u32 {
        // SAFETY: SysTick's current-value register; a 32-bit load.
        TIMER_MASK - unsafe { core::ptr::read_volatile(SYST_CVR) }
    }

    /// [`super::CAL_ITERS`] iterations of two instructions.
    #[inline(never)]
    pub fn cal_loop() {
        // SAFETY: a register countdown loop; no memory, no stack.
        unsafe {
            core::arch::asm!("2:", "subs r0, #1", "bne 2b", inout("r0") super::CAL_ITERS => _, options(nomem, nostack))
        };
    }
}

/// RISC-V: QEMU `virt` (`-bios none`): its 16550 UART and sifive_test device.
#[cfg(target_arch = "riscv32")]
mod rt {
    pub use riscv_rt::entry;

    const UART: *mut u8 = 0x1000_0000 as *mut u8;
    /// 0x5555 ends QEMU with status 0, `(code << 16) | 0x3333` with status `code`.
    const SIFIVE_TEST: *mut u32 = 0x10_0000 as *mut u32;

    pub fn print(s: &[u8]) {
        for &b in s {
            // SAFETY: the transmit register of the machine's UART (QEMU needs no set-up).
            unsafe { core::ptr::write_volatile(UART, b) };
        }
    }

    pub fn exit(ok: bool) -> ! {
        let word = if ok { 0x5555 } else { (1 << 16) | 0x3333 };
        // SAFETY: the device register of the machine this binary is linked for; a 32-bit store.
        unsafe { core::ptr::write_volatile(SIFIVE_TEST, word) };
        loop {
            core::hint::spin_loop();
        }
    }

    #[inline(always)]
    pub fn sp() -> usize {
        let sp: usize;
        // SAFETY: reads the stack pointer only.
        unsafe { core::arch::asm!("mv {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
        sp
    }

    /// The CLINT's `mtime` (10 MHz), low word.
    const MTIME: *const u32 = 0x0200_BFF8 as *const u32;
    pub const TIMER_MASK: u32 = u32::MAX;

    /// `mtime` runs from reset.
    pub fn timer_start() {}

    #[inline(always)]
    pub fn now() -> u32 {
        // SAFETY: the machine's timer register; a 32-bit load.
        unsafe { core::ptr::read_volatile(MTIME) }
    }

    /// [`super::CAL_ITERS`] iterations of two instructions.
    #[inline(never)]
    pub fn cal_loop() {
        // SAFETY: a register countdown loop; no memory, no stack.
        unsafe {
            core::arch::asm!("2:", "addi {0}, {0}, -1", "bnez {0}, 2b", inout(reg) super::CAL_ITERS => _, options(nomem, nostack))
        };
    }
}

/// A value the optimiser must treat as unknown.
#[inline(always)]
fn opaque<T: Copy>(v: &T) -> T {
    // SAFETY: `v` is a valid reference.
    unsafe { read_volatile(v) }
}

static KEY: [u8; 32] = DEVICE_KEY;
static SIG: [u8; 64] = DEVICE_SIG;
static MSG_LEN: usize = DEVICE_MSG_LEN;
static CUTS: [usize; 2] = DEVICE_CUTS;
/// Which signature byte the negative check flips.
static FLIP: usize = 7;
static mut SINK: u32 = 0;

/// The instruction count: ticks of the machine's timer, converted with a
/// calibration loop of known length. Under QEMU `-icount shift=0` every
/// instruction takes one virtual nanosecond and the timers follow virtual
/// time, so the figure is an instruction count (firmware-demo's ticks.rs).
const CAL_ITERS: u32 = 100_000;

/// Ticks of `f`, and its result.
#[inline(never)]
fn time<R>(f: impl FnOnce() -> R) -> (R, u32) {
    let a = rt::now();
    let r = f();
    (r, rt::now().wrapping_sub(a) & rt::TIMER_MASK)
}

/// Instructions for `ticks`, from the calibration's ticks per instruction.
fn instructions(ticks: u32, cal: u32) -> u64 {
    (u64::from(ticks) * u64::from(CAL_ITERS) * 2).checked_div(u64::from(cal)).unwrap_or(0)
}

const PAINT: u32 = 0xC0DE_5AFE;
/// At most this much stack is painted (the M0 board has 16 KiB of RAM).
const PAINT_MAX: usize = 14 * 1024;

extern "C" {
    /// End of .bss (both runtimes' link.x): the stack grows down towards it.
    static __sheap: u32;
}

/// Fills `[bottom, own SP - 64)` with the pattern; volatile stores, so no
/// memset frame inside the region (firmware-demo's stack.rs, per architecture).
#[inline(never)]
fn paint(bottom: usize) {
    let top = (rt::sp() & !3).saturating_sub(64);
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
    // SAFETY: the region `paint` filled.
    while p < top && unsafe { core::ptr::read_volatile(p as *const u32) } == PAINT {
        p += 4;
    }
    p
}

#[inline(never)]
fn call<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Runs `f` below this frame; returns its result and the bytes of stack it used.
#[inline(never)]
fn measure_stack<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let top = rt::sp();
    let floor = (core::ptr::addr_of!(__sheap) as usize + 3) & !3;
    let bottom = top.saturating_sub(PAINT_MAX).max(floor);
    paint(bottom);
    let r = call(f);
    let touched = lowest_touched(bottom, top);
    (r, top - touched)
}

/// `n` in decimal, without core::fmt (its machinery has panic paths).
fn print_num(n: usize) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        if let Some(d) = buf.get_mut(i) {
            *d = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    rt::print(buf.get(i..).unwrap_or(&[]));
}

/// The message in the pieces the backend takes.
fn pieces(msg: &[u8]) -> [&[u8]; 3] {
    let [a, b] = opaque(&CUTS);
    let (x, rest) = msg.split_at(a.min(msg.len()));
    let (y, z) = rest.split_at(b.saturating_sub(a).min(rest.len()));
    [x, y, z]
}

#[inline(never)]
fn check(key: &[u8; 32], sig: &[u8; 64], msg: &[u8]) -> bool {
    if backend::STREAMS {
        backend::verify(key, sig, &pieces(msg))
    } else {
        backend::verify(key, sig, &[msg])
    }
}

#[entry]
fn main() -> ! {
    let key = opaque(&KEY);
    let sig = opaque(&SIG);
    let model: &[u8] = opaque(&MODEL);
    let msg = model.get(..opaque(&MSG_LEN)).unwrap_or(model);

    rt::timer_start();
    let cal = time(rt::cal_loop).1;
    let ((good, ticks), stack) = measure_stack(|| time(|| check(&key, &sig, msg)));
    // The key check alone (what a trust made once at start-up costs).
    let (key_ok, key_stack) = measure_stack(|| backend::key_ok(&key));
    let mut bad_sig = sig;
    if let Some(b) = bad_sig.get_mut(opaque(&FLIP)) {
        *b ^= 1;
    }
    let flipped = check(&key, &bad_sig, msg);
    let mut rfc = true;
    for v in RFC8032.iter() {
        rfc &= check(&opaque(&v.key), &opaque(&v.sig), opaque(&v.msg));
    }
    // The digests' SHA-256 (of the message, as a stand-in for a tensor's bytes).
    #[cfg(feature = "sha256")]
    let digest = {
        use sha2::Digest;
        let d: [u8; 32] = sha2::Sha256::digest(msg).into();
        u32::from_le_bytes([d[0], d[1], d[2], d[3]])
    };
    #[cfg(not(feature = "sha256"))]
    let digest = 0;
    let sink = good as u32 ^ (flipped as u32) << 1 ^ (rfc as u32) << 2 ^ digest;
    // SAFETY: single-threaded; a volatile store keeps every result alive.
    unsafe { core::ptr::write_volatile(core::ptr::addr_of_mut!(SINK), sink) };

    rt::print(b"stack ");
    print_num(stack);
    rt::print(b"\nkey stack ");
    print_num(key_stack);
    rt::print(b"\ninstructions ");
    print_num(instructions(ticks, cal) as usize);
    rt::print(b"\nticks ");
    print_num(ticks as usize);
    rt::print(b" calibration ");
    print_num(cal as usize);
    rt::print(b"\n");
    let ok = BASELINE || (good && !flipped && rfc && key_ok);
    rt::print(if ok { b"verdicts ok\n" } else { b"verdicts WRONG\n" });
    rt::exit(ok)
}
