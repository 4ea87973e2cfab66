//! The typed API: Rust types that know their Frozen type ([`KilnType`]),
//! decode from a buffer ([`Decode`]) and encode canonically ([`Encode`]).
//!
//! | Rust | Frozen |
//! |---|---|
//! | `bool`, `i8`..`i64`, `u8`..`u64`, `f32`, `f64` | the scalar of that name |
//! | [`Int`], [`Uint`] | `int`, `uint` |
//! | `&str` | `str` |
//! | `&[u8]` | `list<u8>` (byte cap) |
//! | [`ListView<T>`] | `list<T>`, fixed-width `T`, zero-copy |
//! | [`Seq<T>`] | `list<T>`, any `T`, checked up front, decoded lazily |
//! | `Option<T>` | `opt<T>` |
//! | [`DictView<V>`] | `dict<str,V>`, borrowed, lazily decoded |
//! | [`DictPairs`] | `dict<str,V>` to encode from unsorted pairs |
//! | [`Directory`] / [`TensorSpecs`] | `tensors` (decode / encode) |
//! | `#[derive(Kiln)]` struct | `struct{...}` |
//! | `String`, `Vec<T>`, `BTreeMap<String, V>` (feature `alloc`) | `str`, `list<T>`, `dict<str,V>` |
//!
//! Every decode runs the same checks as the schema validator: the count
//! check before a count is trusted, UTF-8, bool and opt bytes, key order,
//! nested directories, and TRAILING for a standalone value.

use core::marker::PhantomData;

use crate::bytes::usize_from_u32;
use crate::directory::Directory;
use crate::directory::Limits;
use crate::dtype::{Element, ViewError};
use crate::error::{fail, Result, Rule};
use crate::writer::{TensorSpec, Writer};

use super::check::{check_count, check_utf8, skip, word, Checker, CountKind};
use super::encoder::Encoder;
use super::frame::{check_frame, write_frame, FRAME_LEN};
use super::kind::MAX_DEPTH;
use super::ty::Ty;

/// A Rust type with a Frozen type.
///
/// ```
/// use kiln_nostd::frozen::KilnType;
/// assert_eq!(<Option<&str> as KilnType>::TY.to_string_in::<16>().as_deref(), Some("opt<str>"));
/// assert_eq!(<u64 as KilnType>::SCHEMA_HASH, kiln_nostd::frozen::hash_text("u64"));
/// ```
pub trait KilnType {
    /// The Frozen type.
    const TY: &'static Ty;
    /// Its schema hash, computed at compile time.
    const SCHEMA_HASH: u64 = Self::TY.schema_hash();
}

/// Decodes a value borrowed from a buffer that lives for `'a`.
pub trait Decode<'a>: KilnType + Sized {
    /// Reads one value at the decoder's position, checking it.
    fn decode(d: &mut Decoder<'a>) -> Result<Self>;

    /// Decodes `n` consecutive values into a new `Vec`; called only after
    /// the count check of their list passed. Fixed-width scalars override
    /// it with one bulk copy.
    #[cfg(feature = "alloc")]
    #[doc(hidden)]
    fn decode_vec(d: &mut Decoder<'a>, n: usize) -> Result<alloc::vec::Vec<Self>> {
        let mut out = alloc::vec::Vec::with_capacity(n);
        for _ in 0..n {
            out.push(Self::decode(d)?);
        }
        Ok(out)
    }
}

/// Encodes a value canonically.
pub trait Encode: KilnType {
    /// The exact encoded length (saturating).
    fn encoded_len(&self) -> usize;
    /// Writes the canonical encoding.
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()>;
}

/// Decodes `buf` as exactly one `T` (default caps, no frame).
///
/// ```
/// let v: Option<&str> = kiln_nostd::frozen::decode(&[1, 2, 0, 0, 0, b'o', b'k'])?;
/// assert_eq!(v, Some("ok"));
/// let e = kiln_nostd::frozen::decode::<u8>(&[1, 2]).unwrap_err();
/// assert_eq!((e.code().as_str(), e.offset()), ("TRAILING", 1));
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
pub fn decode<'a, T: Decode<'a>>(buf: &'a [u8]) -> Result<T> {
    decode_with(buf, &Limits::DEFAULT, false)
}

