//! Over-the-air update: a new model arrives in 256-byte packets, is checked
//! by `kiln_nostd::Incremental` while it is written into the inactive slot,
//! and becomes the running model only when the validator accepts it.
//!
//! Slot A is the factory image in flash (`MODEL`), the running model at
//! boot. Slot B stands in for a second flash slot: a RAM array (QEMU's
//! LM3S6965 flash is not writable from the demo), erased to 0xFF before an
//! update and programmed packet by packet, each packet after the validator
//! took it. The update (`digits-mlp-ota.kiln`, made by build.rs) is the
//! example model plus a ninth tensor, `samples.correct` (bool `[32]`),
//! which the canonical layout places last. Three corrupted copies are
//! streamed first, each made at run time by changing one byte of one
//! packet as it passes; then the intact update.

use cortex_m_semihosting::hprintln;
use kiln_nostd::incremental::Borrowed;
use kiln_nostd::wire::header::HEADER_LEN;

use crate::checks::Checks;
use crate::corruption::first_gap;
use crate::model::{evaluate, load, Fc1, Pool};
use crate::stack::{measure_stack, stack_budget};
use crate::{Aligned, EXPECT_F32_CORRECT, SCRATCH_SLOTS};
use kiln_nostd::{
    incremental::{Progress, Summary},
    wire::layout,
    DType, Directory, Error, Incremental, Limits, Parser, Rule,
};

/// Packet size of the link.
pub const PACKET: usize = 256;

const UPDATE_LEN: usize = include_bytes!(concat!(env!("OUT_DIR"), "/digits-mlp-ota.kiln")).len();
/// The update as the server holds it (in flash here, so the demo can send it).
static UPDATE: Aligned<[u8; UPDATE_LEN]> = Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/digits-mlp-ota.kiln")));

/// Slot size: the update rounded up to the LM3S6965's 1 KiB flash page.
pub const SLOT_LEN: usize = UPDATE_LEN.next_multiple_of(1024);

/// Prefix memory for the validator (header, descriptors, name heap): up to
/// 14 tensors with short names. The update needs `Incremental::prefix_len`.
const PREFIX_CAP: usize = 2048;

/// The bool tensor build.rs appends.
const FLAGS: &str = "samples.correct";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SlotId {
    A,
    B,
}

/// Two model slots and which one runs.
struct Slots<'a> {
    /// The factory image, in flash (read-only).
    a: &'a [u8],
    /// The update slot (RAM standing in for flash), 64-byte aligned.
    b: &'a mut [u8],
    /// Length of the image in B once activated.
    b_len: usize,
    active: SlotId,
}

impl Slots<'_> {
    fn active(&self) -> &[u8] {
        match self.active {
            SlotId::A => self.a,
            SlotId::B => self.b.get(..self.b_len).unwrap_or(&[]),
        }
    }

    fn erase_b(&mut self) {
        self.b.fill(0xFF);
        self.b_len = 0;
    }

    /// Programs `bytes` at `at`; false when they do not fit the slot.
    fn program_b(&mut self, at: usize, bytes: &[u8]) -> bool {
        match self.b.get_mut(at..at + bytes.len()) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }

    fn activate_b(&mut self, len: usize) {
        self.b_len = len;
        self.active = SlotId::B;
    }
}

/// One update to stream: the intact model, or with one byte changed.
struct Case {
    what: &'static str,
    /// (byte, new value), and the expected verdict and the packet (1-based) that must bring it.
    corrupt: Option<(usize, u8, Error, usize)>,
}

/// How an update ended.
enum Outcome {
    Accepted(Summary),
    /// Rejected by the validator at this packet (1-based).
    Rejected(usize, Error),
    /// The header (complete at this packet) announces a block larger than slot B.
    TooLarge(usize),
}

/// Deepest stack the validator used, and in which call.
#[derive(Default)]
struct StackUse {
    feed: usize,
    feed_packet: usize,
    finish: usize,
}

