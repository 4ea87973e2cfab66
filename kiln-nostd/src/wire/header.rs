//! The 64-byte directory header and the regions it implies (check steps 1 to 7).

use crate::bytes::{first_nonzero, u64_from, usize_from};
use crate::directory::Limits;
use crate::error::{fail, fail_at, Result, Rule};
use crate::wire::layout::{align, directory_bytes, heap_end, payload_base};
pub use crate::wire::layout::{DESCRIPTOR_LEN, HEADER_LEN};

/// Directory magic.
pub const MAGIC: [u8; 4] = *b"KLNT";
/// The only directory version.
pub const VERSION: u8 = 2;
/// Flag bit 0: at least one tensor has a name.
pub const FLAG_NAMES: u8 = 1;
/// Flag bit 1: the block is little-endian (must be set).
pub const FLAG_LITTLE_ENDIAN: u8 = 2;

// Field offsets inside the header.
const AT_VERSION: usize = 4;
pub(crate) const AT_FLAGS: usize = 5;
const AT_RESERVED: usize = 6;
const AT_COUNT: usize = 8;
const AT_NAME_BYTES: usize = 12;
pub(crate) const AT_PAYLOAD_BYTES: usize = 16;
const AT_DIRECTORY_BYTES: usize = 24;
const AT_RESERVED_TAIL: usize = 32;

/// The decoded header fields, after steps 1 and 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Header {
    /// Flag byte (bit 0 names, bit 1 little-endian).
    pub flags: u8,
    /// Number of descriptors.
    pub tensor_count: u32,
    /// Length of the name heap.
    pub name_bytes: u32,
    /// Length of the payload region, gaps included.
    pub payload_bytes: u64,
    /// Stored tensor_count * 128 + name_bytes.
    pub directory_bytes: u64,
}

/// The header's 64 bytes as fields, so each read is a fixed-offset load that
/// cannot miss (alignment 1, every bit pattern valid).
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct RawHeader {
    magic: [u8; 4],
    version: u8,
    flags: u8,
    reserved: [u8; 2],
    tensor_count: [u8; 4],
    name_bytes: [u8; 4],
    payload_bytes: [u8; 8],
    directory_bytes: [u8; 8],
    reserved_tail: [u8; 32],
}

const _: () = assert!(core::mem::size_of::<RawHeader>() == HEADER_LEN);
const _: () = assert!(core::mem::offset_of!(RawHeader, version) == AT_VERSION);
const _: () = assert!(core::mem::offset_of!(RawHeader, flags) == AT_FLAGS);
const _: () = assert!(core::mem::offset_of!(RawHeader, reserved) == AT_RESERVED);
const _: () = assert!(core::mem::offset_of!(RawHeader, tensor_count) == AT_COUNT);
const _: () = assert!(core::mem::offset_of!(RawHeader, name_bytes) == AT_NAME_BYTES);
const _: () = assert!(core::mem::offset_of!(RawHeader, payload_bytes) == AT_PAYLOAD_BYTES);
const _: () = assert!(core::mem::offset_of!(RawHeader, directory_bytes) == AT_DIRECTORY_BYTES);
const _: () = assert!(core::mem::offset_of!(RawHeader, reserved_tail) == AT_RESERVED_TAIL);

/// Where the regions of a checked block lie, relative to the block start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub struct Regions {
    /// End of the name heap (64 + directory_bytes).
    pub heap_end: usize,
    /// Start of the payload region.
    pub payload_base: usize,
    /// Total block length.
    pub block_len: usize,
}

impl Header {
    /// Steps 1 and 2: length, magic, version, flags, reserved bytes.
    /// `block` starts at the header; offsets in errors are relative to it.
    pub fn parse(block: &[u8]) -> Result<Header> {
        let Some(magic) = block.first_chunk::<4>() else {
            return fail(Rule::HeaderTruncated, block.len());
        };
        check_start(magic)?;
        let Some(head) = block.first_chunk::<HEADER_LEN>() else {
            return fail(Rule::HeaderTruncated, block.len());
        };
        check_start(head)?;
        let head: &RawHeader = bytemuck::cast_ref(head);
        Ok(Header {
            flags: head.flags,
            tensor_count: crate::bytes::le32(&head.tensor_count),
            name_bytes: crate::bytes::le32(&head.name_bytes),
            payload_bytes: crate::bytes::le64(&head.payload_bytes),
            directory_bytes: crate::bytes::le64(&head.directory_bytes),
        })
    }

