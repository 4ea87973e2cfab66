//! Sharded models (`spec/model-file.md`, "Sharded models"): writing a
//! manifest and its shards with the core's `write_sharded`, and reading
//! one shard at a time with the core's `check_shard`.
//!
//! Opening them is the host crate's (`kiln_host::Shards`, as for the CLI):
//! shard names come only from a manifest that passed steps M1 to M5 (so
//! each is a plain file name), are joined only to the manifest's own folder,
//! and a symbolic link leading out of that folder is refused (the shard is
//! then missing); a fault names the shard and the tensor. The Python half
//! opens the path [`Sharded::resolve`] gives without following links and
//! maps it; the bytes checked are the bytes mapped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kiln_host::paths::folder_of;
use kiln_host::{Fault, Shards};
use kiln_model::{self as model, Manifest, ShardEntry, ShardName};
use kiln_nostd::{
    writer::{QuantSpec, TensorRef},
    Limits, TensorSpec,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::buffer::Held;
use crate::{fault_error, kiln_error, open_checked, write_bytes, write_error, WriteError};

/// Heap bytes (names and layout names) one shard's block may hold: every
/// heap offset is a u16 below 0xFFFF (`spec/kiln-v2.md`, section 9).
const HEAP_MAX: usize = 65_000;

/// Which tensors (indices into the specs) go into which shard, in order;
/// `None` when one model file holds them all: no `max_shard_size`, or a
/// model whose payloads do not exceed it, and names that fit one block.
pub(crate) fn plan(specs: &[TensorSpec<'_>], max_shard_size: Option<u64>) -> PyResult<Option<Vec<Vec<usize>>>> {
    let bytes = |s: &TensorSpec<'_>| s.data.len() as u64;
    let heap = |s: &TensorSpec<'_>| s.name.map_or(0, str::len).saturating_add(s.layout.map_or(0, str::len));
    let total: u64 = specs.iter().map(bytes).sum();
    let names: usize = specs.iter().map(heap).sum();
    if max_shard_size == Some(0) {
        return Err(PyValueError::new_err("max_shard_size must be at least 1 byte"));
    }
    let max = max_shard_size.unwrap_or(u64::MAX);
    if total <= max && names <= HEAP_MAX {
        return Ok(None);
    }
    let cap = usize::try_from(Limits::DEFAULT.count_cap).unwrap_or(usize::MAX);
    // A quantized tensor, its scale and outer tensors form one group that
    // stays in one shard (the directory's scale_index is inside one block).
    let by_name: HashMap<&str, usize> = specs.iter().enumerate().filter_map(|(i, s)| Some((s.name?, i))).collect();
    let mut parent: Vec<usize> = (0..specs.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for (i, s) in specs.iter().enumerate() {
        let refs: Vec<&TensorRef<'_>> = match &s.quant {
            QuantSpec::None => vec![],
            QuantSpec::Scales { scale, .. } => vec![scale],
            QuantSpec::ScalesOuter { scale, outer, .. } => vec![scale, outer],
        };
        for r in refs {
            if let TensorRef::Name(n) = r {
                if let Some(&j) = by_name.get(n) {
                    let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                    parent[a] = b;
                }
            }
        }
    }
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..specs.len() {
        let r = root(&mut parent, i);
        members.entry(r).or_default().push(i);
    }
    let mut shard_of = vec![usize::MAX; specs.len()];
    let (mut shard, mut used, mut used_heap, mut used_count) = (0usize, 0u64, 0usize, 0usize);
    for i in 0..specs.len() {
        if shard_of[i] != usize::MAX {
            continue;
        }
        let group = &members[&root(&mut parent, i)];
        let size: u64 = group.iter().map(|&j| bytes(&specs[j])).sum();
        let group_heap: usize = group.iter().map(|&j| heap(&specs[j])).sum();
        let full = used.saturating_add(size) > max
            || used_heap.saturating_add(group_heap) > HEAP_MAX
            || used_count.saturating_add(group.len()) > cap;
        if used_count > 0 && full {
            shard += 1;
            (used, used_heap, used_count) = (0, 0, 0);
        }
        for &j in group {
            shard_of[j] = shard;
        }
        used = used.saturating_add(size);
        used_heap = used_heap.saturating_add(group_heap);
        used_count = used_count.saturating_add(group.len());
    }
    let mut shards = vec![Vec::new(); shard.saturating_add(1)];
    for (i, &k) in shard_of.iter().enumerate() {
        shards[k].push(i);
    }
    Ok(Some(shards))
}

/// The stem of a manifest's file name: without a trailing `.kiln`.
fn stem_of(path: &Path) -> PyResult<String> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| PyValueError::new_err(format!("{}: not a UTF-8 file name", path.display())))?;
    Ok(name.strip_suffix(".kiln").filter(|s| !s.is_empty()).unwrap_or(name).to_owned())
}

