//! A signed model checked as it arrives (feature `ed25519`): an update
//! over a radio link, written to flash packet by packet and activated only
//! when every check passed (`spec/model-file.md`, "Signed models").
//!
//! [`UpdateCheck`] takes the file in chunks of any size and says at the
//! first chunk after which a fault is certain:
//!
//! 1. the frame and the signed record's fields, as they arrive: a key
//!    other than the trusted one ([`Rule::SignatureKey`]) with the
//!    `signature` field, a release for another target or not newer than
//!    the running model ([`Rule::ReleaseTarget`], [`Rule::ReleaseVersion`])
//!    with the `release` field;
//! 2. the block's steps 1 to 9, as [`Incremental`] finds them;
//! 3. step 9s, the signature, with the chunk that completes the directory
//!    prefix: before the first payload byte is taken, so a device never
//!    writes a payload byte of a model that is not signed by its key;
//! 4. step 9d, each tensor's digest, with the chunk that holds its last byte;
//! 5. steps 10 to 12, and truncation at [`finish`](UpdateCheck::finish).
//!
//! Its verdict is [`Model::parse_trusted`](crate::Model::parse_trusted)'s
//! on the same bytes, in every chunking, with one exception: a length word
//! before the block that runs past the end of the buffer is
//! [`CoreRule::PrefixBufferTooSmall`] (the stream does not know where the file
//! ends), where the whole file may say EOF. Memory: one caller buffer for the
//! fields before the block and the block's directory prefix, the name
//! scratch and a SHA-256 state; nothing is allocated.
//!
//! ```
//! # #[cfg(feature = "alloc")] {
//! use kiln_model::Trust;
//! use kiln_model::update::UpdateCheck;
//! # let signer = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
//! # let key = signer.verifying_key().to_bytes();
//! # let file = kiln_model::update::doc_example(&key, |m| ed25519_dalek::Signer::sign(&signer, m).to_bytes());
//! let trust = Trust::new(&key).unwrap().target("board-a").newer_than(2);
//! let mut buf = [0u8; 2048];
//! let mut hasher = kiln_nostd::digest::TensorHasher::new();
//! let mut check = UpdateCheck::new(trust, &mut buf, &mut hasher);
//! for packet in file.chunks(256) {
//!     check.feed(packet)?; // write the packet to the inactive slot only after this
//! }
//! let summary = check.finish()?; // now activate
//! assert_eq!(summary.version, 3);
//! # }
//! # Ok::<(), kiln_model::Error>(())
//! ```

use crate::bytes::{u64_from, usize_from, usize_sat};
use crate::digest::TensorHasher;
use crate::error::{fail, Error, ErrorCode, Result, Rule};
use crate::header::HEADER_LEN;
use crate::incremental::{Borrowed, Memory, Progress, Summary};
use crate::signed::{signed_message, SIGNATURE_LEN};
use crate::{Head, Trust};
use kiln_nostd::Rule as CoreRule;
use kiln_nostd::{Incremental, Limits};

/// What [`UpdateCheck::finish`] reports for an accepted update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdateSummary {
    /// The release's version.
    pub version: u64,
    /// Where the directory block starts in the file.
    pub block_start: u64,
    /// Where the payload region starts in the file (the signed bytes end there).
    pub payload_start: u64,
    /// The block's header and lengths.
    pub block: Summary,
}

