//! # kiln-model
//!
//! Model files and sharded models (`spec/model-file.md`): what `kiln
//! convert` writes and every reader opens without being told a type, over
//! the `kiln-nostd` core's checks and views. `#![no_std]`; `alloc` only
//! behind its feature.
//!
//! A model file is a Frozen frame, then one value of one of three record
//! types ([`Kind`]): **plain** (`metadata`, then the tensor directory),
//! **digests** (a SHA-256 per tensor before the block) and **shard** (which
//! model and position it belongs to, then digests and the block). A
//! sharded model is a [`Manifest`] (the fourth record type: the model's
//! metadata, its shard files and every tensor with its shard and digest)
//! plus its shards.
//!
//! A writer may align the payload region in the file (for memory maps) with
//! the value of the reserved key [`PAD_KEY`]; [`Metadata`] hides that key,
//! so padding never shows up as user metadata.
//!
//! ```
//! use kiln_model::{self as model, Model};
//! # let file = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector.model.kiln"));
//! let m = Model::parse(&file)?;
//! assert_eq!(m.metadata().get("author"), Some("kiln"));
//! assert_eq!(m.directory().len(), 1);
//! // Any reader: a model file or a plain directory, told apart by content.
//! let (meta, dir) = model::parse_any(&file)?;
//! assert_eq!((meta.map(|m| m.len()), dir.len()), (Some(1), 1));
//! # Ok::<(), kiln_model::Error>(())
//! ```

#![no_std]
#![forbid(unsafe_code)]
// A published crate: every public item is documented (the workspace only warns),
// and a configured builder that is dropped unused is a mistake the compiler names.
#![deny(missing_docs)]
#![warn(clippy::return_self_not_must_use)]
// As the core: offset arithmetic saturates, and each `unwrap_or` that remains
// says on the line above why its fallback is never taken.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::as_conversions
    )
)]

#[cfg(all(feature = "alloc", feature = "sha2"))]
extern crate alloc;

#[cfg(feature = "sha2")]
mod block_digests;
pub mod delta;
#[cfg(feature = "ed25519")]
mod ed25519;
mod error;
#[cfg(feature = "std")]
pub mod host;
mod open;
#[cfg(feature = "slots")]
pub mod slots;
#[cfg(feature = "source")]
pub mod source;
#[cfg(feature = "ed25519")]
pub mod update;

#[cfg(feature = "sha2")]
pub use block_digests::check_block_digests;
pub use error::{AnyRule, Error, ErrorCode, Result, Rule, Step};
pub use open::{open, Opened, Options};

use kiln_nostd::Rule as CoreRule;
// The core's internals, under the names this code had inside the core (each
// feature set uses some of them).
#[allow(unused_imports)]
use kiln_nostd::{
    bytes, digest, dtype, frozen, incremental, names, steps,
    wire::{descriptor, header, layout},
};
use kiln_nostd::{Limits, Parser};

mod manifest;
mod manifest_writer;
#[cfg(feature = "sha2")]
mod sharded;
pub mod signed;
mod writer;

#[cfg(all(feature = "sha2", feature = "alloc"))]
pub use sharded::write::{write_sharded, ShardedFiles};
#[cfg(feature = "sha2")]
pub use sharded::{check_all, check_shard, check_shard_prefix, ShardFault};

pub use manifest::{
    Manifest, ManifestLayout, ManifestQuant, ManifestTensor, ShardEntry, ShardName, MANIFEST_HASH, MANIFEST_TYPE,
    SHARD_NAME_MAX, SIGNED_MANIFEST_HASH, SIGNED_MANIFEST_TYPE,
};
#[cfg(all(feature = "alloc", feature = "ed25519"))]
pub use manifest_writer::sign_manifest;
pub use manifest_writer::{EntrySpec, EntryTable, ManifestWriter, ShardSpec};
#[cfg(feature = "ed25519")]
pub use signed::Trust;
pub use signed::{Release, Signature, SIGNED_HASH, SIGNED_TYPE};
#[cfg(feature = "std")]
pub use writer::WriteToError;
pub use writer::{shard_field, ModelWriter, SHARD_FIELD_LEN};

