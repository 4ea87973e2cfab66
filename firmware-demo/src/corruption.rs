//! Corrupted copies of the model (one byte changed, or the length) are
//! rejected with the spec's code, at the expected byte, by the rule expected,
//! with and without the name-index scratch.

use cortex_m_semihosting::hprintln;
use kiln_nostd::wire::header::{DESCRIPTOR_LEN, HEADER_LEN};
use kiln_nostd::{Directory, Error, ErrorCode, Parser, Rule};

use crate::checks::Checks;
use crate::SCRATCH_SLOTS;

// Descriptor field offsets (spec §8 table).
const AT_DTYPE: usize = 0;
const AT_RESERVED: usize = 3;
const AT_GROUP_SIZE: usize = 20;
const AT_SCALE_INDEX: usize = 24;

struct Case {
    what: &'static str,
    /// Byte to overwrite (`None`: length change only).
    at: Option<usize>,
    value: u8,
    /// Buffer length (0: case not applicable to this model).
    len: usize,
    code: ErrorCode,
    rule: Rule,
    offset: usize,
}

pub fn corruption_tests(dir: &Directory<'_>, model: &[u8], ram: &mut [u8], chk: &mut Checks) {
    let len = model.len();
    // Positions from the directory: descriptor i starts at 64 + 128 i, the
    // name heap right after the last descriptor.
    let desc = |i: usize, field: usize| HEADER_LEN + DESCRIPTOR_LEN * i + field;
    let heap = HEADER_LEN + DESCRIPTOR_LEN * dir.len();
    let first_name = dir.get(0).map(|t| heap + usize::from(t.descriptor().name_off));
    let quantized = dir.iter().find(|t| t.quant().is_some());
    let mut cases = [
        Case {
            what: "magic byte",
            at: Some(0),
            value: b'X',
            len,
            code: ErrorCode::Frame,
            rule: Rule::DirectoryMagic,
            offset: 0,
        },
        Case {
            what: "version byte",
            at: Some(4),
            value: 3,
            len,
            code: ErrorCode::Frame,
            rule: Rule::DirectoryVersion,
            offset: 4,
        },
        Case {
            what: "descriptor 0, reserved byte 3",
            at: Some(desc(0, AT_RESERVED)),
            value: 1,
            len,
            code: ErrorCode::Frame,
            rule: Rule::DescriptorReserved,
            offset: desc(0, AT_RESERVED),
        },
        Case {
            what: "descriptor 0, dtype code -> 20 (reserved)",
            at: Some(desc(0, AT_DTYPE)),
            value: 20,
            len,
            code: ErrorCode::Type,
            rule: Rule::UnknownDtype,
            offset: desc(0, AT_DTYPE),
        },
        Case {
            what: "first name byte -> 0xFF",
            at: None,
            value: 0xFF,
            len: 0,
            code: ErrorCode::Utf8,
            rule: Rule::NameUtf8,
            offset: 0,
        },
        Case {
            what: "MXFP4 group_size halved",
            at: None,
            value: 0,
            len: 0,
            code: ErrorCode::Type,
            rule: Rule::ScaleCount,
            offset: 0,
        },
        Case {
            what: "last byte cut off",
            at: None,
            value: 0,
            len: len - 1,
            code: ErrorCode::Eof,
            rule: Rule::BlockTruncated,
            offset: len - 1,
        },
        Case {
            what: "one trailing byte",
            at: None,
            value: 0,
            len: len + 1,
            code: ErrorCode::Trailing,
            rule: Rule::TrailingBytes,
            offset: len,
        },
        Case {
            what: "first payload gap byte -> 0x5A",
            at: None,
            value: 0x5A,
            len: 0,
            code: ErrorCode::Type,
            rule: Rule::NonzeroGap,
            offset: 0,
        },
    ];
    if let Some(at) = first_name {
        let c = &mut cases[4];
        (c.at, c.len, c.offset) = (Some(at), len, at);
    }
    // The quantized tensor's group_size (u32, < 256 here) halved: the scale
    // tensor no longer holds one element per group (reported at scale_index).
    if let Some(q) = quantized.filter(|t| (2..256).contains(&t.descriptor().group_size)) {
        let c = &mut cases[5];
        let at = desc(q.index(), AT_GROUP_SIZE);
        (c.at, c.value, c.len, c.offset) =
            (Some(at), (q.descriptor().group_size / 2) as u8, len, desc(q.index(), AT_SCALE_INDEX));
    }
    if let Some(gap) = first_gap(dir) {
        let c = &mut cases[8];
        (c.at, c.len, c.offset) = (Some(gap), len, gap);
    }
    for c in cases.iter() {
        if c.len == 0 {
            hprintln!("  {}: not applicable to this model", c.what);
            continue;
        }
        ram[..len].copy_from_slice(model);
        ram[len..].fill(0);
        let mut change = [0u8; 2];
        if let Some(at) = c.at {
            change = [ram[at], c.value];
            ram[at] = c.value;
        }
        let buf = &ram[..c.len];
        let mut scratch = [0u32; SCRATCH_SLOTS];
        let with_scratch = Parser::new().scratch(&mut scratch).parse(buf).map(|d| d.len());
        let without = Directory::parse(buf).map(|d| d.len());
        match c.at {
            Some(at) => hprintln!("  {} (byte {}: {:#04x} -> {:#04x}):", c.what, at, change[0], change[1]),
            None => hprintln!("  {} ({} bytes):", c.what, c.len),
        }
        let expected = Error::new(c.rule, c.offset);
        match with_scratch {
            Err(e) => hprintln!(
                "    rejected {} at byte {} ({}){}",
                e.code().as_str(),
                e.offset(),
                e.rule().id(),
                if e == expected { ", as expected" } else { "" }
            ),
            Ok(n) => hprintln!("    ACCEPTED ({} tensors)", n),
        }
        if with_scratch != Err(expected) {
            hprintln!("    expected {} at byte {} ({})", c.code.as_str(), c.offset, c.rule.id());
        }
        chk.expect(c.rule.code() == c.code, "case table: rule and code agree");
        chk.expect(with_scratch == Err(expected), c.what);
        chk.expect(without == with_scratch, "parse with and without scratch agree");
    }
}

