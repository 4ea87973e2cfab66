//! Ranged reading: models that a device or host cannot map into memory.
//!
//! A [`ReadAt`] source answers "these bytes at this offset": a file, a NOR
//! flash behind SPI, a seekable stream, an HTTP range client, or a plain
//! `&[u8]`. Three operations work on one, each in memory the caller gives,
//! whatever the model's size:
//!
//! - [`open`] reads the 64-byte header and the directory prefix (header,
//!   descriptors, name heap, padding: two reads) into the caller's prefix
//!   buffer and checks it. The [`Opened`] handle shows the tensor table
//!   (names, dtypes, shapes, offsets) without any payload byte.
//! - [`read_tensor`] and [`read_rows`] copy one tensor, or a range of its
//!   rows, into a caller buffer with one read, and check the byte rules
//!   those bytes are subject to.
//! - [`verify`] checks the whole block through one fixed chunk buffer, with
//!   exactly [`Parser::parse`](kiln_nostd::Parser::parse)'s verdict, reading only
//!   the bytes a rule reads.
//!
//! # What `open` guarantees, and what is left
//!
//! After [`open`] every rule that the directory prefix decides holds: steps
//! 1 to 9 (header, caps, sizes, padding, reserved bytes, names, dtypes,
//! shapes, ranges), step 10's placement (canonical offsets and
//! `payload_bytes`), step 11's quantization rules, the block lies inside the
//! source, and (for a standalone block) the source ends where the block does
//! (step 12). Three rules read payload bytes, and `open` reads none:
//!
//! - the gap bytes between payloads are zero: only [`verify`] reads them;
//! - bool bytes are 0 or 1, and the unused high nibble of an odd-length
//!   packed (i4, u4, e2m1) tensor is zero: [`read_tensor`] and
//!   [`read_rows`] check them on the bytes they copy, and [`verify`] on all.
//!
//! So a block `open` accepts is either accepted by `Parser`, or rejected for
//! one of those three payload-byte rules; a block `open` rejects is rejected
//! by `Parser` too (with the same error unless the block also breaks one of
//! those three rules at an earlier place in the check order, which `Parser`
//! would report first). [`verify`] gives `Parser`'s exact verdict.
//!
//! ```
//! use kiln_model::source::{self, SourceError};
//! # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
//! let file: &[u8] = &block; // or a std::fs::File, source::Flash, source::Io, ...
//! let mut prefix = [0u8; 512]; // at least the prefix: Opened::payload_base bytes
//! let model = source::open(file, &mut prefix)?;
//! let w = model.directory().find("w").expect("present");
//! assert_eq!(w.shape(), &[2]);
//!
//! let mut out = [0u8; 8];
//! let n = source::read_tensor(file, &model, "w", &mut out)?;
//! assert_eq!(&out[..n], &[0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0]); // 1.0f32, -2.0f32
//! let mut row = [0u8; 4];
//! source::read_rows(file, &model, "w", 1..2, &mut row)?;
//! assert_eq!(f32::from_le_bytes(row), -2.0);
//! # Ok::<(), SourceError<source::OutOfBounds>>(())
//! ```
//!
//! # Verifying a block larger than memory
//!
//! [`verify`] drives an [`Incremental`](kiln_nostd::Incremental) validator from the source through
//! one chunk buffer of any length. It reads the header and the prefix, and
//! of the payload only what [`Incremental::next_needed`](kiln_nostd::Incremental::next_needed) asks for: gap
//! bytes, bool tensors and the last byte of odd-length packed tensors; the
//! rest it [`skip`](kiln_nostd::Incremental::skip)s without reading. The memory is the
//! prefix buffer and the chunk buffer. Given a digest table
//! (`Options::digests`, `sha2` feature) it also checks each tensor's
//! SHA-256 (step 9d of `spec/model-file.md`) and then reads every payload
//! byte of the canonical run, in whole chunks.
//!
//! ```
//! use kiln_model::source::{self, SourceError};
//! # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
//! let mut prefix = [0u8; 512];
//! let mut chunk = [0u8; 256];
//! let summary = source::verify(&block[..], &mut prefix, &mut chunk)?;
//! assert_eq!(summary.block_len, block.len() as u64);
//!
//! // Parser's verdict, code, offset and rule: here a byte past the block.
//! let mut longer = block.to_vec();
//! longer.push(0);
//! let err = source::verify(&longer[..], &mut prefix, &mut chunk).unwrap_err();
//! assert_eq!(err.kiln().unwrap(), kiln_nostd::Parser::new().parse(&longer).unwrap_err());
//! # Ok::<(), SourceError<source::OutOfBounds>>(())
//! ```
//!
//! A standalone block (the default) must fill its source: the source's
//! [`len`](ReadAt::len) is the block's length, so bytes past the block are
//! TRAILING and a short source is EOF, exactly as `Parser::parse` decides on
//! the whole source in memory. [`Options::embedded`] checks a block that a
//! source continues past (a flash partition, a `tensors` field followed by
//! other fields), as [`Parser::parse_at`] does.
//! [`Window`] makes a source of a part of another, so a block need not
//! start at offset 0; error offsets are then relative to the window.
//!
//! # Async sources
//!
//! Under an async executor (Embassy's, say) a source implements
//! [`AsyncReadAt`], the same two calls as `async fn`s, and the operations
//! are [`open_async`], [`read_tensor_async`], [`read_rows_async`],
//! [`verify_async`] and the `Options` methods `open_async`, `verify_async`
//! and `verify_model_async`. Each operation's body is written once and
//! compiled twice, with plain calls over [`ReadAt`] and awaited calls over
//! [`AsyncReadAt`]: both forms make the same reads in the same order and
//! give the same results, and the blocking forms compile to the code they
//! would be without the async ones. `&[u8]`, `&mut` sources and [`Window`]
//! implement both traits; [`Ready`] lends a blocking source to async code;
//! the adapters `AsyncFlash` (`embedded_storage_async`'s `ReadNorFlash`,
//! feature `embedded-storage-async`) and `AsyncIo` (`embedded_io_async`'s
//! `Read + Seek`, feature `embedded-io-async`) mirror `Flash` and `Io`.

