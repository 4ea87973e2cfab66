//! The model-file crate's error: a [`Rule`] of its own (records, manifests,
//! shards, signatures, updates and deltas), reported with the core's
//! [`ErrorCode`] table, beside every core rule a model file's block can
//! break. An [`Error`] holds either kind ([`AnyRule`]) and prints as the
//! core's does, so the CLI, the bindings, the fuzz oracles and the goldens
//! see the same codes, rule ids and texts as when this code lived in
//! `kiln_nostd::model`.

use core::fmt;

pub use kiln_nostd::{error::Step as CoreStep, ErrorCode};

use crate::bytes::{u64_from, usize_sat};

/// Where a rule sits in its check order: a core step (a directory's, a
/// Frozen value's, a record's fields) or a step of `spec/model-file.md`'s
/// manifest and shard orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Step {
    /// A step of the core's orders ([`kiln_nostd::error::Step`]).
    Core(CoreStep),
    /// A manifest's step M1 to M5.
    Manifest(u8),
    /// A step of opening a shard of a manifest, 1 to 7.
    Shard(u8),
}

impl Step {
    /// A model-file record's own fields, checked as the record is read.
    pub const RECORD: Step = Step::Core(CoreStep::Record);

    /// True when `self` comes before `other` in one order; false when it
    /// comes after, is the same step, or the two are of different orders.
    #[must_use]
    pub const fn precedes(self, other: Step) -> bool {
        match (self, other) {
            (Step::Core(a), Step::Core(b)) => a.precedes(b),
            (Step::Manifest(n), Step::Manifest(m)) | (Step::Shard(n), Step::Shard(m)) => n < m,
            _ => false,
        }
    }
}

