//! Frozen values to and from Python objects. Decoding walks the core's
//! checked, borrowed `Value`; encoding is the core's schema-driven encoder
//! over Python objects (a `Source`), and the core's reader checks the bytes
//! before they are returned.

use kiln_nostd::frozen::{
    encode_by_schema, encode_by_schema_framed, Detail, Kind, Place, Reader, Refusal, Schema, Source, StructNames,
    TensorsOut, TypeRef, Value,
};
use kiln_nostd::{directory::DEFAULT_CAP, Limits};
use pyo3::exceptions::{PyKeyError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyList, PyString, PyTuple};

use crate::buffer::Held;
use crate::{key_of, kiln_error, type_text_error, ArrayMaker, Specs, NODES};

/// The present value of an `opt<opt<T>>` (or of any opt, when encoding):
/// tells "present, inner absent" (`Some(None)`) from "absent" (`None`).
#[pyclass(frozen, module = "kiln")]
pub struct Some {
    #[pyo3(get)]
    value: Py<PyAny>,
}

#[pymethods]
impl Some {
    #[new]
    fn new(value: Py<PyAny>) -> Self {
        Some { value }
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("Some({})", self.value.bind(py).repr()?))
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        match other.cast::<Some>() {
            Ok(o) => self.value.bind(py).eq(o.get().value.bind(py)),
            Err(_) => Ok(false),
        }
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        Ok(self.value.bind(py).hash()? ^ 0x5a5a)
    }
}

/// NumPy's name for the elements of a `list<T>` of a fixed-width number.
fn numeric_dtype(kind: Kind) -> Option<&'static str> {
    Some(match kind {
        Kind::Bool => "?",
        Kind::I8 => "i1",
        Kind::I16 => "<i2",
        Kind::I32 => "<i4",
        Kind::I64 | Kind::Int => "<i8",
        Kind::U8 => "u1",
        Kind::U16 => "<u2",
        Kind::U32 => "<u4",
        Kind::U64 | Kind::Uint => "<u8",
        Kind::F32 => "<f4",
        Kind::F64 => "<f8",
        _ => return None,
    })
}

struct Decoder<'py, 'h> {
    py: Python<'py>,
    owner: &'h Bound<'py, PyAny>,
    held: &'h Held,
    maker: ArrayMaker<'py>,
    np: Bound<'py, PyModule>,
}