/// Decodes a framed `T`: the frame's hash must be `T`'s (SCHEMA otherwise).
pub fn decode_framed<'a, T: Decode<'a>>(buf: &'a [u8]) -> Result<T> {
    decode_with(buf, &Limits::DEFAULT, true)
}

/// Decodes `buf` as exactly one `T` with these caps, framed or not.
pub fn decode_with<'a, T: Decode<'a>>(buf: &'a [u8], limits: &Limits, framed: bool) -> Result<T> {
    if T::TY.depth() > MAX_DEPTH {
        return fail(Rule::TypeDepth, 0);
    }
    let start = if framed { check_frame(buf, T::SCHEMA_HASH)? } else { 0 };
    let mut d = Decoder { checker: Checker { buf, limits: *limits, utf8: true }, pos: start };
    let value = T::decode(&mut d)?;
    d.finish()?;
    Ok(value)
}

/// The exact encoded length of `value`, so a caller can size the buffer.
/// Saturates at `usize::MAX` (such a value cannot be written).
///
/// ```
/// assert_eq!(kiln_nostd::frozen::encoded_len("hi"), 6);
/// assert_eq!(kiln_nostd::frozen::encoded_len(&[1.0f32, 2.0][..]), 12);
/// ```
pub fn encoded_len<T: Encode + ?Sized>(value: &T) -> usize {
    value.encoded_len()
}

/// Writes the canonical encoding of `value` at the start of `out`; returns
/// its length. A short `out` is EOF ([`Rule::ValueOutputTooSmall`]).
///
/// ```
/// let mut out = [0u8; 8];
/// assert_eq!(kiln_nostd::frozen::encode(&-0.0f32, &mut out), Ok(4));
/// assert_eq!(&out[..4], &[0, 0, 0, 0x80]);
/// ```
pub fn encode<T: Encode + ?Sized>(value: &T, out: &mut [u8]) -> Result<usize> {
    let mut e = Encoder::new(out);
    value.encode(&mut e)?;
    Ok(e.position())
}

/// Like [`encode`], behind the 16-byte frame carrying `T`'s schema hash.
///
/// ```
/// use kiln_nostd::frozen::{encode_framed, decode_framed};
/// let mut out = [0u8; 32];
/// let n = encode_framed(&7u64, &mut out)?;
/// assert_eq!(n, 24);
/// assert_eq!(decode_framed::<u64>(&out[..n])?, 7);
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
pub fn encode_framed<T: Encode + ?Sized>(value: &T, out: &mut [u8]) -> Result<usize> {
    write_frame(T::SCHEMA_HASH, out)?;
    // Fallback not taken: write_frame just checked that the frame fits.
    let rest = out.get_mut(FRAME_LEN..).unwrap_or(&mut []);
    let n = encode(value, rest).map_err(|e| e.shifted(FRAME_LEN))?;
    Ok(n.saturating_add(FRAME_LEN))
}

/// `16 + encoded_len(value)`, saturating.
pub fn encoded_len_framed<T: Encode + ?Sized>(value: &T) -> usize {
    value.encoded_len().saturating_add(FRAME_LEN)
}

