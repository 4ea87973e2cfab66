//! Naming what is at fault: the file (a shard's name, or the file given)
//! and the tensor a core error concerns. One place for the CLI's messages
//! and `--json` fields and the Python package's `KilnError.file`/`.tensor`.

use std::fmt;

use kiln_model::{AnyRule, Error, Manifest, Model, Rule, ShardEntry};
use kiln_nostd::digest::DIGEST_LEN;

/// The tensor an error concerns: its name (where it has one) and its
/// position in its file's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorAt {
    /// Its name; `None` for an unnamed tensor.
    pub name: Option<String>,
    /// Its index in the directory of the file the error is in.
    pub index: usize,
}

impl fmt::Display for TensorAt {
    /// `NAME (index I)`, `-` for an unnamed tensor (`kiln validate`'s form).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (index {})", self.name.as_deref().unwrap_or("-"), self.index)
    }
}

/// A core error with the file it is in and the tensor it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The broken rule; its offset is a byte of `file`.
    pub error: Error,
    /// The shard's file name for a fault in a shard; `None`: the file given.
    pub file: Option<String>,
    /// The tensor at fault, where one is.
    pub tensor: Option<TensorAt>,
}

impl Fault {
    /// A fault of the model file or directory `bytes` (the file given): a
    /// DIGEST error names the tensor whose payload failed.
    pub fn in_file(bytes: &[u8], error: Error) -> Fault {
        Fault { error, file: None, tensor: tensor_at(bytes, &error) }
    }

    /// A fault of the shard `entry` of `manifest` whose file holds `bytes`
    /// (`None`: missing): the shard named, and the tensor for a DIGEST or a
    /// shard-tensor mismatch.
    pub fn in_shard(manifest: &Manifest<'_>, entry: &ShardEntry<'_>, bytes: Option<&[u8]>, error: Error) -> Fault {
        let tensor = bytes.and_then(|b| tensor_of_shard(manifest, entry, b, &error));
        Fault { error, file: Some(entry.name.as_str().to_owned()), tensor }
    }
}

impl fmt::Display for Fault {
    /// `CODE at byte N[ of SHARD][ (tensor T)]: RULE TEXT`, the text `kiln
    /// validate` prints after the file's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.error.code(), self.error.offset_u64())?;
        if let Some(file) = &self.file {
            write!(f, " of {file}")?;
        }
        if let Some(t) = &self.tensor {
            write!(f, " (tensor {t})")?;
        }
        write!(f, ": {}", self.error.rule().description())
    }
}

impl std::error::Error for Fault {}

impl From<Error> for Fault {
    fn from(error: Error) -> Fault {
        Fault { error, file: None, tensor: None }
    }
}

/// The tensor a DIGEST error of the model file `file` concerns (the one
/// whose payload starts at the error's offset); `None` for other errors.
pub fn tensor_at(file: &[u8], error: &Error) -> Option<TensorAt> {
    if error.rule() != AnyRule::Core(kiln_nostd::Rule::PayloadDigest) {
        return None;
    }
    let m = Model::parse(file).ok()?;
    let t = m.directory().iter().find(|t| t.absolute_offset() == error.offset())?;
    Some(TensorAt { name: t.name().map(str::to_owned), index: t.index() })
}

/// The tensor a fault of shard `entry` (whose file is `file`) concerns: a
/// DIGEST at its payload, or a mismatch with the manifest at its descriptor
/// or digest. Named as the manifest names it (else as the shard does);
/// `None` when neither names it.
pub fn tensor_of_shard(
    manifest: &Manifest<'_>,
    entry: &ShardEntry<'_>,
    file: &[u8],
    error: &Error,
) -> Option<TensorAt> {
    let m = Model::parse(file).ok()?;
    let dir = m.directory();
    let index = match error.rule() {
        AnyRule::Core(kiln_nostd::Rule::PayloadDigest) => {
            dir.iter().position(|t| t.absolute_offset() == error.offset())?
        }
        AnyRule::Model(Rule::ShardTensor) => error.offset().checked_sub(dir.start().saturating_add(64))? / 128,
        AnyRule::Model(Rule::ShardTensorDigest) => error.offset().checked_sub(m.digests()?.offset_of(0))? / DIGEST_LEN,
        _ => return None,
    };
    let name = manifest.shard_tensors_of(entry).nth(index).map(|t| t.name.to_owned());
    let name = name.or_else(|| dir.get(index)?.name().map(str::to_owned))?;
    Some(TensorAt { name: Some(name), index })
}
