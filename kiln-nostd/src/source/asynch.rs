//! Ranged reading under an async executor (Embassy's, say): [`AsyncReadAt`]
//! and the async forms of [`open`](super::open), [`read_tensor`](super::read_tensor),
//! [`read_rows`](super::read_rows), [`verify`](super::verify) and
//! [`Options::verify_model`].
//!
//! Each runs the code of its blocking form: the body is written once and
//! compiled twice (`read_fns!`, `verify_fns!`, `model_fns!`), over
//! [`ReadAt`] with plain calls and over [`AsyncReadAt`] with every source
//! call awaited. So both forms make the same reads, in the same order, and
//! give the same verdict (code, rule, offset), the same read error and the
//! same buffer sizes. The blocking forms are not built on the async ones:
//! their code and stack stay those of plain functions.

use core::ops::Range;

#[cfg(feature = "sha2")]
use super::{model, ModelSummary};
use super::{read, verify, Opened, Options, OutOfBounds, ReadAt, ReadError, SourceError, TensorId, Window};
use crate::incremental::Summary;

/// Bytes at an offset, read asynchronously: [`ReadAt`] for a source whose
/// reads complete later (a flash behind DMA, an SD card, a network range
/// request), driven by any executor.
///
/// Implemented for `&[u8]`, for `&mut` of any source, for [`Window`], for
/// [`Ready`] (any blocking [`ReadAt`]), and behind features for async NOR
/// flash
// Linked only where the feature builds the item, so docs without it have no broken link.
#[cfg_attr(feature = "embedded-storage-async", doc = "([`AsyncFlash`](super::AsyncFlash), `embedded-storage-async`)")]
#[cfg_attr(not(feature = "embedded-storage-async"), doc = "(`AsyncFlash`, `embedded-storage-async`)")]
/// and async seekable readers
#[cfg_attr(feature = "embedded-io-async", doc = "([`AsyncIo`](super::AsyncIo), `embedded-io-async`).")]
#[cfg_attr(not(feature = "embedded-io-async"), doc = "(`AsyncIo`, `embedded-io-async`).")]
///
/// ```
/// use kiln_nostd::source::{self, AsyncReadAt, OutOfBounds};
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

impl<'s> Options<'s> {
    /// [`open`](Self::open) from an async source: the same reads and checks,
    /// each read awaited.
    pub async fn open_async<'b, S: AsyncReadAt>(
        self,
        source: S,
        prefix: &'b mut [u8],
    ) -> Result<Opened<'b>, SourceError<S::Error>> {
        read::nonblocking::open(self, source, prefix).await
    }

    /// [`verify`](Self::verify) from an async source: the same reads and
    /// verdict, each read awaited.
    pub async fn verify_async<S: AsyncReadAt>(
        self,
        source: S,
        prefix: &mut [u8],
        chunk: &mut [u8],
    ) -> Result<Summary, SourceError<S::Error>> {
        verify::nonblocking::run(self, source, prefix, chunk).await
    }

    /// [`verify_model`](Self::verify_model) from an async source (`sha2`
    /// feature): the same reads and verdict, each read awaited.
    #[cfg(feature = "sha2")]
    pub async fn verify_model_async<S: AsyncReadAt>(
        self,
        source: S,
        prefix: &mut [u8],
        chunk: &mut [u8],
    ) -> Result<ModelSummary, SourceError<S::Error>> {
        model::nonblocking::run(self, source, prefix, chunk).await
    }
}

/// [`open`](super::open) from an async source, with the default [`Options`].
pub async fn open_async<'b, S: AsyncReadAt>(
    source: S,
    prefix: &'b mut [u8],
) -> Result<Opened<'b>, SourceError<S::Error>> {
    Options::new().open_async(source, prefix).await
}

/// [`verify`](super::verify) from an async source, with the default [`Options`].
pub async fn verify_async<S: AsyncReadAt>(
    source: S,
    prefix: &mut [u8],
    chunk: &mut [u8],
) -> Result<Summary, SourceError<S::Error>> {
    Options::new().verify_async(source, prefix, chunk).await
}

/// [`read_tensor`](super::read_tensor) from an async source: one read, the
/// same checks.
pub async fn read_tensor_async<'n, S: AsyncReadAt>(
    source: S,
    opened: &Opened<'_>,
    tensor: impl Into<TensorId<'n>>,
    out: &mut [u8],
) -> Result<usize, SourceError<S::Error>> {
    read::nonblocking::read_tensor(source, opened, tensor.into(), out).await
}

/// [`read_rows`](super::read_rows) from an async source: one read, the same
/// checks and refusals.
pub async fn read_rows_async<'n, S: AsyncReadAt>(
    source: S,
    opened: &Opened<'_>,
    tensor: impl Into<TensorId<'n>>,
    rows: Range<u64>,
    out: &mut [u8],
) -> Result<usize, SourceError<S::Error>> {
    read::nonblocking::read_rows(source, opened, tensor.into(), rows, out).await
}