use core::fmt;
use core::ops::Range;

use crate::bytes::{u64_from, usize_from};
use crate::descriptor::RawDescriptor;
use crate::dtype::{DType, Width};
use crate::error::Error;
use crate::header::{Header, DESCRIPTOR_LEN, HEADER_LEN};
use crate::incremental::Summary;
use kiln_nostd::{Directory, Parser, Tensor};

/// A source call in a body that `read_fns!` (and its kin in `verify` and
/// `model`) compiles twice: here as is, over [`ReadAt`] ...
macro_rules! ready {
    ($call:expr) => {
        $call
    };
}

/// ... and here awaited, over [`AsyncReadAt`]. The logic of each ranged
/// operation is written once; only the reads differ.
macro_rules! wait {
    ($call:expr) => {
        $call.await
    };
}

mod asynch;
#[cfg(feature = "std")]
mod file;
#[cfg(any(feature = "embedded-storage", feature = "embedded-storage-async"))]
mod flash;
#[cfg(any(feature = "embedded-io", feature = "embedded-io-async"))]
mod io;
#[cfg(feature = "sha2")]
mod model;
mod read;
mod verify;

pub use asynch::{open_async, read_rows_async, read_tensor_async, verify_async};

#[cfg(feature = "sha2")]
pub use model::ModelSummary;

#[cfg(feature = "embedded-storage-async")]
pub use flash::AsyncFlash;
#[cfg(feature = "embedded-storage")]
pub use flash::Flash;
#[cfg(feature = "embedded-io-async")]
pub use io::AsyncIo;
#[cfg(feature = "embedded-io")]
pub use io::Io;

/// Bytes at an offset: the one thing ranged reading needs of a source.
///
/// Implemented for `&[u8]`, for `&mut` of any source, for [`Window`], and
/// behind features for `std::fs::File` (`std`), NOR flash
// Linked only where the feature builds the item, so docs without it have no broken link.
#[cfg_attr(feature = "embedded-storage", doc = "([`Flash`], `embedded-storage`)")]
#[cfg_attr(not(feature = "embedded-storage"), doc = "(`Flash`, `embedded-storage`)")]
/// and seekable readers
#[cfg_attr(feature = "embedded-io", doc = "([`Io`], `embedded-io`).")]
#[cfg_attr(not(feature = "embedded-io"), doc = "(`Io`, `embedded-io`).")]
pub trait ReadAt {
    /// What a failed read reports.
    type Error;

    /// Fills all of `buf` with the source's bytes at `offset..offset + buf.len()`.
    /// The functions of this module never ask for bytes past [`len`](Self::len).
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error>;

    /// The source's length in bytes. A source that cannot tell may answer
    /// `u64::MAX` and be read with [`Options::embedded`]: the header then
    /// decides the block's length, and a source that ends early shows as a
    /// read error instead of EOF.
    fn len(&mut self) -> Result<u64, Self::Error>;

