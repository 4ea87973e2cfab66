//! Validation against a parsed [`Schema`], and the borrowed, lazy [`Value`]
//! API over a validated buffer.
//!
//! [`Reader`] checks the whole buffer once (frame, every count, UTF-8, bool
//! and opt bytes, dict key order, nested tensor directories, trailing
//! bytes). The [`Value`] it returns then reads fields, elements and keys on
//! demand from the caller's buffer: no copies, no allocation, no panics.

use crate::bytes::usize_from_u32;
use crate::directory::Directory;
use crate::directory::Limits;
use crate::dtype::{Element, ViewError};
use crate::error::{fail, Result, Rule};
use crate::wire::header::Header;

use super::check::{skip, word, Checker};
use super::frame::check_frame;
use super::kind::Kind;
use super::typetext::{Schema, TypeRef};

/// Validates `buf` as one value of `schema`; `framed` expects the 16-byte
/// frame first. The entry point for tools: the first error carries the
/// spec's code, the absolute offset and the [`Rule`](crate::Rule).
///
/// ```
/// use kiln_nostd::{frozen::{self, Schema}, ErrorCode, Limits};
/// let s: Schema = Schema::parse("list<f32>")?;
/// frozen::validate(&[2, 0, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0], &s, &Limits::DEFAULT, false)?;
/// let short = frozen::validate(&[2, 0, 0, 0, 0, 0, 0x80, 0x3f], &s, &Limits::DEFAULT, false);
/// assert_eq!(short.unwrap_err().code(), ErrorCode::Eof);
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
pub fn validate<const N: usize>(buf: &[u8], schema: &Schema<'_, N>, limits: &Limits, framed: bool) -> Result<()> {
    Reader::new().limits(*limits).framed(framed).validate(buf, schema)
}

/// Validates `buf` like [`validate`] and returns the value, borrowed.
///
/// ```
/// use kiln_nostd::{frozen::{self, Schema}, Limits};
/// let s: Schema = Schema::parse("struct{id:i64,name:str,}")?;
/// let buf = [7, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, b'h', b'i'];
/// let v = frozen::read(&buf, &s, &Limits::DEFAULT, false)?;
/// assert_eq!(v.field("id").and_then(|v| v.as_i64()), Some(7));
/// assert_eq!(v.field("name").and_then(|v| v.as_str()), Some("hi"));
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
pub fn read<'a, 's, const N: usize>(
    buf: &'a [u8],
    schema: &'s Schema<'_, N>,
    limits: &Limits,
    framed: bool,
) -> Result<Value<'a, 's>> {
    Reader::new().limits(*limits).framed(framed).read(buf, schema)
}

/// Validation options: caps, frame, trusted mode.
///
/// A *trusted* reader is for a buffer this process has just written: it
/// skips the UTF-8 check of strings and dict keys but keeps every bounds,
/// count, tag and order check, and checks nested tensor directories fully.
/// Without `unsafe`, a `&str` can only come from a UTF-8 check, so on a
/// trusted read use [`Value::as_str_bytes`] (no check) or [`Value::as_str`]
/// (checks then, returning `None` for bad bytes).
///
/// ```
/// use kiln_nostd::{frozen::{Reader, Schema}, Limits};
/// let s: Schema = Schema::parse("str")?;
/// let buf = [2, 0, 0, 0, 0xff, 0xfe];
/// assert!(Reader::new().read(&buf, &s).is_err());            // UTF8
/// let v = Reader::new().trusted(true).read(&buf, &s)?;        // bounds only
/// assert_eq!(v.as_str_bytes(), Some(&[0xff, 0xfe][..]));
/// assert_eq!(v.as_str(), None);
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Reader {
    limits: Limits,
    framed: bool,
    trusted: bool,
}

impl Reader {
    /// Default caps, unframed, full checks.
    #[must_use]
    pub const fn new() -> Self {
        Reader { limits: Limits::DEFAULT, framed: false, trusted: false }
    }

    /// Uses these caps.
    #[must_use]
    pub const fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Expects (or not) the 16-byte frame before the value.
    #[must_use]
    pub const fn framed(mut self, framed: bool) -> Self {
        self.framed = framed;
        self
    }

    /// Skips UTF-8 checks (see the type's docs); bounds are still checked.
    #[must_use]
    pub const fn trusted(mut self, trusted: bool) -> Self {
        self.trusted = trusted;
        self
    }

    /// Checks `buf` as exactly one value of `schema`.
    pub fn validate<const N: usize>(&self, buf: &[u8], schema: &Schema<'_, N>) -> Result<()> {
        self.read(buf, schema).map(|_| ())
    }

