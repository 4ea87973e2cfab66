//! libkiln.a: the static library of the C API (`include/kiln.h`). Every
//! entry point is in `kiln-c-api` (./api); this crate links it and, on
//! bare-metal targets, brings the panic handler a staticlib needs.
#![no_std]

pub use kiln_c_api::*;

// Hosts: std provides the panic runtime (a panic cannot cross an
// `extern "C"` boundary: it would abort; none is reachable).
#[cfg(not(target_os = "none"))]
extern crate std;

/// Bare-metal targets: never called. No panic path is reachable from the C
/// entry points: kiln-nopanic links all of them with a panic handler that
/// refers to a symbol that does not exist, on thumbv6m, thumbv7m, thumbv7em and riscv32imc.
#[cfg(target_os = "none")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {
        core::hint::spin_loop();
    }
}
