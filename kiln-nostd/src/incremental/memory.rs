//! The memory an [`Incremental`](super::Incremental) works in.
//!
//! The validator's own state is small and fixed; what grows with the block
//! (the directory prefix, the name scratch, a digest table and its SHA-256
//! state) is memory it is given. [`Borrowed`] is the caller's buffers, as
//! [`Incremental::new`](super::Incremental::new) takes them: no heap, for
//! firmware. [`Owned`] (`alloc` feature) holds its buffers, so a binding can
//! keep a validator across calls (a JavaScript stream across `await`s) with
//! no lifetime it cannot name. Any other owner implements [`Memory`].

#[cfg(feature = "sha2")]
use crate::digest::TensorHasher;

/// The buffers of a [`Memory`], borrowed at once (the prefix is read while
/// the scratch or the SHA-256 state is written).
#[derive(Debug)]
pub struct Parts<'a> {
    /// The directory prefix's memory: header, descriptors, name heap,
    /// padding (see [`Incremental::prefix_len`](super::Incremental::prefix_len)).
    pub prefix: &'a mut [u8],
    /// Name scratch for the linear-time uniqueness check, as for
    /// [`Parser::scratch`](crate::Parser::scratch).
    pub scratch: Option<&'a mut [u32]>,
    /// The digest table (32 bytes per tensor, in descriptor order) and the
    /// running SHA-256 state, when payloads are checked against digests.
    #[cfg(feature = "sha2")]
    pub digests: Option<(&'a [u8], &'a mut TensorHasher)>,
}

/// Where an [`Incremental`](super::Incremental) keeps what it must keep.
///
/// The validator reads the buffers through this on every chunk that needs
/// them, and never holds a borrow across calls. An implementation returns
/// the same buffers each time: the validator's state describes their
/// contents.
pub trait Memory {
    /// The directory prefix's memory, to read.
    fn prefix(&self) -> &[u8];
    /// Every buffer, to write.
    fn parts(&mut self) -> Parts<'_>;
}

/// The caller's buffers, borrowed for the validator's life.
#[derive(Debug)]
pub struct Borrowed<'m, 's> {
    pub(super) prefix: &'m mut [u8],
    pub(super) scratch: Option<&'s mut [u32]>,
    #[cfg(feature = "sha2")]
    pub(super) digests: Option<(&'m [u8], &'m mut TensorHasher)>,
}

impl Memory for Borrowed<'_, '_> {
    fn prefix(&self) -> &[u8] {
        self.prefix
    }

    fn parts(&mut self) -> Parts<'_> {
        Parts {
            prefix: self.prefix,
            scratch: self.scratch.as_deref_mut(),
            #[cfg(feature = "sha2")]
            digests: self.digests.as_mut().map(|(t, h)| (*t, &mut **h)),
        }
    }
}

/// Buffers the validator owns (`alloc` feature). A binding sizes them from
/// the header (see [`Incremental::prefix_len`](super::Incremental::prefix_len)
/// and [`scratch_len`](crate::directory::scratch_len)), allocating as it can (a failed
/// allocation is the binding's to report), and takes them back with
/// [`Incremental::into_memory`](super::Incremental::into_memory) to reuse them.
#[cfg(feature = "alloc")]
#[derive(Debug, Default)]
pub struct Owned {
    /// The directory prefix's memory.
    pub prefix: alloc::boxed::Box<[u8]>,
    /// Name scratch, if any.
    pub scratch: Option<alloc::boxed::Box<[u32]>>,
    /// The digest table and the SHA-256 state, if payloads are checked.
    #[cfg(feature = "sha2")]
    pub digests: Option<(alloc::boxed::Box<[u8]>, alloc::boxed::Box<TensorHasher>)>,
}

#[cfg(feature = "alloc")]
impl Memory for Owned {
    fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    fn parts(&mut self) -> Parts<'_> {
        Parts {
            prefix: &mut self.prefix,
            scratch: self.scratch.as_deref_mut(),
            #[cfg(feature = "sha2")]
            digests: self.digests.as_mut().map(|(t, h)| (&**t, &mut **h)),
        }
    }
}
