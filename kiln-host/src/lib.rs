//! Kiln v2 on a host with `std`: one [`open`] for whatever `kiln convert`
//! and the writers produce (a model file, signed model, sharded model
//! through its manifest, or a plain tensor directory), found by content.
//!
//! ```no_run
//! let model = kiln_host::open("model.kiln")?;
//! let w = model.tensor("w")?;
//! println!("{:?} {:?}: {} bytes", w.dtype(), w.shape(), w.bytes().len());
//! # Ok::<(), kiln_host::Error>(())
//! ```
//!
//! The host logic the CLI (`kiln validate`, `kiln inspect`, `kiln convert`)
//! and the Python package (`kiln.open`, `kiln.safe_open`) share lives here
//! once: the path policy ([`paths`]: shards only inside the manifest's
//! folder, no link out of it), opening and checking shards ([`Shards`]),
//! naming the shard and tensor behind an error ([`Fault`]), and naming
//! foreign formats with the command that converts them ([`foreign`]).
//!
//! Digests follow ruling 6 (`docs/verification.md`): [`open`] maps the file
//! and reads no payload, so it checks every rule but step 9d by default;
//! [`Options::verify_digests`] hashes every payload (of every shard) at open.

// No unsafe code but the one map (`map.rs`, allowed there alone).
#![deny(unsafe_code)]

pub mod fault;
pub mod foreign;
#[allow(unsafe_code)]
mod map;
pub mod paths;
mod sharded;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use kiln_model::{self as model, host, Kind, Manifest, Metadata, Model as ModelFile};
use kiln_nostd::{Directory, Limits, Tensor};

pub use fault::{Fault, TensorAt};

// The README's example runs as a doctest, so the crate's page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;
pub use map::Mapped;
pub use sharded::Shards;

/// How [`open_with`] checks: the core's limits and whether digests are
/// compared. The default is [`Limits::DEFAULT`] without digests (ruling 6:
/// a memory map reads no payload, so hashing is the one flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    limits: Limits,
    verify_digests: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { limits: Limits::DEFAULT, verify_digests: false }
    }
}

impl Options {
    /// The default options (see [`Options`]).
    pub fn new() -> Options {
        Options::default()
    }

    /// The caps of the core's checks (count and bytes).
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Options {
        self.limits = limits;
        self
    }

    /// `true`: every payload is hashed and compared with its digest (step
    /// 9d), every shard's too, at open. Off by default (ruling 6).
    #[must_use]
    pub fn verify_digests(mut self, verify: bool) -> Options {
        self.verify_digests = verify;
        self
    }

    /// The caps in use.
    pub fn get_limits(&self) -> Limits {
        self.limits
    }

    /// Whether digests are compared.
    pub fn digests(&self) -> bool {
        self.verify_digests
    }
}

/// Why [`open`] refused a path.
#[derive(Debug)]
pub enum Error {
    /// The file (or a shard's file) could not be read.
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// A broken rule, with the shard and tensor it is in.
    Kiln {
        /// The path given.
        path: PathBuf,
        /// The rule, shard and tensor.
        fault: Fault,
    },
    /// A format `kiln convert` reads (or one before GGUF): the message names
    /// it and the command that converts it.
    Foreign {
        /// The path given.
        path: PathBuf,
        /// The format's name (`"safetensors"`, `"gguf"`, `"ggjt"`, ...).
        format: &'static str,
        /// What it is and the command that converts it.
        message: String,
    },
    /// [`Model::tensor`] of a name the model does not hold.
    NoTensor(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Kiln { path, fault } => write!(f, "{}: {fault}", path.display()),
            Error::Foreign { message, .. } => f.write_str(message),
            Error::NoTensor(name) => write!(f, "no tensor named {name:?}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Kiln { fault, .. } => Some(fault),
            Error::Foreign { .. } | Error::NoTensor(_) => None,
        }
    }
}

impl Error {
    /// The broken rule, shard and tensor, for a [`Error::Kiln`].
    pub fn fault(&self) -> Option<&Fault> {
        match self {
            Error::Kiln { fault, .. } => Some(fault),
            _ => None,
        }
    }
}

