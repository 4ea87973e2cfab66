//! `kiln._kiln`: the native half of the `kiln` Python package.
//!
//! Every check is `kiln_nostd`'s: this crate borrows the caller's bytes
//! (a buffer export held for the length of the call), runs the core's
//! parser on them and hands NumPy the offsets the core proved safe. The
//! Python half (`python/kiln`) only maps files and picks dtypes.

use std::path::{Path, PathBuf};

use kiln_host::Fault;
use kiln_model::{self as model, host, Error, Kind, Manifest, Metadata, Model, ModelWriter, Trust, PAD_KEY};
use kiln_nostd::frozen::{Reader, Schema};
use kiln_nostd::{
    directory::{scratch_len, DEFAULT_CAP},
    dtype::Width,
    writer::{QuantSpec, TensorRef},
    DType, Directory, Limits, TensorSpec,
};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

mod buffer;
mod convert;
mod frozen;
mod onnx;
mod sharded;

use buffer::Held;

pyo3::create_exception!(
    kiln,
    KilnError,
    PyValueError,
    "A rejected input: `code` (FRAME, LIMIT, EOF, TYPE, UTF8, TRAILING, SCHEMA, DIGEST, SHARD, PATH), \
     `offset` (absolute byte offset of the field that broke the rule, in `file` when that is set) and `rule` \
     (the rule's stable id, as `kiln validate --json` prints it); `description` is the rule in words and \
     `str(err)` the CLI's message. `file` is the shard's file name for a fault in a shard of a sharded model \
     (None: the file or buffer given) and `tensor` the name of the tensor at fault, where one is."
);
pyo3::create_exception!(
    kiln,
    TypeTextError,
    PyValueError,
    "Type text that is not canonical Kiln type text; `code`, `offset` (a byte of the text) and `rule` as \
     for KilnError."
);

/// Node capacity for type text (the CLI's).
pub(crate) const NODES: usize = 2048;

/// The module's `KilnError` for a core or model-file error.
pub(crate) fn kiln_error(py: Python<'_>, e: impl Into<Error>) -> PyErr {
    kiln_error_in(py, e.into(), None, None)
}

/// `KilnError` for a fault in shard file `file` (None: the file given),
/// concerning tensor `tensor`.
pub(crate) fn kiln_error_in(py: Python<'_>, e: Error, file: Option<&str>, tensor: Option<&str>) -> PyErr {
    let whose = file.map(|f| format!(" of {f}")).unwrap_or_default();
    let which = tensor.map(|t| format!(" (tensor {t})")).unwrap_or_default();
    let msg = format!("{} at byte {}{whose}{which}: {}", e.code(), e.offset_u64(), e.rule().description());
    let err = with_fields(py, KilnError::new_err(msg), e);
    let v = err.value(py);
    match v.setattr("file", file).and_then(|()| v.setattr("tensor", tensor)) {
        Ok(()) => err,
        Err(other) => other,
    }
}

/// `KilnError` for a fault the host crate named: its shard file and the
/// tensor, by its name (its index when it has none).
pub(crate) fn fault_error(py: Python<'_>, f: Fault) -> PyErr {
    let tensor = f.tensor.map(|t| t.name.unwrap_or_else(|| t.index.to_string()));
    kiln_error_in(py, f.error, f.file.as_deref(), tensor.as_deref())
}

/// `KilnError` for a fault in the model file or directory `buf` (a DIGEST
/// error names its tensor).
pub(crate) fn file_error(py: Python<'_>, buf: &[u8], e: impl Into<Error>) -> PyErr {
    fault_error(py, Fault::in_file(buf, e.into()))
}

pub(crate) fn type_text_error(py: Python<'_>, text: &str, e: impl Into<Error>) -> PyErr {
    let e = e.into();
    let quoted: String = text.chars().take(120).collect();
    let msg = format!(
        "invalid type text {quoted:?}: {} at byte {} of the type text: {}",
        e.code(),
        e.offset(),
        e.rule().description()
    );
    with_fields(py, TypeTextError::new_err(msg), e)
}

