//! The demo's verdict: every check that did not match its expectation is
//! printed and counted; the exit status is 0 only when none failed.

use cortex_m_semihosting::hprintln;

/// Counts checks that did not match their expectation.
#[derive(Default)]
pub struct Checks {
    pub failed: usize,
}

impl Checks {
    pub fn expect(&mut self, ok: bool, what: &str) -> bool {
        if !ok {
            self.failed += 1;
            hprintln!("  CHECK FAILED: {}", what);
        }
        ok
    }
}
