//! The output sink: payloads go from the input file to the output file
//! without passing through this process's memory where the kernel can do
//! it (`copy_file_range` on Linux, see [`platform::copy_range`]), in chunks
//! so the progress bar moves.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

use super::error::io_fail;
use super::model::Source;
use crate::platform;

const CHUNK: u64 = 64 << 20;
const ZEROS: [u8; 4096] = [0; 4096];

/// A progress bar on a terminal for conversions of at least `min` bytes; hidden otherwise.
pub fn progress(total: u64, min: u64, quiet: bool) -> ProgressBar {
    use std::io::IsTerminal;
    if quiet || total < min || !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} [{bar:30}] {bytes_per_sec} eta {eta}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

pub struct Sink<'a> {
    out: BufWriter<File>,
    input: &'a File,
    zip: Option<zip::ZipArchive<&'a File>>,
    bar: ProgressBar,
    written: u64,
    /// "IN" and "OUT" as given, for messages.
    names: (String, String),
}

/// Reads buffered sources (byte-swapped, CRC-checked, compressed) from the input.
pub struct Pump<'a> {
    input: &'a File,
    zip: Option<zip::ZipArchive<&'a File>>,
    input_name: String,
}

impl<'a> Pump<'a> {
    pub fn new(input: &'a File, input_name: String) -> Self {
        Pump { input, zip: None, input_name }
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
                step(b.len() as u64);
            }
            Source::File { offset } => {
                let mut buf = vec![0u8; BUF];
                let mut done = 0u64;
                while done < len {
                    let n = usize::try_from((len - done).min(BUF as u64)).unwrap_or(BUF);
                    self.read_at(&mut buf[..n], offset + done)?;
                    out.write_all(&buf[..n]).map_err(out_err)?;
                    done += n as u64;
                    step(n as u64);
                }
            }
            Source::Swap { offset, width } => {
                let w = (*width).max(1);
                let mut buf = vec![0u8; BUF / w * w];
                let mut done = 0u64;
                while done < len {
                    let n = usize::try_from((len - done).min(buf.len() as u64)).unwrap_or(buf.len());
                    let chunk = &mut buf[..n];
                    self.read_at(chunk, offset + done)?;
                    for el in chunk.chunks_exact_mut(w) {
                        el.reverse();
                    }
                    out.write_all(chunk).map_err(out_err)?;
                    done += n as u64;
                    step(n as u64);
                }
            }
            Source::Checked { offset, crc_so_far, header_len, expect, member, swap } => {
                let w = (*swap).max(1);
                let mut crc = crc32fast::Hasher::new_with_initial_len(*crc_so_far, *header_len);
                let mut buf = vec![0u8; BUF / w * w];
                let mut done = 0u64;
                while done < len {
                    let n = usize::try_from((len - done).min(buf.len() as u64)).unwrap_or(buf.len());
                    let chunk = &mut buf[..n];
                    self.read_at(chunk, offset + done)?;
                    crc.update(chunk);
                    if w > 1 {
                        for el in chunk.chunks_exact_mut(w) {
                            el.reverse();
                        }
                    }
                    out.write_all(chunk).map_err(out_err)?;
                    done += n as u64;
                    step(n as u64);
                }
                let got = crc.finalize();
                if got != *expect {
                    anyhow::bail!(
                        ".npz member {member}: CRC-32 {got:08x} of its bytes, the archive says {expect:08x} (a corrupt archive; np.load refuses it too)"
                    );
                }
            }
            Source::Zip { index, skip, expect, member } => {
                if self.zip.is_none() {
                    self.zip = Some(zip::ZipArchive::new(self.input).context("reopening the .npz archive")?);
                }
                let Some(zip) = self.zip.as_mut() else { anyhow::bail!("the .npz archive is not open") };
                let mut entry = zip.by_index(*index).with_context(|| format!(".npz member {member}"))?;
                let mut crc = crc32fast::Hasher::new();
                let mut buf = vec![0u8; BUF];
                let mut left = *skip;
                while left > 0 {
                    let want = usize::try_from(left.min(BUF as u64)).unwrap_or(BUF);
                    let k = entry.read(&mut buf[..want]).with_context(|| format!(".npz member {member}"))?;
                    if k == 0 {
                        anyhow::bail!(".npz member {member} ended inside its .npy header");
                    }
                    crc.update(&buf[..k]);
                    left -= k as u64;
                }
                let mut copied = 0u64;
                while copied < len {
                    let want = usize::try_from((len - copied).min(BUF as u64)).unwrap_or(BUF);
                    let k = entry.read(&mut buf[..want]).with_context(|| format!(".npz member {member}"))?;
                    if k == 0 {
                        anyhow::bail!(".npz member {member} ended early ({copied} of {len} data bytes)");
                    }
                    crc.update(&buf[..k]);
                    out.write_all(&buf[..k]).map_err(out_err)?;
                    copied += k as u64;
                    step(k as u64);
                }
                // Nothing may follow, and the member's CRC-32 covers every byte.
                let extra = entry.read(&mut buf[..1]).with_context(|| format!(".npz member {member}"))?;
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
        }
        Ok(())
    }
}

const BUF: usize = 1 << 20;

impl<'a> Sink<'a> {
    pub fn new(out: File, input: &'a File, bar: ProgressBar, names: (String, String)) -> Self {
        Sink { out: BufWriter::with_capacity(BUF, out), input, zip: None, bar, written: 0, names }
    }

    pub fn written(&self) -> u64 {
        self.written
    }

    pub fn bytes(&mut self, b: &[u8]) -> anyhow::Result<()> {
        self.out.write_all(b).map_err(|e| io_fail(format!("cannot write {}", self.names.1))(e))?;
        self.written += b.len() as u64;
        Ok(())
    }

    pub fn zeros(&mut self, mut n: u64) -> anyhow::Result<()> {
        while n > 0 {
            let k = n.min(ZEROS.len() as u64) as usize;
            self.bytes(&ZEROS[..k])?;
            n -= k as u64;
        }
        Ok(())
    }

    /// Writes `len` payload bytes from `src`.
    pub fn source(&mut self, src: &Source, len: u64) -> anyhow::Result<()> {
        if let Source::File { offset } = src {
            let mut done = 0;
            while done < len {
                let n = (len - done).min(CHUNK);
                let copied = platform::copy_range(self.input, offset + done, n, &mut self.out)
                    .map_err(|e| io_fail(format!("cannot copy {} to {}", self.names.0, self.names.1))(e))?;
                if copied != n {
                    anyhow::bail!("the input ended early (it changed while being converted?)");
                }
                done += n;
                self.written += n;
                self.bar.inc(n);
            }
            return Ok(());
        }
        let mut pump = Pump { input: self.input, zip: self.zip.take(), input_name: self.names.0.clone() };
        let out_name = self.names.1.clone();
        let out_err = move |e: io::Error| io_fail(format!("cannot write {out_name}"))(e);
        let (written, bar) = (&mut self.written, &self.bar);
        let result = pump.run(src, len, &mut self.out, &out_err, &mut |n| {
            *written += n;
            bar.inc(n);
        });
        self.zip = pump.zip;
        result
    }

    /// Flushes and returns the file.
    pub fn finish(self) -> anyhow::Result<File> {
        self.bar.finish_and_clear();
        let name = self.names.1.clone();
        let f = self.out.into_inner().map_err(|e| io_fail(format!("cannot write {name}"))(e.into_error()))?;
        Ok(f)
    }
}
