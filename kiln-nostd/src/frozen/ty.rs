//! Static types: the Frozen type of a Rust type, built in `const` context.
//!
//! The typed API ([`KilnType`](super::KilnType)) describes each Rust type by
//! a `&'static Ty`. Everything about it, including its canonical text and
//! its schema hash, can be computed at compile time.

use core::fmt;

use super::hash::Fnv;
use super::kind::{Kind, Shape};

/// A Frozen type known at compile time.
///
/// ```
/// use kiln_nostd::frozen::{Field, Ty};
/// static FIELDS: [Field; 2] = [Field::new("id", &Ty::I64), Field::new("batch", &Ty::TENSORS)];
/// const T: Ty = Ty::structure(&FIELDS);
/// assert_eq!(T.schema_hash(), 0xe58aadc7552f0d82);
/// assert_eq!(T.min_size(), 72);
/// assert_eq!(T.to_string_in::<64>().as_deref(), Some("struct{id:i64,batch:tensors,}"));
/// ```
#[derive(Debug)]
pub struct Ty {
    shape: Shape,
    elem: Option<&'static Ty>,
    fields: &'static [Field],
}

/// One named field of a static struct type.
#[derive(Debug)]
pub struct Field {
    /// The field name (`[A-Za-z_][A-Za-z0-9_]*`).
    pub name: &'static str,
    /// The field type.
    pub ty: &'static Ty,
}

impl Field {
    /// A field `name: ty`.
    pub const fn new(name: &'static str, ty: &'static Ty) -> Field {
        Field { name, ty }
    }
}

impl Ty {
    /// `bool`
    pub const BOOL: Ty = Ty::scalar(Kind::Bool);
    /// `i8`
    pub const I8: Ty = Ty::scalar(Kind::I8);
    /// `i16`
    pub const I16: Ty = Ty::scalar(Kind::I16);
    /// `i32`
    pub const I32: Ty = Ty::scalar(Kind::I32);
    /// `i64`
    pub const I64: Ty = Ty::scalar(Kind::I64);
    /// `u8`
    pub const U8: Ty = Ty::scalar(Kind::U8);
    /// `u16`
    pub const U16: Ty = Ty::scalar(Kind::U16);
    /// `u32`
    pub const U32: Ty = Ty::scalar(Kind::U32);
    /// `u64`
    pub const U64: Ty = Ty::scalar(Kind::U64);
    /// `int` (an i64 on the wire)
    pub const INT: Ty = Ty::scalar(Kind::Int);
    /// `uint` (a u64 on the wire)
    pub const UINT: Ty = Ty::scalar(Kind::Uint);
    /// `f32`
    pub const F32: Ty = Ty::scalar(Kind::F32);
    /// `f64`
    pub const F64: Ty = Ty::scalar(Kind::F64);
    /// `str`
    pub const STR: Ty = Ty::scalar(Kind::Str);
    /// `tensors`
    pub const TENSORS: Ty = Ty::scalar(Kind::Tensors);
    /// `list<u8>`, the byte run.
    pub const BYTES: Ty = Ty::list(&Ty::U8);

    const fn scalar(kind: Kind) -> Ty {
        Ty { shape: Shape::scalar(kind), elem: None, fields: &[] }
    }

    const fn wrap(kind: Kind, elem: &'static Ty) -> Ty {
        Ty { shape: Shape::wrap(kind, &elem.shape), elem: Some(elem), fields: &[] }
    }

    /// `list<elem>`.
    pub const fn list(elem: &'static Ty) -> Ty {
        Ty::wrap(Kind::List, elem)
    }

    /// `opt<elem>`.
    pub const fn opt(elem: &'static Ty) -> Ty {
        Ty::wrap(Kind::Opt, elem)
    }

    /// `dict<str,value>`.
    pub const fn dict(value: &'static Ty) -> Ty {
        Ty::wrap(Kind::Dict, value)
    }

