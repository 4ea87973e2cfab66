//! Writing manifests (`spec/model-file.md`, "Manifests"). One emitter
//! feeds a byte sink, so the length, the model id (a hash of the tensor
//! table) and the bytes themselves come from the same code.

use super::manifest::{Manifest, ManifestQuant, MANIFEST_HASH};
use super::PAD_KEY;
use crate::digest::DIGEST_LEN;
use crate::error::{fail, Result};
use kiln_nostd::Rule as CoreRule;
use kiln_nostd::{DType, Limits};

/// A shard as the manifest lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardSpec<'a> {
    /// Its file name (a plain name in the manifest's folder).
    pub name: &'a str,
    /// Its length in bytes.
    pub length: u64,
    /// SHA-256 of its bytes before the payload region.
    pub prefix_digest: [u8; DIGEST_LEN],
}

/// A tensor as the manifest's table lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntrySpec<'a> {
    /// Its name, unique across the model.
    pub name: &'a str,
    /// The 1-based shard that holds it.
    pub shard: u32,
    /// Its dtype.
    pub dtype: DType,
    /// Its shape.
    pub shape: &'a [u64],
    /// Its payload length.
    pub byte_length: u64,
    /// Its opaque layout name ("" when none).
    pub layout: &'a str,
    /// Its opaque block size (0 when none).
    pub block_size: u32,
    /// Its quantization, scale and outer by name.
    pub quant: Option<ManifestQuant<'a>>,
    /// The SHA-256 of its payload.
    pub digest: [u8; DIGEST_LEN],
}

/// A tensor table the writer reads one entry at a time, so a caller with a
/// large model need not build a slice of [`EntrySpec`] beside its own table
/// (500,000 entries are 72 MB as a slice).
pub trait EntryTable {
    /// How many entries the table has.
    fn count(&self) -> usize;
    /// Entry `i`, for `i` below [`count`](Self::count).
    fn entry(&self, i: usize) -> Option<EntrySpec<'_>>;
}

impl EntryTable for [EntrySpec<'_>] {
    fn count(&self) -> usize {
        self.len()
    }
    fn entry(&self, i: usize) -> Option<EntrySpec<'_>> {
        self.get(i).copied()
    }
}

/// Writes manifests.
///
/// ```
/// # #[cfg(feature = "sha2")] {
/// use kiln_model::{EntrySpec, Manifest, ManifestWriter, ShardSpec};
/// use kiln_nostd::{digest::sha256, DType};
/// let w = [0u8; 8];
/// let entries = [EntrySpec {
///     name: "w", shard: 1, dtype: DType::F32, shape: &[2], byte_length: 8,
///     layout: "", block_size: 0, quant: None, digest: sha256(&w),
/// }];
/// let shards = [ShardSpec { name: "m-00001-of-00001.kiln", length: 512, prefix_digest: [0; 32] }];
/// let mut out = vec![0u8; ManifestWriter::encoded_len(&[], &shards, &entries)?];
/// ManifestWriter::write(&[], &shards, &entries, &mut out)?;
/// let m = Manifest::parse(&out)?;
/// assert_eq!(m.find("w").map(|(t, within)| (t.shard, within)), Some((1, 0)));
/// assert_eq!(m.model_id(), ManifestWriter::model_id(&entries)?);
/// # }
/// # Ok::<(), kiln_model::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ManifestWriter;

