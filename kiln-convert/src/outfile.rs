//! Writing OUT so that nothing is ever destroyed:
//!
//! * OUT is resolved through symbolic links (the link's target is replaced,
//!   the link stays); a dangling link, a directory, a device, a FIFO or a
//!   socket is refused (exit 2), so `-o /dev/null` never replaces a device
//!   node, and OUT that is the input file itself (same device and inode:
//!   the same path, a `..` path, a hard link, a link to it) is refused.
//! * The bytes go to a new temporary file beside OUT's target, created with
//!   a random name, exclusively and never through a symbolic link
//!   (`O_CREAT|O_EXCL|O_NOFOLLOW`), with OUT's permission bits (and owner,
//!   where permitted); it is renamed over OUT only once it has been written
//!   and checked. Any failure removes it, and so do SIGINT and SIGTERM
//!   (Ctrl-C, Ctrl-Break and closing the console on Windows): the handler
//!   `kiln convert` installs ([`remove_pending`]) deletes every temporary
//!   file still registered and exits 130.
//! * Several outputs (OUT and OUT.meta.json) are renamed in order, the next
//!   only after the one before is in place.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use anyhow::Context;
use tempfile::NamedTempFile;

use super::error::{io_fail, Usage};
use crate::platform;

/// Temporary files to delete when a signal arrives.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn pending() -> MutexGuard<'static, Vec<PathBuf>> {
    PENDING.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The registry of temporary files, held: what a SIGINT/SIGTERM handler
/// keeps until the process exits, so no rename runs after it (see
/// [`remove_pending`]).
pub struct Held {
    _files: MutexGuard<'static, Vec<PathBuf>>,
}

/// For a signal handler (`kiln convert` installs one for SIGINT and
/// SIGTERM): removes every temporary file still registered and returns the
/// registry held, to keep until the process exits. Holding the registry
/// lock while renaming means the handler waits for a rename in progress,
/// then finds nothing to remove.
pub fn remove_pending() -> Held {
    let files = pending();
    for p in files.iter() {
        let _ = fs::remove_file(p);
    }
    Held { _files: files }
}

/// Where one output goes.
#[derive(Debug)]
pub struct Target {
    /// OUT as given (for messages).
    pub given: PathBuf,
    /// The file that is replaced: OUT, or the end of its chain of links.
    pub path: PathBuf,
    /// The existing file's metadata, when there is one.
    pub existing: Option<fs::Metadata>,
}

impl Target {
    /// Resolves `given` through symbolic links and refuses what must not be
    /// replaced (see the module documentation). `input` is the open input.
    pub fn resolve(given: &Path, input: &File) -> anyhow::Result<Target> {
        let mut path = given.to_path_buf();
        let mut via_link = false;
        for _ in 0..40 {
            let meta = match fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if via_link {
                        return Err(Usage(format!(
                            "{} is a symbolic link to {}, which does not exist; not writing through a dangling link",
                            given.display(),
                            path.display()
                        ))
                        .into());
                    }
                    return Ok(Target { given: given.to_path_buf(), path, existing: None });
                }
                Err(e) => return Err(io_fail(format!("cannot check {}", path.display()))(e)),
            };
            if meta.file_type().is_symlink() {
                let link = fs::read_link(&path).map_err(io_fail(format!("cannot read the link {}", path.display())))?;
                let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
                path = if link.is_absolute() { link } else { dir.join(link) };
                via_link = true;
                continue;
            }
            if !meta.is_file() {
                return Err(Usage(format!(
                    "{}{} is {}; kiln convert writes only regular files (it renames a new file over OUT)",
                    given.display(),
                    if via_link { format!(" (through links: {})", path.display()) } else { String::new() },
                    platform::kind_of(&meta)
                ))
                .into());
            }
            let same = platform::same_file(&path, &meta, input)
                .map_err(io_fail(format!("cannot check {}", path.display())))?;
            if same {
                return Err(Usage(format!(
                    "{} is the input file itself (same device and inode); write to another file",
                    given.display()
                ))
                .into());
            }
            return Ok(Target { given: given.to_path_buf(), path, existing: Some(meta) });
        }
        Err(Usage(format!("{}: too many levels of symbolic links", given.display())).into())
    }

    /// A new temporary file beside the target, registered for removal on a signal.
    pub fn temp(&self) -> anyhow::Result<Temp> {
        let dir = crate::paths::folder_of(&self.path);
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mode = platform::mode_of(self.existing.as_ref());
        let mut list = pending();
        let file = tempfile::Builder::new()
            .prefix(&format!(".{name}.kiln-convert-"))
            .suffix(".tmp")
            .rand_bytes(12)
            .make_in(&dir, |p| platform::create_new(p, mode))
            .map_err(io_fail(format!("cannot create a temporary file in {}", dir.display())))?;
        if let Some(old) = &self.existing {
            platform::keep_owner_and_mode(file.as_file(), old)
                .map_err(io_fail(format!("cannot set the mode of {}", file.path().display())))?;
        }
        list.push(file.path().to_path_buf());
        Ok(Temp { file: Some(file) })
    }
}

