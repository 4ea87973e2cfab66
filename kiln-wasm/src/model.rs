//! Model files (`spec/model-file.md`) for JavaScript: the frame and the
//! fields before the tensor block, checked by the core.
//!
//! A model file is a 16-byte frame naming one of three record types (the
//! core's [`Kind`]: plain, digests, shard), a `dict<str,str>` of metadata,
//! for a shard record its `shard` field, for digests and shard records a
//! digest table, then one directory block and nothing after it. The core's
//! [`Model::parse`](kiln_model::Model::parse) checks it in one slice;
//! the package never holds the payload in wasm memory, so it splits the same
//! checks in two, in the same order:
//!
//! 1. [`HeadCore::check`] on the file's first bytes (as many as JavaScript
//!    has): [`Kind::of`] decides the kind by content, exactly as
//!    [`parse_any`](kiln_model::parse_any) does (a manifest is
//!    reported as such: [`Head::Manifest`]); for a model file, the core's
//!    [`block_start`] checks the frame and every field before the block,
//!    step 3d included (for which the block's header must be at hand). An
//!    EOF rule while the file has more bytes asks for more ([`Head::Need`]),
//!    with the length the words read so far call for.
//! 2. The block is then checked by a [`Session`](crate::validator::Session)
//!    whose offsets start there: a standalone block checked at offset `s` is
//!    `Parser::parse_at(file, s)` followed by the model's TRAILING check, the
//!    same code, offset and rule.
//!
//! `tests/model.rs` holds this to `Model::parse` / `parse_any` on the example
//! model file, writer-made files with and without the padding key, and
//! mutations and truncations of them, with windows of several sizes.
//!
//! Every rule of the metadata that can fail on a short window fails with an
//! EOF rule (count and length words, `count * 8` and string lengths against
//! the unread bytes); every other rule reads only bytes already in the
//! window. So a verdict other than EOF on a prefix is the verdict on the file.

use kiln_model::signed::SIGNATURE_FIELD_LEN;
use kiln_model::{block_start, Kind, PAD_KEY, SHARD_FIELD_LEN};
use kiln_nostd::digest::DIGEST_LEN;
use kiln_nostd::frozen::{Reader, Schema, FRAME_LEN};
use kiln_nostd::wire::header::HEADER_LEN;
use kiln_nostd::{ErrorCode, Limits, Rule};

use crate::conv::{u32_of, u64_of};
use crate::ErrorInfo;

/// The metadata's type.
const METADATA_TYPE: &str = "dict<str,str>";

/// What the first bytes of a file say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// Not a model file: a plain directory block starting at byte 0.
    Plain,
    /// A model file whose frame and fields before the block are valid; its block starts at this offset.
    Model(u64),
    /// A sharded model's manifest (not a model file: see [`crate::manifest`]).
    Manifest,
    /// More bytes are needed to decide: at least this many from the start of the file.
    Need(u64),
    /// The file is rejected (the core's error, offsets absolute in the file).
    Error(ErrorInfo),
}

/// The head check with its result kept for JavaScript (host-testable).
#[derive(Default)]
pub struct HeadCore {
    /// Metadata entries as absolute byte ranges: `[key_at, key_len, value_at, value_len]` per entry,
    /// in key order, the padding key left out.
    entries: Vec<u32>,
    /// The padding key's value length (0 without it).
    padding: u64,
    /// The record type of the last accepted model file.
    kind: Option<Kind>,
    /// Where its digest table's bytes start and how long it is (digests and shard records).
    digests: Option<(u64, u64)>,
    /// A shard record's `[model_at, index, count]` (the model id's 32 bytes at `model_at`).
    shard: Option<[u64; 3]>,
    error: Option<ErrorInfo>,
}

fn shifted(e: kiln_nostd::Error, by: usize) -> ErrorInfo {
    let mut info = ErrorInfo::from(e);
    info.offset = info.offset.saturating_add(u64_of(by));
    info
}

fn u32_at(b: &[u8], at: usize) -> Option<u64> {
    let w: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u64::from(u32::from_le_bytes(w)))
}

/// The code JavaScript gets for a kind (`-1`: none of the four).
pub fn kind_code(kind: Option<Kind>) -> i32 {
    match kind {
        None => -1,
        Some(Kind::Plain) => 0,
        Some(Kind::Digests) => 1,
        Some(Kind::Shard) => 2,
        Some(Kind::Manifest) => 3,
        Some(Kind::Signed) => 4,
    }
}

impl HeadCore {
    /// Checks the first bytes of a file of `total` bytes (`bytes` holds
    /// them from byte 0; `total` may be `u64::MAX` when the length is not
    /// known yet, as in a stream). See the module docs.
    pub fn check(&mut self, bytes: &[u8], total: u64, limits: Limits) -> Head {
        self.entries.clear();
        self.padding = 0;
        self.kind = None;
        self.digests = None;
        self.shard = None;
        self.error = None;
        let have = u64_of(bytes.len());
        let whole = have >= total;
        if bytes.len() < FRAME_LEN && !whole {
            return Head::Need(total.min(u64_of(FRAME_LEN)));
        }
        let kind = match Kind::of(bytes) {
            None => return Head::Plain,
            Some(Kind::Manifest) => return Head::Manifest,
            Some(k) => k,
        };
        // The core's checks of everything before the block, in its order
        // (frame, metadata, shard, digests, step 3d).
        let block = match block_start(bytes, &limits) {
            Ok(b) => u64_of(b),
            Err(e) if e.code() == ErrorCode::Eof && !whole => {
                return Head::Need(need_for(bytes, e).max(have.saturating_add(1)).min(total));
            }
            Err(e) => return self.fail(ErrorInfo::from(e)),
        };
        // Step 3d compares a digest table with the block's tensor count: its header must be at hand.
        let header_end = block.saturating_add(u64_of(HEADER_LEN));
        if kind != Kind::Plain && !whole && have < header_end {
            return Head::Need(header_end.min(total));
        }
        self.read_fields(bytes, kind, block, limits)
    }

