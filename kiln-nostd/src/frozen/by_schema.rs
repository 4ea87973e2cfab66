//! Schema-driven encoding: one value of a type known only at run time (a
//! [`TypeRef`] of a parsed [`Schema`](super::Schema)), taken from a caller's
//! object model through a [`Source`], written canonically to a [`Sink`].
//!
//! The encoder owns every Frozen encoding rule: the range of each integer
//! kind, the u32 width of counts and lengths, the tag bytes of nested opts,
//! strictly increasing dict keys, struct fields in declaration order, and
//! whole runs of fixed-width numbers. The source only answers questions
//! about its values ("this as an i16", "the entries of this dict"); what
//! it answers cannot produce bytes a reader refuses as non-canonical, apart
//! from a `tensors` block the [`Writer`] checks.
//!
//! The encoder does not allocate and recurses once per container of the
//! type, so at most [`MAX_DEPTH`](super::MAX_DEPTH) levels deep: the type
//! text parser refuses deeper types, and a [`TypeRef`] comes only from it.
//!
//! ```
//! use kiln_nostd::frozen::{encode_by_schema, Encoder, Kind, Refusal, Schema, Source, StructNames, TensorsOut, TypeRef};
//!
//! // A small object model: integers and lists of them.
//! enum V { Int(i128), List(&'static [V]) }
//!
//! struct Model;
//! impl Source for Model {
//!     type Value = &'static V;
//!     type Error = kiln_nostd::Error;
//!     type Str = &'static str;
//!     type Items = core::iter::Map<core::slice::Iter<'static, V>, fn(&'static V) -> Result<&'static V, Self::Error>>;
//!     type Entries = core::iter::Empty<Result<(&'static str, &'static V), Self::Error>>;
//!     type Names = core::iter::Empty<Result<&'static str, Self::Error>>;
//!     type Run = &'static [u8];
//!     fn bool(&mut self, _: &Self::Value) -> Result<Option<bool>, Self::Error> { Ok(None) }
//!     fn int(&mut self, v: &Self::Value, _: Kind) -> Result<Option<i128>, Self::Error> {
//!         Ok(match v { V::Int(n) => Some(*n), _ => None })
//!     }
//!     fn f32(&mut self, _: &Self::Value) -> Result<Option<f32>, Self::Error> { Ok(None) }
//!     fn f64(&mut self, _: &Self::Value) -> Result<Option<f64>, Self::Error> { Ok(None) }
//!     fn str(&mut self, _: &Self::Value) -> Result<Option<&'static str>, Self::Error> { Ok(None) }
//!     fn list(&mut self, v: &Self::Value, _: TypeRef<'_>) -> Result<Option<(usize, Self::Items)>, Self::Error> {
//!         Ok(match v { V::List(items) => Some((items.len(), items.iter().map(Ok as fn(_) -> _))), _ => None })
//!     }
//!     fn opt(&mut self, v: &Self::Value) -> Result<Option<Self::Value>, Self::Error> { Ok(Some(*v)) }
//!     fn dict(&mut self, _: &Self::Value, _: TypeRef<'_>) -> Result<Option<(usize, Self::Entries)>, Self::Error> {
//!         Ok(None)
//!     }
//!     fn names(&mut self, _: &Self::Value) -> Result<StructNames<Self::Names>, Self::Error> {
//!         Ok(StructNames::NotAStruct)
//!     }
//!     fn field(&mut self, _: &Self::Value, _: &str) -> Result<Option<Self::Value>, Self::Error> { Ok(None) }
//!     fn tensors(&mut self, _: &Self::Value, _: &mut TensorsOut<'_>) -> Result<(), Self::Error> { Ok(()) }
//!     fn refuse(&mut self, refusal: Refusal<'_>, _: &Self::Value) -> Self::Error { refusal.error }
//! }
//!
//! let schema: Schema = Schema::parse("list<opt<i16>>")?;
//! let mut out = [0u8; 16];
//! let n = encode_by_schema(schema.root(), &&V::List(&[V::Int(-2), V::Int(7)]), &mut Model, &mut Encoder::new(&mut out))?;
//! assert_eq!(&out[..n], &[2, 0, 0, 0, 1, 0xfe, 0xff, 1, 7, 0]);
//!
//! // 2^15 is not an i16: refused at its offset (after the count and the tag).
//! let e = encode_by_schema(schema.root(), &&V::List(&[V::Int(1 << 15)]), &mut Model, &mut Encoder::new(&mut out));
//! let e = e.unwrap_err();
//! assert_eq!((e.rule().id(), e.offset()), ("IntRange", 5));
//! # Ok::<(), kiln_nostd::Error>(())
//! ```