/// A read cursor with the checks of the format. `Decode` impls use it.
///
/// ```
/// use kiln_nostd::frozen::Decoder;
/// let buf = [1, 3, 0, 0, 0, b'a', b'b', b'c'];
/// let mut d = Decoder::new(&buf);
/// assert_eq!(d.bool()?, true);
/// assert_eq!(d.str()?, "abc");
/// d.finish()?;
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Decoder<'a> {
    checker: Checker<'a>,
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder at the start of `buf` with the default caps.
    #[must_use]
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder::starting_at(buf, 0, Limits::DEFAULT)
    }

    /// A decoder at absolute offset `pos` of `buf` with these caps.
    #[must_use]
    pub fn starting_at(buf: &'a [u8], pos: usize, limits: Limits) -> Self {
        Decoder { checker: Checker { buf, limits, utf8: true }, pos }
    }

    /// The absolute read position.
    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The whole buffer.
    #[inline]
    pub fn buffer(&self) -> &'a [u8] {
        self.checker.buf
    }

    /// The caps in force.
    pub fn limits(&self) -> Limits {
        self.checker.limits
    }

    /// TRAILING unless every byte has been read.
    #[inline]
    pub fn finish(&self) -> Result<()> {
        if self.pos != self.checker.buf.len() {
            return fail(Rule::TrailingBytes, self.pos);
        }
        Ok(())
    }

    /// `W` bytes of a fixed-width scalar (EOF when short).
    #[inline]
    pub fn array<const W: usize>(&mut self) -> Result<[u8; W]> {
        let Some(a) = crate::bytes::array::<W>(self.checker.buf, self.pos) else {
            return fail(Rule::ValueTruncated, self.pos);
        };
        self.pos = self.pos.saturating_add(W);
        Ok(a)
    }

    #[inline]
    fn byte(&mut self) -> Result<u8> {
        self.array::<1>().map(|[b]| b)
    }

    /// A bool byte: 0 or 1, else TYPE.
    #[inline]
    pub fn bool(&mut self) -> Result<bool> {
        let at = self.pos;
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => fail(Rule::BoolValue, at),
        }
    }

    /// An opt tag: 0 absent, 1 present, else TYPE.
    #[inline]
    pub fn tag(&mut self) -> Result<bool> {
        let at = self.pos;
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => fail(Rule::OptTag, at),
        }
    }

    /// A `str`.
    #[inline]
    pub fn str(&mut self) -> Result<&'a str> {
        let at = self.pos;
        let body = self.bytes()?;
        check_utf8(body, at.saturating_add(4))
    }

    /// A `list<u8>` (or a `str`'s raw bytes): byte cap, then the bytes.
    #[inline]
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let (body, end) = self.checker.byte_run(self.pos)?;
        self.pos = end;
        Ok(body)
    }

    /// The count word of a `list<elem>`, after the count check (byte cap
    /// for `list<u8>`, count cap otherwise, minimum size of `elem`). The
    /// cursor moves to the first element.
    #[inline]
    pub fn list_count(&mut self, elem: &'static Ty) -> Result<usize> {
        let kind = CountKind::of_list(elem.kind());
        let n = check_count(self.checker.buf, self.pos, kind, elem.min_size(), &self.checker.limits)?;
        self.pos = self.pos.saturating_add(4);
        Ok(n)
    }

    /// The count word of a `dict<str,value>`, after the count check (an
    /// entry's minimum is 4 + the value's).
    #[inline]
    pub fn dict_count(&mut self, value: &'static Ty) -> Result<usize> {
        let m = value.min_size().saturating_add(4);
        let n = check_count(self.checker.buf, self.pos, CountKind::Count, m, &self.checker.limits)?;
        self.pos = self.pos.saturating_add(4);
        Ok(n)
    }

    /// A dict key that must sort strictly after `prev` (TYPE otherwise).
    #[inline]
    pub fn dict_key(&mut self, prev: Option<&[u8]>) -> Result<&'a str> {
        let at = self.pos;
        let key = self.str()?;
        if prev.is_some_and(|p| key.as_bytes() <= p) {
            return fail(Rule::DictKeyOrder, at);
        }
        Ok(key)
    }

    /// Like [`dict_key`](Self::dict_key), returning the checked key's bytes.
    #[inline]
    pub fn dict_key_bytes(&mut self, prev: Option<&[u8]>) -> Result<&'a [u8]> {
        let at = self.pos;
        let key = self.bytes()?;
        super::check::check_utf8_fast(key, at.saturating_add(4))?;
        if prev.is_some_and(|p| key <= p) {
            return fail(Rule::DictKeyOrder, at);
        }
        Ok(key)
    }

    /// `n` raw bytes whose presence a count check has proved.
    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.saturating_add(n);
        let Some(b) = self.checker.buf.get(self.pos..end) else {
            return fail(Rule::ValueTruncated, self.pos);
        };
        self.pos = end;
        Ok(b)
    }

    /// Checks one value of type `ty` without building it; returns its bytes.
    #[inline]
    pub fn skip(&mut self, ty: &'static Ty) -> Result<&'a [u8]> {
        let start = self.pos;
        let end = self.checker.value(ty, start)?;
        self.pos = end;
        // Fallback not taken: the checker just accepted start..end inside the buffer.
        Ok(self.checker.buf.get(start..end).unwrap_or(&[]))
    }

    /// A `tensors` field: the directory block, checked; the cursor moves to its end.
    pub fn tensors(&mut self) -> Result<Directory<'a>> {
        let dir = crate::Parser::new().limits(self.checker.limits).parse_at(self.checker.buf, self.pos)?;
        self.pos = dir.end();
        Ok(dir)
    }
}