use crate::bytes::{u32_at, usize_from_u32};
use crate::digest::{Digests, DIGEST_LEN};
use crate::error::fail;
use crate::frozen::{check_frame, Field, Ty, FRAME_LEN, FRAME_MAGIC};
use kiln_nostd::wire::Header;
use kiln_nostd::Directory;

/// The plain model record's canonical type text.
pub const MODEL_TYPE: &str = "struct{metadata:dict<str,str>,tensors:tensors,}";
/// The digests record: a SHA-256 per tensor before the block.
pub const DIGESTS_TYPE: &str = "struct{metadata:dict<str,str>,digests:list<u8>,tensors:tensors,}";
/// The shard record: the model id, its position and the shard count, then digests and the block.
pub const SHARD_TYPE: &str =
    "struct{metadata:dict<str,str>,shard:struct{model:list<u8>,index:u32,count:u32,},digests:list<u8>,tensors:tensors,}";

pub(crate) static METADATA: Ty = Ty::dict(&Ty::STR);
static PLAIN_FIELDS: [Field; 2] = [Field::new("metadata", &METADATA), Field::new("tensors", &Ty::TENSORS)];
static PLAIN: Ty = Ty::structure(&PLAIN_FIELDS);
static DIGESTS_FIELDS: [Field; 3] =
    [Field::new("metadata", &METADATA), Field::new("digests", &Ty::BYTES), Field::new("tensors", &Ty::TENSORS)];
static DIGESTS: Ty = Ty::structure(&DIGESTS_FIELDS);
static SHARD_ID_FIELDS: [Field; 3] =
    [Field::new("model", &Ty::BYTES), Field::new("index", &Ty::U32), Field::new("count", &Ty::U32)];
static SHARD_ID: Ty = Ty::structure(&SHARD_ID_FIELDS);
static SHARD_FIELDS: [Field; 4] = [
    Field::new("metadata", &METADATA),
    Field::new("shard", &SHARD_ID),
    Field::new("digests", &Ty::BYTES),
    Field::new("tensors", &Ty::TENSORS),
];
static SHARD: Ty = Ty::structure(&SHARD_FIELDS);

/// The schema hash of [`MODEL_TYPE`], which a plain model file's frame carries.
pub const MODEL_HASH: u64 = crate::frozen::hash_text(MODEL_TYPE);
/// The schema hash of [`DIGESTS_TYPE`].
pub const DIGESTS_HASH: u64 = crate::frozen::hash_text(DIGESTS_TYPE);
/// The schema hash of [`SHARD_TYPE`].
pub const SHARD_HASH: u64 = crate::frozen::hash_text(SHARD_TYPE);
// The static types and the texts are the same records.
const _: () = assert!(PLAIN.schema_hash() == MODEL_HASH);
const _: () = assert!(DIGESTS.schema_hash() == DIGESTS_HASH);
const _: () = assert!(SHARD.schema_hash() == SHARD_HASH);

/// The reserved metadata key whose value (spaces) aligns the payload region
/// in the file. Readers hide it.
pub const PAD_KEY: &str = "kiln.convert.pad";

/// Keys starting with this are the converter's own (see `spec/model-file.md`).
pub const RESERVED_PREFIX: &str = "kiln.";

