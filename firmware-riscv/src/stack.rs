//! Stack depth of a call, measured by painting the free stack below the
//! caller with a pattern and finding the lowest word the call overwrote
//! (as firmware-demo's `stack.rs` does on the Cortex-M3).

use core::ptr::addr_of;

const PAINT: u32 = 0xC0DE_5AFE;
const PAINT_BYTES: usize = 8192;

extern "C" {
    /// The end of .bss (riscv-rt's link.x); the stack grows down towards it.
    static __sheap: u32;
}

#[inline(always)]
fn sp() -> usize {
    let sp: usize;
    // SAFETY: reads the stack pointer only.
    unsafe { core::arch::asm!("mv {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}

/// Fills `[bottom, own SP - 64)` with the pattern: volatile stores, so no
/// memset call whose frame would sit inside the region; the 64-byte margin
/// covers what this function may save after reading SP.
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
/// (the deepest overwritten word below the caller's SP).
#[inline(never)]
pub fn measure_stack<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let top = sp();
    let floor = (addr_of!(__sheap) as usize + 3) & !3;
    let bottom = top.saturating_sub(PAINT_BYTES).max(floor);
    paint(bottom);
    let r = call(f);
    let touched = lowest_touched(bottom, top);
    (r, top - touched)
}
