//! Step 0, at boot (feature `digests`): the flashed model file's digests
//! checked before the model is used. `kiln_model::source::Options::verify_model`
//! streams the file from flash through a 64-byte chunk: frame, metadata,
//! digest table, block, and every tensor's SHA-256 against its digest
//! (step 9d of spec/model-file.md). The prefix buffer is the RAM slot,
//! free at boot; the SHA-256 state is on the stack.
//!
//! The cost is reported in SysTick ticks of the core clock and converted
//! to instructions with a calibration loop of known length: under
//! `qemu-system-arm -icount shift=0` every instruction takes one virtual
//! nanosecond, so the figure is an instruction count (QEMU is not cycle
//! accurate: it is not the M3's cycle count). Without `-icount` the ticks
//! follow the host's clock and the figure means nothing (ci.sh runs the
//! demo once more with `-icount` for it).

use cortex_m_semihosting::hprintln;
use kiln_model::source::{ModelSummary, Options, OutOfBounds, ReadAt, SourceError};
use kiln_model::Error;

use crate::checks::Checks;
use crate::ticks::{instructions, Ticks, CAL_ITERS};

/// The chunk the payloads stream through (a tensor spans many of them).
pub const CHUNK: usize = 64;

/// A boot verdict: accepted (what was checked), or refused (the format
/// error, or another failure of the source).
pub type Verdict = Result<ModelSummary, Option<Error>>;

/// A source of the model file: the flash (`&[u8]`), or a damaged copy of it
/// ([`Flipped`]); one `dyn` type, so the check is in flash once.
pub type Source<'a> = &'a mut dyn ReadAt<Error = OutOfBounds>;

/// Checks the model file in `source` (flash) with or without its digests,
/// through `prefix` and a [`CHUNK`]-byte chunk on the stack.
pub fn verify(source: Source<'_>, prefix: &mut [u8], hash: bool) -> Verdict {
    let mut chunk = [0u8; CHUNK];
    let options = if hash { Options::new() } else { Options::new().skip_digests() };
    options.verify_model(source, prefix, &mut chunk).map_err(|e: SourceError<OutOfBounds>| e.kiln())
}

/// Step 0: the flashed model file, checked with its digests before any use
/// (the verdict decides whether the demo may use it), and the cost of the
/// hashing: the same check without it, timed the same way.
pub fn boot_check(file: &'static [u8], prefix: &mut [u8], ticks: &mut Ticks, chk: &mut Checks) -> bool {
    hprintln!(
        "boot: digits-mlp.model.kiln, {} bytes in flash: checking its digests ({}-byte chunk)",
        file.len(),
        CHUNK
    );
    let cal = ticks.cal;
    let mut flash = file;
    let (verdict, t_full) = ticks.time(|| verify(&mut flash, prefix, true));
    let mut payload = 0;
    let ok = match verdict {
        Ok(s) => {
            payload = s.block.block_len.saturating_sub(s.block.payload_base);
            hprintln!(
                "  ACCEPTED: {} tensors, digests checked: {}, block at +{}",
                s.block.header.tensor_count,
                if s.digests_checked { "yes" } else { "no" },
                s.block_start
            );
            chk.expect(s.digests_checked, "the boot check hashed every tensor")
        }
        Err(e) => {
            match e {
                Some(e) => hprintln!("  REFUSED: {} at {} ({})", e.code().as_str(), e.offset(), e.rule().id()),
                None => hprintln!("  REFUSED: the source failed"),
            }
            chk.expect(false, "the flashed model file passes its boot check")
        }
    };
    let (skipped, t_skip) = ticks.time(|| verify(&mut flash, prefix, false));
    chk.expect(skipped.is_ok_and(|s| !s.digests_checked), "the check without hashing accepts it too");
    let (i_full, i_skip) = (instructions(t_full, cal), instructions(t_skip, cal));
    let i_hash = i_full.saturating_sub(i_skip);
    hprintln!(
        "  cost: {} SysTick ticks with hashing, {} without; calibration {} ticks for {} instructions",
        t_full,
        t_skip,
        cal,
        CAL_ITERS * 2
    );
    hprintln!(
        "  instructions (valid under qemu -icount shift=0; QEMU is not cycle-accurate): check {}, without hashing {}, hashing {} ({} per payload byte, {} payload bytes)",
        i_full,
        i_skip,
        i_hash,
        i_hash.checked_div(payload).unwrap_or(0),
        payload
    );
    ok
}

/// The flash with one byte damaged: the same bytes through the same
/// reader, one of them XORed with `mask` (a bit flipped in storage).
pub struct Flipped {
    pub bytes: &'static [u8],
    pub at: u64,
    pub mask: u8,
}

impl ReadAt for Flipped {
    type Error = OutOfBounds;
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        self.bytes.read_at(offset, buf)?;
        if let Some(b) = self.at.checked_sub(offset).and_then(|i| buf.get_mut(usize::try_from(i).ok()?)) {
            *b ^= self.mask;
        }
        Ok(())
    }
    fn len(&mut self) -> Result<u64, Self::Error> {
        Ok(self.bytes.len() as u64)
    }
}
