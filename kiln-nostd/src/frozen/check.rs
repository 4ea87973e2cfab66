//! The Frozen validator: one walk of the buffer against a type, with the
//! spec's count checks before anything is trusted, and `skip`, which finds
//! the end of an already checked value without checking it again.
//!
//! Both work on any [`Tree`]: a parsed [`Schema`](super::Schema) node or a
//! static [`Ty`](super::Ty), so the dynamic and the typed API share them.

use crate::bytes::{u32_at, u64_from, usize_from, usize_from_u32};
use crate::directory::Limits;
use crate::error::{fail, Error, Result, Rule};

use super::kind::{Kind, Shape};
use super::ty::{Field, Ty};
use super::typetext::{Fields, TypeRef};

/// A type tree the validator can walk.
#[doc(hidden)]
pub trait Tree: Copy {
    /// Iterator over a struct's field types.
    type Fields: Iterator<Item = Self>;
    /// Kind, sizes and depth of this node.
    fn shape(self) -> Shape;
    /// The list/opt element or dict value.
    fn child(self) -> Option<Self>;
    /// The struct fields (empty for other kinds).
    fn field_types(self) -> Self::Fields;
}

impl<'s> Tree for TypeRef<'s> {
    type Fields = Fields<'s>;
    fn shape(self) -> Shape {
        TypeRef::shape(&self)
    }
    fn child(self) -> Option<Self> {
        self.elem()
    }
    fn field_types(self) -> Fields<'s> {
        self.fields()
    }
}

impl Tree for &'static Ty {
    type Fields = core::iter::Map<core::slice::Iter<'static, Field>, fn(&'static Field) -> &'static Ty>;
    fn shape(self) -> Shape {
        *Ty::shape(self)
    }
    fn child(self) -> Option<Self> {
        self.elem()
    }
    fn field_types(self) -> Self::Fields {
        fn ty(f: &'static Field) -> &'static Ty {
            f.ty
        }
        let ty: fn(&'static Field) -> &'static Ty = ty;
        self.fields().iter().map(ty)
    }
}

/// Which cap and which rules a u32 count or length word is checked with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CountKind {
    /// A list or dict count: count cap.
    Count,
    /// A str or list<u8> length: byte cap.
    Bytes,
}

impl CountKind {
    fn cap(self, limits: &Limits) -> u32 {
        match self {
            CountKind::Count => limits.count_cap,
            CountKind::Bytes => limits.byte_cap,
        }
    }

    fn cap_rule(self) -> Rule {
        match self {
            CountKind::Count => Rule::CountCap,
            CountKind::Bytes => Rule::ByteLengthCap,
        }
    }

    fn past_end_rule(self) -> Rule {
        match self {
            CountKind::Count => Rule::CountPastEnd,
            CountKind::Bytes => Rule::ByteLengthPastEnd,
        }
    }

    /// The count kind of a list of `elem`: `list<u8>` is a byte run.
    pub(crate) fn of_list(elem: Kind) -> CountKind {
        if elem == Kind::U8 {
            CountKind::Bytes
        } else {
            CountKind::Count
        }
    }
}

/// The spec's count check ("Lengths and allocation", steps 1 to 4) for the
/// u32 word at `at`, with minimum element size `m`. Returns the count; the
/// elements start at `at + 4`. All errors are reported at `at`.
///
/// Word missing: EOF; above the cap: LIMIT; `count * m` overflows u64:
/// LIMIT; `count * m` above the unread bytes: EOF.
#[inline]
pub(crate) fn check_count(buf: &[u8], at: usize, kind: CountKind, m: u64, limits: &Limits) -> Result<usize> {
    let Some(count) = u32_at(buf, at) else {
        return fail(Rule::CountTruncated, at);
    };
    if count > kind.cap(limits) {
        return fail(kind.cap_rule(), at);
    }
    let Some(need) = u64::from(count).checked_mul(m) else {
        return fail(Rule::CountOverflow, at);
    };
    let unread = buf.len().saturating_sub(at.saturating_add(4));
    if need > u64_from(unread) {
        return fail(kind.past_end_rule(), at);
    }
    // count <= u32::MAX, and a buffer holding count * m >= count bytes (or
    // m == 0) means it fits in usize on every target that could hold it.
    Ok(usize_from_u32(count))
}

/// One validation run over a buffer.
#[derive(Clone, Copy, Debug)]
#[doc(hidden)]
pub struct Checker<'a> {
    pub buf: &'a [u8],
    pub limits: Limits,
    /// Check UTF-8 of strings (off only for a trusted reader).
    pub utf8: bool,
}