macro_rules! scalar {
    ($t:ty, $ty:expr) => {
        impl KilnType for $t {
            const TY: &'static Ty = &$ty;
        }
        impl<'a> Decode<'a> for $t {
            #[inline]
            fn decode(d: &mut Decoder<'a>) -> Result<Self> {
                d.array().map(<$t>::from_le_bytes)
            }

            #[cfg(feature = "alloc")]
            #[inline]
            fn decode_vec(d: &mut Decoder<'a>, n: usize) -> Result<alloc::vec::Vec<Self>> {
                const W: usize = core::mem::size_of::<$t>();
                let bytes = d.take(n.saturating_mul(W))?;
                // Fallback not taken: chunks_exact(W) yields W-byte chunks: the conversion cannot fail.
                Ok(bytes.chunks_exact(W).map(|c| <$t>::from_le_bytes(c.try_into().unwrap_or([0; W]))).collect())
            }
        }
        impl Encode for $t {
            #[inline]
            fn encoded_len(&self) -> usize {
                core::mem::size_of::<$t>()
            }
            #[inline]
            fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
                e.put(&self.to_le_bytes())
            }
        }
    };
}

scalar!(i8, Ty::I8);
scalar!(i16, Ty::I16);
scalar!(i32, Ty::I32);
scalar!(i64, Ty::I64);
scalar!(u8, Ty::U8);
scalar!(u16, Ty::U16);
scalar!(u32, Ty::U32);
scalar!(u64, Ty::U64);
// `from_le_bytes`/`to_le_bytes` move the bits: NaN payloads and signed zeros survive.
scalar!(f32, Ty::F32);
scalar!(f64, Ty::F64);

impl KilnType for bool {
    const TY: &'static Ty = &Ty::BOOL;
}

impl<'a> Decode<'a> for bool {
    fn decode(d: &mut Decoder<'a>) -> Result<Self> {
        d.bool()
    }
}

impl Encode for bool {
    fn encoded_len(&self) -> usize {
        1
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        e.put_u8(u8::from(*self))
    }
}

/// `int`: an i64 on the wire, hashed as `int`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Int(pub i64);

/// `uint`: a u64 on the wire, hashed as `uint`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uint(pub u64);

macro_rules! wide {
    ($t:ident, $inner:ty, $ty:expr) => {
        impl KilnType for $t {
            const TY: &'static Ty = &$ty;
        }
        impl<'a> Decode<'a> for $t {
            fn decode(d: &mut Decoder<'a>) -> Result<Self> {
                <$inner>::decode(d).map($t)
            }
        }
        impl Encode for $t {
            fn encoded_len(&self) -> usize {
                8
            }
            fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
                self.0.encode(e)
            }
        }
    };
}

wide!(Int, i64, Ty::INT);
wide!(Uint, u64, Ty::UINT);

impl KilnType for str {
    const TY: &'static Ty = &Ty::STR;
}

impl<'a> Decode<'a> for &'a str {
    fn decode(d: &mut Decoder<'a>) -> Result<Self> {
        d.str()
    }
}

impl Encode for str {
    fn encoded_len(&self) -> usize {
        self.len().saturating_add(4)
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        e.put_str(self)
    }
}

impl<T: KilnType + ?Sized> KilnType for &T {
    const TY: &'static Ty = T::TY;
}

impl<T: Encode + ?Sized> Encode for &T {
    fn encoded_len(&self) -> usize {
        (**self).encoded_len()
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        (**self).encode(e)
    }
}

