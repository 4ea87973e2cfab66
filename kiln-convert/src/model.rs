//! The converter's in-between form: a list of tensors whose payloads are
//! still in the input file (or, rarely, small owned buffers), plus string
//! metadata and the notes about what could not be carried as-is.

use kiln_nostd::DType;

use super::meta::Metadata;
use super::Input;

pub use kiln_host::foreign::{Format, LegacyGgml};

/// Where a tensor's payload comes from when the output is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Bytes `[offset, offset + len)` of the input file, copied as they are.
    File {
        /// Where the payload starts in the input.
        offset: u64,
    },
    /// Bytes of the input file holding big-endian elements of `width` bytes,
    /// byte-swapped to little-endian while they are copied.
    Swap {
        /// Where the payload starts in the input.
        offset: u64,
        /// The element width in bytes.
        width: usize,
    },
    /// Bytes of the input file copied through this process so their CRC-32
    /// can be checked: a stored `.npz` member's data, whose member CRC
    /// (`expect`) covers the `.npy` header too (`crc_so_far`, the CRC of the
    /// header bytes, and `header_len` of them).
    /// Elements of `swap` > 1 bytes are big-endian and byte-swapped after the CRC is taken.
    Checked(Box<Checked>),
    /// A compressed `.npz` member: entry `index`, after its `skip`-byte `.npy`
    /// header; the member's CRC-32 (`expect`) is checked over every byte.
    Zip(Box<Zip>),
    /// Bytes of a Kiln shard whose SHA-256 is recorded (the shard's digest
    /// table, checked against its manifest), copied through this process and
    /// hashed as they pass: a payload that does not match fails the copy, so a
    /// flipped byte is never carried into the output.
    Verified {
        /// Where the payload starts in the input.
        offset: u64,
        /// The digest the payload must have (boxed: one row per tensor stays small).
        digest: Box<[u8; 32]>,
    },
    /// A small owned buffer.
    Bytes(Box<[u8]>),
    /// A Fortran-order (column-major) NumPy array: its stored bytes,
    /// transposed to row-major order while they are copied, in bounded memory.
    Transposed(Box<Transposed>),
}

/// A Fortran-order array's payload ([`Source::Transposed`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transposed {
    /// The bytes as stored, column-major ([`Source::File`], [`Source::Swap`],
    /// [`Source::Checked`] or [`Source::Zip`]).
    pub inner: Source,
    /// The array's shape (the tensor's).
    pub shape: Vec<u64>,
    /// The element width in bytes.
    pub width: usize,
}

/// A stored `.npz` member's data, copied with its CRC-32 checked
/// ([`Source::Checked`]; boxed: one row per tensor stays small).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// Where the data starts in the input.
    pub offset: u64,
    /// The CRC-32 of the member's `.npy` header.
    pub crc_so_far: u32,
    /// The length of that header.
    pub header_len: u64,
    /// The member's CRC-32 as the archive records it.
    pub expect: u32,
    /// The member's name, for messages.
    pub member: String,
    /// The element width to byte-swap (1: none).
    pub swap: usize,
}

/// A compressed `.npz` member ([`Source::Zip`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Zip {
    /// The member's index in the archive.
    pub index: usize,
    /// Bytes of `.npy` header before the data.
    pub skip: u64,
    /// The member's CRC-32 as the archive records it.
    pub expect: u32,
    /// The member's name, for messages.
    pub member: String,
}

/// Scheme 1/2 quantization metadata carried from a Kiln input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantOut {
    /// The quantization scheme (1 or 2).
    pub scheme: u16,
    /// The quantized axis.
    pub axis: u16,
    /// Elements per scale group.
    pub group_size: u32,
    /// The scale tensor's name.
    pub scale: String,
    /// The outer scale tensor's name (scheme 2).
    pub outer: Option<String>,
}

/// A shape, inline up to rank 2 (most weights): one row per tensor, and a
/// model of 500,000 tensors must fit the converter's memory bound.
pub type Shape = smallvec::SmallVec<[u64; 2]>;

