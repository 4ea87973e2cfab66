//! The Kiln converter: safetensors, GGUF, HK, NumPy .npy/.npz, ONNX and Kiln
//! in (one file, or a sharded model: a Hugging Face index, a gguf-split set,
//! a Kiln manifest); a Kiln record, a standalone Kiln directory, or
//! safetensors out, a sharded model as a Kiln manifest and its shards
//! (`write_sharded`) or in the Hub's layout (`write_hub`).
//! See docs/conversion.md for the dtype tables and the choices made.
//!
//! Front door: [`convert`] runs one conversion ([`Options`]: what `kiln
//! convert IN -o OUT [FLAGS]` asks for) and reports through a [`Progress`].
//!
//! ```no_run
//! let done = kiln_convert::convert(&kiln_convert::Options::new("model.safetensors", "model.kiln"), &kiln_convert::Silent)?;
//! println!("{} tensors, {} bytes ({} input)", done.tensors, done.bytes, done.format.name());
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! `kiln convert` (kiln-cli: its flags, messages and exit codes, the
//! progress bar) and `kiln.convert` (kiln-py) both call it; the fuzz targets
//! (`fuzz/`) run [`convert_bytes`]. The readers alone ([`open`],
//! [`format_of`], [`read_model`]) serve `kiln validate` and `kiln inspect`.
//!
//! One pass, bounded memory: the input is memory-mapped only to parse its
//! header (the payload pages are never touched through the map); the output
//! directory is computed from the tensor list alone, written, and the
//! payloads are copied file-to-file (`copy_file_range` where the kernel
//! offers it) into a temporary file that is renamed over OUT at the end.

// The core's lint set (kiln-nostd): no indexing, unchecked arithmetic, `as`,
// unwrap/expect or panic outside tests; hostile input gets an error instead.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::as_conversions
    )
)]

mod codes;
mod copy;
pub mod error;
mod gguf;
mod hk_in;
mod index;
pub mod inputs;
mod json;
mod kiln_in;
pub mod meta;
pub mod model;
mod npy;
pub mod onnx;
pub mod outfile;
mod platform;
mod safetensors_in;
pub mod shards;
mod write_hub;
mod write_kiln;
mod write_safetensors;
mod write_sharded;

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
// The path policy is the host crate's (`crate::paths` in the modules that use it).
use kiln_host::paths;
use kiln_model::Kind;
use kiln_nostd::int::u64_from;
use kiln_nostd::{Limits, Parser};
use memmap2::Mmap;

use error::{io_fail, Usage};
pub use model::{Format, LegacyGgml};
pub use model::{Model, ReadOptions, Source};
use outfile::Target;
pub use write_kiln::RECORD_TYPE;

// The README's example (kiln-convert/README.md) runs as a doctest, so the crate's page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;

/// What the converter writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum To {
    /// `.safetensors` output names choose safetensors, anything else a Kiln record.
    Auto,
    /// A framed Kiln record: struct{metadata:dict<str,str>,tensors:tensors,}.
    Record,
    /// A standalone Kiln tensor directory, with the metadata in OUT.meta.json.
    Tensors,
    /// safetensors (from a Kiln input; a sharded one in the Hub's layout, see OUT).
    Safetensors,
}

impl To {
    /// Every choice, in the order `kiln convert --to` lists them.
    pub const ALL: [To; 4] = [To::Auto, To::Record, To::Tensors, To::Safetensors];