// No heap to box the validator in: the stage is as large as its largest variant.
#[allow(clippy::large_enum_variant)]
enum Stage<'m, 's> {
    /// The fields before the block are arriving in `buf[..have]`.
    Head { buf: &'m mut [u8], have: usize, scratch: Option<&'s mut [u32]>, hasher: &'m mut TensorHasher },
    /// The block is arriving; `signed` once step 9s passed. The one buffer
    /// is split where the block starts: `head` (the fields before it, with
    /// the digest table and the signed message's first bytes) and the
    /// validator's prefix memory. The validator is the core's
    /// `Incremental<Borrowed>`, the same type as a firmware's own
    /// [`Incremental::new`], so the two share one copy of its code.
    Block { inc: Incremental<Borrowed<'m, 's>>, head: &'m [u8], sig: [u8; SIGNATURE_LEN], version: u64, signed: bool },
    /// A verdict was given (a fault is kept in `fault`).
    Done,
}

/// A signed model checked as it streams past; see the [module](self).
pub struct UpdateCheck<'m, 's, 'k> {
    trust: Trust<'k>,
    limits: Limits,
    stage: Stage<'m, 's>,
    fault: Option<Error>,
    /// Bytes taken.
    fed: u64,
}

impl<'m, 's, 'k> UpdateCheck<'m, 's, 'k> {
    /// A check against `trust`, working in `buf` (at least the fields
    /// before the block, 32 bytes per tensor among them, plus the block's
    /// directory prefix) and `hasher`.
    #[must_use]
    pub fn new(trust: Trust<'k>, buf: &'m mut [u8], hasher: &'m mut TensorHasher) -> Self {
        UpdateCheck {
            trust,
            limits: Limits::DEFAULT,
            stage: Stage::Head { buf, have: 0, scratch: None, hasher },
            fault: None,
            fed: 0,
        }
    }

    /// Name scratch for the linear-time uniqueness check (as [`Incremental::scratch`]).
    #[must_use]
    pub fn scratch(mut self, scratch: &'s mut [u32]) -> Self {
        if let Stage::Head { scratch: s, .. } = &mut self.stage {
            *s = Some(scratch);
        }
        self
    }

    /// Uses these caps.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Bytes taken so far.
    pub fn consumed(&self) -> u64 {
        self.fed
    }

    /// Where the block starts in the file, once the fields before it passed.
    pub fn block_start(&self) -> Option<u64> {
        match &self.stage {
            Stage::Block { head, .. } => Some(u64_from(head.len())),
            _ => None,
        }
    }

    /// The new model's tensor table, once its directory prefix is in, valid
    /// and signed by the trusted key (before any payload byte).
    pub fn directory(&self) -> Option<kiln_nostd::Directory<'_>> {
        match &self.stage {
            Stage::Block { inc, signed: true, .. } => inc.directory(),
            _ => None,
        }
    }