use core::cmp::Ordering;

use crate::bytes::usize_from_u32;
use crate::directory::Directory;
use crate::error::{fail, Error, Result, Rule};
use crate::writer::{TensorSpec, Writer};

use super::frame::frame_bytes;
use super::kind::Kind;
use super::sink::Sink;
use super::typetext::TypeRef;

/// What a [`Source`] getter answers: `Ok(Some(x))`; `Ok(None)`, which for
/// most getters means the value is not of the kind asked for (for
/// [`Source::opt`] absent, for [`Source::field`] missing); or the source's
/// own error.
pub type Answer<T, E> = core::result::Result<Option<T>, E>;

/// A caller's object model, asked for values by the schema-driven encoder.
///
/// Each getter is asked about one value handle, `v`, and gives an
/// [`Answer`]: `Ok(Some(x))`, `Ok(None)` when `v` is not of the kind asked
/// for (the encoder refuses it with [`Rule::ValueShape`] through
/// [`refuse`](Self::refuse); [`opt`](Self::opt) and [`field`](Self::field)
/// give `None` its own meaning), or `Err` with the source's own error,
/// which the encoder passes on unchanged (wrapped by
/// [`within`](Self::within) once per container it came out of).
pub trait Source {
    /// A handle to one value of the model (a Python object, a JS value, a
    /// reference into a tree).
    type Value;
    /// The source's error; the encoder's refusals become one through
    /// [`refuse`](Self::refuse).
    type Error;
    /// A string the source hands out: a `str` value, a dict key, a name.
    type Str: AsRef<str>;
    /// The items of a list, in order.
    type Items: Iterator<Item = core::result::Result<Self::Value, Self::Error>>;
    /// The entries of a dict, in strictly increasing key byte order (the
    /// encoder checks the order: it cannot allocate to sort).
    type Entries: Iterator<Item = core::result::Result<(Self::Str, Self::Value), Self::Error>>;
    /// The names a struct value holds (see [`StructNames`]).
    type Names: Iterator<Item = core::result::Result<Self::Str, Self::Error>>;
    /// A run of fixed-width numbers in wire form (see [`numbers`](Self::numbers));
    /// a source without runs can name any `AsRef<[u8]>`, e.g. `&'static [u8]`.
    type Run: AsRef<[u8]>;

    /// `v` as a bool.
    fn bool(&mut self, v: &Self::Value) -> Answer<bool, Self::Error>;

    /// `v` as an integer for a field of integer kind `kind`; the encoder
    /// checks the kind's range ([`Rule::IntRange`]).
    fn int(&mut self, v: &Self::Value, kind: Kind) -> Answer<i128, Self::Error>;

    /// `v` as an f32 (every bit is kept).
    fn f32(&mut self, v: &Self::Value) -> Answer<f32, Self::Error>;

    /// `v` as an f64 (every bit is kept).
    fn f64(&mut self, v: &Self::Value) -> Answer<f64, Self::Error>;

    /// `v` as a string.
    fn str(&mut self, v: &Self::Value) -> Answer<Self::Str, Self::Error>;