    /// The choice's name (`--to NAME`, `kiln.convert(to=NAME)`).
    pub fn name(self) -> &'static str {
        match self {
            To::Auto => "auto",
            To::Record => "record",
            To::Tensors => "tensors",
            To::Safetensors => "safetensors",
        }
    }

    /// What the choice writes, in one line (`kiln convert --help`).
    pub fn about(self) -> &'static str {
        match self {
            To::Auto => "`.safetensors` output names choose safetensors, anything else a Kiln record",
            To::Record => "A framed Kiln record: struct{metadata:dict<str,str>,tensors:tensors,}",
            To::Tensors => "A standalone Kiln tensor directory, with the metadata in OUT.meta.json",
            To::Safetensors => "safetensors (from a Kiln input; a sharded one in the Hub's layout, see OUT)",
        }
    }

    /// The choice called `name` (as [`To::name`] spells it).
    pub fn named(name: &str) -> Option<To> {
        To::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// The unit suffixes of [`parse_size`]: (suffix, multiplier), matched case-insensitively.
const SIZE_UNITS: [(&str, u64); 14] = [
    ("", 1),
    ("B", 1),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("KIB", 1 << 10),
    ("MIB", 1 << 20),
    ("GIB", 1 << 30),
    ("TIB", 1 << 40),
    ("K", 1 << 10),
    ("M", 1 << 20),
    ("G", 1 << 30),
    ("T", 1 << 40),
];

/// What [`parse_size`] accepts, for its errors.
const SIZE_GRAMMAR: &str =
    "use digits with an optional unit: KB, MB, GB, TB (powers of 1000, as the Hub writes \"500MB\"), \
KiB, MiB, GiB, TiB or K, M, G, T (powers of 1024)";

/// A byte count, the grammar of every size flag: digits, then optionally
/// (case-insensitive, spaces allowed before it) `KB`/`MB`/`GB`/`TB` (powers
/// of 1000, as the Hugging Face Hub writes "500MB"), `KiB`/`MiB`/`GiB`/`TiB`
/// or the bare `K`/`M`/`G`/`T` (powers of 1024), or `B`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    if digits.is_empty() {
        return Err(format!("{text:?}: {SIZE_GRAMMAR}"));
    }
    let unit = unit.trim_start().to_ascii_uppercase();
    let mult = (SIZE_UNITS.iter().find(|(name, _)| *name == unit).map(|&(_, m)| m))
        .ok_or_else(|| format!("{text:?}: unknown unit {unit:?}; {SIZE_GRAMMAR}"))?;
    let n: u64 = digits.parse().map_err(|_| format!("{text:?} is too large"))?;
    n.checked_mul(mult).ok_or_else(|| format!("{text:?} is too large"))
}

/// One conversion: what `kiln convert IN -o OUT [FLAGS]` asks for (its
/// `--help` says more of each field), built by [`Options::new`] with the
/// command's defaults.
#[derive(Debug, Clone)]
pub struct Options {
    /// The input: a file (safetensors, GGUF, HK, .npy, .npz, ONNX or Kiln); a
    /// Hugging Face index or a folder holding one (or one .safetensors file);
    /// any file of a gguf-split set; or a Kiln manifest.
    pub input: PathBuf,
    /// The output file (a sharded model: the manifest, or the Hub's index
    /// beside the safetensors shards).
    pub output: PathBuf,
    /// The input's format; `None` detects it from the first bytes (ONNX by its `.onnx` name).
    pub from: Option<Format>,
    /// What the readers may spend, and whether HK lineage is verified.
    pub read: ReadOptions,
    /// What is written.
    pub to: To,
    /// Flush every output to disk before renaming it into place (the default).
    pub fsync: bool,
    /// Split the output into shards of at most this many payload bytes.
    pub max_shard_size: Option<u64>,
    /// ONNX input: also write its graph here, its initializers as external data in OUT.
    pub onnx_graph: Option<PathBuf>,
}

impl Options {
    /// `kiln convert INPUT -o OUTPUT`: detection, the default budgets, a Kiln
    /// record (or safetensors for a `.safetensors` OUTPUT), fsync, one file.
    pub fn new(input: impl Into<PathBuf>, output: impl Into<PathBuf>) -> Self {
        Options {
            input: input.into(),
            output: output.into(),
            from: None,
            read: ReadOptions::default(),
            to: To::Auto,
            fsync: true,
            max_shard_size: None,
            onnx_graph: None,
        }
    }
}

/// Where a conversion is: the caller's progress display (`kiln convert`
/// draws a bar on a terminal). Every method may be left empty.
pub trait Progress {
    /// The payload copy begins: `total` bytes in all, over every output file.
    fn start(&self, total: u64) {
        let _ = total;
    }
    /// `bytes` more payload bytes were written.
    fn advance(&self, bytes: u64) {
        let _ = bytes;
    }
    /// Every payload is written (the check and the renames follow).
    fn finish(&self) {}
}

/// No progress display.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {}

/// The short form of a model id or payload digest in messages: its first 8 bytes in hex.
pub fn short_id(id: &[u8; kiln_nostd::digest::DIGEST_LEN]) -> String {
    hex::encode(id.split_at(8).0)
}

/// What a conversion did, for the summary line and the tests.
#[derive(Debug)]
pub struct Summary {
    /// The input's format.
    pub format: Format,
    /// Tensors written.
    pub tensors: usize,
    /// Bytes written to OUT.
    pub bytes: u64,
    /// What was not carried as-is.
    pub notes: Vec<String>,
}

