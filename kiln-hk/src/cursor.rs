//! A bounds-checked little-endian reader over one section of the caller's
//! buffer. Every read either returns the bytes or the section's EOF rule at
//! the absolute position where the missing bytes would start.

use crate::error::{Error, Result, Rule};

#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
    eof: Rule,
}

impl<'a> Cursor<'a> {
    /// A reader over `buf[pos..end]` (`end` is clamped to the buffer).
    pub(crate) fn new(buf: &'a [u8], pos: usize, end: usize, eof: Rule) -> Self {
        Cursor { buf, pos, end: end.min(buf.len()), eof }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.end.saturating_sub(self.pos)
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let stop = self.pos.checked_add(n).filter(|&e| e <= self.end);
        match stop.and_then(|e| self.buf.get(self.pos..e).map(|s| (s, e))) {
            Some((s, e)) => {
                self.pos = e;
                Ok(s)
            }
            None => Err(Error::new(self.eof, self.pos)),
        }
    }

    pub(crate) fn take_u64_len(&mut self, n: u64) -> Result<&'a [u8]> {
        match usize::try_from(n) {
            Ok(n) => self.take(n),
            Err(_) => Err(Error::new(self.eof, self.pos)),
        }
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let at = self.pos;
        self.take(N)?.try_into().map_err(|_| Error::new(self.eof, at))
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        self.array::<1>().map(|[b]| b)
    }

    pub(crate) fn u16(&mut self) -> Result<u16> {
        self.array().map(u16::from_le_bytes)
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        self.array().map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        self.array().map(u64::from_le_bytes)
    }
}
