//! Delta updates (`spec/model-file.md`, "Delta updates"): a signed model
//! NEW sent to a device that holds OLD, with only the payloads OLD lacks.
//!
//! A delta is a small Frozen head ([`DeltaHead`]: which OLD it applies to,
//! and per tensor of NEW whether its payload is sent or copied from OLD),
//! then NEW's bytes up to its payload region, then the sent payloads back
//! to back. The device feeds NEW's bytes to its update check as they are
//! rebuilt: the prefix as it arrives, then [`Plan`]'s pieces in order
//! (zeros, a copy from the active model, or bytes of the delta), so the
//! rebuilt model is checked exactly as a full update would be.

use crate::bytes::{u32_at, u64_from};
use crate::digest::DIGEST_LEN;
use crate::error::{fail, Result, Rule};
use crate::frozen::{check_frame, Checker, Field, Ty, FRAME_LEN};
#[cfg(all(feature = "alloc", feature = "sha2"))]
use kiln_nostd::Rule as CoreRule;
use kiln_nostd::{Directory, Limits};

/// The delta head's canonical type text.
pub const DELTA_TYPE: &str = "struct{base:list<u8>,reuse:list<u32>,}";
/// The schema hash of [`DELTA_TYPE`].
pub const DELTA_HASH: u64 = crate::frozen::hash_text(DELTA_TYPE);

static REUSE: Ty = Ty::list(&Ty::U32);
static FIELDS: [Field; 2] = [Field::new("base", &Ty::BYTES), Field::new("reuse", &REUSE)];
static HEAD: Ty = Ty::structure(&FIELDS);
const _: () = assert!(HEAD.schema_hash() == DELTA_HASH);

/// A checked delta head, borrowed from the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaHead<'a> {
    /// SHA-256 of the base model's bytes before its payload region.
    pub base: &'a [u8; DIGEST_LEN],
    /// The `reuse` entries' bytes (u32 little-endian each).
    reuse: &'a [u8],
    /// Absolute offset of the `reuse` count word.
    reuse_at: usize,
    /// Bytes of the frame and the two fields: NEW's bytes start here.
    len: usize,
}

impl<'a> DeltaHead<'a> {
    /// Checks the frame and the two fields at the start of `buf` (which may
    /// go on with NEW's bytes). An EOF error means more bytes are needed.
    pub fn parse(buf: &'a [u8]) -> Result<DeltaHead<'a>> {
        Self::parse_with(buf, &Limits::DEFAULT)
    }

    /// [`parse`](Self::parse) with caps.
    pub fn parse_with(buf: &'a [u8], limits: &Limits) -> Result<DeltaHead<'a>> {
        let at = check_frame(buf, DELTA_HASH)?;
        let checker = Checker { buf, limits: *limits, utf8: true };
        let end = checker.value(&HEAD, at)?;
        let (base, reuse_at) = checker.byte_run(at)?;
        let Ok(base) = <&[u8; DIGEST_LEN]>::try_from(base) else {
            return fail(Rule::DeltaBaseLength, at);
        };
        let reuse = buf.get(reuse_at.saturating_add(4)..end).unwrap_or(&[]);
        Ok(DeltaHead { base, reuse, reuse_at, len: end })
    }

    /// Bytes of the head: NEW's first byte is at this offset of the delta.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Never empty (a head has a frame).
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// The number of `reuse` entries.
    pub const fn count(&self) -> usize {
        self.reuse.len() / 4
    }

    /// Entry `j`: 0 when tensor `j`'s payload is sent, `i + 1` when it is OLD's tensor `i`.
    #[must_use]
    pub fn reuse(&self, j: usize) -> Option<u32> {
        u32_at(self.reuse, j.checked_mul(4)?)
    }

    /// [`Rule::DeltaBase`] unless the delta is for the model whose base id is `base`.
    pub fn check_base(&self, base: &[u8; DIGEST_LEN]) -> Result<()> {
        if self.base == base {
            Ok(())
        } else {
            fail(Rule::DeltaBase, FRAME_LEN.saturating_add(4))
        }
    }

    fn entry_at(&self, j: usize) -> usize {
        self.reuse_at.saturating_add(4).saturating_add(j.saturating_mul(4))
    }
}

/// A model's base id, as a delta names it: SHA-256 of its bytes before its
/// payload region (`payload_start`, e.g. [`Model::payload_start`](crate::Model::payload_start)).
#[cfg(feature = "sha2")]
#[must_use]
pub fn base_id(model: &[u8], payload_start: usize) -> [u8; DIGEST_LEN] {
    crate::digest::sha256(model.get(..payload_start).unwrap_or(model))
}

/// One piece of NEW's bytes after its prefix, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece {
    /// This many zero bytes (a gap before a payload, or the block's tail).
    Zeros(u64),
    /// A payload copied from the base model: `len` bytes from absolute offset `at` of the base file.
    Base {
        /// Absolute offset in the base model's file.
        at: u64,
        /// Bytes to copy.
        len: u64,
    },
    /// This many bytes of the delta, as they come.
    Sent(u64),
}

/// NEW's payload region as [`Piece`]s: per tensor in descriptor order, the
/// zeros before it and its payload (copied or sent), then the zeros to the
/// block's end. An iterator of `Result`s: a bad reuse entry ends it with
/// its error.
#[derive(Clone, Debug)]
pub struct Plan<'h, 'n, 'b> {
    head: DeltaHead<'h>,
    new: Directory<'n>,
    base: Directory<'b>,
    /// The next tensor of NEW.
    next: usize,
    /// Payload offset where the pieces so far end.
    running: u64,
    /// The zeros before tensor `next` are out.
    gap_done: bool,
    done: bool,
}

