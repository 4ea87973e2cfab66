//! [`Options::verify_model`]: a model file (`spec/model-file.md`) checked
//! from a source through one chunk buffer, its digests included.

use super::{verify, AsyncReadAt, Options, ReadAt, SourceError};
use crate::bytes::{u64_from, usize_from};
use crate::error::{Error, ErrorCode};
use crate::header::HEADER_LEN;
use crate::incremental::{Incremental, Summary};
use crate::{head_of, Kind};

/// What [`Options::verify_model`] found in an accepted source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelSummary {
    /// The record type; `None` for a plain directory block (no frame).
    pub kind: Option<Kind>,
    /// Where the directory block starts in the source (0 for a plain block).
    pub block_start: u64,
    /// True when every tensor's payload was hashed and matched its digest
    /// (step 9d ran); false for a record without digests, a plain block,
    /// or with [`Options::skip_digests`].
    pub digests_checked: bool,
    /// The block's header and lengths.
    pub block: Summary,
}

/// The source from `start` on: the block of a model file, with the
/// source's own error type (a read past the end is the source's to refuse).
struct Rest<S> {
    source: S,
    start: u64,
    len: u64,
}

impl<S: ReadAt> ReadAt for Rest<S> {
    type Error = S::Error;
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), S::Error> {
        self.source.read_at(self.start.saturating_add(offset), buf)
    }
    fn len(&mut self) -> Result<u64, S::Error> {
        Ok(self.len)
    }
}

impl<S: AsyncReadAt> AsyncReadAt for Rest<S> {
    type Error = S::Error;
    async fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), S::Error> {
        self.source.read_at(self.start.saturating_add(offset), buf).await
    }
    async fn len(&mut self) -> Result<u64, S::Error> {
        Ok(self.len)
    }
}