impl ManifestWriter {
    /// The manifest's length for these fields.
    pub fn encoded_len(
        metadata: &[(&str, &str)],
        shards: &[ShardSpec<'_>],
        entries: &[EntrySpec<'_>],
    ) -> Result<usize> {
        let mut n = 0usize;
        emit(metadata, shards, entries, &mut |b| n = n.saturating_add(b.len()))?;
        Ok(n)
    }

    /// Writes the manifest into `out`, checks it with [`Manifest::parse`]
    /// and returns its length. The name checks compare every pair; give
    /// [`write_with_scratch`](Self::write_with_scratch) scratch for large tables.
    pub fn write(
        metadata: &[(&str, &str)],
        shards: &[ShardSpec<'_>],
        entries: &[EntrySpec<'_>],
        out: &mut [u8],
    ) -> Result<usize> {
        Self::write_with_scratch(metadata, shards, entries, out, None)
    }

    /// [`write`](Self::write) with [`Manifest::scratch_len`] words of
    /// scratch, so the check takes linear time.
    pub fn write_with_scratch(
        metadata: &[(&str, &str)],
        shards: &[ShardSpec<'_>],
        entries: &[EntrySpec<'_>],
        out: &mut [u8],
        scratch: Option<&mut [u32]>,
    ) -> Result<usize> {
        let len = Self::encoded_len(metadata, shards, entries)?;
        let Some(file) = out.get_mut(..len) else {
            return fail(CoreRule::ValueOutputTooSmall, out.len());
        };
        let mut at = 0usize;
        emit(metadata, shards, entries, &mut |b| {
            if let Some(dst) = at.checked_add(b.len()).and_then(|end| file.get_mut(at..end)) {
                dst.copy_from_slice(b);
            }
            at = at.saturating_add(b.len());
        })?;
        Manifest::parse_with(file, &Limits::DEFAULT, scratch)?;
        Ok(len)
    }

    /// The model id of a manifest with this tensor table: what each shard
    /// records before the manifest exists.
    #[cfg(feature = "sha2")]
    pub fn model_id(entries: &[EntrySpec<'_>]) -> Result<[u8; DIGEST_LEN]> {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        emit_table(entries, &mut |b| h.update(b))?;
        Ok(h.finalize().into())
    }

    /// The manifest's bytes, in order, into `sink`, from a table read entry
    /// by entry: for a writer that streams a large manifest to a file. The
    /// bytes are not checked; parse the result with [`Manifest::parse_with`].
    pub fn stream<T: EntryTable + ?Sized>(
        metadata: &[(&str, &str)],
        shards: &[ShardSpec<'_>],
        entries: &T,
        sink: &mut impl FnMut(&[u8]),
    ) -> Result<()> {
        emit(metadata, shards, entries, sink)
    }

    /// [`model_id`](Self::model_id) of a table read entry by entry.
    #[cfg(feature = "sha2")]
    pub fn model_id_of<T: EntryTable + ?Sized>(entries: &T) -> Result<[u8; DIGEST_LEN]> {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        emit_table(entries, &mut |b| h.update(b))?;
        Ok(h.finalize().into())
    }
}

fn word(n: usize) -> Result<[u8; 4]> {
    match u32::try_from(n) {
        Ok(v) => Ok(v.to_le_bytes()),
        Err(_) => fail(CoreRule::CountTooWide, 0),
    }
}

fn emit_str(s: &str, sink: &mut impl FnMut(&[u8])) -> Result<()> {
    sink(&word(s.len())?);
    sink(s.as_bytes());
    Ok(())
}

fn emit<T: EntryTable + ?Sized>(
    metadata: &[(&str, &str)],
    shards: &[ShardSpec<'_>],
    entries: &T,
    sink: &mut impl FnMut(&[u8]),
) -> Result<()> {
    sink(&crate::frozen::frame_bytes(MANIFEST_HASH));
    sink(&word(metadata.len())?);
    for (i, &(k, v)) in metadata.iter().enumerate() {
        let prev = i.checked_sub(1).and_then(|j| metadata.get(j)).map(|&(p, _)| p);
        if k == PAD_KEY || prev.is_some_and(|p| p.as_bytes() >= k.as_bytes()) {
            return fail(CoreRule::DictKeyOrder, 0);
        }
        emit_str(k, sink)?;
        emit_str(v, sink)?;
    }
    sink(&word(shards.len())?);
    for s in shards {
        emit_str(s.name, sink)?;
        sink(&s.length.to_le_bytes());
        sink(&word(DIGEST_LEN)?);
        sink(&s.prefix_digest);
    }
    emit_table(entries, sink)
}

/// The `tensors` and `digests` fields: the bytes the model id hashes.
fn emit_table<T: EntryTable + ?Sized>(entries: &T, sink: &mut impl FnMut(&[u8])) -> Result<()> {
    let count = entries.count();
    // A table that yields fewer entries than it counts cannot be written.
    let at = |i: usize| match entries.entry(i) {
        Some(e) => Ok(e),
        None => fail(CoreRule::CountTooWide, 0),
    };
    sink(&word(count)?);
    for i in 0..count {
        let e = at(i)?;
        emit_str(e.name, sink)?;
        sink(&e.shard.to_le_bytes());
        sink(&e.dtype.code().to_le_bytes());
        sink(&word(e.shape.len())?);
        for d in e.shape {
            sink(&d.to_le_bytes());
        }
        sink(&e.byte_length.to_le_bytes());
        emit_str(e.layout, sink)?;
        sink(&e.block_size.to_le_bytes());
        match &e.quant {
            None => sink(&[0]),
            Some(q) => {
                sink(&[1]);
                sink(&q.scheme.to_le_bytes());
                sink(&q.axis.to_le_bytes());
                sink(&q.group_size.to_le_bytes());
                emit_str(q.scale, sink)?;
                emit_str(q.outer, sink)?;
            }
        }
    }
    sink(&word(count.saturating_mul(DIGEST_LEN))?);
    for i in 0..count {
        sink(&at(i)?.digest);
    }
    Ok(())
}

/// Signs a manifest of a sharded model (`alloc` and `ed25519` features):
/// the result is a signed manifest with the same metadata, shards, tensor
/// table and digests, so the model id and every shard stay as they are;
/// write it in the shards' folder. `sign` as for [`sign_model`](super::signed::sign_model); the result
/// is checked with [`Manifest::parse_trusted`](Manifest::parse_trusted).
#[cfg(all(feature = "alloc", feature = "ed25519"))]
pub fn sign_manifest(
    file: &[u8],
    key: &[u8; super::signed::KEY_LEN],
    version: u64,
    target: &str,
    sign: impl FnOnce(&[u8]) -> [u8; super::signed::SIGNATURE_LEN],
) -> Result<alloc::vec::Vec<u8>> {
    let m = Manifest::parse(file)?;
    let mut out = alloc::vec::Vec::new();
    out.extend_from_slice(&crate::frozen::frame_bytes(super::manifest::SIGNED_MANIFEST_HASH));
    out.extend_from_slice(&32u32.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&64u32.to_le_bytes());
    out.extend_from_slice(&[0u8; super::signed::SIGNATURE_LEN]);
    out.extend_from_slice(m.metadata_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    let len = u32::try_from(target.len()).or(fail(CoreRule::CountTooWide, out.len()))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(m.tables_bytes());
    let sig = sign(&super::signed::signed_message(&out, out.len()).concat());
    super::signed::put_signature(&mut out, &sig)?;
    let trust = super::signed::Trust::new(key)
        .ok_or(crate::Error::new(crate::Rule::SignatureInvalid, super::signed::SIG_AT))?;
    Manifest::parse_trusted(&out, &kiln_nostd::Limits::DEFAULT, None, &trust)?;
    Ok(out)
}
