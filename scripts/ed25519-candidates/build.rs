//! The memory map of the QEMU machine each target runs on, linked before the
//! runtime's `link.x`: thumbv6m on `microbit` (nRF51, Cortex-M0: 256 KiB
//! flash, 16 KiB RAM), thumbv7m on `lm3s6965evb` (256 KiB, 64 KiB),
//! thumbv7em on `mps2-an386` (Cortex-M4, 4 MiB each), riscv32imc on `virt` (memory-riscv.x, as kiln-nopanic's).
use std::path::PathBuf;
use std::{env, fs};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=memory-riscv.x");
    let target = env::var("TARGET").unwrap_or_default();
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let (flash, ram) = match target.as_str() {
        t if t.starts_with("riscv32") => {
            // riscv-rt's link.x needs the regions defined before it; the root
            // .cargo/config.toml names neither file for riscv32imc.
            fs::copy("memory-riscv.x", out.join("memory-riscv.x")).expect("copy memory-riscv.x");
            println!("cargo:rustc-link-search={}", out.display());
            println!("cargo:rustc-link-arg=-Tmemory-riscv.x");
            println!("cargo:rustc-link-arg=-Tlink.x");
            return;
        }
        t if t.starts_with("thumbv6m") => ("256K", "16K"),
        t if t.starts_with("thumbv7m") => ("256K", "64K"),
        t if t.starts_with("thumbv7em") => ("4M", "4M"),
        // Host builds (tests): nothing to link.
        _ => return,
    };
    // cortex-m-rt's link.x (named by the root .cargo/config.toml) includes memory.x.
    let map = format!("MEMORY\n{{\n  FLASH : ORIGIN = 0x00000000, LENGTH = {flash}\n  RAM : ORIGIN = 0x20000000, LENGTH = {ram}\n}}\n");
    fs::write(out.join("memory.x"), map).expect("write memory.x");
    println!("cargo:rustc-link-search={}", out.display());
}