    /// `struct{name:T,...}` with these fields in declaration order.
    pub const fn structure(fields: &'static [Field]) -> Ty {
        let mut shape = Shape::empty_struct();
        let mut rest = fields;
        while let [f, tail @ ..] = rest {
            shape = shape.add_field(&f.ty.shape);
            rest = tail;
        }
        Ty { shape, elem: None, fields }
    }

    pub(crate) const fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The kind.
    pub const fn kind(&self) -> Kind {
        self.shape.kind
    }

    /// Minimum wire size (the spec's table; a struct sums its fields, saturating).
    pub const fn min_size(&self) -> u64 {
        self.shape.min
    }

    /// Exact wire size when every value of the type has it.
    #[must_use]
    pub const fn width(&self) -> Option<u32> {
        self.shape.width
    }

    /// Containers nested at and below this type (a scalar is 0).
    pub const fn depth(&self) -> u32 {
        self.shape.depth
    }

    /// The element of a list or opt, or the value of a dict.
    #[must_use]
    pub const fn elem(&self) -> Option<&'static Ty> {
        self.elem
    }

    /// The fields of a struct (empty otherwise).
    pub const fn fields(&self) -> &'static [Field] {
        self.fields
    }

    /// The schema hash (FNV-1a 64 over the tokens), in a `const fn`.
    pub const fn schema_hash(&self) -> u64 {
        self.mix(Fnv::new()).finish()
    }

    /// The opening token text of a list, opt or dict (`""` otherwise).
    const fn open_text(kind: Kind) -> &'static str {
        match kind {
            Kind::List => "list<",
            Kind::Opt => "opt<",
            Kind::Dict => "dict<str,",
            _ => "",
        }
    }

    /// The innermost type under a chain of list/opt/dict, and the chain length.
    /// (Loops, not recursion: const evaluation has a small frame limit.)
    const fn unwrap_chain(&self) -> (&Ty, u32) {
        let mut t = self;
        let mut n = 0u32;
        while let (Kind::List | Kind::Opt | Kind::Dict, Some(e)) = (t.shape.kind, t.elem) {
            t = e;
            n = n.saturating_add(1);
        }
        (t, n)
    }

    const fn mix(&self, h: Fnv) -> Fnv {
        let mut h = h;
        let mut t = self;
        while let (Kind::List | Kind::Opt | Kind::Dict, Some(e)) = (t.shape.kind, t.elem) {
            h = match t.shape.kind {
                Kind::Dict => h.token("dict<").token("str").token(","),
                k => h.token(Ty::open_text(k)),
            };
            t = e;
        }
        let (_, closers) = self.unwrap_chain();
        h = match t.shape.kind {
            Kind::Struct => {
                let mut h = h.token("struct{");
                let mut rest = t.fields;
                while let [f, tail @ ..] = rest {
                    h = f.ty.mix(h.token(f.name).token(":")).token(",");
                    rest = tail;
                }
                h.token("}")
            }
            k => h.token(k.name()),
        };
        let mut i = 0;
        while i < closers {
            h = h.token(">");
            i = i.saturating_add(1);
        }
        h
    }

    /// Length in bytes of the canonical type text.
    pub const fn text_len(&self) -> usize {
        let mut n = 0usize;
        let mut t = self;
        while let (Kind::List | Kind::Opt | Kind::Dict, Some(e)) = (t.shape.kind, t.elem) {
            n = n.saturating_add(Ty::open_text(t.shape.kind).len()).saturating_add(1); // and its `>`
            t = e;
        }
        match t.shape.kind {
            Kind::Struct => {
                n = n.saturating_add(8); // struct{ }
                let mut rest = t.fields;
                while let [f, tail @ ..] = rest {
                    n = n.saturating_add(f.name.len()).saturating_add(2).saturating_add(f.ty.text_len());
                    rest = tail;
                }
                n
            }
            k => n.saturating_add(k.name().len()),
        }
    }

    /// The canonical type text as `L` bytes, for building a `&'static str`
    /// in `const` context (`L` must be [`text_len`](Self::text_len); extra
    /// bytes stay 0, missing ones are cut). The derive macro uses this for
    /// `TYPE_TEXT`.
    pub const fn text_bytes<const L: usize>(&self) -> [u8; L] {
        self.write_text(Text { buf: [0u8; L], at: 0 }).buf
    }

    const fn write_text<const L: usize>(&self, t: Text<L>) -> Text<L> {
        let mut out = t;
        let mut ty = self;
        while let (Kind::List | Kind::Opt | Kind::Dict, Some(e)) = (ty.shape.kind, ty.elem) {
            out = out.put(Ty::open_text(ty.shape.kind));
            ty = e;
        }
        let (_, closers) = self.unwrap_chain();
        out = match ty.shape.kind {
            Kind::Struct => {
                let mut out = out.put("struct{");
                let mut rest = ty.fields;
                while let [f, tail @ ..] = rest {
                    out = f.ty.write_text(out.put(f.name).put(":")).put(",");
                    rest = tail;
                }
                out.put("}")
            }
            k => out.put(k.name()),
        };
        let mut i = 0;
        while i < closers {
            out = out.put(">");
            i = i.saturating_add(1);
        }
        out
    }

    /// The canonical text in a fixed-capacity string, or `None` when it is
    /// longer than `L` bytes.
    #[must_use]
    pub fn to_string_in<const L: usize>(&self) -> Option<heapless::String<L>> {
        let mut s = heapless::String::new();
        fmt::write(&mut s, format_args!("{self}")).ok()?;
        Some(s)
    }
}