impl<'a> Checker<'a> {
    /// Checks one value of type `t` at `at`; returns where it ends.
    #[inline]
    pub fn value<T: Tree>(&self, t: T, at: usize) -> Result<usize> {
        let shape = t.shape();
        match shape.kind {
            Kind::Bool => self.bools(at, 1),
            Kind::Str => self.string(at).map(|(_, end)| end),
            Kind::Tensors => self.tensors(at),
            Kind::List => self.list(t, at),
            Kind::Opt => self.opt(t, at),
            Kind::Dict => self.dict(t, at),
            Kind::Struct => t.field_types().try_fold(at, |pos, f| self.value(f, pos)),
            // Fallback not taken: every fixed-width kind has a width.
            _ => self.fixed(at, shape.width.unwrap_or(0)),
        }
    }

    /// A fixed-width scalar of `width` bytes at `at`.
    #[inline]
    fn fixed(&self, at: usize, width: u32) -> Result<usize> {
        let end = at.saturating_add(usize_from_u32(width));
        if end > self.buf.len() {
            return fail(Rule::ValueTruncated, at);
        }
        Ok(end)
    }

    /// `n` bool bytes at `at`: each 0 or 1.
    fn bools(&self, at: usize, n: usize) -> Result<usize> {
        let end = at.saturating_add(n);
        let Some(bytes) = self.buf.get(at..end) else {
            return fail(Rule::ValueTruncated, at);
        };
        match bytes.iter().position(|&b| b > 1) {
            Some(i) => fail(Rule::BoolValue, at.saturating_add(i)),
            None => Ok(end),
        }
    }

    /// A str at `at`: length word (byte cap), then UTF-8 bytes. Returns the
    /// body and the end.
    #[inline]
    pub fn string(&self, at: usize) -> Result<(&'a [u8], usize)> {
        let (body, end) = self.byte_run(at)?;
        if self.utf8 {
            check_utf8_fast(body, at.saturating_add(4))?;
        }
        Ok((body, end))
    }

    /// A length-prefixed byte run at `at` (str or list<u8>).
    #[inline]
    pub fn byte_run(&self, at: usize) -> Result<(&'a [u8], usize)> {
        let n = check_count(self.buf, at, CountKind::Bytes, 1, &self.limits)?;
        let start = at.saturating_add(4);
        let end = start.saturating_add(n);
        // Fallback not taken: check_count just checked that n bytes follow the count.
        Ok((self.buf.get(start..end).unwrap_or(&[]), end))
    }

    fn list<T: Tree>(&self, t: T, at: usize) -> Result<usize> {
        let Some(elem) = t.child() else { return Ok(at) };
        let es = elem.shape();
        let n = check_count(self.buf, at, CountKind::of_list(es.kind), es.min, &self.limits)?;
        let body = at.saturating_add(4);
        match (es.kind, es.plain, es.width) {
            // The count check proved count * width bytes are there.
            (_, true, Some(w)) => Ok(body.saturating_add(n.saturating_mul(usize_from_u32(w)))),
            (Kind::Bool, _, _) => self.bools(body, n),
            _ => (0..n).try_fold(body, |pos, _| self.value(elem, pos)),
        }
    }

    fn opt<T: Tree>(&self, t: T, at: usize) -> Result<usize> {
        match self.buf.get(at) {
            None => fail(Rule::ValueTruncated, at),
            Some(0) => Ok(at.saturating_add(1)),
            Some(1) => match t.child() {
                Some(elem) => self.value(elem, at.saturating_add(1)),
                None => Ok(at.saturating_add(1)),
            },
            Some(_) => fail(Rule::OptTag, at),
        }
    }

    fn dict<T: Tree>(&self, t: T, at: usize) -> Result<usize> {
        let Some(value) = t.child() else { return Ok(at) };
        let m = value.shape().min.saturating_add(4);
        let n = check_count(self.buf, at, CountKind::Count, m, &self.limits)?;
        let vs = value.shape();
        // A plain value (any bits are valid) needs only its bounds checked.
        let plain = vs.width.filter(|_| vs.plain);
        let mut pos = at.saturating_add(4);
        let mut prev: Option<&[u8]> = None;
        for _ in 0..n {
            let (key, end) = self.string(pos)?;
            if prev.is_some_and(|p| key <= p) {
                return fail(Rule::DictKeyOrder, pos);
            }
            prev = Some(key);
            // On a short buffer the walk finds the field that does not fit.
            pos = match plain.map(|w| self.fixed(end, w)) {
                Some(Ok(next)) => next,
                _ => self.value(value, end)?,
            };
        }
        Ok(pos)
    }

    fn tensors(&self, at: usize) -> Result<usize> {
        crate::Parser::new().limits(self.limits).parse_at(self.buf, at).map(|d| d.end())
    }
}