/// The record types of `spec/model-file.md`, told apart by the frame's schema hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Kind {
    /// `metadata`, then the block: no digests.
    Plain,
    /// `metadata`, a digest per tensor, then the block.
    Digests,
    /// A shard of a sharded model: `metadata`, `shard`, digests, the block.
    Shard,
    /// A sharded model's manifest (not a model file: no block).
    Manifest,
    /// A signed model: `signature`, `metadata`, `release`, digests, the block.
    Signed,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 5] = [Kind::Plain, Kind::Digests, Kind::Shard, Kind::Manifest, Kind::Signed];

    /// The record's canonical type text.
    pub const fn type_text(self) -> &'static str {
        match self {
            Kind::Plain => MODEL_TYPE,
            Kind::Digests => DIGESTS_TYPE,
            Kind::Shard => SHARD_TYPE,
            Kind::Manifest => manifest::MANIFEST_TYPE,
            Kind::Signed => SIGNED_TYPE,
        }
    }

    /// The schema hash its frame carries.
    pub const fn hash(self) -> u64 {
        match self {
            Kind::Plain => MODEL_HASH,
            Kind::Digests => DIGESTS_HASH,
            Kind::Shard => SHARD_HASH,
            Kind::Manifest => manifest::MANIFEST_HASH,
            Kind::Signed => SIGNED_HASH,
        }
    }

    /// The kind `buf` starts as: the frame magic and one of the four
    /// schema hashes; `None` for anything else (a plain directory, another
    /// Frozen type).
    #[must_use]
    pub fn of(buf: &[u8]) -> Option<Kind> {
        if buf.get(..4) != Some(&FRAME_MAGIC[..]) {
            return None;
        }
        let hash = u64::from_le_bytes(buf.get(8..16)?.try_into().ok()?);
        if hash == manifest::SIGNED_MANIFEST_HASH {
            // A signed manifest is read as a manifest (`Manifest::signature`).
            return Some(Kind::Manifest);
        }
        Kind::ALL.into_iter().find(|k| k.hash() == hash)
    }

    /// The name used in messages and JSON (`plain`, `digests`, `shard`, `manifest`, `signed`).
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Digests => "digests",
            Kind::Shard => "shard",
            Kind::Manifest => "manifest",
            Kind::Signed => "signed",
        }
    }

    /// True for the model-file kinds (those with a block).
    #[must_use]
    pub const fn is_model_file(self) -> bool {
        !matches!(self, Kind::Manifest)
    }

    /// True when a reader that verifies has payload digests to compare:
    /// every kind but a plain record (a manifest's shards carry theirs). The
    /// one place the front ends' "digests verified" flag comes from:
    /// asked for, this kind, and no fault.
    #[must_use]
    pub const fn has_digests(self) -> bool {
        !matches!(self, Kind::Plain)
    }
}

/// True when `buf` starts like a model file (a plain, digests, shard or
/// signed record). Anything else, a manifest included, is not one.
pub fn is_model_file(buf: &[u8]) -> bool {
    Kind::of(buf).is_some_and(Kind::is_model_file)
}

/// True when a reader that takes a model file or a plain directory by
/// content ([`parse_any`], the callers of `Model::parse_verified`, the ranged
/// `verify_model`, the C API) reads `buf` as a model file: it starts with the
/// frame of any record type, a manifest's included, so that a manifest gets
/// the record reader's verdict (SCHEMA at byte 8: it holds no directory)
/// rather than the directory magic's (FRAME at byte 0, as if it were not Kiln).
pub fn reads_as_model(buf: &[u8]) -> bool {
    Kind::of(buf).is_some()
}

/// Which model a shard belongs to, and where: its `shard` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardId<'a> {
    /// The model id: SHA-256 of the manifest's tensor table and digests.
    pub model: &'a [u8; DIGEST_LEN],
    /// Its 1-based position.
    pub index: u32,
    /// The number of shards.
    pub count: u32,
    /// Absolute offset of the model id's first byte (its length word is 4 before).
    pub(crate) at: usize,
}

impl ShardId<'_> {
    /// Absolute offset of the `model` bytes.
    pub const fn model_offset(&self) -> usize {
        self.at
    }

    /// Absolute offset of the `index` field.
    pub const fn index_offset(&self) -> usize {
        self.at.saturating_add(DIGEST_LEN)
    }

    /// Absolute offset of the `count` field.
    pub const fn count_offset(&self) -> usize {
        self.at.saturating_add(DIGEST_LEN).saturating_add(4)
    }
}

/// A checked model file, borrowed from the caller's buffer.
#[derive(Clone, Copy, Debug)]
pub struct Model<'a> {
    kind: Kind,
    metadata: Metadata<'a>,
    shard: Option<ShardId<'a>>,
    signature: Option<Signature<'a>>,
    digests: Option<Digests<'a>>,
    directory: Directory<'a>,
}