    /// `v` as a list of `elem`: its item count, then its items. Yielding
    /// another number of items than the count is [`Rule::ItemCount`].
    fn list(&mut self, v: &Self::Value, elem: TypeRef<'_>) -> Answer<(usize, Self::Items), Self::Error>;

    /// A shortcut for a list of a fixed-width kind `elem` (bool, integers,
    /// floats): `v`'s elements as one run of little-endian wire bytes (bools
    /// as bytes 0 and 1), or `None` to be asked for the items one by one.
    /// The encoder writes the count from the run's length and checks that
    /// the run is whole elements ([`Rule::NumberRun`]) and that a bool
    /// run's bytes are 0 or 1 ([`Rule::BoolValue`]); the caller vouches
    /// that the numbers are in range, as a run has no room for a value
    /// that is not. The default answers `None`.
    fn numbers(&mut self, v: &Self::Value, elem: Kind) -> Answer<Self::Run, Self::Error> {
        let _ = (v, elem);
        Ok(None)
    }

    /// `v` as an opt: `None` when absent, else the present value (for
    /// `opt<opt<T>>`, the source says how its model tells "present, inner
    /// absent" from "absent").
    fn opt(&mut self, v: &Self::Value) -> Answer<Self::Value, Self::Error>;

    /// `v` as a dict with values of type `value`: its entry count, then its
    /// entries in strictly increasing key byte order ([`Rule::DictKeyOrder`],
    /// [`Rule::DuplicateDictKey`] otherwise).
    fn dict(&mut self, v: &Self::Value, value: TypeRef<'_>) -> Answer<(usize, Self::Entries), Self::Error>;

    /// Whether `v` is a struct value, and which names it holds; asked once
    /// per struct before its fields.
    fn names(&mut self, v: &Self::Value) -> core::result::Result<StructNames<Self::Names>, Self::Error>;

    /// Field `name` of struct value `v`, or `None` when it has none
    /// ([`Rule::MissingField`]). Asked in declaration order.
    fn field(&mut self, v: &Self::Value, name: &str) -> Answer<Self::Value, Self::Error>;

    /// Writes `v` as a `tensors` value through `out`, exactly once
    /// ([`Rule::TensorsWrite`] otherwise). A fault of `out` is a core
    /// [`Error`] the source turns into its own.
    fn tensors(&mut self, v: &Self::Value, out: &mut TensorsOut<'_>) -> core::result::Result<(), Self::Error>;

    /// The source's error for a value `v` the encoder refuses.
    fn refuse(&mut self, refusal: Refusal<'_>, v: &Self::Value) -> Self::Error;

    /// `e`, which encoding the value at `place` of a list, dict or struct
    /// failed with, as seen from that container: a source can say where
    /// the fault is. By default `e` unchanged.
    fn within(&mut self, e: Self::Error, place: Place<'_>) -> Self::Error {
        let _ = place;
        e
    }
}

/// What [`Source::names`] says about a value asked for as a struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StructNames<N> {
    /// The value is not a struct ([`Rule::ValueShape`]).
    NotAStruct,
    /// A struct whose fields are only looked up by name: the value does
    /// not say which names it holds (an object's attributes).
    Unlisted,
    /// A struct holding exactly these names (a mapping): each must be a
    /// field of the type ([`Rule::UnknownField`]).
    Listed(N),
}

/// Where a failed value stands in the container it came out of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place<'a> {
    /// Item `i` of a list (from 0).
    Item(usize),
    /// The value under this key of a dict.
    Key(&'a str),
    /// This field of a struct.
    Field(&'a str),
}

/// A value the encoder refused: the core error (rule, code and the sink
/// offset where the value starts, or the count, key or byte at fault) and
/// the particulars a message needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct Refusal<'a> {
    /// The rule, its code and the sink offset.
    pub error: Error,
    /// What in particular.
    pub detail: Detail<'a>,
}

/// The particulars of a [`Refusal`]; type texts are canonical type text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Detail<'a> {
    /// `value` is outside the range of integer kind `kind` ([`Rule::IntRange`]).
    IntRange {
        /// The integer kind.
        kind: Kind,
        /// The value given.
        value: i128,
    },
    /// A count or length of `.0` does not fit in a u32 ([`Rule::CountTooWide`]).
    Count(usize),
    /// The value is not of the kind type `ty` needs ([`Rule::ValueShape`]).
    Shape {
        /// The type.
        ty: &'a str,
    },
    /// A list or dict said it has `count` entries and gave `given` ([`Rule::ItemCount`];
    /// `given` is `count + 1` when it gave more).
    ItemCount {
        /// The count the source said.
        count: usize,
        /// The entries it gave.
        given: usize,
    },
    /// A run of `len` bytes is not whole elements of `kind` ([`Rule::NumberRun`]),
    /// or a bool run holds a byte other than 0 or 1 ([`Rule::BoolValue`]).
    NumberRun {
        /// The element kind.
        kind: Kind,
        /// The run's length in bytes.
        len: usize,
    },
    /// A dict gave this key twice in a row ([`Rule::DuplicateDictKey`]).
    DuplicateKey(&'a str),
    /// A dict gave `key` after the greater `prev` ([`Rule::DictKeyOrder`]).
    KeyOrder {
        /// The key before.
        prev: &'a str,
        /// The key out of order.
        key: &'a str,
    },
    /// Struct type `ty` declares `field`, which the value lacks ([`Rule::MissingField`]).
    MissingField {
        /// The field name.
        field: &'a str,
        /// The struct type.
        ty: &'a str,
    },
    /// The value holds `name`, which struct type `ty` does not declare ([`Rule::UnknownField`]).
    UnknownField {
        /// The name.
        name: &'a str,
        /// The struct type.
        ty: &'a str,
    },
    /// The source wrote a `tensors` value not exactly once ([`Rule::TensorsWrite`]).
    Tensors,
    /// The sink could not take the bytes ([`Rule::ValueOutputTooSmall`]).
    Output,
}

/// The output of one `tensors` value, handed to [`Source::tensors`].
pub struct TensorsOut<'o> {
    sink: &'o mut dyn Sink,
    written: bool,
}

impl core::fmt::Debug for TensorsOut<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TensorsOut").field("position", &self.sink.position()).field("written", &self.written).finish()
    }
}