/// `[T]` is `list<T>` (so `[u8]` is `list<u8>`).
impl<T: KilnType> KilnType for [T] {
    const TY: &'static Ty = &Ty::list(T::TY);
}

impl<'a> Decode<'a> for &'a [u8] {
    fn decode(d: &mut Decoder<'a>) -> Result<Self> {
        d.bytes()
    }
}

impl<T: Encode> Encode for [T] {
    fn encoded_len(&self) -> usize {
        self.iter().fold(4usize, |n, x| n.saturating_add(x.encoded_len()))
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        e.put_count(self.len())?;
        self.iter().try_for_each(|x| x.encode(e))
    }
}

impl<T: KilnType, const N: usize> KilnType for [T; N] {
    const TY: &'static Ty = &Ty::list(T::TY);
}

/// A fixed-size array encodes as a `list<T>` of `N` elements.
impl<T: Encode, const N: usize> Encode for [T; N] {
    fn encoded_len(&self) -> usize {
        self.as_slice().encoded_len()
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        self.as_slice().encode(e)
    }
}

impl<T: KilnType> KilnType for Option<T> {
    const TY: &'static Ty = &Ty::opt(T::TY);
}

impl<'a, T: Decode<'a>> Decode<'a> for Option<T> {
    fn decode(d: &mut Decoder<'a>) -> Result<Self> {
        if d.tag()? {
            T::decode(d).map(Some)
        } else {
            Ok(None)
        }
    }
}

impl<T: Encode> Encode for Option<T> {
    fn encoded_len(&self) -> usize {
        self.as_ref().map_or(0, Encode::encoded_len).saturating_add(1)
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        match self {
            None => e.put_u8(0),
            Some(v) => {
                e.put_u8(1)?;
                v.encode(e)
            }
        }
    }
}

/// A borrowed `list<T>` of a fixed-width numeric `T`: the wire bytes, read
/// in place.
///
/// ```
/// use kiln_nostd::frozen::{decode, ListView};
/// let buf = [2, 0, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0];
/// let v: ListView<f32> = decode(&buf)?;
/// assert_eq!(v.len(), 2);
/// assert_eq!(v.get(1), Some(-2.0));
/// assert_eq!(v.iter().sum::<f32>(), -1.0);
/// let mut out = [0f32; 2];
/// v.copy_to(&mut out).unwrap();
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListView<'a, T> {
    bytes: &'a [u8],
    _t: PhantomData<T>,
}

impl<'a, T: Element + KilnType> ListView<'a, T> {
    /// A view of `bytes`, which must hold whole elements (extra bytes are ignored).
    #[must_use]
    pub fn from_wire(bytes: &'a [u8]) -> Self {
        // Fallback not taken: WIDTH is a nonzero constant, and whole <= len.
        let whole = bytes.len().checked_div(T::WIDTH).unwrap_or(0).saturating_mul(T::WIDTH);
        ListView { bytes: bytes.get(..whole).unwrap_or(&[]), _t: PhantomData }
    }

    /// Element count.
    pub fn len(&self) -> usize {
        // Fallback not taken: WIDTH is a nonzero constant: never 0 by fallback.
        self.bytes.len().checked_div(T::WIDTH).unwrap_or(0)
    }

    /// True when empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The wire bytes (little-endian elements back to back).
    pub fn wire_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Element `i`.
    pub fn get(&self, i: usize) -> Option<T> {
        let at = i.checked_mul(T::WIDTH)?;
        self.bytes.get(at..at.checked_add(T::WIDTH)?).map(T::from_le)
    }

    /// The elements, decoded one by one (any host, any alignment).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = T> + 'a {
        self.bytes.chunks_exact(T::WIDTH).map(T::from_le)
    }

    /// `&[T]` without copying, when the host is little-endian (or `T` is a
    /// byte) and the bytes are aligned for `T`; else `None`.
    #[must_use]
    pub fn as_slice(&self) -> Option<&'a [T]> {
        let dtype = T::TY.kind().dtype()?;
        crate::dtype::view(dtype, self.bytes)
    }

    /// Decodes into `out`; returns the element count.
    pub fn copy_to(&self, out: &mut [T]) -> core::result::Result<usize, ViewError> {
        // Fallback not taken: element types always have a dtype (sealed Element).
        let dtype = T::TY.kind().dtype().unwrap_or(crate::DType::Opaque(0));
        crate::dtype::copy(dtype, self.bytes, out)
    }
}

