//! Reading an input file: memory-mapped when it is a regular file.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use memmap2::Mmap;

/// The bytes of one input file.
pub enum Input {
    /// A non-empty regular file, mapped read-only.
    Mapped(Mmap),
    /// A 0-byte regular file (which cannot be mapped): an empty slice.
    Empty,
    /// A pipe or device (e.g. `/dev/stdin`), read into memory.
    Read(Vec<u8>),
}

impl Input {
    /// Opens `path`. Errors are the operating system's (not found, permission,
    /// a directory, ...); the caller names the file when it reports them.
    pub fn open(path: &Path) -> io::Result<Input> {
        let mut file = File::open(path)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "is a directory"));
        }
        if !meta.is_file() {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            return Ok(Input::Read(bytes));
        }
        if meta.len() == 0 {
            return Ok(Input::Empty);
        }
        // SAFETY: the map is read-only and private to this process. Another
        // process truncating the file while we read it would fault (SIGBUS),
        // as with any memory-mapped reader; nothing here relies on the bytes
        // staying the same between reads, because the validator reads each
        // byte it checks from the slice it is given.
        let map = unsafe { Mmap::map(&file)? };
        Ok(Input::Mapped(map))
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Input::Mapped(map) => map,
            Input::Empty => &[],
            Input::Read(bytes) => bytes,
        }
    }
}
