//! [`Flash`]: a [`ReadAt`] source over `embedded_storage`'s NOR flash, and
//! [`AsyncFlash`]: an [`AsyncReadAt`] source over `embedded_storage_async`'s.
//! One read loop (`flash_fns!`), compiled over each.

#[cfg(feature = "embedded-storage")]
use embedded_storage::nor_flash::ReadNorFlash;

#[cfg(feature = "embedded-storage-async")]
use super::AsyncReadAt;
#[cfg(feature = "embedded-storage")]
use super::ReadAt;
use super::ReadError;
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
/// use kiln_model::source::{self, Flash, Options, ReadError, SourceError, Window};
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
#[cfg(feature = "embedded-storage")]
#[derive(Debug)]
pub struct Flash<F, const B: usize = 64> {
    flash: F,
    bounce: [u8; B],
}

#[cfg(feature = "embedded-storage")]
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

/// The read loop over the flash trait `$Flash`, each flash call wrapped in
/// `$io!` (`ready!` or `wait!`), `async` if given.
macro_rules! flash_fns {
    ($Flash:path, $io:ident $(, $async:tt)?) => {
        /// One flash read of whole units at an aligned offset.
        $($async)? fn read_units<F: $Flash>(flash: &mut F, at: u64, buf: &mut [u8]) -> Result<(), ReadError<F::Error>> {
            let at = u32::try_from(at).map_err(|_| ReadError::OutOfBounds)?;
            $io!(flash.read(at, buf)).map_err(ReadError::Source)
        }

        /// Fills `buf` from `offset`: aligned runs straight from the flash,
        /// an unaligned head or tail through `bounce`.
        pub(super) $($async)? fn read<F: $Flash, const B: usize>(
            flash: &mut F,
            bounce: &mut [u8; B],
            offset: u64,
            buf: &mut [u8],
        ) -> Result<(), ReadError<F::Error>> {
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
                    $io!(read_units(flash, at, dst))?;
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
                    $io!(read_units(flash, at.saturating_sub(u64_from(skew)), units))?;
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
    };
}

/// Over `embedded_storage`'s [`ReadNorFlash`].
#[cfg(feature = "embedded-storage")]
mod blocking {
    use super::*;
    flash_fns!(ReadNorFlash, ready);
}

/// Over `embedded_storage_async`'s `ReadNorFlash`.
#[cfg(feature = "embedded-storage-async")]
mod nonblocking {
    use super::*;
    flash_fns!(embedded_storage_async::nor_flash::ReadNorFlash, wait, async);
}

#[cfg(feature = "embedded-storage")]
impl<F: ReadNorFlash, const B: usize> ReadAt for Flash<F, B> {
    type Error = ReadError<F::Error>;

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        blocking::read(&mut self.flash, &mut self.bounce, offset, buf)
    }

    fn len(&mut self) -> Result<u64, Self::Error> {
        Ok(u64_from(self.flash.capacity()))
    }
}

/// An async NOR flash (`embedded_storage_async`'s `ReadNorFlash`, as Embassy's
/// flash drivers implement it) as an [`AsyncReadAt`] source: `Flash`'s
/// reads (the same loop: aligned runs straight into the caller's buffer, an
/// unaligned head or tail through a bounce buffer of `B` bytes, `B` at least
/// `READ_SIZE`, checked when the adapter is built), each awaited.
///
/// ```
/// use embedded_storage_async::nor_flash::{ErrorType, NorFlashErrorKind, ReadNorFlash};
/// use kiln_model::source::{self, AsyncFlash, Options, Window};
///
/// // A part that reads whole 4-byte words, say behind an async SPI driver (here a mock).
/// struct Spi(Vec<u8>);
/// impl ErrorType for Spi {
///     type Error = NorFlashErrorKind;
/// }
/// impl ReadNorFlash for Spi {
///     const READ_SIZE: usize = 4;
///     async fn read(&mut self, at: u32, buf: &mut [u8]) -> Result<(), NorFlashErrorKind> {
///         if at % 4 != 0 || buf.len() % 4 != 0 {
///             return Err(NorFlashErrorKind::NotAligned);
///         }
///         let src = self.0.get(at as usize..).and_then(|s| s.get(..buf.len()));
///         buf.copy_from_slice(src.ok_or(NorFlashErrorKind::OutOfBounds)?);
///         Ok(())
///     }
///     fn capacity(&self) -> usize {
///         self.0.len()
///     }
/// }
/// # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
/// let mut image = vec![0xff; 8192];
/// image[1030..1030 + block.len()].copy_from_slice(&block); // the model at an odd address
/// let mut flash = AsyncFlash::<_>::new(Spi(image));
/// embassy_futures::block_on(async {
///     let mut part = Window::new(&mut flash, 1030, 8192 - 1030); // its partition
///     let (mut prefix, mut chunk) = ([0u8; 512], [0u8; 64]);
///     let summary = Options::new().embedded().verify_async(&mut part, &mut prefix, &mut chunk).await.unwrap();
///     assert_eq!(summary.block_len, block.len() as u64);
///     let model = Options::new().embedded().open_async(&mut part, &mut prefix).await.unwrap();
///     let mut w = [0u8; 8];
///     source::read_tensor_async(&mut part, &model, "w", &mut w).await.unwrap();
///     assert_eq!(w, [0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0]);
/// });
/// ```
#[cfg(feature = "embedded-storage-async")]
#[derive(Debug)]
pub struct AsyncFlash<F, const B: usize = 64> {
    flash: F,
    bounce: [u8; B],
}

#[cfg(feature = "embedded-storage-async")]
impl<F: embedded_storage_async::nor_flash::ReadNorFlash, const B: usize> AsyncFlash<F, B> {
    /// Reads `flash`, through a bounce buffer of `B` bytes where unaligned.
    #[must_use]
    pub const fn new(flash: F) -> Self {
        const { assert!(F::READ_SIZE <= B && B > 0, "the bounce buffer B must hold one READ_SIZE unit") };
        AsyncFlash { flash, bounce: [0; B] }
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

#[cfg(feature = "embedded-storage-async")]
impl<F: embedded_storage_async::nor_flash::ReadNorFlash, const B: usize> AsyncReadAt for AsyncFlash<F, B> {
    type Error = ReadError<F::Error>;

    async fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        nonblocking::read(&mut self.flash, &mut self.bounce, offset, buf).await
    }

    async fn len(&mut self) -> Result<u64, Self::Error> {
        Ok(u64_from(self.flash.capacity()))
    }
}
