//! The output sink: payloads go from the input file to the output file
//! without passing through this process's memory where the kernel can do
//! it (`copy_file_range` on Linux, see [`platform::copy_range`]), in chunks
//! so the caller's [`Progress`] moves.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};

use anyhow::Context;

use kiln_nostd::int::{u64_from, usize_from};

use super::error::io_fail;
use super::model::{Source, TensorOut, Transposed};
use super::{Input, Progress};
use crate::platform;

const CHUNK: u64 = 64 << 20;
const ZEROS: [u8; 4096] = [0; 4096];

/// The output file being written, and the input files its payloads are copied from.
pub struct Sink<'a> {
    out: BufWriter<File>,
    inputs: &'a [Input],
    /// The open `.npz` archive and which input it is.
    zip: Option<(usize, zip::ZipArchive<&'a File>)>,
    progress: &'a dyn Progress,
    written: u64,
    /// OUT as given, for messages.
    out_name: String,
}

/// Reads buffered sources (byte-swapped, CRC-checked, compressed) from the input.
pub struct Pump<'a> {
    input: &'a File,
    zip: Option<zip::ZipArchive<&'a File>>,
    input_name: String,
}

impl<'a> Pump<'a> {
    /// A pump reading `input` (named `input_name` in messages).
    pub fn new(input: &'a File, input_name: String) -> Self {
        Pump { input, zip: None, input_name }
    }