    /// True when the source holds no bytes.
    fn is_empty(&mut self) -> Result<bool, Self::Error> {
        Ok(self.len()? == 0)
    }
}

impl<T: ReadAt + ?Sized> ReadAt for &mut T {
    type Error = T::Error;
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), T::Error> {
        (**self).read_at(offset, buf)
    }
    fn len(&mut self) -> Result<u64, T::Error> {
        (**self).len()
    }
}

impl ReadAt for &[u8] {
    type Error = OutOfBounds;
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), OutOfBounds> {
        let start = usize_from(offset).ok_or(OutOfBounds)?;
        let end = start.checked_add(buf.len()).ok_or(OutOfBounds)?;
        buf.copy_from_slice(self.get(start..end).ok_or(OutOfBounds)?);
        Ok(())
    }
    fn len(&mut self) -> Result<u64, OutOfBounds> {
        Ok(u64_from(<[u8]>::len(self)))
    }
}

/// Bytes at an offset, read asynchronously: [`ReadAt`] for a source whose
/// reads complete later (a flash behind DMA, an SD card, a network range
/// request), driven by any executor.
///
/// Implemented for `&[u8]`, for `&mut` of any source, for [`Window`], for
/// [`Ready`] (any blocking [`ReadAt`]), and behind features for async NOR
/// flash
// Linked only where the feature builds the item, so docs without it have no broken link.
#[cfg_attr(feature = "embedded-storage-async", doc = "([`AsyncFlash`], `embedded-storage-async`)")]
#[cfg_attr(not(feature = "embedded-storage-async"), doc = "(`AsyncFlash`, `embedded-storage-async`)")]
/// and async seekable readers
#[cfg_attr(feature = "embedded-io-async", doc = "([`AsyncIo`], `embedded-io-async`).")]
#[cfg_attr(not(feature = "embedded-io-async"), doc = "(`AsyncIo`, `embedded-io-async`).")]
///
/// ```
/// use kiln_model::source::{self, AsyncReadAt, OutOfBounds};
/// # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
///
/// // A source whose reads complete later (here: memory, through an executor).
/// struct Dma<'a>(&'a [u8]);
/// impl AsyncReadAt for Dma<'_> {
///     type Error = OutOfBounds;
///     async fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), OutOfBounds> {
///         let at = usize::try_from(offset).map_err(|_| OutOfBounds)?;
///         buf.copy_from_slice(self.0.get(at..at + buf.len()).ok_or(OutOfBounds)?);
///         Ok(())
///     }
///     async fn len(&mut self) -> Result<u64, OutOfBounds> {
///         Ok(self.0.len() as u64)
///     }
/// }
///
/// let (mut prefix, mut chunk) = ([0u8; 512], [0u8; 64]);
/// let verdict = embassy_futures::block_on(source::verify_async(Dma(&block), &mut prefix, &mut chunk));
/// // The blocking form's verdict, on the same bytes.
/// assert_eq!(verdict, source::verify(&block[..], &mut prefix, &mut chunk));
/// ```
// `async fn` in a public trait: its futures promise no `Send`, which the
// single-threaded executors of embedded code do not need (as in
// `embedded-io-async` and `embedded-storage-async`).
#[allow(async_fn_in_trait)]
pub trait AsyncReadAt {
    /// What a failed read reports.
    type Error;

    /// Fills all of `buf` with the source's bytes at `offset..offset + buf.len()`.
    /// The functions of this module never ask for bytes past [`len`](Self::len).
    async fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error>;

    /// The source's length in bytes, as [`ReadAt::len`] (`u64::MAX` for a
    /// source that cannot tell, read with [`Options::embedded`]).
    async fn len(&mut self) -> Result<u64, Self::Error>;

    /// True when the source holds no bytes.
    async fn is_empty(&mut self) -> Result<bool, Self::Error> {
        Ok(self.len().await? == 0)
    }
}

impl<T: AsyncReadAt + ?Sized> AsyncReadAt for &mut T {
    type Error = T::Error;
    async fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), T::Error> {
        (**self).read_at(offset, buf).await
    }
    async fn len(&mut self) -> Result<u64, T::Error> {
        (**self).len().await
    }
}

impl AsyncReadAt for &[u8] {
    type Error = OutOfBounds;
    async fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), OutOfBounds> {
        ReadAt::read_at(self, offset, buf)
    }
    async fn len(&mut self) -> Result<u64, OutOfBounds> {
        ReadAt::len(self)
    }
}

