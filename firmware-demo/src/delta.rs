//! Step 9's delta update (feature `delta`): NEW, the model with only `fc2`
//! retrained (made by build.rs, signed as version `NEW_VERSION`), sent to a
//! device that runs the signed update (slot B) as a delta
//! (`kiln_model::delta`, spec/model-file.md "Delta updates"): a small head
//! (the base's id and one reuse entry per tensor of NEW), NEW's bytes up to
//! its payload region, then only the payloads slot B lacks.
//!
//! The device rebuilds NEW in the inactive slot (C), and every byte it
//! writes goes through the same `UpdateCheck` a full update does:
//!
//! 1. the delta head, as its packets arrive: its base id must be the
//!    running model's (`base_id`: SHA-256 of its bytes before the payloads);
//! 2. NEW's signed fields and directory prefix, from the delta: the key,
//!    release and signature checks of a full update;
//! 3. then `Plan`'s pieces in order: zeros, a tensor copied from slot B,
//!    or bytes of the delta as they come; the check hashes each tensor as
//!    it passes and checks the structure, `finish` the whole.
//!
//! Slot C is activated only when the check accepted NEW; the rebuilt
//! slot's SHA-256 is compared with NEW's, computed by build.rs.

use cortex_m_semihosting::hprintln;
use kiln_model::delta::{base_id, DeltaHead, Piece, Plan};
use kiln_nostd::digest::{sha256, TensorHasher};
use kiln_model::{Model, Trust};
use kiln_model::update::{UpdateCheck, UpdateSummary};
use kiln_model::{Error, Rule};
use kiln_nostd::{
    wire::{layout, Header},
    ErrorCode, Rule as CoreRule,
};

use crate::checks::Checks;
use crate::ota::PACKET;
use crate::signed::{
    check_running, signature_packet, Programmer, Running, SlotId, StackUse, CHECK_BUF, NEW_LEN, NEW_SHA256,
    NEW_VERSION, STACK_PAYLOAD_MAX, STACK_SIGNATURE_MAX,
};
use crate::stack::measure_stack;
use crate::ticks::Ticks;
use crate::SCRATCH_SLOTS;

const DELTA_LEN: usize = include_bytes!(concat!(env!("OUT_DIR"), "/digits-mlp-v4.delta")).len();
/// The delta as the server holds it.
static DELTA: [u8; DELTA_LEN] = *include_bytes!(concat!(env!("OUT_DIR"), "/digits-mlp-v4.delta"));

/// The delta head's buffer: frame, base id, one reuse entry per tensor (88 bytes for 8 tensors).
const HEAD_CAP: usize = 512;
/// The plan's pieces: a gap and a payload per tensor, and the tail (32 tensors).
const MAX_PIECES: usize = 2 * 32 + 1;
/// Bytes fed before NEW's block start is known: fewer than one descriptor,
/// so the check never takes a byte past NEW's prefix from the delta.
const STEP: usize = 64;
static ZEROS: [u8; STEP] = [0; STEP];

/// How a delta ended.
enum Outcome<'a> {
    Accepted {
        summary: UpdateSummary,
        image: &'a [u8],
        counts: Counts,
    },
    /// Refused at this packet of the delta; `of_delta`: the offset is in the
    /// delta (its head), else in the rebuilt model.
    Rejected {
        packet: usize,
        error: Error,
        of_delta: bool,
    },
    NoRoom {
        packet: usize,
    },
}

/// What the rebuild took from where.
#[derive(Default, Clone, Copy)]
struct Counts {
    head: usize,
    prefix: u64,
    copied: u64,
    sent: u64,
    zeros: u64,
    pieces: usize,
}

/// Why feeding the rebuilt bytes stopped.
enum Stop {
    Check(Error),
    NoRoom,
}

/// The rebuilt model's bytes go to the check, then to the slot.
struct Builder<'a, 'm, 's, 'k, 'u> {
    check: UpdateCheck<'m, 's, 'k>,
    prog: Programmer<'a>,
    /// Bytes of NEW rebuilt.
    pos: u64,
    /// The packet being handled (for the stack record).
    packet: usize,
    stack: Option<&'u mut StackUse>,
}

impl Builder<'_, '_, '_, '_, '_> {
    fn emit(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        let check = &mut self.check;
        let r = match self.stack.as_deref_mut() {
            Some(stack) => {
                let (r, used) = measure_stack(|| check.feed(bytes));
                stack.feed(used, self.packet, signature_packet(&r));
                r
            }
            None => check.feed(bytes),
        };
        r.map_err(Stop::Check)?;
        if !self.prog.program(bytes, self.check.block_start()) {
            return Err(Stop::NoRoom);
        }
        self.pos += bytes.len() as u64;
        Ok(())
    }

    /// `n` bytes of `piece` source, `at` a time (zeros or a copy).
    fn emit_all(&mut self, bytes: &[u8], step: usize) -> Result<(), Stop> {
        for c in bytes.chunks(step) {
            self.emit(c)?;
        }
        Ok(())
    }
}