/// What [`open`] found at a path, by content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A standalone tensor directory (`KLNT`): no metadata, no digests.
    Directory,
    /// A model file of this record type (plain, digests, shard or signed;
    /// a signed model's signature is checked against a key by
    /// `Model::parse_trusted`, not here).
    ModelFile(Kind),
    /// A sharded model's manifest, opened with every shard.
    Manifest,
}

/// An opened, checked model: its file mapped (and its shards', for a
/// manifest). Tensors borrow the maps.
#[derive(Debug)]
pub struct Model {
    path: PathBuf,
    found: Found,
    file: Mapped,
    /// A sharded model: each shard's file name and map, in manifest order.
    shards: Vec<(String, Mapped)>,
    options: Options,
}

/// Opens the Kiln file at `path` with the default [`Options`]: see
/// [`open_with`].
pub fn open(path: impl AsRef<Path>) -> Result<Model, Error> {
    open_with(path, &Options::default())
}

/// Maps the file at `path` and checks it by content: a model file (plain,
/// digests, shard, signed) or a plain directory whole; a manifest by steps
/// M1 to M5, then every shard it names, looked up in the manifest's folder
/// only ([`paths::resolve`]: a link out of it is not followed, the shard is
/// then missing), mapped and checked against it. A format `kiln convert`
/// reads is refused with the command that converts it.
pub fn open_with(path: impl AsRef<Path>, options: &Options) -> Result<Model, Error> {
    let path = path.as_ref();
    let io_error = |source| Error::Io { path: path.to_path_buf(), source };
    let file = Mapped::open(path).map_err(io_error)?;
    let kiln = |fault| Error::Kiln { path: path.to_path_buf(), fault };
    let (limits, verify) = (options.limits, options.verify_digests);
    let kind = Kind::of(&file);
    if kind == Some(Kind::Manifest) {
        let shards = open_shards(path, &file, options)?;
        return Ok(Model { path: path.to_path_buf(), found: Found::Manifest, file, shards, options: *options });
    }
    if kind.is_none() {
        if let Some((format, message)) = foreign::refusal(path, &file) {
            return Err(Error::Foreign { path: path.to_path_buf(), format, message });
        }
    }
    check_file(&file, limits, verify).map_err(kiln)?;
    let found = kind.map_or(Found::Directory, Found::ModelFile);
    Ok(Model { path: path.to_path_buf(), found, file, shards: Vec::new(), options: *options })
}

/// Checks the model file or plain directory `bytes` (by content) with the
/// host policy (process seed, name scratch sized only from a count that
/// fits): every rule, and step 9d when `verify` and the file has digests.
/// The metadata (a model file's) and directory; a fault names the tensor
/// of a DIGEST error.
pub fn check_file(bytes: &[u8], limits: Limits, verify: bool) -> Result<(Option<Metadata<'_>>, Directory<'_>), Fault> {
    let mut scratch = host::scratch_for(bytes, &limits);
    let parser = host::parser(limits, &mut scratch);
    let parsed = if model::reads_as_model(bytes) && verify {
        ModelFile::parse_verified_with(bytes, parser).map(|m| (Some(m.metadata()), m.directory()))
    } else {
        model::parse_any_with(bytes, parser)
    };
    parsed.map_err(|e| Fault::in_file(bytes, e))
}

/// [`check_file`] of one model file (any record type but a manifest),
/// whole: the core's `Model` (record type, shard position, signature).
pub fn check_model(bytes: &[u8], limits: Limits, verify: bool) -> Result<ModelFile<'_>, Fault> {
    let mut scratch = host::scratch_for(bytes, &limits);
    let parser = host::parser(limits, &mut scratch);
    let parsed =
        if verify { ModelFile::parse_verified_with(bytes, parser) } else { ModelFile::parse_with(bytes, parser) };
    parsed.map_err(|e| Fault::in_file(bytes, e))
}