impl TensorsOut<'_> {
    /// Writes `specs` as one canonical directory block ([`Writer`]'s
    /// faults, at absolute sink offsets). A second write is TYPE
    /// ([`Rule::TensorsWrite`]).
    pub fn write(&mut self, specs: &[TensorSpec<'_>]) -> Result<()> {
        let at = self.begin()?;
        let w = Writer::new();
        let len = w.encoded_len(specs).map_err(|e| e.shifted(at))?;
        let dst = self.sink.reserve(len)?;
        w.write(specs, dst).map_err(|e| e.shifted(at))?;
        self.written = true;
        Ok(())
    }

    /// Writes a checked directory's block as it is (canonical: it parsed).
    /// A second write is TYPE ([`Rule::TensorsWrite`]).
    pub fn write_directory(&mut self, dir: &Directory<'_>) -> Result<()> {
        self.begin()?;
        self.sink.put(dir.block())?;
        self.written = true;
        Ok(())
    }

    /// True once the value has been written.
    #[must_use]
    pub fn is_written(&self) -> bool {
        self.written
    }

    fn begin(&self) -> Result<usize> {
        let at = self.sink.position();
        if self.written {
            return fail(Rule::TensorsWrite, at);
        }
        Ok(at)
    }
}

/// Encodes `value`, taken from `source`, as one canonical value of type
/// `ty` at the end of `sink`; returns the number of bytes written. A
/// refused value is the source's error for a [`Refusal`]; the sink then
/// holds the bytes written before the fault.
pub fn encode_by_schema<S: Source + ?Sized, K: Sink>(
    ty: TypeRef<'_>,
    value: &S::Value,
    source: &mut S,
    sink: &mut K,
) -> core::result::Result<usize, S::Error> {
    let start = sink.position();
    Walk { source, sink }.value(ty, value)?;
    Ok(sink.position().saturating_sub(start))
}

/// Like [`encode_by_schema`], behind the 16-byte frame carrying `ty`'s
/// schema hash (the length returned includes it).
pub fn encode_by_schema_framed<S: Source + ?Sized, K: Sink>(
    ty: TypeRef<'_>,
    value: &S::Value,
    source: &mut S,
    sink: &mut K,
) -> core::result::Result<usize, S::Error> {
    let start = sink.position();
    let mut walk = Walk { source, sink };
    walk.put(&frame_bytes(ty.hash()), value)?;
    walk.value(ty, value)?;
    Ok(sink.position().saturating_sub(start))
}

/// The inclusive range of an integer kind.
fn int_range(kind: Kind) -> Option<(i128, i128)> {
    Some(match kind {
        Kind::I8 => (i128::from(i8::MIN), i128::from(i8::MAX)),
        Kind::I16 => (i128::from(i16::MIN), i128::from(i16::MAX)),
        Kind::I32 => (i128::from(i32::MIN), i128::from(i32::MAX)),
        Kind::I64 | Kind::Int => (i128::from(i64::MIN), i128::from(i64::MAX)),
        Kind::U8 => (0, i128::from(u8::MAX)),
        Kind::U16 => (0, i128::from(u16::MAX)),
        Kind::U32 => (0, i128::from(u32::MAX)),
        Kind::U64 | Kind::Uint => (0, i128::from(u64::MAX)),
        _ => return None,
    })
}

/// One encoding in progress.
struct Walk<'w, S: ?Sized, K> {
    source: &'w mut S,
    sink: &'w mut K,
}

