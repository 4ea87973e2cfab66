//! The path policy of the host front ends, in one place: which names a
//! file may give for another (a manifest its shards, a Hugging Face index
//! its shards, an ONNX graph its external data), the folder they are looked
//! up in, and which symbolic links are followed (only those that stay in
//! that folder).
//!
//! The CLI (`kiln validate`, `kiln convert`, `kiln sign`) and the Python
//! package (`kiln.open`, `kiln.safe_open`) both call it.

use std::io;
use std::path::{Path, PathBuf};

use kiln_model::{ShardName, SHARD_NAME_MAX};

/// The folder the names that `path` gives are resolved in, and the folder
/// a file at `path` is written in: its parent, "." for a bare name.
pub fn folder_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Where `path` leads (canonicalized) when that is a file directly inside
/// `folder`; `None` when it leads out of it or either cannot be resolved.
pub fn inside(folder: &Path, path: &Path) -> Option<PathBuf> {
    let (Ok(dir), Ok(target)) = (folder.canonicalize(), path.canonicalize()) else { return None };
    (target.parent() == Some(dir.as_path())).then_some(target)
}

/// Whether `path`, a name looked up in `folder`, may be opened: `Ok(false)`
/// for a symbolic link that leads out of `folder` (never followed); the
/// error when there is nothing at `path` (links are not followed to see).
pub fn may_open(folder: &Path, path: &Path) -> io::Result<bool> {
    let meta = std::fs::symlink_metadata(path)?;
    Ok(!meta.file_type().is_symlink() || inside(folder, path).is_some())
}

/// The file to open for `name` (a plain file name, step M2) looked up in
/// `folder`: `folder/name` when it is a regular file, the file a symbolic
/// link there leads to when that is a regular file directly inside `folder`
/// (canonicalized), else `None` (missing, not a regular file, or a link out
/// of the folder, which is never followed).
pub fn resolve(folder: &Path, name: &str) -> Option<PathBuf> {
    // M2 made the name a plain file name: joining it stays in the folder.
    let path = folder.join(name);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if !meta.file_type().is_symlink() {
        return meta.is_file().then_some(path);
    }
    inside(folder, &path).filter(|t| t.is_file())
}

/// Why `name` is not a plain file name in its folder (spec/model-file.md,
/// rule 9 of the model decisions): 1 to 255 bytes, no `/`, `\`, `:`, NUL or
/// control character, not `.` or `..`. Checked before any file is opened.
pub fn plain_file_name(name: &str) -> Result<(), String> {
    // The verdict is the core's (step M2's rule, `ShardName`); what follows
    // only says which part of the rule `name` breaks.
    if ShardName::new(name).is_some() {
        return Ok(());
    }
    if name.is_empty() || name.len() > SHARD_NAME_MAX {
        return Err(format!("{name:?} is not a plain file name (1 to {SHARD_NAME_MAX} bytes)"));
    }
    if name == "." || name == ".." {
        return Err(format!("{name:?} is not a file name"));
    }
    match name.chars().find(|&c| matches!(c, '/' | '\\' | ':') || c.is_control()) {
        Some(c) => Err(format!("{name:?} holds {c:?}: not a plain file name (no path, no drive)")),
        None => Err(format!("{name:?} is not a plain file name")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_in_the_current_folder() {
        assert_eq!(folder_of(Path::new("model.kiln")), PathBuf::from("."));
        assert_eq!(folder_of(Path::new("a/b/model.kiln")), PathBuf::from("a/b"));
        assert_eq!(folder_of(Path::new("/model.kiln")), PathBuf::from("/"));
    }

    #[test]
    fn plain_file_names_are_the_cores() {
        let longest = "x".repeat(255);
        for good in ["a", "model-00001-of-00002.kiln", "é.kiln", longest.as_str()] {
            assert_eq!(plain_file_name(good), Ok(()), "{good:?}");
        }
        let why = |n: &str| plain_file_name(n).unwrap_err();
        assert!(why("").contains("1 to 255 bytes"));
        assert!(why(&"x".repeat(256)).contains("1 to 255 bytes"));
        assert!(why("..").contains("is not a file name"));
        for (bad, c) in [("a/b", "'/'"), ("a\\b", "'\\\\'"), ("c:x", "':'"), ("a\u{85}", "'\\u{85}'")] {
            assert!(why(bad).contains(&format!("holds {c}")), "{bad:?}: {}", why(bad));
        }
    }

    #[cfg(unix)]
    #[test]
    fn only_links_that_stay_in_the_folder_are_followed() {
        let dir = std::env::temp_dir().join(format!("kiln-paths-{}", std::process::id()));
        let (folder, other) = (dir.join("m"), dir.join("other"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(folder.join("a.kiln"), b"").unwrap();
        std::fs::write(other.join("b.kiln"), b"").unwrap();
        std::os::unix::fs::symlink("a.kiln", folder.join("in.kiln")).unwrap();
        std::os::unix::fs::symlink("../other/b.kiln", folder.join("out.kiln")).unwrap();
        assert!(may_open(&folder, &folder.join("a.kiln")).unwrap());
        assert!(may_open(&folder, &folder.join("in.kiln")).unwrap());
        assert!(!may_open(&folder, &folder.join("out.kiln")).unwrap());
        assert!(may_open(&folder, &folder.join("missing.kiln")).is_err());
        let target = inside(&folder, &folder.join("in.kiln")).unwrap();
        assert_eq!(target, folder.canonicalize().unwrap().join("a.kiln"));
        assert_eq!(inside(&folder, &folder.join("out.kiln")), None);
        assert_eq!(resolve(&folder, "a.kiln"), Some(folder.join("a.kiln")));
        assert_eq!(resolve(&folder, "in.kiln"), Some(target));
        assert_eq!(resolve(&folder, "out.kiln"), None);
        assert_eq!(resolve(&folder, "missing.kiln"), None);
        assert_eq!(resolve(&dir, "m"), None, "a folder is not a shard");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
