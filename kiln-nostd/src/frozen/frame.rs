//! The 16-byte frame: `KLN0`, profile 0 (Frozen), flags 0, reserved u16 0,
//! then the schema hash as a little-endian u64. One Frozen value follows.

use crate::bytes::{array, u64_at};
use crate::error::{fail, Result, Rule};

/// Frame magic.
pub const FRAME_MAGIC: [u8; 4] = *b"KLN0";
/// Frame length in bytes.
pub const FRAME_LEN: usize = 16;
/// The Frozen profile code.
pub const PROFILE_FROZEN: u8 = 0;

const AT_PROFILE: usize = 4;
const AT_FLAGS: usize = 5;
const AT_RESERVED: usize = 6;
const AT_HASH: usize = 8;

/// The frame bytes for a value whose type has schema hash `hash`.
///
/// ```
/// let f = kiln_nostd::frozen::frame_bytes(0xe58aadc7552f0d82);
/// assert_eq!(&f[..8], b"KLN0\0\0\0\0");
/// assert_eq!(f[8..], 0xe58aadc7552f0d82u64.to_le_bytes());
/// ```
pub const fn frame_bytes(hash: u64) -> [u8; FRAME_LEN] {
    let h = hash.to_le_bytes();
    let m = FRAME_MAGIC;
    [m[0], m[1], m[2], m[3], PROFILE_FROZEN, 0, 0, 0, h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]
}

/// Writes the frame for `hash` into the first 16 bytes of `out`; returns 16.
///
/// ```
/// let mut out = [0u8; 16];
/// assert_eq!(kiln_nostd::frozen::write_frame(7, &mut out), Ok(16));
/// assert_eq!(kiln_nostd::frozen::read_frame(&out), Ok(7));
/// ```
pub fn write_frame(hash: u64, out: &mut [u8]) -> Result<usize> {
    let Some(dst) = out.get_mut(..FRAME_LEN) else {
        return fail(Rule::ValueOutputTooSmall, out.len());
    };
    dst.copy_from_slice(&frame_bytes(hash));
    Ok(FRAME_LEN)
}

/// Checks the frame's fixed bytes and returns the hash it carries.
///
/// Fewer than 16 bytes is EOF; a wrong magic, or a nonzero profile, flags
/// or reserved byte, is FRAME (reported at that byte).
///
/// ```
/// use kiln_nostd::{frozen::read_frame, ErrorCode};
/// assert_eq!(read_frame(b"KLN0").unwrap_err().code(), ErrorCode::Eof);
/// let mut f = kiln_nostd::frozen::frame_bytes(1);
/// f[5] = 1;
/// assert_eq!(read_frame(&f).unwrap_err().offset(), 5);
/// ```
pub fn read_frame(buf: &[u8]) -> Result<u64> {
    let Some(head) = array::<FRAME_LEN>(buf, 0) else {
        return fail(Rule::FrameTruncated, 0);
    };
    let [m0, m1, m2, m3, profile, flags, r0, r1, ..] = head;
    if [m0, m1, m2, m3] != FRAME_MAGIC {
        return fail(Rule::FrameMagic, 0);
    }
    if profile != PROFILE_FROZEN {
        return fail(Rule::FrameProfile, AT_PROFILE);
    }
    if flags != 0 {
        return fail(Rule::FrameFlags, AT_FLAGS);
    }
    if r0 != 0 {
        return fail(Rule::FrameReserved, AT_RESERVED);
    }
    if r1 != 0 {
        return fail(Rule::FrameReserved, AT_RESERVED.saturating_add(1));
    }
    // Fallback not taken: a constant offset inside the 16-byte frame: never 0 by fallback.
    Ok(u64_at(&head, AT_HASH).unwrap_or(0))
}

/// Checks the frame and that its hash is `expected` (SCHEMA otherwise,
/// before any field is read). Returns where the value starts (16).
///
/// ```
/// use kiln_nostd::{frozen::{check_frame, frame_bytes}, ErrorCode};
/// assert_eq!(check_frame(&frame_bytes(5), 5), Ok(16));
/// assert_eq!(check_frame(&frame_bytes(5), 6).unwrap_err().code(), ErrorCode::Schema);
/// ```
pub fn check_frame(buf: &[u8], expected: u64) -> Result<usize> {
    if read_frame(buf)? != expected {
        return fail(Rule::SchemaHash, AT_HASH);
    }
    Ok(FRAME_LEN)
}