    /// Reads `len` bytes at `offset` in chunks of at most `buf.len()`, handing each to `each`.
    fn read_chunks(
        &self,
        offset: u64,
        len: u64,
        buf: &mut [u8],
        each: &mut dyn FnMut(&mut [u8]) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let mut done = 0u64;
        while done < len {
            let n = usize_from(len.saturating_sub(done)).map_or(buf.len(), |left| left.min(buf.len()));
            let chunk = buf.get_mut(..n).unwrap_or_default();
            if chunk.is_empty() {
                anyhow::bail!("an empty copy buffer");
            }
            let at = offset.checked_add(done).ok_or_else(|| anyhow::anyhow!("a payload offset overflows"))?;
            self.read_at(chunk, at)?;
            each(chunk)?;
            done = done.saturating_add(u64_from(n));
        }
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> anyhow::Result<()> {
        platform::read_exact_at(self.input, buf, offset).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                anyhow::anyhow!("the input ended early at byte {offset} (it changed while being converted?)")
            } else {
                io_fail(format!("cannot read {}", self.input_name))(e)
            }
        })
    }

    /// Writes the `len` bytes of a buffered source to `out`, calling `step`
    /// with each chunk's length. File sources are not buffered (see [`Sink`]).
    pub fn run(
        &mut self,
        src: &Source,
        len: u64,
        out: &mut dyn Write,
        out_err: &dyn Fn(io::Error) -> anyhow::Error,
        step: &mut dyn FnMut(u64),
    ) -> anyhow::Result<()> {
        match src {
            Source::Bytes(b) => {
                out.write_all(b).map_err(out_err)?;
                step(u64_from(b.len()));
            }
            Source::File { offset } => {
                let mut buf = vec![0u8; chunk_len(len)];
                self.read_chunks(*offset, len, &mut buf, &mut |chunk| {
                    out.write_all(chunk).map_err(out_err)?;
                    step(u64_from(chunk.len()));
                    Ok(())
                })?;
            }
            Source::Swap { offset, width } => {
                let w = (*width).max(1);
                // Whole elements per chunk: BUF is a multiple of every width.
                let mut buf = vec![0u8; chunk_len(len)];
                self.read_chunks(*offset, len, &mut buf, &mut |chunk| {
                    for el in chunk.chunks_exact_mut(w) {
                        el.reverse();
                    }
                    out.write_all(chunk).map_err(out_err)?;
                    step(u64_from(chunk.len()));
                    Ok(())
                })?;
            }
            Source::Verified { offset, digest } => {
                let mut hash = sha2::Sha256::default();
                let mut buf = vec![0u8; chunk_len(len)];
                self.read_chunks(*offset, len, &mut buf, &mut |chunk| {
                    sha2::Digest::update(&mut hash, &*chunk);
                    out.write_all(chunk).map_err(out_err)?;
                    step(u64_from(chunk.len()));
                    Ok(())
                })?;
                let got: [u8; 32] = sha2::Digest::finalize(hash).into();
                if got != **digest {
                    anyhow::bail!(
                        "DIGEST: the SHA-256 of its {len} payload bytes at byte {offset} of {} is {}..., its digest says {}...: \
                         the input is corrupt (kiln validate names it too); nothing was written",
                        self.input_name,
                        crate::short_id(&got),
                        crate::short_id(digest)
                    );
                }
            }
            Source::Checked(c) => {
                let super::model::Checked { offset, crc_so_far, header_len, expect, member, swap } = &**c;
                let w = (*swap).max(1);
                let mut crc = crc32fast::Hasher::new_with_initial_len(*crc_so_far, *header_len);
                let mut buf = vec![0u8; chunk_len(len)];
                self.read_chunks(*offset, len, &mut buf, &mut |chunk| {
                    crc.update(chunk);
                    if w > 1 {
                        for el in chunk.chunks_exact_mut(w) {
                            el.reverse();
                        }
                    }
                    out.write_all(chunk).map_err(out_err)?;
                    step(u64_from(chunk.len()));
                    Ok(())
                })?;
                let got = crc.finalize();
                if got != *expect {
                    anyhow::bail!(
                        ".npz member {member}: CRC-32 {got:08x} of its bytes, the archive says {expect:08x} (a corrupt archive; np.load refuses it too)"
                    );
                }
            }
            Source::Zip(z) => {
                let super::model::Zip { index, skip, expect, member } = &**z;
                if self.zip.is_none() {
                    self.zip = Some(zip::ZipArchive::new(self.input).context("reopening the .npz archive")?);
                }
                let Some(zip) = self.zip.as_mut() else { anyhow::bail!("the .npz archive is not open") };
                let mut entry = zip.by_index(*index).with_context(|| format!(".npz member {member}"))?;
                let mut crc = crc32fast::Hasher::new();
                let mut buf = vec![0u8; BUF];
                let mut left = *skip;
                while left > 0 {
                    let got = read_some(&mut entry, &mut buf, left).with_context(|| format!(".npz member {member}"))?;
                    if got.is_empty() {
                        anyhow::bail!(".npz member {member} ended inside its .npy header");
                    }
                    crc.update(got);
                    left = left.saturating_sub(u64_from(got.len()));
                }
                let mut copied = 0u64;
                while copied < len {
                    let want = len.saturating_sub(copied);
                    let got = read_some(&mut entry, &mut buf, want).with_context(|| format!(".npz member {member}"))?;
                    if got.is_empty() {
                        anyhow::bail!(".npz member {member} ended early ({copied} of {len} data bytes)");
                    }
                    crc.update(got);
                    out.write_all(got).map_err(out_err)?;
                    copied = copied.saturating_add(u64_from(got.len()));
                    step(u64_from(got.len()));
                }
                // Nothing may follow, and the member's CRC-32 covers every byte.
                let extra = read_some(&mut entry, &mut buf, 1).with_context(|| format!(".npz member {member}"))?.len();
                if extra != 0 {
                    anyhow::bail!(".npz member {member} is longer than its .npy header says");
                }
                let got = crc.finalize();
                if got != *expect {
                    anyhow::bail!(
                        ".npz member {member}: CRC-32 {got:08x} of its bytes, the archive says {expect:08x} (a corrupt archive; np.load refuses it too)"
                    );
                }
            }
            Source::Transposed(t) => self.transposed(t, len, out, out_err, step)?,
        }
        Ok(())
    }

    /// A Fortran-order array: the stored bytes' own checks first (a `.npz`
    /// member's CRC-32 is over the bytes in file order, so they are read once
    /// in that order; a compressed member is decompressed into a temporary
    /// file, which the transpose then reads), then [`transpose`].
    fn transposed(
        &mut self,
        t: &Transposed,
        len: u64,
        out: &mut dyn Write,
        out_err: &dyn Fn(io::Error) -> anyhow::Error,
        step: &mut dyn FnMut(u64),
    ) -> anyhow::Result<()> {
        let unpacked;
        let (file, base, swap) = match &t.inner {
            Source::File { offset } => (self.input, *offset, 1),
            Source::Swap { offset, width } => (self.input, *offset, *width),
            Source::Checked(c) => {
                self.run(&t.inner, len, &mut io::sink(), out_err, &mut |_| {})?;
                (self.input, c.offset, c.swap)
            }
            Source::Zip(z) => {
                let what = format!("a temporary file for .npz member {}", z.member);
                let file = tempfile::tempfile().map_err(io_fail(format!("cannot create {what}")))?;
                let mut w = BufWriter::with_capacity(BUF, file);
                let fail = |e: io::Error| io_fail(format!("cannot write {what}"))(e);
                self.run(&t.inner, len, &mut w, &fail, &mut |_| {})?;
                unpacked = w.into_inner().map_err(|e| fail(e.into_error()))?;
                (&unpacked, 0, 1)
            }
            other => anyhow::bail!("a transposed payload from {other:?}"),
        };
        let mut blocks = Blocks { file, name: &self.input_name, block: Vec::new(), start: 0 };
        let mut rows = Rows { out, out_err, step, buf: Vec::with_capacity(chunk_len(len)), swap: swap > 1 };
        transpose(&mut blocks, base, &t.shape, t.width.max(1), &mut rows)?;
        rows.flush()
    }
}

