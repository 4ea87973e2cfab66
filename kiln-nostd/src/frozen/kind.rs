//! The closed set of Frozen type kinds and their fixed facts (names, widths,
//! minimum wire sizes from the spec's table).

use crate::dtype::DType;

/// The most containers a type may nest (list, opt, dict and struct each count one).
pub const MAX_DEPTH: u32 = 64;

/// What a Frozen type is, one level deep.
///
/// ```
/// use kiln_nostd::frozen::Kind;
/// assert_eq!(Kind::from_name("uint"), Some(Kind::Uint));
/// assert_eq!(Kind::Uint.name(), "uint");
/// assert_eq!(Kind::F32.width(), Some(4));
/// assert_eq!(Kind::Str.width(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Kind {
    /// One byte, 0 or 1.
    Bool,
    /// Signed byte.
    I8,
    /// Little-endian i16.
    I16,
    /// Little-endian i32.
    I32,
    /// Little-endian i64.
    I64,
    /// Unsigned byte.
    U8,
    /// Little-endian u16.
    U16,
    /// Little-endian u32.
    U32,
    /// Little-endian u64.
    U64,
    /// `int`: an i64 on the wire.
    Int,
    /// `uint`: a u64 on the wire.
    Uint,
    /// IEEE binary32, every bit kept.
    F32,
    /// IEEE binary64, every bit kept.
    F64,
    /// u32 byte length, then UTF-8 bytes.
    Str,
    /// One canonical version-2 tensor directory block.
    Tensors,
    /// `list<T>`: u32 count, then the elements (`list<u8>` is a byte run).
    List,
    /// `opt<T>`: tag byte 0 (absent) or 1 (present, then T).
    Opt,
    /// `dict<str,V>`: u32 count, then (key, value) pairs in key byte order.
    Dict,
    /// `struct{...}`: fields in order, no tags, no padding.
    Struct,
}

const SCALARS: [Kind; 15] = [
    Kind::Bool,
    Kind::I8,
    Kind::I16,
    Kind::I32,
    Kind::I64,
    Kind::U8,
    Kind::U16,
    Kind::U32,
    Kind::U64,
    Kind::Int,
    Kind::Uint,
    Kind::F32,
    Kind::F64,
    Kind::Str,
    Kind::Tensors,
];

impl Kind {
    /// The canonical name of a scalar kind (`""` for list, opt, dict and struct).
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Bool => "bool",
            Kind::I8 => "i8",
            Kind::I16 => "i16",
            Kind::I32 => "i32",
            Kind::I64 => "i64",
            Kind::U8 => "u8",
            Kind::U16 => "u16",
            Kind::U32 => "u32",
            Kind::U64 => "u64",
            Kind::Int => "int",
            Kind::Uint => "uint",
            Kind::F32 => "f32",
            Kind::F64 => "f64",
            Kind::Str => "str",
            Kind::Tensors => "tensors",
            Kind::List | Kind::Opt | Kind::Dict | Kind::Struct => "",
        }
    }

    /// The scalar kind with this canonical name.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Kind> {
        SCALARS.iter().copied().find(|k| k.name() == name)
    }

    /// The fifteen scalar kinds, in the order the spec lists them.
    ///
    /// ```
    /// use kiln_nostd::frozen::Kind;
    /// assert!(Kind::scalars().iter().all(|k| Kind::from_name(k.name()) == Some(*k)));
    /// ```
    pub const fn scalars() -> &'static [Kind] {
        &SCALARS
    }

    /// True for list, opt, dict and struct: the kinds that count towards depth.
    #[must_use]
    pub const fn is_container(self) -> bool {
        matches!(self, Kind::List | Kind::Opt | Kind::Dict | Kind::Struct)
    }

    /// The exact wire size of a fixed-width scalar (bool, integers, floats).
    #[must_use]
    pub const fn width(self) -> Option<u32> {
        match self {
            Kind::Bool | Kind::I8 | Kind::U8 => Some(1),
            Kind::I16 | Kind::U16 => Some(2),
            Kind::I32 | Kind::U32 | Kind::F32 => Some(4),
            Kind::I64 | Kind::U64 | Kind::Int | Kind::Uint | Kind::F64 => Some(8),
            _ => None,
        }
    }

    /// The spec's minimum wire size of one value of a non-struct kind
    /// (a struct's minimum is the sum of its fields').
    pub const fn min_size(self) -> u64 {
        match self {
            Kind::Bool | Kind::I8 | Kind::U8 | Kind::Opt => 1,
            Kind::I16 | Kind::U16 => 2,
            Kind::I32 | Kind::U32 | Kind::F32 | Kind::Str | Kind::List | Kind::Dict => 4,
            Kind::I64 | Kind::U64 | Kind::Int | Kind::Uint | Kind::F64 => 8,
            Kind::Tensors => 64,
            Kind::Struct => 0,
        }
    }

    /// True for the fixed-width kinds whose every bit pattern is a value
    /// (integers and floats; not bool).
    #[must_use]
    pub const fn is_plain(self) -> bool {
        !matches!(self, Kind::Bool) && self.width().is_some()
    }

    /// The tensor dtype whose elements have this kind's wire layout, so a
    /// `list` of it can be viewed with [`crate::dtype::view`] / [`crate::dtype::copy`].
    #[must_use]
    pub const fn dtype(self) -> Option<DType> {
        Some(match self {
            Kind::Bool => DType::Bool,
            Kind::I8 => DType::I8,
            Kind::U8 => DType::U8,
            Kind::I16 => DType::I16,
            Kind::U16 => DType::U16,
            Kind::I32 => DType::I32,
            Kind::U32 => DType::U32,
            Kind::I64 | Kind::Int => DType::I64,
            Kind::U64 | Kind::Uint => DType::U64,
            Kind::F32 => DType::F32,
            Kind::F64 => DType::F64,
            _ => return None,
        })
    }
}

/// The fixed facts of one node of a type: kind, minimum wire size, exact
/// width when there is one, and nesting depth. Shared by parsed schemas and
/// the static types of the typed API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub struct Shape {
    pub kind: Kind,
    /// Minimum wire size (spec table; struct = saturating sum of fields).
    pub min: u64,
    /// Exact wire size when every value has it (scalars, structs of them).
    pub width: Option<u32>,
    /// Fixed width and every bit pattern valid: a run of them needs no check.
    pub plain: bool,
    /// Containers at and below this node.
    pub depth: u32,
}

impl Shape {
    /// A scalar's shape.
    pub const fn scalar(kind: Kind) -> Shape {
        Shape { kind, min: kind.min_size(), width: kind.width(), plain: kind.is_plain(), depth: 0 }
    }

    /// A list, opt or dict of `child`.
    pub const fn wrap(kind: Kind, child: &Shape) -> Shape {
        Shape { kind, min: kind.min_size(), width: None, plain: false, depth: child.depth.saturating_add(1) }
    }

    /// An empty struct, to which [`Shape::add_field`] adds fields.
    pub const fn empty_struct() -> Shape {
        Shape { kind: Kind::Struct, min: 0, width: Some(0), plain: true, depth: 1 }
    }

    /// This struct with one more field.
    pub const fn add_field(mut self, f: &Shape) -> Shape {
        self.min = self.min.saturating_add(f.min);
        self.width = match (self.width, f.width) {
            (Some(a), Some(b)) => a.checked_add(b),
            _ => None,
        };
        self.plain = self.plain && f.plain && self.width.is_some();
        let d = f.depth.saturating_add(1);
        if d > self.depth {
            self.depth = d;
        }
        self
    }
}