    /// True when the name flag is set.
    #[must_use]
    pub const fn has_names(&self) -> bool {
        self.flags & FLAG_NAMES != 0
    }

    /// Steps 3 to 7: caps, size arithmetic, the block inside `block`, zero padding.
    pub(crate) fn regions(&self, block: &[u8], limits: &Limits) -> Result<Regions> {
        let (heap_end, payload_base, block_len) = self.check_extent(limits, u64_from(block.len()))?;
        // All three ends are at most `avail`, a usize.
        let [heap_end, payload_base, block_len] =
            [heap_end, payload_base, block_len].map(|v| usize_from(v).unwrap_or(0));
        check_padding(block, heap_end, payload_base)?; // step 7
        Ok(Regions { heap_end, payload_base, block_len })
    }

    /// Steps 3 to 6 against the `avail` bytes from the block's start (a
    /// buffer, or a file or source whose bytes are not all at hand):
    /// `(heap_end, payload_base, block_len)`, block-relative.
    #[doc(hidden)]
    pub fn check_extent(&self, limits: &Limits, avail: u64) -> Result<(u64, u64, u64)> {
        let heap_end = self.check_sizes(limits)?; // steps 3, 4
        check_directory_fits(heap_end, avail)?; // step 5
        let (payload_base, block_len) = self.check_payload(heap_end)?; // step 6
        check_block_fits(block_len, avail)?;
        Ok((heap_end, payload_base, block_len))
    }

    /// Steps 3 and 4 (caps, then the directory size): the end of the name
    /// heap, block-relative. Needs no byte past the header.
    pub(crate) fn check_sizes(&self, limits: &Limits) -> Result<u64> {
        if self.tensor_count > limits.count_cap {
            return fail(Rule::TensorCountCap, AT_COUNT);
        }
        if self.name_bytes > limits.byte_cap {
            return fail(Rule::NameBytesCap, AT_NAME_BYTES);
        }
        let Some(expected) = u64::from(self.tensor_count)
            .checked_mul(u64_from(DESCRIPTOR_LEN))
            .and_then(|d| d.checked_add(u64::from(self.name_bytes)))
        else {
            return fail(Rule::DirectorySizeOverflow, AT_COUNT);
        };
        if self.directory_bytes != expected {
            return fail(Rule::DirectoryBytesMismatch, AT_DIRECTORY_BYTES);
        }
        // At most 2^32 * 129 + 64: no overflow.
        Ok(expected.saturating_add(u64_from(HEADER_LEN)))
    }

    /// Step 6, the arithmetic: (payload_base, block length) after a heap
    /// ending at `heap_end`; LIMIT when the block end overflows.
    pub(crate) fn check_payload(&self, heap_end: u64) -> Result<(u64, u64)> {
        match align(heap_end).and_then(|b| Some((b, b.checked_add(self.payload_bytes)?))) {
            Some(ends) => Ok(ends),
            None => fail(Rule::PayloadSizeOverflow, AT_PAYLOAD_BYTES),
        }
    }

    /// Reads just the tensor count of a header that passes steps 1 and 2, so a
    /// caller can size name-index scratch before the full parse.
    #[must_use]
    pub fn peek_count(block: &[u8]) -> Option<u32> {
        Header::parse(block).ok().map(|h| h.tensor_count)
    }
}

/// Step 5: the directory (header, descriptors, heap) ends inside the `avail` bytes at hand.
pub(crate) fn check_directory_fits(heap_end: u64, avail: u64) -> Result<()> {
    if heap_end > avail {
        return fail_at(Rule::DirectoryTruncated, avail);
    }
    Ok(())
}

/// Step 6, the length: the block ends inside the `avail` bytes at hand.
pub(crate) fn check_block_fits(block_len: u64, avail: u64) -> Result<()> {
    if block_len > avail {
        return fail_at(Rule::BlockTruncated, avail);
    }
    Ok(())
}

