//! A/B model slots on QEMU virt's second CFI flash bank (`-drive
//! if=pflash,unit=1,format=raw,file=...`), a file on the host that outlives
//! the QEMU process: `ci.sh` kills QEMU in the middle of an update and
//! starts it again on the same file, which must recover.
//!
//! Each start: provision on first use (the factory image, release 1, in
//! slot A; two trusted keys; the first state record), then boot
//! (`Slots::boot`: a pending image is tried once, a trial that was not
//! confirmed returns to the confirmed slot), check the booted image in
//! place (`Model::parse_trusted`: signature, digests, every rule), and:
//! confirm a trial; download the update (release 2, 256-byte packets, each
//! checked by `UpdateCheck` before it is programmed) and reboot into it;
//! or, on release 2 confirmed, show that the same release is refused by the
//! persisted counter, and pass. A pause after each packet and before
//! each reboot and confirm gives the script time to kill QEMU there.
#![no_std]
#![no_main]

use core::fmt::Write as _;
use core::ptr::{read_volatile, write_volatile};

use embedded_storage::nor_flash::{ErrorType, NorFlash, NorFlashErrorKind, ReadNorFlash};
use kiln_model::slots::{Keys, Layout, SlotError, Slots};
use kiln_model::update::UpdateCheck;
use kiln_model::{Model, Trust};
use kiln_nostd::digest::TensorHasher;

#[path = "../../firmware-riscv/src/board.rs"]
mod board;

macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(board::Uart, $($arg)*);
    }};
}

/// The models build.rs signed, and the key.
static FACTORY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/factory.kiln"));
static UPDATE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/update.kiln"));
static KEY: [u8; 32] = *include_bytes!(concat!(env!("OUT_DIR"), "/key.bin"));
const TARGET: &str = "qemu-virt";
const UPDATE_VERSION: u64 = 2;
const PACKET: usize = 256;

/// virt's second flash bank (pflash1): 32 MiB of 256 KiB sectors, Intel command set.
const BASE: usize = 0x2200_0000;
const SECTOR: usize = 256 * 1024;
const CAPACITY: usize = 32 * 1024 * 1024;
const LAYOUT: Layout = Layout {
    state: 0,
    keys: 2 * SECTOR as u32,
    slots: [3 * SECTOR as u32, 4 * SECTOR as u32],
    slot_len: SECTOR as u32,
};

/// The CFI flash (QEMU's pflash_cfi01): a command word, then the data word
/// or the confirm; the status register's bit 7 says ready; 0xFF returns to
/// reading the array, where the bank reads as memory.
struct Pflash;

impl Pflash {
    fn command(at: usize, word: u32) {
        // SAFETY: a 32-bit store to the flash bank of the machine this binary is linked for.
        unsafe { write_volatile((BASE + at) as *mut u32, word) };
    }

    /// Waits for the status register's ready bit; true without an error bit.
    fn done(at: usize) -> bool {
        Self::command(at, 0x70);
        let status = loop {
            // SAFETY: a 32-bit load from the flash bank, in status mode.
            let s = unsafe { read_volatile((BASE + at) as *const u32) };
            if s & 0x80 != 0 {
                break s;
            }
        };
        Self::command(at, 0xFF);
        status & 0x30 == 0
    }

    fn check(at: u32, len: usize) -> Result<usize, NorFlashErrorKind> {
        let at = at as usize;
        match at.checked_add(len) {
            Some(end) if end <= CAPACITY => Ok(at),
            _ => Err(NorFlashErrorKind::OutOfBounds),
        }
    }
}

impl ErrorType for Pflash {
    type Error = NorFlashErrorKind;
}

impl ReadNorFlash for Pflash {
    const READ_SIZE: usize = 1;

    fn read(&mut self, at: u32, buf: &mut [u8]) -> Result<(), NorFlashErrorKind> {
        let at = Self::check(at, buf.len())?;
        for (i, b) in buf.iter_mut().enumerate() {
            // SAFETY: inside the bank (checked), which reads as memory in array mode.
            *b = unsafe { read_volatile((BASE + at + i) as *const u8) };
        }
        Ok(())
    }