/// One tensor to write: kept small (one row per tensor; the rare parts are boxed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorOut {
    /// The tensor's name (unique in the output).
    pub name: Box<str>,
    /// Its Kiln dtype.
    pub dtype: DType,
    /// Its shape, slowest-varying dimension first.
    pub shape: Shape,
    /// Opaque layout name (opaque dtypes only).
    pub layout: Option<Box<str>>,
    /// Opaque block size in bytes (opaque dtypes only).
    pub block_size: u32,
    /// Scheme 1/2 quantization, carried from a Kiln input.
    pub quant: Option<Box<QuantOut>>,
    /// Where the payload comes from.
    pub source: Source,
    /// Payload length in bytes.
    pub len: u64,
    /// Which of [`Model::inputs`] the payload is read from (0 for single-file inputs).
    pub input: usize,
    /// The input shard it came from, 0-based (0 for unsharded inputs); a
    /// sharded input's assignment is kept by the shard planner.
    pub shard: usize,
}

impl TensorOut {
    /// A dense (closed-set) tensor whose payload is a range of the input.
    pub fn dense(name: impl Into<String>, dtype: DType, shape: Vec<u64>, offset: u64, len: u64) -> Self {
        TensorOut {
            name: name.into().into_boxed_str(),
            dtype,
            shape: Shape::from_vec(shape),
            layout: None,
            block_size: 0,
            quant: None,
            source: Source::File { offset },
            len,
            input: 0,
            shard: 0,
        }
    }

    /// An opaque tensor.
    pub fn opaque(
        name: impl Into<String>,
        code: u16,
        layout: impl Into<String>,
        block_size: u32,
        shape: Vec<u64>,
        source: Source,
        len: u64,
    ) -> Self {
        TensorOut {
            name: name.into().into_boxed_str(),
            dtype: DType::Opaque(code),
            shape: Shape::from_vec(shape),
            layout: Some(layout.into().into_boxed_str()),
            block_size,
            quant: None,
            source,
            len,
            input: 0,
            shard: 0,
        }
    }
}

/// Everything read from the input.
#[derive(Debug)]
pub struct Model {
    /// The input's format.
    pub format: Format,
    /// The tensors to write, in output order.
    pub tensors: Vec<TensorOut>,
    /// Metadata: the input's pairs and the converter's keys (Frozen dict order).
    pub metadata: Metadata,
    /// Human-readable notes: what was not carried, or carried differently.
    pub notes: Vec<String>,
    /// The input files the payloads are read from ([`TensorOut::input`]
    /// indexes it); empty until the caller attaches what it opened.
    pub inputs: Vec<Input>,
    /// The input was sharded (an index with its shards, a gguf-split set).
    pub sharded: bool,
    /// The gguf-split keys of a GGUF file (consumed, not copied into the metadata).
    pub split: Option<Split>,
    /// The first thing in a valid input that Kiln cannot hold, when it was
    /// read only to be checked ([`ReadOptions::kiln_limits`] false): `kiln
    /// validate`'s `kiln_limit`. Always `None` when converting, which refuses it.
    pub limit: Option<String>,
    /// [`ReadOptions::kiln_limits`], for [`Model::limit`].
    refuse_limits: bool,
}

/// The `split.*` keys of one file of a llama.cpp gguf-split set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// `split.no`: this file's position, 0-based.
    pub no: u64,
    /// `split.count`: the files in the set.
    pub count: u64,
    /// `split.tensors.count`: the tensors of the whole set.
    pub tensors: u64,
    /// The tensor infos this file holds (its header's count).
    pub file_tensors: u64,
}

impl Model {
    /// Notes an input that holds no tensor: its conversion succeeds and
    /// moves no weight, which a user should hear of rather than find later
    /// (`kiln convert` prints it, `kiln inspect` of the input shows it).
    pub fn note_if_no_weights(&mut self) {
        if self.tensors.is_empty() {
            self.notes.push(
                "no weights: the input holds no tensor Kiln converts (for ONNX: no initializer, and no Constant \
                 but shapes and axes the graph reads), so the output holds none"
                    .to_string(),
            );
        }
    }

