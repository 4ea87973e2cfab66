//! The 128-byte tensor descriptor and the rules about one descriptor alone
//! (check steps 8 reserved bytes, 9 dtype/shape/range, 11 element bytes).

use crate::bytes::{first_above_one, first_nonzero, mul_u64, u64_from, usize_from};
use crate::dtype::{ByteRule, DType, Width};
use crate::error::{fail, fail_at, Result, Rule};
use crate::wire::header::{DESCRIPTOR_LEN, HEADER_LEN};

/// Marks an absent name or layout name in `name_off` / `layout_off`.
pub const NO_NAME: u16 = 0xFFFF;
/// Marks an absent scale or outer index.
pub const NO_INDEX: u32 = 0xFFFF_FFFF;
/// Marks the absent quant axis of scheme 0.
pub const NO_AXIS: u16 = 0xFFFF;
/// The largest rank.
pub const MAX_RANK: u8 = 8;

// Field offsets inside a descriptor.
pub(crate) const AT_DTYPE: usize = 0;
pub(crate) const AT_RANK: usize = 2;
pub(crate) const AT_RESERVED: usize = 3;
pub(crate) const AT_NAME_OFF: usize = 4;
pub(crate) const AT_NAME_LEN: usize = 6;
pub(crate) const AT_LAYOUT_OFF: usize = 8;
pub(crate) const AT_LAYOUT_LEN: usize = 10;
pub(crate) const AT_BLOCK_SIZE: usize = 12;
pub(crate) const AT_QUANT_SCHEME: usize = 16;
pub(crate) const AT_QUANT_AXIS: usize = 18;
pub(crate) const AT_GROUP_SIZE: usize = 20;
pub(crate) const AT_SCALE_INDEX: usize = 24;
pub(crate) const AT_OUTER_INDEX: usize = 28;
pub(crate) const AT_BYTE_OFFSET: usize = 32;
pub(crate) const AT_BYTE_LENGTH: usize = 40;
pub(crate) const AT_SHAPE: usize = 48;
pub(crate) const AT_RESERVED_TAIL: usize = 112;

/// The fields of one descriptor, decoded but not yet judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Descriptor {
    /// Dtype code.
    pub dtype: u16,
    /// Rank, 0..=8 once checked.
    pub rank: u8,
    /// Offset into the heap, or [`NO_NAME`].
    pub name_off: u16,
    /// Name length, 0 when unnamed.
    pub name_len: u16,
    /// Layout-name offset, or [`NO_NAME`].
    pub layout_off: u16,
    /// Layout-name length, 0 when absent.
    pub layout_len: u16,
    /// Opaque block size, 0 otherwise.
    pub block_size: u32,
    /// Quantization scheme 0, 1 or 2.
    pub quant_scheme: u16,
    /// Quantized axis, or [`NO_AXIS`].
    pub quant_axis: u16,
    /// Elements per scale group, 0 when unquantized.
    pub group_size: u32,
    /// Index of the scale tensor, or [`NO_INDEX`].
    pub scale_index: u32,
    /// Index of the outer scale tensor, or [`NO_INDEX`].
    pub outer_index: u32,
    /// Offset of the payload from the payload base.
    pub byte_offset: u64,
    /// Payload length.
    pub byte_length: u64,
    /// Eight dimension slots.
    pub shape: [u64; 8],
}

/// Absolute-in-block offset of descriptor `index`'s field at `field`.
#[inline]
pub(crate) fn field_at(index: usize, field: usize) -> usize {
    // Only called for descriptors that lie inside the buffer, so the sum
    // is below the buffer length: wrapping never happens, and costs nothing.
    index.wrapping_mul(DESCRIPTOR_LEN).wrapping_add(HEADER_LEN).wrapping_add(field)
}

/// The descriptor's wire layout: every field a little-endian byte array, so
/// a checked slice of descriptors casts to `&[RawDescriptor]` (alignment 1)
/// and each field read is a fixed-offset load with no bounds check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct RawDescriptor {
    dtype: [u8; 2],
    rank: u8,
    reserved: u8,
    name_off: [u8; 2],
    name_len: [u8; 2],
    layout_off: [u8; 2],
    layout_len: [u8; 2],
    block_size: [u8; 4],
    quant_scheme: [u8; 2],
    quant_axis: [u8; 2],
    group_size: [u8; 4],
    scale_index: [u8; 4],
    outer_index: [u8; 4],
    byte_offset: [u8; 8],
    byte_length: [u8; 8],
    shape: [[u8; 8]; 8],
    reserved_tail: [u8; 16],
}