/// The most bytes of a Fortran-order array held at once while it is
/// transposed (one band of output rows; see [`transpose`]).
const TRANSPOSE_BAND: u64 = 16 << 20;
/// Reads through the block cache are this long.
const BLOCK: u64 = 1 << 20;

/// Reads pieces of a file at increasing offsets, either each with its own
/// read (pieces far apart, or long) or through one cached block (short
/// pieces close together).
struct Blocks<'f> {
    file: &'f File,
    name: &'f str,
    block: Vec<u8>,
    /// The file offset of `block`'s first byte.
    start: u64,
}

impl Blocks<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> anyhow::Result<()> {
        platform::read_exact_at(self.file, buf, offset).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                anyhow::anyhow!("the input ended early at byte {offset} (it changed while being converted?)")
            } else {
                io_fail(format!("cannot read {}", self.name))(e)
            }
        })
    }

    /// Fills `dst` from `offset`; `direct` reads it on its own, otherwise
    /// through the block, which is reloaded from `offset` (up to `limit`) on a miss.
    fn get(&mut self, offset: u64, dst: &mut [u8], direct: bool, limit: u64) -> anyhow::Result<()> {
        let n = u64_from(dst.len());
        if direct || n > BLOCK {
            return self.read_at(dst, offset);
        }
        let end = self.start.saturating_add(u64_from(self.block.len()));
        if offset < self.start || offset.saturating_add(n) > end {
            let want = BLOCK.min(limit.saturating_sub(offset)).max(n);
            self.block.resize(usize_from(want).unwrap_or(dst.len()), 0);
            let mut block = std::mem::take(&mut self.block);
            let read = self.read_at(&mut block, offset);
            self.block = block;
            read?;
            self.start = offset;
        }
        let from = usize_from(offset.saturating_sub(self.start)).unwrap_or(usize::MAX);
        let src = self.block.get(from..from.saturating_add(dst.len()));
        dst.copy_from_slice(src.ok_or_else(|| anyhow::anyhow!("a transpose read outside its block"))?);
        Ok(())
    }
}

/// Where a transpose writes: the output, in chunks, each element byte-swapped
/// first when the array is big-endian.
struct Rows<'o> {
    out: &'o mut dyn Write,
    out_err: &'o dyn Fn(io::Error) -> anyhow::Error,
    step: &'o mut dyn FnMut(u64),
    buf: Vec<u8>,
    swap: bool,
}

impl Rows<'_> {
    fn push(&mut self, element: &[u8]) -> anyhow::Result<()> {
        let at = self.buf.len();
        self.buf.extend_from_slice(element);
        if self.swap {
            if let Some(e) = self.buf.get_mut(at..) {
                e.reverse();
            }
        }
        if self.buf.len() >= BUF {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        self.out.write_all(&self.buf).map_err(self.out_err)?;
        (self.step)(u64_from(self.buf.len()));
        self.buf.clear();
        Ok(())
    }
}

