//! Links against `memory.x`, then riscv-rt's `link.x` (as firmware-riscv),
//! and signs the two models the demo holds: the factory image (release 1)
//! and the update (release 2), both `spec/examples/digits-mlp.model.kiln`
//! signed with the demo key for the target `qemu-virt`, and the public key.
use std::path::PathBuf;
use std::{env, fs};

use ed25519_dalek::{Signer, SigningKey};
use kiln_model::signed::sign_model_aligned;

/// DEMO KEY ONLY: public in this repository, so it protects nothing.
const DEMO_SEED: [u8; 32] = *b"kiln firmware-pflash: demo key!!";
const MODEL: &str = "../spec/examples/digits-mlp.model.kiln";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    fs::copy("memory.x", out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-link-arg=-Tmemory.x");
    println!("cargo:rustc-link-arg=-Tlink.x");
    println!("cargo:rerun-if-changed=memory.x");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={MODEL}");
    let model = fs::read(MODEL).expect("read the example model");
    let k = SigningKey::from_bytes(&DEMO_SEED);
    let public = k.verifying_key().to_bytes();
    for (version, name) in [(1, "factory.kiln"), (2, "update.kiln")] {
        let file = sign_model_aligned(&model, &public, version, "qemu-virt", Some(1), |m| k.sign(m).to_bytes())
            .expect("sign the model");
        fs::write(out.join(name), file).expect("write a signed model");
    }
    fs::write(out.join("key.bin"), public).expect("write the public key");
}
