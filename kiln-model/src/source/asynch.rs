//! Ranged reading under an async executor (Embassy's, say): the async forms
//! over [`AsyncReadAt`] of [`open`](super::open), [`read_tensor`](super::read_tensor),
//! [`read_rows`](super::read_rows), [`verify`](super::verify) and
//! [`Options::verify_model`].
//!
//! Each runs the code of its blocking form: the body is written once and
//! compiled twice (`read_fns!`, `verify_fns!`, `model_fns!`), over
//! [`ReadAt`](super::ReadAt) with plain calls and over [`AsyncReadAt`] with every source
//! call awaited. So both forms make the same reads, in the same order, and
//! give the same verdict (code, rule, offset), the same read error and the
//! same buffer sizes. The blocking forms are not built on the async ones:
//! their code and stack stay those of plain functions.

use core::ops::Range;

#[cfg(feature = "sha2")]
use super::{model, ModelSummary};
use super::{read, verify, AsyncReadAt, Opened, Options, SourceError, TensorId};
use crate::incremental::Summary;

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