/// A blocking source ([`ReadAt`]) as an async one whose reads complete at
/// once: for code written against [`AsyncReadAt`] that is handed a file, a
/// buffer or a blocking flash driver.
#[derive(Clone, Copy, Debug)]
pub struct Ready<S>(pub S);

impl<S: ReadAt> AsyncReadAt for Ready<S> {
    type Error = S::Error;
    async fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), S::Error> {
        self.0.read_at(offset, buf)
    }
    async fn len(&mut self) -> Result<u64, S::Error> {
        self.0.len()
    }
}

/// A read outside a source: the error of the `&[u8]` source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OutOfBounds;

impl fmt::Display for OutOfBounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("read outside the source")
    }
}

impl core::error::Error for OutOfBounds {}

/// The error of an adapter that adds bounds to another source ([`Window`],
#[cfg_attr(feature = "embedded-storage", doc = "[`Flash`]):")]
#[cfg_attr(not(feature = "embedded-storage"), doc = "`Flash`):")]
/// the inner source's own error, or a read outside the bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ReadError<E> {
    /// The inner source failed.
    Source(E),
    /// The read lies outside the window, or past what the device can address.
    OutOfBounds,
}

impl<E: fmt::Display> fmt::Display for ReadError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Source(e) => e.fmt(f),
            ReadError::OutOfBounds => OutOfBounds.fmt(f),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> core::error::Error for ReadError<E> {}

/// `len` bytes of another source from `start`: a block that does not start
/// at offset 0 (a model in a flash partition, a `tensors` field inside a
/// file). Offsets, and the offsets of errors, are relative to `start`.
///
/// ```
/// use kiln_model::source::{self, Window};
/// # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
/// let mut image = vec![0xffu8; 4096];                 // say, a flash image
/// image[1024..1024 + block.len()].copy_from_slice(&block);
/// let part = Window::new(&image[..], 1024, 4096 - 1024);
/// let mut prefix = [0u8; 512];
/// // The partition goes on past the block: check it as embedded.
/// let model = source::Options::new().embedded().open(part, &mut prefix).unwrap();
/// assert_eq!(model.block_len(), block.len() as u64);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Window<S> {
    source: S,
    start: u64,
    len: u64,
}

impl<S> Window<S> {
    /// The bytes `start..start + len` of `source`.
    #[must_use]
    pub const fn new(source: S, start: u64, len: u64) -> Self {
        Window { source, start, len }
    }

    /// The inner source.
    pub fn into_inner(self) -> S {
        self.source
    }
}

impl<S> Window<S> {
    /// The inner source's offset of a read of `n` bytes at `offset`, if the
    /// read lies inside the window.
    fn at<E>(&self, offset: u64, n: usize) -> Result<u64, ReadError<E>> {
        let end = offset.checked_add(u64_from(n)).ok_or(ReadError::OutOfBounds)?;
        if end > self.len {
            return Err(ReadError::OutOfBounds);
        }
        self.start.checked_add(offset).ok_or(ReadError::OutOfBounds)
    }
}

impl<S: ReadAt> ReadAt for Window<S> {
    type Error = ReadError<S::Error>;
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        let at = self.at(offset, buf.len())?;
        self.source.read_at(at, buf).map_err(ReadError::Source)
    }
    fn len(&mut self) -> Result<u64, Self::Error> {
        Ok(self.len)
    }
}

impl<S: AsyncReadAt> AsyncReadAt for Window<S> {
    type Error = ReadError<S::Error>;
    async fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        let at = self.at(offset, buf.len())?;
        self.source.read_at(at, buf).await.map_err(ReadError::Source)
    }
    async fn len(&mut self) -> Result<u64, Self::Error> {
        Ok(self.len)
    }
}

/// Why a ranged read failed: the source, the format, or the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SourceError<E> {
    /// The source could not read.
    Read(E),
    /// The bytes break a rule of the format: code, offset (from the start
    /// of the source) and rule, as [`Parser`] reports them.
    Kiln(Error),
    /// A caller buffer is too short: the prefix buffer (for the directory
    /// prefix, at least 64 bytes), the output buffer, or an empty chunk buffer.
    BufferTooSmall {
        /// Bytes the buffer needs.
        needed: u64,
    },
    /// No tensor has that name or index.
    NoSuchTensor,
    /// The row range is reversed or reaches past the first dimension.
    RowRange,
    /// The rows cannot be read as bytes: a scalar has none; packed rows must
    /// start and end on a byte boundary (or end with the tensor); opaque
    /// rows must be whole blocks.
    RowsUnaligned,
}