impl<'a> Model<'a> {
    /// Checks `buf` as exactly one model file (frame, fields, directory,
    /// no trailing bytes) with the default caps, in the order a Frozen reader
    /// of its record type checks it, steps 3d included; step 9d (the
    /// digests) is
    // Linked only where the feature builds the item, so docs without it have no broken link.
    #[cfg_attr(
        feature = "sha2",
        doc = "[`verify_digests`](Self::verify_digests) or [`parse_verified`](Self::parse_verified)."
    )]
    #[cfg_attr(not(feature = "sha2"), doc = "`verify_digests` or `parse_verified` (feature `sha2`).")]
    /// Nothing is allocated.
    pub fn parse(buf: &'a [u8]) -> Result<Model<'a>> {
        Model::parse_with(buf, Parser::new())
    }

    /// Like [`parse`](Self::parse), with a configured [`Parser`] for the
    /// directory (caps, name scratch, hash seed); its caps apply to the
    /// other fields too.
    pub fn parse_with(buf: &'a [u8], parser: Parser<'_>) -> Result<Model<'a>> {
        let head = Head::check(buf, &parser.caps())?;
        let directory = parser.parse_at(buf, head.block)?;
        if directory.end() != buf.len() {
            return fail(CoreRule::TrailingBytes, directory.end());
        }
        Ok(head.model(directory))
    }

    /// [`parse`](Self::parse) with step 9d: every tensor's payload is hashed
    /// and compared with its digest (a plain record has none). The verdict
    /// is the spec's: faults of steps 1 to 9 first, then DIGEST, then steps
    /// 10 to 12.
    #[cfg(feature = "sha2")]
    pub fn parse_verified(buf: &'a [u8]) -> Result<Model<'a>> {
        Model::parse_verified_with(buf, Parser::new())
    }

    /// [`parse_verified`](Self::parse_verified) with a configured [`Parser`].
    #[cfg(feature = "sha2")]
    pub fn parse_verified_with(buf: &'a [u8], parser: Parser<'_>) -> Result<Model<'a>> {
        let head = Head::check(buf, &parser.caps())?;
        let directory = match head.digests {
            Some(table) => crate::block_digests::check_block_digests(buf, head.block, parser, &table)?,
            None => parser.parse_at(buf, head.block)?,
        };
        if directory.end() != buf.len() {
            return fail(CoreRule::TrailingBytes, directory.end());
        }
        Ok(head.model(directory))
    }

    /// Checks `buf` as a signed model that `trust` accepts, completely: the
    /// frame and fields as [`parse`](Self::parse) with the key, target and
    /// version checks of `trust` where the signed record's fields are read,
    /// the block's steps 1 to 9, then step 9s (the Ed25519 signature over
    /// every byte before the payload region but the signature's own),
    /// step 9d (every digest) and steps 10 to 12. Any other record type is
    /// [`Rule::NotSigned`]: a reader that requires a signature never takes
    /// an unsigned model.
    #[cfg(feature = "ed25519")]
    pub fn parse_trusted(buf: &'a [u8], trust: &Trust<'_>) -> Result<Model<'a>> {
        Model::parse_trusted_with(buf, trust, Parser::new())
    }

    /// [`parse_trusted`](Self::parse_trusted) with a configured [`Parser`].
    #[cfg(feature = "ed25519")]
    pub fn parse_trusted_with(buf: &'a [u8], trust: &Trust<'_>, parser: Parser<'_>) -> Result<Model<'a>> {
        let policy = trust.policy();
        let head = Head::check_with(buf, &parser.caps(), Some(&policy))?;
        let (Some(sig), Some(table)) = (head.signature, head.digests) else {
            // A signed head always has both; anything else failed above.
            return fail(Rule::NotSigned, 8);
        };
        let directory = crate::block_digests::check_block_with(buf, head.block, parser, &table, |payload_start| {
            trust.check_pieces(sig.sig, &signed::signed_message(buf, payload_start))
        })?;
        if directory.end() != buf.len() {
            return fail(CoreRule::TrailingBytes, directory.end());
        }
        Ok(head.model(directory))
    }

    /// Step 9d on a model that [`parse`](Self::parse) accepted: the first
    /// tensor whose payload does not match its digest, as DIGEST at its
    /// first payload byte. `Ok` for a plain record (nothing to compare).
    #[cfg(feature = "sha2")]
    pub fn verify_digests(&self) -> Result<()> {
        let Some(table) = self.digests else { return Ok(()) };
        for (i, t) in self.directory.iter().enumerate() {
            if table.get(i).is_none_or(|d| crate::digest::sha256(t.bytes()) != *d) {
                return fail(CoreRule::PayloadDigest, t.absolute_offset());
            }
        }
        Ok(())
    }

    /// The record type.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The metadata, without the padding key.
    pub fn metadata(&self) -> Metadata<'a> {
        self.metadata
    }

    /// The digest table (digests and shard records).
    #[must_use]
    pub fn digests(&self) -> Option<Digests<'a>> {
        self.digests
    }

    /// Which model and position a shard record belongs to.
    #[must_use]
    pub fn shard(&self) -> Option<ShardId<'a>> {
        self.shard
    }

    /// A signed record's key, signature and release, as read: `parse`
    /// does not check the signature (see
    #[cfg_attr(feature = "ed25519", doc = "[`parse_trusted`](Self::parse_trusted)).")]
    #[cfg_attr(not(feature = "ed25519"), doc = "`parse_trusted`, feature `ed25519`).")]
    #[must_use]
    pub fn signature(&self) -> Option<Signature<'a>> {
        self.signature
    }

    /// The tensor directory.
    pub fn directory(&self) -> Directory<'a> {
        self.directory
    }

    /// Where the directory block starts in the file.
    pub fn directory_offset(&self) -> usize {
        self.directory.start()
    }

    /// Where the payload region starts in the file: the bytes before it are
    /// the ones a shard's prefix digest covers.
    pub fn payload_start(&self) -> usize {
        self.directory.payload_start()
    }
}