    /// Checks `buf` and returns the value.
    pub fn read<'a, 's, const N: usize>(&self, buf: &'a [u8], schema: &'s Schema<'_, N>) -> Result<Value<'a, 's>> {
        let root = schema.root();
        let start = if self.framed { check_frame(buf, root.hash())? } else { 0 };
        let checker = Checker { buf, limits: self.limits, utf8: !self.trusted };
        let end = checker.value(root, start)?;
        if end != buf.len() {
            return fail(Rule::TrailingBytes, end);
        }
        Ok(Value { ty: root, buf, at: start })
    }
}

/// A validated value, borrowed from the caller's buffer.
///
/// Accessors return `None` when the value is of another kind; on a value
/// from [`Reader::read`] they cannot fail otherwise, and none can panic.
#[derive(Clone, Copy, Debug)]
pub struct Value<'a, 's> {
    ty: TypeRef<'s>,
    buf: &'a [u8],
    at: usize,
}

impl<'a, 's> Value<'a, 's> {
    /// The value's type.
    pub fn ty(&self) -> TypeRef<'s> {
        self.ty
    }

    /// The value's kind.
    pub fn kind(&self) -> Kind {
        self.ty.kind()
    }

    /// Absolute offset of the value in the caller's buffer.
    pub fn offset(&self) -> usize {
        self.at
    }

    /// Absolute offset just past the value.
    pub fn end(&self) -> usize {
        skip(self.buf, self.ty, self.at)
    }

    /// The value's encoded bytes (canonical: a validated value has one encoding).
    pub fn raw(&self) -> &'a [u8] {
        // Fallback not taken: a validated value lies inside the buffer.
        self.buf.get(self.at..self.end()).unwrap_or(&[])
    }

    fn array<const W: usize>(&self) -> Option<[u8; W]> {
        crate::bytes::array::<W>(self.buf, self.at)
    }

    /// A `bool`.
    #[must_use]
    pub fn as_bool(&self) -> Option<bool> {
        (self.kind() == Kind::Bool).then(|| self.buf.get(self.at) == Some(&1))
    }

    /// A signed integer (`i8` `i16` `i32` `i64` `int`), widened.
    #[must_use]
    pub fn as_i64(&self) -> Option<i64> {
        Some(match self.kind() {
            Kind::I8 => i64::from(i8::from_le_bytes(self.array()?)),
            Kind::I16 => i64::from(i16::from_le_bytes(self.array()?)),
            Kind::I32 => i64::from(i32::from_le_bytes(self.array()?)),
            Kind::I64 | Kind::Int => i64::from_le_bytes(self.array()?),
            _ => return None,
        })
    }

    /// An unsigned integer (`u8` `u16` `u32` `u64` `uint`), widened.
    #[must_use]
    pub fn as_u64(&self) -> Option<u64> {
        Some(match self.kind() {
            Kind::U8 => u64::from(u8::from_le_bytes(self.array()?)),
            Kind::U16 => u64::from(u16::from_le_bytes(self.array()?)),
            Kind::U32 => u64::from(u32::from_le_bytes(self.array()?)),
            Kind::U64 | Kind::Uint => u64::from_le_bytes(self.array()?),
            _ => return None,
        })
    }

    /// An `f32`, every bit kept (NaN payloads, signed zero).
    #[must_use]
    pub fn as_f32(&self) -> Option<f32> {
        (self.kind() == Kind::F32).then(|| self.array().map(f32::from_le_bytes)).flatten()
    }

    /// An `f64`, every bit kept.
    #[must_use]
    pub fn as_f64(&self) -> Option<f64> {
        (self.kind() == Kind::F64).then(|| self.array().map(f64::from_le_bytes)).flatten()
    }

    fn run(&self) -> &'a [u8] {
        let start = self.at.saturating_add(4);
        // Fallback not taken: a validated run lies inside the buffer.
        self.buf.get(start..start.saturating_add(word(self.buf, self.at))).unwrap_or(&[])
    }

    /// A `str`. Without `unsafe` a `&str` needs a UTF-8 check, so this runs
    /// one (again); it only fails on a trusted read of bad bytes.
    #[must_use]
    pub fn as_str(&self) -> Option<&'a str> {
        self.as_str_bytes().and_then(|b| core::str::from_utf8(b).ok())
    }

    /// A `str`'s bytes, unchecked here (checked by a full, untrusted read).
    #[must_use]
    pub fn as_str_bytes(&self) -> Option<&'a [u8]> {
        (self.kind() == Kind::Str).then(|| self.run())
    }

    /// A `list<u8>` byte run.
    #[must_use]
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        let is_bytes = self.kind() == Kind::List && self.ty.elem().is_some_and(|e| e.kind() == Kind::U8);
        is_bytes.then(|| self.run())
    }

    /// A `list<T>` (including `list<u8>`).
    #[must_use]
    pub fn as_list(&self) -> Option<ListValue<'a, 's>> {
        let elem = self.ty.elem().filter(|_| self.kind() == Kind::List)?;
        Some(ListValue { elem, buf: self.buf, body: self.at.saturating_add(4), len: word(self.buf, self.at) })
    }

    /// An `opt<T>`: `Some(None)` when absent, `Some(Some(v))` when present.
    #[must_use]
    pub fn as_opt(&self) -> Option<Option<Value<'a, 's>>> {
        let elem = self.ty.elem().filter(|_| self.kind() == Kind::Opt)?;
        Some((self.buf.get(self.at) == Some(&1)).then(|| Value {
            ty: elem,
            buf: self.buf,
            at: self.at.saturating_add(1),
        }))
    }

    /// A `dict<str,V>`.
    #[must_use]
    pub fn as_dict(&self) -> Option<DictValue<'a, 's>> {
        let value = self.ty.elem().filter(|_| self.kind() == Kind::Dict)?;
        Some(DictValue { value, buf: self.buf, body: self.at.saturating_add(4), len: word(self.buf, self.at) })
    }

    /// A `struct{...}`.
    #[must_use]
    pub fn as_struct(&self) -> Option<StructValue<'a, 's>> {
        (self.kind() == Kind::Struct).then_some(StructValue { ty: self.ty, buf: self.buf, at: self.at })
    }

    /// The struct field called `name` (shorthand for `as_struct()?.field(name)`).
    #[must_use]
    pub fn field(&self, name: &str) -> Option<Value<'a, 's>> {
        self.as_struct()?.field(name)
    }

    /// A `tensors` field: the checked directory, borrowed.
    #[must_use]
    pub fn as_tensors(&self) -> Option<Directory<'a>> {
        if self.kind() != Kind::Tensors {
            return None;
        }
        checked_directory(self.buf, self.at)
    }
}