/// Every shard of the manifest at `path` (bytes `file`), opened and checked
/// in order; the first fault names its shard and tensor.
fn open_shards(path: &Path, file: &[u8], options: &Options) -> Result<Vec<(String, Mapped)>, Error> {
    let kiln = |fault| Error::Kiln { path: path.to_path_buf(), fault };
    let shards = Shards::new(path, file, options.limits).map_err(kiln)?;
    let manifest = shards.manifest().map_err(|e| kiln(e.into()))?;
    let mut maps = Vec::with_capacity(manifest.shard_count());
    for entry in manifest.shards() {
        let name = entry.name.as_str();
        let map =
            shards.open_shard(entry.name).map_err(|source| Error::Io { path: shards.folder().join(name), source })?;
        shards.check_shard(&manifest, &entry, map.as_deref(), options.verify_digests).map_err(kiln)?;
        // `check_shard` refuses a missing shard: a map is here.
        if let Some(map) = map {
            maps.push((name.to_owned(), map));
        }
    }
    Ok(maps)
}

impl Model {
    /// The path given to [`open`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the file is.
    pub fn found(&self) -> Found {
        self.found
    }

    /// The options it was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Whether every digest the model carries was compared at open
    /// ([`Options::verify_digests`] and a record with digests).
    pub fn digests_verified(&self) -> bool {
        let kind = match self.found {
            Found::Manifest => Some(Kind::Manifest),
            Found::ModelFile(kind) => Some(kind),
            Found::Directory => None,
        };
        self.options.verify_digests && kind.is_some_and(Kind::has_digests)
    }

    /// The bytes of the file given (a manifest's, for a sharded model).
    pub fn bytes(&self) -> &[u8] {
        &self.file
    }

    /// The shards' file names, in order (empty for one file).
    pub fn shards(&self) -> impl Iterator<Item = &str> {
        self.shards.iter().map(|(name, _)| name.as_str())
    }

    /// The model's metadata (the manifest's for a sharded model), without
    /// the padding key; empty for a plain directory.
    pub fn metadata(&self) -> Result<Vec<(&str, &str)>, Error> {
        match self.found {
            Found::Manifest => Ok(self.manifest()?.metadata().iter().collect()),
            Found::Directory => Ok(Vec::new()),
            Found::ModelFile(_) => Ok(self.directory(None)?.0.map(|m| m.iter().collect()).unwrap_or_default()),
        }
    }

    /// The tensor named `name`, its bytes in the map. Each call checks the
    /// directory of the file holding it again (linear in its tensors): to
    /// read many, take [`Model::tensors`] once.
    pub fn tensor(&self, name: &str) -> Result<Tensor<'_>, Error> {
        let missing = || Error::NoTensor(name.to_owned());
        if self.found != Found::Manifest {
            return self.directory(None)?.1.find(name).ok_or_else(missing);
        }
        let (t, at) = self.manifest()?.find(name).ok_or_else(missing)?;
        let shard = usize::try_from(t.shard).ok().and_then(|k| k.checked_sub(1)).ok_or_else(missing)?;
        self.directory(Some(shard))?.1.get(at).ok_or_else(missing)
    }

    /// Every tensor, in directory order (shard by shard for a sharded
    /// model), each directory checked once.
    pub fn tensors(&self) -> Result<Vec<Tensor<'_>>, Error> {
        if self.found != Found::Manifest {
            return Ok(self.directory(None)?.1.iter().collect());
        }
        let mut all = Vec::new();
        for k in 0..self.shards.len() {
            all.extend(self.directory(Some(k))?.1.iter());
        }
        Ok(all)
    }

    /// The manifest of a sharded model.
    fn manifest(&self) -> Result<Manifest<'_>, Error> {
        let mut scratch = host::manifest_scratch(&self.file, &self.options.limits);
        Manifest::parse_with(&self.file, &self.options.limits, Some(&mut scratch))
            .map_err(|e| Error::Kiln { path: self.path.clone(), fault: e.into() })
    }

    /// The metadata and directory of the file given (`None`) or of shard
    /// `k` (0-based), checked again without digests (they were at open).
    fn directory(&self, shard: Option<usize>) -> Result<(Option<Metadata<'_>>, Directory<'_>), Error> {
        let (bytes, file) = match shard {
            None => (&*self.file, None),
            Some(k) => {
                let (name, map) = self.shards.get(k).ok_or_else(|| Error::NoTensor(format!("shard {k}")))?;
                (&**map, Some(name.clone()))
            }
        };
        check_file(bytes, self.options.limits, false)
            .map_err(|fault| Error::Kiln { path: self.path.clone(), fault: Fault { file, ..fault } })
    }
}