/// Absolute offset of the first padding byte between two payloads, if any.
pub fn first_gap(dir: &Directory<'_>) -> Option<usize> {
    let mut prev_end = None;
    for t in dir.iter() {
        if let Some(end) = prev_end {
            if t.absolute_offset() > end {
                return Some(end);
            }
        }
        prev_end = Some(t.absolute_offset() + t.byte_len());
    }
    None
}

/// The flashed model file with one payload byte flipped (in fc1.weight, a
/// tensor of many chunks), read through the boot check: refused with
/// DIGEST at the tensor's first payload byte, while every structural rule
/// holds (the check without hashing accepts it).
#[cfg(feature = "digests")]
pub fn digest_corruption(file: &'static [u8], prefix: &mut [u8], chk: &mut Checks) {
    use crate::boot::{verify, Flipped};
    let Some(t) = kiln_model::Model::parse(file).ok().and_then(|m| m.directory().find("fc1.weight")) else {
        chk.expect(false, "the model file holds fc1.weight");
        return;
    };
    let start = t.absolute_offset();
    let at = start + t.byte_len() / 2 + 3;
    let flipped = || Flipped { bytes: file, at: at as u64, mask: 0x10 };
    hprintln!("  model file, fc1.weight payload byte {} flipped (bit 4), at boot:", at);
    match verify(&mut flipped(), prefix, true) {
        Err(Some(e)) => {
            hprintln!(
                "    corrupted model file refused at boot: {} at {} ({})",
                e.code().as_str(),
                e.offset(),
                e.rule().id()
            );
            chk.expect(
                e.code() == ErrorCode::Digest && e.offset() == start && e.rule() == Rule::PayloadDigest,
                "a flipped payload byte is DIGEST at its tensor's first payload byte",
            );
        }
        Err(None) => {
            chk.expect(false, "the flipped model file is refused by a format rule");
        }
        Ok(_) => {
            hprintln!("    ACCEPTED");
            chk.expect(false, "the flipped model file is refused at boot");
        }
    }
    let skipped = verify(&mut flipped(), prefix, false);
    hprintln!("    without hashing: {}", if skipped.is_ok() { "accepted (every other rule holds)" } else { "refused" });
    chk.expect(skipped.is_ok(), "without hashing the flipped file passes every other rule");
}
