//! Sharded models (`spec/model-file.md`, "Sharded models") on a host: a
//! checked manifest, the folder its shard names are looked up in, and each
//! shard opened there by the path policy ([`crate::paths`]) and checked
//! against the manifest with the core's `check_shard`, a fault naming the
//! shard and the tensor.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use kiln_model::{self as model, host, Error, Manifest, ShardEntry, ShardName};
use kiln_nostd::digest::DIGEST_LEN;
use kiln_nostd::Limits;

use crate::fault::Fault;
use crate::map::Mapped;
use crate::paths;

/// A manifest that passed steps M1 to M5, its model id, and the folder its
/// shards are in. `B` holds the manifest's bytes (a map, a `Vec`, a slice).
#[derive(Debug)]
pub struct Shards<B> {
    bytes: B,
    id: [u8; DIGEST_LEN],
    folder: PathBuf,
    limits: Limits,
}

impl<B: AsRef<[u8]>> Shards<B> {
    /// Checks the manifest `bytes`, the file at `path` (its shards are
    /// looked up in `path`'s folder), within `limits`.
    pub fn new(path: &Path, bytes: B, limits: Limits) -> Result<Shards<B>, Fault> {
        let id = parse(bytes.as_ref(), &limits)?.model_id();
        Ok(Shards { bytes, id, folder: paths::folder_of(path), limits })
    }

    /// The manifest (checked again: the bytes passed once, and name scratch
    /// keeps the check linear).
    pub fn manifest(&self) -> Result<Manifest<'_>, Error> {
        parse(self.bytes.as_ref(), &self.limits)
    }

    /// The model id every shard records.
    pub fn model_id(&self) -> &[u8; DIGEST_LEN] {
        &self.id
    }

    /// The folder shard names are looked up in.
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// The manifest's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_ref()
    }

    /// The file to open for shard `name`: see [`paths::resolve`] (`None`:
    /// missing, not a regular file, or a link out of the folder).
    pub fn resolve(&self, name: ShardName<'_>) -> Option<PathBuf> {
        paths::resolve(&self.folder, name.as_str())
    }

    /// Opens and maps shard `name`. `Ok(None)`: it is missing, not a
    /// regular file, or a link out of the folder (the check then reports
    /// the shard missing).
    pub fn open_shard(&self, name: ShardName<'_>) -> io::Result<Option<Mapped>> {
        let Some(path) = self.resolve(name) else { return Ok(None) };
        let Ok(file) = File::open(&path) else { return Ok(None) };
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Ok(None);
        }
        Mapped::of(&file, &meta).map(Some)
    }

    /// Checks shard `entry` of `manifest` (this one's), whose file holds
    /// `bytes` (`None`: missing), with the core's `check_shard`: length,
    /// its own rules, model id, position, tensors, prefix digest, and with
    /// `verify` every payload digest. A fault names the shard and tensor.
    pub fn check_shard(
        &self,
        manifest: &Manifest<'_>,
        entry: &ShardEntry<'_>,
        bytes: Option<&[u8]>,
        verify: bool,
    ) -> Result<(), Fault> {
        let mut scratch = host::scratch_for(bytes.unwrap_or(&[]), &self.limits);
        let parser = host::parser(self.limits, &mut scratch);
        model::check_shard(manifest, &self.id, entry, bytes, verify, parser)
            .map_err(|e| Fault::in_shard(manifest, entry, bytes, e))
    }
}

/// Steps M1 to M5 of the manifest `bytes`, with name scratch.
fn parse<'a>(bytes: &'a [u8], limits: &Limits) -> Result<Manifest<'a>, Error> {
    let mut scratch = host::manifest_scratch(bytes, limits);
    Manifest::parse_with(bytes, limits, Some(&mut scratch))
}