/// Steps 1 and 2 as far as the first bytes of a header decide them: the
/// magic, version, flag and reserved bytes present in `start` (at most the
/// 64 header bytes), in the spec's order. Absent bytes are not judged, so a
/// fault found here is the verdict whatever follows; the incremental
/// validator reports it at the byte that shows it. A short header's EOF is
/// the caller's.
// One copy on the small cores of `bytes::le32`: `Header::parse` calls it twice.
#[cfg_attr(all(target_os = "none", not(target_has_atomic = "32")), inline(never))]
pub(crate) fn check_start(start: &[u8]) -> Result<()> {
    let magic = start.len().min(MAGIC.len());
    if start.get(..magic) != MAGIC.get(..magic) {
        return fail(Rule::DirectoryMagic, 0);
    }
    if let Some(&version) = start.get(AT_VERSION) {
        if version != VERSION {
            return fail(Rule::DirectoryVersion, AT_VERSION);
        }
    }
    if let Some(&flags) = start.get(AT_FLAGS) {
        if flags & !(FLAG_NAMES | FLAG_LITTLE_ENDIAN) != 0 {
            return fail(Rule::UnknownFlag, AT_FLAGS);
        }
        if flags & FLAG_LITTLE_ENDIAN == 0 {
            return fail(Rule::LittleEndianFlagClear, AT_FLAGS);
        }
    }
    // Where the range is not there yet, `get` finds nothing to judge.
    check_zero(start.get(AT_RESERVED..start.len().min(AT_COUNT)).unwrap_or(&[]), AT_RESERVED)?;
    check_zero(start.get(AT_RESERVED_TAIL..start.len().min(HEADER_LEN)).unwrap_or(&[]), AT_RESERVED_TAIL)
}

fn check_zero(bytes: &[u8], at: usize) -> Result<()> {
    match first_nonzero(bytes) {
        Some(i) => fail(Rule::HeaderReserved, at.saturating_add(i)),
        None => Ok(()),
    }
}

// Step 7.
pub(crate) fn check_padding(block: &[u8], heap_end: usize, payload_base: usize) -> Result<()> {
    // Fallback not taken: the caller checked heap_end <= payload_base <= block length.
    let pad = block.get(heap_end..payload_base).unwrap_or(&[]);
    match first_nonzero(pad) {
        Some(i) => fail(Rule::NonzeroPadding, heap_end.saturating_add(i)),
        None => Ok(()),
    }
}

// The encoding side: the canonical header for given sizes and its wire bytes.
impl Header {
    /// A canonical header for these sizes (the name flag when `named`).
    #[must_use]
    pub fn canonical(tensor_count: u32, name_bytes: u32, payload_bytes: u64, named: bool) -> Header {
        Header {
            flags: FLAG_LITTLE_ENDIAN | if named { FLAG_NAMES } else { 0 },
            tensor_count,
            name_bytes,
            payload_bytes,
            directory_bytes: directory_bytes(tensor_count, name_bytes),
        }
    }

    /// The block length this header implies (payload_base + payload_bytes),
    /// `None` on overflow. For a header that passed the size checks.
    #[must_use]
    pub fn block_len(&self) -> Option<u64> {
        payload_base(self.tensor_count, self.name_bytes)?.checked_add(self.payload_bytes)
    }

    /// The regions this header implies, as block offsets; `None` when one
    /// does not fit a usize. The caller has checked the sizes.
    pub(crate) fn implied_regions(&self) -> Option<Regions> {
        let heap_end = heap_end(self.tensor_count, self.name_bytes);
        let base = payload_base(self.tensor_count, self.name_bytes)?;
        Some(Regions {
            heap_end: usize_from(heap_end)?,
            payload_base: usize_from(base)?,
            block_len: usize_from(base.checked_add(self.payload_bytes)?)?,
        })
    }

    /// The 64 wire bytes of this header (reserved bytes zero).
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        let fields: [(usize, &[u8]); 6] = [
            (0, &MAGIC),
            (4, &[VERSION, self.flags]),
            (8, &self.tensor_count.to_le_bytes()),
            (12, &self.name_bytes.to_le_bytes()),
            (16, &self.payload_bytes.to_le_bytes()),
            (24, &self.directory_bytes.to_le_bytes()),
        ];
        for (at, bytes) in fields {
            if let Some(dst) = at.checked_add(bytes.len()).and_then(|end| out.get_mut(at..end)) {
                dst.copy_from_slice(bytes);
            }
        }
        out
    }
}