fn with_fields(py: Python<'_>, err: PyErr, e: Error) -> PyErr {
    let v = err.value(py);
    let set = || -> PyResult<()> {
        v.setattr("code", e.code().as_str())?;
        v.setattr("offset", e.offset_u64())?;
        v.setattr("rule", e.rule().id())?;
        v.setattr("description", e.rule().description())?;
        Ok(())
    };
    match set() {
        Ok(()) => err,
        Err(other) => other,
    }
}

fn limits(count_cap: u32, byte_cap: u32) -> Limits {
    Limits::DEFAULT.with_count_cap(count_cap).with_byte_cap(byte_cap)
}

/// A model file by content, else a plain directory, checked by the host
/// crate (name scratch, a random seed; `verify`: step 9d for a model file
/// that carries digests): `kiln validate`'s check of one file.
pub(crate) fn open_checked(
    buf: &[u8],
    limits: Limits,
    verify: bool,
) -> Result<(Option<Metadata<'_>>, Directory<'_>), Fault> {
    kiln_host::check_file(buf, limits, verify)
}

/// Scratch for a manifest of `buf.len()` bytes (its entries take at least
/// 16 bytes each), within the count cap.
pub(crate) fn manifest_scratch(buf: &[u8], limits: Limits) -> Vec<u32> {
    host::manifest_scratch(buf, &limits)
}

/// A standalone directory block (`--type tensors`).
fn open_tensors(buf: &[u8], limits: Limits) -> Result<Directory<'_>, Error> {
    let mut scratch = host::name_scratch(buf, 0, &limits).unwrap_or_default();
    Ok(host::parser(limits, &mut scratch).parse(buf)?)
}

/// Runs `f` on the held bytes, without the GIL when nobody can change them.
fn with_bytes<'b, T: Send>(py: Python<'_>, held: &'b Held, f: impl FnOnce(&'b [u8]) -> T + Send) -> T {
    let bytes = held.bytes();
    if held.readonly() && bytes.len() >= 1 << 16 {
        py.detach(|| f(bytes))
    } else {
        f(bytes)
    }
}

/// Checks `data` (any contiguous buffer) and raises `KilnError` on the first
/// broken rule. Without `type_text`: a model file by content, else a plain
/// directory (`kiln validate FILE`). `"tensors"` unframed: one standalone
/// directory block. Any other type: one Frozen value of that type.
/// A manifest (by content) is checked alone (steps M1 to M5; its shards
/// are files, see `Sharded`). `verify`: compare digests (step 9d).
/// Returns what was found (`directory`, a record kind's name, or `value`)
/// and whether every digest was compared (`kiln_model::Kind::has_digests`).
#[pyfunction]
#[pyo3(signature = (data, type_text=None, framed=false, count_cap=DEFAULT_CAP, byte_cap=DEFAULT_CAP, verify=true))]
fn validate(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    type_text: Option<&str>,
    framed: bool,
    count_cap: u32,
    byte_cap: u32,
    verify: bool,
) -> PyResult<(&'static str, bool)> {
    let held = Held::new(data)?;
    let limits = limits(count_cap, byte_cap);
    let kind = Kind::of(held.bytes());
    let verdict = match (type_text, framed) {
        (None, false) if kind == Some(Kind::Manifest) => with_bytes(py, &held, |b| {
            let mut scratch = manifest_scratch(b, limits);
            // The manifest alone: its shards (and their digests) are files of their own.
            Manifest::parse_with(b, &limits, Some(&mut scratch)).map(|_| ("manifest", false))
        }),
        (None, false) => {
            let verdict = with_bytes(py, &held, |b| open_checked(b, limits, verify));
            verdict.map_err(|f| fault_error(py, f))?;
            return Ok(match kind {
                Some(k) => (k.name(), verify && k.has_digests()),
                None => ("directory", false),
            });
        }
        (Some("tensors"), false) => with_bytes(py, &held, |b| open_tensors(b, limits).map(|_| ("directory", false))),
        (text, framed) => {
            let text = text.unwrap_or("tensors");
            let schema = Box::new(Schema::<NODES>::parse(text).map_err(|e| type_text_error(py, text, e))?);
            let reader = Reader::new().limits(limits).framed(framed);
            with_bytes(py, &held, |b| reader.validate(b, &schema).map(|()| ("value", false)).map_err(Error::from))
        }
    };
    verdict.map_err(|e| kiln_error(py, e))
}

