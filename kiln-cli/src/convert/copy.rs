//! The output sink: payloads go from the input file to the output file
//! without passing through this process's memory where the kernel can do
//! it (`copy_file_range` on Linux, see [`platform::copy_range`]), in chunks
//! so the progress bar moves.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

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
}

impl<'a> Sink<'a> {
    pub fn new(out: File, input: &'a File, bar: ProgressBar) -> Self {
        Sink { out: BufWriter::with_capacity(1 << 20, out), input, zip: None, bar, written: 0 }
    }

    pub fn written(&self) -> u64 {
        self.written
    }

    pub fn bytes(&mut self, b: &[u8]) -> io::Result<()> {
        self.out.write_all(b)?;
        self.written += b.len() as u64;
        Ok(())
    }

    pub fn zeros(&mut self, mut n: u64) -> io::Result<()> {
        while n > 0 {
            let k = n.min(ZEROS.len() as u64) as usize;
            self.bytes(&ZEROS[..k])?;
            n -= k as u64;
        }
        Ok(())
    }

    fn advance(&mut self, n: u64) {
        self.written += n;
        self.bar.inc(n);
    }

    /// Writes `len` payload bytes from `src`.
    pub fn source(&mut self, src: &Source, len: u64) -> anyhow::Result<()> {
        match src {
            Source::Bytes(b) => {
                self.out.write_all(b)?;
                self.advance(b.len() as u64);
            }
            Source::File { offset } => {
                let mut done = 0;
                while done < len {
                    let n = (len - done).min(CHUNK);
                    let copied = platform::copy_range(self.input, offset + done, n, &mut self.out)?;
                    if copied != n {
                        anyhow::bail!("the input ended early (it changed while being converted?)");
                    }
                    done += n;
                    self.advance(n);
                }
            }
            Source::Swap { offset, width } => {
                let w = *width as u64;
                let mut buf = vec![0u8; (1 << 20) / *width * *width];
                let mut done = 0;
                while done < len {
                    let n = (len - done).min(buf.len() as u64) as usize;
                    let chunk = &mut buf[..n];
                    platform::read_exact_at(self.input, chunk, offset + done).context("reading the input")?;
                    for el in chunk.chunks_exact_mut(*width) {
                        el.reverse();
                    }
                    self.out.write_all(chunk)?;
                    done += n as u64;
                    self.advance(n as u64);
                }
                debug_assert_eq!(len % w, 0);
            }
            Source::Zip { index, skip } => {
                if self.zip.is_none() {
                    self.zip = Some(zip::ZipArchive::new(self.input).context("reopening the .npz archive")?);
                }
                let zip = self.zip.as_mut().expect("just set");
                let mut entry = zip.by_index(*index)?;
                io::copy(&mut (&mut entry).take(*skip), &mut io::sink())?;
                let mut limited = (&mut entry).take(len);
                let mut copied = 0u64;
                let mut buf = vec![0u8; 1 << 20];
                loop {
                    let k = limited.read(&mut buf)?;
                    if k == 0 {
                        break;
                    }
                    self.out.write_all(&buf[..k])?;
                    copied += k as u64;
                    self.written += k as u64;
                    self.bar.inc(k as u64);
                }
                if copied != len {
                    anyhow::bail!("a compressed .npz member ended early");
                }
            }
        }
        Ok(())
    }

    /// Flushes and returns the file.
    pub fn finish(self) -> anyhow::Result<File> {
        self.bar.finish_and_clear();
        let f = self.out.into_inner().map_err(|e| e.into_error())?;
        Ok(f)
    }
}
