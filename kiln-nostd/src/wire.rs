//! The block's bytes as the spec lays them out: the 64-byte [`header`], the
//! fixed-size [`descriptor`]s and the payload [`layout`] (alignment and
//! placement), with the constants a reader or writer of raw blocks needs.
//! Most callers never come here: [`Directory`](crate::Directory) and
//! [`Writer`](crate::Writer) check and produce these bytes.

pub mod descriptor;
pub mod header;
pub mod layout;

pub use header::Header;

/// The empty directory: the 64-byte header with only the little-endian flag.
pub const EMPTY_BLOCK: [u8; 64] = {
    let mut b = [0u8; 64];
    b[0] = b'K';
    b[1] = b'L';
    b[2] = b'N';
    b[3] = b'T';
    b[4] = header::VERSION;
    b[5] = header::FLAG_LITTLE_ENDIAN;
    b
};