    /// The metadata's entries and the other fields' places, in a head the core accepted.
    fn read_fields(&mut self, bytes: &[u8], kind: Kind, block: u64, limits: Limits) -> Head {
        // The FrozenChecker's capacity, so the parser and the reader are shared code in the module.
        let schema = match Schema::<{ crate::frozen::NODES }>::parse(METADATA_TYPE) {
            Ok(s) => s,
            Err(e) => return self.fail(ErrorInfo::from(e)),
        };
        // A signed record's metadata follows its `signature` field.
        let meta_at = if kind == Kind::Signed { FRAME_LEN.saturating_add(SIGNATURE_FIELD_LEN) } else { FRAME_LEN };
        let body = bytes.get(meta_at..).unwrap_or(&[]);
        let reader = Reader::new().limits(limits);
        let end = match reader.read(body, &schema) {
            Ok(_) => body.len(),
            Err(e) if e.rule() == Rule::TrailingBytes => e.offset(),
            // Cannot happen: the core accepted the metadata.
            Err(e) => return self.fail(shifted(e, meta_at)),
        };
        let meta = body.get(..end).unwrap_or(&[]);
        let v = match reader.read(meta, &schema) {
            Ok(v) => v,
            // Cannot happen: the same bytes were accepted up to `end`.
            Err(e) => return self.fail(shifted(e, meta_at)),
        };
        // Keys and values borrow `bytes`: their offsets in it.
        let base = bytes.as_ptr().addr();
        let at = |s: &[u8]| u32_of(s.as_ptr().addr().wrapping_sub(base));
        let len = |s: &[u8]| u32_of(s.len());
        for (k, v) in v.as_dict().into_iter().flat_map(|d| d.entries()) {
            let value = v.as_str_bytes().unwrap_or(&[]);
            if k == PAD_KEY.as_bytes() {
                self.padding = u64_of(value.len());
                continue;
            }
            self.entries.extend_from_slice(&[at(k), len(k), at(value), len(value)]);
        }
        // The fields after the metadata, at the places the core checked.
        let mut after = meta_at.saturating_add(end);
        if kind == Kind::Signed {
            // The release: a version and the target's length word and bytes.
            let target = u32_at(bytes, after.saturating_add(8)).unwrap_or(0);
            after = after.saturating_add(12).saturating_add(usize::try_from(target).unwrap_or(0));
        }
        if kind == Kind::Shard {
            let word = |k: usize| u32_at(bytes, after.saturating_add(k)).unwrap_or(0);
            let model_at = u64_of(after.saturating_add(4));
            self.shard = Some([model_at, word(4 + DIGEST_LEN), word(8 + DIGEST_LEN)]);
            after = after.saturating_add(SHARD_FIELD_LEN);
        }
        if matches!(kind, Kind::Digests | Kind::Shard | Kind::Signed) {
            let n = u32_at(bytes, after).unwrap_or(0);
            self.digests = Some((u64_of(after.saturating_add(4)), n));
        }
        self.kind = Some(kind);
        Head::Model(block)
    }

    fn fail(&mut self, e: ErrorInfo) -> Head {
        self.error = Some(e);
        Head::Error(e)
    }

    /// The metadata entries of the last accepted model file (see the field).
    pub fn entries(&self) -> &[u32] {
        &self.entries
    }

    /// The padding key's value length in the last accepted model file.
    pub fn padding(&self) -> u64 {
        self.padding
    }

    /// The record type of the last accepted model file.
    pub fn kind(&self) -> Option<Kind> {
        self.kind
    }

    /// Where the last accepted file's digest table starts and its length in bytes.
    pub fn digests(&self) -> Option<(u64, u64)> {
        self.digests
    }

    /// A shard record's `[model_at, index, count]`.
    pub fn shard(&self) -> Option<[u64; 3]> {
        self.shard
    }

    /// The last error.
    pub fn error(&self) -> Option<ErrorInfo> {
        self.error
    }
}

/// How many bytes of the file (from its start) the core needs at least,
/// after an EOF rule at `e.offset()`: the words at the offset say how much
/// (a string's or byte run's length, a count of entries of at least 8
/// bytes); otherwise one word more.
fn need_for(bytes: &[u8], e: kiln_model::Error) -> u64 {
    use kiln_model::AnyRule::Core;
    let at = e.offset();
    // Saturating: a sum past u64 is a need no file meets (the caller caps it at the total).
    let after = u64_of(at).saturating_add(4);
    match (e.rule(), u32_at(bytes, at)) {
        (Core(Rule::ByteLengthPastEnd), Some(n)) => after.saturating_add(n),
        (Core(Rule::CountPastEnd), Some(n)) => after.saturating_add(n.saturating_mul(8)),
        _ => after.saturating_add(4),
    }
}