const _: () = assert!(core::mem::size_of::<RawDescriptor>() == DESCRIPTOR_LEN);
// The field offsets used in error reports are the struct's own: one source.
macro_rules! same_offsets {
    ($($field:ident = $at:ident),* $(,)?) => {
        $(const _: () = assert!(core::mem::offset_of!(RawDescriptor, $field) == $at);)*
    };
}
same_offsets!(
    dtype = AT_DTYPE,
    rank = AT_RANK,
    reserved = AT_RESERVED,
    name_off = AT_NAME_OFF,
    name_len = AT_NAME_LEN,
    layout_off = AT_LAYOUT_OFF,
    layout_len = AT_LAYOUT_LEN,
    block_size = AT_BLOCK_SIZE,
    quant_scheme = AT_QUANT_SCHEME,
    quant_axis = AT_QUANT_AXIS,
    group_size = AT_GROUP_SIZE,
    scale_index = AT_SCALE_INDEX,
    outer_index = AT_OUTER_INDEX,
    byte_offset = AT_BYTE_OFFSET,
    byte_length = AT_BYTE_LENGTH,
    shape = AT_SHAPE,
    reserved_tail = AT_RESERVED_TAIL,
);

impl RawDescriptor {
    /// All zeros.
    pub const ZERO: RawDescriptor = RawDescriptor {
        dtype: [0; 2],
        rank: 0,
        reserved: 0,
        name_off: [0; 2],
        name_len: [0; 2],
        layout_off: [0; 2],
        layout_len: [0; 2],
        block_size: [0; 4],
        quant_scheme: [0; 2],
        quant_axis: [0; 2],
        group_size: [0; 4],
        scale_index: [0; 4],
        outer_index: [0; 4],
        byte_offset: [0; 8],
        byte_length: [0; 8],
        shape: [[0; 8]; 8],
        reserved_tail: [0; 16],
    };

    /// Views `bytes` (a multiple of 128 long) as descriptors.
    pub fn slice(bytes: &[u8]) -> &[RawDescriptor] {
        // Fallback not taken: callers pass a whole number of checked 128-byte descriptors (alignment 1).
        bytemuck::try_cast_slice(bytes).unwrap_or(&[])
    }

    /// Dtype code.
    #[inline]
    pub fn dtype_code(&self) -> u16 {
        crate::bytes::le16(&self.dtype)
    }

    /// The dtype, if the code is defined or opaque.
    #[inline]
    #[must_use]
    pub fn dtype(&self) -> Option<DType> {
        DType::from_code(self.dtype_code())
    }

    /// Rank byte.
    #[inline]
    pub fn rank(&self) -> u8 {
        self.rank
    }

    /// Opaque block size.
    #[inline]
    pub fn block_size(&self) -> u32 {
        crate::bytes::le32(&self.block_size)
    }

    /// Quantization scheme.
    #[inline]
    pub fn quant_scheme(&self) -> u16 {
        crate::bytes::le16(&self.quant_scheme)
    }

    /// Quantized axis.
    #[inline]
    pub fn quant_axis(&self) -> u16 {
        crate::bytes::le16(&self.quant_axis)
    }

    /// Elements per scale.
    #[inline]
    pub fn group_size(&self) -> u32 {
        crate::bytes::le32(&self.group_size)
    }

    /// Scale tensor index.
    #[inline]
    pub fn scale_index(&self) -> u32 {
        crate::bytes::le32(&self.scale_index)
    }

    /// Outer tensor index.
    #[inline]
    pub fn outer_index(&self) -> u32 {
        crate::bytes::le32(&self.outer_index)
    }

    /// Payload offset from the payload base.
    #[inline]
    pub fn byte_offset(&self) -> u64 {
        crate::bytes::le64(&self.byte_offset)
    }

    /// Payload length.
    #[inline]
    pub fn byte_length(&self) -> u64 {
        crate::bytes::le64(&self.byte_length)
    }

    /// End of the payload range, `None` on overflow.
    #[inline]
    #[must_use]
    pub fn range_end(&self) -> Option<u64> {
        self.byte_offset().checked_add(self.byte_length())
    }

    /// Shape slot `i` (0..8).
    #[inline]
    pub fn slot(&self, i: usize) -> u64 {
        self.shape.get(i).map_or(0, crate::bytes::le64)
    }

