//! Checking a standalone tensor directory block as it streams in, from
//! standard input (`kiln validate -`, `kiln inspect -`) or any other pipe:
//! memory is the directory prefix (header, descriptors, name heap), its name
//! table and one fixed chunk, never the payload.
//!
//! The verdict is [`kiln_nostd::Incremental`]'s, which is exactly the one
//! [`Parser`](kiln_nostd::Parser) gives on all the bytes read, so `kiln
//! validate -` and `kiln validate FILE` agree on the same bytes (code, offset
//! and rule). The stream is always read to its end: a block that is certainly
//! rejected may still turn out to be truncated, and EOF comes first in the
//! spec's check order.

use std::io::{self, Read};

use kiln_model::Error;
use kiln_nostd::wire::header::HEADER_LEN;
use kiln_nostd::{wire::Header, Directory, Incremental, Limits};
use memmap2::MmapMut;

/// Bytes read from the stream at a time.
pub const CHUNK: usize = 64 * 1024;

/// The largest directory prefix held in memory: 4 GiB. With the default caps
/// a prefix is at most 64 + 16,777,216 * 128 + 16,777,216 bytes (about
/// 2.02 GiB), so only raised caps can reach it; a longer prefix is LIMIT
/// (`PrefixBufferTooSmall`) on a stream, where a file would be checked.
pub const MAX_PREFIX: u64 = 1 << 32;

/// What [`check`] found.
pub struct Streamed<T> {
    /// Accepted, or the rejection: what `kiln validate FILE` says for the
    /// same bytes.
    pub verdict: Result<(), Error>,
    /// What `on_directory` made of the tensor table, when the directory
    /// prefix arrived and was valid.
    pub directory: Option<T>,
}

/// Memory for the directory prefix.
enum Prefix {
    /// Anonymous pages, zeroed by the kernel on first touch: a header that
    /// promises a large directory costs address space, not memory, until
    /// its bytes actually arrive.
    Mapped(MmapMut),
    /// Room for the header only: the header is rejected, the stream is too
    /// short to hold one, or the prefix is too large to map (the block is
    /// then LIMIT, or EOF if the stream ends inside the directory).
    Header([u8; HEADER_LEN]),
}

impl Prefix {
    /// Memory for a prefix of `len` bytes, as [`Incremental::prefix_len`] gives it.
    fn new(len: usize) -> Prefix {
        let mapped = u64::try_from(len).is_ok_and(|n| n <= MAX_PREFIX).then(|| MmapMut::map_anon(len).ok()).flatten();
        mapped.map_or(Prefix::Header([0; HEADER_LEN]), Prefix::Mapped)
    }

    fn bytes(&mut self) -> &mut [u8] {
        match self {
            Prefix::Mapped(map) => map,
            Prefix::Header(bytes) => bytes,
        }
    }
}

