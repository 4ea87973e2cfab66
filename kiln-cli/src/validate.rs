//! Per-file validation. Everything `kiln validate` checks goes through
//! [`validate_bytes`]; a Frozen-value validator plugs in as another
//! [`Target`] (built by [`ValidateOptions::new`]) and another match arm there.

use std::fmt;

use kiln_nostd::{Directory, Error, Header, Limits, Parser};

/// The canonical type text of a tensor directory.
pub const TENSORS: &str = "tensors";

/// What each file is checked as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// One standalone, unframed tensor directory block (`--type tensors`).
    Tensors,
    // Later: `Frozen { ty, framed }` for the other Frozen types and frames.
}

/// How `kiln validate` checks each file.
#[derive(Clone, Debug)]
pub struct ValidateOptions {
    /// What a file must hold.
    pub target: Target,
    /// Count and byte caps (LIMIT above them).
    pub limits: Limits,
}

/// A `--type` / `--framed` combination this version cannot check yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unsupported {
    /// A Frozen type other than `tensors`.
    FrozenType(String),
    /// A frame (`KLN0` + schema hash) around the value.
    Framed,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unsupported::FrozenType(ty) => write!(
                f,
                "Frozen values are not supported yet: --type {ty:?} cannot be checked; only --type {TENSORS} (a standalone tensor directory) can"
            ),
            Unsupported::Framed => {
                write!(f, "frames are not supported yet: --framed cannot be checked; give an unframed tensor directory")
            }
        }
    }
}

impl std::error::Error for Unsupported {}

impl ValidateOptions {
    /// The options for `--type TYPE_TEXT [--framed]` with `limits`, or why
    /// this version cannot check such files.
    pub fn new(type_text: &str, framed: bool, limits: Limits) -> Result<Self, Unsupported> {
        let target = match type_text {
            TENSORS => Target::Tensors,
            other => return Err(Unsupported::FrozenType(other.to_owned())),
        };
        if framed {
            return Err(Unsupported::Framed);
        }
        Ok(ValidateOptions { target, limits })
    }
}

/// Checks one file's bytes. `Ok` when the file is accepted.
pub fn validate_bytes(bytes: &[u8], opts: &ValidateOptions) -> Result<(), Error> {
    match opts.target {
        Target::Tensors => parse_tensors(bytes, opts.limits).map(|_| ()),
    }
}

/// Checks `bytes` as one standalone tensor directory and returns its view.
///
/// The name check gets a hash table in heap scratch sized from the header's
/// tensor count, but only when that many descriptors could fit in the buffer
/// at all (count * 128 <= length), so a hostile count cannot make us allocate.
pub fn parse_tensors(bytes: &[u8], limits: Limits) -> Result<Directory<'_>, Error> {
    let parser = Parser::new().limits(limits);
    match name_scratch(bytes, limits) {
        Some(mut scratch) => parser.scratch(&mut scratch).parse(bytes),
        None => parser.parse(bytes),
    }
}

/// Scratch for the name table, or `None` when the count is not plausible.
fn name_scratch(bytes: &[u8], limits: Limits) -> Option<Vec<u32>> {
    let count = Header::peek_count(bytes)?;
    let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    let fits = u64::from(count).checked_mul(128).is_some_and(|need| need <= len);
    (fits && count <= limits.count_cap).then(|| vec![0u32; kiln_nostd::scratch_len(count)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unframed_tensors_are_supported() {
        let limits = Limits::DEFAULT;
        assert!(ValidateOptions::new("tensors", false, limits).is_ok());
        assert_eq!(
            ValidateOptions::new("list<u8>", false, limits).unwrap_err(),
            Unsupported::FrozenType("list<u8>".into())
        );
        assert_eq!(ValidateOptions::new("tensors", true, limits).unwrap_err(), Unsupported::Framed);
    }

    #[test]
    fn scratch_only_for_plausible_counts() {
        let block = kiln_nostd::doc_example_block(); // 1 tensor, 200 bytes
        assert_eq!(name_scratch(&block, Limits::DEFAULT).map(|s| s.len()), Some(kiln_nostd::scratch_len(1)));
        assert_eq!(name_scratch(&block, Limits::DEFAULT.with_count_cap(0)), None);
        let mut huge = kiln_nostd::EMPTY_BLOCK;
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(name_scratch(&huge, Limits::MAX), None);
        assert_eq!(name_scratch(b"nope", Limits::DEFAULT), None);
    }

    #[test]
    fn empty_input_is_eof_at_zero() {
        let opts = ValidateOptions::new("tensors", false, Limits::DEFAULT).unwrap();
        let err = validate_bytes(&[], &opts).unwrap_err();
        assert_eq!((err.code().as_str(), err.offset()), ("EOF", 0));
        assert!(validate_bytes(&kiln_nostd::EMPTY_BLOCK, &opts).is_ok());
    }
}
