//! The one memory map of a file: read-only, `None` for an empty file (which
//! cannot be mapped). The crate's only `unsafe` block is here.

use std::fs::File;
use std::io;
use std::path::Path;

use memmap2::Mmap;

/// A mapped file's bytes (an empty file has none).
#[derive(Debug)]
pub struct Mapped {
    map: Option<Mmap>,
}

impl Mapped {
    /// Maps the open `file`, which must be a regular file (`metadata` is its own).
    pub fn of(file: &File, meta: &std::fs::Metadata) -> io::Result<Mapped> {
        if meta.len() == 0 {
            return Ok(Mapped { map: None });
        }
        // SAFETY: a read-only map of a regular file, never written through; a
        // concurrent truncation faults (SIGBUS) as with any mapped reader, and
        // a concurrent write can change bytes already checked (the price of a
        // map, which every mapped reader pays; `Options::verify_digests` reads
        // every payload once at open, not later).
        let map = unsafe { Mmap::map(file) }?;
        Ok(Mapped { map: Some(map) })
    }

    /// Opens and maps the regular file at `path` (links followed: the caller
    /// decides which paths may be opened, see [`crate::paths`]).
    pub fn open(path: &Path) -> io::Result<Mapped> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
        }
        Mapped::of(&file, &meta)
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

impl std::ops::Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_ref()
    }
}