impl<E> SourceError<E> {
    /// The format error, when that is what this is.
    pub fn kiln(&self) -> Option<Error> {
        match self {
            SourceError::Kiln(e) => Some(*e),
            _ => None,
        }
    }

    /// The source's error, when that is what this is.
    pub fn read_error(&self) -> Option<&E> {
        match self {
            SourceError::Read(e) => Some(e),
            _ => None,
        }
    }
}

impl<E> From<Error> for SourceError<E> {
    fn from(e: Error) -> Self {
        SourceError::Kiln(e)
    }
}

impl<E> From<kiln_nostd::Error> for SourceError<E> {
    fn from(e: kiln_nostd::Error) -> Self {
        SourceError::Kiln(e.into())
    }
}

impl<E: fmt::Display> fmt::Display for SourceError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::Read(e) => write!(f, "read failed: {e}"),
            SourceError::Kiln(e) => e.fmt(f),
            SourceError::BufferTooSmall { needed } => write!(f, "the buffer is too small: {needed} bytes needed"),
            SourceError::NoSuchTensor => f.write_str("no tensor has that name or index"),
            SourceError::RowRange => f.write_str("the row range is outside the tensor's first dimension"),
            SourceError::RowsUnaligned => f.write_str("these rows do not start and end on byte or block boundaries"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> core::error::Error for SourceError<E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            SourceError::Kiln(e) => Some(e),
            _ => None,
        }
    }
}

/// Which tensor: its position in descriptor order, or its name.
/// `usize`, `&str` and [`Tensor`] convert into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorId<'n> {
    /// Position in descriptor order.
    Index(usize),
    /// Name (a linear scan; for many lookups build a
    /// [`NameIndex`](kiln_nostd::directory::NameIndex) over [`Opened::directory`] and pass indexes).
    Name(&'n str),
}

impl From<usize> for TensorId<'_> {
    fn from(i: usize) -> Self {
        TensorId::Index(i)
    }
}

impl<'n> From<&'n str> for TensorId<'n> {
    fn from(name: &'n str) -> Self {
        TensorId::Name(name)
    }
}

impl From<Tensor<'_>> for TensorId<'_> {
    fn from(t: Tensor<'_>) -> Self {
        TensorId::Index(t.index())
    }
}

impl From<&Tensor<'_>> for TensorId<'_> {
    fn from(t: &Tensor<'_>) -> Self {
        TensorId::Index(t.index())
    }
}

/// How [`open`] and [`verify`] read: the [`Parser`] (caps, name scratch,
/// hash seed), and whether the source may continue past the block. The free
/// functions use the defaults.
///
/// ```
/// use kiln_model::source::Options;
/// use kiln_nostd::{Limits, Parser};
/// # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
/// let mut names = [0u32; 64];
/// let mut prefix = [0u8; 512];
/// let model = Options::new()
///     .parser(Parser::new().limits(Limits::DEFAULT.with_count_cap(1024)).scratch(&mut names))
///     .open(&block[..], &mut prefix)
///     .unwrap();
/// assert_eq!(model.directory().len(), 1);
/// ```
#[derive(Debug)]
pub struct Options<'s> {
    /// The caps, name scratch and hash seed: one [`Parser`], declared once.
    parser: Parser<'s>,
    embedded: bool,
    coalesce: u64,
    /// The digest table [`verify`] checks the payloads against.
    #[cfg(feature = "sha2")]
    digests: Option<&'s [u8]>,
    /// [`verify_model`](Options::verify_model) skips step 9d.
    #[cfg(feature = "sha2")]
    skip_digests: bool,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options::new()
    }
}

impl<'s> Options<'s> {
    /// A standalone block, default caps, no scratch, reads merged across
    /// up to 256 unneeded bytes.
    #[must_use]
    pub const fn new() -> Self {
        Options {
            parser: Parser::new(),
            embedded: false,
            coalesce: 256,
            #[cfg(feature = "sha2")]
            digests: None,
            #[cfg(feature = "sha2")]
            skip_digests: false,
        }
    }

    /// Reads with `parser`'s caps, name scratch and hash seed (the verdict
    /// is that parser's on the same bytes).
    #[must_use]
    pub fn parser(mut self, parser: Parser<'s>) -> Self {
        self.parser = parser;
        self
    }

    /// The source may continue past the block (step 12 does not apply): the
    /// verdict is [`Parser::parse_at`]`(source, 0)`'s.
    #[must_use]
    pub const fn embedded(mut self) -> Self {
        self.embedded = true;
        self
    }