/// Writes the Fortran-order (column-major) array of `shape` whose elements
/// of `width` bytes start at `base` in `blocks`' file to `rows` in row-major
/// order, holding at most [`TRANSPOSE_BAND`] bytes of it.
///
/// Output rows come in bands along the first axis, the one that varies
/// fastest in the file: a band of `b` indices is, for every index of the
/// other axes, a run of `b` elements in the file; the runs are read into the
/// band (one read each when long or far apart, through a cached block when
/// short and close together) and the band is written out in row-major order.
/// When one index of the first axis alone takes more than the band (a very
/// wide array), each one is done in turn as an array of the other axes whose
/// elements are strided in the file, which reads the file once per index.
fn transpose(
    blocks: &mut Blocks<'_>,
    base: u64,
    shape: &[u64],
    width: usize,
    rows: &mut Rows<'_>,
) -> anyhow::Result<()> {
    // Axes of length 1 change nothing in the order.
    let dims: Vec<u64> = shape.iter().copied().filter(|&d| d != 1).collect();
    if dims.contains(&0) {
        return Ok(());
    }
    let w = u64_from(width);
    // The file stride of each axis (column-major: the first is the element).
    let mut strides = Vec::with_capacity(dims.len());
    let mut s = w;
    for d in &dims {
        strides.push(s);
        s = s.saturating_mul(*d);
    }
    band(blocks, base, &dims, &strides, width, rows, TRANSPOSE_BAND)
}

/// [`transpose`] of the axes `dims` (no 1s) with file `strides`, `budget` bytes a band.
fn band(
    blocks: &mut Blocks<'_>,
    base: u64,
    dims: &[u64],
    strides: &[u64],
    width: usize,
    rows: &mut Rows<'_>,
    budget: u64,
) -> anyhow::Result<()> {
    let w = u64_from(width);
    let (Some((&d0, rest)), Some((&st0, rest_st))) = (dims.split_first(), strides.split_first()) else {
        // A scalar (after dropping axes of 1).
        let mut e = vec![0u8; width];
        blocks.get(base, &mut e, true, base.saturating_add(w))?;
        return rows.push(&e);
    };
    // Elements of one index of the first axis, and their file spacing (the
    // other axes, column-major, are evenly spaced at the second stride).
    let per = rest.iter().fold(1u64, |a, &d| a.saturating_mul(d));
    let group_stride = rest_st.first().copied().unwrap_or(0);
    let slice = per.saturating_mul(w);
    if slice > budget {
        for i in 0..d0 {
            band(blocks, base.saturating_add(i.saturating_mul(st0)), rest, rest_st, width, rows, budget)?;
        }
        return Ok(());
    }
    let b = (budget.checked_div(slice).unwrap_or(1)).clamp(1, d0);
    // Column-major positions of the other axes, walked in row-major order.
    let mut fstride = Vec::with_capacity(rest.len());
    let mut f = 1u64;
    for d in rest {
        fstride.push(f);
        f = f.saturating_mul(*d);
    }
    let mut buf = vec![0u8; usize_from(b.saturating_mul(slice)).unwrap_or(0)];
    let mut a = 0u64;
    while a < d0 {
        let bb = b.min(d0.saturating_sub(a));
        let first = base.saturating_add(a.saturating_mul(st0));
        let last = first
            .saturating_add(per.saturating_sub(1).saturating_mul(group_stride))
            .saturating_add(bb.saturating_sub(1).saturating_mul(st0))
            .saturating_add(w);
        // A run of the band's elements for each group: contiguous when the first axis is.
        let contiguous = st0 == w;
        let (unit, spacing) = if contiguous { (bb.saturating_mul(w), group_stride) } else { (w, st0) };
        let direct = unit >= 4096 || spacing.saturating_sub(unit) > 8192;
        let run = usize_from(bb.saturating_mul(w)).unwrap_or(0);
        for g in 0..per {
            let at = first.saturating_add(g.saturating_mul(group_stride));
            let from = usize_from(g).map_or(0, |g| g.saturating_mul(run));
            let dst = buf.get_mut(from..from.saturating_add(run)).ok_or_else(|| anyhow::anyhow!("a transpose band"))?;
            if contiguous {
                blocks.get(at, dst, direct, last)?;
            } else {
                for (e, el) in dst.chunks_exact_mut(width).enumerate() {
                    blocks.get(at.saturating_add(u64_from(e).saturating_mul(st0)), el, direct, last)?;
                }
            }
        }
        // Row-major order: the band's first-axis index, then the others, last fastest.
        for e in 0..usize_from(bb).unwrap_or(0) {
            let mut idx = vec![0u64; rest.len()];
            let mut g = 0u64;
            for _ in 0..per {
                let from = usize_from(g).map_or(0, |g| g.saturating_mul(run)).saturating_add(e.saturating_mul(width));
                rows.push(buf.get(from..from.saturating_add(width)).unwrap_or_default())?;
                for (k, i) in idx.iter_mut().enumerate().rev() {
                    let (d, fs) = (rest.get(k).copied().unwrap_or(1), fstride.get(k).copied().unwrap_or(0));
                    *i = i.saturating_add(1);
                    g = g.saturating_add(fs);
                    if *i < d {
                        break;
                    }
                    g = g.saturating_sub(fs.saturating_mul(d));
                    *i = 0;
                }
            }
        }
        a = a.saturating_add(bb);
    }
    Ok(())
}