/// The open input: a regular file, its path and its map (none when empty).
#[derive(Debug)]
pub struct Input {
    /// The path it was opened by, for messages.
    pub path: PathBuf,
    /// The open file (payloads are copied from it).
    pub file: File,
    /// Its map, for the headers (none for an empty file).
    pub map: Option<Mmap>,
}

impl Input {
    /// The mapped bytes (empty for an empty file).
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// Opens IN: a regular file, never waiting on a FIFO (exit 2 for anything else).
pub fn open(path: &Path) -> anyhow::Result<Input> {
    let file = platform::open_input(path).map_err(io_fail(format!("cannot read {}", path.display())))?;
    let meta = file.metadata().map_err(io_fail(format!("cannot read {}", path.display())))?;
    if !meta.is_file() {
        return Err(Usage(format!(
            "{} is {}; the input must be a regular file",
            path.display(),
            platform::kind_of(&meta)
        ))
        .into());
    }
    if meta.len() == 0 {
        return Ok(Input { path: path.to_path_buf(), file, map: None });
    }
    // SAFETY: read-only map of a regular file. If another process truncates
    // it while we read, accesses fault (SIGBUS), as with any mapped reader;
    // the payload bytes are read through the file descriptor, not the map.
    let map = unsafe { Mmap::map(&file) }.map_err(io_fail(format!("cannot map {}", path.display())))?;
    Ok(Input { path: path.to_path_buf(), file, map: Some(map) })
}

/// The input's format: forced, or detected from its first bytes.
pub fn format_of(input: &Input, path: &Path, from: Option<Format>) -> anyhow::Result<Format> {
    match from {
        Some(f) => Ok(f),
        None => Format::detect_file(input.bytes(), path).ok_or_else(|| match LegacyGgml::detect(input.bytes()) {
            Some(legacy) => anyhow!("{} ({}): {}", path.display(), legacy.magic, legacy.refusal()),
            None => anyhow!("{}: not a recognised format (safetensors, GGUF, HK, .npy, .npz, Kiln; ONNX by its .onnx name or --from onnx)", path.display()),
        }),
    }
}

/// Reads the input with its format's reader. `kiln_limits` false (validate,
/// inspect) reports the format's own verdict: what Kiln cannot hold is kept
/// in [`Model::limit`] (or, from a reader that stops there, is an error that
/// [`error::limit_reason`] recognises) instead of refusing the file.
pub fn read_model(
    format: Format,
    input: &Input,
    path: &Path,
    opts: &ReadOptions,
    kiln_limits: bool,
) -> anyhow::Result<Model> {
    let bytes = input.bytes();
    let opts = &ReadOptions { kiln_limits, ..opts.clone() };
    let model = match format {
        Format::Safetensors => safetensors_in::read(bytes, opts),
        Format::Gguf => gguf::read(bytes, opts),
        Format::Hk => hk_in::read(bytes, opts),
        Format::Npy => {
            let stem = path.file_stem().and_then(|s| s.to_str()).filter(|s| !s.is_empty()).unwrap_or("array");
            npy::read_npy(bytes, stem, opts)
        }
        Format::Npz => npy::read_npz(&input.file, bytes, opts),
        Format::Kiln => kiln_in::read(bytes, opts),
        Format::Onnx => onnx::read(input, path, opts),
    };
    model.with_context(|| format!("{} ({})", path.display(), format.name()))
}

/// Reads every buffered payload once without writing it: the CRC-32 of each
/// `.npz` member (what `kiln validate` checks that only reading the data can).
pub fn check_payloads(model: &Model, input: &Input, path: &Path) -> anyhow::Result<()> {
    let mut pump = copy::Pump::new(&input.file, path.display().to_string());
    for t in &model.tensors {
        // A transposed payload's checks are its stored bytes' (read in file order).
        let source = match &t.source {
            Source::Transposed(x) => &x.inner,
            other => other,
        };
        if matches!(source, Source::Checked(_) | Source::Zip(_)) {
            pump.run(source, t.len, &mut std::io::sink(), &|e| anyhow!(e), &mut |_| {})
                .with_context(|| format!("{} ({})", path.display(), model.format.name()))?;
        }
    }
    Ok(())
}

/// What the Kiln writer would refuse of a model its reader accepted (a rank
/// above 8, names one directory block cannot hold even alone, ...): the
/// same planning `kiln convert` does before it writes, for `kiln
/// validate`'s `kiln_limit`. Payload bytes (a bool that is not 0 or 1) are
/// only seen when written.
pub fn writer_limit(model: &Model) -> Option<String> {
    let planned = match shards::plan(&model.tensors, None) {
        Ok(planned) => planned,
        Err(e) => return Some(format!("{e:#}")),
    };
    planned
        .into_iter()
        .find_map(|r| write_kiln::plan(model.tensors.get(r).unwrap_or_default()).err())
        .map(|e| format!("{e:#}"))
}

/// Reads tensor `index`'s payload through the copy path (from the input
/// file it names, swapped, decompressed or CRC-checked as its source says),
/// for tests and tools that check what a conversion would write.
pub fn read_payload(model: &Model, index: usize) -> anyhow::Result<Vec<u8>> {
    let t = model.tensors.get(index).ok_or_else(|| anyhow!("no tensor {index}"))?;
    let input = model.inputs.get(t.input).ok_or_else(|| anyhow!("tensor {}: no input file {}", t.name, t.input))?;
    let mut pump = copy::Pump::new(&input.file, input.path.display().to_string());
    let mut bytes = Vec::new();
    pump.run(&t.source, t.len, &mut bytes, &|e| anyhow!(e), &mut |_| {})?;
    Ok(bytes)
}

/// Runs one conversion, reporting the payload copy to `progress`. Errors
/// about the input's content come back as `Err` with the message;
/// [`error::exit_code`] maps them to `kiln convert`'s exit codes.
pub fn convert(args: &Options, progress: &dyn Progress) -> anyhow::Result<Summary> {
    let Some(graph) = &args.onnx_graph else { return convert_tensors(args, progress) };
    let input = open(&args.input)?;
    if format_of(&input, &args.input, args.from)? != Format::Onnx {
        return Err(Usage(format!("--onnx-graph is for ONNX inputs; {} is not one", args.input.display())).into());
    }
    if matches!(args.to, To::Safetensors)
        || args.output.extension().is_some_and(|e| e == "safetensors") && args.to == To::Auto
    {
        return Err(Usage("--onnx-graph points the graph into a Kiln output; safetensors was asked for".into()).into());
    }
    onnx::graph::precheck(&input, graph, &args.output)?;
    let mut summary = convert_tensors(args, progress)?;
    let w = onnx::graph::write(&input, &args.output, graph, args.fsync)
        .with_context(|| format!("{} (onnx): the graph", args.input.display()))?;
    summary.notes.push(format!(
        "graph written to {}: {} initializers as external data in {} ({} of them lifted from Constant nodes), \
         {} left inline ({} bytes; docs/onnx.md, R1); its SHA-256 recorded in {}",
        graph.display(),
        w.external,
        args.output.display(),
        w.lifted,
        w.inline,
        w.inline_bytes,
        args.output.display()
    ));
    Ok(summary)
}

/// Extensions of OUT that name a format `kiln convert` does not write, with
/// that format's name (compared without regard to case). Writing Kiln or
/// safetensors bytes under such a name would mislead every tool that goes by
/// it, so OUT is refused (exit 2) before anything is written (or any
/// input read past what finding the files takes).
pub const NO_WRITER: [(&str, &str); 19] = [
    ("onnx", "ONNX"),
    ("gguf", "GGUF"),
    ("ggml", "ggml"),
    ("npy", "NumPy .npy"),
    ("npz", "NumPy .npz"),
    ("pt", "PyTorch"),
    ("pth", "PyTorch"),
    ("ckpt", "a checkpoint (PyTorch, TensorFlow)"),
    ("bin", "a PyTorch or ggml .bin"),
    ("h5", "HDF5 (Keras)"),
    ("hdf5", "HDF5"),
    ("keras", "Keras"),
    ("tflite", "TensorFlow Lite"),
    ("pb", "a TensorFlow protobuf"),
    ("pkl", "a Python pickle"),
    ("pickle", "a Python pickle"),
    ("msgpack", "Flax msgpack"),
    ("mlmodel", "Core ML"),
    ("hk", "HK"),
];

/// Refuses an OUT whose extension names a format with no writer ([`NO_WRITER`]).
fn refuse_foreign_out(out: &Path) -> anyhow::Result<()> {
    let Some(ext) = out.extension().and_then(|e| e.to_str()) else { return Ok(()) };
    let Some((_, name)) = NO_WRITER.iter().find(|(e, _)| e.eq_ignore_ascii_case(ext)) else { return Ok(()) };
    Err(Usage(format!(
        "{}: a .{ext} name says {name}, which kiln convert does not write; it writes Kiln (OUT ending in .kiln, \
         or any name not listed in docs/conversion.md) and safetensors (OUT ending in .safetensors); nothing was written",
        out.display()
    ))
    .into())
}

/// The conversion of the tensors (and metadata) alone.
fn convert_tensors(args: &Options, progress: &dyn Progress) -> anyhow::Result<Summary> {
    let opened = inputs::open_all(&args.input)?;
    let to = match args.to {
        To::Auto if args.output.extension().is_some_and(|e| e == "safetensors") => To::Safetensors,
        To::Auto => To::Record,
        other => other,
    };
    // Refuse what must not be replaced before reading anything.
    let out = resolve_out(&args.output, &opened.files)?;
    let side = if to == To::Tensors { Some(resolve_out(&sidecar(&args.output), &opened.files)?) } else { None };
    // Then (an OUT that is the input is the more telling refusal) a name that says another format.
    refuse_foreign_out(&args.output)?;
    let format = opened.format(args.from)?;
    if to == To::Safetensors && format != Format::Kiln {
        return Err(Usage(format!(
            "safetensors output is for Kiln inputs (the way back); convert {} to Kiln first",
            format.name()
        ))
        .into());
    }
    let opts = ReadOptions { onnx_graph: args.onnx_graph.is_some(), ..args.read.clone() };
    let mut model = inputs::read_all(opened, args.from, &opts)?;
    model.note_if_no_weights();
    let in_name = format!("{} ({})", args.input.display(), format.name());
    // The output shards: one, the single-file writer below; more (a sharded
    // input, one Kiln block's names, --max-shard-size), the manifest and its shards.
    let planned = shards::plan(&model.tensors, args.max_shard_size).with_context(|| in_name.clone())?;
    let inputs = std::mem::take(&mut model.inputs);
    let mut notes = std::mem::take(&mut model.notes);
    if planned.len() > 1 {
        return match to {
            To::Record => convert_sharded(args, progress, inputs, &out, model, &planned, notes).with_context(|| in_name.clone()),
            To::Tensors => Err(Usage(format!(
                "{in_name}: a sharded model ({} output shards) has no plain-directory form: --to tensors writes one block; \
                 write a model file (the default) instead",
                planned.len()
            ))
            .into()),
            To::Safetensors => convert_hub(args, progress, inputs, &out, model, &planned, notes).with_context(|| in_name.clone()),
            To::Auto => unreachable!(),
        };
    }
    let total = model.payload_bytes();
    progress.start(total);
    let temp = out.temp()?;
    let mut sink = copy::Sink::new(temp.file()?, &inputs, progress, args.output.display().to_string());
    // Where the block starts in OUT, to name the tensor of a fault the check finds.
    let mut block_at = 0u64;
    let mut plan_offsets: Option<(u64, Vec<u64>)> = None;
    // Where the digest table's bytes go, and what they are, once the payloads have passed.
    let mut table: Option<(u64, Vec<u8>)> = None;
    match to {
        To::Record | To::Tensors => {
            let plan = write_kiln::plan(&model.tensors).with_context(|| in_name.clone())?;
            if to == To::Record {
                let placeholder = write_kiln::digest_placeholder(model.tensors.len())?;
                let modulus = write_kiln::pad_modulus(total);
                let fields = u64_from(placeholder.len());
                let follow = model.format != Format::Onnx;
                let pad = write_kiln::pad_len(&model.tensors, &plan, &model.metadata, modulus, fields, follow)?;
                model.metadata.set_own(write_kiln::KEY_PAD, " ".repeat(pad));
                sink.bytes(&write_kiln::frame(Kind::Digests))?;
                write_kiln::write_dict(&mut sink, &model.metadata)?;
                let table_at = sink.written().saturating_add(4);
                sink.bytes(&placeholder)?;
                block_at = sink.written();
                table = Some((table_at, Vec::new()));
            }
            let digests = write_kiln::write_block(&mut sink, &model.tensors, &plan, to == To::Record)
                .with_context(|| in_name.clone())?;
            if let Some((_, bytes)) = table.as_mut() {
                *bytes = write_kiln::digest_table(&digests);
            }
            plan_offsets = Some((u64_from(plan.head.len()), plan.offsets));
        }
        To::Safetensors => {
            let plan = write_safetensors::plan(&model, &mut notes).with_context(|| in_name.clone())?;
            write_safetensors::write(&mut sink, &model, &plan).with_context(|| in_name.clone())?;
        }
        To::Auto => unreachable!(),
    }
    let written = sink.written();
    let out_file = sink.finish()?;
    progress.finish();
    if let Some((at, bytes)) = &table {
        platform::write_all_at(&out_file, bytes, *at)
            .map_err(io_fail(format!("cannot write {}", args.output.display())))?;
    }
    drop(out_file);
    if args.fsync {
        outfile::sync(&temp)?;
    }
    if let Err(e) = verify(temp.path(), to) {
        let culprit = plan_offsets
            .as_ref()
            .and_then(|(head, offsets)| locate(&model, block_at.saturating_add(*head), offsets, &e));
        return Err(match culprit {
            Some(c) => {
                anyhow!("{in_name}: {c}: {e} (a Kiln limit: the output would not be valid Kiln, so none was written)")
            }
            None => anyhow!("{in_name}: the written file did not check out: {e}"),
        });
    }
    let mut outputs = vec![(temp, &out)];
    if let (Some(side), To::Tensors) = (&side, to) {
        let st = side.temp()?;
        let mut f = st.file()?;
        let write = |f: &mut File| -> std::io::Result<()> {
            let mut w = std::io::BufWriter::new(f);
            w.write_all(b"{")?;
            for (i, (k, v)) in model.metadata.iter().enumerate() {
                w.write_all(if i == 0 { b"\n  " } else { b",\n  " })?;
                serde_json::to_writer(&mut w, k)?;
                w.write_all(b": ")?;
                serde_json::to_writer(&mut w, v)?;
            }
            w.write_all(if model.metadata.is_empty() { b"}\n" } else { b"\n}\n" })?;
            w.flush()
        };
        write(&mut f).map_err(io_fail(format!("cannot write {}", side.given.display())))?;
        drop(f);
        if args.fsync {
            outfile::sync(&st)?;
        }
        notes.push(format!("metadata written to {} (a standalone directory holds tensors only)", side.given.display()));
        outputs.push((st, side));
    }
    large_value_notes(&model, &mut notes);
    // Close the inputs before replacing OUT (Windows cannot replace a file
    // this process still has mapped; OUT is never an input, but may share
    // its directory entry's folder).
    drop(inputs);
    outfile::persist(outputs)?;
    if to == To::Safetensors {
        // An index beside a single file: loaders disagree on which one is the model.
        let index = write_hub::index_path(&args.output);
        if index != args.output && std::fs::symlink_metadata(&index).is_ok() {
            notes.push(format!(
                "{} is beside OUT (an earlier sharded conversion to this name?): some loaders read it and its shards                  instead of OUT; remove them if they are stale",
                index.display()
            ));
        }
    }
    Ok(Summary { format: model.format, tensors: model.tensors.len(), bytes: written, notes })
}

/// OUT (or its sidecar, or a shard beside it), refused when it is any of the input files.
pub(crate) fn resolve_out(given: &Path, files: &[Input]) -> anyhow::Result<Target> {
    let mut target = None;
    for input in files {
        target = Some(Target::resolve(given, &input.file)?);
    }
    target.ok_or_else(|| anyhow!("no input file"))
}

/// A conversion to a sharded model: the shards, then the manifest OUT.
fn convert_sharded(
    args: &Options,
    progress: &dyn Progress,
    inputs: Vec<Input>,
    out: &Target,
    mut model: Model,
    ranges: &[std::ops::Range<usize>],
    mut notes: Vec<String>,
) -> anyhow::Result<Summary> {
    let tensors = std::mem::take(&mut model.tensors);
    let tensor_count = tensors.len();
    let follow = model.format != Format::Onnx;
    let written = write_sharded::write(out, &inputs, tensors, ranges, &model.metadata, progress, (args.fsync, follow))?;
    large_value_notes(&model, &mut notes);
    let first = written.files.first().map(|(_, t)| t.given.display().to_string()).unwrap_or_default();
    notes.push(format!(
        "a sharded model: the manifest {} and {} shards beside it ({first}, ...)",
        args.output.display(),
        ranges.len(),
    ));
    // Close the inputs before replacing anything (Windows cannot replace a mapped file).
    drop(inputs);
    let bytes = written.bytes;
    persist_set(written, &mut notes)?;
    Ok(Summary { format: model.format, tensors: tensor_count, bytes, notes })
}

/// A conversion to a sharded safetensors model in the Hub's layout: the
/// shards, then the index (see [`write_hub`] for the names).
fn convert_hub(
    args: &Options,
    progress: &dyn Progress,
    inputs: Vec<Input>,
    out: &Target,
    mut model: Model,
    ranges: &[std::ops::Range<usize>],
    mut notes: Vec<String>,
) -> anyhow::Result<Summary> {
    let written = write_hub::write(out, &inputs, &mut model, ranges, &mut notes, progress, args.fsync)?;
    let name = |t: Option<&(outfile::Temp, Target)>| t.map(|(_, t)| t.given.display().to_string()).unwrap_or_default();
    let (first, index) = (name(written.files.first()), name(written.files.last()));
    notes.push(format!("a sharded model: the index {index} and {} shards beside it ({first}, ...)", ranges.len()));
    // Close the inputs before replacing anything (Windows cannot replace a mapped file).
    drop(inputs);
    let bytes = written.bytes;
    persist_set(written, &mut notes)?;
    Ok(Summary { format: model.format, tensors: model.tensors.len(), bytes, notes })
}

/// A written set of files (shards, then the manifest or index): each file
/// renamed into place in order, so the file that points at the others comes
/// last, then the files of an earlier conversion to the same name removed
/// (never before the new set is complete), each with a note.
fn persist_set(set: ShardSet, notes: &mut Vec<String>) -> anyhow::Result<()> {
    let (temps, targets): (Vec<_>, Vec<_>) = set.files.into_iter().unzip();
    outfile::persist(temps.into_iter().zip(&targets).collect())?;
    for old in &set.stale {
        std::fs::remove_file(old).map_err(io_fail(format!("cannot remove the earlier file {}", old.display())))?;
        notes.push(format!("removed {} (a file of an earlier conversion to this name)", old.display()));
    }
    Ok(())
}

/// What a sharded writer (`write_sharded`, `write_hub`) produced.
pub struct ShardSet {
    /// Temporary files and their targets, in rename order (the shards, then
    /// the file that names them).
    pub files: Vec<(outfile::Temp, Target)>,
    /// Bytes written, all files together.
    pub bytes: u64,
    /// Files of an earlier conversion to this name, removed once these are in place.
    pub stale: Vec<PathBuf>,
}

/// For a fault the check found at an offset of OUT inside a payload: which
/// tensor, and where that byte is in the input.
fn locate(model: &Model, payload_base: u64, offsets: &[u64], e: &VerifyError) -> Option<String> {
    let at = e.offset?;
    for (t, &off) in model.tensors.iter().zip(offsets) {
        let start = payload_base.saturating_add(off);
        if at >= start && at < start.saturating_add(t.len.max(1)) {
            let delta = at.saturating_sub(start);
            let input_at = match &t.source {
                Source::File { offset } | Source::Swap { offset, .. } | Source::Verified { offset, .. } => {
                    format!("byte {} of the input", offset.saturating_add(delta))
                }
                Source::Checked(c) => format!("byte {} of the input", c.offset.saturating_add(delta)),
                Source::Zip(z) => format!("byte {} of .npz member {}", z.skip.saturating_add(delta), z.member),
                Source::Bytes(_) => format!("byte {delta} of its payload"),
                Source::Transposed(_) => format!("byte {delta} of its payload (transposed to row-major order)"),
            };
            return Some(format!("tensor {} ({}), {input_at}", t.name, t.dtype.name()));
        }
    }
    None
}
/// `OUT.meta.json`.
pub fn sidecar(out: &Path) -> PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(".meta.json");
    PathBuf::from(s)
}