    /// [`verify`] reads one span rather than two when at most `bytes` bytes
    /// that no rule reads lie between two runs of bytes that one does (fewer,
    /// larger reads; a span never exceeds the chunk buffer). Default 256;
    /// 0 reads only needed bytes.
    #[must_use]
    pub const fn coalesce(mut self, bytes: u64) -> Self {
        self.coalesce = bytes;
        self
    }

    /// [`verify`] also checks every tensor's payload against its SHA-256
    /// digest (step 9d of `spec/model-file.md`; `sha2` feature): `table` is
    /// the digest table's bytes, 32 per tensor in descriptor order, checked
    /// by the caller to hold one per tensor (a table of another length is
    /// [`DigestTableCount`](kiln_nostd::Rule::DigestTableCount) at offset
    /// 0, once the header is read).
    /// `verify` then reads every payload byte of the canonical run (the
    /// tensors in descriptor order while each sits at its greedy offset),
    /// through the same chunk buffer, and its verdict is
    /// `kiln_model::check_block_digests`'s
    /// on the whole source (with step 12 after it for a standalone block):
    /// a mismatch is DIGEST at the tensor's first payload byte, and it wins
    /// over the gap, element, placement and trailing faults of steps 10 to
    /// 12. [`open`](Self::open) reads no payload and ignores the table.
    ///
    /// ```
    /// use kiln_model::source::Options;
    /// use kiln_nostd::{digest, Parser};
    /// # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
    /// let dir = Parser::new().parse(&block).unwrap();
    /// let mut table = [0u8; 32]; // one tensor
    /// table.copy_from_slice(&digest::sha256(dir.get(0).unwrap().bytes()));
    /// let (mut prefix, mut chunk) = ([0u8; 512], [0u8; 64]);
    /// assert!(Options::new().digests(&table).verify(&block[..], &mut prefix, &mut chunk).is_ok());
    /// table[0] ^= 1;
    /// let err = Options::new().digests(&table).verify(&block[..], &mut prefix, &mut chunk).unwrap_err();
    /// assert_eq!(err.kiln().map(|e| e.code()), Some(kiln_nostd::ErrorCode::Digest));
    /// ```
    #[cfg(feature = "sha2")]
    #[must_use]
    pub const fn digests(mut self, table: &'s [u8]) -> Self {
        self.digests = Some(table);
        self
    }

    /// [`verify_model`](Self::verify_model) does not hash the payloads
    /// (step 9d is skipped, and nothing else): for a caller that trusts
    /// them, or checks them another way. Every other rule still holds.
    #[cfg(feature = "sha2")]
    #[must_use]
    pub const fn skip_digests(mut self) -> Self {
        self.skip_digests = true;
        self
    }

    /// These options without a digest table (the block alone).
    #[cfg(feature = "sha2")]
    pub(crate) fn no_table(mut self) -> Self {
        self.digests = None;
        self
    }

    /// Fully validates the **model file** in `source` (`spec/model-file.md`;
    /// `sha2` feature), its digests included, through one chunk buffer: the
    /// frame and the fields before the block (metadata, `shard`, the digest
    /// table, step 3d), then the block as [`verify`](Self::verify) checks
    /// it, with step 9d against the file's own table (unless
    /// [`skip_digests`](Self::skip_digests)), then TRAILING. A source that
    /// does not start like a model file ([`model::is_model_file`](crate::is_model_file))
    /// is checked as a standalone directory block, so the verdict is
    /// [`Model::parse_verified`](crate::Model::parse_verified)'s (or
    /// [`model::parse_any`](crate::parse_any)'s) on the whole source:
    /// the same code, rule and offset (from the start of the source; a
    /// DIGEST fault is at the mismatched tensor's first payload byte).
    /// [`digests`](Self::digests) and [`embedded`](Self::embedded) are
    /// ignored (a model file is standalone and carries its table).
    ///
    /// Memory: `prefix` first receives the file's first `prefix.len()`
    /// bytes (one read) and must hold the fields before the block plus the
    /// block's 64-byte header; the digest table (32 bytes per tensor) then
    /// moves to its front and the block's directory prefix is read after
    /// it. Too short is [`SourceError::BufferTooSmall`] with the bytes
    /// needed (the larger of the two; the source's length when a length
    /// word before the block runs past it: then the whole file). The
    /// payloads stream through `chunk` (any nonzero length; a tensor may
    /// span chunks); the SHA-256 state lives on the stack.
    ///
    /// ```
    /// use kiln_model::{source::Options, Kind};
    /// use kiln_nostd::ErrorCode;
    /// # let file = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/digits-mlp.model.kiln"));
    /// let (mut prefix, mut chunk) = ([0u8; 8192], [0u8; 64]);
    /// let ok = Options::new().verify_model(&file[..], &mut prefix, &mut chunk).unwrap();
    /// assert_eq!((ok.kind, ok.digests_checked), (Some(Kind::Digests), true));
    ///
    /// let mut bad = file.to_vec();
    /// let at = bad.len() - 1; // the last payload byte
    /// bad[at] ^= 1;
    /// let err = Options::new().verify_model(&bad[..], &mut prefix, &mut chunk).unwrap_err();
    /// assert_eq!(err.kiln().map(|e| e.code()), Some(ErrorCode::Digest));
    /// assert!(Options::new().skip_digests().verify_model(&bad[..], &mut prefix, &mut chunk).is_ok());
    /// ```
    #[cfg(feature = "sha2")]
    pub fn verify_model<S: ReadAt>(
        self,
        source: S,
        prefix: &mut [u8],
        chunk: &mut [u8],
    ) -> Result<ModelSummary, SourceError<S::Error>> {
        model::blocking::run(self, source, prefix, chunk)
    }