/// The fields before the block, checked.
pub(crate) struct Head<'a> {
    kind: Kind,
    metadata: Metadata<'a>,
    shard: Option<ShardId<'a>>,
    pub(crate) signature: Option<Signature<'a>>,
    pub(crate) digests: Option<Digests<'a>>,
    /// Where the block starts.
    pub(crate) block: usize,
}

impl<'a> Head<'a> {
    /// The frame, the fields in order with their own rules, and step 3d
    /// (which needs the block's header to pass steps 1 to 3).
    fn check(buf: &'a [u8], limits: &Limits) -> Result<Head<'a>> {
        Head::check_with(buf, limits, None)
    }

    /// [`check`](Self::check), with the key and release checks of a
    /// signature policy as the signed record's fields are read.
    pub(crate) fn check_with(buf: &'a [u8], limits: &Limits, policy: Option<&signed::Policy<'_>>) -> Result<Head<'a>> {
        let kind = match Kind::of(buf) {
            Some(k) if k.is_model_file() => k,
            // Not a model file: the frame's own verdict, against the plain record.
            _ => {
                check_frame(buf, MODEL_HASH)?;
                return fail(CoreRule::SchemaHash, 8);
            }
        };
        // The frame's own rules (profile, flags, reserved bytes) for its record type.
        check_frame(buf, kind.hash())?;
        // A reader that requires a signature: any other record fails in the
        // schema check's place, after the frame's own rules.
        if policy.is_some() && kind != Kind::Signed {
            return fail(Rule::NotSigned, 8);
        }
        let checker = crate::frozen::Checker { buf, limits: *limits, utf8: true };
        let mut at = FRAME_LEN;
        let mut sig = None;
        if kind == Kind::Signed {
            let (key, s, end) = signed::check_signature_field(&checker, at, policy)?;
            sig = Some((key, s));
            at = end;
        }
        let end = checker.value(&METADATA, at)?;
        // Fallback not taken: at..end is the metadata region checked above.
        let metadata = Metadata { bytes: buf.get(at..end).unwrap_or(&[]) };
        let (signature, end) = match sig {
            Some((key, sig)) => {
                let (release, end) = signed::check_release(&checker, end, policy)?;
                (Some(Signature { key, sig, release }), end)
            }
            None => (None, end),
        };
        let (shard, end) = match kind {
            Kind::Shard => {
                let (id, end) = check_shard_id(&checker, end)?;
                (Some(id), end)
            }
            _ => (None, end),
        };
        let (digests, block) = match kind {
            Kind::Digests | Kind::Shard | Kind::Signed => {
                let (table, block) = check_digest_table(&checker, end)?;
                check_digest_count(buf, block, &table, end, limits)?;
                (Some(table), block)
            }
            _ => (None, end),
        };
        Ok(Head { kind, metadata, shard, signature, digests, block })
    }