impl<'h, 'n, 'b> Plan<'h, 'n, 'b> {
    /// The plan for NEW's checked directory (its prefix: `UpdateCheck::directory` (feature `ed25519`),
    /// or a parsed model's) from the base model's directory; [`Rule::DeltaReuseCount`]
    /// unless the head has one entry per tensor of NEW.
    pub fn new(head: DeltaHead<'h>, new: Directory<'n>, base: Directory<'b>) -> Result<Self> {
        if head.count() != new.len() {
            return fail(Rule::DeltaReuseCount, head.reuse_at);
        }
        Ok(Plan { head, new, base, next: 0, running: 0, gap_done: false, done: false })
    }

    /// Bytes the delta sends after NEW's prefix (the sum of the `Sent` pieces).
    pub fn sent_len(&self) -> Result<u64> {
        let mut n = 0u64;
        for p in self.clone() {
            if let Piece::Sent(k) = p? {
                n = n.saturating_add(k);
            }
        }
        Ok(n)
    }

    fn piece(&mut self) -> Result<Option<Piece>> {
        let Some(t) = self.new.get(self.next) else {
            self.done = true;
            let tail = self.new.header().payload_bytes.saturating_sub(self.running);
            return Ok((tail > 0).then_some(Piece::Zeros(tail)));
        };
        if !self.gap_done {
            self.gap_done = true;
            let gap = t.byte_offset().saturating_sub(self.running);
            if gap > 0 {
                self.running = self.running.saturating_add(gap);
                return Ok(Some(Piece::Zeros(gap)));
            }
        }
        let len = u64_from(t.byte_len());
        let entry = self.head.reuse(self.next).unwrap_or(0);
        let piece = match entry.checked_sub(1) {
            None => Piece::Sent(len),
            Some(i) => {
                let from = crate::bytes::usize_from(u64::from(i)).and_then(|i| self.base.get(i));
                match from.filter(|b| u64_from(b.byte_len()) == len) {
                    Some(b) => Piece::Base { at: u64_from(b.absolute_offset()), len },
                    None => return fail(Rule::DeltaReuse, self.head.entry_at(self.next)),
                }
            }
        };
        self.running = self.running.saturating_add(len);
        self.next = self.next.saturating_add(1);
        self.gap_done = false;
        Ok(Some(piece))
    }
}

