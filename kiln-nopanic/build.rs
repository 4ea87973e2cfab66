//! Links against `memory.x` (as firmware-demo's build.rs does), or on RISC-V
//! against `memory-riscv.x`. The model the binary embeds with `include_bytes!`
//! needs no line here: cargo tracks it.
use std::path::{Path, PathBuf};
use std::{env, fs};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    // The target's architecture, not the host's: build scripts run on the host.
    if env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|a| a.starts_with("riscv")) {
        // riscv-rt's link.x needs the memory map (its REGION_* aliases) linked
        // before it, so both are named here (the root .cargo/config.toml names
        // neither for riscv32imc). Not as `memory.x` through riscv-rt's `memory`
        // feature: the linker looks for an INCLUDEd file in its working
        // directory (this folder) first, and there `memory.x` is the LM3S6965's.
        fs::copy("memory-riscv.x", out.join("memory-riscv.x")).expect("copy memory-riscv.x");
        println!("cargo:rustc-link-search={}", out.display());
        println!("cargo:rustc-link-arg=-Tmemory-riscv.x");
        println!("cargo:rustc-link-arg=-Tlink.x");
        println!("cargo:rerun-if-changed=memory-riscv.x");
        println!("cargo:rerun-if-changed=build.rs");
    } else {
        link_memory_x(&out);
        if env::var("TARGET").is_ok_and(|t| t.starts_with("thumbv6m")) {
            // thumbv6m runs on QEMU's `microbit` (nRF51, Cortex-M0: 16 KiB of
            // RAM at 0x2000_0000): the stack starts at the top of that RAM.
            // cortex-m-rt's link.x only PROVIDEs `_stack_start`; a second
            // memory.x would lose to this folder's (the linker's directory).
            println!("cargo:rustc-link-arg=--defsym=_stack_start=0x20004000");
        }
    }
}

/// cortex-m-rt's `link.x` includes `memory.x` from the linker's search path:
/// this crate's copy goes into `OUT_DIR`, which is put on that path. The same
/// in both Cortex-M firmware crates (firmware-demo, kiln-nopanic).
fn link_memory_x(out: &Path) {
    fs::copy("memory.x", out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=memory.x");
    println!("cargo:rerun-if-changed=build.rs");
}
