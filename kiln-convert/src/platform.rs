//! The file operations `kiln` needs that operating systems spell
//! differently, in one place, so the CLI builds and behaves the same on
//! Linux, macOS and Windows. Plain `std` and `libc` constants (Windows:
//! `same-file`):
//!
//! | operation | Linux | macOS, other Unix | Windows |
//! |---|---|---|---|
//! | [`read_exact_at`] | `pread` | `pread` | `ReadFile` at an offset (moves the file cursor) |
//! | [`copy_range`] | `copy_file_range` (in the kernel; std falls back to `sendfile`, then read/write) | read/write through the writer's buffer | read/write through the writer's buffer |
//! | [`replace`] | `rename` | `rename` | `SetFileInformationByHandle` / `MoveFileExW`, replacing an existing file |
//! | [`open_input`] | `O_NONBLOCK` (a FIFO does not block the open) | the same | a plain open |
//! | [`create_new`] | `O_CREAT\|O_EXCL\|O_NOFOLLOW\|O_CLOEXEC`, a mode | the same | `CREATE_NEW` (fails on anything there, a link too) |
//! | [`keep_owner_and_mode`] | `fchown` (when permitted) and `fchmod` to OUT's | the same | nothing (ACLs are inherited from the folder) |
//! | [`same_file`] | device and inode | the same | volume serial and file index (`same-file`) |
//!
//! Memory maps (`memmap2`), terminal detection (`std::io::IsTerminal`) and
//! the SIGINT/SIGTERM handler of `kiln convert`
//! (`ctrlc`: a signal on Unix, the console control handler on Windows) are
//! portable crates and are used directly. An interrupted read is retried
//! where it is made (`ErrorKind::Interrupted`), which is portable too.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Seek, SeekFrom};
use std::path::Path;

/// Opens `path` for reading without waiting for a writer when it is a FIFO
/// (on Unix the open is non-blocking; reads of a regular file are unaffected).
/// The caller checks the file type on the open handle.
pub fn open_input(path: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK);
    }
    o.open(path)
}

/// Creates a new file at `path` for reading and writing, failing when
/// anything is there already, a symbolic link included (dangling or not):
/// `O_CREAT|O_EXCL|O_NOFOLLOW` on Unix, with permission bits `mode` (less the
/// umask), `CREATE_NEW` on Windows.
pub fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    o.open(path)
}

/// The permission bits a new file gets on Unix (before the umask), or an
/// existing file's, so a replaced OUT keeps its mode.
pub fn mode_of(meta: Option<&std::fs::Metadata>) -> u32 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.map_or(0o666, |m| m.permissions().mode() & 0o777)
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        0o666
    }
}

/// Gives `file` the owner (when this process may) and the exact permission
/// bits of the file it replaces (the umask does not apply). Setuid, setgid
/// and sticky bits are not copied. Nothing on Windows.
pub fn keep_owner_and_mode(file: &File, old: &std::fs::Metadata) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        // Only root may give a file away; anyone may keep their own. A
        // failure leaves this process's user as the owner, as `cp` does.
        let _ = std::os::unix::fs::fchown(file, Some(old.uid()), Some(old.gid()));
        file.set_permissions(std::fs::Permissions::from_mode(old.permissions().mode() & 0o777))
    }
    #[cfg(not(unix))]
    {
        let _ = (file, old);
        Ok(())
    }
}

/// True when `path` (whose metadata is `meta`) is the open file `input`: the
/// same device and inode on Unix (no open needed, so a write-only OUT can be
/// checked), the same volume serial number and file index on Windows.
pub fn same_file(path: &Path, meta: &std::fs::Metadata, input: &File) -> io::Result<bool> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let _ = path;
        let theirs = input.metadata()?;
        Ok(meta.dev() == theirs.dev() && meta.ino() == theirs.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        Ok(same_file::Handle::from_path(path)? == same_file::Handle::from_file(input.try_clone()?)?)
    }
}

/// What kind of non-regular file `meta` describes, for messages.
pub fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    if t.is_symlink() {
        return "a symbolic link";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Writes all of `buf` into `file` at `offset` (a table patched in once its
/// contents are known); the file cursor may move on Windows.
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        let (mut buf, mut offset) = (buf, offset);
        while !buf.is_empty() {
            match file.seek_write(buf, offset) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "failed to write whole buffer")),
                Ok(n) => {
                    buf = buf.get(n..).unwrap_or_default();
                    offset = offset.saturating_add(kiln_nostd::int::u64_from(n));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (file, buf, offset);
        Err(io::Error::new(io::ErrorKind::Unsupported, "positioned writes need Unix or Windows"))
    }
}

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
                    // `seek_read` returns at most `buf.len()` bytes.
                    buf = std::mem::take(&mut buf).get_mut(n..).unwrap_or_default();
                    offset = offset.saturating_add(kiln_nostd::int::u64_from(n));
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

/// Hands memory the process has freed back to the system, where the
/// allocator keeps it otherwise: glibc keeps freed small blocks (a table's
/// 500,000 names) in its heap, so the resident set would not fall before
/// the converter reads its output back. Elsewhere nothing to do.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it
    // touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
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
    fn create_new_never_follows_or_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"precious").unwrap();
        let exists = dir.path().join("exists");
        std::fs::write(&exists, b"x").unwrap();
        assert_eq!(create_new(&exists, 0o666).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        #[cfg(unix)]
        {
            let link = dir.path().join("link");
            std::os::unix::fs::symlink(&target, &link).unwrap();
            assert!(create_new(&link, 0o666).is_err(), "a planted symlink is never followed");
            let dangling = dir.path().join("dangling");
            std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
            assert!(create_new(&dangling, 0o666).is_err(), "nor a dangling one");
            assert!(!dir.path().join("nowhere").exists());
        }
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
        let mut f = create_new(&dir.path().join("new"), 0o600).unwrap();
        f.write_all(b"ok").unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn open_input_does_not_block_on_a_fifo() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let f = open_input(&fifo).unwrap(); // returns at once, no writer needed
        assert_eq!(kind_of(&f.metadata().unwrap()), "a FIFO");
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