/// `STEM-00001-of-0000N.kiln`, the names `kiln convert` writes.
fn shard_name(stem: &str, index: usize, count: usize) -> String {
    format!("{stem}-{index:05}-of-{count:05}.kiln")
}

/// Writes the sharded model `plan` makes of `specs`: the core's
/// `write_sharded` builds and checks every file in memory, then each shard
/// goes to a temporary file in the manifest's folder, is fsynced and renamed
/// into place, the manifest last (then the folder is fsynced), so a crash
/// never leaves a manifest naming shards that are not its own. Shards of an
/// earlier save to this name with another count are removed after that.
pub(crate) fn save_sharded(
    py: Python<'_>,
    specs: &[TensorSpec<'_>],
    plan: &[Vec<usize>],
    meta: &[(&str, &str)],
    path: &Path,
    align: u64,
) -> PyResult<()> {
    let stem = stem_of(path)?;
    let count = plan.len();
    let names: Vec<String> = (1..=count).map(|i| shard_name(&stem, i, count)).collect();
    let groups: Vec<Vec<TensorSpec<'_>>> = plan.iter().map(|idx| idx.iter().map(|&i| specs[i]).collect()).collect();
    let shards: Vec<(&str, &[TensorSpec<'_>])> =
        names.iter().zip(&groups).map(|(n, g)| (n.as_str(), g.as_slice())).collect();
    let files = py.detach(|| model::write_sharded(meta, &shards, align)).map_err(|e| kiln_error(py, e))?;
    let folder = folder_of(path);
    for (name, bytes) in &files.shards {
        let target = folder.join(name);
        py.detach(|| put_unlocked(&target, bytes)).map_err(|e| write_error(py, &target, e))?;
    }
    py.detach(|| put_unlocked(path, &files.manifest)).map_err(|e| write_error(py, path, e))?;
    sync_folder(&folder).map_err(|e| write_error(py, &folder, WriteError::Io(e)))?;
    let keep = u32::try_from(count).ok();
    remove_stale_shards(path, keep).map_err(|e| write_error(py, path, WriteError::Io(e)))
}

/// [`write_bytes`] of ready bytes, fsynced (no Python objects: runs without the GIL).
fn put_unlocked(target: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_bytes(target, bytes, true)
}

/// Makes the renames in `folder` durable (a no-op where folders cannot be opened).
fn sync_folder(folder: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::fs::File::open(folder)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = folder;
        Ok(())
    }
}

/// The shard count of `name` when it is `STEM-NNNNN-of-MMMMM.kiln`.
fn shard_count_of(name: &str, stem: &str) -> Option<u32> {
    let rest = name.strip_prefix(stem)?.strip_prefix('-')?.strip_suffix(".kiln")?;
    let (index, count) = rest.split_once("-of-")?;
    let digits = |s: &str| s.len() >= 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(index) || !digits(count) {
        return None;
    }
    count.parse().ok()
}

/// Removes the shards an earlier save to `manifest`'s name left beside it
/// (`STEM-NNNNN-of-MMMMM.kiln` with a count other than `keep`; every count
/// when `keep` is None: the model is now one file).
pub(crate) fn remove_stale_shards(manifest: &Path, keep: Option<u32>) -> std::io::Result<()> {
    let Ok(stem) = stem_of(manifest) else { return Ok(()) };
    let folder = folder_of(manifest);
    let Ok(entries) = std::fs::read_dir(&folder) else { return Ok(()) };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        match shard_count_of(name, &stem) {
            Some(n) if Some(n) != keep => match std::fs::remove_file(entry.path()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            },
            _ => {}
        }
    }
    Ok(())
}

/// A checked manifest and the folder its shards are in: the native half of
/// `kiln.open`, `kiln.safe_open` and `kiln.numpy.load_file` on a sharded model.
#[pyclass(frozen, module = "kiln._kiln")]
pub(crate) struct Sharded {
    /// The manifest (its bytes a copy: manifests hold no payload), its model
    /// id and folder: the host crate's.
    shards: Shards<Vec<u8>>,
    /// The shard list (names that passed M2, lengths), read once.
    list: Vec<(String, u64)>,
}

impl Sharded {
    /// The manifest, checked again (the bytes passed once; name scratch keeps it linear).
    fn manifest(&self, py: Python<'_>) -> PyResult<Manifest<'_>> {
        self.shards.manifest().map_err(|e| kiln_error(py, e))
    }

    fn entry(&self, index: u32) -> PyResult<(Manifest<'_>, ShardEntry<'_>)> {
        let m = self.shards.manifest().map_err(|e| PyValueError::new_err(e.to_string()))?;
        let entry = m.shard(index).ok_or_else(|| PyValueError::new_err(format!("no shard {index}")))?;
        Ok((m, entry))
    }
}

/// A manifest tensor as a row: (name, shard, dtype code, shape, byte length,
/// layout or None, block size, quant), quant being None or (scheme, axis,
/// group size, scale name, outer name or None).
type ManifestRow<'a> =
    (&'a str, u32, u16, Vec<u64>, u64, Option<&'a str>, u32, Option<(u16, u16, u32, &'a str, Option<&'a str>)>);

#[pymethods]
impl Sharded {
    /// Checks the manifest `data` (the bytes of the file at `path`) by steps
    /// M1 to M5; shards are looked for in `path`'s folder.
    #[new]
    fn new(py: Python<'_>, path: PathBuf, data: &Bound<'_, PyAny>) -> PyResult<Sharded> {
        let held = Held::new(data)?;
        let shards = Shards::new(&path, held.bytes().to_vec(), Limits::DEFAULT).map_err(|f| fault_error(py, f))?;
        let list = {
            let m = shards.manifest().map_err(|e| kiln_error(py, e))?;
            m.shards().map(|s| (s.name.as_str().to_owned(), s.length)).collect()
        };
        Ok(Sharded { shards, list })
    }

    /// The model's metadata (without the padding key).
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.manifest(py)?;
        let d = PyDict::new(py);
        for (k, v) in m.metadata().iter() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// The model id (32 bytes).
    fn model_id<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.shards.model_id())
    }

    /// The shards in order: (file name, byte length).
    fn shards(&self) -> Vec<(String, u64)> {
        self.list.clone()
    }

    /// The tensor table, in manifest order (rows as [`ManifestRow`]).
    fn table<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let m = self.manifest(py)?;
        let rows = PyList::empty(py);
        for t in m.tensors() {
            let quant =
                t.quant.map(|q| (q.scheme, q.axis, q.group_size, q.scale, Some(q.outer).filter(|o| !o.is_empty())));
            let row: ManifestRow<'_> = (
                t.name,
                t.shard,
                t.dtype.code(),
                t.dims().collect(),
                t.byte_length,
                Some(t.layout).filter(|l| !l.is_empty()),
                t.block_size,
                quant,
            );
            rows.append(row)?;
        }
        Ok(rows)
    }

    /// The path of shard `index` (1-based) inside the manifest's folder, or
    /// None when it does not exist or is a symbolic link leading out of the
    /// folder. A link to a file inside the folder resolves to that file.
    fn resolve(&self, index: u32) -> PyResult<Option<std::ffi::OsString>> {
        let at = usize::try_from(index).ok().and_then(|i| i.checked_sub(1));
        let (name, _) =
            at.and_then(|i| self.list.get(i)).ok_or_else(|| PyValueError::new_err(format!("no shard {index}")))?;
        let path = ShardName::new(name).and_then(|n| self.shards.resolve(n));
        Ok(path.map(PathBuf::into_os_string))
    }

    /// Checks shard `index` whose file's bytes are `data` (None: it is
    /// missing) against the manifest with the host crate's `check_shard`
    /// (`verify`: its digests too), and returns its tensor table as
    /// `inspect` does (offsets in the shard's file). A fault raises
    /// `KilnError` with `file` the shard's name and `tensor` the tensor at
    /// fault, where one is.
    #[pyo3(signature = (index, data, verify=false))]
    fn check<'py>(
        &self,
        py: Python<'py>,
        index: u32,
        data: Option<&Bound<'py, PyAny>>,
        verify: bool,
    ) -> PyResult<(usize, usize, Bound<'py, PyList>)> {
        let (m, entry) = self.entry(index)?;
        let held = data.map(Held::new).transpose()?;
        let bytes = held.as_ref().map(Held::bytes);
        let readonly = held.as_ref().is_none_or(Held::readonly);
        let run = || self.shards.check_shard(&m, &entry, bytes, verify);
        let verdict = if readonly { py.detach(run) } else { run() };
        verdict.map_err(|f| fault_error(py, f))?;
        let bytes = bytes.unwrap_or(&[]);
        let in_shard =
            |f: Fault| fault_error(py, Fault { file: Some(entry.name.as_str().to_owned()), tensor: None, ..f });
        let (meta, dir) = open_checked(bytes, Limits::DEFAULT, false).map_err(in_shard)?;
        Ok((meta.map_or(0, |m| m.padding()), dir.start(), crate::table(py, &dir)?))
    }
}
