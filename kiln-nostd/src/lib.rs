//! # kiln-nostd
//!
//! The Kiln v2 wire format for `#![no_std]` targets with no allocator: a
//! validator for tensor directories that checks every rule of the spec, in the
//! spec's order, before it hands out a single slice, and views that borrow
//! the caller's buffer.
//!
//! ```
//! use kiln_nostd::{Directory, DType, TensorSpec, Writer};
//!
//! fn main() -> Result<(), kiln_nostd::Error> {
//!     // Write a directory holding one named f32 vector ...
//!     let data = kiln_nostd::dtype::le_bytes(&[1.0f32, -2.0]).unwrap_or(&[0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0]);
//!     let specs = [TensorSpec::new(DType::F32, &[2], data).named("w")];
//!     let mut buf = [0u8; 512];
//!     let len = Writer::new().write(&specs, &mut buf)?;
//!
//!     // ... and read it back: checked once, then borrowed.
//!     let dir = Directory::parse(&buf[..len])?;
//!     let w = dir.find("w").expect("present");
//!     assert_eq!(w.shape(), &[2]);
//!     assert_eq!(w.bytes(), &[0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0]);
//!     Ok(())
//! }
//! ```
//!
//! Hostile input gets an [`Error`] with the spec's code, the absolute byte
//! offset and the [`Rule`] that failed; never a panic, never an allocation.
//!
//! [`frozen`] holds the Frozen values around the directories: canonical type
//! text, schema hash and frame, a validator with a lazy borrowed value API,
//! typed `Decode`/`Encode` (with `#[derive(Kiln)]` under the `derive`
//! feature, owned `String`/`Vec`/`BTreeMap` under `alloc`) and the
//! canonical encoder.
#![no_std]
#![forbid(unsafe_code)]
// A published crate: every public item is documented (the workspace only warns),
// and a configured builder that is dropped unused is a mistake the compiler names.
#![deny(missing_docs)]
#![warn(clippy::return_self_not_must_use)]
// Offset arithmetic saturates (`saturating_add` and friends) rather than
// wrapping: a saturated offset lies past the end of every buffer, so the
// bounds check that follows it fails as it should. Each `unwrap_or` that
// remains says on the line above why its fallback is never taken, or what
// it means when it is.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::as_conversions
    )
)]

#[cfg(feature = "alloc")]
extern crate alloc;

mod accept;
mod block;
// Hidden: the model-file crate (`kiln-model`) builds on them; not an API.
#[doc(hidden)]
pub mod bytes;
mod check_order;
pub mod dequant;
pub mod digest;
pub mod directory;
pub mod dtype;
pub mod error;
pub mod frozen;
pub mod incremental;
#[doc(hidden)]
pub mod names;
mod ranges;
#[doc(hidden)]
pub mod steps;
pub mod wire;
pub mod writer;

// The types nearly every caller names; everything else is reached through
// its module (one module per concept, as listed on this page).
pub use directory::{Directory, Limits, Parser, Tensor};
pub use dtype::DType;
pub use error::{Error, ErrorCode, Rule};
pub use incremental::Incremental;
pub use writer::{TensorSpec, Writer};

/// Checked integer conversions: the core's own, shared with the readers
/// outside it (the CLI's converters) so every parser converts one way.
// Hidden: plumbing for the converters, not part of the format's API.
#[doc(hidden)]
pub mod int {
    pub use crate::bytes::{u64_from, usize_from, usize_from_u32, usize_sat};
}

// The README's example runs as a doctest, so the crate's page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;
