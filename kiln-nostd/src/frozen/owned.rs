//! Owned decoding (feature `alloc`): `String`, `Vec<T>`, `BTreeMap<String, V>`.
//!
//! The allocation rule holds: storage for a count is reserved only after the
//! count check passed (the unread bytes hold the count's minimum encoding),
//! and a string body is copied only after its length fit.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

use crate::error::Result;

use super::encoder::Encoder;
use super::ty::Ty;
use super::typed::{Decode, Decoder, Encode, KilnType};

impl KilnType for String {
    const TY: &'static Ty = &Ty::STR;
}

impl<'a> Decode<'a> for String {
    fn decode(d: &mut Decoder<'a>) -> Result<Self> {
        d.str().map(String::from)
    }
}

impl Encode for String {
    fn encoded_len(&self) -> usize {
        self.as_str().encoded_len()
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        e.put_str(self)
    }
}

impl<T: KilnType> KilnType for Vec<T> {
    const TY: &'static Ty = &Ty::list(T::TY);
}

/// ```
/// let v: Vec<u16> = kiln_nostd::frozen::decode(&[2, 0, 0, 0, 1, 0, 2, 0])?;
/// assert_eq!(v, [1, 2]);
/// // 16,777,216 claimed structs in 12 bytes: EOF before any allocation.
/// let hostile = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
/// let e = kiln_nostd::frozen::decode::<Vec<u64>>(&hostile).unwrap_err();
/// assert_eq!(e.code().as_str(), "EOF");
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
impl<'a, T: Decode<'a>> Decode<'a> for Vec<T> {
    fn decode(d: &mut Decoder<'a>) -> Result<Self> {
        let n = d.list_count(T::TY)?;
        // The count check passed: n minimum-size elements fit in the unread
        // bytes (or the element has size 0 and the cap bounds n).
        T::decode_vec(d, n)
    }
}

impl<T: Encode> Encode for Vec<T> {
    fn encoded_len(&self) -> usize {
        self.as_slice().encoded_len()
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        self.as_slice().encode(e)
    }
}

impl<V: KilnType> KilnType for BTreeMap<String, V> {
    const TY: &'static Ty = &Ty::dict(V::TY);
}

/// Keys must arrive in strictly increasing byte order (TYPE otherwise).
impl<'a, V: Decode<'a>> Decode<'a> for BTreeMap<String, V> {
    fn decode(d: &mut Decoder<'a>) -> Result<Self> {
        let n = d.dict_count(V::TY)?;
        // The count check passed, so n entries may be reserved. The keys
        // arrive sorted and unique (checked), so the map is bulk-built.
        let mut entries = Vec::with_capacity(n);
        let mut prev: Option<&'a str> = None;
        for _ in 0..n {
            let key = d.dict_key(prev.map(str::as_bytes))?;
            prev = Some(key);
            entries.push((String::from(key), V::decode(d)?));
        }
        Ok(entries.into_iter().collect())
    }
}

/// `String`'s order is byte order, so iteration order is the canonical key order.
impl<V: Encode> Encode for BTreeMap<String, V> {
    fn encoded_len(&self) -> usize {
        self.iter().fold(4usize, |n, (k, v)| n.saturating_add(k.as_str().encoded_len()).saturating_add(v.encoded_len()))
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        e.put_count(self.len())?;
        self.iter().try_for_each(|(k, v)| {
            e.put_str(k)?;
            v.encode(e)
        })
    }
}

impl<T: KilnType + ?Sized> KilnType for alloc::boxed::Box<T> {
    const TY: &'static Ty = T::TY;
}

impl<'a, T: Decode<'a>> Decode<'a> for alloc::boxed::Box<T> {
    fn decode(d: &mut Decoder<'a>) -> Result<Self> {
        T::decode(d).map(alloc::boxed::Box::new)
    }
}

impl<T: Encode + ?Sized> Encode for alloc::boxed::Box<T> {
    fn encoded_len(&self) -> usize {
        (**self).encoded_len()
    }
    fn encode(&self, e: &mut Encoder<'_>) -> Result<()> {
        (**self).encode(e)
    }
}