/// A temporary file; removed when dropped unless it was renamed into place.
pub struct Temp {
    file: Option<NamedTempFile<File>>,
}

impl Temp {
    /// Where it is (beside its target).
    pub fn path(&self) -> &Path {
        self.file.as_ref().map_or(Path::new(""), |f| f.path())
    }

    /// A second handle to it, for writing.
    pub fn file(&self) -> anyhow::Result<File> {
        let f = self.file.as_ref().ok_or_else(|| anyhow::anyhow!("the temporary file is gone"))?;
        f.as_file().try_clone().map_err(io_fail(format!("cannot write {}", f.path().display())))
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if let Some(f) = self.file.take() {
            let mut list = pending();
            let path = f.path().to_path_buf();
            drop(f); // NamedTempFile removes the file
            list.retain(|p| p != &path);
        }
    }
}

/// Renames each temporary file over its target, in order: a later one only
/// after the earlier ones are in place. On a failure the temporary files not
/// yet renamed are removed (the error says which outputs were replaced).
pub fn persist(outputs: Vec<(Temp, &Target)>) -> anyhow::Result<()> {
    let mut done: Vec<String> = Vec::new();
    for (mut temp, target) in outputs {
        let mut list = pending();
        let Some(file) = temp.file.take() else { continue };
        let path = file.path().to_path_buf();
        // Closes the file (Windows cannot rename an open file otherwise).
        let temp_path = file.into_temp_path();
        let result = platform::replace(&temp_path, &target.path);
        match result {
            Ok(()) => {
                // Renamed: nothing left to remove.
                let _ = temp_path.keep();
                list.retain(|p| p != &path);
                done.push(target.given.display().to_string());
            }
            Err(e) => {
                drop(temp_path); // removes the temporary file
                list.retain(|p| p != &path);
                let what = if done.is_empty() {
                    format!("cannot replace {}", target.given.display())
                } else {
                    format!("{} written, but cannot replace {}", done.join(", "), target.given.display())
                };
                return Err(io_fail(what)(e));
            }
        }
    }
    Ok(())
}

/// Fsyncs a written temporary file (the default; `--no-fsync` skips it).
pub fn sync(temp: &Temp) -> anyhow::Result<()> {
    temp.file()?.sync_all().with_context(|| format!("cannot sync {}", temp.path().display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(dir: &Path) -> File {
        let p = dir.join("in");
        fs::write(&p, b"input").unwrap();
        File::open(p).unwrap()
    }

    /// The old scheme used `.OUT.kiln-convert-PID` and followed a symlink
    /// planted there; a random name created exclusively leaves it alone.
    #[cfg(unix)]
    #[test]
    fn a_symlink_planted_at_the_old_temporary_name_is_never_written() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let planted = d.path().join(format!(".out.kiln.kiln-convert-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let f = input(d.path());
        let target = Target::resolve(&d.path().join("out.kiln"), &f).unwrap();
        let temp = target.temp().unwrap();
        assert_ne!(temp.path(), planted);
        assert!(temp.path().file_name().unwrap().to_string_lossy().starts_with(".out.kiln.kiln-convert-"));
        temp.file().unwrap().write_all(b"new").unwrap();
        persist(vec![(temp, &target)]).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(fs::read(d.path().join("out.kiln")).unwrap(), b"new");
    }

    #[test]
    fn dropped_temporaries_are_removed_and_unregistered() {
        let d = tempfile::tempdir().unwrap();
        let f = input(d.path());
        let target = Target::resolve(&d.path().join("o"), &f).unwrap();
        let temp = target.temp().unwrap();
        let p = temp.path().to_path_buf();
        assert!(p.exists() && pending().contains(&p));
        drop(temp);
        assert!(!p.exists() && !pending().contains(&p));
    }

    /// The sidecar is renamed only after OUT: when OUT cannot be replaced,
    /// the sidecar is untouched and no temporary file is left.
    #[test]
    fn a_later_output_is_not_replaced_when_an_earlier_one_fails() {
        let d = tempfile::tempdir().unwrap();
        let f = input(d.path());
        let out = Target::resolve(&d.path().join("out"), &f).unwrap();
        let side_path = d.path().join("out.meta.json");
        fs::write(&side_path, b"old sidecar").unwrap();
        let side = Target::resolve(&side_path, &f).unwrap();
        let (t1, t2) = (out.temp().unwrap(), side.temp().unwrap());
        // OUT turns into a non-empty directory after it was checked: its rename fails.
        fs::create_dir(d.path().join("out")).unwrap();
        fs::write(d.path().join("out/x"), b"").unwrap();
        let err = persist(vec![(t1, &out), (t2, &side)]).unwrap_err();
        assert!(format!("{err:#}").contains("cannot replace"), "{err:#}");
        assert_eq!(fs::read(&side_path).unwrap(), b"old sidecar");
        let left: Vec<_> = fs::read_dir(d.path()).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
        assert!(left.iter().all(|n| !n.to_string_lossy().contains("kiln-convert")), "{left:?}");
    }
}
