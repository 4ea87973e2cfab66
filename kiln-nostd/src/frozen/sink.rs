//! Where encoded bytes go: the [`Sink`] a schema-driven encoding writes
//! through, for the fixed-buffer [`Encoder`] and, with feature `alloc`, for
//! a growing `Vec<u8>`.

use crate::error::Result;
#[cfg(feature = "alloc")]
use crate::error::{fail, Rule};

use super::encoder::Encoder;

/// An output for encoded bytes, written front to back.
///
/// A full sink is EOF ([`crate::Rule::ValueOutputTooSmall`]) at the position
/// where the bytes that did not fit would have started.
///
/// ```
/// use kiln_nostd::frozen::{Encoder, Sink};
/// let mut out = [0u8; 4];
/// let mut e = Encoder::new(&mut out);
/// Sink::put(&mut e, &[1, 2, 3])?;
/// assert_eq!(Sink::position(&e), 3);
/// assert_eq!(Sink::put(&mut e, &[4, 5]).unwrap_err().offset(), 3);
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
pub trait Sink {
    /// Bytes written so far: the offset an error at the next byte names.
    fn position(&self) -> usize;

    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]) -> Result<()>;

    /// The next `n` output bytes, to be filled in place (their contents are
    /// unspecified); the position moves past them.
    fn reserve(&mut self, n: usize) -> Result<&mut [u8]>;
}

impl Sink for Encoder<'_> {
    fn position(&self) -> usize {
        Encoder::position(self)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        Encoder::put(self, bytes)
    }

    fn reserve(&mut self, n: usize) -> Result<&mut [u8]> {
        Encoder::reserve(self, n)
    }
}

/// Appends to the vector. Memory it cannot get is EOF
/// ([`crate::Rule::ValueOutputTooSmall`]) rather than an abort.
#[cfg(feature = "alloc")]
impl Sink for alloc::vec::Vec<u8> {
    fn position(&self) -> usize {
        self.len()
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        if self.try_reserve(bytes.len()).is_err() {
            return fail(Rule::ValueOutputTooSmall, self.len());
        }
        self.extend_from_slice(bytes);
        Ok(())
    }

    fn reserve(&mut self, n: usize) -> Result<&mut [u8]> {
        let start = self.len();
        if self.try_reserve(n).is_err() {
            return fail(Rule::ValueOutputTooSmall, start);
        }
        self.resize(start.saturating_add(n), 0);
        // Fallback not taken: the vector was just resized to start + n.
        Ok(self.get_mut(start..).unwrap_or(&mut []))
    }
}