impl<T: KilnType> KilnType for ListView<'_, T> {
    const TY: &'static Ty = &Ty::list(T::TY);
}

impl<'a, T: Element + KilnType> Decode<'a> for ListView<'a, T> {
    fn decode(d: &mut Decoder<'a>) -> Result<Self> {
        let n = d.list_count(T::TY)?;
        // The count check proved n * WIDTH bytes are there.
        let bytes = d.take(n.saturating_mul(T::WIDTH))?;
        Ok(ListView { bytes, _t: PhantomData })
    }
}

impl<T: Element + KilnType> Encode for ListView<'_, T> {
    fn encoded_len(&self) -> usize {
        self.bytes.len().saturating_add(4)
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        e.put_count(self.len())?;
        e.put(self.bytes)
    }
}

/// A borrowed `list<T>` of any element type: every element is checked when
/// the list is decoded, then decoded again on demand.
///
/// ```
/// use kiln_nostd::frozen::{decode, Seq};
/// let buf = [2, 0, 0, 0, 1, 0, 0, 0, b'a', 0, 0, 0, 0];
/// let names: Seq<&str> = decode(&buf)?;
/// assert_eq!(names.iter().collect::<Vec<_>>(), ["a", ""]);
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Seq<'a, T> {
    buf: &'a [u8],
    body: usize,
    len: usize,
    _t: PhantomData<T>,
}

impl<'a, T: Decode<'a>> Seq<'a, T> {
    /// Element count.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements, decoded in order.
    pub fn iter(&self) -> SeqIter<'a, T> {
        SeqIter { d: Decoder::starting_at(self.buf, self.body, Limits::MAX), left: self.len, _t: PhantomData }
    }

    /// Element `i` (O(1) for fixed-width elements, O(i) otherwise).
    #[must_use]
    pub fn get(&self, i: usize) -> Option<T> {
        if i >= self.len {
            return None;
        }
        match T::TY.width().and_then(|w| usize::try_from(w).ok()) {
            Some(w) => T::decode(&mut Decoder::starting_at(
                self.buf,
                self.body.saturating_add(i.saturating_mul(w)),
                Limits::MAX,
            ))
            .ok(),
            None => self.iter().nth(i),
        }
    }

    fn raw(&self) -> &'a [u8] {
        let end = (0..self.len).fold(self.body, |pos, _| skip(self.buf, T::TY, pos));
        // Fallback not taken: the entries were checked when decoded: the range is inside the buffer.
        self.buf.get(self.body..end).unwrap_or(&[])
    }
}

/// Iterator over a [`Seq`].
#[derive(Clone, Debug)]
pub struct SeqIter<'a, T> {
    d: Decoder<'a>,
    left: usize,
    _t: PhantomData<T>,
}

impl<'a, T: Decode<'a>> Iterator for SeqIter<'a, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.left = self.left.checked_sub(1)?;
        // Checked when the Seq was decoded; an error here cannot happen.
        T::decode(&mut self.d).ok()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<T: KilnType> KilnType for Seq<'_, T> {
    const TY: &'static Ty = &Ty::list(T::TY);
}

impl<'a, T: KilnType> Decode<'a> for Seq<'a, T> {
    fn decode(d: &mut Decoder<'a>) -> Result<Self> {
        let len = d.list_count(T::TY)?;
        let body = d.position();
        if T::TY.shape().plain {
            // Fallback not taken: plain types have a width.
            d.take(len.saturating_mul(T::TY.width().map_or(0, usize_from_u32)))?;
        } else {
            for _ in 0..len {
                d.skip(T::TY)?;
            }
        }
        Ok(Seq { buf: d.buffer(), body, len, _t: PhantomData })
    }
}

impl<'a, T: Decode<'a>> Encode for Seq<'a, T> {
    fn encoded_len(&self) -> usize {
        self.raw().len().saturating_add(4)
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        e.put_count(self.len)?;
        e.put(self.raw())
    }
}

