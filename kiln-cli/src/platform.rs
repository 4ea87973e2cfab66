//! The file operations `kiln` needs that operating systems spell
//! differently, in one place, so the CLI builds and behaves the same on
//! Linux, macOS and Windows. Plain `std`, no dependency:
//!
//! | operation | Linux | macOS, other Unix | Windows |
//! |---|---|---|---|
//! | [`read_exact_at`] | `pread` | `pread` | `ReadFile` at an offset (moves the file cursor) |
//! | [`copy_range`] | `copy_file_range` (in the kernel; std falls back to `sendfile`, then read/write) | read/write through the writer's buffer | read/write through the writer's buffer |
//! | [`replace`] | `rename` | `rename` | `SetFileInformationByHandle` / `MoveFileExW`, replacing an existing file |
//!
//! Memory maps (`memmap2`) and terminal detection (`std::io::IsTerminal`) are
//! already portable and are used directly. `kiln` installs no signal
//! handlers: an interrupted read is retried where it is made
//! (`ErrorKind::Interrupted`), which is portable too.

use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom};
use std::path::Path;

/// Fills `buf` with the bytes of `file` at `offset`, or fails with
/// `UnexpectedEof` when the file ends first.
///
/// On Unix the file cursor does not move (`pread`); on Windows it may, so
/// readers that go through the cursor (`Read`, `io::copy`, a zip archive)
/// must seek before they read, as [`copy_range`] does.
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        let (mut buf, mut offset) = (buf, offset);
        while !buf.is_empty() {
            match file.seek_read(buf, offset) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "failed to fill whole buffer")),
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
    #[cfg(not(any(unix, windows)))]
    {
        use std::io::Read;
        let mut f = file;
        f.seek(SeekFrom::Start(offset))?;
        f.read_exact(buf)
    }
}

/// Appends bytes `[offset, offset + len)` of `input` to `out` and returns how
/// many were copied (fewer only when `input` ends first).
///
/// This is `std::io::copy`, which on Linux moves file-to-file copies in the
/// kernel with `copy_file_range` (after flushing `out`'s buffer), so the
/// payload never passes through this process's memory; elsewhere it reads
/// straight into `out`'s buffer. The input's file cursor is left after the
/// copied range.
pub fn copy_range(input: &File, offset: u64, len: u64, out: &mut BufWriter<File>) -> io::Result<u64> {
    let mut f = input;
    f.seek(SeekFrom::Start(offset))?;
    io::copy(&mut io::Read::take(f, len), out)
}

/// Renames `from` over `to`, replacing `to` if it exists, in one step:
/// other readers see the old file or the new one, never a part.
///
/// Both must be on one file system. On Windows `to` must not be a directory
/// or read-only, and it cannot be replaced while it is memory-mapped, so
/// callers drop their maps (and close their handles) of `to` first.
pub fn replace(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn file_with(bytes: &[u8]) -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in");
        std::fs::write(&path, bytes).unwrap();
        let file = File::open(&path).unwrap();
        (dir, file)
    }

    #[test]
    fn read_exact_at_reads_at_the_offset() {
        let data: Vec<u8> = (0..=255).collect();
        let (_dir, file) = file_with(&data);
        let mut buf = [0u8; 16];
        read_exact_at(&file, &mut buf, 100).unwrap();
        assert_eq!(&buf[..], &data[100..116]);
        // Reads through the cursor still work after a seek, whatever the
        // positioned read did to it.
        let mut f = &file;
        f.seek(SeekFrom::Start(3)).unwrap();
        let mut one = [0u8; 1];
        f.read_exact(&mut one).unwrap();
        assert_eq!(one[0], 3);
        read_exact_at(&file, &mut buf, 240).unwrap();
        assert_eq!(&buf[..], &data[240..]);
    }

    #[test]
    fn read_exact_at_past_the_end_is_unexpected_eof() {
        let (_dir, file) = file_with(&[1, 2, 3]);
        let mut buf = [0u8; 4];
        let err = read_exact_at(&file, &mut buf, 0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        let err = read_exact_at(&file, &mut buf[..1], 3).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        read_exact_at(&file, &mut buf[..0], 3).unwrap();
    }

    #[test]
    fn copy_range_appends_the_range() {
        let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let (dir, file) = file_with(&data);
        let out_path = dir.path().join("out");
        let mut out = BufWriter::new(File::create(&out_path).unwrap());
        out.write_all(b"head").unwrap();
        assert_eq!(copy_range(&file, 1000, 150_000, &mut out).unwrap(), 150_000);
        // The input ends first: fewer bytes, no error.
        assert_eq!(copy_range(&file, 199_990, 100, &mut out).unwrap(), 10);
        drop(out.into_inner().unwrap());
        let got = std::fs::read(&out_path).unwrap();
        assert_eq!(&got[..4], b"head");
        assert_eq!(&got[4..150_004], &data[1000..151_000]);
        assert_eq!(&got[150_004..], &data[199_990..]);
    }

    #[test]
    fn replace_overwrites_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("from"), dir.path().join("to"));
        std::fs::write(&from, b"new").unwrap();
        std::fs::write(&to, b"old, longer").unwrap();
        replace(&from, &to).unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), b"new");
        assert!(!from.exists());
    }
}