/// A signed model file or manifest checked against a trusted Ed25519
/// public key (32 bytes): key, release (`target`, `newer_than`), the
/// signature, then (a model file) every digest and rule. Returns
/// (version, target, signer's key); raises `KilnError` (code SIGNATURE and
/// its rule for a fault of the trust checks), `ValueError` for a key that
/// is not a usable Ed25519 public key.
#[pyfunction]
#[pyo3(signature = (data, public_key, target=None, newer_than=None))]
fn verify_signed(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    public_key: &[u8],
    target: Option<&str>,
    newer_than: Option<u64>,
) -> PyResult<(u64, String, Vec<u8>)> {
    let key: &[u8; 32] =
        public_key.try_into().map_err(|_| PyValueError::new_err("an Ed25519 public key is 32 bytes"))?;
    let mut trust = Trust::new(key).ok_or_else(|| PyValueError::new_err("not a usable Ed25519 public key"))?;
    if let Some(t) = target {
        trust = trust.target(t);
    }
    if let Some(v) = newer_than {
        trust = trust.newer_than(v);
    }
    let held = Held::new(data)?;
    let verdict = with_bytes(py, &held, |b| -> Result<_, Error> {
        let sig = if Kind::of(b) == Some(Kind::Manifest) {
            let mut scratch = manifest_scratch(b, Limits::DEFAULT);
            Manifest::parse_trusted(b, &Limits::DEFAULT, Some(&mut scratch), &trust)?.signature()
        } else {
            let mut scratch = host::scratch_for(b, &Limits::DEFAULT);
            Model::parse_trusted_with(b, &trust, host::parser(Limits::DEFAULT, &mut scratch))?.signature()
        };
        Ok(sig.map(|s| (s.release.version, s.release.target.to_owned(), s.key.to_vec())))
    });
    match verdict {
        Ok(Some(found)) => Ok(found),
        Ok(None) => Err(pyo3::exceptions::PyRuntimeError::new_err("an accepted signed model has a signature")),
        Err(e) => Err(file_error(py, held.bytes(), e)),
    }
}

/// The tensor table as tuples: (name, dtype code, shape, absolute offset,
/// byte length, layout, block size, quant), quant being None or
/// (scheme, axis, group_size, scale index, outer index or None).
pub(crate) fn table<'py>(py: Python<'py>, dir: &Directory<'_>) -> PyResult<Bound<'py, PyList>> {
    let rows = PyList::empty(py);
    for t in dir.iter() {
        let quant = t.quant().map(|q| (q.scheme, q.axis, q.group_size, q.scale.index(), q.outer.map(|o| o.index())));
        let row = (
            t.name(),
            t.dtype().code(),
            PyTuple::new(py, t.shape())?,
            t.absolute_offset(),
            t.byte_len(),
            t.layout(),
            t.block_size(),
            quant,
        );
        rows.append(row)?;
    }
    Ok(rows)
}

fn metadata_dict<'py>(py: Python<'py>, m: &Metadata<'_>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in m.iter() {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// (metadata dict or None, padding, directory offset, tensor table).
type Inspection<'py> = (Option<Bound<'py, PyDict>>, usize, usize, Bound<'py, PyList>);

/// Checks `data` like `validate(data)` (digests compared when `verify`) and
/// returns (metadata dict or None, padding, directory offset, tensor table).
#[pyfunction]
#[pyo3(signature = (data, verify=false))]
fn inspect<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, verify: bool) -> PyResult<Inspection<'py>> {
    let held = Held::new(data)?;
    let (meta, dir) =
        with_bytes(py, &held, |b| open_checked(b, Limits::DEFAULT, verify)).map_err(|f| fault_error(py, f))?;
    let padding = meta.map_or(0, |m| m.padding());
    let meta = meta.map(|m| metadata_dict(py, &m)).transpose()?;
    Ok((meta, padding, dir.start(), table(py, &dir)?))
}

/// How tensors become arrays: the NumPy dtype per closed-set code (index 0:
/// the raw `uint8` used for packed and opaque tensors, and wherever the
/// entry is None).
pub(crate) struct ArrayMaker<'py> {
    frombuffer: Bound<'py, PyAny>,
    empty: Bound<'py, PyAny>,
    dtypes: Vec<Bound<'py, PyAny>>,
    raw: Bound<'py, PyAny>,
}