fn large_value_notes(model: &Model, notes: &mut Vec<String>) {
    let cap = u64::from(kiln_nostd::directory::DEFAULT_CAP);
    for (k, v) in model.metadata.iter() {
        if u64_from(v.len()) > cap {
            notes.push(format!(
                "metadata {k}: {} bytes, above the default 16 MiB string cap; readers must raise their byte cap",
                v.len()
            ));
        }
    }
}

/// A check of the written file failed: the core's message and offset in OUT.
#[derive(Debug)]
pub struct VerifyError {
    /// The offset in OUT, when the check knows it.
    pub offset: Option<u64>,
    /// The core's message (code, rule).
    pub message: String,
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn core_verify(e: kiln_model::Error) -> VerifyError {
    VerifyError {
        offset: Some(e.offset_u64()),
        message: format!("{}: {} (rule {})", e.code().as_str(), e.rule().description(), e.rule().id()),
    }
}

/// Checks the written file with the no_std validator (through a map: only
/// the header, descriptors, gaps and bool/packed payloads are read).
fn verify(path: &Path, to: To) -> Result<(), VerifyError> {
    let fail = |m: String| VerifyError { offset: None, message: m };
    let file = File::open(path).map_err(|e| fail(e.to_string()))?;
    if file.metadata().map_err(|e| fail(e.to_string()))?.len() == 0 {
        return Err(fail("empty output".into()));
    }
    // SAFETY: as in `open`; the file is our own temporary file.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| fail(e.to_string()))?;
    match to {
        To::Record => {
            let count = kiln_model::block_start(&map, &Limits::MAX)
                .ok()
                .and_then(|at| kiln_nostd::wire::Header::peek_count(map.get(at..)?))
                .filter(|&n| u64::from(n).saturating_mul(128) <= u64_from(map.len()))
                .unwrap_or(0);
            let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(count)];
            let parser = Parser::new().limits(Limits::MAX).scratch(&mut scratch);
            kiln_model::Model::parse_with(&map, parser).map(|_| ()).map_err(core_verify)
        }
        To::Tensors => Parser::new().limits(Limits::MAX).parse(&map).map(|_| ()).map_err(|e| core_verify(e.into())),
        To::Safetensors => safetensors::SafeTensors::read_metadata(&map).map(|_| ()).map_err(|e| fail(e.to_string())),
        To::Auto => Ok(()),
    }
}

