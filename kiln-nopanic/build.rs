//! Links against `memory.x` (as firmware-demo's build.rs does). The model
//! the binary embeds with `include_bytes!` needs no line here: cargo tracks it.
use std::path::{Path, PathBuf};
use std::{env, fs};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    link_memory_x(&out);
}

/// cortex-m-rt's `link.x` includes `memory.x` from the linker's search path:
/// this crate's copy goes into `OUT_DIR`, which is put on that path. The same
/// in both firmware crates (firmware-demo, kiln-nopanic).
fn link_memory_x(out: &Path) {
    fs::copy("memory.x", out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=memory.x");
    println!("cargo:rerun-if-changed=build.rs");
}