    /// Takes the next chunk: an error is the verdict (and every later call
    /// repeats it). `Ok` means nothing in the bytes so far is a fault yet;
    /// [`Progress::Directory`] is reported once, by the chunk that brought
    /// the last signed byte.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Progress> {
        if let Some(e) = self.fault {
            return Err(e);
        }
        let r = self.take(chunk);
        if let Err(e) = r {
            self.fault = Some(e);
            self.stage = Stage::Done;
        }
        r
    }

    fn take(&mut self, chunk: &[u8]) -> Result<Progress> {
        let mut rest = chunk;
        if let Stage::Head { .. } = self.stage {
            let n = self.take_head(rest)?;
            self.fed = self.fed.saturating_add(u64_from(n));
            rest = rest.get(n..).unwrap_or(&[]);
            let Stage::Block { .. } = self.stage else {
                return if rest.is_empty() {
                    Ok(Progress::Header)
                } else {
                    fail(CoreRule::PrefixBufferTooSmall, usize_sat(self.fed))
                };
            };
        }
        let p = self.take_block(rest)?;
        self.fed = self.fed.saturating_add(u64_from(rest.len()));
        Ok(p)
    }

    /// Head bytes into the buffer; once the fields and the block's header
    /// are in and pass, the block stage starts with the block bytes held.
    /// Returns how many bytes of `chunk` it took. Not inlined: its frame
    /// (the validator as it is built) is not under a payload packet's.
    #[inline(never)]
    fn take_head(&mut self, chunk: &[u8]) -> Result<usize> {
        let Stage::Head { buf, have, .. } = &mut self.stage else { return Ok(0) };
        let n = buf.len().saturating_sub(*have).min(chunk.len());
        // Both `n` long by construction, so the copy has no length panic.
        if let (Some(dst), Some(src)) = (buf.get_mut(*have..).and_then(|d| d.get_mut(..n)), chunk.get(..n)) {
            dst.copy_from_slice(src);
        }
        *have = have.saturating_add(n);
        let policy = self.trust.policy();
        let head = match Head::check_with(buf.get(..*have).unwrap_or(&[]), &self.limits, Some(&policy)) {
            Ok(h) => h,
            // A length that runs past the bytes so far: more may hold it.
            Err(e) if e.code() == ErrorCode::Eof => return Ok(n),
            Err(e) => return Err(e),
        };
        // Step 3d needs the block's header.
        if head.block.saturating_add(HEADER_LEN) > *have {
            return Ok(n);
        }
        let (Some(sig), Some(table)) = (head.signature, head.digests) else {
            return fail(Rule::NotSigned, 8);
        };
        let (sig, version, block_at) = (*sig.sig, sig.release.version, head.block);
        let table_at = table.offset_of(0);
        let table = (table_at, table_at.saturating_add(table.as_bytes().len()));
        let held = (*have).saturating_sub(block_at);
        let Stage::Head { buf, scratch, hasher, .. } = core::mem::replace(&mut self.stage, Stage::Done) else {
            return Ok(n);
        };
        // `block_at <= have <= buf.len()`: the fallback is never taken.
        let (head, prefix) = buf.split_at_mut_checked(block_at).unwrap_or((&mut [], &mut []));
        let head: &'m [u8] = head;
        let table = head.get(table.0..table.1).unwrap_or(&[]);
        let mut inc = Incremental::new(prefix).digests(table, hasher).limits(self.limits);
        if let Some(scratch) = scratch {
            inc = inc.scratch(scratch);
        }
        self.stage = Stage::Block { inc, head, sig, version, signed: false };
        // The block bytes already in the buffer go through the validator
        // (which writes each one onto itself), in small copies.
        let mut done = 0usize;
        while done < held {
            let mut tmp = [0u8; 64];
            let k = held.saturating_sub(done).min(tmp.len());
            if let Stage::Block { inc, .. } = &self.stage {
                let src = inc.memory().prefix().get(done..).and_then(|s| s.get(..k));
                if let (Some(dst), Some(src)) = (tmp.get_mut(..k), src) {
                    dst.copy_from_slice(src);
                }
            }
            self.take_block(tmp.get(..k).unwrap_or(&[]))?;
            done = done.saturating_add(k);
        }
        Ok(n)
    }

    /// Block bytes into the validator; step 9s once the prefix is whole.
    fn take_block(&mut self, chunk: &[u8]) -> Result<Progress> {
        let trust = self.trust;
        let Stage::Block { inc, head, sig, signed, .. } = &mut self.stage else { return Ok(Progress::Payload) };
        let head: &[u8] = head;
        let block_at = head.len();
        let to_abs = |e: kiln_nostd::Error| Error::from(e).shifted(u64_from(block_at));
        let mut rest = chunk;
        let mut progress = Progress::Header;
        while !*signed {
            // Up to the header's end, then up to the prefix's end, so the
            // signature is checked with the prefix and before any payload byte.
            let stop = inc
                .header()
                .and_then(|h| crate::layout::payload_base(h.tensor_count, h.name_bytes))
                .unwrap_or(u64_from(HEADER_LEN));
            let n = usize_from(stop.saturating_sub(inc.consumed())).map_or(rest.len(), |k| k.min(rest.len()));
            let r = inc.feed(rest.get(..n).unwrap_or(&[]));
            rest = rest.get(n..).unwrap_or(&[]);
            let complete = inc.header().is_some() && inc.consumed() >= stop && stop > u64_from(HEADER_LEN);
            match r {
                // Steps 1 to 9 come before 9s; a digest fault (an empty first
                // tensor, judged with the prefix) after it.
                Err(e) if e.rule() != CoreRule::PayloadDigest || !complete => return Err(to_abs(e)),
                Ok(p) => progress = p,
                Err(_) => {}
            }
            if complete {
                let [a, b] = signed_message(head, block_at);
                let prefix = inc.memory().prefix().get(..usize_sat(stop)).unwrap_or(&[]);
                trust.check_pieces(sig, &[a, b, prefix])?;
                *signed = true;
                r.map_err(to_abs)?;
                progress = Progress::Directory;
            } else if rest.is_empty() {
                return Ok(progress);
            }
        }
        if rest.is_empty() {
            return Ok(progress);
        }
        let p = inc.feed(rest).map_err(to_abs)?;
        Ok(if progress == Progress::Directory && p == Progress::Payload { progress } else { p })
    }

    /// The verdict once the stream has ended.
    pub fn finish(self) -> Result<UpdateSummary> {
        if let Some(e) = self.fault {
            return Err(e);
        }
        match self.stage {
            Stage::Head { buf, have, .. } => {
                let policy = self.trust.policy();
                let bytes = buf.get(..have).unwrap_or(&[]);
                let head = Head::check_with(bytes, &self.limits, Some(&policy))?;
                // The fields are in, the block is cut short: its own verdict.
                let block = bytes.get(head.block..).unwrap_or(&[]);
                let e = kiln_nostd::wire::Header::parse(block)
                    .err()
                    .unwrap_or(kiln_nostd::Error::new(CoreRule::HeaderTruncated, block.len()));
                Err(Error::from(e).shifted(u64_from(head.block)))
            }
            Stage::Block { inc, head, version, signed, .. } => {
                let block_at = u64_from(head.len());
                let summary = inc.finish().map_err(|e| Error::from(e).shifted(block_at))?;
                if !signed {
                    // A block with an empty prefix would be signed at its end; none is valid.
                    return fail(Rule::SignatureInvalid, crate::signed::SIG_AT);
                }
                Ok(UpdateSummary {
                    version,
                    block_start: block_at,
                    payload_start: block_at.saturating_add(summary.payload_base),
                    block: summary,
                })
            }
            Stage::Done => fail(CoreRule::TrailingBytes, usize_sat(self.fed)),
        }
    }
}