    fn model(self, directory: Directory<'a>) -> Model<'a> {
        Model {
            kind: self.kind,
            metadata: self.metadata,
            shard: self.shard,
            signature: self.signature,
            digests: self.digests,
            directory,
        }
    }
}

/// A shard record's `shard` field at `at`: its Frozen checks, then the model
/// id's length and the position.
fn check_shard_id<'a>(checker: &crate::frozen::Checker<'a>, at: usize) -> Result<(ShardId<'a>, usize)> {
    let end = checker.value(&SHARD_ID, at)?;
    let (model, after) = checker.byte_run(at)?;
    let Ok(model) = <&[u8; DIGEST_LEN]>::try_from(model) else {
        return fail(Rule::ShardModelLength, at);
    };
    let count_at = after.saturating_add(4);
    // Fallbacks not taken: the Frozen check read both words.
    let index = u32_at(checker.buf, after).unwrap_or(0);
    let count = u32_at(checker.buf, count_at).unwrap_or(0);
    if count == 0 {
        return fail(Rule::ShardPosition, count_at);
    }
    if index == 0 || index > count {
        return fail(Rule::ShardPosition, after);
    }
    Ok((ShardId { model, index, count, at: at.saturating_add(4) }, end))
}

/// The digest table at `at`: a byte run whose length is a multiple of 32.
fn check_digest_table<'a>(checker: &crate::frozen::Checker<'a>, at: usize) -> Result<(Digests<'a>, usize)> {
    let (bytes, end) = checker.byte_run(at)?;
    if bytes.len() % DIGEST_LEN != 0 {
        return fail(CoreRule::DigestTableLength, at);
    }
    Ok((Digests::new(bytes, at.saturating_add(4)), end))
}

/// Step 3d: once the block's header passes steps 1 to 3, the table holds
/// one digest per tensor. A header that fails them is left to the block's
/// own check, which reports it first.
fn check_digest_count(buf: &[u8], block: usize, table: &Digests<'_>, word: usize, limits: &Limits) -> Result<()> {
    let Some(header) = buf.get(block..).and_then(|b| Header::parse(b).ok()) else { return Ok(()) };
    if header.tensor_count > limits.count_cap || header.name_bytes > limits.byte_cap {
        return Ok(());
    }
    if table.len() != usize_from_u32(header.tensor_count) {
        return fail(CoreRule::DigestTableCount, word);
    }
    Ok(())
}

/// The checked fields before a model file's block, for a reader that
/// streams the block itself (`source::Options::verify_model`): its kind,
/// where the block starts, and the digest table. `buf` may end anywhere
/// after the fields; step 3d is checked when the block's header is in it.
#[cfg(all(feature = "sha2", feature = "source"))]
pub(crate) fn head_of<'a>(buf: &'a [u8], limits: &Limits) -> Result<(Kind, usize, Option<Digests<'a>>)> {
    Head::check(buf, limits).map(|h| (h.kind, h.block, h.digests))
}

/// Checks a model file's frame and fields before the block (the first
/// checks of [`Model::parse`], in its order) and returns where its directory
/// block starts: for sizing name scratch from that block's header
/// ([`Header::peek_count`](kiln_nostd::wire::Header::peek_count)) before the full parse.
pub fn block_start(buf: &[u8], limits: &kiln_nostd::Limits) -> Result<usize> {
    Head::check(buf, limits).map(|h| h.block)
}