/// A writer that hashes what passes through it (when it has a hasher).
struct Hashing<'w, W: Write> {
    inner: &'w mut W,
    hash: Option<sha2::Sha256>,
}

impl<W: Write> Write for Hashing<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        if let Some(h) = self.hash.as_mut() {
            sha2::Digest::update(h, buf.get(..n).unwrap_or_default());
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The chunk buffered sources are read in: a multiple of every element width.
const BUF: usize = 1 << 20;

/// The buffer for a payload of `len` bytes: at most [`BUF`], no more than the
/// payload (a model of 200,000 small tensors must not zero 200 GB of buffers).
/// A payload's length is a multiple of its element width, as `BUF` is.
fn chunk_len(len: u64) -> usize {
    usize_from(len).map_or(BUF, |l| l.min(BUF))
}

/// One `read` of at most `want` bytes (and at most `buf.len()`) into `buf`: the bytes read.
fn read_some<'b>(r: &mut dyn Read, buf: &'b mut [u8], want: u64) -> io::Result<&'b [u8]> {
    let n = usize_from(want).map_or(buf.len(), |w| w.min(buf.len()));
    let buf = buf.get_mut(..n).unwrap_or_default();
    let k = r.read(buf)?;
    Ok(buf.get(..k).unwrap_or_default())
}