    /// The dims in use, `shape[..rank]` (none for a rank above 8).
    pub fn dims(&self) -> impl Iterator<Item = u64> + '_ {
        let rank = if self.rank > MAX_RANK { 0 } else { usize::from(self.rank) };
        self.shape.iter().take(rank).map(crate::bytes::le64)
    }

    /// Product of the dims in use (1 for rank 0); `None` on overflow. The
    /// product is exact: a zero dimension makes it 0 whatever the others are.
    #[must_use]
    // One copy on microcontrollers: steps 9 and 11 call it from several places.
    #[cfg_attr(target_os = "none", inline(never))]
    pub fn element_count(&self) -> Option<u64> {
        // One pass: an overflow is only known to matter once no zero follows.
        let mut count = Some(1u64);
        for d in self.dims() {
            if d == 0 {
                return Some(0);
            }
            count = count.and_then(|c| mul_u64(c, d));
        }
        count
    }

    /// All eight shape slots, decoded.
    #[inline]
    pub fn shape(&self) -> [u64; 8] {
        // Small cores decode slot by slot: a by-value map copies the 64 raw
        // bytes first, a call to memcpy where loads are byte loads. Elsewhere
        // the map is wide loads, and the slot loop would become the memcpy.
        if cfg!(all(target_os = "none", not(target_has_atomic = "32"))) {
            core::array::from_fn(|i| self.slot(i))
        } else {
            self.shape.map(u64::from_le_bytes)
        }
    }

    /// name_off and name_len.
    #[inline]
    pub fn name_field(&self) -> (u16, u16) {
        (crate::bytes::le16(&self.name_off), crate::bytes::le16(&self.name_len))
    }

    /// layout_off and layout_len.
    #[inline]
    pub fn layout_field(&self) -> (u16, u16) {
        (crate::bytes::le16(&self.layout_off), crate::bytes::le16(&self.layout_len))
    }
}

impl Descriptor {
    /// Decodes the fields of a raw descriptor.
    #[inline]
    pub fn from_raw(r: &RawDescriptor) -> Descriptor {
        Descriptor {
            dtype: crate::bytes::le16(&r.dtype),
            rank: r.rank,
            name_off: crate::bytes::le16(&r.name_off),
            name_len: crate::bytes::le16(&r.name_len),
            layout_off: crate::bytes::le16(&r.layout_off),
            layout_len: crate::bytes::le16(&r.layout_len),
            block_size: crate::bytes::le32(&r.block_size),
            quant_scheme: crate::bytes::le16(&r.quant_scheme),
            quant_axis: crate::bytes::le16(&r.quant_axis),
            group_size: crate::bytes::le32(&r.group_size),
            scale_index: crate::bytes::le32(&r.scale_index),
            outer_index: crate::bytes::le32(&r.outer_index),
            byte_offset: crate::bytes::le64(&r.byte_offset),
            byte_length: crate::bytes::le64(&r.byte_length),
            shape: r.shape(),
        }
    }

    /// Decodes the 128 bytes of one descriptor (no field is checked).
    ///
    /// ```
    /// use kiln_nostd::{wire::descriptor::Descriptor, wire::header::DESCRIPTOR_LEN};
    /// let mut raw = [0u8; DESCRIPTOR_LEN];
    /// raw[0] = 2; // dtype code 2: f32
    /// let d = Descriptor::decode(&raw);
    /// assert_eq!((d.dtype, d.encode()), (2, raw));
    /// ```
    pub fn decode(raw: &[u8; DESCRIPTOR_LEN]) -> Descriptor {
        // Same size and alignment 1: the cast cannot fail.
        Descriptor::from_raw(bytemuck::cast_ref(raw))
    }