/// Reads one standalone directory block from `reader` to the end of the
/// stream, [`CHUNK`] bytes at a time, and checks it with `limits` (names
/// hashed with `seed`). `on_directory` is called once, with the checked
/// tensor table (names, dtypes, shapes, offsets; no payload bytes), as soon
/// as the directory prefix is in and valid, before the payload streams past.
///
/// An `Err` is a read error of the stream; a rejected block is an `Ok` whose
/// verdict is the error.
pub fn check<R, T>(
    mut reader: R,
    limits: Limits,
    seed: u64,
    mut on_directory: impl FnMut(&Directory<'_>) -> T,
) -> io::Result<Streamed<T>>
where
    R: Read,
{
    let mut chunk = vec![0u8; CHUNK];
    // The header decides how much prefix memory the block needs.
    let mut filled = fill(&mut reader, chunk.get_mut(..HEADER_LEN).unwrap_or_default())?;
    let head = chunk.get(..filled).unwrap_or_default();
    let (mut prefix, count) = match Incremental::prefix_len(head, &limits) {
        Ok(Some(len)) => (Prefix::new(len), Header::peek_count(head)),
        // A rejected or short header: the verdict needs no prefix memory.
        _ => (Prefix::Header([0; HEADER_LEN]), None),
    };
    // Name scratch for the linear-time uniqueness check. It is allocated
    // zeroed (untouched pages until the check clears it, once the
    // descriptors arrived), and only with mapped prefix memory, which bounds
    // the count: 128 bytes of prefix per tensor, at most MAX_PREFIX.
    let mut scratch = match (&prefix, count) {
        (Prefix::Mapped(_), Some(count)) => vec![0u32; kiln_nostd::directory::scratch_len(count)],
        _ => Vec::new(),
    };
    let validator = Incremental::new(prefix.bytes()).limits(limits).hash_seed(seed);
    let mut validator = if scratch.is_empty() { validator } else { validator.scratch(&mut scratch) };
    let mut directory = None;
    while filled > 0 {
        // An error here is the verdict unless the stream ends early (then
        // it is EOF): keep reading, `finish` decides.
        let fed = validator.feed(chunk.get(..filled).unwrap_or_default());
        if fed.is_ok() && directory.is_none() {
            directory = validator.directory().map(|dir| on_directory(&dir));
        }
        filled = read_some(&mut reader, &mut chunk)?;
    }
    Ok(Streamed { verdict: validator.finish().map(|_| ()).map_err(Into::into), directory })
}

/// What the first bytes of a stream showed.
pub enum Sniffed<R> {
    /// A model file or manifest (spec/model-file.md), read into memory: its
    /// metadata must be parsed before its block, so it does not stream.
    Model(Vec<u8>),
    /// Anything else, with the bytes already read put back in front.
    Other(io::Chain<io::Cursor<Vec<u8>>, R>),
}

/// Reads up to the 16 bytes of a frame and tells a model file from anything else.
pub fn sniff_model<R: Read>(mut reader: R) -> io::Result<Sniffed<R>> {
    let mut head = vec![0u8; kiln_nostd::frozen::FRAME_LEN];
    let filled = fill(&mut reader, &mut head)?;
    head.truncate(filled);
    if kiln_model::Kind::of(&head).is_some() {
        reader.read_to_end(&mut head)?;
        return Ok(Sniffed::Model(head));
    }
    Ok(Sniffed::Other(io::Cursor::new(head).chain(reader)))
}

/// Reads until `buf` is full or the stream ends: the bytes read.
fn fill(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while let Some(rest) = buf.get_mut(filled..).filter(|r| !r.is_empty()) {
        match read_some(reader, rest)? {
            0 => break,
            n => filled = filled.saturating_add(n),
        }
    }
    Ok(filled)
}

/// One `read`, retried when interrupted by a signal; 0 at the end of the stream.
fn read_some(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_nostd::{DType, Parser, TensorSpec, Writer};

    /// Hands out at most `step` bytes per read, like a slow pipe.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    fn verdict(bytes: &[u8], step: usize) -> (Result<(), Error>, Option<usize>) {
        let s = check(Trickle { bytes, step }, Limits::DEFAULT, 7, |dir| dir.len()).expect("no read error");
        (s.verdict, s.directory)
    }

    fn block() -> Vec<u8> {
        let payload = [0u8; 3000];
        let specs = [
            TensorSpec::new(DType::U8, &[3000], &payload).named("a"),
            TensorSpec::new(DType::Bool, &[2], &[1, 0]).named("b"),
        ];
        let mut out = vec![0u8; Writer::new().encoded_len(&specs).expect("plannable")];
        Writer::new().write(&specs, &mut out).expect("valid");
        out
    }

    #[test]
    fn same_verdict_as_the_parser_for_every_truncation_and_step() {
        let good = block();
        let mut cases = vec![good.clone(), Vec::new(), b"KLN".to_vec(), b"GGUF and more".to_vec()];
        cases.extend([1usize, 63, 64, 200, 255, 256, 1000, good.len() - 1].map(|n| good[..n].to_vec()));
        let mut trailing = good.clone();
        trailing.push(0);
        let mut bad_bool = good.clone();
        *bad_bool.last_mut().expect("payload") = 2;
        let mut bad_version = good.clone();
        bad_version[4] = 9;
        cases.extend([trailing, bad_bool, bad_version]);
        for bytes in &cases {
            let want = Parser::new().parse(bytes).map(|_| ()).map_err(kiln_model::Error::from);
            for step in [1, 7, 64, CHUNK] {
                let (got, dir) = verdict(bytes, step);
                assert_eq!(got, want, "{} bytes in steps of {step}", bytes.len());
                if got.is_ok() {
                    assert_eq!(dir, Some(2));
                }
            }
        }
    }

    #[test]
    fn prefix_memory_follows_the_header() {
        assert!(matches!(Prefix::new(256), Prefix::Mapped(ref m) if m.len() == 256));
        assert!(matches!(Prefix::new(usize::MAX), Prefix::Header(_)));
        // A header that promises 16M tensors and then ends: EOF, not an allocation.
        let mut huge = kiln_nostd::wire::EMPTY_BLOCK;
        huge[8..12].copy_from_slice(&16_777_216u32.to_le_bytes());
        huge[24..32].copy_from_slice(&(16_777_216u64 * 128).to_le_bytes());
        let want = Parser::new().parse(&huge).map(|_| ()).map_err(kiln_model::Error::from);
        assert_eq!(verdict(&huge, CHUNK).0, want);
        assert_eq!(want.map_err(|e| e.code().as_str()), Err("EOF"));
    }
}