impl<'a> Sink<'a> {
    /// A sink writing `out` (named `out_name`), copying payloads from `inputs`.
    pub fn new(out: File, inputs: &'a [Input], progress: &'a dyn Progress, out_name: String) -> Self {
        Sink { out: BufWriter::with_capacity(BUF, out), inputs, zip: None, progress, written: 0, out_name }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Writes `b`.
    pub fn bytes(&mut self, b: &[u8]) -> anyhow::Result<()> {
        self.out.write_all(b).map_err(|e| io_fail(format!("cannot write {}", self.out_name))(e))?;
        self.written = self.written.saturating_add(u64_from(b.len()));
        Ok(())
    }

    /// Writes `n` zero bytes.
    pub fn zeros(&mut self, mut n: u64) -> anyhow::Result<()> {
        while n > 0 {
            let k = usize_from(n).map_or(ZEROS.len(), |n| n.min(ZEROS.len()));
            self.bytes(ZEROS.get(..k).unwrap_or_default())?;
            n = n.saturating_sub(u64_from(k));
        }
        Ok(())
    }

    /// Writes tensor `t`'s payload, from the input file it names; the kernel
    /// may move it file to file.
    pub fn tensor(&mut self, t: &TensorOut) -> anyhow::Result<()> {
        self.copy(t, false).map(|_| ())
    }

    /// Writes tensor `t`'s payload through this process (read, hashed and
    /// written once) and returns its SHA-256: the tensor's digest.
    pub fn tensor_hashed(&mut self, t: &TensorOut) -> anyhow::Result<[u8; 32]> {
        self.copy(t, true).map(|d| d.unwrap_or_default())
    }

    fn copy(&mut self, t: &TensorOut, hash: bool) -> anyhow::Result<Option<[u8; 32]>> {
        let input =
            self.inputs.get(t.input).ok_or_else(|| anyhow::anyhow!("tensor {}: no input file {}", t.name, t.input))?;
        let in_name = input.path.display().to_string();
        if let (Source::File { offset }, false) = (&t.source, hash) {
            let mut done = 0;
            while done < t.len {
                let n = t.len.saturating_sub(done).min(CHUNK);
                let at = offset.checked_add(done).ok_or_else(|| anyhow::anyhow!("a payload offset overflows"))?;
                let copied = platform::copy_range(&input.file, at, n, &mut self.out)
                    .map_err(|e| io_fail(format!("cannot copy {in_name} to {}", self.out_name))(e))?;
                if copied != n {
                    anyhow::bail!("{in_name} ended early (it changed while being converted?)");
                }
                done = done.saturating_add(n);
                self.written = self.written.saturating_add(n);
                self.progress.advance(n);
            }
            return Ok(None);
        }
        let zip = match self.zip.take() {
            Some((i, z)) if i == t.input => Some(z),
            _ => None,
        };
        let mut pump = Pump { input: &input.file, zip, input_name: in_name };
        let out_name = self.out_name.clone();
        let out_err = move |e: io::Error| io_fail(format!("cannot write {out_name}"))(e);
        let (written, progress) = (&mut self.written, self.progress);
        // A verified payload's digest is known once the copy succeeds: no second hash.
        let known = match &t.source {
            Source::Verified { digest, .. } => Some(**digest),
            _ => None,
        };
        let mut out = Hashing { inner: &mut self.out, hash: (hash && known.is_none()).then(sha2::Sha256::default) };
        let result = pump.run(&t.source, t.len, &mut out, &out_err, &mut |n| {
            *written = written.saturating_add(n);
            progress.advance(n);
        });
        self.zip = pump.zip.map(|z| (t.input, z));
        result.map(|()| out.hash.map(|h| sha2::Digest::finalize(h).into()).or(known.filter(|_| hash)))
    }

    /// Flushes and returns the file.
    pub fn finish(self) -> anyhow::Result<File> {
        let name = self.out_name.clone();
        let f = self.out.into_inner().map_err(|e| io_fail(format!("cannot write {name}"))(e.into_error()))?;
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row-major bytes of the column-major array `data` of `shape`, the slow way.
    fn naive(data: &[u8], shape: &[u64], w: usize) -> Vec<u8> {
        let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
        let n: usize = dims.iter().product();
        let mut out = Vec::with_capacity(n * w);
        for c in 0..n {
            // c is a row-major index: its column-major position.
            let (mut rem, mut f, mut fs) = (c, 0usize, 1usize);
            let mut idx = vec![0usize; dims.len()];
            for k in (0..dims.len()).rev() {
                idx[k] = rem % dims[k];
                rem /= dims[k];
            }
            for k in 0..dims.len() {
                f += idx[k] * fs;
                fs *= dims[k];
            }
            out.extend_from_slice(&data[f * w..f * w + w]);
        }
        out
    }

    /// Every band size, down to one element, gives the slow way's bytes
    /// (bands of many indices, one index, and strided sub-arrays).
    #[test]
    fn transpose_matches_the_slow_way_at_every_budget() {
        // [1200, 3] and [3000, 4]: runs read on their own (long, or far apart).
        let shapes: [&[u64]; 9] =
            [&[3, 4], &[2, 3, 4], &[1, 5, 1, 3], &[7, 1], &[4, 3, 2, 5], &[2, 2], &[300, 70], &[1200, 3], &[3000, 4]];
        for shape in shapes {
            for w in [1usize, 2, 4, 8] {
                let n: u64 = shape.iter().product();
                let data: Vec<u8> = (0..n as usize * w).map(|i| (i * 7 + i / 251) as u8).collect();
                let mut file = tempfile::tempfile().unwrap();
                let pad = vec![0xAAu8; 13];
                file.write_all(&pad).unwrap();
                file.write_all(&data).unwrap();
                file.write_all(&pad).unwrap();
                let want = naive(&data, shape, w);
                for budget in [1u64, w as u64, 3 * w as u64, 64, 1000, 1 << 20] {
                    for swap in [false, true] {
                        let mut got = Vec::new();
                        let err = |e: io::Error| anyhow::anyhow!(e);
                        let mut step = |_| {};
                        let mut rows = Rows { out: &mut got, out_err: &err, step: &mut step, buf: Vec::new(), swap };
                        let mut blocks = Blocks { file: &file, name: "t", block: Vec::new(), start: 0 };
                        let dims: Vec<u64> = shape.iter().copied().filter(|&d| d != 1).collect();
                        let mut strides = Vec::new();
                        let mut s = w as u64;
                        for d in &dims {
                            strides.push(s);
                            s *= d;
                        }
                        band(&mut blocks, 13, &dims, &strides, w, &mut rows, budget).unwrap();
                        rows.flush().unwrap();
                        let mut want = want.clone();
                        if swap {
                            want.chunks_exact_mut(w).for_each(<[u8]>::reverse);
                        }
                        assert_eq!(got, want, "shape {shape:?} width {w} budget {budget} swap {swap}");
                    }
                }
            }
        }
    }
}
