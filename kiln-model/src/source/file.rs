//! `std::fs::File` as a [`ReadAt`] source: positioned reads that leave the
//! file's cursor alone where the platform has them.

extern crate std;

use std::fs::File;
use std::io;

use super::ReadAt;

impl ReadAt for &File {
    type Error = io::Error;

    /// `FileExt::read_exact_at` on Unix; `FileExt::seek_read` until full on
    /// Windows; elsewhere a seek, then `read_exact`.
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        positioned_read(self, offset, buf)
    }

    /// The file's length from its metadata.
    fn len(&mut self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

impl ReadAt for File {
    type Error = io::Error;
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        positioned_read(self, offset, buf)
    }
    fn len(&mut self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

#[cfg(unix)]
fn positioned_read(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn positioned_read(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    use crate::bytes::u64_from;
    let mut at = offset;
    let mut rest = buf;
    while !rest.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, rest, at) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                // Fallback not taken: n <= rest.len(): read_at returns at most what it was given.
                rest = core::mem::take(&mut rest).get_mut(n..).unwrap_or_default();
                at = at.saturating_add(u64_from(n));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(not(any(unix, windows)))]
fn positioned_read(mut file: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}