/// A whole conversion of bytes held in memory, for the fuzz targets and
/// tests: what the reader made of the input, the payload bytes it took for
/// each tensor, and the bytes of the written output.
#[derive(Debug)]
pub struct InMemory {
    /// The input as its reader read it (the notes included).
    pub model: Model,
    /// Each tensor's payload as the reader delivers it (swapped to little-endian,
    /// decompressed), in `model.tensors` order.
    pub payloads: Vec<Vec<u8>>,
    /// The output file `kiln convert` wrote.
    pub output: Vec<u8>,
}

/// Runs `kiln convert` on `input` (written to a temporary file, as the
/// converter copies payloads file to file) read as `from` (`None`: detected)
/// with `read`'s budgets, writing `to` without fsync, and returns the output with what the reader
/// took. The conversion is [`convert`] itself, not a second code path.
pub fn convert_bytes(input: &[u8], from: Option<Format>, read: &ReadOptions, to: To) -> anyhow::Result<InMemory> {
    let dir = tempfile::tempdir().map_err(io_fail(String::from("cannot create a temporary directory")))?;
    // The name matters to the .npy reader (the tensor is named after the stem).
    let in_path = dir.path().join("input.npy");
    std::fs::write(&in_path, input).map_err(io_fail(format!("cannot write {}", in_path.display())))?;
    let out_name = if to == To::Safetensors { "output.safetensors" } else { "output.kiln" };
    let args =
        Options { from, read: read.clone(), to, fsync: false, ..Options::new(&in_path, dir.path().join(out_name)) };
    convert(&args, &Silent)?;
    let output = std::fs::read(&args.output).map_err(io_fail(format!("cannot read {}", args.output.display())))?;
    let file = open(&in_path)?;
    let format = format_of(&file, &in_path, from)?;
    let model = read_model(format, &file, &in_path, read, true)?;
    let mut pump = copy::Pump::new(&file.file, in_path.display().to_string());
    let mut payloads = Vec::with_capacity(model.tensors.len());
    for t in &model.tensors {
        let mut bytes = Vec::new();
        pump.run(&t.source, t.len, &mut bytes, &|e| anyhow!(e), &mut |_| {})?;
        payloads.push(bytes);
    }
    Ok(InMemory { model, payloads, output })
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_decimal_binary_and_bare() {
        for (text, n) in [
            ("0", 0),
            ("512", 512),
            ("512B", 512),
            ("500MB", 500_000_000),
            ("500mb", 500_000_000),
            ("5GB", 5_000_000_000),
            ("1KB", 1000),
            ("2TB", 2_000_000_000_000),
            ("1KiB", 1024),
            ("1kib", 1024),
            ("3MiB", 3 << 20),
            ("2GiB", 2 << 30),
            ("1TiB", 1 << 40),
            ("64M", 64 << 20),
            ("64m", 64 << 20),
            ("1K", 1024),
            ("64G", 64 << 30),
            ("2T", 2 << 40),
            (" 10 MB ", 10_000_000),
        ] {
            assert_eq!(parse_size(text), Ok(n), "{text}");
        }
    }

    #[test]
    fn sizes_refused_with_the_grammar() {
        for text in ["", "MB", "-1", "1.5GB", "10 XB", "1PB", "1 K B", "0x10"] {
            let e = parse_size(text).unwrap_err();
            assert!(e.contains("KiB") && e.contains("KB"), "{text}: {e}");
        }
        assert!(parse_size("18446744073709551615").is_ok());
        assert!(parse_size("18446744073709551616").unwrap_err().contains("too large"));
        assert!(parse_size("17179869184G").unwrap_err().contains("too large"));
    }
}