/// Rebuilds the [`Directory`] of a block the validator has checked, from its
/// header alone.
fn checked_directory(buf: &[u8], at: usize) -> Option<Directory<'_>> {
    let header = Header::parse(buf.get(at..)?).ok()?;
    Some(Directory::from_checked(buf, at, header, header.implied_regions()?))
}

/// A validated struct.
///
/// ```
/// use kiln_nostd::frozen::{read, Schema};
/// let s: Schema = Schema::parse("struct{a:u8,b:opt<u16>,}")?;
/// let v = read(&[1, 1, 2, 0], &s, &Default::default(), false)?;
/// let st = v.as_struct().unwrap();
/// let names: Vec<_> = st.fields().map(|(n, _)| n).collect();
/// assert_eq!(names, ["a", "b"]);
/// assert_eq!(st.field_at(1).and_then(|v| v.as_opt()).flatten().and_then(|v| v.as_u64()), Some(2));
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct StructValue<'a, 's> {
    ty: TypeRef<'s>,
    buf: &'a [u8],
    at: usize,
}

impl<'a, 's> StructValue<'a, 's> {
    /// Number of fields.
    pub fn len(&self) -> usize {
        self.ty.fields().count()
    }

    /// True for `struct{}`.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The fields and their values, in declaration order.
    pub fn fields(&self) -> StructFields<'a, 's> {
        StructFields { fields: self.ty.fields(), buf: self.buf, pos: self.at }
    }

    /// The field called `name`.
    #[must_use]
    pub fn field(&self, name: &str) -> Option<Value<'a, 's>> {
        self.fields().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Field number `index` in declaration order.
    #[must_use]
    pub fn field_at(&self, index: usize) -> Option<Value<'a, 's>> {
        self.fields().nth(index).map(|(_, v)| v)
    }
}

/// Iterator over a struct's (name, value) pairs.
#[derive(Clone, Debug)]
pub struct StructFields<'a, 's> {
    fields: super::typetext::Fields<'s>,
    buf: &'a [u8],
    pos: usize,
}

impl<'a, 's> Iterator for StructFields<'a, 's> {
    type Item = (&'s str, Value<'a, 's>);
    fn next(&mut self) -> Option<Self::Item> {
        let ty = self.fields.next()?;
        let v = Value { ty, buf: self.buf, at: self.pos };
        self.pos = skip(self.buf, ty, self.pos);
        Some((ty.name(), v))
    }
}

/// A validated list.
///
/// A list of a fixed-width numeric type is one contiguous little-endian
/// run: [`view`](ListValue::view) borrows it as `&[T]` when the host and the
/// alignment allow, [`copy_to`](ListValue::copy_to) decodes it anywhere.
///
/// ```
/// use kiln_nostd::frozen::{read, Schema};
/// let s: Schema = Schema::parse("list<f32>")?;
/// let buf = [2, 0, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0];
/// let list = read(&buf, &s, &Default::default(), false)?.as_list().unwrap();
/// let mut out = [0f32; 2];
/// assert_eq!(list.copy_to(&mut out), Ok(2));
/// assert_eq!(out, [1.0, -2.0]);
/// assert_eq!(list.get(1).and_then(|v| v.as_f32()), Some(-2.0));
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ListValue<'a, 's> {
    elem: TypeRef<'s>,
    buf: &'a [u8],
    body: usize,
    len: usize,
}

impl<'a, 's> ListValue<'a, 's> {
    /// Element count.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The element type.
    pub fn elem(&self) -> TypeRef<'s> {
        self.elem
    }