/// Opens `buf` by content: a model file (metadata and directory) when it
/// starts like one ([`is_model_file`]), otherwise a plain directory (no
/// metadata), checked exactly as [`Parser::parse`] checks it. A manifest
/// (which holds no directory) gets [`Model::parse`]'s verdict, SCHEMA at
/// byte 8 ([`reads_as_model`]): [`open`] is the call that takes one.
/// Digests are not compared here
#[cfg_attr(feature = "sha2", doc = "([`Model::verify_digests`]).")]
#[cfg_attr(not(feature = "sha2"), doc = "(`Model::verify_digests`, feature `sha2`).")]
pub fn parse_any<'a>(buf: &'a [u8]) -> Result<(Option<Metadata<'a>>, Directory<'a>)> {
    parse_any_with(buf, Parser::new())
}

/// [`parse_any`] with a configured [`Parser`].
pub fn parse_any_with<'a>(buf: &'a [u8], parser: Parser<'_>) -> Result<(Option<Metadata<'a>>, Directory<'a>)> {
    if reads_as_model(buf) {
        let m = Model::parse_with(buf, parser)?;
        return Ok((Some(m.metadata), m.directory));
    }
    Ok((None, parser.parse(buf)?))
}

/// A model file's metadata: a checked `dict<str,str>` (keys in byte order,
/// UTF-8), read in place. [`PAD_KEY`] is not shown.
#[derive(Clone, Copy, Debug)]
pub struct Metadata<'a> {
    /// The dict's encoding: a u32 count, then (key, value) strings.
    bytes: &'a [u8],
}

impl<'a> Metadata<'a> {
    /// The entries, in key order, without the padding key.
    pub fn iter(&self) -> MetadataIter<'a> {
        // Fallback not taken: checked metadata starts with its count word.
        let count = u32_at(self.bytes, 0).map(usize_from_u32).unwrap_or(0);
        MetadataIter { bytes: self.bytes, at: 4, left: count, hide_pad: true }
    }

    /// The value of `key` (never the padding key's).
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The number of entries shown.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// True when no entry is shown.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// The padding key's length in bytes (0 without it): what aligns the
    /// payload region in the file.
    pub fn padding(&self) -> usize {
        self.all().find(|(k, _)| *k == PAD_KEY).map_or(0, |(_, v)| v.len())
    }

    /// True when the padding key is present (even with no spaces): the
    /// writer aligned the payload region in the file.
    #[must_use]
    pub fn padding_key(&self) -> bool {
        self.all().any(|(k, _)| k == PAD_KEY)
    }

    fn all(&self) -> MetadataIter<'a> {
        let mut it = self.iter();
        it.hide_pad = false;
        it
    }
}

impl<'a> IntoIterator for Metadata<'a> {
    type Item = (&'a str, &'a str);
    type IntoIter = MetadataIter<'a>;
    fn into_iter(self) -> MetadataIter<'a> {
        self.iter()
    }
}

/// Iterator over a model file's metadata entries.
#[derive(Clone, Debug)]
pub struct MetadataIter<'a> {
    bytes: &'a [u8],
    at: usize,
    left: usize,
    hide_pad: bool,
}

impl<'a> MetadataIter<'a> {
    /// The string at the cursor (length word, then UTF-8 bytes, checked at parse time).
    fn string(&mut self) -> Option<&'a str> {
        let len = usize_from_u32(u32_at(self.bytes, self.at)?);
        let start = self.at.checked_add(4)?;
        let end = start.checked_add(len)?;
        self.at = end;
        core::str::from_utf8(self.bytes.get(start..end)?).ok()
    }
}

impl<'a> Iterator for MetadataIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        while self.left > 0 {
            self.left = self.left.saturating_sub(1);
            let entry = self.string().zip(self.string())?;
            if !(self.hide_pad && entry.0 == PAD_KEY) {
                return Some(entry);
            }
        }
        None
    }
}
