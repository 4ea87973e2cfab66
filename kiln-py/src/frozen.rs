//! Frozen values to and from Python objects. Decoding walks the core's
//! checked, borrowed `Value`; encoding writes the canonical bytes and then
//! has the core's reader check them before they are returned.

use kiln_nostd::frozen::{frame_bytes, Kind, Reader, Schema, TypeRef, Value};
use kiln_nostd::{Limits, Writer, DEFAULT_CAP};
use pyo3::exceptions::{PyKeyError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

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

struct Encoder<'py> {
    py: Python<'py>,
    np: Bound<'py, PyModule>,
    tensor_specs: Bound<'py, PyAny>,
}

impl<'py> Encoder<'py> {
    fn int(&self, v: &Bound<'py, PyAny>, kind: Kind, out: &mut Vec<u8>) -> PyResult<()> {
        if v.is_instance_of::<pyo3::types::PyFloat>() || v.is_instance_of::<pyo3::types::PyString>() {
            return Err(PyTypeError::new_err(format!("{} needs an int, not {}", kind.name(), v.get_type().name()?)));
        }
        let n: i128 = v.extract()?;
        let (lo, hi, width): (i128, i128, usize) = match kind {
            Kind::I8 => (i8::MIN.into(), i8::MAX.into(), 1),
            Kind::I16 => (i16::MIN.into(), i16::MAX.into(), 2),
            Kind::I32 => (i32::MIN.into(), i32::MAX.into(), 4),
            Kind::I64 | Kind::Int => (i64::MIN.into(), i64::MAX.into(), 8),
            Kind::U8 => (0, u8::MAX.into(), 1),
            Kind::U16 => (0, u16::MAX.into(), 2),
            Kind::U32 => (0, u32::MAX.into(), 4),
            _ => (0, u64::MAX.into(), 8),
        };
        if n < lo || n > hi {
            return Err(PyOverflowError::new_err(format!("{n} does not fit in {}", kind.name())));
        }
        out.extend_from_slice(&n.to_le_bytes()[..width]);
        Ok(())
    }

    fn count(&self, n: usize, out: &mut Vec<u8>) -> PyResult<()> {
        let n =
            u32::try_from(n).map_err(|_| PyOverflowError::new_err(format!("a count of {n} does not fit in a u32")))?;
        out.extend_from_slice(&n.to_le_bytes());
        Ok(())
    }

    fn str(&self, v: &Bound<'py, PyAny>, out: &mut Vec<u8>) -> PyResult<()> {
        let s: String = v.extract()?;
        self.count(s.len(), out)?;
        out.extend_from_slice(s.as_bytes());
        Ok(())
    }

