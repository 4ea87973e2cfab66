//! Reading an input file: memory-mapped when it is a regular file, streamed
//! when it is standard input (`-`) or another pipe.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use memmap2::Mmap;

/// The file argument that names standard input.
pub const STDIN: &str = "-";

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
        let (file, meta) = open_file(path)?;
        if !meta.is_file() {
            return read_all(file);
        }
        map(&file, meta.len())
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

/// Where one file argument of `kiln validate` / `kiln inspect` comes from.
pub enum Source {
    /// A regular file, memory-mapped.
    File(Input),
    /// Standard input (`-`), a pipe, FIFO or device: read as it arrives.
    Stream(Box<dyn Read>),
}

impl Source {
    /// Opens `path`; `-` is standard input. Errors as for [`Input::open`].
    pub fn open(path: &Path) -> io::Result<Source> {
        if path.as_os_str() == STDIN {
            return Ok(Source::Stream(Box::new(io::stdin())));
        }
        let (file, meta) = open_file(path)?;
        if !meta.is_file() {
            return Ok(Source::Stream(Box::new(file)));
        }
        map(&file, meta.len()).map(Source::File)
    }

    /// All the bytes: a stream is read to its end into memory.
    pub fn into_input(self) -> io::Result<Input> {
        match self {
            Source::File(input) => Ok(input),
            Source::Stream(reader) => read_all(reader),
        }
    }
}

fn open_file(path: &Path) -> io::Result<(File, std::fs::Metadata)> {
    let file = File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "is a directory"));
    }
    Ok((file, meta))
}

fn read_all(mut reader: impl Read) -> io::Result<Input> {
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes)?;
    Ok(Input::Read(bytes))
}

fn map(file: &File, len: u64) -> io::Result<Input> {
    if len == 0 {
        return Ok(Input::Empty);
    }
    // SAFETY: the map is read-only and private to this process. Another
    // process truncating the file while we read it would fault (SIGBUS),
    // as with any memory-mapped reader; nothing here relies on the bytes
    // staying the same between reads, because the validator reads each
    // byte it checks from the slice it is given.
    let map = unsafe { Mmap::map(file)? };
    Ok(Input::Mapped(map))
}
