//! Reading a tensor directory: the [`Parser`] and its [`Limits`], and the
//! borrowed views of a checked directory ([`Directory`], [`Tensor`], the
//! [`NameIndex`] and [`FixedIndex`] lookups). Every accessor here reads bytes the
//! parser has already checked, so none can fail or point outside the buffer.

use crate::bytes::{usize_from, usize_from_u32};

mod fixed;
mod limits;
mod parser;
use crate::dequant::quant::SCHEME_SCALES_OUTER;
use crate::dtype::DType;
use crate::dtype::{Element, ViewError};
pub use crate::names::scratch_len;
use crate::names::{same_bytes, Heap, LookupTable};
use crate::wire::descriptor::Descriptors;
use crate::wire::descriptor::{Descriptor, RawDescriptor, NO_INDEX};
use crate::wire::header::{Header, Regions};
pub use fixed::{CapacityError, FixedIndex};
pub use limits::{Limits, DEFAULT_CAP};
pub use parser::Parser;

/// A checked tensor directory borrowed from the caller's buffer.
///
/// ```
/// use kiln_nostd::{Directory, DType};
/// # let bytes = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector.kiln"));
/// let dir = Directory::parse(&bytes)?;
/// for t in dir.iter() {
///     assert_eq!(t.dtype(), DType::F32);
///     assert_eq!(t.shape(), &[2]);
///     let mut out = [0f32; 2];
///     t.copy_to(&mut out).unwrap();       // host-order values on any host
///     assert_eq!(out, [1.0, -2.0]);
/// }
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Directory<'a> {
    buf: &'a [u8],
    start: usize,
    header: Header,
    regions: Regions,
    descs: Descriptors<'a>,
    heap: Heap<'a>,
}

impl<'a> Directory<'a> {
    #[doc(hidden)] // and the shard-prefix check of kiln-model
    #[inline] // as when it was crate-private: the M0 figures depend on it
    pub fn from_checked(buf: &'a [u8], start: usize, header: Header, regions: Regions) -> Self {
        // Fallback not taken: the parser checked that the block starts inside buf.
        let block = buf.get(start..).unwrap_or(&[]);
        let count = usize_from_u32(header.tensor_count);
        let descs = Descriptors::new(block, count);
        // Fallback not taken: descriptors end before heap_end in a checked directory.
        let heap = Heap::new(block.get(descs.end()..regions.heap_end).unwrap_or(&[]), descs.end());
        Directory { buf, start, header, regions, descs, heap }
    }

    /// A directory over a checked prefix only (header to payload base), for
    /// the incremental validator: the tensor table without payload bytes.
    #[doc(hidden)]
    #[inline]
    pub fn from_checked_prefix(prefix: &'a [u8], header: Header, regions: Regions) -> Self {
        Directory::from_checked(prefix, 0, header, regions)
    }