/// A borrowed `dict<str,V>`: keys and values checked when decoded, then
/// read on demand. Lookups scan in key order and stop past the key.
///
/// ```
/// use kiln_nostd::frozen::{decode, DictView};
/// let buf = [2, 0, 0, 0, 1, 0, 0, 0, b'a', 10, 1, 0, 0, 0, b'b', 20];
/// let d: DictView<u8> = decode(&buf)?;
/// assert_eq!(d.get("b"), Some(20));
/// assert_eq!(d.iter().collect::<Vec<_>>(), [("a", 10), ("b", 20)]);
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DictView<'a, V> {
    buf: &'a [u8],
    body: usize,
    end: usize,
    len: usize,
    _v: PhantomData<V>,
}

impl<'a, V: Decode<'a>> DictView<'a, V> {
    /// Entry count.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entries in key order.
    pub fn iter(&self) -> DictViewIter<'a, V> {
        DictViewIter { d: Decoder::starting_at(self.buf, self.body, Limits::MAX), left: self.len, _v: PhantomData }
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &'a str> + 'a {
        let (buf, mut pos) = (self.buf, self.body);
        (0..self.len).map(move |_| {
            let mut d = Decoder::starting_at(buf, pos, Limits::MAX);
            // Fallback not taken: keys were checked when the dict was decoded.
            let key = d.str().unwrap_or("");
            pos = skip(buf, V::TY, d.position());
            key
        })
    }

    /// The value for `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<V> {
        let mut pos = self.body;
        for _ in 0..self.len {
            let len = word(self.buf, pos);
            let start = pos.saturating_add(4);
            let k = self.buf.get(start..start.saturating_add(len))?;
            let value_at = start.saturating_add(len);
            match k.cmp(key.as_bytes()) {
                core::cmp::Ordering::Less => pos = skip(self.buf, V::TY, value_at),
                core::cmp::Ordering::Equal => {
                    return V::decode(&mut Decoder::starting_at(self.buf, value_at, Limits::MAX)).ok()
                }
                core::cmp::Ordering::Greater => return None,
            }
        }
        None
    }
}

/// Iterator over a [`DictView`]'s entries.
#[derive(Clone, Debug)]
pub struct DictViewIter<'a, V> {
    d: Decoder<'a>,
    left: usize,
    _v: PhantomData<V>,
}

impl<'a, V: Decode<'a>> Iterator for DictViewIter<'a, V> {
    type Item = (&'a str, V);
    fn next(&mut self) -> Option<Self::Item> {
        self.left = self.left.checked_sub(1)?;
        let key = self.d.str().ok()?;
        V::decode(&mut self.d).ok().map(|v| (key, v))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<V: KilnType> KilnType for DictView<'_, V> {
    const TY: &'static Ty = &Ty::dict(V::TY);
}

impl<'a, V: KilnType> Decode<'a> for DictView<'a, V> {
    fn decode(d: &mut Decoder<'a>) -> Result<Self> {
        let len = d.dict_count(V::TY)?;
        let body = d.position();
        let plain = V::TY.shape().plain;
        // Fallback: a value without a fixed width is not plain, so the width is unused.
        let width = V::TY.width().map_or(0, usize_from_u32);
        let mut prev: Option<&[u8]> = None;
        for _ in 0..len {
            prev = Some(d.dict_key_bytes(prev)?);
            // Any bytes are a plain value: bounds only. When they are short,
            // the walk reports the field that does not fit.
            if !plain || d.take(width).is_err() {
                d.skip(V::TY)?;
            }
        }
        Ok(DictView { buf: d.buffer(), body, end: d.position(), len, _v: PhantomData })
    }
}

impl<V: KilnType> Encode for DictView<'_, V> {
    fn encoded_len(&self) -> usize {
        self.end.saturating_sub(self.body).saturating_add(4)
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        e.put_count(self.len)?;
        // Fallback not taken: body..end was checked when the dict was decoded.
        e.put(self.buf.get(self.body..self.end).unwrap_or(&[]))
    }
}