impl Iterator for Plan<'_, '_, '_> {
    type Item = Result<Piece>;

    fn next(&mut self) -> Option<Result<Piece>> {
        while !self.done {
            match self.piece() {
                Ok(Some(p)) => return Some(Ok(p)),
                Ok(None) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

/// Writes the delta that takes a device from `old` to `new` (two checked
/// model files; `new` signed, as a device requires): each tensor of NEW
/// whose digest and length equal an OLD tensor's is copied from the first
/// such (`alloc` and `sha2` features).
#[cfg(all(feature = "alloc", feature = "sha2"))]
pub fn make(old: &[u8], new: &[u8]) -> Result<alloc::vec::Vec<u8>> {
    use crate::Model;
    use alloc::vec::Vec;
    let o = Model::parse_verified(old)?;
    let n = Model::parse_verified(new)?;
    let digests = |m: &Model<'_>| -> Vec<[u8; DIGEST_LEN]> {
        match m.digests() {
            Some(d) => d.iter().copied().collect(),
            None => m.directory().iter().map(|t| crate::digest::sha256(t.bytes())).collect(),
        }
    };
    let (od, nd) = (digests(&o), digests(&n));
    let mut reuse = Vec::with_capacity(nd.len());
    for (t, d) in n.directory().iter().zip(&nd) {
        let hit = o.directory().iter().zip(&od).position(|(u, e)| e == d && u.byte_len() == t.byte_len());
        // Fallback: over u32::MAX tensors no block exists; send the payload.
        reuse.push(hit.and_then(|i| u32::try_from(i).ok()?.checked_add(1)).unwrap_or(0));
    }
    let mut out = Vec::new();
    out.extend_from_slice(&crate::frozen::frame_bytes(DELTA_HASH));
    out.extend_from_slice(&32u32.to_le_bytes());
    out.extend_from_slice(&base_id(old, o.payload_start()));
    let count = u32::try_from(reuse.len()).or(fail(CoreRule::CountTooWide, out.len()))?;
    out.extend_from_slice(&count.to_le_bytes());
    for r in &reuse {
        out.extend_from_slice(&r.to_le_bytes());
    }
    out.extend_from_slice(new.get(..n.payload_start()).unwrap_or(&[]));
    for (t, r) in n.directory().iter().zip(&reuse) {
        if *r == 0 {
            out.extend_from_slice(t.bytes());
        }
    }
    Ok(out)
}

/// Rebuilds NEW from `old` (the base model file) and `delta`, as a device
/// does it, and checks the head's rules on the way (`alloc` and `sha2`
/// features); the result is then checked as any model file (a device feeds
/// it to its update check as it is rebuilt). A delta that ends early is
/// EOF, one with bytes after the last sent payload TRAILING.
#[cfg(all(feature = "alloc", feature = "sha2"))]
pub fn apply(old: &[u8], delta: &[u8]) -> Result<alloc::vec::Vec<u8>> {
    use crate::Model;
    let o = Model::parse(old)?;
    let head = DeltaHead::parse(delta)?;
    head.check_base(&base_id(old, o.payload_start()))?;
    let rest = delta.get(head.len()..).unwrap_or(&[]);
    // NEW's prefix: its fields and the block's prefix, from the start of `rest`.
    let block_at = crate::block_start(rest, &Limits::DEFAULT).map_err(|e| shift(e, head.len()))?;
    let header = kiln_nostd::wire::Header::parse(rest.get(block_at..).unwrap_or(&[]))
        .map_err(|e| shift(e, head.len().saturating_add(block_at)))?;
    let base = crate::layout::payload_base(header.tensor_count, header.name_bytes).and_then(crate::bytes::usize_from);
    let Some(prefix_len) = base.and_then(|b| b.checked_add(block_at)) else {
        return fail(CoreRule::PayloadSizeOverflow, head.len().saturating_add(block_at).saturating_add(16));
    };
    let Some(prefix) = rest.get(..prefix_len) else {
        return fail(CoreRule::DirectoryTruncated, delta.len());
    };
    // The tensor table from the prefix alone (no payload byte is in the delta for it).
    let mut mem = alloc::vec![0u8; prefix_len.saturating_sub(block_at)];
    let mut inc = kiln_nostd::Incremental::new(&mut mem);
    inc.feed(prefix.get(block_at..).unwrap_or(&[])).map_err(|e| shift(e, head.len().saturating_add(block_at)))?;
    let Some(new_dir) = inc.directory() else { return fail(CoreRule::DirectoryTruncated, delta.len()) };
    let mut out = prefix.to_vec();
    let mut at = head.len().saturating_add(prefix_len);
    for piece in Plan::new(head, new_dir, o.directory())? {
        match piece? {
            Piece::Zeros(n) => out.resize(out.len().saturating_add(crate::bytes::usize_sat(n)), 0),
            Piece::Base { at: from, len } => {
                let from = crate::bytes::usize_sat(from);
                out.extend_from_slice(old.get(from..from.saturating_add(crate::bytes::usize_sat(len))).unwrap_or(&[]));
            }
            Piece::Sent(n) => {
                let end = at.saturating_add(crate::bytes::usize_sat(n));
                let Some(bytes) = delta.get(at..end) else { return fail(CoreRule::BlockTruncated, delta.len()) };
                out.extend_from_slice(bytes);
                at = end;
            }
        }
    }
    if at != delta.len() {
        return fail(CoreRule::TrailingBytes, at);
    }
    Ok(out)
}

#[cfg(all(feature = "alloc", feature = "sha2"))]
fn shift(e: impl Into<crate::Error>, by: usize) -> crate::Error {
    e.into().shifted(u64_from(by))
}