    /// An empty model of `format` (its metadata within `opts`' budget).
    pub fn new(format: Format, opts: &ReadOptions) -> Self {
        let mut metadata = Metadata::new(opts.metadata_budget);
        if format != Format::Kiln {
            metadata.set_own(KEY_SOURCE_FORMAT, format.name().to_string());
        }
        Model {
            format,
            tensors: Vec::new(),
            metadata,
            notes: Vec::new(),
            inputs: Vec::new(),
            sharded: false,
            split: None,
            limit: None,
            refuse_limits: opts.kiln_limits,
        }
    }

    /// Something valid in the input that Kiln cannot hold (an
    /// [`error::KilnLimit`](super::error::KilnLimit)): when converting, the
    /// error to return; when the input is only checked, the first one is kept
    /// in [`Model::limit`] and reading goes on, so the rest is checked too.
    pub fn limit(&mut self, e: anyhow::Error) -> anyhow::Result<()> {
        if self.refuse_limits {
            return Err(e);
        }
        self.limit.get_or_insert_with(|| format!("{e:#}"));
        Ok(())
    }

    /// Adds a note about what was not carried as-is.
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// Total payload bytes.
    pub fn payload_bytes(&self) -> u64 {
        self.tensors.iter().fold(0u64, |n, t| n.saturating_add(t.len))
    }

    /// Unmaps every input once the headers are read: the payloads are copied
    /// through the file descriptors, and a mapped header would stay in this
    /// process's resident set while the output is written. A reader that
    /// kept payloads in the map (none does: buffered sources own their bytes)
    /// would not be affected either, as the map is only dropped, not reused.
    pub fn release_maps(&mut self) {
        for input in &mut self.inputs {
            input.map = None;
        }
    }
}

/// What the readers may spend and check.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// The whole metadata dictionary, in bytes (`--metadata-budget`).
    pub metadata_budget: u64,
    /// The largest `.npz` member, decompressed (`--max-member-size`).
    pub max_member: u64,
    /// The largest decompressed / compressed ratio of a `.npz` member (`--max-ratio`).
    pub max_ratio: u64,
    /// Check HK appendix lineage (off with `--no-verify-lineage`).
    pub verify_lineage: bool,
    /// ONNX: the graph is written too (`--onnx-graph`), so tensors Kiln
    /// cannot hold stay in it instead of refusing the conversion.
    pub onnx_graph: bool,
    /// Refuse what Kiln cannot hold (converting); false: note it in
    /// [`Model::limit`] and go on (`kiln validate`, `kiln inspect`).
    pub kiln_limits: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            metadata_budget: super::meta::DEFAULT_BUDGET,
            max_member: 64 << 30,
            max_ratio: 1000,
            verify_lineage: true,
            onnx_graph: false,
            kiln_limits: true,
        }
    }
}

/// Metadata keys the converter adds (never emitted back into safetensors).
pub const KEY_PREFIX: &str = "kiln.convert.";
/// The input format's name.
pub const KEY_SOURCE_FORMAT: &str = "kiln.convert.source_format";
/// How metadata values are written: `text` (verbatim strings) or `json`.
pub const KEY_VALUE_ENCODING: &str = "kiln.convert.value_encoding";
/// JSON object: metadata key -> the source's value type (`u32`, `string`, `array<f32>`, ...).
pub const KEY_SOURCE_TYPES: &str = "kiln.convert.source_types";

#[cfg(test)]
mod tests {
    use super::*;

    /// The converter holds one row per tensor: 500,000 of them must fit
    /// its memory bound (2x the index + 16 MiB; kiln-cli/README.md).
    #[test]
    fn a_tensor_row_stays_small() {
        eprintln!("TensorOut {} Source {} Shape {}", size_of::<TensorOut>(), size_of::<Source>(), size_of::<Shape>());
        assert!(size_of::<TensorOut>() <= 120, "{}", size_of::<TensorOut>());
    }
}