    fn capacity(&self) -> usize {
        CAPACITY
    }
}

impl NorFlash for Pflash {
    const WRITE_SIZE: usize = 4;
    const ERASE_SIZE: usize = SECTOR;

    fn erase(&mut self, from: u32, to: u32) -> Result<(), NorFlashErrorKind> {
        let from = Self::check(from, to.saturating_sub(from) as usize)?;
        for s in (from..to as usize).step_by(SECTOR) {
            Self::command(s, 0x20);
            Self::command(s, 0xD0);
            if !Self::done(s) {
                return Err(NorFlashErrorKind::Other);
            }
        }
        Ok(())
    }

    fn write(&mut self, at: u32, bytes: &[u8]) -> Result<(), NorFlashErrorKind> {
        let at = Self::check(at, bytes.len())?;
        for (i, w) in bytes.chunks_exact(4).enumerate() {
            let a = at + 4 * i;
            Self::command(a, 0x40);
            Self::command(a, u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            if !Self::done(a) {
                return Err(NorFlashErrorKind::Other);
            }
        }
        Ok(())
    }
}

/// The CLINT's mtime (10 MHz on virt).
fn now() -> u64 {
    // SAFETY: 32-bit loads of the virt machine's mtime register (high, low, high again).
    unsafe {
        loop {
            let hi = read_volatile(0x0200_BFFC as *const u32);
            let lo = read_volatile(0x0200_BFF8 as *const u32);
            if read_volatile(0x0200_BFFC as *const u32) == hi {
                return (u64::from(hi) << 32) | u64::from(lo);
            }
        }
    }
}

fn pause(ms: u64) {
    let end = now() + ms * 10_000;
    while now() < end {}
}

type Dev = Slots<Pflash>;

fn fail(what: &str, e: impl core::fmt::Debug) -> ! {
    say!("FAIL {what}: {e:?}");
    board::exit(1)
}

/// The image in slot memory, read in place (array mode).
fn image(offset: u32, len: u32) -> &'static [u8] {
    if (offset as usize).saturating_add(len as usize) > CAPACITY {
        fail("image bounds", (offset, len));
    }
    // SAFETY: inside the bank, which reads as memory in array mode and is
    // only written by `Pflash`, never while this slice is in use.
    unsafe { core::slice::from_raw_parts((BASE + offset as usize) as *const u8, len as usize) }
}

/// Download + check + activation of `file`: each packet checked, then programmed.
fn update(s: &mut Dev, file: &[u8], slow: bool) -> Result<u64, kiln_model::Error> {
    let st = s.state().unwrap_or_else(|e| fail("state", e));
    let keys = s.keys().unwrap_or_else(|e| fail("keys", e));
    let Some(key) = keys.for_file(file).copied() else {
        return Err(kiln_model::Error::new(kiln_model::Rule::SignatureKey, kiln_model::signed::KEY_AT));
    };
    let trust = st.trust(&key).unwrap_or_else(|| fail("trusted key", ())).target(TARGET);
    let (mut buf, mut hasher, mut scratch) = ([0u8; 2048], TensorHasher::new(), [0u32; 64]);
    let mut check = UpdateCheck::new(trust, &mut buf, &mut hasher).scratch(&mut scratch);
    let mut dl = s.begin().unwrap_or_else(|e| fail("begin", e));
    let n = file.len().div_ceil(PACKET);
    for (i, p) in file.chunks(PACKET).enumerate() {
        check.feed(p)?;
        s.write(&mut dl, p).unwrap_or_else(|e| fail("write", e));
        if slow {
            say!("  packet {}/{n} programmed", i + 1);
            pause(15);
        }
    }
    let summary = check.finish()?;
    s.finish(dl, summary.version).unwrap_or_else(|e| fail("finish", e));
    Ok(summary.version)
}