impl<'py> Decoder<'py, '_> {
    fn value(&self, v: Value<'_, '_>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let bad = || PyValueError::new_err("internal: a checked value did not read back");
        Ok(match v.kind() {
            Kind::Bool => v.as_bool().ok_or_else(bad)?.into_pyobject(py)?.to_owned().into_any(),
            Kind::I8 | Kind::I16 | Kind::I32 | Kind::I64 | Kind::Int => {
                v.as_i64().ok_or_else(bad)?.into_pyobject(py)?.into_any()
            }
            Kind::U8 | Kind::U16 | Kind::U32 | Kind::U64 | Kind::Uint => {
                v.as_u64().ok_or_else(bad)?.into_pyobject(py)?.into_any()
            }
            Kind::F32 => f64::from(v.as_f32().ok_or_else(bad)?).into_pyobject(py)?.into_any(),
            Kind::F64 => v.as_f64().ok_or_else(bad)?.into_pyobject(py)?.into_any(),
            Kind::Str => v.as_str().ok_or_else(bad)?.into_pyobject(py)?.into_any(),
            Kind::Tensors => {
                let dir = v.as_tensors().ok_or_else(bad)?;
                let out = PyDict::new(py);
                for t in dir.iter() {
                    out.set_item(
                        key_of(&t),
                        self.maker.array(py, self.owner, self.held.address(), !self.held.readonly(), &t)?,
                    )?;
                }
                out.into_any()
            }
            Kind::List => {
                let list = v.as_list().ok_or_else(bad)?;
                match (numeric_dtype(list.elem().kind()), list.bytes()) {
                    (Some(dt), Some(bytes)) => self.numbers(dt, bytes, list.len())?,
                    _ => {
                        let out = PyList::empty(py);
                        for item in list.iter() {
                            out.append(self.value(item)?)?;
                        }
                        out.into_any()
                    }
                }
            }
            Kind::Opt => match v.as_opt().ok_or_else(bad)? {
                None => py.None().into_bound(py),
                Some(inner) => {
                    let x = self.value(inner)?;
                    if inner.kind() == Kind::Opt {
                        Bound::new(py, Some { value: x.unbind() })?.into_any()
                    } else {
                        x
                    }
                }
            },
            Kind::Dict => {
                let out = PyDict::new(py);
                for (k, x) in v.as_dict().ok_or_else(bad)?.iter() {
                    out.set_item(k, self.value(x)?)?;
                }
                out.into_any()
            }
            Kind::Struct => {
                let out = PyDict::new(py);
                for (name, x) in v.as_struct().ok_or_else(bad)?.fields() {
                    out.set_item(name, self.value(x)?)?;
                }
                out.into_any()
            }
        })
    }

    /// A read-only 1-D array of a numeric list: a view of the caller's bytes
    /// when aligned on a little-endian host, else a copy.
    fn numbers(&self, dtype: &str, bytes: &[u8], len: usize) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let dt = self.np.getattr("dtype")?.call1((dtype,))?;
        let width: usize = dt.getattr("itemsize")?.extract()?;
        let start = (bytes.as_ptr() as usize).wrapping_sub(self.held.address());
        let little = cfg!(target_endian = "little");
        let frombuffer = self.np.getattr("frombuffer")?;
        if len == 0 {
            let a = self.np.getattr("empty")?.call1((0, dt))?;
            a.getattr("flags")?.setattr("writeable", false)?;
            return Ok(a);
        }
        if (little || width == 1) && (bytes.as_ptr() as usize) % width == 0 {
            let a = frombuffer.call1((self.owner, dt, len, start))?;
            if !self.held.readonly() {
                a.getattr("flags")?.setattr("writeable", false)?;
            }
            return Ok(a);
        }
        let a = frombuffer.call1((PyBytes::new(py, bytes), &dt, len, 0))?;
        if little || width == 1 {
            return Ok(a);
        }
        let swapped = a.call_method1("astype", (dt.call_method1("newbyteorder", ("=",))?,))?;
        swapped.getattr("flags")?.setattr("writeable", false)?;
        Ok(swapped)
    }
}

/// Checks `data` as one value of `type_text` (behind a frame when `framed`)
/// and returns it as Python objects; numeric lists and tensors are NumPy
/// arrays viewing `data` where alignment allows.
#[pyfunction]
#[pyo3(signature = (data, type_text, dtypes, framed=false, count_cap=DEFAULT_CAP, byte_cap=DEFAULT_CAP))]
pub fn decode<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    type_text: &str,
    dtypes: &Bound<'py, PyTuple>,
    framed: bool,
    count_cap: u32,
    byte_cap: u32,
) -> PyResult<Bound<'py, PyAny>> {
    let schema = Box::new(Schema::<NODES>::parse(type_text).map_err(|e| type_text_error(py, type_text, e))?);
    let held = Held::new(data)?;
    let limits = Limits::DEFAULT.with_count_cap(count_cap).with_byte_cap(byte_cap);
    let value =
        Reader::new().limits(limits).framed(framed).read(held.bytes(), &schema).map_err(|e| kiln_error(py, e))?;
    let d = Decoder { py, owner: data, held: &held, maker: ArrayMaker::new(py, dtypes)?, np: py.import("numpy")? };
    d.value(value)
}

/// Prefixes an error's message with where in the value it happened.
fn at(py: Python<'_>, e: PyErr, place: &str) -> PyErr {
    let msg = e.value(py).str().map(|s| s.to_string()).unwrap_or_default();
    PyErr::from_type(e.get_type(py), format!("{place}: {msg}"))
}

type Items<'py> = std::vec::IntoIter<PyResult<Bound<'py, PyAny>>>;
type Entries<'py> = std::vec::IntoIter<PyResult<(String, Bound<'py, PyAny>)>>;

/// A run of numbers in wire form: the bytes of a held buffer export (a
/// `bytes`-like object, or a little-endian, C-contiguous NumPy array).
struct Run(Held);