/// Receives `delta` (with `runs` written over it) in packets and rebuilds
/// NEW from it and `base` (the running model) in `slot`, through the check.
fn receive<'a>(
    delta: &[u8],
    runs: &[(usize, u8)],
    base: &[u8],
    slot: &'a mut [u8],
    trust: Trust<'_>,
    stack: Option<&mut StackUse>,
) -> Outcome<'a> {
    let verbose = stack.is_some();
    let Ok(base_model) = Model::parse(base) else {
        return Outcome::Rejected { packet: 0, error: Error::new(Rule::NotSigned, 0), of_delta: false };
    };
    let base_dir = base_model.directory();
    let id = base_id(base, base_model.payload_start());

    let mut head = [0u8; HEAD_CAP];
    let mut have = 0usize;
    let mut head_len: Option<usize> = None;
    let mut buf = [0u8; CHECK_BUF];
    let mut hasher = TensorHasher::new();
    let mut scratch = [0u32; SCRATCH_SLOTS];
    let check = UpdateCheck::new(trust, &mut buf, &mut hasher).scratch(&mut scratch);
    let mut b = Builder { check, prog: Programmer::erase(slot), pos: 0, packet: 0, stack };
    let mut prefix_end: Option<u64> = None;
    let mut pieces = [Piece::Zeros(0); MAX_PIECES];
    let mut n_pieces: Option<usize> = None;
    let (mut next, mut into) = (0usize, 0u64);
    let mut counts = Counts::default();

    for (k, chunk) in delta.chunks(PACKET).enumerate() {
        let packet_no = k + 1;
        b.packet = packet_no;
        let mut pkt = [0u8; PACKET];
        let packet = &mut pkt[..chunk.len()];
        packet.copy_from_slice(chunk);
        for &(at, v) in runs {
            if let Some(p) = at.checked_sub(k * PACKET).and_then(|i| packet.get_mut(i)) {
                *p = v;
            }
        }
        let mut rest: &[u8] = packet;
        let reject = |error: Error, of_delta: bool| Outcome::Rejected { packet: packet_no, error, of_delta };
        let stop = |s: Stop| match s {
            Stop::Check(error) => Outcome::Rejected { packet: packet_no, error, of_delta: false },
            Stop::NoRoom => Outcome::NoRoom { packet: packet_no },
        };

        // 1. The delta head, until it parses; its base must be the running model.
        if head_len.is_none() {
            let n = rest.len().min(HEAD_CAP - have);
            head[have..have + n].copy_from_slice(&rest[..n]);
            have += n;
            match DeltaHead::parse(&head[..have]) {
                Ok(h) => {
                    if let Err(e) = h.check_base(&id) {
                        return reject(e, true);
                    }
                    rest = &rest[n - (have - h.len())..];
                    head_len = Some(h.len());
                    counts.head = h.len();
                    if verbose {
                        let sent = (0..h.count()).filter(|&j| h.reuse(j) == Some(0)).count();
                        hprintln!(
                            "    delta head checked after packet {}: {} bytes, base id = the running model's, {} tensors ({} sent, {} from slot B)",
                            packet_no,
                            h.len(),
                            h.count(),
                            sent,
                            h.count() - sent
                        );
                    }
                }
                Err(e) if e.code() == ErrorCode::Eof && have < HEAD_CAP => continue,
                Err(e) => return reject(e, true),
            }
        }

        // 2. NEW's signed fields and block prefix, from the delta.
        while n_pieces.is_none() && !rest.is_empty() {
            let room = prefix_end.map_or(STEP as u64, |end| end - b.pos);
            let n = rest.len().min(room as usize);
            if let Err(s) = b.emit(&rest[..n]) {
                return stop(s);
            }
            rest = &rest[n..];
            counts.prefix += n as u64;
            if let (None, Some(bs)) = (prefix_end, b.check.block_start()) {
                // The block's header is in (the check has it): where its payloads start.
                let bs = bs as usize;
                let h = b.prog.image().get(bs..bs + kiln_nostd::wire::header::HEADER_LEN).map(Header::parse);
                let base = match h {
                    Some(Ok(h)) => layout::payload_base(h.tensor_count, h.name_bytes),
                    Some(Err(e)) => return reject(e.into(), false),
                    None => None,
                };
                let Some(base) = base else { return reject(Error::new(CoreRule::PayloadSizeOverflow, bs + 16), false) };
                prefix_end = Some(bs as u64 + base);
            }
            if prefix_end == Some(b.pos) {
                // NEW's directory is in and signed: the plan of the rest.
                let Some(dir) = b.check.directory() else {
                    return reject(Error::new(Rule::SignatureInvalid, kiln_model::signed::SIG_AT), false);
                };
                let Some(Ok(h)) = head_len.map(|n| DeltaHead::parse(&head[..n])) else {
                    return reject(Error::new(Rule::DeltaReuseCount, 0), true);
                };
                let plan = match Plan::new(h, dir, base_dir) {
                    Ok(p) => p,
                    Err(e) => return reject(e, true),
                };
                let mut count = 0;
                for p in plan {
                    match (p, pieces.get_mut(count)) {
                        (Ok(p), Some(slot)) => *slot = p,
                        (Err(e), _) => return reject(e, true),
                        (Ok(_), None) => return reject(Error::new(Rule::DeltaReuseCount, 0), true),
                    }
                    count += 1;
                }
                n_pieces = Some(count);
                counts.pieces = count;
                if verbose {
                    hprintln!(
                        "    NEW's signed prefix rebuilt and its signature checked after packet {} ({} bytes); plan: {} pieces",
                        packet_no,
                        b.pos,
                        count
                    );
                }
            }
        }

        // 3. The pieces: zeros and copies from slot B as they come up, sent bytes from the packets.
        let Some(total) = n_pieces else { continue };
        while next < total {
            let r = match pieces[next] {
                Piece::Zeros(n) => {
                    counts.zeros += n;
                    (0..n.div_ceil(STEP as u64)).try_for_each(|i| {
                        let k = (n - i * STEP as u64).min(STEP as u64) as usize;
                        b.emit(&ZEROS[..k])
                    })
                }
                Piece::Base { at, len } => {
                    counts.copied += len;
                    match base.get(at as usize..(at + len) as usize) {
                        Some(src) => b.emit_all(src, PACKET),
                        None => return reject(Error::new(Rule::DeltaReuse, 0), true),
                    }
                }
                Piece::Sent(n) => {
                    let take = rest.len().min((n - into) as usize);
                    let r = b.emit(&rest[..take]);
                    rest = &rest[take..];
                    into += take as u64;
                    counts.sent += take as u64;
                    if into < n {
                        if let Err(s) = r {
                            return stop(s);
                        }
                        break;
                    }
                    into = 0;
                    r
                }
            };
            if let Err(s) = r {
                return stop(s);
            }
            next += 1;
        }
        if !rest.is_empty() {
            let at = k * PACKET + chunk.len() - rest.len();
            return reject(Error::new(CoreRule::TrailingBytes, at), true);
        }
    }
    // The delta has ended: the check's verdict on NEW (cut short: truncated).
    let last = delta.len().div_ceil(PACKET);
    let r = match b.stack {
        Some(stack) => {
            let check = b.check;
            let (r, used) = measure_stack(move || check.finish());
            stack.finish = stack.finish.max(used);
            r
        }
        None => b.check.finish(),
    };
    match r {
        Ok(summary) => Outcome::Accepted { summary, image: b.prog.into_image(), counts },
        Err(error) => Outcome::Rejected { packet: last, error, of_delta: false },
    }
}

