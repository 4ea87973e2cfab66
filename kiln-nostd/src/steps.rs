//! The check order of the spec, steps 1 to 12, composed once: a whole block
//! (`check_block`), its descriptors (steps 8 to 11, `check_descriptors`)
//! and a block whose payload is not at hand (`check_prefix`). `Parser`,
//! the incremental validator and ranged reading all go through here, so
//! the first failing step wins the same way everywhere; inside a step, the
//! first fault in descriptor order wins.

use crate::accept::{accept, PLAIN};
use crate::block::Block;
use crate::check_order;
use crate::directory::Limits;
use crate::error::{fail, Error, Result, Rule};
use crate::names::{self, NameTable};
use crate::wire::header::{check_padding, Header, Regions};

/// How a block is checked: the caps, the name-table scratch and its seed,
/// and `walk` (see `check_descriptors`). `Parser` is the
/// public builder of this.
pub(crate) struct Checks<'s> {
    pub(crate) limits: Limits,
    pub(crate) scratch: Option<&'s mut [u32]>,
    pub(crate) seed: u64,
    pub(crate) walk: Option<bool>,
}

/// Steps 1 to 12 over `block` (offsets relative to it).
pub(crate) fn check_block<'s>(
    block: &[u8],
    how: Checks<'s>,
    standalone: bool,
) -> Result<(Header, Regions, Option<names::LookupTable<'s>>)> {
    let header = Header::parse(block)?; // steps 1, 2
    let regions = header.regions(block, &how.limits)?; // steps 3 to 7
    let b = Block::new(block, &header, regions, true);
    let table = check_descriptors(&b, how.scratch, how.seed, how.walk)?; // steps 8 to 11
    if standalone && regions.block_len != block.len() {
        return fail(Rule::TrailingBytes, regions.block_len); // step 12
    }
    Ok((header, regions, table))
}

/// Steps 8 to 11. Accepting and reporting are kept apart: `accept` walks
/// the descriptors once, all rules of a descriptor together, and answers
/// only whether the block is valid; when it is not, `check_order::first_fault`
/// finds the fault the spec reports by going step by step (slower, and
/// faults are rare).
pub(crate) fn check_descriptors<'s>(
    b: &Block<'_>,
    scratch: Option<&'s mut [u32]>,
    seed: u64,
    walk: Option<bool>,
) -> Result<Option<names::LookupTable<'s>>> {
    // `walk`: accept in one walk (with the plain fast path or not), or step by step.
    let Some(plain) = walk else {
        return check_order::check(b, scratch, seed).map(|t| t.map(NameTable::freeze));
    };
    let (mut table, spare) = NameTable::claim(scratch, b.descs.count, b.has_names);
    match accept(b, table.as_mut(), seed, plain) {
        Ok(_) => Ok(table.map(NameTable::freeze)),
        Err(walk_fault) => {
            let scratch = table.map(NameTable::into_scratch).or(spare);
            match check_order::check(b, scratch, seed) {
                Err(e) => Err(e),
                // Cannot happen: both paths check the same rules. Should it,
                // the block is still refused, with the fault the walk met.
                Ok(_) => Err(walk_fault),
            }
        }
    }
}

/// Hosts and browsers accept with `accept` (one walk) and report with
/// `check_order`; bare-metal targets link only the step-by-step checks,
/// which accept as well (four passes over a small directory), for code size.
pub(crate) const ONE_WALK: bool = !cfg!(target_os = "none");

/// Steps 8 to 11 over a block whose payload is not at hand (the incremental
/// validator, once the directory prefix is in), sorted by how much of the
/// payload must still be seen before the verdict is certain.
pub enum PrefixVerdict {
    /// Steps 8 and 9 hold, and step 10's placement and step 11's
    /// quantization; only gap and element bytes are left, and none of
    /// the first `.0` descriptors has any (see `accept`).
    Clean(usize),
    /// A step 8 or 9 fault: the verdict, whatever the payload holds.
    Certain(Error),
    /// The first step-10 fault the descriptors show, at descriptor `.0`
    /// (the count for payload_bytes): the verdict unless a gap before that
    /// descriptor holds a nonzero byte.
    Misplaced(usize, Error),
    /// The first quantization fault, at descriptor `.0`: the verdict unless
    /// a gap byte, or an element byte of a descriptor up to `.0`, is bad.
    Quant(usize, Error),
}

/// Steps 7 to 11 of a block whose payload is not at hand: `prefix` holds
/// its bytes up to `regions.payload_base`, and steps 1 to 6 passed. The
/// block's parts, for the caller's payload walk, and the verdict so far.
///
/// Inlined into each caller (the parser, the incremental validator, the
/// ranged verifier): out of line, a firmware that links the incremental
/// validator twice (a plain update and `UpdateCheck`) pays one more frame
/// on its deepest path (`Incremental::feed` 1,120 bytes instead of 976 on
/// thumbv7m, against a 1 KiB budget).
#[inline(always)]
pub fn check_prefix_of<'a>(
    prefix: &'a [u8],
    header: &Header,
    regions: Regions,
    scratch: Option<&mut [u32]>,
    seed: u64,
) -> Result<(Block<'a>, PrefixVerdict)> {
    check_padding(prefix, regions.heap_end, regions.payload_base)?; // step 7
    let b = Block::new(prefix, header, regions, false);
    let verdict = check_prefix(&b, scratch, seed); // steps 8 to 11
    Ok((b, verdict))
}

/// Classifies the descriptor-only faults of `b` (built without payload).
fn check_prefix(b: &Block<'_>, scratch: Option<&mut [u32]>, seed: u64) -> PrefixVerdict {
    let (mut table, spare) = NameTable::claim(scratch, b.descs.count, b.has_names);
    // Bare metal: `ONE_WALK` is false, so `accept` is not linked.
    if let Some(Ok(clean_lead)) = ONE_WALK.then(|| accept(b, table.as_mut(), seed, PLAIN)) {
        return PrefixVerdict::Clean(clean_lead);
    }
    let scratch = table.map(NameTable::into_scratch).or(spare);
    let (mut table, spare) = match check_order::step8(b, scratch, seed) {
        Ok(kept) => kept,
        Err(e) => return PrefixVerdict::Certain(e),
    };
    if let Err(e) = check_order::step9(b, &mut table, spare) {
        return PrefixVerdict::Certain(e);
    }
    if let Err((i, e)) = check_order::step10(b) {
        return PrefixVerdict::Misplaced(i, e);
    }
    match check_order::step11(b) {
        Err((i, e)) => PrefixVerdict::Quant(i, e),
        Ok(()) => PrefixVerdict::Clean(0),
    }
}