impl<S: Source + ?Sized, K: Sink> Walk<'_, S, K> {
    fn refuse(&mut self, rule: Rule, at: usize, detail: Detail<'_>, v: &S::Value) -> S::Error {
        self.source.refuse(Refusal { error: Error::new(rule, at), detail }, v)
    }

    fn shape(&mut self, ty: TypeRef<'_>, v: &S::Value) -> S::Error {
        let at = self.sink.position();
        self.refuse(Rule::ValueShape, at, Detail::Shape { ty: ty.text_slice() }, v)
    }

    fn put(&mut self, bytes: &[u8], v: &S::Value) -> core::result::Result<(), S::Error> {
        match self.sink.put(bytes) {
            Ok(()) => Ok(()),
            Err(error) => Err(self.source.refuse(Refusal { error, detail: Detail::Output }, v)),
        }
    }

    fn count(&mut self, n: usize, v: &S::Value) -> core::result::Result<(), S::Error> {
        let Ok(word) = u32::try_from(n) else {
            let at = self.sink.position();
            return Err(self.refuse(Rule::CountTooWide, at, Detail::Count(n), v));
        };
        self.put(&word.to_le_bytes(), v)
    }

    fn string(&mut self, s: &str, v: &S::Value) -> core::result::Result<(), S::Error> {
        self.count(s.len(), v)?;
        self.put(s.as_bytes(), v)
    }

    fn value(&mut self, ty: TypeRef<'_>, v: &S::Value) -> core::result::Result<(), S::Error> {
        match ty.kind() {
            Kind::Bool => match self.source.bool(v)? {
                Some(b) => self.put(&[u8::from(b)], v),
                None => Err(self.shape(ty, v)),
            },
            Kind::I8
            | Kind::I16
            | Kind::I32
            | Kind::I64
            | Kind::Int
            | Kind::U8
            | Kind::U16
            | Kind::U32
            | Kind::U64
            | Kind::Uint => self.int(ty, v),
            Kind::F32 => match self.source.f32(v)? {
                Some(x) => self.put(&x.to_le_bytes(), v),
                None => Err(self.shape(ty, v)),
            },
            Kind::F64 => match self.source.f64(v)? {
                Some(x) => self.put(&x.to_le_bytes(), v),
                None => Err(self.shape(ty, v)),
            },
            Kind::Str => match self.source.str(v)? {
                Some(s) => self.string(s.as_ref(), v),
                None => Err(self.shape(ty, v)),
            },
            Kind::Tensors => self.tensors(v),
            Kind::List => self.list(ty, v),
            Kind::Opt => self.opt(ty, v),
            Kind::Dict => self.dict(ty, v),
            Kind::Struct => self.structure(ty, v),
        }
    }

    fn int(&mut self, ty: TypeRef<'_>, v: &S::Value) -> core::result::Result<(), S::Error> {
        let kind = ty.kind();
        let (Some((lo, hi)), Some(width)) = (int_range(kind), kind.width()) else {
            // Not taken: `value` calls this for the integer kinds only.
            return Err(self.shape(ty, v));
        };
        let Some(n) = self.source.int(v, kind)? else {
            return Err(self.shape(ty, v));
        };
        if n < lo || n > hi {
            let at = self.sink.position();
            return Err(self.refuse(Rule::IntRange, at, Detail::IntRange { kind, value: n }, v));
        }
        let bytes = n.to_le_bytes();
        // Fallback not taken: integer widths are 1 to 8 of the 16 bytes.
        self.put(bytes.get(..usize_from_u32(width)).unwrap_or(&[]), v)
    }

    fn tensors(&mut self, v: &S::Value) -> core::result::Result<(), S::Error> {
        let at = self.sink.position();
        let mut out = TensorsOut { sink: &mut *self.sink, written: false };
        self.source.tensors(v, &mut out)?;
        if out.written {
            Ok(())
        } else {
            Err(self.refuse(Rule::TensorsWrite, at, Detail::Tensors, v))
        }
    }

    fn list(&mut self, ty: TypeRef<'_>, v: &S::Value) -> core::result::Result<(), S::Error> {
        let Some(elem) = ty.elem() else {
            // Not taken: a list type has an element type.
            return Err(self.shape(ty, v));
        };
        if let Some(width) = elem.kind().width() {
            if let Some(run) = self.source.numbers(v, elem.kind())? {
                return self.run(elem.kind(), usize_from_u32(width), run.as_ref(), v);
            }
        }
        let Some((count, items)) = self.source.list(v, elem)? else {
            return Err(self.shape(ty, v));
        };
        self.count(count, v)?;
        let mut given = 0usize;
        for item in items {
            let item = item?;
            if given == count {
                return Err(self.too_many(count, v));
            }
            if let Err(e) = self.value(elem, &item) {
                return Err(self.source.within(e, Place::Item(given)));
            }
            given = given.saturating_add(1);
        }
        self.given(count, given, v)
    }

    fn too_many(&mut self, count: usize, v: &S::Value) -> S::Error {
        let at = self.sink.position();
        self.refuse(Rule::ItemCount, at, Detail::ItemCount { count, given: count.saturating_add(1) }, v)
    }

    fn given(&mut self, count: usize, given: usize, v: &S::Value) -> core::result::Result<(), S::Error> {
        if given == count {
            return Ok(());
        }
        let at = self.sink.position();
        Err(self.refuse(Rule::ItemCount, at, Detail::ItemCount { count, given }, v))
    }

    fn run(&mut self, kind: Kind, width: usize, bytes: &[u8], v: &S::Value) -> core::result::Result<(), S::Error> {
        let at = self.sink.position();
        let len = bytes.len();
        let (Some(n), Some(0)) = (len.checked_div(width), len.checked_rem(width)) else {
            return Err(self.refuse(Rule::NumberRun, at, Detail::NumberRun { kind, len }, v));
        };
        if kind == Kind::Bool {
            if let Some(i) = bytes.iter().position(|b| *b > 1) {
                let at = at.saturating_add(4).saturating_add(i);
                return Err(self.refuse(Rule::BoolValue, at, Detail::NumberRun { kind, len }, v));
            }
        }
        self.count(n, v)?;
        self.put(bytes, v)
    }

    fn opt(&mut self, ty: TypeRef<'_>, v: &S::Value) -> core::result::Result<(), S::Error> {
        let Some(elem) = ty.elem() else {
            // Not taken: an opt type has an element type.
            return Err(self.shape(ty, v));
        };
        match self.source.opt(v)? {
            None => self.put(&[0], v),
            Some(inner) => {
                self.put(&[1], v)?;
                self.value(elem, &inner)
            }
        }
    }

    fn dict(&mut self, ty: TypeRef<'_>, v: &S::Value) -> core::result::Result<(), S::Error> {
        let Some(elem) = ty.elem() else {
            // Not taken: a dict type has a value type.
            return Err(self.shape(ty, v));
        };
        let Some((count, entries)) = self.source.dict(v, elem)? else {
            return Err(self.shape(ty, v));
        };
        self.count(count, v)?;
        let mut prev: Option<S::Str> = None;
        let mut given = 0usize;
        for entry in entries {
            let (key, x) = entry?;
            if given == count {
                return Err(self.too_many(count, v));
            }
            let k = key.as_ref();
            if let Some(p) = prev.as_ref().map(AsRef::as_ref) {
                let at = self.sink.position();
                match p.as_bytes().cmp(k.as_bytes()) {
                    Ordering::Less => {}
                    Ordering::Equal => return Err(self.refuse(Rule::DuplicateDictKey, at, Detail::DuplicateKey(k), v)),
                    Ordering::Greater => {
                        return Err(self.refuse(Rule::DictKeyOrder, at, Detail::KeyOrder { prev: p, key: k }, v))
                    }
                }
            }
            self.string(k, v)?;
            if let Err(e) = self.value(elem, &x) {
                return Err(self.source.within(e, Place::Key(k)));
            }
            prev = Some(key);
            given = given.saturating_add(1);
        }
        self.given(count, given, v)
    }

    fn structure(&mut self, ty: TypeRef<'_>, v: &S::Value) -> core::result::Result<(), S::Error> {
        match self.source.names(v)? {
            StructNames::NotAStruct => return Err(self.shape(ty, v)),
            StructNames::Unlisted => {}
            StructNames::Listed(names) => {
                for name in names {
                    let name = name?;
                    if ty.field(name.as_ref()).is_none() {
                        let at = self.sink.position();
                        let detail = Detail::UnknownField { name: name.as_ref(), ty: ty.text_slice() };
                        return Err(self.refuse(Rule::UnknownField, at, detail, v));
                    }
                }
            }
        }
        for f in ty.fields() {
            let Some(x) = self.source.field(v, f.name())? else {
                let at = self.sink.position();
                let detail = Detail::MissingField { field: f.name(), ty: ty.text_slice() };
                return Err(self.refuse(Rule::MissingField, at, detail, v));
            };
            if let Err(e) = self.value(f, &x) {
                return Err(self.source.within(e, Place::Field(f.name())));
            }
        }
        Ok(())
    }
}