/// [`Options::verify_model`] over the source trait `$Source`, each source
/// call wrapped in `$io!` (`ready!` or `wait!`), `async` if given, the block
/// checked by `verify`'s function of the same `$mode`: one body, compiled
/// into `blocking` and `nonblocking`.
macro_rules! model_fns {
    ($Source:ident, $mode:ident, $io:ident $(, $async:tt)?) => {
        pub(in crate::source) $($async)? fn run<S: $Source>(
            options: Options<'_>,
            mut source: S,
            prefix: &mut [u8],
            chunk: &mut [u8],
        ) -> Result<ModelSummary, SourceError<S::Error>> {
            if prefix.len() < HEADER_LEN {
                return Err(SourceError::BufferTooSmall { needed: u64_from(HEADER_LEN) });
            }
            let len = $io!(source.len()).map_err(SourceError::Read)?;
            let mut frame = [0u8; crate::frozen::FRAME_LEN];
            let framed = usize_from(len).is_some_and(|n| n >= frame.len());
            if framed {
                $io!(source.read_at(0, &mut frame)).map_err(SourceError::Read)?;
            }
            // A manifest too reads as a model file (`reads_as_model`): the record's verdict, SCHEMA at 8.
            let Some(kind) = Kind::of(&frame).filter(|_| framed) else {
                // Not a model file: a standalone directory block, as `model::parse_any` decides.
                let block = $io!(verify::$mode::run(options.no_table(), source, prefix, chunk))?;
                return Ok(ModelSummary { kind: None, block_start: 0, digests_checked: false, block });
            };
            // The fields before the block, from as much of the file as `prefix` holds.
            let n = usize_from(len).map_or(prefix.len(), |l| l.min(prefix.len()));
            let whole = u64_from(n) == len;
            let head = prefix.get_mut(..n).unwrap_or_default();
            $io!(source.read_at(0, head)).map_err(SourceError::Read)?;
            let (block_at, table) = match head_of(head, &options.parser.caps()) {
                Ok((_, block, table)) => (block, table.map(|t| (t.offset_of(0), t.len()))),
                Err(e) if e.code() == ErrorCode::Eof && !whole => {
                    // The fields do not fit `prefix`: walk their length words to say how much does.
                    let needed = $io!(needed_for(&mut source, kind, len, !options.skip_digests, &options.parser.caps()))
                        .map_err(SourceError::Read)?
                        .max(u64_from(n).saturating_add(1));
                    return Err(if needed > len { SourceError::Kiln(e) } else { SourceError::BufferTooSmall { needed } });
                }
                Err(e) => return Err(SourceError::Kiln(e)),
            };
            let block_start = u64_from(block_at);
            let header_end = block_at.saturating_add(HEADER_LEN);
            if header_end > n && !whole && u64_from(header_end) <= len {
                // Step 3d needs the block's header in `prefix`: say how much is needed in all.
                let needed = $io!(needed_for(&mut source, kind, len, !options.skip_digests, &options.parser.caps()))
                    .map_err(SourceError::Read)?
                    .max(u64_from(header_end));
                return Err(SourceError::BufferTooSmall { needed });
            }
            // The table moves to the front of `prefix`; the block's prefix goes after it.
            let table = table.filter(|_| !options.skip_digests);
            let hashing = table.is_some();
            let table_len = table.map_or(0, |(_, k)| k.saturating_mul(crate::digest::DIGEST_LEN));
            if let Some((at, _)) = table {
                // Forward, byte by byte: the table lies in `prefix`, at or after its front
                // (no copy_within: its bounds panic would stay in the code).
                for i in 0..table_len {
                    let byte = prefix.get(at.saturating_add(i)).copied();
                    if let Some((d, b)) = prefix.get_mut(i).zip(byte) {
                        *d = b;
                    }
                }
            }
            // Fallback not taken: the table was read into `prefix`, so it is no longer than it.
            let (table_buf, rest) = prefix.split_at_mut_checked(table_len).unwrap_or((&mut [], &mut []));
            let opts = if hashing { options.digests(table_buf) } else { options.no_table() };
            let block_source = Rest { source, start: block_start, len: len.saturating_sub(block_start) };
            match $io!(verify::$mode::run(opts, block_source, rest, chunk)) {
                Ok(block) => Ok(ModelSummary { kind: Some(kind), block_start, digests_checked: hashing, block }),
                Err(SourceError::Kiln(e)) => {
                    Err(SourceError::Kiln(Error::at(e.rule(), e.offset_u64().saturating_add(block_start))))
                }
                Err(SourceError::BufferTooSmall { needed }) => {
                    let needed = needed.saturating_add(u64_from(table_len)).max(u64_from(header_end));
                    Err(SourceError::BufferTooSmall { needed })
                }
                Err(e) => Err(e),
            }
        }

        /// How many bytes `prefix` needs for the model file in `source` (whose
        /// first 16 bytes are a `kind` frame): the fields before the block and the
        /// block's header, and the digest table (when `hashing`) with the block's
        /// directory prefix. Only a size: the rules are the checks' own, and a
        /// length word that runs past the source ends the walk at the source's
        /// length (a buffer that holds the whole file gets the verdict).
        $($async)? fn needed_for<S: $Source>(
            source: &mut S,
            kind: Kind,
            len: u64,
            hashing: bool,
            limits: &kiln_nostd::Limits,
        ) -> Result<u64, S::Error> {
            let mut word = $($async)? |at: u64| -> Result<Option<u64>, S::Error> {
                let mut w = [0u8; 4];
                if at.saturating_add(4) > len {
                    return Ok(None);
                }
                $io!(source.read_at(at, &mut w))?;
                Ok(Some(u64::from(u32::from_le_bytes(w))))
            };
            // Past the source (or a cap): the whole file is the most that can help.
            let run = |at: u64, n: u64| at.saturating_add(4).saturating_add(n);
            let mut at = u64_from(crate::frozen::FRAME_LEN);
            let Some(count) = $io!(word(at))?.filter(|&c| c <= u64::from(limits.count_cap)) else { return Ok(len) };
            at = at.saturating_add(4);
            for _ in 0..count.saturating_mul(2) {
                let Some(n) = $io!(word(at))? else { return Ok(len) };
                at = run(at, n);
            }
            if kind == Kind::Shard {
                let Some(n) = $io!(word(at))? else { return Ok(len) };
                at = run(at, n).saturating_add(8);
            }
            let mut table = 0;
            if matches!(kind, Kind::Digests | Kind::Shard) {
                let Some(n) = $io!(word(at))? else { return Ok(len) };
                at = run(at, n);
                table = if hashing { n } else { 0 };
            }
            let header_end = at.saturating_add(u64_from(HEADER_LEN));
            if header_end > len {
                return Ok(len);
            }
            let mut h = [0u8; HEADER_LEN];
            $io!(source.read_at(at, &mut h))?;
            let prefix = Incremental::prefix_len(&h, limits).ok().flatten().map_or(0, u64_from);
            Ok(header_end.max(table.saturating_add(prefix)).min(len))
        }
    };
}

/// Over [`ReadAt`].
pub(super) mod blocking {
    use super::*;
    model_fns!(ReadAt, blocking, ready);
}

/// Over [`AsyncReadAt`].
pub(super) mod nonblocking {
    use super::*;
    model_fns!(AsyncReadAt, nonblocking, wait, async);
}