    /// The block's bytes.
    pub fn block(&self) -> &'a [u8] {
        // Fallback: empty only in a prefix directory, which does not hold the whole block.
        self.buf.get(self.start..self.end()).unwrap_or(&[])
    }

    /// The checked descriptors as they lie in the block, in descriptor
    /// order: their fields read one at a time, nothing decoded (a binding
    /// that copies a few fields of every tensor out; [`iter`](Self::iter)
    /// gives each as a [`Tensor`]). A prefix directory has them too.
    pub fn raw_descriptors(&self) -> &'a [RawDescriptor] {
        self.descs.raws
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        usize_from_u32(self.header.tensor_count)
    }

    /// True when the directory holds no tensors.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The decoded header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Absolute offset of the block in the caller's buffer.
    pub fn start(&self) -> usize {
        self.start
    }

    /// Block length in bytes.
    pub fn block_len(&self) -> usize {
        self.regions.block_len
    }

    /// Absolute offset just past the block: where a following field starts.
    pub fn end(&self) -> usize {
        self.start.saturating_add(self.regions.block_len)
    }

    /// Absolute offset of the payload region.
    #[cfg_attr(target_pointer_width = "64", inline)]
    pub fn payload_start(&self) -> usize {
        self.start.saturating_add(self.regions.payload_base)
    }

    /// Tensor `index`, in descriptor order.
    #[cfg_attr(target_pointer_width = "64", inline)]
    #[must_use]
    pub fn get(&self, index: usize) -> Option<Tensor<'a>> {
        self.parts().tensor(index)
    }

    /// What its tensors read of it.
    #[inline]
    fn parts(&self) -> Parts<'a> {
        let at = self.payload_start();
        // Fallback: empty only in a prefix directory, whose payload is not at hand.
        Parts { raws: self.descs.raws, heap: self.heap, payload: self.buf.get(at..self.end()).unwrap_or(&[]), at }
    }

    /// The tensors in descriptor order.
    #[cfg_attr(target_pointer_width = "64", inline)]
    pub fn iter(&self) -> TensorIter<'a> {
        TensorIter { dir: *self, next: 0 }
    }

    /// The tensor named `name`, by a linear scan. For many lookups build a
    /// [`NameIndex`] or use [`Parser::parse_indexed`](crate::Parser::parse_indexed).
    #[must_use]
    pub fn find(&self, name: &str) -> Option<Tensor<'a>> {
        if !self.header.has_names() {
            return None;
        }
        (0..self.len())
            .find(|&i| same_bytes(self.heap.name(self.descs.raw(i)), name.as_bytes()))
            .and_then(|i| self.get(i))
    }

    #[cfg_attr(target_pointer_width = "64", inline)]
    fn name_bytes(&self, index: usize) -> &'a [u8] {
        self.heap.name(self.descs.raw(index))
    }
}

impl<'a> IntoIterator for Directory<'a> {
    type Item = Tensor<'a>;
    type IntoIter = TensorIter<'a>;
    fn into_iter(self) -> TensorIter<'a> {
        self.iter()
    }
}

/// Iterator over a directory's tensors.
#[derive(Clone, Debug)]
pub struct TensorIter<'a> {
    dir: Directory<'a>,
    next: usize,
}

impl<'a> Iterator for TensorIter<'a> {
    type Item = Tensor<'a>;
    #[cfg_attr(target_pointer_width = "64", inline)]
    fn next(&mut self) -> Option<Tensor<'a>> {
        // The Option is returned as `get` made it, not unwrapped and
        // wrapped again: that was a 116-byte copy, and on Cortex-M0 the
        // call to memcpy that pulled 700 bytes of it into every firmware.
        let t = self.dir.get(self.next);
        if t.is_some() {
            self.next = self.next.saturating_add(1);
        }
        t
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.dir.len().saturating_sub(self.next);
        (n, Some(n))
    }
}

impl ExactSizeIterator for TensorIter<'_> {}

/// Name lookups in O(1) expected time, from the table the parser built in
/// caller scratch (or a linear scan when there was not enough scratch).
///
/// ```
/// # let bytes = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
/// let mut scratch = [0u32; 16];
/// let (dir, index) = kiln_nostd::Parser::new().scratch(&mut scratch).parse_indexed(&bytes)?;
/// assert_eq!(index.get("w").map(|t| t.index()), Some(0));
/// assert!(index.get("missing").is_none());
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct NameIndex<'a, 's> {
    dir: Directory<'a>,
    table: Option<LookupTable<'s>>,
    seed: u64,
}

impl<'a, 's> NameIndex<'a, 's> {
    pub(crate) fn from_parts(dir: Directory<'a>, table: Option<LookupTable<'s>>, seed: u64) -> Self {
        NameIndex { dir, table, seed }
    }