kiln_nostd::rules! {
    /// Which rule of a model file, manifest, shard, signature, update or
    /// delta a rejected input broke (the block's own rules are
    /// [`kiln_nostd::Rule`]'s).
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    #[non_exhaustive]
    pub enum Rule, step: Step;

    // --- model files: signed records
    /// A signed record's key is not 32 bytes.
    SignatureKeyLength => Type, Step::RECORD, "a signed model's key is not 32 bytes";
    /// A signed record's signature is not 64 bytes.
    SignatureLength => Type, Step::RECORD, "a signed model's signature is not 64 bytes";
    /// A signed model's key is not the key the reader trusts.
    SignatureKey => Signature, Step::RECORD, "the model is signed by another key than the trusted one";
    /// A signed model's release names another target than the reader's.
    ReleaseTarget => Signature, Step::RECORD, "the model is for another target";
    /// A signed model's version is not above the running one (a rollback).
    ReleaseVersion => Signature, Step::RECORD, "the model's version is not newer than the running one";
    /// The signature does not verify over the model's bytes before its payloads (step 9s).
    SignatureInvalid => Signature, Step::Core(CoreStep::Directory(9, b's')), "the signature does not match the model's bytes before its payloads";
    /// A delta's base id is not 32 bytes.
    DeltaBaseLength => Type, Step::RECORD, "a delta's base id is not 32 bytes";
    /// A delta is for another model than the one it is applied to.
    DeltaBase => Type, Step::RECORD, "the delta is for another model than the one it is applied to";
    /// A delta's reuse list does not hold one entry per tensor of the new model.
    DeltaReuseCount => Type, Step::RECORD, "the delta's reuse list does not hold one entry per tensor of the new model";
    /// A delta's reuse entry names no tensor of the base model, or one of another length.
    DeltaReuse => Type, Step::RECORD, "a reuse entry names no tensor of the base model, or one of another length";
    /// A signature is required and the model is not a signed record.
    NotSigned => Signature, Step::RECORD, "the model is not signed";
    // --- model files: shard records
    /// A shard record's model id is not 32 bytes.
    ShardModelLength => Type, Step::RECORD, "a shard's model id is not 32 bytes";
    /// A shard record's count is 0, or its index is 0 or above the count.
    ShardPosition => Type, Step::RECORD, "a shard's index is not between 1 and its count";
    // --- manifests, steps M1 to M5
    /// A manifest names no shards.
    ManifestNoShards => Type, Step::Manifest(1), "the manifest names no shards";
    /// A shard name is not a plain file name.
    ShardName => Path, Step::Manifest(2), "a shard name is not a plain file name in the manifest's folder";
    /// Two shards have the same name.
    ShardNameRepeated => Path, Step::Manifest(2), "two shards have the same name";
    /// A shard's prefix digest is not 32 bytes.
    ShardDigestLength => Type, Step::Manifest(2), "a shard's prefix digest is not 32 bytes";
    /// A manifest tensor has an empty name.
    ManifestNameEmpty => Type, Step::Manifest(3), "a tensor in the manifest has an empty name";
    /// Two manifest tensors have the same name.
    ManifestNameRepeated => Type, Step::Manifest(3), "two tensors of the model have the same name";
    /// A manifest tensor's shard is 0, past the shard count, or out of order.
    ManifestShard => Type, Step::Manifest(3), "a tensor's shard is 0, past the shard count, or below the previous tensor's";
    /// A manifest tensor's dtype is not a defined or opaque code.
    ManifestDtype => Type, Step::Manifest(3), "a tensor's dtype in the manifest is not a defined or opaque code";
    /// A manifest tensor has more than 8 dimensions.
    ManifestRank => Type, Step::Manifest(3), "a tensor in the manifest has more than 8 dimensions";
    /// A manifest tensor's element count overflows a u64.
    ManifestCountOverflow => Limit, Step::Manifest(3), "the product of a manifest tensor's shape overflows";
    /// A manifest tensor's layout name or block size does not fit its dtype.
    ManifestLayout => Type, Step::Manifest(3), "a manifest tensor's layout name or block size does not fit its dtype";
    /// A manifest tensor's size overflows a u64.
    ManifestSizeOverflow => Limit, Step::Manifest(3), "a manifest tensor's element count times its width overflows";
    /// A manifest tensor's byte_length does not fit its dtype and shape.
    ManifestLength => Type, Step::Manifest(3), "a manifest tensor's byte_length does not fit its dtype and shape";
    /// A manifest tensor's quantization is invalid or names no tensor of its shard.
    ManifestQuant => Type, Step::Manifest(4), "a manifest tensor's quantization is invalid or names no tensor of its shard";
    /// The manifest's digests do not hold one digest per tensor.
    ManifestDigestCount => Type, Step::Manifest(5), "the manifest's digests do not hold one digest per tensor";
    // --- a shard against its manifest
    /// A shard file does not exist or cannot be opened.
    ShardMissing => Shard, Step::Shard(1), "a shard of the model is missing";
    /// A shard's length is not the manifest's.
    ShardLength => Shard, Step::Shard(2), "a shard's length is not the one the manifest records";
    /// A shard belongs to another model (or another version of it).
    ShardModel => Shard, Step::Shard(4), "the shard belongs to another model";
    /// A shard's index is not its position in the manifest.
    ShardIndex => Shard, Step::Shard(4), "the shard is not at its position in the manifest";
    /// A shard's count is not the manifest's shard count.
    ShardCount => Shard, Step::Shard(4), "the shard's count is not the manifest's shard count";
    /// A shard holds another number of tensors than the manifest says.
    ShardTensorCount => Shard, Step::Shard(5), "the shard holds another number of tensors than the manifest says";
    /// A shard tensor differs from its manifest entry.
    ShardTensor => Shard, Step::Shard(5), "a tensor of the shard differs from its manifest entry";
    /// A shard tensor's digest differs from the manifest's.
    ShardTensorDigest => Shard, Step::Shard(5), "a tensor's digest in the shard differs from the manifest's";
    /// A shard's prefix digest differs from the manifest's.
    ShardPrefixDigest => Shard, Step::Shard(6), "the shard's bytes before its payloads do not match the manifest's digest";
}

/// A rule of either crate: the core's (a directory's, a Frozen value's,
/// the digest table's) or this crate's.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AnyRule {
    /// A rule of the core.
    Core(kiln_nostd::Rule),
    /// A rule of model files.
    Model(Rule),
}

impl AnyRule {
    /// The error code this rule reports.
    pub const fn code(self) -> ErrorCode {
        match self {
            AnyRule::Core(r) => r.code(),
            AnyRule::Model(r) => r.code(),
        }
    }