/// A const text cursor.
struct Text<const L: usize> {
    buf: [u8; L],
    at: usize,
}

impl<const L: usize> Text<L> {
    #[allow(clippy::indexing_slicing)] // guarded by `at < L`; const code cannot use `get_mut`
    const fn put(mut self, s: &str) -> Text<L> {
        let mut rest = s.as_bytes();
        while let [b, tail @ ..] = rest {
            if self.at < L {
                self.buf[self.at] = *b;
            }
            self.at = self.at.saturating_add(1);
            rest = tail;
        }
        self
    }
}

impl fmt::Display for Ty {
    /// The canonical type text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.shape.kind {
            Kind::List | Kind::Opt | Kind::Dict => {
                let open = match self.shape.kind {
                    Kind::List => "list<",
                    Kind::Opt => "opt<",
                    _ => "dict<str,",
                };
                f.write_str(open)?;
                if let Some(e) = self.elem {
                    fmt::Display::fmt(e, f)?;
                }
                f.write_str(">")
            }
            Kind::Struct => {
                f.write_str("struct{")?;
                for field in self.fields {
                    write!(f, "{}:{},", field.name, field.ty)?;
                }
                f.write_str("}")
            }
            k => f.write_str(k.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frozen::hash_text;

    static INNER: [Field; 2] = [Field::new("a", &Ty::BOOL), Field::new("b", &Ty::F32)];
    static LIST_OPT_STR: Ty = Ty::list(&OPT_STR);
    static OPT_STR: Ty = Ty::opt(&Ty::STR);
    static DICT: Ty = Ty::dict(&Ty::F64);
    static OUTER: [Field; 4] = [
        Field::new("x", &LIST_OPT_STR),
        Field::new("y", &DICT),
        Field::new("z", &Ty::structure(&INNER)),
        Field::new("w", &Ty::BYTES),
    ];
    const T: Ty = Ty::structure(&OUTER);
    const LEN: usize = T.text_len();
    const TEXT: [u8; LEN] = T.text_bytes::<LEN>();

    #[test]
    fn text_hash_and_sizes_agree() {
        let want = "struct{x:list<opt<str>>,y:dict<str,f64>,z:struct{a:bool,b:f32,},w:list<u8>,}";
        assert_eq!(core::str::from_utf8(&TEXT), Ok(want));
        assert_eq!(T.to_string_in::<128>().as_deref(), Some(want));
        assert_eq!(T.schema_hash(), hash_text(want));
        assert_eq!(T.min_size(), 4 + 4 + 5 + 4);
        assert_eq!(T.depth(), 3);
        assert_eq!(Ty::structure(&INNER).width(), Some(5));
        assert_eq!(T.width(), None);
    }
}
