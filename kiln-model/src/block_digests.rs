//! Step 9d over a whole block in memory: a model file's block against its
//! digest table (`spec/model-file.md`, "Digests"). The rules are the core's
//! (`DigestTableCount`, `PayloadDigest`), as is the streaming form of the
//! step (`Incremental::digests`); this is the whole-buffer verdict the
//! streaming readers agree with.

use kiln_nostd::bytes::{u64_from, usize_from};
use kiln_nostd::digest::Digests;
use kiln_nostd::{error::Step, Rule};

/// True for the rules of steps 10 to 12, the ones step 9d comes before: a
/// parse that fails with one of them passed steps 1 to 9, so its ranges
/// are well formed and step 9d can still run.
const fn after_step9(rule: Rule) -> bool {
    Step::Directory(9, b'd').precedes(rule.step())
}

/// The payload ranges step 9d hashes, from raw descriptors (steps 1 to 9
/// hold): `(tensor index, payload-relative start, length)` in descriptor
/// order, ending before the first tensor whose offset is not the greedy one.
fn canonical_ranges(descriptors: &[u8], count: usize) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
    let mut running = 0u64;
    (0..count).map_while(move |i| {
        let (off, len) = kiln_nostd::digest::run_entry(descriptors, i, running)?;
        running = off.checked_add(len)?;
        Some((i, off, len))
    })
}

/// Step 9d over a whole block in memory: the first tensor (in descriptor
/// order, over the canonical run) whose payload does not match `table`, as
/// a DIGEST error at its first payload byte (absolute: `payload_start` is
/// where the payload region starts in the caller's buffer).
fn first_mismatch(
    descriptors: &[u8],
    count: usize,
    payload: &[u8],
    payload_start: usize,
    table: &Digests<'_>,
) -> Option<kiln_nostd::Error> {
    for (i, off, len) in canonical_ranges(descriptors, count) {
        let bytes = usize_from(off).zip(usize_from(len)).and_then(|(o, l)| payload.get(o..o.checked_add(l)?));
        // Steps 1 to 9 put every range inside the payload: `None` cannot happen.
        let ok = bytes.zip(table.get(i)).is_some_and(|(b, d)| kiln_nostd::digest::sha256(b) == *d);
        if !ok {
            return Some(kiln_nostd::Error::at(Rule::PayloadDigest, u64_from(payload_start).saturating_add(off)));
        }
    }
    None
}

/// The whole-buffer verdict on the block at `block_at` in `buf` (a
/// `tensors` field: bytes after it are the caller's, as for
/// [`Parser::parse_at`](kiln_nostd::Parser::parse_at)) with step 9d against
/// `table`: the oracle the streaming readers ([`Incremental::digests`],
/// `source::Options::digests`) agree with in every chunking.
///
/// - A fault of steps 1 to 3 (header, caps): that fault.
/// - Step 3d: a table that does not hold one digest per tensor is
///   [`Rule::DigestTableCount`](kiln_nostd::Rule::DigestTableCount) at `block_at`. A model-file reader checks
///   this itself, at the table's length word, before the block is parsed
///   (`spec/model-file.md`); here it only keeps a caller's mistake from
///   passing as a DIGEST fault.
/// - Any other fault of steps 4 to 9 (including truncation): that fault.
/// - Otherwise (the block is valid, or fails one of steps 10 and 11):
///   the first tensor of the canonical run whose payload does not match
///   its digest, [`Rule::PayloadDigest`](kiln_nostd::Rule::PayloadDigest) at its first payload byte
///   (absolute in `buf`); with none, `Parser`'s verdict.
///
/// A standalone block adds step 12 after all of these: bytes in `buf` past
/// [`Directory::end`](kiln_nostd::Directory::end) are TRAILING (at that end)
/// when this returns `Ok`.
///
/// [`Incremental::digests`]: kiln_nostd::Incremental::digests
pub fn check_block_digests<'a>(
    buf: &'a [u8],
    block_at: usize,
    parser: kiln_nostd::Parser<'_>,
    table: &Digests<'_>,
) -> kiln_nostd::error::Result<kiln_nostd::Directory<'a>> {
    check_block_with(buf, block_at, parser, table, |_| Ok::<(), kiln_nostd::Error>(()))
}

/// [`check_block_digests`] with a step between step 9 and step 9d:
/// `before_9d` gets the absolute offset where the payload region starts
/// (a signed model's step 9s checks its signature over the bytes before it,
/// and reports it in its own error type `E`).
pub(crate) fn check_block_with<'a, E: From<kiln_nostd::Error>>(
    buf: &'a [u8],
    block_at: usize,
    parser: kiln_nostd::Parser<'_>,
    table: &Digests<'_>,
    before_9d: impl FnOnce(usize) -> Result<(), E>,
) -> Result<kiln_nostd::Directory<'a>, E> {
    use kiln_nostd::wire::header::{Header, HEADER_LEN};
    let verdict = parser.parse_at(buf, block_at);
    if let Err(e) = verdict {
        if before_step3d(e.rule()) {
            return Err(e.into());
        }
    }
    let block = buf.get(block_at..).unwrap_or(&[]);
    // Steps 1 and 2 passed, so the header parses; should it not, the parse's verdict stands.
    let Ok(header) = Header::parse(block) else { return verdict.map_err(E::from) };
    if !kiln_nostd::digest::table_fits(table.as_bytes(), header.tensor_count) {
        return Err(kiln_nostd::Error::new(Rule::DigestTableCount, block_at).into());
    }
    match verdict {
        Err(e) if !after_step9(e.rule()) => return Err(e.into()),
        _ => {}
    }
    // Steps 1 to 9 hold: the prefix and every range of the run are in `block`.
    let base = kiln_nostd::wire::layout::payload_base(header.tensor_count, header.name_bytes).and_then(usize_from);
    let payload = base.and_then(|b| block.get(b..)).unwrap_or(&[]);
    let descriptors = block.get(HEADER_LEN..).unwrap_or(&[]);
    let count = kiln_nostd::bytes::usize_from_u32(header.tensor_count);
    let at = block_at.saturating_add(base.unwrap_or(0));
    before_9d(at)?;
    match first_mismatch(descriptors, count, payload, at, table) {
        Some(e) => Err(e.into()),
        None => verdict.map_err(E::from),
    }
}

/// True for the rules of steps 1 to 3, the ones step 3d comes after.
const fn before_step3d(rule: Rule) -> bool {
    rule.step().precedes(Step::Directory(3, b'd'))
}