    /// The elements in order.
    pub fn iter(&self) -> ListIter<'a, 's> {
        ListIter { elem: self.elem, buf: self.buf, pos: self.body, left: self.len }
    }

    /// Element `index`: O(1) for fixed-width elements, O(index) otherwise.
    pub fn get(&self, index: usize) -> Option<Value<'a, 's>> {
        if index >= self.len {
            return None;
        }
        match self.elem.width().map(usize_from_u32) {
            Some(w) => {
                Some(Value { ty: self.elem, buf: self.buf, at: self.body.saturating_add(index.saturating_mul(w)) })
            }
            None => self.iter().nth(index),
        }
    }

    /// The element bytes when the elements have a fixed width (wire order).
    #[must_use]
    pub fn bytes(&self) -> Option<&'a [u8]> {
        let w = usize_from_u32(self.elem.width()?);
        self.buf.get(self.body..self.body.saturating_add(self.len.saturating_mul(w)))
    }

    /// The elements as `&[T]` without copying, when `T` matches the element
    /// kind (same rules as [`Tensor::as_slice`](crate::Tensor::as_slice):
    /// little-endian host or one-byte `T`, and aligned bytes). `int`/`uint`
    /// read as `i64`/`u64`; `bool` as `u8`.
    #[must_use]
    pub fn view<T: Element>(&self) -> Option<&'a [T]> {
        crate::dtype::view(self.elem.kind().dtype()?, self.bytes()?)
    }

    /// Decodes the elements into `out` as host values on any host; returns the count.
    pub fn copy_to<T: Element>(&self, out: &mut [T]) -> core::result::Result<usize, ViewError> {
        // Fallback: kinds without a dtype refuse every element type (ViewError).
        let dtype = self.elem.kind().dtype().unwrap_or(crate::DType::Opaque(0));
        // Fallback: lists of fixed-width elements have bytes; others get ViewError.
        crate::dtype::copy(dtype, self.bytes().unwrap_or(&[]), out)
    }
}

impl<'a, 's> IntoIterator for ListValue<'a, 's> {
    type Item = Value<'a, 's>;
    type IntoIter = ListIter<'a, 's>;
    fn into_iter(self) -> ListIter<'a, 's> {
        self.iter()
    }
}

/// Iterator over a list's elements.
#[derive(Clone, Debug)]
pub struct ListIter<'a, 's> {
    elem: TypeRef<'s>,
    buf: &'a [u8],
    pos: usize,
    left: usize,
}