    /// Encodes into 128 bytes (reserved bytes zero).
    pub fn encode(&self) -> [u8; DESCRIPTOR_LEN] {
        let mut out = [0u8; DESCRIPTOR_LEN];
        let mut put = |at: usize, bytes: &[u8]| {
            if let Some(dst) = out.get_mut(at..at.saturating_add(bytes.len())) {
                dst.copy_from_slice(bytes);
            }
        };
        put(AT_DTYPE, &self.dtype.to_le_bytes());
        put(AT_RANK, &[self.rank]);
        put(AT_NAME_OFF, &self.name_off.to_le_bytes());
        put(AT_NAME_LEN, &self.name_len.to_le_bytes());
        put(AT_LAYOUT_OFF, &self.layout_off.to_le_bytes());
        put(AT_LAYOUT_LEN, &self.layout_len.to_le_bytes());
        put(AT_BLOCK_SIZE, &self.block_size.to_le_bytes());
        put(AT_QUANT_SCHEME, &self.quant_scheme.to_le_bytes());
        put(AT_QUANT_AXIS, &self.quant_axis.to_le_bytes());
        put(AT_GROUP_SIZE, &self.group_size.to_le_bytes());
        put(AT_SCALE_INDEX, &self.scale_index.to_le_bytes());
        put(AT_OUTER_INDEX, &self.outer_index.to_le_bytes());
        put(AT_BYTE_OFFSET, &self.byte_offset.to_le_bytes());
        put(AT_BYTE_LENGTH, &self.byte_length.to_le_bytes());
        for (i, d) in self.shape.iter().enumerate() {
            put(AT_SHAPE.saturating_add(i.saturating_mul(8)), &d.to_le_bytes());
        }
        out
    }

    /// The dims in use (`shape[..rank]`); empty for rank 0 or a bad rank.
    pub fn dims(&self) -> &[u64] {
        // Fallback: a bad rank (over 8) reads as no dims; the checks refuse it first.
        self.shape.get(..usize::from(self.rank)).unwrap_or(&[])
    }

    /// Product of the dims in use (1 for rank 0); `None` on overflow. The
    /// product is exact: a zero dimension makes it 0 whatever the others are.
    #[must_use]
    pub fn element_count(&self) -> Option<u64> {
        if self.dims().contains(&0) {
            return Some(0);
        }
        self.dims().iter().try_fold(1u64, |acc, &d| mul_u64(acc, d))
    }

    /// The dtype, if the code is defined or opaque.
    #[must_use]
    pub fn dtype(&self) -> Option<DType> {
        DType::from_code(self.dtype)
    }

    /// End of the payload range, `None` on overflow.
    #[must_use]
    pub fn range_end(&self) -> Option<u64> {
        self.byte_offset.checked_add(self.byte_length)
    }
}

/// Byte width by dtype code for the dtypes whose elements need no per-byte
/// check (every whole-byte dtype except bool); 0 for all others. A test
/// derives it again from [`DType::width`].
const PLAIN_WIDTH: [u8; 20] = [0, 8, 4, 2, 2, 1, 1, 0, 1, 1, 2, 2, 4, 4, 8, 8, 0, 0, 0, 1];

impl RawDescriptor {
    /// True when this descriptor is the common kind (reserved bytes zero, no
    /// layout, no quantization, a dense dtype other than bool) and passes
    /// every step-8, 9 and 11 rule that involves only itself. The name, the
    /// placement and uniqueness are the caller's. Used by the directory's
    /// fast path; a `false` says nothing about which rule failed.
    #[inline]
    pub(crate) fn is_plain_and_valid(&self, payload_bytes: u64) -> bool {
        // Bytes 8..32 of a plain descriptor are fixed: no layout (0xFFFF, 0,
        // block size 0), scheme 0 with axis 0xFFFF and group 0, and both
        // sibling indexes 0xFFFFFFFF. Compared as three words, with the
        // reserved bytes, in one test.
        const NO_LAYOUT: u64 = 0xFFFF;
        const NO_QUANT: u64 = 0xFFFF_0000;
        let word = |w: [[u8; 4]; 2]| u64::from(u32::from_le_bytes(w[0])) | (u64::from(u32::from_le_bytes(w[1])) << 32);
        let [lo, ll, qs, qa] = [self.layout_off, self.layout_len, self.quant_scheme, self.quant_axis];
        let layout = word([[lo[0], lo[1], ll[0], ll[1]], self.block_size]);
        let quant = word([[qs[0], qs[1], qa[0], qa[1]], self.group_size]);
        let siblings = word([self.scale_index, self.outer_index]);
        let reserved = u64::from(self.reserved) | u64::from(u128::from_ne_bytes(self.reserved_tail) != 0);
        let fixed = (layout ^ NO_LAYOUT) | (quant ^ NO_QUANT) | !siblings | reserved;
        // Fallback: codes past the table are not plain: width 0 sends them to the full check.
        let width = PLAIN_WIDTH.get(usize::from(self.dtype_code())).copied().unwrap_or(0);
        if fixed != 0 || width == 0 || self.rank > MAX_RANK {
            return false;
        }
        // Dims past the rank must be zero. The product of the others
        // saturates; a saturated product is refused here, so no overflow is
        // ever accepted (the rule-by-rule path then names the fault).
        let rank = usize::from(self.rank);
        let (mut count, mut tail) = (1u64, 0u64);
        for (i, d) in self.shape.iter().enumerate() {
            let d = u64::from_le_bytes(*d);
            if i < rank {
                count = mul_u64(count, d).unwrap_or(u64::MAX);
            } else {
                tail |= d;
            }
        }
        let in_range = self.range_end().is_some_and(|end| end <= payload_bytes);
        in_range && tail == 0 && count != u64::MAX && mul_u64(count, u64::from(width)) == Some(self.byte_length())
    }
}

