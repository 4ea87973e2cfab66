//! A mock async NOR flash over bytes in memory: `embedded_storage_async`'s
//! `ReadNorFlash`, as an Embassy flash driver implements it, reading whole
//! 4-byte units; each read first returns `Pending` once (as a read that
//! waits for a DMA transfer would), so the executor polls it again.

use embedded_storage_async::nor_flash::{ErrorType, NorFlashErrorKind, ReadNorFlash};

pub struct AsyncPart<'a> {
    data: &'a [u8],
    /// Reads the driver was asked for.
    pub reads: usize,
}

impl<'a> AsyncPart<'a> {
    pub const fn new(data: &'a [u8]) -> Self {
        AsyncPart { data, reads: 0 }
    }
}

impl ErrorType for AsyncPart<'_> {
    type Error = NorFlashErrorKind;
}

impl ReadNorFlash for AsyncPart<'_> {
    const READ_SIZE: usize = 4;

    async fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), NorFlashErrorKind> {
        embassy_futures::yield_now().await;
        self.reads = self.reads.saturating_add(1);
        if offset & 3 != 0 || bytes.len() & 3 != 0 {
            return Err(NorFlashErrorKind::NotAligned);
        }
        let at = usize::try_from(offset).map_err(|_| NorFlashErrorKind::OutOfBounds)?;
        let src = self.data.get(at..at.saturating_add(bytes.len())).ok_or(NorFlashErrorKind::OutOfBounds)?;
        bytes.copy_from_slice(src);
        Ok(())
    }

    fn capacity(&self) -> usize {
        self.data.len()
    }
}