/// A `dict<str,V>` to encode from (key, value) pairs in any order: the
/// encoder writes them in key byte order (already sorted input takes one
/// pass; otherwise it selects the next key each time, O(n²), with no
/// allocation). Equal keys are TYPE ([`Rule::DuplicateDictKey`]).
///
/// ```
/// use kiln_nostd::frozen::{encode, DictPairs};
/// let pairs = [("b", 2u8), ("a", 1)];
/// let mut out = [0u8; 16];
/// let n = encode(&DictPairs(&pairs[..]), &mut out)?;
/// assert_eq!(&out[..n], &[2, 0, 0, 0, 1, 0, 0, 0, b'a', 1, 1, 0, 0, 0, b'b', 2]);
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DictPairs<'s, K, V>(pub &'s [(K, V)]);

impl<K, V: KilnType> KilnType for DictPairs<'_, K, V> {
    const TY: &'static Ty = &Ty::dict(V::TY);
}

impl<K: AsRef<str>, V: Encode> Encode for DictPairs<'_, K, V> {
    fn encoded_len(&self) -> usize {
        self.0
            .iter()
            .fold(4usize, |n, (k, v)| n.saturating_add(k.as_ref().encoded_len()).saturating_add(v.encoded_len()))
    }

    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        let pairs = self.0;
        e.put_count(pairs.len())?;
        let key = key_of::<K, V>;
        let sorted = pairs.windows(2).all(|w| match w {
            [a, b] => key(a) < key(b),
            _ => true,
        });
        if sorted {
            return pairs.iter().try_for_each(|(k, v)| put_entry(e, k.as_ref(), v));
        }
        let mut last: Option<&[u8]> = None;
        for _ in 0..pairs.len() {
            let mut next: Option<&(K, V)> = None;
            for p in pairs.iter().filter(|p| match last {
                None => true,
                Some(l) => key(p) > l,
            }) {
                match next {
                    Some(n) if key(p) == key(n) => return fail(Rule::DuplicateDictKey, e.position()),
                    Some(n) if key(p) > key(n) => {}
                    _ => next = Some(p),
                }
            }
            let Some(p) = next else {
                // Every remaining pair repeats an emitted key.
                return fail(Rule::DuplicateDictKey, e.position());
            };
            put_entry(e, p.0.as_ref(), &p.1)?;
            last = Some(key(p));
        }
        Ok(())
    }
}

fn key_of<K: AsRef<str>, V>(p: &(K, V)) -> &[u8] {
    p.0.as_ref().as_bytes()
}

fn put_entry<V: Encode>(e: &mut Encoder<'_>, key: &str, value: &V) -> Result<()> {
    e.put_str(key)?;
    value.encode(e)
}

impl KilnType for Directory<'_> {
    const TY: &'static Ty = &Ty::TENSORS;
}

impl<'a> Decode<'a> for Directory<'a> {
    fn decode(d: &mut Decoder<'a>) -> Result<Self> {
        d.tensors()
    }
}

/// A checked directory re-encodes as its block (canonical by construction).
impl Encode for Directory<'_> {
    fn encoded_len(&self) -> usize {
        self.block_len()
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        e.put(self.block())
    }
}

/// A `tensors` value to encode: the tensors in descriptor order, written as
/// one canonical directory block by [`Writer`].
///
/// ```
/// use kiln_nostd::{frozen::{decode, encode, TensorSpecs}, DType, Directory, TensorSpec};
/// let data = [0, 0, 0x80, 0x3f];
/// let specs = [TensorSpec::new(DType::F32, &[1], &data)];
/// let mut out = [0u8; 256];
/// let n = encode(&TensorSpecs(&specs), &mut out)?;
/// let dir: Directory = decode(&out[..n])?;
/// assert_eq!(dir.len(), 1);
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TensorSpecs<'s>(pub &'s [TensorSpec<'s>]);

impl KilnType for TensorSpecs<'_> {
    const TY: &'static Ty = &Ty::TENSORS;
}

impl Encode for TensorSpecs<'_> {
    fn encoded_len(&self) -> usize {
        // Fallback: no length (the writer refuses the specs): usize::MAX, and encode reports the error.
        Writer::new().encoded_len(self.0).unwrap_or(usize::MAX)
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        e.put_tensors(self.0)
    }
}
