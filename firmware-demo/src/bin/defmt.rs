//! The firmware demo's key events logged through defmt: kiln-nostd's
//! `defmt` feature makes `Directory`, `Tensor`, `Error`, `Rule`, `DType` and
//! `Progress` `defmt::Format`, so the firmware logs them as compact frames
//! (defmt-semihosting carries them to QEMU's standard output) and the host
//! decodes them with `defmt-print -e <this elf>`. The example model is
//! validated in flash, its tensors listed, one sample classified, a corrupted
//! copy rejected, and the model streamed through `Incremental`. Exit status 0
//! when every event matched its expectation.
//!
//! ```sh
//! cargo build --release --features defmt --bin firmware-defmt
//! qemu-system-arm -cpu cortex-m3 -machine lm3s6965evb -nographic \
//!     -semihosting-config enable=on,target=native \
//!     -kernel target/thumbv7m-none-eabi/release/firmware-defmt | defmt-print -e target/thumbv7m-none-eabi/release/firmware-defmt
//! ```
#![no_std]
#![no_main]

use core::ptr::addr_of_mut;

use cortex_m as _; // critical-section implementation (single core)
use cortex_m_rt::entry;
use cortex_m_semihosting::debug;
use defmt_semihosting as _; // the global defmt logger
use kiln_nostd::{directory::FixedIndex, incremental::Progress, Directory, ErrorCode, Incremental};

#[repr(C, align(64))]
struct Aligned<T>(T);

const MODEL_LEN: usize = include_bytes!("../../../spec/examples/digits-mlp.kiln").len();
static MODEL: Aligned<[u8; MODEL_LEN]> = Aligned(*include_bytes!("../../../spec/examples/digits-mlp.kiln"));
static mut RAM: Aligned<[u8; MODEL_LEN]> = Aligned([0; MODEL_LEN]);

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::nop();
    }
}

#[entry]
fn main() -> ! {
    let ok = run();
    if ok {
        defmt::info!("result: PASS");
    } else {
        defmt::error!("result: FAIL");
    }
    debug::exit(if ok { debug::EXIT_SUCCESS } else { debug::EXIT_FAILURE });
    loop {
        cortex_m::asm::nop();
    }
}

fn run() -> bool {
    let model: &'static [u8] = &MODEL.0;
    defmt::info!("kiln defmt demo: digits-mlp.kiln, {=usize} bytes in flash", model.len());
    let mut index = FixedIndex::<16, 64>::new();
    let (dir, names) = match index.parse(model) {
        Ok(p) => p,
        Err(e) => {
            defmt::error!("model rejected: {}", e);
            return false;
        }
    };
    defmt::info!("valid: {}", dir);
    for t in dir.iter() {
        defmt::info!("  {}", t);
    }
    let mut ok = dir.len() == 8;

    // One sample through the f32 model, weights read in place.
    let class = classify(&names, 0);
    match class {
        Some((predicted, label)) => {
            defmt::info!("sample 0: class {=usize}, label {=u8}", predicted, label);
            ok &= predicted == usize::from(label);
        }
        None => {
            defmt::error!("the model's tensors are not as expected");
            ok = false;
        }
    }

    // A corrupted copy: the version byte.
    // SAFETY: `run` is entered once; the only reference to RAM.
    let ram: &mut [u8] = unsafe { &mut (*addr_of_mut!(RAM)).0 };
    ram.copy_from_slice(model);
    ram[4] = 3;
    match Directory::parse(ram) {
        Ok(_) => {
            defmt::error!("corrupted copy ACCEPTED");
            ok = false;
        }
        Err(e) => {
            defmt::info!("corrupted copy rejected: {} ({=str}: {=str})", e, e.code().as_str(), e.rule().description());
            ok &= e.code() == ErrorCode::Frame && e.offset() == 4;
        }
    }

    // Over the air: 256-byte packets through the incremental validator.
    let mut prefix = [0u8; 2048];
    let mut v = Incremental::new(&mut prefix);
    for packet in model.chunks(256) {
        match v.feed(packet) {
            Ok(Progress::Directory) => {
                defmt::info!("incremental: {} after {=u64} bytes", Progress::Directory, v.consumed())
            }
            Ok(_) => {}
            Err(e) => {
                defmt::error!("incremental: {}", e);
                ok = false;
                break;
            }
        }
    }
    match v.finish() {
        Ok(s) => defmt::info!("incremental: accepted, {}", s),
        Err(e) => {
            defmt::error!("incremental: {}", e);
            ok = false;
        }
    }
    ok
}

/// The f32 MLP on sample `s`: (predicted class, label).
fn classify(names: &kiln_nostd::directory::NameIndex<'_, '_>, s: usize) -> Option<(usize, u8)> {
    let w1 = names.get("fc1.weight")?.as_slice::<f32>()?;
    let b1 = names.get("fc1.bias")?.as_slice::<f32>()?;
    let w2 = names.get("fc2.weight")?.as_slice::<f32>()?;
    let b2 = names.get("fc2.bias")?.as_slice::<f32>()?;
    let x = names.get("samples.x")?.as_slice::<f32>()?;
    let y = names.get("samples.y")?.as_slice::<u8>()?;
    let (n_hidden, n_in) = (b1.len(), x.len() / y.len());
    let x = x.get(s * n_in..(s + 1) * n_in)?;
    let mut hidden = [0f32; 64];
    for (h, out) in hidden.iter_mut().enumerate().take(n_hidden) {
        let row = w1.get(h * n_in..(h + 1) * n_in)?;
        let sum: f32 = row.iter().zip(x).map(|(w, v)| w * v).sum();
        *out = (sum + b1[h]).max(0.0);
    }
    let mut best = (0, f32::NEG_INFINITY);
    for (k, bias) in b2.iter().enumerate() {
        let row = w2.get(k * n_hidden..(k + 1) * n_hidden)?;
        let logit = row.iter().zip(&hidden).map(|(w, a)| w * a).sum::<f32>() + bias;
        if logit > best.1 {
            best = (k, logit);
        }
    }
    Some((best.0, *y.get(s)?))
}
