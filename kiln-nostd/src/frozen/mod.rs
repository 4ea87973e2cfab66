//! Frozen values: the positional, canonical encoding of typed values, with
//! `tensors` directories embedded as fields.
//!
//! Four layers, none of which allocates:
//!
//! * **Types.** [`Schema`] parses canonical type text (`struct{id:i64,batch:tensors,}`)
//!   into a fixed-capacity node array; [`Ty`] is the same thing built at
//!   compile time for Rust types. Both print canonically, hash with
//!   FNV-1a 64 ([`Schema::hash`], [`Ty::schema_hash`], [`hash_text`]) and
//!   know their minimum wire size.
//! * **Validation and lazy reading.** [`validate`] / [`read`] / [`Reader`]
//!   check a buffer against a [`Schema`] in one pass, in the spec's order,
//!   and return a borrowed [`Value`] whose accessors cannot fail or panic.
//! * **Typed values.** [`Decode`] / [`Encode`] / [`KilnType`] for scalars,
//!   `&str`, `&[u8]`, [`ListView`], [`Seq`], `Option`, [`DictView`], [`DictPairs`],
//!   [`Directory`](crate::Directory) and [`TensorSpecs`], plus derived structs
//!   (`kiln-derive`); owned `String`/`Vec`/`BTreeMap` with feature `alloc`.
//! * **Values of a run-time type.** [`encode_by_schema`] walks a [`TypeRef`]
//!   and asks a caller's [`Source`] (a binding's object model) for the values,
//!   applying every encoding rule itself, into a [`Sink`] ([`Encoder`], or
//!   `Vec<u8>` with feature `alloc`).
//!
//! ```
//! use kiln_nostd::frozen::{self, Schema};
//! use kiln_nostd::{Limits, wire::EMPTY_BLOCK};
//!
//! // struct{id:i64,batch:tensors,} with id 7 and an empty directory, framed.
//! let schema: Schema = Schema::parse("struct{id:i64,batch:tensors,}")?;
//! let mut buf = [0u8; 16 + 8 + 64];
//! buf[..16].copy_from_slice(&frozen::frame_bytes(schema.hash()));
//! buf[16..24].copy_from_slice(&7i64.to_le_bytes());
//! buf[24..].copy_from_slice(&EMPTY_BLOCK);
//!
//! let v = frozen::read(&buf, &schema, &Limits::DEFAULT, true)?;
//! assert_eq!(v.field("id").and_then(|v| v.as_i64()), Some(7));
//! assert_eq!(v.field("batch").and_then(|v| v.as_tensors()).map(|d| d.len()), Some(0));
//! # Ok::<(), kiln_nostd::Error>(())
//! ```

mod by_schema;
mod check;
mod encoder;
#[doc(hidden)]
pub use check::{skip, Checker};
mod frame;
mod hash;
mod kind;
#[cfg(feature = "alloc")]
mod owned;
mod reader;
mod sink;
mod ty;
mod typed;
mod typetext;

pub use by_schema::{
    encode_by_schema, encode_by_schema_framed, Answer, Detail, Place, Refusal, Source, StructNames, TensorsOut,
};
pub use encoder::Encoder;
pub use frame::{check_frame, frame_bytes, read_frame, write_frame, FRAME_LEN, FRAME_MAGIC, PROFILE_FROZEN};
pub use hash::{hash_text, Fnv, FNV_OFFSET, FNV_PRIME};
pub use kind::{Kind, MAX_DEPTH};
pub use reader::{
    read, validate, DictIndex, DictIter, DictStrIter, DictValue, ListIter, ListValue, Reader, StructFields,
    StructValue, Value,
};
pub use sink::Sink;
pub use ty::{Field, Ty};
pub use typed::{
    decode, decode_framed, decode_with, encode, encode_framed, encoded_len, encoded_len_framed, Decode, Decoder,
    DictPairs, DictView, DictViewIter, Encode, Int, KilnType, ListView, Seq, SeqIter, TensorSpecs, Uint,
};
pub use typetext::{Fields, Schema, TypeRef, DEFAULT_NODES};

#[cfg(feature = "derive")]
pub use kiln_derive::{Decode, Encode, Kiln, KilnType};