    /// [`open`] with these options.
    pub fn open<'b, S: ReadAt>(self, source: S, prefix: &'b mut [u8]) -> Result<Opened<'b>, SourceError<S::Error>> {
        read::blocking::open(self, source, prefix)
    }

    /// [`verify`] with these options.
    pub fn verify<S: ReadAt>(
        self,
        source: S,
        prefix: &mut [u8],
        chunk: &mut [u8],
    ) -> Result<Summary, SourceError<S::Error>> {
        verify::blocking::run(self, source, prefix, chunk)
    }
}

/// A directory read from a source by [`open`]: the checked tensor table,
/// kept in the caller's prefix buffer. Payload bytes stay in the source;
/// [`read_tensor`] and [`read_rows`] fetch them.
#[derive(Clone, Copy, Debug)]
pub struct Opened<'b> {
    /// The directory prefix, header to payload base.
    prefix: &'b [u8],
    dir: Directory<'b>,
    payload_base: u64,
    block_len: u64,
}

impl<'b> Opened<'b> {
    /// The tensor table: names, dtypes, shapes, offsets, quantization.
    /// Its tensors' [`bytes`](Tensor::bytes) are empty (the payload is in
    /// the source); their [`absolute_offset`](Tensor::absolute_offset) is
    /// the source offset of the payload.
    pub fn directory(&self) -> Directory<'b> {
        self.dir
    }

    /// The checked header.
    pub fn header(&self) -> &Header {
        self.dir.header()
    }

    /// Where the payload region starts in the source (the prefix length).
    pub fn payload_base(&self) -> u64 {
        self.payload_base
    }

    /// The block's length in bytes.
    pub fn block_len(&self) -> u64 {
        self.block_len
    }

    /// A tensor by index or name.
    pub fn tensor<'n>(&self, id: impl Into<TensorId<'n>>) -> Option<Tensor<'b>> {
        self.resolve(id.into()).map(|(t, _)| t)
    }

    /// Where a tensor's payload lies in the source.
    pub fn payload_range<'n>(&self, id: impl Into<TensorId<'n>>) -> Option<Range<u64>> {
        let (_, raw) = self.resolve(id.into())?;
        let start = self.payload_base.saturating_add(raw.byte_offset());
        Some(start..start.saturating_add(raw.byte_length()))
    }

    fn resolve(&self, id: TensorId<'_>) -> Option<(Tensor<'b>, &'b RawDescriptor)> {
        let i = match id {
            TensorId::Index(i) => i,
            TensorId::Name(name) => self.dir.find(name)?.index(),
        };
        let t = self.dir.get(i)?;
        let end = HEADER_LEN.saturating_add(self.dir.len().saturating_mul(DESCRIPTOR_LEN));
        // Fallback not taken: the descriptors of a checked prefix are all in it.
        let raws = RawDescriptor::slice(self.prefix.get(HEADER_LEN..end).unwrap_or(&[]));
        Some((t, raws.get(i)?))
    }
}

/// Opens a standalone block from `source` with the default [`Options`]:
/// reads the header and the directory prefix into `prefix` (it needs
/// [`Incremental::prefix_len`](kiln_nostd::Incremental::prefix_len) bytes: 64 + 128 per tensor + the name heap,
/// rounded up to 64; too few is [`SourceError::BufferTooSmall`] with the
/// number) and checks every rule the prefix decides. See the
/// [module documentation](self) for what is left to [`read_tensor`] and [`verify`].
pub fn open<'b, S: ReadAt>(source: S, prefix: &'b mut [u8]) -> Result<Opened<'b>, SourceError<S::Error>> {
    Options::new().open(source, prefix)
}