    fn value(&self, ty: TypeRef<'_>, v: &Bound<'py, PyAny>, out: &mut Vec<u8>) -> PyResult<()> {
        let py = self.py;
        match ty.kind() {
            Kind::Bool => {
                let b: bool = v.extract()?;
                out.push(u8::from(b));
            }
            k @ (Kind::I8
            | Kind::I16
            | Kind::I32
            | Kind::I64
            | Kind::Int
            | Kind::U8
            | Kind::U16
            | Kind::U32
            | Kind::U64
            | Kind::Uint) => self.int(v, k, out)?,
            Kind::F32 => out.extend_from_slice(&(v.extract::<f64>()? as f32).to_le_bytes()),
            Kind::F64 => out.extend_from_slice(&v.extract::<f64>()?.to_le_bytes()),
            Kind::Str => self.str(v, out)?,
            Kind::Tensors => {
                let (named, specs): (bool, Vec<_>) = self.tensor_specs.call1((v,))?.extract()?;
                let held = Specs::new(specs)?;
                let specs = held.specs(named, true)?;
                let w = Writer::new();
                let len = w.encoded_len(&specs).map_err(|e| kiln_error(py, e))?;
                let start = out.len();
                out.resize(start + len, 0);
                w.write(&specs, &mut out[start..]).map_err(|e| kiln_error(py, e))?;
            }
            Kind::List => {
                let elem = ty.elem().ok_or_else(|| PyValueError::new_err("internal: list without element type"))?;
                if v.is_instance_of::<pyo3::types::PyString>() {
                    return Err(PyTypeError::new_err(format!("{} needs a sequence, not str", ty.text_slice())));
                }
                if let Some(dt) = numeric_dtype(elem.kind()) {
                    if self.numbers(v, elem.kind(), dt, out)? {
                        return Ok(());
                    }
                }
                let items: Vec<Bound<'py, PyAny>> = v.try_iter()?.collect::<PyResult<_>>()?;
                self.count(items.len(), out)?;
                for (i, item) in items.iter().enumerate() {
                    self.value(elem, item, out).map_err(|e| at(py, e, &format!("[{i}]")))?;
                }
            }
            Kind::Opt => {
                let elem = ty.elem().ok_or_else(|| PyValueError::new_err("internal: opt without element type"))?;
                if v.is_none() {
                    out.push(0);
                } else if let Ok(s) = v.cast::<Some>() {
                    out.push(1);
                    self.value(elem, s.get().value.bind(py), out)?;
                } else {
                    out.push(1);
                    self.value(elem, v, out)?;
                }
            }
            Kind::Dict => {
                let elem = ty.elem().ok_or_else(|| PyValueError::new_err("internal: dict without value type"))?;
                let items = v.call_method0("items")?;
                let mut entries: Vec<(String, Bound<'py, PyAny>)> = vec![];
                for item in items.try_iter()? {
                    let (k, x): (Bound<'py, PyAny>, Bound<'py, PyAny>) = item?.extract()?;
                    let k: String = k.extract().map_err(|_| PyTypeError::new_err("dict<str,V> keys must be str"))?;
                    entries.push((k, x));
                }
                entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                if let Some(w) = entries.windows(2).find(|w| w[0].0 == w[1].0) {
                    return Err(PyValueError::new_err(format!("dict key {:?} appears twice", w[0].0)));
                }
                self.count(entries.len(), out)?;
                for (k, x) in &entries {
                    self.count(k.len(), out)?;
                    out.extend_from_slice(k.as_bytes());
                    self.value(elem, x, out).map_err(|e| at(py, e, &format!("[{k:?}]")))?;
                }
            }
            Kind::Struct => {
                let dict = v.cast::<PyDict>().ok();
                if let Some(d) = dict {
                    for key in d.keys() {
                        let k: String = key.extract()?;
                        if ty.field(&k).is_none() {
                            return Err(PyKeyError::new_err(format!("{} has no field {k:?}", ty.text_slice())));
                        }
                    }
                }
                for f in ty.fields() {
                    let x = match dict {
                        Some(d) => d.get_item(f.name())?.ok_or_else(|| {
                            PyKeyError::new_err(format!("missing field {:?} of {}", f.name(), ty.text_slice()))
                        })?,
                        None => v.getattr(f.name())?,
                    };
                    self.value(f, &x, out).map_err(|e| at(py, e, &format!(".{}", f.name())))?;
                }
            }
        }
        Ok(())
    }

    /// The fast path for numeric lists: a NumPy array (or a bytes-like object
    /// for `list<u8>`) whose elements convert exactly. False: take the
    /// element-by-element path (which checks every value's range).
    fn numbers(&self, v: &Bound<'py, PyAny>, kind: Kind, dtype: &str, out: &mut Vec<u8>) -> PyResult<bool> {
        let bytes_like = v.is_instance_of::<PyBytes>() || v.is_instance_of::<pyo3::types::PyByteArray>();
        if kind == Kind::U8 && bytes_like {
            let h = Held::new(v)?;
            self.count(h.bytes().len(), out)?;
            out.extend_from_slice(h.bytes());
            return Ok(true);
        }
        if !v.is_instance(&self.np.getattr("ndarray")?)? {
            return Ok(false);
        }
        if v.getattr("ndim")?.extract::<usize>()? != 1 {
            return Err(PyValueError::new_err("a list needs a 1-D array"));
        }
        let target = self.np.getattr("dtype")?.call1((dtype,))?;
        let safe: bool = self.np.getattr("can_cast")?.call1((v.getattr("dtype")?, &target, "safe"))?.extract()?;
        if !safe {
            return Ok(false);
        }
        let arr = self.np.getattr("ascontiguousarray")?.call1((v, target))?;
        let n: usize = arr.getattr("size")?.extract()?;
        let h = Held::new(&arr.call_method1("view", ("u1",))?)?;
        self.count(n, out)?;
        out.extend_from_slice(h.bytes());
        Ok(true)
    }
}

/// Encodes `value` as one canonical value of `type_text` (behind a frame
/// when `framed`); the core's reader checks the bytes before they are returned.
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
    if framed {
        out.extend_from_slice(&frame_bytes(schema.hash()));
    }
    let e = Encoder { py, np: py.import("numpy")?, tensor_specs: tensor_specs.clone() };
    e.value(schema.root(), value, &mut out)?;
    Reader::new().limits(Limits::DEFAULT).framed(framed).validate(&out, &schema).map_err(|e| kiln_error(py, e))?;
    Ok(PyBytes::new(py, &out))
}