impl AsRef<[u8]> for Run {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes()
    }
}

/// Python objects as the values of the core's schema-driven encoder: the
/// core applies every encoding rule; this says what a Python object is as
/// each kind and how a refusal reads as a Python exception.
struct PySource<'py> {
    py: Python<'py>,
    np: Bound<'py, PyModule>,
    tensor_specs: Bound<'py, PyAny>,
}

impl<'py> Source for PySource<'py> {
    type Value = Bound<'py, PyAny>;
    type Error = PyErr;
    type Str = String;
    type Items = Items<'py>;
    type Entries = Entries<'py>;
    type Names = std::vec::IntoIter<PyResult<String>>;
    type Run = Run;

    fn bool(&mut self, v: &Bound<'py, PyAny>) -> PyResult<Option<bool>> {
        v.extract().map(Option::Some)
    }

    fn int(&mut self, v: &Bound<'py, PyAny>, _: Kind) -> PyResult<Option<i128>> {
        if v.is_instance_of::<PyFloat>() || v.is_instance_of::<PyString>() {
            return Ok(None);
        }
        v.extract().map(Option::Some)
    }

    fn f32(&mut self, v: &Bound<'py, PyAny>) -> PyResult<Option<f32>> {
        Ok(Option::Some(v.extract::<f64>()? as f32))
    }

    fn f64(&mut self, v: &Bound<'py, PyAny>) -> PyResult<Option<f64>> {
        v.extract().map(Option::Some)
    }

    fn str(&mut self, v: &Bound<'py, PyAny>) -> PyResult<Option<String>> {
        v.extract().map(Option::Some)
    }

    fn list(&mut self, v: &Bound<'py, PyAny>, _: TypeRef<'_>) -> PyResult<Option<(usize, Items<'py>)>> {
        if v.is_instance_of::<PyString>() {
            return Ok(None);
        }
        let items: Vec<PyResult<Bound<'py, PyAny>>> = v.try_iter()?.collect();
        Ok(Option::Some((items.len(), items.into_iter())))
    }

    /// A NumPy array (or a bytes-like object for `list<u8>`) whose elements
    /// convert exactly. None: the items one by one (each range-checked).
    fn numbers(&mut self, v: &Bound<'py, PyAny>, kind: Kind) -> PyResult<Option<Run>> {
        let Some(dtype) = numeric_dtype(kind) else {
            return Ok(None);
        };
        let bytes_like = v.is_instance_of::<PyBytes>() || v.is_instance_of::<pyo3::types::PyByteArray>();
        if kind == Kind::U8 && bytes_like {
            return Held::new(v).map(|h| Option::Some(Run(h)));
        }
        if !v.is_instance(&self.np.getattr("ndarray")?)? {
            return Ok(None);
        }
        if v.getattr("ndim")?.extract::<usize>()? != 1 {
            return Err(PyValueError::new_err("a list needs a 1-D array"));
        }
        let target = self.np.getattr("dtype")?.call1((dtype,))?;
        let safe: bool = self.np.getattr("can_cast")?.call1((v.getattr("dtype")?, &target, "safe"))?.extract()?;
        if !safe {
            return Ok(None);
        }
        let arr = self.np.getattr("ascontiguousarray")?.call1((v, target))?;
        Held::new(&arr.call_method1("view", ("u1",))?).map(|h| Option::Some(Run(h)))
    }

    /// None is absent, `kiln.Some(x)` present `x`, anything else present.
    fn opt(&mut self, v: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if v.is_none() {
            return Ok(None);
        }
        Ok(Option::Some(match v.cast::<Some>() {
            Ok(s) => s.get().value.bind(self.py).clone(),
            Err(_) => v.clone(),
        }))
    }