fn print_rejection(packet: usize, n: usize, e: Error, of_delta: bool, expected: bool) {
    hprintln!(
        "    rejected at packet {} of {}: {} at byte {} of the {} ({}){}",
        packet,
        n,
        e.code().as_str(),
        e.offset(),
        if of_delta { "delta" } else { "rebuilt model" },
        e.rule().id(),
        if expected { ", as expected" } else { ", NOT AS EXPECTED" }
    );
}

/// The delta step: a delta for another base is refused, then the delta
/// for the running model (slot B) rebuilds NEW in slot C.
pub fn run(
    b_image: &[u8],
    factory: &[u8],
    slot_c: &mut [u8],
    trusted: Trust<'_>,
    running: &Running<'_>,
    ticks: &mut Ticks,
    chk: &mut Checks,
) {
    let n = DELTA_LEN.div_ceil(PACKET);
    hprintln!(
        "delta update to version {} (fc2 retrained): {} bytes in {} packets, against {} bytes for the full update",
        NEW_VERSION,
        DELTA_LEN,
        n,
        NEW_LEN
    );
    let trust = trusted.newer_than(running.version);

    // (h) The delta offered to a device that runs another model (the factory image).
    hprintln!("  delta (h) applied to the factory image (slot A) instead of the model it was made for:");
    match receive(&DELTA, &[], factory, slot_c, trust, None) {
        Outcome::Rejected { packet, error, of_delta } => {
            let want = Error::new(Rule::DeltaBase, kiln_nostd::frozen::FRAME_LEN + 4);
            let ok = packet == 1 && error == want && of_delta;
            print_rejection(packet, n, error, of_delta, ok);
            chk.expect(ok, "a delta for another base is refused at packet 1");
        }
        _ => {
            chk.expect(false, "a delta for another base is refused");
        }
    }
    check_running(running, "    ", chk);

    // (i) A delta whose sent fc2 bytes were damaged on the way: NEW's digest fails.
    let damaged = DELTA_LEN - 100;
    hprintln!("  delta (i) one sent byte changed (byte {} of the delta: fc2.weight):", damaged);
    match receive(&DELTA, &[(damaged, DELTA.get(damaged).map_or(0, |b| b ^ 0x40))], b_image, slot_c, trust, None) {
        Outcome::Rejected { packet, error, of_delta } => {
            // NEW has slot B's layout (only fc2's values changed): fc2.weight's first byte.
            let fc2 =
                Model::parse(b_image).ok().and_then(|m| m.directory().find("fc2.weight").map(|t| t.absolute_offset()));
            let ok = packet == n && Some(error) == fc2.map(|at| Error::new(CoreRule::PayloadDigest, at)) && !of_delta;
            print_rejection(packet, n, error, of_delta, ok);
            chk.expect(ok, "a damaged sent payload fails its digest");
        }
        _ => {
            chk.expect(false, "a damaged delta is refused");
        }
    }
    check_running(running, "    ", chk);

    // (j) The delta for the running model.
    hprintln!("  delta (j) for the running model (slot B, version {}):", running.version);
    let mut stack = StackUse::default();
    match receive(&DELTA, &[], b_image, slot_c, trust, Some(&mut stack)) {
        Outcome::Accepted { summary, counts: c, .. } => {
            hprintln!(
                "    accepted after packet {} of {}: version {}; slot C rebuilt from {} pieces: {} bytes of prefix and {} of payload from the delta, {} copied from slot B, {} zero",
                n,
                n,
                summary.version,
                c.pieces,
                c.prefix,
                c.sent,
                c.copied,
                c.zeros
            );
            chk.expect(c.head as u64 + c.prefix + c.sent == DELTA_LEN as u64, "every byte of the delta was used");
        }
        Outcome::Rejected { packet, error, of_delta } => {
            print_rejection(packet, n, error, of_delta, false);
            chk.expect(false, "the delta is accepted");
            return;
        }
        Outcome::NoRoom { packet } => {
            hprintln!("    refused at packet {}: does not fit slot C", packet);
            chk.expect(false, "NEW fits slot C");
            return;
        }
    }
    hprintln!(
        "    stack used by the delta's UpdateCheck::feed: {} bytes at packet {} (the signature check), {} bytes at most otherwise; finish: {} bytes",
        stack.sig,
        stack.sig_packet,
        stack.other,
        stack.finish
    );
    chk.expect(stack.other <= STACK_PAYLOAD_MAX, "the delta's stack for a piece within its ceiling");
    chk.expect(stack.sig <= STACK_SIGNATURE_MAX, "the delta's signature check within its ceiling");

    // Again, timed (no stack painting), and this rebuild is the one activated.
    let (r, i_delta) = ticks.instructions(|| receive(&DELTA, &[], b_image, slot_c, trust, None));
    let Outcome::Accepted { summary, image, .. } = r else {
        chk.expect(false, "the delta is accepted (timed)");
        return;
    };
    let digest = sha256(image);
    let same = image.len() == NEW_LEN && digest == NEW_SHA256;
    hprintln!(
        "    slot C: {} bytes, SHA-256 {:02x}{:02x}{:02x}{:02x}...: {} NEW's (build.rs); slot C activated",
        image.len(),
        digest[0],
        digest[1],
        digest[2],
        digest[3],
        if same { "byte for byte" } else { "DIFFERENT from" }
    );
    chk.expect(same, "the rebuilt slot equals NEW byte for byte");
    if !same {
        return;
    }
    check_running(&Running { slot: SlotId::C, image, version: summary.version }, "    ", chk);
    hprintln!(
        "  bytes sent: {} for the delta against {} for the full update ({}%); rebuilding and checking it: {} instructions (under QEMU -icount shift=0, not cycles)",
        DELTA_LEN,
        NEW_LEN,
        DELTA_LEN * 100 / NEW_LEN,
        i_delta
    );
}
