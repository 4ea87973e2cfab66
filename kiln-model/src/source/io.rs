//! [`Io`]: a [`ReadAt`] source over `embedded_io`'s seekable readers, and
//! [`AsyncIo`]: an [`AsyncReadAt`] source over `embedded_io_async`'s.

#[cfg(feature = "embedded-io")]
use embedded_io::{Read, ReadExactError, Seek, SeekFrom};

#[cfg(feature = "embedded-io-async")]
use super::AsyncReadAt;
#[cfg(feature = "embedded-io")]
use super::ReadAt;

/// A seekable reader ([`Read`] + [`Seek`]) as a source: each read seeks,
/// then reads exactly; the length is where [`SeekFrom::End`]`(0)` lands.
/// A reader that ends early reports [`ReadExactError::UnexpectedEof`].
///
/// ```
/// use embedded_io::{ErrorKind, ErrorType, Read, ReadExactError, Seek, SeekFrom};
/// use kiln_model::source::{self, Io, SourceError};
///
/// // A file on an SD card, say (here a cursor over memory).
/// struct Card<'a>(&'a [u8], u64);
/// impl ErrorType for Card<'_> {
///     type Error = ErrorKind;
/// }
/// impl Read for Card<'_> {
///     fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
///         let rest = self.0.get(self.1 as usize..).unwrap_or(&[]);
///         let n = rest.len().min(buf.len());
///         buf[..n].copy_from_slice(&rest[..n]);
///         self.1 += n as u64;
///         Ok(n)
///     }
/// }
/// impl Seek for Card<'_> {
///     fn seek(&mut self, pos: SeekFrom) -> Result<u64, ErrorKind> {
///         self.1 = match pos {
///             SeekFrom::Start(p) => p,
///             SeekFrom::End(d) => (self.0.len() as i64 + d) as u64,
///             SeekFrom::Current(d) => (self.1 as i64 + d) as u64,
///         };
///         Ok(self.1)
///     }
/// }
/// # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
/// let mut card = Io::new(Card(&block, 0));
/// let (mut prefix, mut chunk) = ([0u8; 512], [0u8; 64]);
/// source::verify(&mut card, &mut prefix, &mut chunk)?;
/// let model = source::open(&mut card, &mut prefix)?;
/// assert_eq!(model.tensor("w").map(|t| t.shape()[0]), Some(2));
/// # Ok::<(), SourceError<ReadExactError<ErrorKind>>>(())
/// ```
#[cfg(feature = "embedded-io")]
#[derive(Debug)]
pub struct Io<T>(T);

#[cfg(feature = "embedded-io")]
impl<T> Io<T> {
    /// Reads `reader`.
    #[must_use]
    pub const fn new(reader: T) -> Self {
        Io(reader)
    }

    /// The reader.
    pub fn into_inner(self) -> T {
        self.0
    }

    /// The reader, borrowed.
    pub fn inner(&mut self) -> &mut T {
        &mut self.0
    }
}

#[cfg(feature = "embedded-io")]
impl<T: Read + Seek> ReadAt for Io<T> {
    type Error = ReadExactError<T::Error>;

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        self.0.seek(SeekFrom::Start(offset))?;
        self.0.read_exact(buf)
    }

    fn len(&mut self) -> Result<u64, Self::Error> {
        Ok(self.0.seek(SeekFrom::End(0))?)
    }
}

/// An async seekable reader (`embedded_io_async`'s `Read` + `Seek`: a file
/// on an SD card behind an async driver, a socket with range requests) as an
/// [`AsyncReadAt`] source: as `Io` does, each read seeks, then reads exactly;
/// the length is where `SeekFrom::End(0)` lands; a reader that ends early
/// reports `ReadExactError::UnexpectedEof`.
///
/// ```
/// use embedded_io_async::{ErrorKind, ErrorType, Read, Seek, SeekFrom};
/// use kiln_model::source::{self, AsyncIo};
///
/// // A file on an SD card, say (here a cursor over memory).
/// struct Card<'a>(&'a [u8], u64);
/// impl ErrorType for Card<'_> {
///     type Error = ErrorKind;
/// }
/// impl Read for Card<'_> {
///     async fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
///         let rest = self.0.get(self.1 as usize..).unwrap_or(&[]);
///         let n = rest.len().min(buf.len());
///         buf[..n].copy_from_slice(&rest[..n]);
///         self.1 += n as u64;
///         Ok(n)
///     }
/// }
/// impl Seek for Card<'_> {
///     async fn seek(&mut self, pos: SeekFrom) -> Result<u64, ErrorKind> {
///         self.1 = match pos {
///             SeekFrom::Start(p) => p,
///             SeekFrom::End(d) => (self.0.len() as i64 + d) as u64,
///             SeekFrom::Current(d) => (self.1 as i64 + d) as u64,
///         };
///         Ok(self.1)
///     }
/// }
/// # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
/// let mut card = AsyncIo::new(Card(&block, 0));
/// let (mut prefix, mut chunk) = ([0u8; 512], [0u8; 64]);
/// embassy_futures::block_on(async {
///     source::verify_async(&mut card, &mut prefix, &mut chunk).await.unwrap();
///     let model = source::open_async(&mut card, &mut prefix).await.unwrap();
///     assert_eq!(model.tensor("w").map(|t| t.shape()[0]), Some(2));
/// });
/// ```
#[cfg(feature = "embedded-io-async")]
#[derive(Debug)]
pub struct AsyncIo<T>(T);

#[cfg(feature = "embedded-io-async")]
impl<T> AsyncIo<T> {
    /// Reads `reader`.
    #[must_use]
    pub const fn new(reader: T) -> Self {
        AsyncIo(reader)
    }

    /// The reader.
    pub fn into_inner(self) -> T {
        self.0
    }

    /// The reader, borrowed.
    pub fn inner(&mut self) -> &mut T {
        &mut self.0
    }
}

#[cfg(feature = "embedded-io-async")]
impl<T: embedded_io_async::Read + embedded_io_async::Seek> AsyncReadAt for AsyncIo<T> {
    type Error = embedded_io_async::ReadExactError<T::Error>;

    async fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        self.0.seek(embedded_io_async::SeekFrom::Start(offset)).await?;
        self.0.read_exact(buf).await
    }

    async fn len(&mut self) -> Result<u64, Self::Error> {
        Ok(self.0.seek(embedded_io_async::SeekFrom::End(0)).await?)
    }
}