impl<'py> ArrayMaker<'py> {
    pub(crate) fn new(py: Python<'py>, dtypes: &Bound<'py, PyTuple>) -> PyResult<Self> {
        let np = py.import("numpy")?;
        let raw = dtypes.get_item(0)?;
        if raw.is_none() {
            return Err(PyValueError::new_err("dtypes[0] must be the raw uint8 dtype"));
        }
        Ok(ArrayMaker {
            frombuffer: np.getattr("frombuffer")?,
            empty: np.getattr("empty")?,
            dtypes: dtypes.iter().collect(),
            raw,
        })
    }

    /// The array for `t`: a read-only view of `owner`'s bytes (which start
    /// at `base` in memory) when the payload is aligned for its elements on
    /// a little-endian host; a read-only copy otherwise.
    pub(crate) fn array(
        &self,
        py: Python<'py>,
        owner: &Bound<'py, PyAny>,
        base: usize,
        writable_source: bool,
        t: &kiln_nostd::Tensor<'_>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.build(py, owner, base, writable_source, t.dtype(), t.shape(), t.absolute_offset(), t.bytes())
    }

    /// [`array`](Self::array) from the table's facts: `payload` is the
    /// tensor's bytes, at offset `at` of `owner`'s buffer.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build(
        &self,
        py: Python<'py>,
        owner: &Bound<'py, PyAny>,
        base: usize,
        writable_source: bool,
        dtype: DType,
        shape: &[u64],
        at: usize,
        payload: &[u8],
    ) -> PyResult<Bound<'py, PyAny>> {
        let dense = match dtype.width() {
            Width::Bytes(w) => self.dtypes.get(usize::from(dtype.code())).filter(|d| !d.is_none()).map(|d| (d, w)),
            Width::Nibble | Width::Opaque => None,
        };
        let (dtype, shape, width) = match dense {
            Some((d, w)) => (d, PyTuple::new(py, shape)?, usize::from(w)),
            None => (&self.raw, PyTuple::new(py, [payload.len()])?, 1),
        };
        let little = cfg!(target_endian = "little");
        if payload.is_empty() {
            let a = self.empty.call1((shape, dtype))?;
            a.getattr("flags")?.setattr("writeable", false)?;
            return Ok(a);
        }
        let count = payload.len() / width;
        // `frombuffer`, not `ndarray(buffer=...)`: it keeps a buffer export
        // (a memoryview) for the array's life, so the bytes cannot be
        // unmapped or resized under the array.
        let flat = if (little || width == 1) && base.wrapping_add(at) % width == 0 {
            let a = self.frombuffer.call1((owner, dtype, count, at))?;
            if writable_source {
                a.getattr("flags")?.setattr("writeable", false)?;
            }
            a
        } else {
            // A bytes object's data is 16-aligned: the copy is aligned.
            let copy = PyBytes::new(py, payload);
            let a = self.frombuffer.call1((copy, dtype, count, 0))?;
            if little || width == 1 {
                a
            } else {
                let native = dtype.call_method1("newbyteorder", ("=",))?;
                let swapped = a.call_method1("astype", (native,))?;
                swapped.getattr("flags")?.setattr("writeable", false)?;
                swapped
            }
        };
        let arr = if shape.len() == 1 { flat } else { flat.call_method1("reshape", (shape,))? };
        Ok(arr)
    }
}

/// One array from facts the core reported earlier for `data` (which must
/// be the same immutable buffer, e.g. a read-only memory map): used by
/// `safe_open`, which parses once and builds arrays on demand.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn make_array<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    code: u16,
    shape: Vec<u64>,
    offset: usize,
    byte_len: usize,
    dtypes: &Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyAny>> {
    let maker = ArrayMaker::new(py, dtypes)?;
    let held = Held::new(data)?;
    let dtype = DType::from_code(code).ok_or_else(|| PyValueError::new_err(format!("unknown dtype code {code}")))?;
    let payload = offset
        .checked_add(byte_len)
        .and_then(|end| held.bytes().get(offset..end))
        .ok_or_else(|| PyValueError::new_err("the tensor lies outside the buffer"))?;
    maker.build(py, data, held.address(), !held.readonly(), dtype, &shape, offset, payload)
}

