//! Links against `memory.x`, then riscv-rt's `link.x`, in that order: link.x
//! uses the REGION_* aliases memory.x defines. Both are named here, not in
//! `.cargo/config.toml` (rustflags come before build-script link arguments,
//! so `-Tlink.x` there would precede this crate's memory map). The model the
//! binary embeds with `include_bytes!` needs no line here: cargo tracks it.
use std::path::PathBuf;
use std::{env, fs};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    fs::copy("memory.x", out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-link-arg=-Tmemory.x");
    println!("cargo:rustc-link-arg=-Tlink.x");
    println!("cargo:rerun-if-changed=memory.x");
    println!("cargo:rerun-if-changed=build.rs");
}
