//! [`Flash`]: a [`ReadAt`] source over `embedded_storage`'s NOR flash.

use embedded_storage::nor_flash::ReadNorFlash;

use super::{ReadAt, ReadError};
use crate::bytes::{u64_from, usize_from};

/// A NOR flash ([`ReadNorFlash`]) as a source.
///
/// A flash reads only whole `READ_SIZE` units at offsets that are multiples
/// of it. Aligned runs go straight into the caller's buffer; an unaligned
/// head or tail goes through a bounce buffer of `B` bytes (default 64) that
/// lives in this adapter, so nothing is allocated. `B` must be at least
/// `READ_SIZE` (checked when the adapter is built: a smaller `B` does not
/// compile). Offsets past `u32::MAX` are [`ReadError::OutOfBounds`]; the
/// source's length is the flash's capacity, so a model stored in a
/// partition is read through a [`Window`](super::Window) and
/// [`Options::embedded`](super::Options::embedded).
///
/// ```
/// use embedded_storage::nor_flash::{check_read, ErrorType, NorFlashErrorKind, ReadNorFlash};
/// use kiln_nostd::source::{self, Flash, Options, ReadError, SourceError, Window};
///
/// // A part that reads whole 4-byte words (here a mock).
/// struct Spi(Vec<u8>);
/// impl ErrorType for Spi {
///     type Error = NorFlashErrorKind;
/// }
/// impl ReadNorFlash for Spi {
///     const READ_SIZE: usize = 4;
///     fn read(&mut self, at: u32, buf: &mut [u8]) -> Result<(), NorFlashErrorKind> {
///         check_read(&*self, at, buf.len())?;
///         buf.copy_from_slice(&self.0[at as usize..][..buf.len()]);
///         Ok(())
///     }
///     fn capacity(&self) -> usize {
///         self.0.len()
///     }
/// }
/// # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
/// let mut image = vec![0xff; 8192];
/// image[1030..1030 + block.len()].copy_from_slice(&block); // the model at an odd address
/// let mut flash = Flash::<_>::new(Spi(image));
/// let mut part = Window::new(&mut flash, 1030, 8192 - 1030); // its partition
/// let mut prefix = [0u8; 512];
/// let model = Options::new().embedded().open(&mut part, &mut prefix)?;
/// let mut w = [0u8; 8];
/// source::read_tensor(&mut part, &model, "w", &mut w)?;
/// assert_eq!(w, [0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0]);
/// # Ok::<(), SourceError<ReadError<ReadError<NorFlashErrorKind>>>>(())
/// ```
#[derive(Debug)]
pub struct Flash<F, const B: usize = 64> {
    flash: F,
    bounce: [u8; B],
}

impl<F: ReadNorFlash, const B: usize> Flash<F, B> {
    /// Reads `flash`, through a bounce buffer of `B` bytes where unaligned.
    #[must_use]
    pub const fn new(flash: F) -> Self {
        const { assert!(F::READ_SIZE <= B && B > 0, "the bounce buffer B must hold one READ_SIZE unit") };
        Flash { flash, bounce: [0; B] }
    }

    /// The flash.
    pub fn into_inner(self) -> F {
        self.flash
    }

    /// The flash, borrowed.
    pub fn inner(&mut self) -> &mut F {
        &mut self.flash
    }
}

/// One flash read of whole units at an aligned offset.
fn read_units<F: ReadNorFlash>(flash: &mut F, at: u64, buf: &mut [u8]) -> Result<(), ReadError<F::Error>> {
    let at = u32::try_from(at).map_err(|_| ReadError::OutOfBounds)?;
    flash.read(at, buf).map_err(ReadError::Source)
}

impl<F: ReadNorFlash, const B: usize> ReadAt for Flash<F, B> {
    type Error = ReadError<F::Error>;

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        let Flash { flash, bounce } = self;
        let unit = u64_from(F::READ_SIZE.max(1));
        // The bounce holds this many whole units (at least one: see `new`).
        let bounce_len = u64_from(B).checked_div(unit).unwrap_or(0).saturating_mul(unit).max(unit);
        let mut at = offset;
        let mut rest = buf;
        while !rest.is_empty() {
            // Fallback not taken: unit is a nonzero read unit.
            let skew = at.checked_rem(unit).unwrap_or(0);
            let want = u64_from(rest.len());
            // Fallback not taken: unit is a nonzero read unit.
            let direct = want.saturating_sub(want.checked_rem(unit).unwrap_or(0));
            let taken = if skew == 0 && direct > 0 {
                // Whole units at an aligned offset: straight into the caller's buffer.
                let n = usize_from(direct).unwrap_or(0);
                let dst = rest.get_mut(..n).ok_or(ReadError::OutOfBounds)?;
                read_units(flash, at, dst)?;
                n
            } else {
                // The units holding the unaligned head (or a short tail).
                let span = skew.saturating_add(want).div_ceil(unit).saturating_mul(unit).min(bounce_len);
                let take = span.saturating_sub(skew).min(want);
                // Fallback not taken: span is at most the bounce buffer's length, a usize.
                let span = usize_from(span).unwrap_or(0);
                // Fallback not taken: skew and take are at most span, a usize.
                let (skew, take) = (usize_from(skew).unwrap_or(0), usize_from(take).unwrap_or(0));
                let units = bounce.get_mut(..span).ok_or(ReadError::OutOfBounds)?;
                read_units(flash, at.saturating_sub(u64_from(skew)), units)?;
                let src = units.get(skew..skew.saturating_add(take)).ok_or(ReadError::OutOfBounds)?;
                rest.get_mut(..take).ok_or(ReadError::OutOfBounds)?.copy_from_slice(src);
                take
            };
            if taken == 0 {
                return Err(ReadError::OutOfBounds);
            }
            // Fallback not taken: taken <= rest.len() (checked just above).
            rest = core::mem::take(&mut rest).get_mut(taken..).unwrap_or_default();
            at = at.saturating_add(u64_from(taken));
        }
        Ok(())
    }

    fn len(&mut self) -> Result<u64, Self::Error> {
        Ok(u64_from(self.flash.capacity()))
    }
}
