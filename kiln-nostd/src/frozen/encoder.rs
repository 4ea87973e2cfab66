//! The canonical encoder: a cursor over caller memory that an
//! [`Encode`](super::Encode) value writes itself through (the entry points
//! that size, write and frame a value are beside the trait, in `typed`).
//!
//! Canonical means one value has one byte string: fields in declaration
//! order, no padding, dict keys in increasing byte order (the encoder sorts
//! them), float bits kept as they are (NaN payloads, signed zeros), tensor
//! directories in the canonical layout.
//!
//! The encoder does not apply a reader's caps: it refuses only a count above
//! the wire maximum (4,294,967,295, LIMIT). A reader with smaller caps may
//! refuse what was written; size-check against your readers' [`Limits`](crate::Limits).

use crate::error::{fail, Result, Rule};
use crate::writer::{TensorSpec, Writer};

/// Writes Frozen values into a caller buffer, front to back.
///
/// ```
/// use kiln_nostd::frozen::Encoder;
/// let mut out = [0u8; 16];
/// let mut e = Encoder::new(&mut out);
/// e.put_str("hi")?;
/// e.put(&7u16.to_le_bytes())?;
/// assert_eq!(e.position(), 8);
/// assert_eq!(&out[..8], &[2, 0, 0, 0, b'h', b'i', 7, 0]);
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Debug)]
pub struct Encoder<'o> {
    out: &'o mut [u8],
    pos: usize,
}

impl<'o> Encoder<'o> {
    /// An encoder writing from the start of `out`.
    #[must_use]
    pub fn new(out: &'o mut [u8]) -> Self {
        Encoder { out, pos: 0 }
    }

    /// Bytes written so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The next `n` output bytes, to fill in place; the cursor moves past them.
    pub fn reserve(&mut self, n: usize) -> Result<&mut [u8]> {
        let start = self.pos;
        let end = start.saturating_add(n);
        let Some(dst) = self.out.get_mut(start..end) else {
            return fail(Rule::ValueOutputTooSmall, start);
        };
        self.pos = end;
        Ok(dst)
    }

    /// Raw bytes.
    pub fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.reserve(bytes.len())?.copy_from_slice(bytes);
        Ok(())
    }

    /// One byte (a bool, an opt tag, an i8/u8).
    pub fn put_u8(&mut self, b: u8) -> Result<()> {
        self.put(&[b])
    }

    /// A u32 count or length word; more than 4,294,967,295 is LIMIT.
    pub fn put_count(&mut self, n: usize) -> Result<()> {
        let Ok(n) = u32::try_from(n) else {
            return fail(Rule::CountTooWide, self.pos);
        };
        self.put(&n.to_le_bytes())
    }

    /// A `str`: length word, then the UTF-8 bytes.
    pub fn put_str(&mut self, s: &str) -> Result<()> {
        self.put_bytes(s.as_bytes())
    }

    /// A `list<u8>`: length word, then the bytes.
    pub fn put_bytes(&mut self, b: &[u8]) -> Result<()> {
        self.put_count(b.len())?;
        self.put(b)
    }

    /// A `tensors` value: one canonical directory block of `specs`.
    pub fn put_tensors(&mut self, specs: &[TensorSpec<'_>]) -> Result<()> {
        let start = self.pos;
        // Fallback not taken: start <= out.len(): the encoder never moves past its buffer.
        let rest = self.out.get_mut(start..).unwrap_or(&mut []);
        let n = Writer::new().write(specs, rest).map_err(|e| e.shifted(start))?;
        self.pos = start.saturating_add(n);
        Ok(())
    }
}