    /// Builds an index over an already checked directory in `scratch`
    /// (at least [`scratch_len`]`(dir.len())` slots).
    #[must_use]
    pub fn build(dir: Directory<'a>, scratch: &'s mut [u32]) -> Self {
        let table = crate::names::NameTable::new(scratch, dir.len()).map(|mut t| {
            for i in 0..dir.len() {
                // Names are unique (checked), so insert never reports a duplicate.
                let _ = t.insert(i, 0, |k| dir.name_bytes(k));
            }
            t.freeze()
        });
        NameIndex { dir, table: if dir.header.has_names() { table } else { None }, seed: 0 }
    }

    /// True when lookups use the hash table rather than a scan.
    #[must_use]
    pub fn is_hashed(&self) -> bool {
        self.table.is_some()
    }

    /// The tensor named `name`.
    // Always inlined on 64-bit hosts: a tensor handed back from an
    // out-of-line call goes through memory, which cost more than the lookup.
    #[cfg_attr(target_pointer_width = "64", inline(always))]
    #[must_use]
    pub fn get(&self, name: &str) -> Option<Tensor<'a>> {
        match &self.table {
            Some(t) => t.find(name.as_bytes(), self.seed, |k| self.dir.name_bytes(k)).and_then(|i| self.dir.get(i)),
            None => self.dir.find(name),
        }
    }

    /// The directory this index serves.
    pub fn directory(&self) -> Directory<'a> {
        self.dir
    }
}

/// The parts of a directory its tensors read. A tensor carries these rather
/// than the whole [`Directory`], so handing one out copies little.
#[derive(Clone, Copy, Debug)]
struct Parts<'a> {
    raws: &'a [RawDescriptor],
    heap: Heap<'a>,
    /// The payload region, which starts at `at` in the caller's buffer.
    payload: &'a [u8],
    at: usize,
}

impl<'a> Parts<'a> {
    #[cfg_attr(target_pointer_width = "64", inline)]
    fn tensor(self, index: usize) -> Option<Tensor<'a>> {
        let raw = self.raws.get(index)?;
        let range = usize_from(raw.byte_offset()).zip(usize_from(raw.byte_length()));
        // The range was checked against the payload region; empty only where
        // that region is not at hand (the incremental validator's prefix).
        let bytes = range.and_then(|(at, len)| self.payload.get(at..at.checked_add(len)?)).unwrap_or(&[]);
        Some(Tensor { parts: self, index, raw, dims: raw.shape(), bytes })
    }
}

/// One tensor of a checked directory.
#[derive(Clone, Copy, Debug)]
pub struct Tensor<'a> {
    parts: Parts<'a>,
    index: usize,
    raw: &'a RawDescriptor,
    /// Decoded shape slots, so `shape()` can lend a slice.
    dims: [u64; 8],
    /// The payload, sliced once from the checked range.
    bytes: &'a [u8],
}

/// The quantization metadata of a scheme 1 or 2 tensor, with its scale
/// tensors resolved. Kiln does not apply the scales.
#[derive(Clone, Copy, Debug)]
pub struct Quantization<'a> {
    /// 1 (scales) or 2 (scales and outer).
    pub scheme: u16,
    /// The quantized dimension.
    pub axis: usize,
    /// Elements per scale.
    pub group_size: u32,
    /// The block scales.
    pub scale: Tensor<'a>,
    /// The one-element f32 outer scale (scheme 2).
    pub outer: Option<Tensor<'a>>,
}

impl<'a> Tensor<'a> {
    /// Position in descriptor order.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The descriptor fields, decoded.
    pub fn descriptor(&self) -> Descriptor {
        Descriptor::from_raw(self.raw)
    }