/// Fully validates the block in `source` (standalone: the source's length is
/// the block's) through one chunk buffer of any nonzero length, reading only
/// the bytes a rule reads. The verdict is [`Parser::parse`](kiln_nostd::Parser::parse)'s
/// on the whole source: the same code, offset and rule; a `prefix` shorter
/// than the directory prefix is [`SourceError::BufferTooSmall`] instead.
/// See [`Options`] for caps, scratch and embedded blocks.
pub fn verify<S: ReadAt>(source: S, prefix: &mut [u8], chunk: &mut [u8]) -> Result<Summary, SourceError<S::Error>> {
    Options::new().verify(source, prefix, chunk)
}

/// Copies a tensor's payload (its wire bytes, little-endian) from `source`
/// into the front of `out` with one read, and returns its length. The
/// copied bytes are checked as `Parser` checks them (bool bytes 0 or 1, the
/// high nibble past an odd packed tensor zero); a fault is
/// [`SourceError::Kiln`] with the byte's offset in the source.
pub fn read_tensor<'n, S: ReadAt>(
    source: S,
    opened: &Opened<'_>,
    tensor: impl Into<TensorId<'n>>,
    out: &mut [u8],
) -> Result<usize, SourceError<S::Error>> {
    read::blocking::read_tensor(source, opened, tensor.into(), out)
}

/// Copies rows `rows` of a tensor (along dimension 0) into the front of
/// `out` with one read, and returns the byte count. A row is the product of
/// the other dimensions in elements (`width` bytes each), so rows `a..b`
/// are bytes `a * row..b * row` of the payload.
///
/// Packed dtypes (i4, u4, e2m1) are refused ([`SourceError::RowsUnaligned`])
/// unless the range starts on a byte boundary and ends on one or at the
/// tensor's end (always so when a row has an even number of elements);
/// opaque dtypes unless `byte_length` divides into equal rows of whole
/// blocks; a scalar has no rows. The copied bytes are checked as in
/// [`read_tensor`] (an odd packed tensor's last nibble when the range ends
/// with the tensor).
pub fn read_rows<'n, S: ReadAt>(
    source: S,
    opened: &Opened<'_>,
    tensor: impl Into<TensorId<'n>>,
    rows: Range<u64>,
    out: &mut [u8],
) -> Result<usize, SourceError<S::Error>> {
    read::blocking::read_rows(source, opened, tensor.into(), rows, out)
}

/// The payload bytes (tensor-relative) of rows `rows`, or why there are none.
fn row_span<E>(raw: &RawDescriptor, rows: Range<u64>) -> Result<Range<u64>, SourceError<E>> {
    if raw.rank() == 0 {
        return Err(SourceError::RowsUnaligned);
    }
    let dim0 = raw.slot(0);
    if rows.start > rows.end || rows.end > dim0 {
        return Err(SourceError::RowRange);
    }
    let len = raw.byte_length();
    // Elements per row; the count was checked not to overflow.
    let per_row = raw.element_count().unwrap_or(0).checked_div(dim0).unwrap_or(0);
    let unaligned = SourceError::RowsUnaligned;
    let span = match raw.dtype().map(DType::width) {
        Some(Width::Bytes(w)) => {
            let row = per_row.saturating_mul(u64::from(w));
            rows.start.saturating_mul(row)..rows.end.saturating_mul(row)
        }
        Some(Width::Nibble) => {
            let (a, b) = (rows.start.saturating_mul(per_row), rows.end.saturating_mul(per_row));
            let end = if b % 2 == 0 {
                b / 2
            } else if rows.end == dim0 {
                len
            } else {
                return Err(unaligned);
            };
            if a % 2 != 0 {
                return Err(unaligned);
            }
            a / 2..end
        }
        Some(Width::Opaque) => {
            // Fallback: a zero dim0 means an empty tensor (len 0), which row 0 describes.
            let row = len.checked_div(dim0).unwrap_or(0);
            let whole_rows = row.saturating_mul(dim0) == len;
            let whole_blocks = row.checked_rem(u64::from(raw.block_size())).is_some_and(|r| r == 0);
            if !(whole_rows && whole_blocks) {
                return Err(unaligned);
            }
            rows.start.saturating_mul(row)..rows.end.saturating_mul(row)
        }
        None => return Err(unaligned),
    };
    Ok(span)
}
