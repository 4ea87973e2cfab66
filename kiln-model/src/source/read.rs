//! [`open`](super::open), [`read_tensor`](super::read_tensor) and
//! [`read_rows`](super::read_rows),
//! written once and compiled twice by `read_fns!`: over [`ReadAt`] in
//! `blocking`, over [`AsyncReadAt`] in `nonblocking` (see `ready!` in the
//! parent module).

use core::ops::Range;
use kiln_nostd::Rule as CoreRule;

use super::{row_span, AsyncReadAt, Opened, Options, ReadAt, SourceError, TensorId};
use crate::bytes::{u64_from, usize_from, usize_sat};
use crate::descriptor::{self, RawDescriptor};
use crate::dtype::DType;
use crate::error::Error;
use crate::header::{Header, Regions, HEADER_LEN};
use crate::steps::{check_prefix_of, PrefixVerdict};
use kiln_nostd::Directory;

/// The functions of this module over the source trait `$Source`, each
/// source call wrapped in `$io!` (`ready!` or `wait!`), `async` if given.
macro_rules! read_fns {
    ($Source:ident, $io:ident $(, $async:tt)?) => {
        /// [`Options::open`]: the header, then the directory prefix, each in one read.
        pub(in crate::source) $($async)? fn open<'b, S: $Source>(
            options: Options<'_>,
            mut source: S,
            prefix: &'b mut [u8],
        ) -> Result<Opened<'b>, SourceError<S::Error>> {
            let Options { parser, embedded, .. } = options;
            let (limits, scratch, seed) = parser.into_parts();
            if prefix.len() < HEADER_LEN {
                return Err(SourceError::BufferTooSmall { needed: u64_from(HEADER_LEN) });
            }
            let len = $io!(source.len()).map_err(SourceError::Read)?;
            // Steps 1 to 6 from the header and the source's length.
            let head = prefix.get_mut(..usize_from(len).map_or(HEADER_LEN, |n| n.min(HEADER_LEN))).unwrap_or(&mut []);
            if !head.is_empty() {
                $io!(source.read_at(0, head)).map_err(SourceError::Read)?;
            }
            let header = Header::parse(head)?;
            let (heap_end, base, block_len) = header.check_extent(&limits, len)?;
            // The prefix, in one read.
            let mem = usize_from(base).and_then(|b| prefix.get_mut(..b));
            let Some(mem) = mem else { return Err(SourceError::BufferTooSmall { needed: base }) };
            if let Some(rest) = mem.get_mut(HEADER_LEN..).filter(|r| !r.is_empty()) {
                $io!(source.read_at(u64_from(HEADER_LEN), rest)).map_err(SourceError::Read)?;
            }
            let mem: &[u8] = mem;
            // Both ends are at most `base`, a usize.
            let regions = Regions {
                heap_end: usize_from(heap_end).unwrap_or(0),
                payload_base: mem.len(),
                block_len: usize_sat(block_len),
            };
            // Steps 7 to 11 as far as the prefix decides them: what the
            // incremental validator checks once its prefix is in, with the
            // placement and quantization faults it defers made final.
            match check_prefix_of(mem, &header, regions, scratch, seed)?.1 {
                PrefixVerdict::Clean(_) => {}
                PrefixVerdict::Certain(e) | PrefixVerdict::Misplaced(_, e) | PrefixVerdict::Quant(_, e) => {
                    return Err(SourceError::Kiln(e.into()))
                }
            }
            if !embedded && len > block_len {
                return Err(SourceError::Kiln(Error::at(CoreRule::TrailingBytes, block_len)));
            }
            Ok(Opened {
                prefix: mem,
                dir: Directory::from_checked_prefix(mem, header, regions),
                payload_base: base,
                block_len,
            })
        }

        /// [`read_tensor`](crate::source::read_tensor): the whole payload.
        pub(in crate::source) $($async)? fn read_tensor<S: $Source>(
            source: S,
            opened: &Opened<'_>,
            tensor: TensorId<'_>,
            out: &mut [u8],
        ) -> Result<usize, SourceError<S::Error>> {
            let (_, raw) = opened.resolve(tensor).ok_or(SourceError::NoSuchTensor)?;
            $io!(read_span(source, opened, raw, 0, raw.byte_length(), out))
        }

        /// [`read_rows`](crate::source::read_rows): the payload bytes of rows `rows`.
        pub(in crate::source) $($async)? fn read_rows<S: $Source>(
            source: S,
            opened: &Opened<'_>,
            tensor: TensorId<'_>,
            rows: Range<u64>,
            out: &mut [u8],
        ) -> Result<usize, SourceError<S::Error>> {
            let (_, raw) = opened.resolve(tensor).ok_or(SourceError::NoSuchTensor)?;
            let span = row_span(raw, rows)?;
            $io!(read_span(source, opened, raw, span.start, span.end, out))
        }

        /// Reads payload bytes `from..to` of one tensor and checks them.
        $($async)? fn read_span<S: $Source>(
            mut source: S,
            opened: &Opened<'_>,
            raw: &RawDescriptor,
            from: u64,
            to: u64,
            out: &mut [u8],
        ) -> Result<usize, SourceError<S::Error>> {
            let needed = to.saturating_sub(from);
            let dst = usize_from(needed).and_then(|n| out.get_mut(..n)).ok_or(SourceError::BufferTooSmall { needed })?;
            let at = opened.payload_base.saturating_add(raw.byte_offset()).saturating_add(from);
            if !dst.is_empty() {
                $io!(source.read_at(at, dst)).map_err(SourceError::Read)?;
            }
            // Bool bytes anywhere; a packed tail only where the tensor ends.
            if raw.dtype() == Some(DType::Bool) || to == raw.byte_length() {
                descriptor::check_elements(raw, dst, at)?;
            }
            Ok(dst.len())
        }
    };
}

/// Over [`ReadAt`].
pub(super) mod blocking {
    use super::*;
    read_fns!(ReadAt, ready);
}

/// Over [`AsyncReadAt`].
pub(super) mod nonblocking {
    use super::*;
    read_fns!(AsyncReadAt, wait, async);
}