impl<'a, 's> Iterator for ListIter<'a, 's> {
    type Item = Value<'a, 's>;
    fn next(&mut self) -> Option<Value<'a, 's>> {
        self.left = self.left.checked_sub(1)?;
        let v = Value { ty: self.elem, buf: self.buf, at: self.pos };
        self.pos = skip(self.buf, self.elem, self.pos);
        Some(v)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ListIter<'_, '_> {}

/// A validated dict: keys are unique and in increasing byte order.
///
/// [`get`](DictValue::get) scans and stops at the first key past the one asked
/// for; entries have no fixed size, so a binary search needs their offsets:
/// [`index`](DictValue::index) records them in caller scratch.
///
/// ```
/// use kiln_nostd::frozen::{read, Schema};
/// let s: Schema = Schema::parse("dict<str,u8>")?;
/// let buf = [2, 0, 0, 0, 1, 0, 0, 0, b'a', 10, 1, 0, 0, 0, b'b', 20];
/// let d = read(&buf, &s, &Default::default(), false)?.as_dict().unwrap();
/// assert_eq!(d.get("b").and_then(|v| v.as_u64()), Some(20));
/// let mut scratch = [0usize; 2];
/// let index = d.index(&mut scratch).unwrap();
/// assert_eq!(index.get("a").and_then(|v| v.as_u64()), Some(10));
/// assert!(index.get("c").is_none());
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DictValue<'a, 's> {
    value: TypeRef<'s>,
    buf: &'a [u8],
    body: usize,
    len: usize,
}

impl<'a, 's> DictValue<'a, 's> {
    /// Entry count.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value type.
    pub fn value_type(&self) -> TypeRef<'s> {
        self.value
    }

    /// The entries in key order, keys as raw bytes.
    pub fn entries(&self) -> DictIter<'a, 's> {
        DictIter { value: self.value, buf: self.buf, pos: self.body, left: self.len }
    }

    /// The entries in key order, keys as `&str` (UTF-8 checked again; a
    /// trusted read of a non-UTF-8 key yields `""`).
    pub fn iter(&self) -> DictStrIter<'a, 's> {
        DictStrIter(self.entries())
    }

    /// The value for `key`, by a scan that stops past it.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<Value<'a, 's>> {
        let key = key.as_bytes();
        for (k, v) in self.entries() {
            match k.cmp(key) {
                core::cmp::Ordering::Less => continue,
                core::cmp::Ordering::Equal => return Some(v),
                core::cmp::Ordering::Greater => return None,
            }
        }
        None
    }

    /// Records each entry's offset in `scratch` (at least `len()` slots) for
    /// binary-search lookups. `None` when the scratch is too short.
    pub fn index<'x>(&self, scratch: &'x mut [usize]) -> Option<DictIndex<'a, 's, 'x>> {
        let slots = scratch.get_mut(..self.len)?;
        let mut pos = self.body;
        for slot in slots.iter_mut() {
            *slot = pos;
            let key_end = pos.saturating_add(4).saturating_add(word(self.buf, pos));
            pos = skip(self.buf, self.value, key_end);
        }
        Some(DictIndex { dict: *self, offsets: slots })
    }

    fn entry_at(&self, pos: usize) -> (&'a [u8], Value<'a, 's>) {
        let len = word(self.buf, pos);
        let key_start = pos.saturating_add(4);
        let key_end = key_start.saturating_add(len);
        // Fallback not taken: validated keys lie inside the buffer.
        let key = self.buf.get(key_start..key_end).unwrap_or(&[]);
        (key, Value { ty: self.value, buf: self.buf, at: key_end })
    }
}

/// Iterator over a dict's (raw key, value) entries in key order.
#[derive(Clone, Debug)]
pub struct DictIter<'a, 's> {
    value: TypeRef<'s>,
    buf: &'a [u8],
    pos: usize,
    left: usize,
}

impl<'a, 's> Iterator for DictIter<'a, 's> {
    type Item = (&'a [u8], Value<'a, 's>);
    fn next(&mut self) -> Option<Self::Item> {
        self.left = self.left.checked_sub(1)?;
        let d = DictValue { value: self.value, buf: self.buf, body: 0, len: 0 };
        let (k, v) = d.entry_at(self.pos);
        self.pos = skip(self.buf, self.value, v.at);
        Some((k, v))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// Iterator over a dict's (key, value) entries in key order.
#[derive(Clone, Debug)]
pub struct DictStrIter<'a, 's>(DictIter<'a, 's>);

impl<'a, 's> Iterator for DictStrIter<'a, 's> {
    type Item = (&'a str, Value<'a, 's>);
    fn next(&mut self) -> Option<Self::Item> {
        // Fallback not taken: keys were checked UTF-8 when the value was validated.
        self.0.next().map(|(k, v)| (core::str::from_utf8(k).unwrap_or(""), v))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

/// A dict with recorded entry offsets: binary-search lookups.
#[derive(Debug)]
pub struct DictIndex<'a, 's, 'x> {
    dict: DictValue<'a, 's>,
    offsets: &'x [usize],
}

impl<'a, 's> DictIndex<'a, 's, '_> {
    /// The value for `key`, in O(log n) key comparisons.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<Value<'a, 's>> {
        let found = self.offsets.binary_search_by(|&pos| self.dict.entry_at(pos).0.cmp(key.as_bytes())).ok()?;
        self.offsets.get(found).map(|&pos| self.dict.entry_at(pos).1)
    }

    /// Entry `i` in key order.
    #[must_use]
    pub fn entry(&self, i: usize) -> Option<(&'a [u8], Value<'a, 's>)> {
        self.offsets.get(i).map(|&pos| self.dict.entry_at(pos))
    }
}
