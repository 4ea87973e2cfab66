//! The canonical writer: exact length first, then the block into caller
//! memory. A written block is checked by the same [`Parser`] before the
//! writer reports success, so it refuses exactly what a reader would reject.

use crate::bytes::{u64_from, usize_from, usize_from_u32};
use crate::dequant::quant::{SCHEME_NONE, SCHEME_SCALES, SCHEME_SCALES_OUTER};
use crate::directory::Limits;
use crate::dtype::DType;
use crate::error::{fail, Result, Rule};
use crate::wire::descriptor::{
    field_at, Descriptor, AT_LAYOUT_OFF, AT_NAME_LEN, AT_NAME_OFF, AT_RANK, AT_SCALE_INDEX, NO_AXIS, NO_INDEX, NO_NAME,
};
use crate::wire::header::{Header, AT_PAYLOAD_BYTES, DESCRIPTOR_LEN, HEADER_LEN};
use crate::wire::layout::{self, Placement};
use crate::{Parser, Tensor};

/// A reference from a quantized tensor to its scale tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorRef<'a> {
    /// Position in the spec slice (descriptor order).
    Index(u32),
    /// The tensor with this name (survives [`sort_dict`]).
    Name(&'a str),
}

/// Quantization metadata for the writer, one per [`TensorSpec`] (a checked
/// tensor's is read back as [`Quantization`](crate::directory::Quantization)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum QuantSpec<'a> {
    /// Scheme 0.
    #[default]
    None,
    /// Scheme 1: block scales in a sibling tensor.
    Scales {
        /// Quantized dimension.
        axis: u16,
        /// Elements per scale.
        group_size: u32,
        /// The scale tensor.
        scale: TensorRef<'a>,
    },
    /// Scheme 2: scheme 1 plus a one-element f32 outer scale.
    ScalesOuter {
        /// Quantized dimension.
        axis: u16,
        /// Elements per scale.
        group_size: u32,
        /// The scale tensor.
        scale: TensorRef<'a>,
        /// The outer f32 tensor.
        outer: TensorRef<'a>,
    },
}

/// One tensor to write: metadata plus its payload as little-endian wire bytes.
///
/// Build `data` from host values with [`encode_le`](crate::dtype::encode_le) (any
/// host) or [`le_bytes`](crate::dtype::le_bytes) (little-endian hosts, no copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorSpec<'a> {
    /// Tensor name; all or none of a directory's tensors are named.
    pub name: Option<&'a str>,
    /// Element type.
    pub dtype: DType,
    /// Dimensions (at most 8; empty for a scalar).
    pub shape: &'a [u64],
    /// Payload, wire bytes.
    pub data: &'a [u8],
    /// Layout name (opaque dtypes only).
    pub layout: Option<&'a str>,
    /// Block size in bytes (opaque dtypes only).
    pub block_size: u32,
    /// Quantization metadata.
    pub quant: QuantSpec<'a>,
}

impl<'a> TensorSpec<'a> {
    /// An unnamed, unquantized tensor.
    #[must_use]
    pub const fn new(dtype: DType, shape: &'a [u64], data: &'a [u8]) -> Self {
        TensorSpec { name: None, dtype, shape, data, layout: None, block_size: 0, quant: QuantSpec::None }
    }

    /// An opaque-layout tensor (codes 4096..=32767).
    #[must_use]
    pub const fn opaque(code: u16, layout: &'a str, block_size: u32, shape: &'a [u64], data: &'a [u8]) -> Self {
        TensorSpec {
            name: None,
            dtype: DType::Opaque(code),
            shape,
            data,
            layout: Some(layout),
            block_size,
            quant: QuantSpec::None,
        }
    }

    /// The same tensor with a name.
    #[must_use]
    pub const fn named(mut self, name: &'a str) -> Self {
        self.name = Some(name);
        self
    }