    /// The mapping's items, sorted here by key bytes (the core checks the
    /// order and refuses a repeated key).
    fn dict(&mut self, v: &Bound<'py, PyAny>, _: TypeRef<'_>) -> PyResult<Option<(usize, Entries<'py>)>> {
        let mut entries: Vec<(String, Bound<'py, PyAny>)> = vec![];
        for item in v.call_method0("items")?.try_iter()? {
            let (k, x): (Bound<'py, PyAny>, Bound<'py, PyAny>) = item?.extract()?;
            let k: String = k.extract().map_err(|_| PyTypeError::new_err("dict<str,V> keys must be str"))?;
            entries.push((k, x));
        }
        entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let entries: Vec<_> = entries.into_iter().map(Ok).collect();
        Ok(Option::Some((entries.len(), entries.into_iter())))
    }

    /// A dict holds exactly its keys; any other object is read by attribute.
    fn names(&mut self, v: &Bound<'py, PyAny>) -> PyResult<StructNames<Self::Names>> {
        Ok(match v.cast::<PyDict>() {
            Ok(d) => StructNames::Listed(d.keys().iter().map(|k| k.extract()).collect::<Vec<_>>().into_iter()),
            Err(_) => StructNames::Unlisted,
        })
    }

    fn field(&mut self, v: &Bound<'py, PyAny>, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        match v.cast::<PyDict>() {
            Ok(d) => d.get_item(name),
            Err(_) => v.getattr(name).map(Option::Some),
        }
    }

    /// `dict[str, ndarray]` (sorted by name) or a list of arrays (unnamed).
    fn tensors(&mut self, v: &Bound<'py, PyAny>, out: &mut TensorsOut<'_>) -> PyResult<()> {
        let (named, specs): (bool, Vec<_>) = self.tensor_specs.call1((v,))?.extract()?;
        let held = Specs::new(specs)?;
        let specs = held.specs(named, true)?;
        out.write(&specs).map_err(|e| kiln_error(self.py, e))
    }

    fn refuse(&mut self, refusal: Refusal<'_>, v: &Bound<'py, PyAny>) -> PyErr {
        match refusal.detail {
            Detail::IntRange { kind, value } => {
                PyOverflowError::new_err(format!("{value} does not fit in {}", kind.name()))
            }
            Detail::Count(n) => PyOverflowError::new_err(format!("a count of {n} does not fit in a u32")),
            Detail::DuplicateKey(k) => PyValueError::new_err(format!("dict key {k:?} appears twice")),
            Detail::MissingField { field, ty } => PyKeyError::new_err(format!("missing field {field:?} of {ty}")),
            Detail::UnknownField { name, ty } => PyKeyError::new_err(format!("{ty} has no field {name:?}")),
            Detail::Shape { ty } => {
                let what = match Kind::from_name(ty) {
                    Option::Some(k) if k.is_plain() && !matches!(k, Kind::F32 | Kind::F64) => "an int",
                    _ if ty.starts_with("list<") => "a sequence",
                    _ => "another value",
                };
                let got = v.get_type().name().map(|n| n.to_string()).unwrap_or_default();
                PyTypeError::new_err(format!("{ty} needs {what}, not {got}"))
            }
            _ => kiln_error(self.py, refusal.error),
        }
    }

    fn within(&mut self, e: PyErr, place: Place<'_>) -> PyErr {
        let place = match place {
            Place::Item(i) => format!("[{i}]"),
            Place::Key(k) => format!("[{k:?}]"),
            Place::Field(f) => format!(".{f}"),
        };
        at(self.py, e, &place)
    }
}

/// Encodes `value` as one canonical value of `type_text` (behind a frame
/// when `framed`) with the core's schema-driven encoder; the core's reader
/// checks the bytes before they are returned.
#[pyfunction]
#[pyo3(signature = (value, type_text, tensor_specs, framed=false))]
pub fn encode<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
    type_text: &str,
    tensor_specs: &Bound<'py, PyAny>,
    framed: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let schema = Box::new(Schema::<NODES>::parse(type_text).map_err(|e| type_text_error(py, type_text, e))?);
    let mut out = Vec::new();
    let mut source = PySource { py, np: py.import("numpy")?, tensor_specs: tensor_specs.clone() };
    if framed {
        encode_by_schema_framed(schema.root(), value, &mut source, &mut out)?;
    } else {
        encode_by_schema(schema.root(), value, &mut source, &mut out)?;
    }
    Reader::new().limits(Limits::DEFAULT).framed(framed).validate(&out, &schema).map_err(|e| kiln_error(py, e))?;
    Ok(PyBytes::new(py, &out))
}