    /// A one-line description a person understands.
    pub const fn description(self) -> &'static str {
        match self {
            AnyRule::Core(r) => r.description(),
            AnyRule::Model(r) => r.description(),
        }
    }

    /// A stable identifier, the variant's name (for JSON output and logs).
    pub const fn id(self) -> &'static str {
        match self {
            AnyRule::Core(r) => r.id(),
            AnyRule::Model(r) => r.id(),
        }
    }

    /// [`id`](Self::id) NUL-terminated, for C.
    pub const fn id_c_str(self) -> &'static core::ffi::CStr {
        match self {
            AnyRule::Core(r) => r.id_c_str(),
            AnyRule::Model(r) => r.id_c_str(),
        }
    }

    /// [`description`](Self::description) NUL-terminated, for C.
    pub const fn description_c_str(self) -> &'static core::ffi::CStr {
        match self {
            AnyRule::Core(r) => r.description_c_str(),
            AnyRule::Model(r) => r.description_c_str(),
        }
    }

    /// Where the rule sits in its check order.
    pub const fn step(self) -> Step {
        match self {
            AnyRule::Core(r) => Step::Core(r.step()),
            AnyRule::Model(r) => r.step(),
        }
    }
}

// The rule's own name, as when every rule was the core's.
impl fmt::Debug for AnyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnyRule::Core(r) => fmt::Debug::fmt(r, f),
            AnyRule::Model(r) => fmt::Debug::fmt(r, f),
        }
    }
}

impl From<kiln_nostd::Rule> for AnyRule {
    fn from(r: kiln_nostd::Rule) -> Self {
        AnyRule::Core(r)
    }
}

impl From<Rule> for AnyRule {
    fn from(r: Rule) -> Self {
        AnyRule::Model(r)
    }
}

// `err.rule() == Rule::X` reads the same for either crate's rules.
impl PartialEq<kiln_nostd::Rule> for AnyRule {
    fn eq(&self, other: &kiln_nostd::Rule) -> bool {
        *self == AnyRule::Core(*other)
    }
}

impl PartialEq<Rule> for AnyRule {
    fn eq(&self, other: &Rule) -> bool {
        *self == AnyRule::Model(*other)
    }
}

/// A rejected input: code, absolute byte offset, and the rule that failed,
/// the core's or this crate's. A core [`kiln_nostd::Error`] converts into
/// one unchanged (`From`), and back with [`core_error`](Self::core_error).
///
/// Like the core's, `Error` is `Copy` and 8 bytes, and offsets are exact up
/// to 2^48 - 1.
///
/// ```
/// let err = kiln_model::Model::parse(b"KLN0").unwrap_err();
/// assert_eq!(err.code(), kiln_model::ErrorCode::Eof);
/// assert_eq!(err.to_string(), "EOF at byte 0: the buffer ends inside the 16-byte frame");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error {
    // The offset in two parts: 48 bits in two words on 32-bit targets.
    lo: u32,
    hi: u16,
    rule: AnyRule,
}

/// Offsets saturate here (256 TiB), as the core's do.
const OFFSET_MAX: u64 = (1 << 48) - 1;

impl Error {
    /// An error for `rule` at absolute byte `offset`.
    #[must_use]
    pub fn new(rule: impl Into<AnyRule>, offset: usize) -> Self {
        Self::at(rule, u64_from(offset))
    }

    /// An error for `rule` at absolute byte `offset` of a stream or source
    /// that may be larger than the address space (saturating at 2^48 - 1).
    #[allow(clippy::as_conversions)] // the two parts of a value below 2^48
    #[must_use]
    pub fn at(rule: impl Into<AnyRule>, offset: u64) -> Self {
        let v = if offset > OFFSET_MAX { OFFSET_MAX } else { offset };
        Error { lo: v as u32, hi: (v >> 32) as u16, rule: rule.into() }
    }

    /// The spec's error code.
    pub const fn code(&self) -> ErrorCode {
        self.rule.code()
    }

    /// The absolute byte offset of the field or byte that broke the rule
    /// (saturating at `usize::MAX` on a 32-bit target; see
    /// [`offset_u64`](Self::offset_u64)).
    pub fn offset(&self) -> usize {
        usize_sat(self.offset_u64())
    }

    /// The absolute byte offset, not limited by the address space.
    #[allow(clippy::as_conversions)] // widening; `From` is not const
    pub const fn offset_u64(&self) -> u64 {
        (self.hi as u64) << 32 | self.lo as u64
    }