    /// The same tensor with quantization metadata.
    #[must_use]
    pub const fn quantized(mut self, quant: QuantSpec<'a>) -> Self {
        self.quant = quant;
        self
    }

    /// What writes `t` again: its name, dtype, shape, payload, layout and
    /// quantization (scale tensors by index). Writing every tensor of a
    /// checked directory this way, in order, reproduces its block exactly.
    ///
    /// ```
    /// use kiln_nostd::{Directory, TensorSpec, Writer};
    /// # let bytes = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
    /// let dir = Directory::parse(&bytes)?;
    /// let tensors: Vec<_> = dir.iter().collect();
    /// let specs: Vec<_> = tensors.iter().map(TensorSpec::from_tensor).collect();
    /// let mut again = vec![0u8; Writer::new().encoded_len(&specs)?];
    /// Writer::new().write(&specs, &mut again)?;
    /// assert_eq!(again, bytes);
    /// # Ok::<(), kiln_nostd::Error>(())
    /// ```
    #[must_use]
    pub fn from_tensor(t: &'a Tensor<'_>) -> Self {
        // Fallback not taken: an index of a checked directory fits the u32 tensor count.
        let index = |t: Tensor<'_>| TensorRef::Index(u32::try_from(t.index()).unwrap_or(u32::MAX));
        // Fallback not taken: a checked axis is below the rank (at most 8).
        let axis = |a: usize| u16::try_from(a).unwrap_or(u16::MAX);
        let quant = match t.quant() {
            None => QuantSpec::None,
            Some(q) => match q.outer {
                None => QuantSpec::Scales { axis: axis(q.axis), group_size: q.group_size, scale: index(q.scale) },
                Some(o) => QuantSpec::ScalesOuter {
                    axis: axis(q.axis),
                    group_size: q.group_size,
                    scale: index(q.scale),
                    outer: index(o),
                },
            },
        };
        TensorSpec {
            name: t.name(),
            dtype: t.dtype(),
            shape: t.shape(),
            data: t.bytes(),
            layout: t.layout(),
            block_size: t.block_size(),
            quant,
        }
    }
}

/// Sizes of a block before it is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    name_bytes: u32,
    payload_base: usize,
    payload_bytes: u64,
    block_len: usize,
}

/// Writes canonical blocks.
///
/// ```
/// use kiln_nostd::{DType, Directory, TensorSpec, Writer};
/// let data = [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0]; // 1.0, -2.0
/// let specs = [TensorSpec::new(DType::F32, &[2], &data)];
/// let len = Writer::new().encoded_len(&specs)?;
/// let mut out = [0u8; 256];
/// let written = Writer::new().write(&specs, &mut out)?;
/// assert_eq!((len, written), (200, 200));
/// assert_eq!(Directory::parse(&out[..len])?.len(), 1);
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
pub struct Writer<'s> {
    limits: Limits,
    scratch: Option<&'s mut [u32]>,
}

impl Default for Writer<'_> {
    fn default() -> Self {
        Writer::new()
    }
}

impl<'s> Writer<'s> {
    /// Default caps, no scratch.
    #[must_use]
    pub const fn new() -> Self {
        Writer { limits: Limits::DEFAULT, scratch: None }
    }

    /// Caps the written block must respect (a reader with the same caps accepts it).
    #[must_use]
    pub const fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Scratch for the name check of the final validation (see [`Parser::scratch`]).
    #[must_use]
    pub fn scratch(mut self, scratch: &'s mut [u32]) -> Self {
        self.scratch = Some(scratch);
        self
    }

