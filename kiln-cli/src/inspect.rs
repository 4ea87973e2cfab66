//! `kiln inspect`: a summary of a checked tensor directory, built once and
//! rendered as a table or as JSON by [`crate::output`].

use kiln_model::Metadata;
use kiln_nostd::dequant::quant::SCHEME_SCALES_OUTER;
use kiln_nostd::{DType, Directory, Tensor};
use serde::Serialize;

/// The header facts and every tensor of one directory.
#[derive(Debug, Serialize)]
pub struct Summary<'a> {
    /// The path as given.
    pub file: String,
    /// The flag byte (bit 0 names, bit 1 little-endian).
    pub flags: u8,
    /// True when the tensors are named (flag bit 0).
    pub named: bool,
    /// Number of tensors.
    pub tensor_count: u32,
    /// Length of the name heap.
    pub name_bytes: u32,
    /// Length of the payload region, gaps included.
    pub payload_bytes: u64,
    /// tensor_count * 128 + name_bytes.
    pub directory_bytes: u64,
    /// Total block length (the file length for a valid standalone block).
    pub block_length: usize,
    /// Absolute offset of the payload region.
    pub payload_start: usize,
    /// A model file's metadata in key order (the padding key hidden);
    /// absent for a plain directory, so its JSON is unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Vec<(&'a str, &'a str)>>,
    /// The tensors in descriptor order.
    pub tensors: Vec<TensorInfo<'a>>,
}

/// One tensor.
#[derive(Debug, Serialize)]
pub struct TensorInfo<'a> {
    /// Position in descriptor order.
    pub index: usize,
    /// The name, or null.
    pub name: Option<&'a str>,
    /// The spec's dtype name (`"opaque"` for opaque codes).
    pub dtype: &'static str,
    /// The wire dtype code.
    pub dtype_code: u16,
    /// Dimensions (`[]` for a scalar).
    pub shape: Vec<u64>,
    /// Number of elements (1 for a scalar).
    pub element_count: u64,
    /// Absolute offset of the payload in the file.
    pub byte_offset: usize,
    /// Payload length in bytes.
    pub byte_length: usize,
    /// Layout name of an opaque dtype, else null.
    pub layout: Option<&'a str>,
    /// Block size of an opaque dtype, else null.
    pub block_size: Option<u32>,
    /// Quantization metadata, or null for scheme 0.
    pub quant: Option<QuantInfo>,
}

/// Quantization metadata with the scale tensors as indices.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct QuantInfo {
    /// 1 or 2.
    pub scheme: u16,
    /// `"scales"` (scheme 1) or `"scales+outer"` (scheme 2).
    pub kind: &'static str,
    /// The quantized dimension.
    pub axis: usize,
    /// Elements per scale.
    pub group_size: u32,
    /// Index of the scale tensor.
    pub scale: usize,
    /// Index of the outer f32 scale (scheme 2), else null.
    pub outer: Option<usize>,
}

impl<'a> Summary<'a> {
    /// Summarises a checked directory read from `file`.
    pub fn new(file: String, dir: &Directory<'a>) -> Self {
        let h = dir.header();
        Summary {
            file,
            flags: h.flags,
            named: h.has_names(),
            tensor_count: h.tensor_count,
            name_bytes: h.name_bytes,
            payload_bytes: h.payload_bytes,
            directory_bytes: h.directory_bytes,
            block_length: dir.block_len(),
            payload_start: dir.payload_start(),
            metadata: None,
            tensors: tensor_table(dir),
        }
    }

    /// The same summary with a model file's metadata.
    pub fn with_metadata(mut self, metadata: Option<Metadata<'a>>) -> Self {
        self.metadata = metadata.map(|m| m.iter().collect());
        self
    }
}

/// The tensors of a checked directory in descriptor order: the `tensors`
/// array of `kiln inspect --json`, also what `kiln decode` prints for a
/// `tensors` value. Offsets are absolute in the file.
pub fn tensor_table<'a>(dir: &Directory<'a>) -> Vec<TensorInfo<'a>> {
    dir.iter().map(|t| TensorInfo::new(&t)).collect()
}

impl<'a> TensorInfo<'a> {
    fn new(t: &Tensor<'a>) -> Self {
        let dtype = t.dtype();
        TensorInfo {
            index: t.index(),
            name: t.name(),
            dtype: dtype.name(),
            dtype_code: dtype.code(),
            shape: t.shape().to_vec(),
            element_count: t.element_count(),
            byte_offset: t.absolute_offset(),
            byte_length: t.byte_len(),
            layout: t.layout(),
            block_size: dtype.is_opaque().then(|| t.block_size()),
            quant: t.quant().map(|q| QuantInfo {
                scheme: q.scheme,
                kind: if q.scheme == SCHEME_SCALES_OUTER { "scales+outer" } else { "scales" },
                axis: q.axis,
                group_size: q.group_size,
                scale: q.scale.index(),
                outer: q.outer.map(|o| o.index()),
            }),
        }
    }

    /// The dtype as shown in the table: the spec name, or `opaque:CODE`.
    pub fn dtype_label(&self) -> String {
        match DType::from_code(self.dtype_code) {
            Some(DType::Opaque(code)) => format!("opaque:{code}"),
            _ => self.dtype.to_owned(),
        }
    }

    /// `[2, 3]`, or `[]` for a scalar.
    pub fn shape_label(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(u64::to_string).collect();
        format!("[{}]", dims.join(", "))
    }

    /// `scales(axis=0,group=32,scale=#1)`, `scales+outer(...,outer=#2)`, or `-`.
    pub fn quant_label(&self) -> String {
        let Some(q) = &self.quant else { return "-".to_owned() };
        let outer = q.outer.map(|o| format!(",outer=#{o}")).unwrap_or_default();
        format!("{}(axis={},group={},scale=#{}{outer})", q.kind, q.axis, q.group_size, q.scale)
    }

    /// `Q4_K/18` for an opaque layout with its block size, else `-`.
    pub fn layout_label(&self) -> String {
        match (self.layout, self.block_size) {
            (Some(layout), Some(size)) => format!("{layout}/{size}"),
            (Some(layout), None) => layout.to_owned(),
            _ => "-".to_owned(),
        }
    }
}