#[riscv_rt::entry]
fn main() -> ! {
    say!("kiln slots on QEMU virt's pflash1 (riscv32imc)");
    let mut s = Slots::new(Pflash, LAYOUT).unwrap_or_else(|e| fail("layout", e));
    match s.state() {
        Ok(st) => say!(
            "state: record {}, counter {}, slot {:?} confirmed, trial {:?}",
            st.seq,
            st.counter,
            st.active,
            st.trial
        ),
        Err(SlotError::NotProvisioned) => {
            let a = LAYOUT.slots[0];
            s.flash().erase(a, a + SECTOR as u32).unwrap_or_else(|e| fail("erase slot A", e));
            let whole = FACTORY.len() / 4 * 4;
            s.flash().write(a, &FACTORY[..whole]).unwrap_or_else(|e| fail("program slot A", e));
            let mut tail = [0xFF; 4];
            tail[..FACTORY.len() - whole].copy_from_slice(&FACTORY[whole..]);
            s.flash().write(a + whole as u32, &tail).unwrap_or_else(|e| fail("program slot A", e));
            let keys = Keys::new(&[[0x42; 32], KEY]).unwrap_or_else(|| fail("keys", ()));
            s.write_keys(&keys).unwrap_or_else(|e| fail("write keys", e));
            s.provision(FACTORY.len() as u32, 1).unwrap_or_else(|e| fail("provision", e));
            say!("provisioned: the factory image (release 1) in slot A, 2 trusted keys, counter 1");
        }
        Err(e) => fail("state", e),
    }
    let mut boots = 0;
    loop {
        boots += 1;
        if boots > 3 {
            fail("boots", boots);
        }
        let b = s.boot().unwrap_or_else(|e| fail("boot", e));
        let st = s.state().unwrap_or_else(|e| fail("state", e));
        let img = image(b.offset, b.len);
        match Model::parse_trusted(img, &Trust::new(&KEY).unwrap_or_else(|| fail("key", ())).target(TARGET)) {
            Ok(m) if m.signature().map(|g| g.release.version) == Some(b.version) => {}
            Ok(_) => fail("the image's release is not the recorded one", b.version),
            Err(e) => fail("the booted image fails its checks", e),
        }
        if b.version < st.counter || (b.trial && b.version <= st.counter) {
            fail("a release not above the counter boots", (b.version, st.counter));
        }
        say!(
            "boot: slot {:?}, release {}{}, {} bytes, signature and digests verified in place; counter {}",
            b.slot,
            b.version,
            if b.trial { " (trial)" } else { " (confirmed)" },
            b.len,
            st.counter
        );
        if b.trial {
            say!("trial: running release {} before confirming it", b.version);
            pause(300);
            let st = s.confirm().unwrap_or_else(|e| fail("confirm", e));
            say!("confirmed: release {}, counter {}", b.version, st.counter);
            continue;
        }
        if b.version >= UPDATE_VERSION {
            match update(&mut s, UPDATE, false) {
                Err(e) if e.rule() == kiln_model::AnyRule::Model(kiln_model::Rule::ReleaseVersion) => {
                    say!(
                        "update to release {UPDATE_VERSION} again: refused ({}), the counter is {}",
                        "ReleaseVersion",
                        st.counter
                    )
                }
                r => fail("the same release again", r),
            }
            say!("running: release {}, counter {}", b.version, st.counter);
            say!("result: PASS");
            board::exit(0);
        }
        say!("update: release {UPDATE_VERSION}, {} bytes in {}-byte packets", UPDATE.len(), PACKET);
        match update(&mut s, UPDATE, true) {
            Ok(v) => say!("pending: release {v} in slot {:?}, checked; rebooting", b.slot.other()),
            Err(e) => fail("the update", e),
        }
        pause(300);
        say!("reboot");
    }
}

/// Any trap ends the run (status 0xFFFE) with its cause.
#[export_name = "ExceptionHandler"]
fn exception_handler(_: &riscv_rt::TrapFrame) -> ! {
    let (cause, pc) = board::trap_cause();
    say!("FAIL trap: mcause {cause:#x} at {pc:#x}");
    board::exit(0xFFFE)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    say!("FAIL panic: {info}");
    board::exit(0xFFFF)
}