    /// The exact block length `specs` encode to.
    pub fn encoded_len(&self, specs: &[TensorSpec<'_>]) -> Result<usize> {
        plan(specs).map(|p| p.block_len)
    }

    /// Writes the canonical block into `out` and checks it; returns its length.
    /// Bytes of `out` past the block are left as they were.
    pub fn write(self, specs: &[TensorSpec<'_>], out: &mut [u8]) -> Result<usize> {
        let plan = plan(specs)?;
        let Some(block) = out.get_mut(..plan.block_len) else {
            return fail(Rule::OutputTooSmall, out.len());
        };
        // Zero what the emit leaves as it is: the directory prefix (its
        // padding) here, the gaps between payloads as they are placed. The
        // payloads themselves are written once, not zeroed first.
        block.get_mut(..plan.payload_base).unwrap_or(&mut []).fill(0);
        emit(specs, &plan, block)?;
        let mut parser = Parser::new().limits(self.limits);
        if let Some(s) = self.scratch {
            parser = parser.scratch(s);
        }
        parser.parse(block)?;
        Ok(plan.block_len)
    }

    /// Writes the block `specs` encode to up to its payload region (header,
    /// descriptors, names, zeros) into `out`; returns the region's start. For
    /// writers that stream each payload after it at the offset
    /// [`crate::wire::layout::Placement`] gives, zeros between. Not checked
    /// here (the block is not all in memory): check it once it is written.
    ///
    /// ```
    /// use kiln_nostd::{DType, TensorSpec, Writer};
    /// let data = [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0]; // 1.0, -2.0
    /// let specs = [TensorSpec::new(DType::F32, &[2], &data).named("w")];
    /// let mut block = [0u8; 512];
    /// let len = Writer::new().write(&specs, &mut block)?;
    /// let mut directory = [0xffu8; 512];
    /// let base = Writer::new().write_directory(&specs, &mut directory)?;
    /// assert_eq!(directory[..base], block[..base]);    // the block up to its payloads
    /// assert_eq!(block[base..len], data);              // the payload streamed after it
    /// # Ok::<(), kiln_nostd::Error>(())
    /// ```
    pub fn write_directory(&self, specs: &[TensorSpec<'_>], out: &mut [u8]) -> Result<usize> {
        let plan = plan(specs)?;
        let Some(directory) = out.get_mut(..plan.payload_base) else {
            return fail(Rule::OutputTooSmall, out.len());
        };
        directory.fill(0);
        // The emit places payloads and gaps only where they fall inside its
        // buffer: all of them lie past the directory, so none is copied.
        emit(specs, &plan, directory)?;
        Ok(plan.payload_base)
    }
}

fn plan(specs: &[TensorSpec<'_>]) -> Result<Plan> {
    let count = u64_from(specs.len());
    let count32 = u32::try_from(count).or(fail(Rule::FieldTooWide, 8))?;
    let mut heap = 0u64;
    for (i, s) in specs.iter().enumerate() {
        if s.shape.len() > 8 {
            return fail(Rule::FieldTooWide, field_at(i, AT_RANK));
        }
        for text in s.name.iter().chain(s.layout.iter()) {
            if text.len() > usize::from(u16::MAX) {
                return fail(Rule::FieldTooWide, field_at(i, AT_NAME_LEN));
            }
            heap = heap.saturating_add(u64_from(text.len()));
        }
    }
    let name_bytes = u32::try_from(heap).or(fail(Rule::FieldTooWide, 12))?;
    let mut placement = Placement::new();
    for s in specs {
        if placement.place(u64_from(s.data.len())).is_none() {
            return fail(Rule::PayloadSizeOverflow, AT_PAYLOAD_BYTES);
        }
    }
    let payload_base = layout::payload_base(count32, name_bytes);
    let block_len = payload_base.and_then(|b| b.checked_add(placement.payload_bytes())).and_then(usize_from);
    match (payload_base.and_then(usize_from), block_len) {
        (Some(payload_base), Some(block_len)) => {
            Ok(Plan { name_bytes, payload_base, payload_bytes: placement.payload_bytes(), block_len })
        }
        _ => fail(Rule::PayloadSizeOverflow, AT_PAYLOAD_BYTES),
    }
}

fn emit(specs: &[TensorSpec<'_>], plan: &Plan, block: &mut [u8]) -> Result<()> {
    let count = specs.len();
    let named = specs.iter().any(|s| s.name.is_some());
    // Fallback not taken: counts over the u32 range are refused by the plan before this.
    let count32 = u32::try_from(count).unwrap_or(u32::MAX);
    put(block, 0, &Header::canonical(count32, plan.name_bytes, plan.payload_bytes, named).encode());

    let heap_at = HEADER_LEN.saturating_add(count.saturating_mul(DESCRIPTOR_LEN));
    let mut cursor = 0usize;
    // Names first, then layout names: the canonical heap order.
    let mut heap_off = |text: Option<&str>, block: &mut [u8]| -> Result<(u16, u16)> {
        let Some(t) = text else { return Ok((NO_NAME, 0)) };
        let off = u16::try_from(cursor).or(fail(Rule::FieldTooWide, heap_at))?;
        put(block, heap_at.saturating_add(cursor), t.as_bytes());
        cursor = cursor.saturating_add(t.len());
        // Fallback not taken: name lengths over u16 are refused by the plan before this.
        Ok((off, u16::try_from(t.len()).unwrap_or(u16::MAX)))
    };
    for (i, s) in specs.iter().enumerate() {
        let (off, len) = heap_off(s.name, block)?;
        set_heap_fields(block, i, AT_NAME_OFF, off, len);
    }
    for (i, s) in specs.iter().enumerate() {
        let (off, len) = heap_off(s.layout, block)?;
        set_heap_fields(block, i, AT_LAYOUT_OFF, off, len);
    }

    let mut placement = Placement::new();
    for (i, s) in specs.iter().enumerate() {
        let len = u64_from(s.data.len());
        // The plan placed these lengths without overflow.
        let gap_from = placement.payload_bytes();
        // Fallback not taken: the plan placed these lengths without overflow.
        let offset = placement.place(len).unwrap_or(u64::MAX);
        zero(block, plan.payload_base, gap_from, offset);
        let mut d = Descriptor {
            dtype: s.dtype.code(),
            // Fallback not taken: ranks over 8 are refused by the plan before this.
            rank: u8::try_from(s.shape.len()).unwrap_or(u8::MAX),
            block_size: s.block_size,
            byte_offset: offset,
            byte_length: len,
            ..Descriptor::default()
        };
        for (slot, dim) in d.shape.iter_mut().zip(s.shape) {
            *slot = *dim;
        }
        set_quant(&mut d, &s.quant, specs, i)?;
        let raw = d.encode();
        let at = HEADER_LEN.saturating_add(i.saturating_mul(DESCRIPTOR_LEN));
        // Keep the heap fields written above.
        put_descriptor(block, at, &raw);
        // Fallback not taken: the plan sized the block: the offset fits a usize.
        let payload_at = usize_from(offset).map(|o| plan.payload_base.saturating_add(o)).unwrap_or(usize::MAX);
        put(block, payload_at, s.data);
    }
    Ok(())
}

/// Zeroes payload bytes `from..to` (payload offsets) of a block whose payload region starts at `base`.
fn zero(block: &mut [u8], base: usize, from: u64, to: u64) {
    let at = |v: u64| usize_from(v).and_then(|v| v.checked_add(base));
    if let Some(gap) = at(from).zip(at(to)).and_then(|(a, b)| block.get_mut(a..b)) {
        gap.fill(0);
    }
}

/// Writes one (offset, length) heap pair of descriptor `i` at `field`.
fn set_heap_fields(block: &mut [u8], i: usize, field: usize, off: u16, len: u16) {
    let at = field_at(i, field);
    put(block, at, &off.to_le_bytes());
    put(block, at.saturating_add(2), &len.to_le_bytes());
}

/// Copies a descriptor except its heap fields (bytes 4..12), which the heap pass wrote.
fn put_descriptor(block: &mut [u8], at: usize, raw: &[u8; DESCRIPTOR_LEN]) {
    // Fallback not taken: a constant range inside the 128-byte descriptor.
    put(block, at, raw.get(..4).unwrap_or(&[]));
    // Fallback not taken: a constant range inside the 128-byte descriptor.
    put(block, at.saturating_add(12), raw.get(12..).unwrap_or(&[]));
}

fn set_quant(d: &mut Descriptor, q: &QuantSpec<'_>, specs: &[TensorSpec<'_>], i: usize) -> Result<()> {
    let (scheme, axis, group, scale, outer) = match *q {
        QuantSpec::None => (SCHEME_NONE, NO_AXIS, 0, NO_INDEX, NO_INDEX),
        QuantSpec::Scales { axis, group_size, scale } => {
            (SCHEME_SCALES, axis, group_size, resolve(scale, specs, i)?, NO_INDEX)
        }
        QuantSpec::ScalesOuter { axis, group_size, scale, outer } => {
            (SCHEME_SCALES_OUTER, axis, group_size, resolve(scale, specs, i)?, resolve(outer, specs, i)?)
        }
    };
    d.quant_scheme = scheme;
    d.quant_axis = axis;
    d.group_size = group;
    d.scale_index = scale;
    d.outer_index = outer;
    Ok(())
}

fn resolve(r: TensorRef<'_>, specs: &[TensorSpec<'_>], i: usize) -> Result<u32> {
    match r {
        TensorRef::Index(k) => Ok(k),
        TensorRef::Name(n) => specs
            .iter()
            .position(|s| s.name == Some(n))
            .and_then(|k| u32::try_from(k).ok())
            .map_or(fail(Rule::UnknownReference, field_at(i, AT_SCALE_INDEX)), Ok),
    }
}

fn put(block: &mut [u8], at: usize, bytes: &[u8]) {
    // checked_add (not saturating_add): a saturated end would give a shorter
    // `dst` and a copy_from_slice length panic path.
    let Some(end) = at.checked_add(bytes.len()) else { return };
    if let Some(dst) = block.get_mut(at..end) {
        dst.copy_from_slice(bytes);
    }
}

/// Orders a dict of tensors by key bytes, as the canonical layout requires.
/// Index references are turned into name references first, so they keep
/// pointing at the same tensors. Every tensor needs a name (its key).
pub fn sort_dict(specs: &mut [TensorSpec<'_>]) -> Result<()> {
    if let Some(i) = specs.iter().position(|s| s.name.is_none()) {
        return fail(Rule::DictKeyMissing, field_at(i, AT_NAME_LEN));
    }
    for i in 0..specs.len() {
        // Fallback not taken: i < specs.len().
        let q = specs.get(i).map(|s| s.quant).unwrap_or_default();
        let named = |r| name_ref(r, specs, i);
        let q = match q {
            QuantSpec::None => QuantSpec::None,
            QuantSpec::Scales { axis, group_size, scale } => {
                QuantSpec::Scales { axis, group_size, scale: named(scale)? }
            }
            QuantSpec::ScalesOuter { axis, group_size, scale, outer } => {
                QuantSpec::ScalesOuter { axis, group_size, scale: named(scale)?, outer: named(outer)? }
            }
        };
        if let Some(s) = specs.get_mut(i) {
            s.quant = q;
        }
    }
    specs.sort_unstable_by(|a, b| a.name.map(str::as_bytes).cmp(&b.name.map(str::as_bytes)));
    Ok(())
}

fn name_ref<'a>(r: TensorRef<'a>, specs: &[TensorSpec<'a>], i: usize) -> Result<TensorRef<'a>> {
    match r {
        TensorRef::Name(_) => Ok(r),
        TensorRef::Index(k) => Some(usize_from_u32(k))
            .and_then(|k| specs.get(k))
            .and_then(|s| s.name)
            .map_or(fail(Rule::UnknownReference, field_at(i, AT_SCALE_INDEX)), |n| Ok(TensorRef::Name(n))),
    }
}