/// Step 8, first part: reserved byte 3 and bytes 112..128 are zero.
// Inlined on 64-bit hosts for speed; on microcontrollers the calls keep code small.
#[cfg_attr(target_pointer_width = "64", inline)]
pub(crate) fn check_reserved(raw: &RawDescriptor, index: usize) -> Result<()> {
    if raw.reserved == 0 && crate::bytes::all_zero16(&raw.reserved_tail) {
        return Ok(()); // the usual case, in two compares
    }
    check_reserved_start(bytemuck::bytes_of(raw), index)
}

/// Step 8a over `raws`, descriptors `first..` of the block: the first
/// nonzero reserved byte. Most blocks have none, so the reserved fields are
/// OR-ed together first (no branch per descriptor) and searched only when
/// that finds a set bit. For the incremental validator's second pass over
/// descriptors arriving in pieces; step 8 keeps its plain loop (on bare
/// metal it is the accepting path, and the loop is smaller).
pub(crate) fn check_reserved_all(raws: &[RawDescriptor], first: usize) -> Result<()> {
    if raws.iter().all(|r| r.reserved == 0 && crate::bytes::all_zero16(&r.reserved_tail)) {
        return Ok(());
    }
    for (k, raw) in raws.iter().enumerate() {
        check_reserved(raw, first.saturating_add(k))?;
    }
    Ok(())
}

/// Step 8a on the first bytes of descriptor `index`: all 128, or as many as
/// have arrived (the incremental validator judges a reserved byte as it
/// comes). Byte 3, then bytes 112..128, where present.
pub(crate) fn check_reserved_start(bytes: &[u8], index: usize) -> Result<()> {
    if bytes.get(AT_RESERVED).is_some_and(|&b| b != 0) {
        return fail(Rule::DescriptorReserved, field_at(index, AT_RESERVED));
    }
    // Before byte 112 has arrived there is no tail to judge.
    match first_nonzero(bytes.get(AT_RESERVED_TAIL..DESCRIPTOR_LEN.min(bytes.len())).unwrap_or(&[])) {
        Some(i) => fail(Rule::DescriptorReserved, field_at(index, AT_RESERVED_TAIL.saturating_add(i))),
        None => Ok(()),
    }
}

/// Step 9 for one descriptor: range, dtype, rank, shape, length, layout fields,
/// in the reference's order (spec/kiln-v2.md section 14), which decides the
/// code when one descriptor has a LIMIT and a TYPE fault.
/// Overlap with other tensors is checked by the caller.
#[cfg_attr(target_pointer_width = "64", inline)]
pub(crate) fn check_shape_and_range(d: &RawDescriptor, index: usize, payload_bytes: u64) -> Result<()> {
    let at = |field| field_at(index, field);
    let Some(end) = d.range_end() else {
        return fail(Rule::RangeOverflow, at(AT_BYTE_OFFSET));
    };
    if end > payload_bytes {
        return fail(Rule::RangePastPayload, at(AT_BYTE_LENGTH));
    }
    let Some(dtype) = d.dtype() else {
        return fail(Rule::UnknownDtype, at(AT_DTYPE));
    };
    if d.rank() > MAX_RANK {
        return fail(Rule::RankTooLarge, at(AT_RANK));
    }
    let rank = usize::from(d.rank());
    if let Some(i) = (rank..8).find(|&i| d.slot(i) != 0) {
        return fail(Rule::ShapeTail, at(AT_SHAPE.saturating_add(i.saturating_mul(8))));
    }
    let Some(count) = d.element_count() else {
        return fail(Rule::ShapeOverflow, at(AT_SHAPE));
    };
    check_length_and_layout(d, dtype, count, index)
}

