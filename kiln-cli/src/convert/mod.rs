//! `kiln convert IN -o OUT`: safetensors, GGUF, HK, NumPy .npy/.npz and Kiln
//! in; a Kiln record, a standalone Kiln directory, or safetensors out.
//! See docs/conversion.md for the dtype tables and the choices made.
//!
//! One pass, bounded memory: the input is memory-mapped only to parse its
//! header (the payload pages are never touched through the map); the output
//! directory is computed from the tensor list alone, written, and the
//! payloads are copied file-to-file (`copy_file_range` where the kernel
//! offers it) into a temporary file that is renamed over OUT at the end.

mod codes;
mod copy;
mod gguf;
mod hk_in;
mod json;
mod kiln_in;
mod model;
mod npy;
mod safetensors_in;
mod write_kiln;
mod write_safetensors;

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use clap::{Args, ValueEnum};
use kiln_nostd::frozen::{self, Schema};
use kiln_nostd::{Limits, Parser};
use memmap2::Mmap;

use crate::platform;
pub use model::Format;
use model::Model;
pub use write_kiln::RECORD_TYPE;

/// Progress bars appear for conversions of at least this many payload bytes.
const PROGRESS_MIN: u64 = 64 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum From {
    /// Detect from the first bytes.
    Auto,
    Safetensors,
    Gguf,
    Hk,
    Npy,
    Npz,
    Kiln,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum To {
    /// `.safetensors` output names choose safetensors, anything else a Kiln record.
    Auto,
    /// A framed Kiln record: struct{metadata:dict<str,str>,tensors:tensors,}.
    Record,
    /// A standalone Kiln tensor directory, with the metadata in OUT.meta.json.
    Tensors,
    /// safetensors (from a Kiln input).
    Safetensors,
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// The input file (safetensors, GGUF, HK, .npy, .npz or Kiln; detected from its bytes).
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// The output file. It is written to a temporary file beside it and renamed at the end.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Input format, when detection should be overridden.
    #[arg(long, value_enum, default_value_t = From::Auto)]
    pub from: From,
    /// Output format.
    #[arg(long, value_enum, default_value_t = To::Auto)]
    pub to: To,
    /// No progress bar and no summary line (notes about what was not carried are still printed).
    #[arg(short, long)]
    pub quiet: bool,
}

/// What a conversion did, for the summary line and the tests.
#[derive(Debug)]
pub struct Summary {
    pub format: Format,
    pub tensors: usize,
    pub bytes: u64,
    pub notes: Vec<String>,
}

fn open(path: &Path) -> anyhow::Result<(File, Option<Mmap>)> {
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    if meta.len() == 0 {
        return Ok((file, None));
    }
    // SAFETY: read-only map of a regular file. If another process truncates
    // it while we read, accesses fault (SIGBUS), as with any mapped reader;
    // the payload bytes are read through the file descriptor, not the map.
    let map = unsafe { Mmap::map(&file) }.with_context(|| format!("cannot map {}", path.display()))?;
    Ok((file, Some(map)))
}

fn read_model(format: Format, file: &File, bytes: &[u8], input: &Path) -> anyhow::Result<Model> {
    match format {
        Format::Safetensors => safetensors_in::read(bytes),
        Format::Gguf => gguf::read(bytes),
        Format::Hk => hk_in::read(bytes),
        Format::Npy => {
            let stem = input.file_stem().and_then(|s| s.to_str()).filter(|s| !s.is_empty()).unwrap_or("array");
            npy::read_npy(bytes, stem)
        }
        Format::Npz => npy::read_npz(file, bytes),
        Format::Kiln => kiln_in::read(bytes),
    }
}

/// A temporary file beside `out`, removed unless it is persisted.
struct Temp {
    path: PathBuf,
    keep: bool,
}

impl Temp {
    fn new(out: &Path) -> anyhow::Result<(Temp, File)> {
        let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = out.file_name().ok_or_else(|| anyhow!("{} is not a file name", out.display()))?;
        let path = dir.join(format!(".{}.kiln-convert-{}", name.to_string_lossy(), std::process::id()));
        let file = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok((Temp { path, keep: false }, file))
    }
    fn persist(mut self, out: &Path) -> anyhow::Result<()> {
        platform::replace(&self.path, out).with_context(|| format!("cannot rename to {}", out.display()))?;
        self.keep = true;
        Ok(())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Runs one conversion. Errors about the input's content come back as
/// `Err` with the message; the caller maps them to exit codes.
pub fn convert(args: &ConvertArgs) -> anyhow::Result<Summary> {
    let (file, map) = open(&args.input)?;
    let bytes: &[u8] = map.as_deref().unwrap_or(&[]);
    let format = match args.from {
        From::Auto => Format::detect(bytes).ok_or_else(|| {
            anyhow!("{}: not a recognised format (safetensors, GGUF, HK, .npy, .npz, Kiln)", args.input.display())
        })?,
        From::Safetensors => Format::Safetensors,
        From::Gguf => Format::Gguf,
        From::Hk => Format::Hk,
        From::Npy => Format::Npy,
        From::Npz => Format::Npz,
        From::Kiln => Format::Kiln,
    };
    let mut model = read_model(format, &file, bytes, &args.input)
        .with_context(|| format!("{} ({})", args.input.display(), format.name()))?;
    let to = match args.to {
        To::Auto if args.output.extension().is_some_and(|e| e == "safetensors") => To::Safetensors,
        To::Auto => To::Record,
        other => other,
    };
    if to == To::Safetensors && format != Format::Kiln {
        bail!("safetensors output is for Kiln inputs (the way back); convert {} to Kiln first", format.name());
    }
    let mut notes = std::mem::take(&mut model.notes);
    let total = model.payload_bytes();
    let bar = copy::progress(total, PROGRESS_MIN, args.quiet);
    let (temp, out) = Temp::new(&args.output)?;
    let mut sink = copy::Sink::new(out, &file, bar);
    match to {
        To::Record | To::Tensors => {
            let plan = write_kiln::plan(&model.tensors)?;
            if to == To::Record {
                let modulus = write_kiln::pad_modulus(total);
                let pad = write_kiln::pad_len(&model.tensors, &plan, &model.metadata, modulus)?;
                model.metadata.insert(write_kiln::KEY_PAD.to_string(), " ".repeat(pad));
                sink.bytes(&write_kiln::frame())?;
                sink.bytes(&write_kiln::encode_dict(&model.metadata)?)?;
            }
            write_kiln::write_block(&mut sink, &model.tensors, &plan)?;
        }
        To::Safetensors => {
            let plan = write_safetensors::plan(&model, &mut notes)?;
            write_safetensors::write(&mut sink, &model, &plan)?;
        }
        To::Auto => unreachable!(),
    }
    let written = sink.written();
    // No fsync, like cp: the rename makes the result appear whole to other
    // readers; durability across a power cut is the caller's `sync`.
    drop(sink.finish()?);
    verify(&temp.path, to).context("the written file did not check out")?;
    if to == To::Tensors {
        let side = sidecar(&args.output);
        let mut f = File::create(&side).with_context(|| format!("cannot create {}", side.display()))?;
        f.write_all(serde_json::to_string_pretty(&model.metadata)?.as_bytes())?;
        f.write_all(b"\n")?;
        notes.push(format!("metadata written to {} (a standalone directory holds tensors only)", side.display()));
    }
    large_value_notes(&model, &mut notes);
    // Close the input before replacing OUT: OUT may be the input itself, and
    // Windows cannot replace a file this process still has mapped.
    drop(map);
    drop(file);
    temp.persist(&args.output)?;
    Ok(Summary { format: model.format, tensors: model.tensors.len(), bytes: written, notes })
}

/// `OUT.meta.json`.
pub fn sidecar(out: &Path) -> PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(".meta.json");
    PathBuf::from(s)
}

fn large_value_notes(model: &Model, notes: &mut Vec<String>) {
    let cap = u64::from(kiln_nostd::DEFAULT_CAP);
    for (k, v) in &model.metadata {
        if v.len() as u64 > cap {
            notes.push(format!(
                "metadata {k}: {} bytes, above the default 16 MiB string cap; readers must raise their byte cap",
                v.len()
            ));
        }
    }
}

/// Checks the written file with the no_std validator (through a map: only
/// the header, descriptors, gaps and bool/packed payloads are read).
fn verify(path: &Path, to: To) -> anyhow::Result<()> {
    let file = File::open(path)?;
    if file.metadata()?.len() == 0 {
        bail!("empty output");
    }
    // SAFETY: as in `open`; the file is our own temporary file.
    let map = unsafe { Mmap::map(&file)? };
    match to {
        To::Record => {
            let schema: Schema = Schema::parse(RECORD_TYPE).map_err(|e| anyhow!("{e}"))?;
            frozen::validate(&map, &schema, &Limits::MAX, true).map_err(|e| anyhow!("{e} (rule {})", e.rule().id()))
        }
        To::Tensors => Parser::new()
            .limits(Limits::MAX)
            .parse(&map)
            .map(|_| ())
            .map_err(|e| anyhow!("{e} (rule {})", e.rule().id())),
        To::Safetensors => safetensors::SafeTensors::read_metadata(&map).map(|_| ()).map_err(|e| anyhow!("{e}")),
        To::Auto => Ok(()),
    }
}

/// The `kiln convert` subcommand: prints the notes and a summary on stderr;
/// returns the exit code (0 done, 1 the input could not be converted, 2 I/O).
pub fn run(args: &ConvertArgs) -> anyhow::Result<u8> {
    if let Err(e) = File::open(&args.input) {
        eprintln!("kiln: cannot read {}: {e}", args.input.display());
        return Ok(2);
    }
    match convert(args) {
        Ok(s) => {
            for n in &s.notes {
                eprintln!("kiln convert: note: {n}");
            }
            if !args.quiet {
                eprintln!(
                    "kiln convert: {} -> {}: {} tensors, {} bytes ({} input)",
                    args.input.display(),
                    args.output.display(),
                    s.tensors,
                    s.bytes,
                    s.format.name()
                );
            }
            Ok(0)
        }
        Err(e) => {
            eprintln!("kiln convert: {e:#}");
            let io = e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some());
            Ok(if io { 2 } else { 1 })
        }
    }
}