    /// The rule that failed.
    pub const fn rule(&self) -> AnyRule {
        self.rule
    }

    /// The core's error, when the rule is one of the core's.
    pub fn core_error(&self) -> Option<kiln_nostd::Error> {
        match self.rule {
            AnyRule::Core(r) => Some(kiln_nostd::Error::at(r, self.offset_u64())),
            AnyRule::Model(_) => None,
        }
    }

    /// The same error with its offset moved by `base` (a block or record
    /// checked in a sub-slice of the caller's buffer).
    #[must_use]
    pub fn shifted(self, base: u64) -> Self {
        Self::at(self.rule, self.offset_u64().saturating_add(base))
    }
}

impl From<kiln_nostd::Error> for Error {
    fn from(e: kiln_nostd::Error) -> Self {
        Error::at(e.rule(), e.offset_u64())
    }
}

// A core error and the same error in this crate's form are equal.
impl PartialEq<kiln_nostd::Error> for Error {
    fn eq(&self, other: &kiln_nostd::Error) -> bool {
        *self == Error::from(*other)
    }
}

impl PartialEq<Error> for kiln_nostd::Error {
    fn eq(&self, other: &Error) -> bool {
        Error::from(*self) == *other
    }
}

// By hand: the offset is one number.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error").field("rule", &self.rule).field("offset", &self.offset_u64()).finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Error {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "Error {{ rule: {}, offset: {} }}", self.rule, self.offset_u64());
    }
}

// The core's form, so a caller prints both crates' errors alike.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}: {}", self.code(), self.offset_u64(), self.rule.description())
    }
}

impl core::error::Error for Error {}

/// Result alias for this crate.
pub type Result<T> = core::result::Result<T, Error>;

/// Shorthand used by the checkers: `fail(Rule::X, at)`.
pub(crate) fn fail<T>(rule: impl Into<AnyRule>, at: usize) -> Result<T> {
    Err(Error::new(rule, at))
}

/// `fail` for an offset in a stream or source, which may pass `usize::MAX`.
#[cfg(feature = "sha2")]
pub(crate) fn fail_at<T>(rule: impl Into<AnyRule>, at: u64) -> Result<T> {
    Err(Error::at(rule, at))
}

// As the core's: two words on 32-bit targets, one on 64-bit ones.
const _: () = assert!(core::mem::size_of::<Error>() == 8);

#[cfg(test)]
mod tests {
    use super::{AnyRule, Error, ErrorCode, Rule};

    #[test]
    fn every_rule_has_a_unique_id_a_core_code_and_c_texts() {
        extern crate std;
        let mut ids: std::vec::Vec<_> = kiln_nostd::Rule::ALL.iter().map(|r| r.id()).collect();
        for rule in Rule::ALL {
            assert_eq!(rule.id_c_str().to_str(), Ok(rule.id()));
            assert_eq!(rule.description_c_str().to_str(), Ok(rule.description()));
            assert!(ErrorCode::ALL.contains(&rule.code()) && !rule.description().is_empty(), "{rule:?}");
            ids.push(rule.id());
        }
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), kiln_nostd::Rule::ALL.len() + Rule::ALL.len());
    }

    #[test]
    fn a_core_error_converts_unchanged_and_prints_as_the_core_does() {
        extern crate std;
        let core = kiln_nostd::Error::at(kiln_nostd::Rule::BoolByte, (1 << 32) + 7);
        let e = Error::from(core);
        assert_eq!(
            (e.rule(), e.offset_u64(), e.code()),
            (AnyRule::Core(kiln_nostd::Rule::BoolByte), (1 << 32) + 7, core.code())
        );
        assert_eq!(std::format!("{e}"), std::format!("{core}"));
        assert_eq!(e.core_error(), Some(core));
        assert_eq!(e, core);
        assert_eq!(core, e);
        assert_ne!(Error::new(kiln_nostd::Rule::BoolByte, 0), core);
        let m = Error::new(Rule::ShardName, 40);
        assert!(m.rule() == Rule::ShardName && m.core_error().is_none());
        assert_eq!(
            std::format!("{m}"),
            "PATH at byte 40: a shard name is not a plain file name in the manifest's folder"
        );
        assert_eq!(std::format!("{m:?}"), "Error { rule: ShardName, offset: 40 }");
    }
}
