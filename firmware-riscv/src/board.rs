//! QEMU `virt`'s devices the demo uses: the NS16550A UART at 0x1000_0000
//! (output) and the sifive_test device at 0x10_0000 (QEMU's exit status).

use core::fmt;
use core::ptr::{read_volatile, write_volatile};

/// The UART's transmit holding register (offset 0) and line status register
/// (offset 5; bit 5: the transmitter can take a byte). One byte per register.
const UART_THR: *mut u8 = 0x1000_0000 as *mut u8;
const UART_LSR: *const u8 = 0x1000_0005 as *const u8;
const LSR_THR_EMPTY: u8 = 1 << 5;

/// sifive_test: 0x5555 ends QEMU with status 0, `(code << 16) | 0x3333` with `code`.
const SIFIVE_TEST: *mut u32 = 0x10_0000 as *mut u32;
const PASS: u32 = 0x5555;
const FAIL: u32 = 0x3333;

/// The UART as a `fmt::Write` sink (QEMU starts it ready: no set-up).
pub struct Uart;

impl Uart {
    fn put(b: u8) {
        // SAFETY: the UART's registers on the machine this binary is linked for;
        // one-byte accesses, no other code touches them.
        unsafe {
            while read_volatile(UART_LSR) & LSR_THR_EMPTY == 0 {}
            write_volatile(UART_THR, b);
        }
    }
}

impl fmt::Write for Uart {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        s.bytes().for_each(Uart::put);
        Ok(())
    }
}

/// Ends the QEMU run: status 0 for `code` 0, else `code` (1 to 0xFFFF).
pub fn exit(code: u16) -> ! {
    let word = if code == 0 { PASS } else { (u32::from(code) << 16) | FAIL };
    // SAFETY: the sifive_test register of the machine this binary is linked for; a 32-bit store.
    unsafe { write_volatile(SIFIVE_TEST, word) };
    loop {
        core::hint::spin_loop();
    }
}

/// The trap's cause and address (machine mode).
pub fn trap_cause() -> (usize, usize) {
    let (cause, pc): (usize, usize);
    // SAFETY: reading two machine-mode CSRs has no side effect.
    unsafe { core::arch::asm!("csrr {0}, mcause", "csrr {1}, mepc", out(reg) cause, out(reg) pc) };
    (cause, pc)
}