/// The key a tensor gets in a dict: its name, or its index for unnamed tensors.
pub(crate) fn key_of(t: &kiln_nostd::Tensor<'_>) -> String {
    t.name().map_or_else(|| t.index().to_string(), str::to_owned)
}

/// Checks `data` like `validate(data)` and returns (metadata dict or None,
/// {name: array}): arrays viewing `data`'s bytes (see `ArrayMaker::array`).
#[pyfunction]
#[pyo3(signature = (data, dtypes, verify=false))]
fn load_arrays<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    dtypes: &Bound<'py, PyTuple>,
    verify: bool,
) -> PyResult<(Option<Bound<'py, PyDict>>, Bound<'py, PyDict>)> {
    let maker = ArrayMaker::new(py, dtypes)?;
    let held = Held::new(data)?;
    let (meta, dir) =
        with_bytes(py, &held, |b| open_checked(b, Limits::DEFAULT, verify)).map_err(|f| fault_error(py, f))?;
    let out = PyDict::new(py);
    for t in dir.iter() {
        let arr = maker.array(py, data, held.address(), !held.readonly(), &t)?;
        out.set_item(key_of(&t), arr)?;
    }
    let meta = meta.map(|m| metadata_dict(py, &m)).transpose()?;
    Ok((meta, out))
}

/// One tensor to write, as the Python half prepares it: (name, dtype code,
/// shape, an object exporting the little-endian wire bytes, layout, block
/// size, quantization).
type SpecIn<'py> = (String, u16, Vec<u64>, Bound<'py, PyAny>, Option<String>, u32, Option<QuantIn>);

/// Quantization as the Python half gives it: (axis, group size, the scale
/// tensor's name, the outer scale tensor's name for scheme 2).
type QuantIn = (u16, u32, String, Option<String>);

/// The held buffers and names behind a list of `TensorSpec`s.
pub(crate) struct Specs {
    held: Vec<Held>,
    names: Vec<String>,
    dtypes: Vec<DType>,
    shapes: Vec<Vec<u64>>,
    layouts: Vec<(Option<String>, u32)>,
    quants: Vec<Option<QuantIn>>,
}

impl Specs {
    pub(crate) fn new(tensors: Vec<SpecIn<'_>>) -> PyResult<Specs> {
        let mut s =
            Specs { held: vec![], names: vec![], dtypes: vec![], shapes: vec![], layouts: vec![], quants: vec![] };
        for (name, code, shape, data, layout, block_size, quant) in tensors {
            let dtype =
                DType::from_code(code).ok_or_else(|| PyValueError::new_err(format!("unknown dtype code {code}")))?;
            s.held.push(Held::new(&data)?);
            s.names.push(name);
            s.dtypes.push(dtype);
            s.shapes.push(shape);
            s.layouts.push((layout, block_size));
            s.quants.push(quant);
        }
        Ok(s)
    }

    /// The specs, named or not; named ones sorted by name bytes when `sort`
    /// (a dict's canonical order), else in the order given.
    pub(crate) fn specs(&self, named: bool, sort: bool) -> PyResult<Vec<TensorSpec<'_>>> {
        let mut specs: Vec<TensorSpec<'_>> = (0..self.names.len())
            .map(|i| {
                let (layout, block_size) = &self.layouts[i];
                let mut t = TensorSpec::new(self.dtypes[i], &self.shapes[i], self.held[i].bytes());
                t.layout = layout.as_deref();
                t.block_size = *block_size;
                // Scale tensors by name: the reference survives the sort below.
                t = match &self.quants[i] {
                    None => t,
                    Some((axis, group_size, scale, None)) => t.quantized(QuantSpec::Scales {
                        axis: *axis,
                        group_size: *group_size,
                        scale: TensorRef::Name(scale),
                    }),
                    Some((axis, group_size, scale, Some(outer))) => t.quantized(QuantSpec::ScalesOuter {
                        axis: *axis,
                        group_size: *group_size,
                        scale: TensorRef::Name(scale),
                        outer: TensorRef::Name(outer),
                    }),
                };
                if named {
                    t = t.named(&self.names[i]);
                }
                t
            })
            .collect();
        if named && sort {
            specs.sort_by(|a, b| a.name.map(str::as_bytes).cmp(&b.name.map(str::as_bytes)));
        }
        Ok(specs)
    }
}

