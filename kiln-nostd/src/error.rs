//! The error type shared by every reader and writer in the crate.
//!
//! An [`Error`] is three facts: the wire [`ErrorCode`] (the contract the golden
//! cases pin), the absolute byte offset in the caller's buffer of the field that
//! broke the rule, and the [`Rule`] itself, so a person can read what went wrong.

use crate::bytes::{u64_from, usize_sat};
use core::fmt;

/// A `&'static CStr` of a string literal, made at compile time (a NUL
/// inside the text is a compile error): the texts' form for C callers, so a
/// binding hands them out without a copy of its own.
#[doc(hidden)]
#[macro_export]
macro_rules! __c_str {
    ($s:expr) => {{
        const C: &::core::ffi::CStr = match ::core::ffi::CStr::from_bytes_with_nul(concat!($s, "\0").as_bytes()) {
            Ok(c) => c,
            Err(_) => panic!("a text holds a NUL byte"),
        };
        C
    }};
}

macro_rules! codes {
    ($( $(#[$doc:meta])* $name:ident = $number:literal, $text:literal; )*) => {
        /// The error codes of the Kiln v2 spec. The code is the contract; offset and
        /// rule are for people.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[non_exhaustive]
        pub enum ErrorCode {
            $( $(#[$doc])* $name, )*
        }

        impl ErrorCode {
            /// Every code, in the order of their numbers.
            pub const ALL: [ErrorCode; [$($number),*].len()] = [$(ErrorCode::$name),*];

            /// The upper-case name used by the spec, the golden cases and the CLI.
            ///
            /// ```
            /// assert_eq!(kiln_nostd::ErrorCode::Eof.as_str(), "EOF");
            /// ```
            pub const fn as_str(self) -> &'static str {
                match self { $( ErrorCode::$name => $text, )* }
            }

            /// [`as_str`](Self::as_str) NUL-terminated, for C.
            pub const fn as_c_str(self) -> &'static core::ffi::CStr {
                match self { $( ErrorCode::$name => $crate::__c_str!($text), )* }
            }

            /// The code's number, 1 up in [`ALL`](Self::ALL)'s order: the
            /// status a C caller gets (`KILN_FRAME` is 1, `KILN_PATH` 10).
            pub const fn number(self) -> u8 {
                match self { $( ErrorCode::$name => $number, )* }
            }
        }
    };
}

codes! {
    /// Magic, version, flags, or a reserved byte.
    Frame = 1, "FRAME";
    /// A cap, or a size product that overflows.
    Limit = 2, "LIMIT";
    /// A checked length does not fit in the buffer.
    Eof = 3, "EOF";
    /// Dtype, shape, range, name, quant, canonical-layout or value fault.
    Type = 4, "TYPE";
    /// A string, name or layout name that is not UTF-8.
    Utf8 = 5, "UTF8";
    /// A standalone buffer continues past the value.
    Trailing = 6, "TRAILING";
    /// A frame hash does not match the destination type.
    Schema = 7, "SCHEMA";
    /// A tensor's payload does not match its SHA-256 digest (`spec/model-file.md`).
    Digest = 8, "DIGEST";
    /// A shard of a sharded model is missing, of the wrong length, or does
    /// not match its manifest.
    Shard = 9, "SHARD";
    /// A shard name that is not a plain file name in the manifest's folder.
    Path = 10, "PATH";
    /// A signed model whose key, release or signature the reader does not
    /// accept, or an unsigned one where a signature is required.
    Signature = 11, "SIGNATURE";
}

impl ErrorCode {
    /// Parses a spec code name (`"TYPE"`, ...).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// The code with [`number`](Self::number) `number`.
    pub fn from_number(number: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.number() == number)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a rule sits in the check order of its part of the format. The
/// orders are those of `spec/kiln-v2.md` section 14 (a directory's steps 1
/// to 12, a Frozen value's F1 to F4) and `spec/model-file.md` (steps 3d, 9s
/// and 9d of a block with digests or a signature; a manifest's M1 to M5 and
/// a shard's 1 to 7 are `kiln_model::Step`'s).
/// Inside one step, the spec's rule tables give the rank; steps compare only
/// within one order ([`precedes`](Self::precedes)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Step {
    /// A directory step: its number and its sub-step letter (`b'a'` to
    /// `b'd'`; 0 for none). [`Rule::TrailingBytes`] is step 12 here, and F4
    /// of a standalone Frozen value.
    Directory(u8, u8),
    /// A Frozen value's step F1 to F4.
    Frozen(u8),
    /// A model-file record's own fields (a digest table's length, a shard
    /// record's `model` and `index`), checked as the record is read.
    Record,
    /// Not a rule of the input: the caller's memory, or what a program asked
    /// a writer or an encoder to write, or a schema's type text.
    Caller,
}

impl Step {
    /// True when `self` comes before `other` in one order; false when it
    /// comes after, is the same step, or the two are of different orders.
    #[must_use]
    pub const fn precedes(self, other: Step) -> bool {
        match (self, other) {
            (Step::Directory(n, s), Step::Directory(m, t)) => n < m || (n == m && sub_rank(s) < sub_rank(t)),
            (Step::Frozen(n), Step::Frozen(m)) => n < m,
            _ => false,
        }
    }
}

/// The rank of a directory sub-step letter: alphabetical, but for step 9s
/// (the signature), which comes before 9d (the digests): the signed prefix
/// is whole before the first payload byte.
const fn sub_rank(s: u8) -> u8 {
    if s == b's' {
        b'c'
    } else {
        s
    }
}

/// Defines a crate's rule enum: each rule's variant, [`ErrorCode`], optional
/// check-order step and one-line text, and the methods every front end reads
/// (`ALL`, `code`, `description`, `id`, their C forms, `step`). The core's
/// [`Rule`], `kiln_model::Rule` and `kiln_hk::Rule` are its three uses, so
/// the three tables cannot drift apart in form.
#[doc(hidden)]
#[macro_export]
macro_rules! rules {
    (@enum $(#[$meta:meta])* $rule:ident; $( $(#[$doc:meta])* $name:ident => $code:ident, $text:literal; )*) => {
        $(#[$meta])*
        ///
        /// Each rule has one fixed [`ErrorCode`] and a one-line description.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $rule {
            $( $(#[$doc])* $name, )*
        }

        impl $rule {
            /// Every rule, in declaration order.
            pub const ALL: [$rule; [$($rule::$name),*].len()] = [$($rule::$name),*];

            /// The error code this rule reports.
            pub const fn code(self) -> $crate::ErrorCode {
                match self { $( $rule::$name => $crate::ErrorCode::$code, )* }
            }

            /// A one-line description a person understands.
            pub const fn description(self) -> &'static str {
                match self { $( $rule::$name => $text, )* }
            }

            /// A stable identifier, the variant's name (for JSON output and logs).
            pub const fn id(self) -> &'static str {
                match self { $( $rule::$name => stringify!($name), )* }
            }

            /// [`id`](Self::id) NUL-terminated, for C.
            pub const fn id_c_str(self) -> &'static ::core::ffi::CStr {
                match self { $( $rule::$name => $crate::__c_str!(stringify!($name)), )* }
            }

            /// [`description`](Self::description) NUL-terminated, for C.
            pub const fn description_c_str(self) -> &'static ::core::ffi::CStr {
                match self { $( $rule::$name => $crate::__c_str!($text), )* }
            }
        }
    };
    (
        $(#[$meta:meta])* pub enum $rule:ident, step: $step_ty:ty;
        $( $(#[$doc:meta])* $name:ident => $code:ident, $step:expr, $text:literal; )*
    ) => {
        $crate::rules! { @enum $(#[$meta])* $rule; $( $(#[$doc])* $name => $code, $text; )* }

        impl $rule {
            /// Where the rule sits in its check order (the `step` column of
            /// the spec's rule tables).
            pub const fn step(self) -> $step_ty {
                match self { $( $rule::$name => $step, )* }
            }
        }
    };
    (
        $(#[$meta:meta])* pub enum $rule:ident;
        $( $(#[$doc:meta])* $name:ident => $code:ident, $text:literal; )*
    ) => {
        $crate::rules! { @enum $(#[$meta])* $rule; $( $(#[$doc])* $name => $code, $text; )* }
    };
}

rules! {
    /// Which rule of the format a rejected input broke.
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    #[non_exhaustive]
    pub enum Rule, step: Step;

    // --- tensor directory: steps 1 and 2 (header framing)
    /// Fewer than 4 bytes, or fewer than 64 once the magic matched.
    HeaderTruncated => Eof, Step::Directory(1, 0), "the buffer ends inside the 64-byte directory header";
    /// The first four bytes are not `KLNT`.
    DirectoryMagic => Frame, Step::Directory(1, 0), "the directory magic is not KLNT";
    /// The version byte is not 2.
    DirectoryVersion => Frame, Step::Directory(2, 0), "the directory version byte is not 2";
    /// A flag bit other than bits 0 and 1 is set.
    UnknownFlag => Frame, Step::Directory(2, 0), "an unknown directory flag bit is set";
    /// Flag bit 1 (little-endian) is clear.
    LittleEndianFlagClear => Frame, Step::Directory(2, 0), "the little-endian flag (bit 1) is clear";
    /// A reserved header byte is nonzero.
    HeaderReserved => Frame, Step::Directory(2, 0), "a reserved directory header byte is nonzero";
    // --- step 3 to 7 (sizes)
    /// tensor_count above the configured count cap.
    TensorCountCap => Limit, Step::Directory(3, 0), "tensor_count is above the count cap";
    /// name_bytes above the configured byte cap.
    NameBytesCap => Limit, Step::Directory(3, 0), "name_bytes is above the byte cap";
    /// tensor_count * 128 + name_bytes overflows (cannot happen in u64 with
    /// u32 fields; kept so the check order reads as the spec does).
    DirectorySizeOverflow => Limit, Step::Directory(4, 0), "tensor_count * 128 + name_bytes overflows";
    /// directory_bytes differs from tensor_count * 128 + name_bytes.
    DirectoryBytesMismatch => Type, Step::Directory(4, 0), "directory_bytes is not tensor_count * 128 + name_bytes";
    /// The descriptors and the name heap do not lie inside the buffer.
    DirectoryTruncated => Eof, Step::Directory(5, 0), "the descriptors and name heap run past the end of the buffer";
    /// payload_base + payload_bytes overflows.
    PayloadSizeOverflow => Limit, Step::Directory(6, 0), "payload_base + payload_bytes overflows";
    /// The payload region does not lie inside the buffer.
    BlockTruncated => Eof, Step::Directory(6, 0), "the payload region runs past the end of the buffer";
    /// A byte between the name heap and payload_base is nonzero.
    NonzeroPadding => Type, Step::Directory(7, 0), "a padding byte before the payload region is nonzero";
    // --- step 8 (descriptor reserved bytes and names)
    /// A reserved descriptor byte (offset 3 or 112..128) is nonzero.
    DescriptorReserved => Frame, Step::Directory(8, b'a'), "a reserved descriptor byte is nonzero";
    /// The name flag is set on a directory with no tensors.
    NameFlagOnEmpty => Type, Step::Directory(8, b'b'), "the name flag is set on an empty directory";
    /// The name flag is clear but a tensor has a name.
    NameWithoutFlag => Type, Step::Directory(8, b'c'), "a tensor has a name but the name flag is clear";
    /// The name flag is set but a tensor has no name.
    MissingName => Type, Step::Directory(8, b'c'), "the name flag is set but a tensor has no name";
    /// A layout offset/length pair is half set.
    LayoutFieldMismatch => Type, Step::Directory(8, b'c'), "layout_off and layout_len disagree about whether a layout name exists";
    /// A name or layout name does not start where the canonical heap puts it.
    HeapOrder => Type, Step::Directory(8, b'c'), "a name does not start where the canonical heap order puts it";
    /// A name slice ends past name_bytes.
    HeapOverrun => Type, Step::Directory(8, b'c'), "a name runs past the end of the name heap";
    /// The heap holds bytes that no name covers.
    HeapHole => Type, Step::Directory(8, b'd'), "the name heap holds bytes that no name covers";
    /// A name is not UTF-8.
    NameUtf8 => Utf8, Step::Directory(8, b'c'), "a tensor name is not valid UTF-8";
    /// A layout name is not UTF-8.
    LayoutUtf8 => Utf8, Step::Directory(8, b'c'), "a layout name is not valid UTF-8";
    /// Two tensors have the same name.
    DuplicateName => Type, Step::Directory(8, b'c'), "two tensors have the same name";
    // --- step 9 (dtype, shape, ranges)
    /// dtype code 0, 20..4095, or above 32767.
    UnknownDtype => Type, Step::Directory(9, 0), "the dtype code is not a defined or opaque code";
    /// rank above 8.
    RankTooLarge => Type, Step::Directory(9, 0), "the rank is above 8";
    /// A shape slot at or past the rank is nonzero.
    ShapeTail => Type, Step::Directory(9, 0), "a shape slot at or past the rank is nonzero";
    /// The element count overflows a u64.
    ShapeOverflow => Limit, Step::Directory(9, 0), "the product of the shape overflows";
    /// byte_offset + byte_length overflows a u64.
    RangeOverflow => Limit, Step::Directory(9, 0), "byte_offset + byte_length overflows";
    /// A payload range extends past payload_bytes.
    RangePastPayload => Type, Step::Directory(9, 0), "a payload range extends past payload_bytes";
    /// byte_length is not what the dtype and shape require.
    LengthMismatch => Type, Step::Directory(9, 0), "byte_length is not the element count times the dtype width";
    /// A non-opaque dtype carries a layout name or block size.
    LayoutOnDenseDtype => Type, Step::Directory(9, 0), "a non-opaque dtype has a layout name or block size";
    /// An opaque dtype lacks its layout name.
    OpaqueWithoutLayout => Type, Step::Directory(9, 0), "an opaque dtype has no layout name";
    /// An opaque dtype with block_size 0 or a length that is not a multiple of it.
    OpaqueBlockSize => Type, Step::Directory(9, 0), "an opaque dtype's block_size is 0 or does not divide byte_length";
    /// Two nonempty payload ranges intersect (an out-of-order range that intersects nothing is step 10).
    RangeOverlap => Type, Step::Directory(9, 0), "a payload range intersects an earlier tensor's range";
    // --- step 10 (canonical placement)
    /// byte_offset is not the greedy 64-aligned placement.
    NonCanonicalOffset => Type, Step::Directory(10, 0), "byte_offset is not the canonical 64-byte aligned placement";
    /// payload_bytes is not the canonical running end.
    NonCanonicalPayloadBytes => Type, Step::Directory(10, 0), "payload_bytes is not the end of the last tensor";
    /// A payload byte that no tensor covers is nonzero.
    NonzeroGap => Type, Step::Directory(10, 0), "a payload gap byte is nonzero";
    // --- step 11 (element values and quantization)
    /// A bool element is not 0 or 1.
    BoolByte => Type, Step::Directory(11, 0), "a bool element is not 0 or 1";
    /// The unused high nibble of an odd packed tensor is nonzero.
    PackedHighNibble => Type, Step::Directory(11, 0), "the unused high nibble of an odd-length packed tensor is nonzero";
    /// quant_scheme is not 0, 1, or 2.
    UnknownQuantScheme => Type, Step::Directory(11, 0), "quant_scheme is not 0, 1 or 2";
    /// Scheme 0 with nonzero group/axis/index fields.
    QuantFieldsOnPlain => Type, Step::Directory(11, 0), "an unquantized tensor has quantization fields set";
    /// Scheme 1/2 with rank 0, bad axis, or group size 0.
    QuantAxis => Type, Step::Directory(11, 0), "a quantized tensor's rank, axis or group size is invalid";
    /// The scale index is out of range or names the tensor itself.
    ScaleIndex => Type, Step::Directory(11, 0), "the scale index is out of range or names the tensor itself";
    /// The scale or outer tensor is itself quantized.
    QuantChain => Type, Step::Directory(11, 0), "a scale or outer tensor is itself quantized";
    /// The scale tensor's element count is not one per group.
    ScaleCount => Type, Step::Directory(11, 0), "the scale tensor does not hold one element per group";
    /// Scheme 1 with an outer index, or scheme 2 with a bad one.
    OuterIndex => Type, Step::Directory(11, 0), "the outer index is invalid for this scheme";
    /// The outer tensor is not a one-element f32.
    OuterTensor => Type, Step::Directory(11, 0), "the outer scale is not a one-element f32 tensor";
    // --- step 12
    /// Bytes follow a standalone value.
    TrailingBytes => Trailing, Step::Directory(12, 0), "the buffer continues past the end of the value";
    // --- incremental validator
    /// The directory prefix (header, descriptors, heap, padding) is longer
    /// than the memory the caller gave the incremental validator for it.
    PrefixBufferTooSmall => Limit, Step::Caller, "the directory prefix is longer than the memory given for it";
    // --- writer
    /// The writer was given an output buffer shorter than the block.
    OutputTooSmall => Eof, Step::Caller, "the output buffer is shorter than the encoded block";
    /// A writer input exceeds a field's width (rank, name length, heap offset, count).
    FieldTooWide => Limit, Step::Caller, "a value does not fit in its wire field";
    /// The writer's dict helper needs a name for every tensor.
    DictKeyMissing => Type, Step::Caller, "a dict of tensors needs a name for every tensor";
    /// A quantization reference names no tensor of the set.
    UnknownReference => Type, Step::Caller, "a quantization reference names no tensor in the set";
    // --- Frozen values: type text
    /// The type text is not canonical Kiln type text.
    TypeTextSyntax => Type, Step::Caller, "the type text is not canonical Kiln type text";
    /// A struct in the type text names the same field twice.
    DuplicateField => Type, Step::Caller, "a struct type names the same field twice";
    /// The type nests more than 64 containers.
    TypeDepth => Limit, Step::Caller, "the type nests more than 64 containers";
    /// The type has more nodes than the schema can hold.
    SchemaCapacity => Limit, Step::Caller, "the type has more nodes than the schema's capacity";
    // --- Frozen values: frame
    /// Fewer than 16 bytes where a frame was expected.
    FrameTruncated => Eof, Step::Frozen(1), "the buffer ends inside the 16-byte frame";
    /// The frame magic is not `KLN0`.
    FrameMagic => Frame, Step::Frozen(1), "the frame magic is not KLN0";
    /// The frame profile byte is not 0 (Frozen).
    FrameProfile => Frame, Step::Frozen(1), "the frame profile is not 0 (Frozen)";
    /// The frame flags byte is not 0.
    FrameFlags => Frame, Step::Frozen(1), "the frame flags byte is not 0";
    /// A frame reserved byte is nonzero.
    FrameReserved => Frame, Step::Frozen(1), "a reserved frame byte is nonzero";
    /// The frame hash is not the destination type's schema hash.
    SchemaHash => Schema, Step::Frozen(2), "the frame's schema hash does not match the destination type";
    // --- Frozen values: counts, lengths and values
    /// A fixed-width value runs past the end of the buffer.
    ValueTruncated => Eof, Step::Frozen(3), "a fixed-width value runs past the end of the buffer";
    /// The buffer ends inside a u32 count or length word.
    CountTruncated => Eof, Step::Frozen(3), "the buffer ends inside a count or length word";
    /// A list or dict count is above the count cap.
    CountCap => Limit, Step::Frozen(3), "a list or dict count is above the count cap";
    /// A string or `list<u8>` length is above the byte cap.
    ByteLengthCap => Limit, Step::Frozen(3), "a string or list<u8> length is above the byte cap";
    /// count * minimum element size overflows a u64.
    CountOverflow => Limit, Step::Frozen(3), "count * minimum element size overflows";
    /// count * minimum element size is more than the unread bytes.
    CountPastEnd => Eof, Step::Frozen(3), "count * minimum element size is more than the unread bytes";
    /// A string or `list<u8>` length is more than the unread bytes.
    ByteLengthPastEnd => Eof, Step::Frozen(3), "a string or list<u8> runs past the end of the buffer";
    /// A string or dict key is not UTF-8.
    StrUtf8 => Utf8, Step::Frozen(3), "a string is not valid UTF-8";
    /// A Frozen bool byte is not 0 or 1.
    BoolValue => Type, Step::Frozen(3), "a bool byte is not 0 or 1";
    /// An opt tag byte is not 0 or 1.
    OptTag => Type, Step::Frozen(3), "an opt tag byte is not 0 or 1";
    /// A dict key is not strictly greater (as raw bytes) than the key before it.
    DictKeyOrder => Type, Step::Frozen(3), "a dict key is not strictly greater than the previous key";
    // --- Frozen values: encoder
    /// The encoder was given an output buffer shorter than the value.
    ValueOutputTooSmall => Eof, Step::Caller, "the output buffer is shorter than the encoded value";
    /// A count or length does not fit in its u32 word.
    CountTooWide => Limit, Step::Caller, "a count or length does not fit in a u32";
    /// The encoder was given two equal dict keys.
    DuplicateDictKey => Type, Step::Caller, "a dict to encode holds the same key twice";
    /// An integer to encode is outside the range of its kind.
    IntRange => Type, Step::Caller, "an integer to encode is outside the range of its kind";
    /// A value to encode is not of the kind its type needs.
    ValueShape => Type, Step::Caller, "a value to encode is not of the kind its type needs";
    /// A struct value to encode lacks a field its type declares.
    MissingField => Type, Step::Caller, "a struct value to encode lacks a field of its type";
    /// A struct value to encode holds a name its type does not declare.
    UnknownField => Type, Step::Caller, "a struct value to encode holds a field its type does not declare";
    /// A list or dict to encode gave another number of entries than its count.
    ItemCount => Type, Step::Caller, "a list or dict to encode gave another number of entries than its count";
    /// A run of numbers to encode is not a whole number of elements.
    NumberRun => Type, Step::Caller, "a run of numbers to encode is not a whole number of elements";
    /// A `tensors` value to encode was not written exactly once.
    TensorsWrite => Type, Step::Caller, "a tensors value to encode was not written exactly once";
    // --- model files: digests (spec/model-file.md)
    /// The digest table's length is not a multiple of 32.
    DigestTableLength => Type, Step::Record, "the digest table's length is not a multiple of 32 bytes";
    /// The digest table does not hold one digest per tensor (step 3d).
    DigestTableCount => Type, Step::Directory(3, b'd'), "the digest table does not hold one digest per tensor";
    /// A tensor's payload does not match its digest (step 9d).
    PayloadDigest => Digest, Step::Directory(9, b'd'), "a tensor's payload does not match its SHA-256 digest";
}

/// A rejected input: code, absolute byte offset, and the rule that failed.
///
/// `Error` is `Copy` and 8 bytes on every target, so firmware can keep and
/// log it freely and checks return it in registers. Offsets are exact up to
/// 2^48 - 1 (256 TiB) everywhere: a block checked in pieces
/// ([`Incremental`](crate::Incremental), `kiln_model::source`) can be
/// larger than a 32-bit device's or wasm32's address space, and its faults
/// still say exactly where they are ([`offset_u64`](Self::offset_u64)).
///
/// ```
/// let err = kiln_nostd::Directory::parse(b"KLNT").unwrap_err();
/// assert_eq!(err.code(), kiln_nostd::ErrorCode::Eof);
/// assert_eq!(err.offset(), 4);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error {
    // The offset in two parts: 48 bits in two words on 32-bit targets.
    lo: u32,
    hi: u16,
    rule: Rule,
}

/// Offsets saturate here (256 TiB), past any stream a block arrives in.
const OFFSET_MAX: u64 = (1 << 48) - 1;

impl Error {
    /// An error for `rule` at absolute byte `offset`.
    #[must_use]
    pub const fn new(rule: Rule, offset: usize) -> Self {
        Self::at(rule, u64_from(offset))
    }

    /// An error for `rule` at absolute byte `offset` of a stream or source
    /// that may be larger than the address space (saturating at 2^48 - 1).
    #[allow(clippy::as_conversions)] // the two parts of a value below 2^48
    #[must_use]
    pub const fn at(rule: Rule, offset: u64) -> Self {
        let v = if offset > OFFSET_MAX { OFFSET_MAX } else { offset };
        Error { lo: v as u32, hi: (v >> 32) as u16, rule }
    }

    /// What to do instead, printed after the rule's text: a buffer that is
    /// not a directory block may be a model file, which has a reader of its
    /// own (`kiln_model::open`). Computed from the rule, so the checks carry
    /// nothing for it.
    pub const fn hint(&self) -> Option<&'static str> {
        match self.rule {
            Rule::DirectoryMagic => Some("a Kiln model file starts with KLN0: open it with kiln_model::open"),
            _ => None,
        }
    }

    /// The spec's error code.
    pub const fn code(&self) -> ErrorCode {
        self.rule.code()
    }

    /// The absolute byte offset, from the start of the caller's buffer, of the
    /// field or byte that broke the rule. For EOF it is where the missing
    /// bytes would have started or the end of the buffer. On a 32-bit target
    /// an offset past `usize::MAX` (a block fed in pieces) saturates there;
    /// [`offset_u64`](Self::offset_u64) has it exactly.
    pub fn offset(&self) -> usize {
        usize_sat(self.offset_u64())
    }

    /// The absolute byte offset, not limited by the address space.
    #[allow(clippy::as_conversions)] // widening; `From` is not const
    pub const fn offset_u64(&self) -> u64 {
        (self.hi as u64) << 32 | self.lo as u64
    }

    /// The rule that failed.
    pub const fn rule(&self) -> Rule {
        self.rule
    }

    /// The same error with its offset moved by `base` (used when a block is
    /// checked in a sub-slice of the caller's buffer).
    pub(crate) const fn shifted(self, base: usize) -> Self {
        Self::at(self.rule, self.offset_u64().saturating_add(u64_from(base)))
    }
}

// By hand: the offset is one number.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error").field("rule", &self.rule).field("offset", &self.offset_u64()).finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Error {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "Error {{ rule: {}, offset: {} }}", self.rule, self.offset_u64());
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}: {}", self.code(), self.offset_u64(), self.rule.description())?;
        match self.hint() {
            Some(hint) => write!(f, " ({hint})"),
            None => Ok(()),
        }
    }
}

impl core::error::Error for Error {}

/// Result alias for this crate.
pub type Result<T> = core::result::Result<T, Error>;

/// Shorthand used by the checkers: `fail(Rule::X, at)`.
pub(crate) const fn fail<T>(rule: Rule, at: usize) -> Result<T> {
    Err(Error::new(rule, at))
}

/// `fail` for an offset in a stream or source, which may pass `usize::MAX`.
pub(crate) const fn fail_at<T>(rule: Rule, at: u64) -> Result<T> {
    Err(Error::at(rule, at))
}

// Two words on 32-bit targets, one on 64-bit ones.
const _: () = assert!(core::mem::size_of::<Error>() == 8);

#[cfg(test)]
mod tests {
    use super::{Error, ErrorCode, Rule, OFFSET_MAX};

    #[test]
    fn the_tables_hold_each_text_once_in_both_forms() {
        for (i, code) in ErrorCode::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(code.number()), i + 1, "{code:?}");
            assert_eq!(ErrorCode::from_number(code.number()), Some(code));
            assert_eq!(ErrorCode::from_name(code.as_str()), Some(code));
            assert_eq!(code.as_c_str().to_str(), Ok(code.as_str()));
        }
        assert_eq!((ErrorCode::from_number(0), ErrorCode::from_name("OK")), (None, None));
        extern crate std;
        let mut ids = std::vec::Vec::new();
        for rule in Rule::ALL {
            assert_eq!(rule.id_c_str().to_str(), Ok(rule.id()));
            assert_eq!(rule.description_c_str().to_str(), Ok(rule.description()));
            assert!(ErrorCode::ALL.contains(&rule.code()));
            ids.push(rule.id());
        }
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), Rule::ALL.len());
    }

    #[test]
    fn offsets_are_exact_to_48_bits_and_saturate_past() {
        for v in [0, 1, u64::from(u32::MAX), 1 << 32, 6 << 30, (5 << 30) + 13, OFFSET_MAX] {
            assert_eq!(Error::at(Rule::NonzeroGap, v).offset_u64(), v);
        }
        assert_eq!(Error::at(Rule::NonzeroGap, OFFSET_MAX + 1).offset_u64(), OFFSET_MAX);
        assert_eq!(Error::at(Rule::NonzeroGap, u64::MAX).offset_u64(), OFFSET_MAX);
        let e = Error::at(Rule::BoolByte, 1 << 32).shifted(7);
        assert_eq!((e.rule(), e.offset_u64()), (Rule::BoolByte, (1 << 32) + 7));
        assert_eq!(e.offset(), usize::try_from((1u64 << 32) + 7).unwrap_or(usize::MAX));
        extern crate std;
        assert_eq!(std::format!("{e:?}"), "Error { rule: BoolByte, offset: 4294967303 }");
        assert_eq!(std::format!("{e}"), "TYPE at byte 4294967303: a bool element is not 0 or 1");
    }
}