    /// The name, or `None` for an unnamed tensor.
    #[must_use]
    pub fn name(&self) -> Option<&'a str> {
        let (off, len) = self.raw.name_field();
        if len == 0 {
            return None;
        }
        self.parts.heap.str(off, len)
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        // A tensor is handed out only from a checked descriptor.
        DType::from_accepted_code(self.raw.dtype_code())
    }

    /// Rank, 0 to 8.
    #[cfg_attr(target_pointer_width = "64", inline)]
    pub fn rank(&self) -> usize {
        usize::from(self.raw.rank())
    }

    /// The dimensions (`[]` for a scalar).
    #[cfg_attr(target_pointer_width = "64", inline)]
    pub fn shape(&self) -> &[u64] {
        // The parser checked rank <= 8: the fallback is never taken.
        self.dims.get(..self.rank()).unwrap_or(&[])
    }

    /// Number of elements (1 for a scalar).
    pub fn element_count(&self) -> u64 {
        // The parser checked that the product does not overflow: never 0 by fallback.
        self.raw.element_count().unwrap_or(0)
    }

    /// The layout name of an opaque dtype.
    #[must_use]
    pub fn layout(&self) -> Option<&'a str> {
        let (off, len) = self.raw.layout_field();
        if len == 0 {
            return None;
        }
        self.parts.heap.str(off, len)
    }

    /// The opaque block size in bytes (0 for other dtypes).
    pub fn block_size(&self) -> u32 {
        self.raw.block_size()
    }

    /// Quantization metadata, or `None` for scheme 0.
    #[must_use]
    pub fn quant(&self) -> Option<Quantization<'a>> {
        let scheme = self.raw.quant_scheme();
        if scheme == 0 {
            return None;
        }
        let scale = self.parts.tensor(usize_from_u32(self.raw.scale_index()))?;
        let outer = match self.raw.outer_index() {
            NO_INDEX => None,
            i => self.parts.tensor(usize_from_u32(i)),
        };
        Some(Quantization {
            scheme,
            axis: usize::from(self.raw.quant_axis()),
            group_size: self.raw.group_size(),
            scale,
            outer: outer.filter(|_| scheme == SCHEME_SCALES_OUTER),
        })
    }

    /// Offset of the payload from the start of the payload region.
    pub fn byte_offset(&self) -> u64 {
        self.raw.byte_offset()
    }

    /// Absolute offset of the payload in the caller's buffer.
    #[cfg_attr(target_pointer_width = "64", inline)]
    pub fn absolute_offset(&self) -> usize {
        // The payload lies inside the caller's buffer: no fallback is ever taken.
        self.parts.at.saturating_add(usize_from(self.raw.byte_offset()).unwrap_or(0))
    }

    /// Payload length in bytes.
    #[cfg_attr(target_pointer_width = "64", inline)]
    pub fn byte_len(&self) -> usize {
        // Checked to lie in the payload region, so it fits a usize: never 0 by fallback.
        usize_from(self.raw.byte_length()).unwrap_or(0)
    }

    /// The payload: wire bytes, borrowed from the caller's buffer.
    #[cfg_attr(target_pointer_width = "64", inline)]
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The elements as `&[T]` without copying, when `T` matches the dtype,
    /// the host is little-endian (or `T` is one byte wide) and the payload is
    /// aligned for `T`. Otherwise `None`: use [`copy_to`](Self::copy_to).
    #[must_use]
    pub fn as_slice<T: Element>(&self) -> Option<&'a [T]> {
        crate::dtype::view(self.dtype(), self.bytes())
    }

    /// Copies the elements into `out` as host-order values, byte-swapping on
    /// big-endian hosts. Returns the element count.
    pub fn copy_to<T: Element>(&self, out: &mut [T]) -> core::result::Result<usize, ViewError> {
        crate::dtype::copy(self.dtype(), self.bytes(), out)
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Directory<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Directory {{ tensors: {}, block_len: {}, start: {} }}",
            self.len(),
            self.block_len(),
            self.start
        );
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Tensor<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Tensor {{ index: {}, name: {}, dtype: {}, shape: {}, bytes: {} }}",
            self.index,
            self.name(),
            self.dtype(),
            self.shape(),
            self.byte_len()
        );
    }
}
