//! A NOR flash model with a power-cut fault model, for the power-cut
//! simulator (`tests/power_cut.rs`).
//!
//! Every erase and every write is one operation, numbered from 0. Power
//! is cut during operation `cut` (when set): that operation is left
//! half done and the flash then refuses every call (the device is off)
//! until [`Nor::power_on`]. The fault model:
//!
//! - an interrupted write clears a seeded random subset of the bits it was
//!   clearing (a NOR write only ever turns 1 bits to 0);
//! - an interrupted erase leaves seeded random bits in the range: each
//!   byte keeps its old bits with some set to 1 (an erase in progress), or,
//!   in one sector in four, is random outright;
//! - a write that would set a 0 bit to 1 is refused and counted (a program
//!   without an erase first, which is a bug in the code under test).

use embedded_storage::nor_flash::{ErrorType, NorFlash, NorFlashError, NorFlashErrorKind, ReadNorFlash};

/// Why a flash call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NorError {
    /// The power is off (cut during this operation or an earlier one).
    Cut,
    /// The write would set a 0 bit to 1.
    ZeroToOne,
    /// Out of bounds or misaligned.
    Bad(NorFlashErrorKind),
}

impl NorFlashError for NorError {
    fn kind(&self) -> NorFlashErrorKind {
        match self {
            NorError::Bad(k) => *k,
            _ => NorFlashErrorKind::Other,
        }
    }
}

/// splitmix64: a seeded stream of random words.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// The flash: its bytes and the fault state.
#[derive(Clone, Debug)]
pub struct Nor {
    pub mem: Vec<u8>,
    /// Operations (erases and writes) so far.
    pub ops: u64,
    /// The operation the power is cut in.
    pub cut: Option<u64>,
    pub off: bool,
    pub rng: Rng,
    pub erases: u64,
    pub writes: u64,
    /// Writes refused for setting a 0 bit to 1.
    pub refused: u64,
}

pub const ERASE: usize = 4096;

impl Nor {
    /// An erased flash of `len` bytes.
    pub fn new(len: usize) -> Nor {
        Nor { mem: vec![0xFF; len], ops: 0, cut: None, off: false, rng: Rng(0), erases: 0, writes: 0, refused: 0 }
    }

    /// Cuts power during operation `op` (counted from now), partial effects drawn from `seed`.
    pub fn cut_at(&mut self, op: u64, seed: u64) {
        self.ops = 0;
        self.cut = Some(op);
        self.rng = Rng(seed ^ op.wrapping_mul(0x2545_F491_4F6C_DD1D));
    }

    /// Power back: every call works again, no cut planned.
    pub fn power_on(&mut self) {
        self.off = false;
        self.cut = None;
    }

    /// Counts the operation; true when the power goes off in it.
    fn tick(&mut self) -> Result<bool, NorError> {
        if self.off {
            return Err(NorError::Cut);
        }
        let now = self.ops;
        self.ops += 1;
        Ok(self.cut == Some(now))
    }
}

impl ErrorType for Nor {
    type Error = NorError;
}

impl ReadNorFlash for Nor {
    const READ_SIZE: usize = 1;

    fn read(&mut self, at: u32, buf: &mut [u8]) -> Result<(), NorError> {
        if self.off {
            return Err(NorError::Cut);
        }
        let at = at as usize;
        let src = self.mem.get(at..at + buf.len()).ok_or(NorError::Bad(NorFlashErrorKind::OutOfBounds))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn capacity(&self) -> usize {
        self.mem.len()
    }
}

impl NorFlash for Nor {
    const WRITE_SIZE: usize = 4;
    const ERASE_SIZE: usize = ERASE;

    fn erase(&mut self, from: u32, to: u32) -> Result<(), NorError> {
        embedded_storage::nor_flash::check_erase(self, from, to).map_err(NorError::Bad)?;
        let cut = self.tick()?;
        let range = from as usize..to as usize;
        if cut {
            for sector in self.mem[range].chunks_mut(ERASE) {
                let wild = self.rng.below(4) == 0;
                for b in sector {
                    *b = if wild { self.rng.byte() } else { *b | self.rng.byte() };
                }
            }
            self.off = true;
            return Err(NorError::Cut);
        }
        self.erases += 1;
        self.mem[range].fill(0xFF);
        Ok(())
    }

    fn write(&mut self, at: u32, bytes: &[u8]) -> Result<(), NorError> {
        embedded_storage::nor_flash::check_write(self, at, bytes.len()).map_err(NorError::Bad)?;
        if self.off {
            return Err(NorError::Cut);
        }
        let at = at as usize;
        let dst = &self.mem[at..at + bytes.len()];
        if dst.iter().zip(bytes).any(|(&old, &new)| !old & new != 0) {
            self.refused += 1;
            return Err(NorError::ZeroToOne);
        }
        let cut = self.tick()?;
        let dst = &mut self.mem[at..at + bytes.len()];
        if cut {
            for (d, &s) in dst.iter_mut().zip(bytes) {
                let clearing = *d & !s;
                *d &= !(clearing & self.rng.byte());
            }
            self.off = true;
            return Err(NorError::Cut);
        }
        self.writes += 1;
        for (d, &s) in dst.iter_mut().zip(bytes) {
            *d &= s;
        }
        Ok(())
    }
}

#[cfg(feature = "embedded-storage-async")]
/// The same flash behind `embedded_storage_async`'s traits (each call ready at once).
#[derive(Clone, Debug)]
pub struct AsyncNor(pub Nor);

#[cfg(feature = "embedded-storage-async")]
impl ErrorType for AsyncNor {
    type Error = NorError;
}

#[cfg(feature = "embedded-storage-async")]
impl embedded_storage_async::nor_flash::ReadNorFlash for AsyncNor {
    const READ_SIZE: usize = 1;

    async fn read(&mut self, at: u32, buf: &mut [u8]) -> Result<(), NorError> {
        ReadNorFlash::read(&mut self.0, at, buf)
    }

    fn capacity(&self) -> usize {
        self.0.mem.len()
    }
}

#[cfg(feature = "embedded-storage-async")]
impl embedded_storage_async::nor_flash::NorFlash for AsyncNor {
    const WRITE_SIZE: usize = 4;
    const ERASE_SIZE: usize = ERASE;

    async fn erase(&mut self, from: u32, to: u32) -> Result<(), NorError> {
        NorFlash::erase(&mut self.0, from, to)
    }

    async fn write(&mut self, at: u32, bytes: &[u8]) -> Result<(), NorError> {
        NorFlash::write(&mut self.0, at, bytes)
    }
}