#[cfg_attr(target_pointer_width = "64", inline)]
fn check_length_and_layout(d: &RawDescriptor, dtype: DType, count: u64, index: usize) -> Result<()> {
    let at = |field| field_at(index, field);
    // Step 8 already required layout_off and layout_len to agree.
    let has_layout = d.layout_field().1 != 0;
    match dtype.width() {
        Width::Opaque => {
            if !has_layout {
                return fail(Rule::OpaqueWithoutLayout, at(AT_LAYOUT_LEN));
            }
            if crate::bytes::div_rem_u32(d.byte_length(), d.block_size()).is_none_or(|(_, r)| r != 0) {
                return fail(Rule::OpaqueBlockSize, at(AT_BLOCK_SIZE));
            }
            Ok(())
        }
        Width::Bytes(_) | Width::Nibble => {
            if has_layout {
                return fail(Rule::LayoutOnDenseDtype, at(AT_LAYOUT_OFF));
            }
            if d.block_size() != 0 {
                return fail(Rule::LayoutOnDenseDtype, at(AT_BLOCK_SIZE));
            }
            match dtype.byte_length(count) {
                None => fail(Rule::ShapeOverflow, at(AT_SHAPE)),
                Some(len) if len != d.byte_length() => fail(Rule::LengthMismatch, at(AT_BYTE_LENGTH)),
                Some(_) => Ok(()),
            }
        }
    }
}

/// Step 11 element bytes: bool bytes and the odd packed tail.
/// `payload` is this tensor's checked payload, at block offset `payload_at`.
#[cfg_attr(target_pointer_width = "64", inline)]
#[doc(hidden)]
pub fn check_elements(d: &RawDescriptor, payload: &[u8], payload_at: u64) -> Result<()> {
    let at = |i: usize| payload_at.saturating_add(u64_from(i));
    match d.dtype().map(DType::byte_rule) {
        Some(ByteRule::ZeroOrOne) => match first_above_one(payload) {
            Some(i) => fail_at(Rule::BoolByte, at(i)),
            None => Ok(()),
        },
        Some(ByteRule::OddPadZero) => {
            // Fallback not taken: the element count was checked not to overflow before this check.
            let odd = d.element_count().unwrap_or(0) % 2 == 1;
            match payload.last() {
                Some(&last) if odd && last & 0xF0 != 0 => {
                    fail_at(Rule::PackedHighNibble, at(payload.len().saturating_sub(1)))
                }
                _ => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// Converts a checked payload range to block offsets, `None` past usize.
pub(crate) fn payload_span(d: &RawDescriptor, payload_base: usize) -> Option<(usize, usize)> {
    let start = payload_base.checked_add(usize_from(d.byte_offset())?)?;
    let end = start.checked_add(usize_from(d.byte_length())?)?;
    Some((start, end))
}

/// The descriptor table of a block whose directory is known to fit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Descriptors<'a> {
    /// The descriptors (at most `count`, all inside the block).
    pub(crate) raws: &'a [RawDescriptor],
    pub(crate) count: usize,
}

impl<'a> Descriptors<'a> {
    pub(crate) fn new(block: &'a [u8], count: usize) -> Self {
        let end = crate::wire::layout::descriptor_at(count);
        // Step 5 checked the descriptors are all in the block: never empty by fallback.
        let raws = RawDescriptor::slice(block.get(crate::wire::layout::HEADER_LEN..end).unwrap_or(&[]));
        Descriptors { raws, count: raws.len() }
    }

    /// Block offset just past the last descriptor.
    pub(crate) fn end(&self) -> usize {
        crate::wire::layout::descriptor_at(self.count)
    }

    #[inline]
    pub(crate) fn raw(&self, i: usize) -> &'a RawDescriptor {
        // Callers pass indexes below `count` (= raws.len()): ZERO is never returned.
        self.raws.get(i).unwrap_or(&RawDescriptor::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_widths_follow_the_dtype_table() {
        for code in 0..=u16::try_from(PLAIN_WIDTH.len()).unwrap() {
            let want = match DType::from_code(code) {
                Some(DType::Bool) | None => 0,
                Some(d) => match d.width() {
                    Width::Bytes(w) => w,
                    Width::Nibble | Width::Opaque => 0,
                },
            };
            assert_eq!(PLAIN_WIDTH.get(usize::from(code)).copied().unwrap_or(0), want, "code {code}");
        }
    }
}