/// The metadata pairs sorted by key bytes, refusing the padding key and repeats.
pub(crate) fn sorted_meta(metadata: &[(String, String)]) -> PyResult<Vec<(&str, &str)>> {
    let mut meta: Vec<(&str, &str)> = metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    if meta.iter().any(|(k, _)| *k == PAD_KEY) {
        return Err(PyValueError::new_err(format!("metadata key {PAD_KEY:?} is reserved for alignment padding")));
    }
    meta.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    if let Some(w) = meta.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(PyValueError::new_err(format!("metadata key {:?} appears twice", w[0].0)));
    }
    Ok(meta)
}

/// `WriteError` as a Python exception, naming `path` for I/O errors.
pub(crate) fn write_error(py: Python<'_>, path: &Path, e: WriteError) -> PyErr {
    match e {
        WriteError::Kiln(e) => kiln_error(py, e),
        WriteError::Io(e) => PyOSError::new_err(format!("{}: {e}", path.display())),
    }
}

/// Writes a model file of `tensors` (sorted by name unless `sort` is false)
/// and `metadata` with
/// the payload region at a multiple of `align` bytes in the file, checked by
/// the core before it is handed out: a digests record (a SHA-256 per
/// tensor) unless `digests` is false (a plain record). Returns the bytes,
/// or None after writing `path` (a temporary file renamed over it). With
/// `path` and `max_shard_size`, a model whose payloads exceed it (or whose
/// names do not fit one block) is written as a sharded model instead: the
/// manifest at `path`, the shards beside it (see `sharded::save_sharded`).
/// Files of at least `stream_min` bytes are streamed from the arrays'
/// memory (see `write_streamed`); the default is the crate's threshold.
#[pyfunction]
#[pyo3(signature = (tensors, metadata, path=None, align=4096, sort=true, digests=true, max_shard_size=None, stream_min=STREAM_MIN))]
#[allow(clippy::too_many_arguments)]
fn save<'py>(
    py: Python<'py>,
    tensors: Vec<SpecIn<'py>>,
    metadata: Vec<(String, String)>,
    path: Option<PathBuf>,
    align: u64,
    sort: bool,
    digests: bool,
    max_shard_size: Option<u64>,
    stream_min: usize,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let held = Specs::new(tensors)?;
    let specs = held.specs(true, sort)?;
    let meta = sorted_meta(&metadata)?;
    if let Some(path) = &path {
        if let Some(plan) = sharded::plan(&specs, max_shard_size)? {
            if !digests {
                return Err(PyValueError::new_err(
                    "a sharded model always carries digests (digests=False with a model that is sharded)",
                ));
            }
            sharded::save_sharded(py, &specs, &plan, &meta, path, align)?;
            return Ok(None);
        }
    }
    let writer = ModelWriter::new().align(align).digests(digests);
    let len = writer.encoded_len(&meta, &specs).map_err(|e| kiln_error(py, e))?;
    // Name scratch: the writer's checks then take linear time.
    let mut scratch = vec![0u32; scratch_len(u32::try_from(specs.len()).unwrap_or(u32::MAX))];
    let Some(path) = path else {
        let mut failure = None;
        let bytes = PyBytes::new_with(py, len, |out| {
            if let Err(e) = writer.write_with_scratch(&meta, &specs, out, Some(&mut scratch)) {
                failure = Some(e);
            }
            Ok(())
        })?;
        return match failure {
            Some(e) => Err(kiln_error(py, e)),
            None => Ok(Some(bytes)),
        };
    };
    let written = if len >= stream_min {
        // The arrays' bytes are read without the GIL (one write and one hash
        // each): a thread that changes an array during the save leaves a
        // file whose digest check fails on load, never an unchecked layout.
        py.detach(|| write_streamed(&writer, &meta, &specs, &path, &mut scratch))
    } else {
        // Small files: built and checked in memory, then one write.
        let mut buf = vec![0u8; len];
        writer.write_with_scratch(&meta, &specs, &mut buf, Some(&mut scratch)).map_err(|e| kiln_error(py, e))?;
        write_bytes(&path, &buf, false)
    };
    written.map_err(|e| write_error(py, &path, e))?;
    // A sharded model saved to this name before: its shards go now.
    sharded::remove_stale_shards(&path, None).map_err(|e| write_error(py, &path, WriteError::Io(e)))?;
    Ok(None)
}