/// A signed example file for the documentation's examples: signed by
/// `sign` (the crate only verifies), whose public key is `public`.
#[doc(hidden)]
#[cfg(feature = "alloc")]
pub fn doc_example(public: &[u8; 32], sign: impl FnOnce(&[u8]) -> [u8; SIGNATURE_LEN]) -> alloc::vec::Vec<u8> {
    use crate::signed::{put_signature, SignedHead};
    let data = [0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0];
    let specs = [kiln_nostd::TensorSpec::new(kiln_nostd::DType::F32, &[2], &data).named("w")];
    let mut block = alloc::vec![0u8; kiln_nostd::Writer::new().encoded_len(&specs).unwrap_or(0)];
    let _ = kiln_nostd::Writer::new().write(&specs, &mut block);
    let dir = kiln_nostd::Parser::new().parse(&block).ok();
    let digests: alloc::vec::Vec<u8> =
        dir.iter().flat_map(|d| d.iter()).flat_map(|t| crate::digest::sha256(t.bytes())).collect();
    let head = SignedHead { key: public, version: 3, target: "board-a", metadata: &[], digests: &digests, align: None };
    let n = head.len(&block).unwrap_or(0);
    let mut file = alloc::vec![0u8; n];
    let _ = head.write(&block, &mut file);
    file.extend_from_slice(&block);
    let base = kiln_nostd::wire::Header::parse(&block)
        .ok()
        .and_then(|h| crate::layout::payload_base(h.tensor_count, h.name_bytes));
    let payload_start = n.saturating_add(usize_sat(base.unwrap_or(0)));
    let msg: alloc::vec::Vec<u8> = signed_message(&file, payload_start).concat();
    let _ = put_signature(&mut file, &sign(&msg));
    file
}
