//! Stack depth of a call, measured by painting the free stack below the
//! caller with a pattern and finding the lowest word the call overwrote.

use core::ptr::addr_of;

use cortex_m_semihosting::hprintln;

/// Budget for the parser's stack (bytes); override at build time with
/// `KILN_STACK_BUDGET=2048 cargo run --release`.
pub fn stack_budget() -> usize {
    option_env!("KILN_STACK_BUDGET").and_then(|s| s.parse().ok()).unwrap_or(1024)
}

const PAINT: u32 = 0xC0DE_5AFE;
const PAINT_BYTES: usize = 12288;

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
pub fn measure_stack<R>(f: impl FnOnce() -> R) -> (R, usize) {
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