/// Files at least this long are streamed to the file from the arrays'
/// memory (small ones are built in a buffer and written at once: fewer
/// calls). Streaming writes each payload once, from where it lies, with no
/// buffer or map of the file's size: at 1 GiB, one `write` per array took
/// 0.5 s against 1.5-1.7 s for copies into a populated map of the file
/// (`bench/write_paths.py`).
const STREAM_MIN: usize = 32 << 20;

pub(crate) enum WriteError {
    Kiln(Error),
    Io(std::io::Error),
}

/// The model file of `specs` streamed to a temporary file beside `path` by
/// the model writer (`ModelWriter::write_to`: head and directory, then one
/// write per payload straight from its memory while threads hash them, then
/// the digest table), checked as `ModelWriter::write` checks what it writes
/// (the file, mapped, parsed by the core), then renamed over `path`. (This
/// and `buffer` are the crate's only `unsafe` code.)
fn write_streamed(
    writer: &ModelWriter,
    meta: &[(&str, &str)],
    specs: &[TensorSpec<'_>],
    path: &Path,
    scratch: &mut [u32],
) -> Result<(), WriteError> {
    write_atomic(path, false, |file| {
        writer.write_to(meta, specs, file).map_err(|e| match e {
            model::WriteToError::Model(e) => WriteError::Kiln(e),
            model::WriteToError::Io(e) => WriteError::Io(e),
        })?;
        // SAFETY: a file this call created under a unique name and holds
        // open; nothing else writes or truncates it while the map lives.
        let map = unsafe { memmap2::Mmap::map(&*file) }.map_err(WriteError::Io)?;
        writer.check(&map, Some(scratch)).map_err(WriteError::Kiln)
    })
}

/// `bytes` written to `path` through [`write_atomic`].
pub(crate) fn write_bytes(path: &Path, bytes: &[u8], sync: bool) -> Result<(), WriteError> {
    use std::io::Write;
    write_atomic(path, sync, |file| file.write_all(bytes).map_err(WriteError::Io))
}

/// Runs `body` on a new temporary file next to `path` (opened to read and
/// write) and renames it over `path`: a reader never sees half a file, and
/// arrays still mapping the old file keep its bytes. When `body` or any
/// step fails, the temporary file is removed. `sync`: the file's bytes
/// reach the disk (fsync) before the rename.
pub(crate) fn write_atomic(
    path: &Path,
    sync: bool,
    body: impl FnOnce(&mut std::fs::File) -> Result<(), WriteError>,
) -> Result<(), WriteError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| {
        WriteError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file"))
    })?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}-{n}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let file =
        std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&tmp).map_err(WriteError::Io)?;
    let result = (|| {
        let mut file = file;
        body(&mut file)?;
        if sync {
            file.sync_all().map_err(WriteError::Io)?;
        }
        // Closed before the rename (and before the removal below on a
        // failure): some systems refuse to rename or remove an open file.
        drop(file);
        std::fs::rename(&tmp, path).map_err(WriteError::Io)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The record type `data` starts as (`"plain"`, `"digests"`, `"shard"`,
/// `"manifest"`), or None (a plain directory or anything else).
#[pyfunction]
fn kind(data: &Bound<'_, PyAny>) -> PyResult<Option<&'static str>> {
    let held = Held::new(data)?;
    Ok(Kind::of(held.bytes()).map(Kind::name))
}

/// The format of a foreign file `data` (the bytes of the file at `path`)
/// and what to do with it: the host crate's table, as `kiln validate` names
/// it; None for Kiln (and for bytes no entry matches).
#[pyfunction]
fn foreign(path: PathBuf, data: &Bound<'_, PyAny>) -> PyResult<Option<(&'static str, String)>> {
    let held = Held::new(data)?;
    Ok(kiln_host::foreign::refusal(&path, held.bytes()))
}

/// safetensors' spelling of a dtype, where safetensors has one (the
/// strings of its `Dtype`; `get_slice(...).get_dtype()` answers with them).
/// The match has no wildcard: a dtype added to the core must be given its
/// entry here. e2m1 stays Kiln's (the project's ruling, issue 24).
pub(crate) const fn safetensors_name(d: DType) -> Option<&'static str> {
    match d {
        DType::F64 => Some("F64"),
        DType::F32 => Some("F32"),
        DType::F16 => Some("F16"),
        DType::BF16 => Some("BF16"),
        DType::F8E4M3 => Some("F8_E4M3"),
        DType::F8E5M2 => Some("F8_E5M2"),
        DType::Bool => Some("BOOL"),
        DType::I8 => Some("I8"),
        DType::U8 => Some("U8"),
        DType::I16 => Some("I16"),
        DType::U16 => Some("U16"),
        DType::I32 => Some("I32"),
        DType::U32 => Some("U32"),
        DType::I64 => Some("I64"),
        DType::U64 => Some("U64"),
        DType::E8M0 => Some("F8_E8M0"),
        DType::I4 | DType::U4 | DType::E2M1 | DType::Opaque(_) => None,
    }
}

/// The core's dtype table: (code, Kiln name, safetensors' name or None)
/// for every closed-set code, then (4096, "opaque", None) standing for the
/// opaque codes 4096..32767.
#[pyfunction]
fn dtype_table() -> Vec<(u16, &'static str, Option<&'static str>)> {
    (1..kiln_nostd::dtype::OPAQUE_MIN)
        .filter_map(DType::from_code)
        .chain([DType::Opaque(kiln_nostd::dtype::OPAQUE_MIN)])
        .map(|d| (d.code(), d.name(), safetensors_name(d)))
        .collect()
}

/// The default caps (16,777,216).
#[pyfunction]
fn default_cap() -> u32 {
    DEFAULT_CAP
}

#[pymodule]
fn _kiln(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("KilnError", py.get_type::<KilnError>())?;
    m.add("TypeTextError", py.get_type::<TypeTextError>())?;
    m.add("MODEL_TYPE", model::MODEL_TYPE)?;
    m.add("MODEL_HASH", model::MODEL_HASH)?;
    m.add("DIGESTS_TYPE", model::DIGESTS_TYPE)?;
    m.add("DIGESTS_HASH", model::DIGESTS_HASH)?;
    m.add("SHARD_HASH", model::SHARD_HASH)?;
    m.add("MANIFEST_HASH", model::MANIFEST_HASH)?;
    m.add("PAD_KEY", PAD_KEY)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(verify_signed, m)?)?;
    m.add_function(wrap_pyfunction!(inspect, m)?)?;
    m.add_function(wrap_pyfunction!(load_arrays, m)?)?;
    m.add_function(wrap_pyfunction!(make_array, m)?)?;
    m.add_function(wrap_pyfunction!(save, m)?)?;
    m.add_function(wrap_pyfunction!(default_cap, m)?)?;
    m.add_function(wrap_pyfunction!(kind, m)?)?;
    m.add_function(wrap_pyfunction!(foreign, m)?)?;
    m.add_function(wrap_pyfunction!(dtype_table, m)?)?;
    m.add("ConvertError", py.get_type::<convert::ConvertError>())?;
    m.add_function(wrap_pyfunction!(convert::convert, m)?)?;
    m.add_function(wrap_pyfunction!(convert::parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(onnx::onnx_requirements, m)?)?;
    m.add_function(wrap_pyfunction!(onnx::onnx_pair, m)?)?;
    m.add_function(wrap_pyfunction!(onnx::onnx_dtypes, m)?)?;
    m.add_function(wrap_pyfunction!(onnx::onnx_with_inline, m)?)?;
    m.add_function(wrap_pyfunction!(onnx::onnx_reads_data, m)?)?;
    m.add_class::<sharded::Sharded>()?;
    m.add_function(wrap_pyfunction!(frozen::decode, m)?)?;
    m.add_function(wrap_pyfunction!(frozen::encode, m)?)?;
    m.add_class::<frozen::Some>()?;
    Ok(())
}