/// UTF-8 check without producing a `&str`: ASCII (the common key) first.
#[inline]
pub(crate) fn check_utf8_fast(bytes: &[u8], at: usize) -> Result<()> {
    if bytes.is_ascii() {
        return Ok(());
    }
    check_utf8(bytes, at).map(|_| ())
}

/// UTF-8 check of `bytes`, which start at absolute offset `at`; a bad
/// sequence is reported at its first byte.
#[inline]
pub(crate) fn check_utf8(bytes: &[u8], at: usize) -> Result<&str> {
    core::str::from_utf8(bytes).map_err(|e| Error::new(Rule::StrUtf8, at.saturating_add(e.valid_up_to())))
}

/// The end of the already checked value of type `t` at `at`. Reads only
/// length words and tags; never fails, never panics (saturating offsets).
#[doc(hidden)]
pub fn skip<T: Tree>(buf: &[u8], t: T, at: usize) -> usize {
    let shape = t.shape();
    if let Some(w) = shape.width {
        return at.saturating_add(usize_from_u32(w));
    }
    match shape.kind {
        Kind::Str => at.saturating_add(4).saturating_add(word(buf, at)),
        Kind::Tensors => at.saturating_add(block_len(buf, at)),
        Kind::List => {
            let n = word(buf, at);
            let body = at.saturating_add(4);
            match t.child() {
                Some(e) => match e.shape().width {
                    Some(w) => body.saturating_add(n.saturating_mul(usize_from_u32(w))),
                    None => (0..n).fold(body, |pos, _| skip(buf, e, pos)),
                },
                None => body,
            }
        }
        Kind::Dict => skip_dict(buf, t, at),
        Kind::Opt => match (buf.get(at), t.child()) {
            (Some(1), Some(e)) => skip(buf, e, at.saturating_add(1)),
            _ => at.saturating_add(1),
        },
        Kind::Struct => t.field_types().fold(at, |pos, f| skip(buf, f, pos)),
        _ => at,
    }
}

fn skip_dict<T: Tree>(buf: &[u8], t: T, at: usize) -> usize {
    let n = word(buf, at);
    let Some(v) = t.child() else { return at.saturating_add(4) };
    let width = v.shape().width.map(usize_from_u32);
    (0..n).fold(at.saturating_add(4), |pos, _| {
        let key_end = pos.saturating_add(4).saturating_add(word(buf, pos));
        match width {
            Some(w) => key_end.saturating_add(w),
            None => skip(buf, v, key_end),
        }
    })
}

/// The u32 word at `at` as usize (0 when absent: only used on checked data).
pub(crate) fn word(buf: &[u8], at: usize) -> usize {
    u32_at(buf, at).map(usize_from_u32).unwrap_or(0)
}

/// Length of the checked directory block at `at`, from its header.
pub(crate) fn block_len(buf: &[u8], at: usize) -> usize {
    let header = buf.get(at..).and_then(|b| crate::wire::Header::parse(b).ok());
    // Fallback: no valid header: usize::MAX makes the caller's bounds check fail.
    header.and_then(|h| h.block_len()).and_then(usize_from).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn count_check_runs_the_steps_in_order() {
        let l = Limits::DEFAULT.with_count_cap(10);
        // 1. word missing
        assert_eq!(check_count(&[1, 0, 0], 0, CountKind::Count, 1, &l).unwrap_err().code(), ErrorCode::Eof);
        // 2. cap before the byte check (count 11 > cap 10, nothing follows)
        assert_eq!(check_count(&[11, 0, 0, 0], 0, CountKind::Count, 1, &l).unwrap_err().rule(), Rule::CountCap);
        // 3. count * m overflows u64 (m synthetic: no real type has it)
        let e = check_count(&[2, 0, 0, 0], 0, CountKind::Count, u64::MAX, &l).unwrap_err();
        assert_eq!((e.code(), e.rule()), (ErrorCode::Limit, Rule::CountOverflow));
        // 4. count * m past the unread bytes
        let e = check_count(&[2, 0, 0, 0, 9, 9, 9], 0, CountKind::Count, 2, &l).unwrap_err();
        assert_eq!((e.code(), e.offset()), (ErrorCode::Eof, 0));
        assert_eq!(check_count(&[2, 0, 0, 0, 9, 9, 9, 9], 0, CountKind::Count, 2, &l), Ok(2));
        // m = 0 (struct{}): only the cap bounds the count
        assert_eq!(check_count(&[10, 0, 0, 0], 0, CountKind::Count, 0, &l), Ok(10));
        // byte runs use the byte cap
        let b = Limits::DEFAULT.with_byte_cap(3);
        assert_eq!(check_count(&[4, 0, 0, 0], 0, CountKind::Bytes, 1, &b).unwrap_err().rule(), Rule::ByteLengthCap);
    }
}