/// Streams `source` to slot B in packets, changing one byte on the way.
fn stream(slots: &mut Slots<'_>, source: &[u8], corrupt: Option<(usize, u8)>, stack: &mut StackUse) -> Outcome {
    let mut prefix = [0u8; PREFIX_CAP];
    let mut scratch = [0u32; SCRATCH_SLOTS];
    let mut v = Incremental::new(&mut prefix).scratch(&mut scratch);
    let mut sized = false;
    slots.erase_b();
    for (k, chunk) in source.chunks(PACKET).enumerate() {
        let packet_no = k + 1;
        let at = k * PACKET;
        let mut buf = [0u8; PACKET];
        let packet = &mut buf[..chunk.len()];
        packet.copy_from_slice(chunk);
        if let Some((pos, value)) = corrupt {
            if let Some(b) = pos.checked_sub(at).and_then(|i| packet.get_mut(i)) {
                *b = value;
            }
        }
        let packet: &[u8] = packet;
        let (r, used) = measure_stack(|| v.feed(packet));
        if used > stack.feed {
            (stack.feed, stack.feed_packet) = (used, packet_no);
        }
        match r {
            Err(e) => return Outcome::Rejected(packet_no, e),
            Ok(Progress::Directory) => {
                if let Some((dir, last)) = v.directory().and_then(|d| Some((d, d.get(d.len().checked_sub(1)?)?))) {
                    hprintln!(
                        "    directory checked after packet {} ({} tensors, last {} {} {:?}), before any payload byte",
                        packet_no,
                        dir.len(),
                        last.name().unwrap_or("?"),
                        last.dtype().name(),
                        last.shape()
                    );
                }
            }
            Ok(_) => {}
        }
        // Once the header is in: refuse a block that cannot fit the slot, before writing past it.
        if let (false, Some(h)) = (sized, v.header()) {
            sized = true;
            let len = layout::payload_base(h.tensor_count, h.name_bytes).and_then(|b| b.checked_add(h.payload_bytes));
            if len.is_none_or(|l| l > slots.b.len() as u64) {
                return Outcome::TooLarge(packet_no);
            }
        }
        if !slots.program_b(at, packet) {
            return Outcome::TooLarge(packet_no);
        }
    }
    let (r, used) = measure_stack(move || v.finish());
    stack.finish = stack.finish.max(used);
    match r {
        Ok(summary) => Outcome::Accepted(summary),
        // The stream ended: the verdict belongs to the last packet.
        Err(e) => Outcome::Rejected(source.len().div_ceil(PACKET), e),
    }
}

/// Parses the running slot, runs the 32 samples and prints the accuracy;
/// for slot B also compares with its `samples.correct` flags.
fn check_running(slots: &Slots<'_>, chk: &mut Checks) {
    let image = slots.active();
    let mut scratch = [0u32; SCRATCH_SLOTS];
    let (dir, index) = match Parser::new().scratch(&mut scratch).parse_indexed(image) {
        Ok(p) => p,
        Err(e) => {
            hprintln!("    running model in slot {:?} REJECTED: {}", slots.active, e);
            chk.expect(false, "the running slot parses");
            return;
        }
    };
    let mut pool = Pool(&mut []);
    let m = match load(&index, &mut pool, false) {
        Ok(m) => m,
        Err(e) => {
            chk.expect(false, e);
            return;
        }
    };
    let r = evaluate(&m, &Fc1::F32(m.net.w1), false);
    let flags = index.get(FLAGS).and_then(|t| t.as_slice::<u8>());
    let agree =
        flags.map(|f| r.preds().iter().zip(m.labels).zip(f).filter(|((p, l), &ok)| (p == l) == (ok == 1)).count());
    hprintln!(
        "    running model: slot {:?} ({}), {} tensors, accuracy {}/{}{}",
        slots.active,
        if slots.active == SlotId::A { "flash" } else { "RAM" },
        dir.len(),
        r.correct,
        r.n,
        if agree.is_some() { "; per-sample results match samples.correct" } else { "" }
    );
    chk.expect(m.all_in_place, "the running model is read in place from its slot");
    chk.expect(r.correct == EXPECT_F32_CORRECT && r.n == EXPECT_F32_CORRECT, "the running model predicts 32/32");
    if let Some(a) = agree {
        chk.expect(a == r.n, "predictions agree with samples.correct");
    }
}

