//! The device harness: one build per candidate (measure.sh). It verifies
//! the device message (vectors::DEVICE_*) in three pieces (one for a
//! backend that does not stream), measures that call's stack by painting,
//! times it (the instruction count, see `time` in device.rs), then
//! checks RFC 8032's short vectors and a flipped byte, and computes the
//! SHA-256 the digests need. It prints `stack N` and exits 0 when every
//! verdict was right (QEMU: semihosting on Arm, sifive_test on `virt`).
//!
//! Without a backend feature it is the baseline: the same inputs read and
//! folded into a sink, no cryptography, so a candidate's flash is its
//! size minus the baseline's. The panic handler calls a symbol that does
//! not exist (as kiln-nopanic's), so a build links only if no panic path
//! is left in what it calls; `locate-panics` swaps in one that links.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
mod device;

/// On the host the binary does nothing: the host tests are tests/vectors.rs.
#[cfg(not(target_os = "none"))]
fn main() {}
