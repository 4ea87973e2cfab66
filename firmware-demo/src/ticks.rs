//! Timing under QEMU: SysTick as a free-running down-counter of the core
//! clock, converted to instructions with a calibration loop of known length.
//!
//! Under `qemu-system-arm -icount shift=0` every instruction takes one
//! virtual nanosecond and SysTick follows virtual time, so a figure is an
//! **instruction count** (QEMU is not cycle-accurate: it is not the M3's
//! cycle count). Without `-icount` the ticks follow the host's clock and the
//! figures mean nothing (ci.sh runs the demo once more with `-icount` for
//! them). The Cortex-M3's cycle counter (DWT `CYCCNT`) is no alternative
//! here: QEMU 7.2 does not model the DWT, and the counter reads 0
//! ([`Ticks::cyccnt_probe`] shows it).

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::{DCB, DWT, SYST};

/// The calibration loop: this many iterations of two instructions.
pub const CAL_ITERS: u32 = 100_000;

/// SysTick as a free-running 24-bit down-counter of the core clock.
pub struct Ticks {
    syst: SYST,
    /// Ticks of the calibration loop (0 without `-icount`, or a host-clock figure).
    pub cal: u32,
}

impl Ticks {
    pub fn start(mut syst: SYST) -> Self {
        syst.set_clock_source(SystClkSource::Core);
        syst.set_reload(0x00FF_FFFF);
        syst.clear_current();
        syst.enable_counter();
        let mut t = Ticks { syst, cal: 0 };
        t.cal = t.calibrate();
        t
    }

    /// Ticks taken by `f` (less than 2^24 of them).
    pub fn time<T>(&mut self, f: impl FnOnce() -> T) -> (T, u32) {
        let _ = &self.syst;
        let a = SYST::get_current();
        let out = f();
        let b = SYST::get_current();
        (out, a.wrapping_sub(b) & 0x00FF_FFFF)
    }

    /// Instructions taken by `f`, from the calibration (valid under `-icount shift=0` only).
    #[cfg_attr(not(feature = "signed"), allow(dead_code))]
    pub fn instructions<T>(&mut self, f: impl FnOnce() -> T) -> (T, u64) {
        let (out, t) = self.time(f);
        (out, instructions(t, self.cal))
    }

    /// Ticks of [`CAL_ITERS`] iterations of `subs; bne` (2 instructions each).
    fn calibrate(&mut self) -> u32 {
        self.time(cal_loop).1
    }

    /// DWT `CYCCNT` before and after the calibration loop (200,000
    /// instructions), with the trace unit and the counter enabled as on
    /// silicon. Under QEMU 7.2 both read 0: the DWT is not modelled.
    pub fn cyccnt_probe(dcb: &mut DCB, dwt: &mut DWT) -> (u32, u32) {
        dcb.enable_trace();
        dwt.enable_cycle_counter();
        let a = DWT::cycle_count();
        cal_loop();
        (a, DWT::cycle_count())
    }
}

fn cal_loop() {
    // SAFETY: a register countdown loop; no memory, no stack.
    unsafe {
        core::arch::asm!("2:", "subs {0}, #1", "bne 2b", inout(reg) CAL_ITERS => _, options(nomem, nostack));
    }
}

/// Instructions for `ticks`, from the calibration's ticks per instruction.
pub fn instructions(ticks: u32, cal: u32) -> u64 {
    (u64::from(ticks) * u64::from(CAL_ITERS) * 2).checked_div(u64::from(cal)).unwrap_or(0)
}