pub fn run(model: &'static [u8], slot_b: &mut [u8], chk: &mut Checks) {
    let update: &[u8] = &UPDATE.0;
    let n = update.len().div_ceil(PACKET);
    let Some(slot_b) = slot_b.get_mut(..SLOT_LEN) else {
        chk.expect(false, "slot B is SLOT_LEN bytes");
        return;
    };
    let mut slots = Slots { a: model, b: slot_b, b_len: 0, active: SlotId::A };
    let dir = match Directory::parse(update) {
        Ok(d) => d,
        Err(e) => {
            hprintln!("  update REJECTED by Parser: {}", e);
            chk.expect(false, "the update is valid");
            return;
        }
    };
    let prefix = Incremental::prefix_len(update.get(..HEADER_LEN).unwrap_or(&[]), &Limits::DEFAULT).ok().flatten();
    let prefix = prefix.unwrap_or(0);
    let packet_of = |byte: usize| byte / PACKET + 1;
    hprintln!(
        "over-the-air update: {} bytes ({} tensors) in {} packets of {} into slot B ({} bytes of RAM at {:#010x})",
        update.len(),
        dir.len(),
        n,
        PACKET,
        SLOT_LEN,
        slots.b.as_ptr() as usize
    );
    hprintln!(
        "  Incremental: {} bytes of state; prefix {} bytes (Incremental::prefix_len; buffer {}), name scratch {} slots",
        core::mem::size_of::<Incremental<Borrowed<'static, 'static>>>(),
        prefix,
        PREFIX_CAP,
        SCRATCH_SLOTS
    );
    chk.expect(prefix > 0 && prefix <= PREFIX_CAP, "the update's prefix fits the prefix buffer");
    hprintln!("  before the update:");
    check_running(&slots, chk);

    // Where each fault goes and where it must be found, from the update's directory.
    let dtype_at = HEADER_LEN; // descriptor 0, dtype field (u16 at +0)
    let gap = first_gap(&dir).unwrap_or(0);
    let flags = dir.find(FLAGS);
    let bool_at = flags.map_or(0, |t| t.absolute_offset().max((n - 1) * PACKET));
    chk.expect(packet_of(dtype_at) == 1, "(a) the bad descriptor is in the first packet");
    chk.expect(gap > 0 && packet_of(gap) > 1 && packet_of(gap) < n, "(b) the gap byte is in a middle packet");
    chk.expect(
        flags.is_some_and(|t| t.dtype() == DType::Bool && bool_at < t.absolute_offset() + t.byte_len())
            && packet_of(bool_at) == n,
        "(c) a bool byte of samples.correct is in the last packet",
    );
    let cases = [
        Case {
            what: "(a) descriptor 0 dtype -> 20 (reserved code)",
            // Certain once the whole prefix (descriptors, heap, padding) is in.
            corrupt: Some((dtype_at, 20, Error::new(Rule::UnknownDtype, dtype_at), prefix.div_ceil(PACKET))),
        },
        Case {
            what: "(b) first payload gap byte -> 0x5A",
            corrupt: Some((gap, 0x5A, Error::new(Rule::NonzeroGap, gap), packet_of(gap))),
        },
        Case {
            what: "(c) a samples.correct byte -> 2",
            // Step 11 (bool bytes) comes after every gap (step 10); the bool
            // tensor is last, so no gap follows: certain when the byte arrives.
            corrupt: Some((bool_at, 2, Error::new(Rule::BoolByte, bool_at), packet_of(bool_at))),
        },
        Case { what: "(d) intact", corrupt: None },
    ];

    let mut stack = StackUse::default();
    for c in cases.iter() {
        let change = c.corrupt.map(|(at, value, _, _)| (at, value));
        match change {
            Some((at, value)) => hprintln!(
                "  update {} (byte {}: {:#04x} -> {:#04x}, packet {} of {}):",
                c.what,
                at,
                update.get(at).copied().unwrap_or(0),
                value,
                packet_of(at),
                n
            ),
            None => hprintln!("  update {}:", c.what),
        }
        let outcome = stream(&mut slots, update, change, &mut stack);
        match (outcome, c.corrupt) {
            (Outcome::Rejected(k, e), Some((at, value, want, want_k))) => {
                hprintln!(
                    "    rejected at packet {} of {}, expected {}: {} at byte {} ({}){}",
                    k,
                    n,
                    want_k,
                    e.code().as_str(),
                    e.offset(),
                    e.rule().id(),
                    if e == want { ", as expected" } else { "" }
                );
                if e != want {
                    hprintln!("    expected {} at byte {} ({})", want.code().as_str(), want.offset(), want.rule().id());
                }
                chk.expect(k == want_k, c.what);
                chk.expect(e == want, c.what);
                // The error was certain: Parser gives it on the whole corrupted image.
                slots.erase_b();
                let whole = slots.b.get_mut(..update.len()).unwrap_or(&mut []);
                whole.copy_from_slice(update);
                if let Some(b) = whole.get_mut(at) {
                    *b = value;
                }
                let parser = Parser::new().parse(whole).map(|d| d.len());
                chk.expect(parser == Err(e), "Parser agrees on the whole corrupted image");
                slots.erase_b();
                hprintln!(
                    "    Parser on the whole image: {}; slot B erased, not activated",
                    if parser == Err(e) { "the same error" } else { "DIFFERENT" }
                );
            }
            (Outcome::Accepted(s), None) => {
                let ok = usize::try_from(s.block_len) == Ok(update.len());
                hprintln!(
                    "    accepted after packet {} of {}: block {} bytes, payload at +{}; slot B activated",
                    n,
                    n,
                    s.block_len,
                    s.payload_base
                );
                chk.expect(ok, "the accepted block is the whole update");
                chk.expect(slots.b.get(..update.len()) == Some(update), "slot B holds the update");
                if ok {
                    slots.activate_b(update.len());
                }
            }
            (Outcome::Accepted(_), Some(_)) => {
                hprintln!("    ACCEPTED");
                chk.expect(false, c.what);
            }
            (Outcome::Rejected(k, e), None) => {
                hprintln!("    REJECTED at packet {}: {}", k, e);
                chk.expect(false, c.what);
            }
            (Outcome::TooLarge(k), _) => {
                hprintln!("    refused at packet {}: the block does not fit slot B", k);
                chk.expect(false, c.what);
            }
        }
        check_running(&slots, chk);
        chk.expect(slots.active == if c.corrupt.is_some() { SlotId::A } else { SlotId::B }, "the right slot runs");
    }
    hprintln!(
        "  stack used by Incremental::feed: {} bytes (deepest at packet {}), finish: {} bytes",
        stack.feed,
        stack.feed_packet,
        stack.finish
    );
    let budget = stack_budget();
    chk.expect(stack.feed.max(stack.finish) <= budget, "Incremental stack within the budget (KILN_STACK_BUDGET)");
}
