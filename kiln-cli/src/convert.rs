//! `kiln convert IN -o OUT`: the command's flags, its messages and exit
//! codes, the progress bar and the SIGINT/SIGTERM handler. The conversion
//! itself is the `kiln-convert` crate's ([`kiln_convert::convert`], which
//! `kiln.convert` in Python calls too).

use std::cell::OnceCell;
use std::path::PathBuf;
use std::sync::Once;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kiln_convert::outfile::remove_pending;
use kiln_convert::{error, parse_size, Format, Options, Progress, ReadOptions, To};

/// Progress bars appear for conversions of at least this many payload bytes.
const PROGRESS_MIN: u64 = 64 << 20;

/// Exit code after SIGINT/SIGTERM (128 + SIGINT, the shell's convention).
const EXIT_INTERRUPTED: i32 = 130;

/// Installs the SIGINT/SIGTERM handler (once): it removes the temporary
/// files of `kiln convert` and `kiln sign` and exits 130.
pub(crate) fn install_cleanup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            // Held until the process exits: no rename runs after this.
            let _held = remove_pending();
            eprintln!("kiln convert: interrupted; no output written");
            std::process::exit(EXIT_INTERRUPTED);
        });
    });
}

/// `--from`: `auto` (detection from the first bytes, `None`) or a [`Format`]'s name.
fn from_parser() -> impl TypedValueParser<Value = Option<Format>> {
    let names = std::iter::once("auto").chain(Format::ALL.iter().map(|f| f.name()));
    PossibleValuesParser::new(names).map(|name| Format::ALL.into_iter().find(|f| f.name() == name))
}

/// `--to`: a [`To`]'s name, each listed with what it writes.
fn to_parser() -> impl TypedValueParser<Value = To> {
    let values = To::ALL.map(|t| PossibleValue::new(t.name()).help(t.about()));
    PossibleValuesParser::new(values).map(|name| To::named(&name).unwrap_or(To::Auto))
}

/// A progress bar on a terminal for conversions of at least
/// [`PROGRESS_MIN`] bytes (none with --quiet); nothing otherwise.
struct Bar {
    quiet: bool,
    bar: OnceCell<ProgressBar>,
}

impl Progress for Bar {
    fn start(&self, total: u64) {
        use std::io::IsTerminal;
        if self.quiet || total < PROGRESS_MIN || !std::io::stderr().is_terminal() {
            return;
        }
        let bar = ProgressBar::new(total);
        if let Ok(style) =
            ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} [{bar:30}] {bytes_per_sec} eta {eta}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        let _ = self.bar.set(bar);
    }

    fn advance(&self, bytes: u64) {
        if let Some(bar) = self.bar.get() {
            bar.inc(bytes);
        }
    }

    fn finish(&self) {
        if let Some(bar) = self.bar.get() {
            bar.finish_and_clear();
        }
    }
}

/// What every reader of foreign formats may spend, and whether HK lineage is checked.
#[derive(Args, Debug, Clone)]
pub struct ReadArgs {
    /// Input format, when detection from the first bytes (auto) should be overridden.
    // The full path keeps clap from reading `Option` as "the flag may be absent".
    #[arg(long, value_name = "FORMAT", default_value = "auto", value_parser = from_parser())]
    pub from: ::std::option::Option<Format>,
    /// Do not verify the SHA-256 lineage of HK appendix records (verified by default; a note says it was skipped).
    #[arg(long)]
    pub no_verify_lineage: bool,
    /// The most bytes the converted metadata may take (the whole dictionary); more is refused.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse_size)]
    pub metadata_budget: u64,
    /// .npz: refuse a compressed member that decompresses to more than this.
    #[arg(long, value_name = "SIZE", default_value = "64G", value_parser = parse_size)]
    pub max_member_size: u64,
    /// .npz: refuse a compressed member whose decompressed/compressed ratio is above this.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_ratio: u64,
}

impl ReadArgs {
    /// The readers' options these flags ask for.
    pub fn options(&self) -> ReadOptions {
        ReadOptions {
            metadata_budget: self.metadata_budget,
            max_member: self.max_member_size,
            max_ratio: self.max_ratio,
            verify_lineage: !self.no_verify_lineage,
            onnx_graph: false,
            kiln_limits: true,
        }
    }
}

/// `kiln convert` arguments.
#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// The input: a file (safetensors, GGUF, HK, .npy, .npz or Kiln; detected from its bytes);
    /// a Hugging Face index (model.safetensors.index.json) with its shards beside it; a folder
    /// holding one *.safetensors.index.json or exactly one .safetensors file; any file of a
    /// llama.cpp gguf-split set (NAME-00001-of-00003.gguf: every sibling is read and checked);
    /// or a Kiln manifest with its shards beside it (each checked against it, every payload's
    /// digest as it is copied).
    ///
    /// A folder's config.json, generation_config.json and tokenizer files (tokenizer.json,
    /// tokenizer_config.json, tokenizer.model, special_tokens_map.json, vocab.*, merges.txt)
    /// are not tensors and are NOT carried into the output: a note lists the ones found; copy
    /// them by hand beside OUT (into OUT's folder) if a loader needs them.
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// The output file, a regular file (or a link to one, which is written through).
    ///
    /// A sharded model (a sharded input, or one split by --max-shard-size) is written as
    /// the manifest OUT with the shards STEM-00001-of-0000N.kiln beside it (STEM: OUT's name
    /// without .kiln) or, to safetensors, in the Hugging Face Hub's layout: for OUT
    /// DIR/STEM.safetensors, the shards DIR/STEM-00001-of-0000N.safetensors and the index
    /// DIR/STEM.safetensors.index.json (OUT model.safetensors: the names transformers
    /// writes), and OUT itself is not written: an earlier file there is removed once the
    /// new set is in place. In both forms, shards of an earlier conversion to the same name
    /// with another count are removed then too.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// The input format and the readers' budgets.
    #[command(flatten)]
    pub read: ReadArgs,
    /// Output format.
    #[arg(long, value_name = "TO", default_value = "auto", value_parser = to_parser())]
    pub to: To,
    /// Do not fsync the output before renaming it into place. By default OUT (and
    /// OUT.meta.json) are flushed to disk first, so a power cut leaves the old OUT or
    /// the whole new one; without it the rename may reach the disk before the data.
    #[arg(long)]
    pub no_fsync: bool,
    /// Accepted for scripts written when fsync was opt-in; fsync is the default now.
    #[arg(long, hide = true)]
    pub fsync: bool,
    /// No progress bar and no summary line (notes about what was not carried are still printed).
    #[arg(short, long)]
    pub quiet: bool,
    /// Split the output into shards of at most SIZE payload bytes (about the file size); a
    /// tensor larger than SIZE gets a shard of its own. SIZE: bytes, or KB/MB/GB/TB (powers of
    /// 1000, as the Hub writes "500MB"), KiB/MiB/GiB/TiB or K/M/G/T (powers of 1024).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_shard_size: Option<u64>,
    /// ONNX input: also write its graph to GRAPH (in OUT's folder, e.g. OUT.onnx) with every
    /// initializer as external data pointing into OUT (or, sharded, into its shard): location,
    /// offset and length of the tensor's payload. onnxruntime then runs GRAPH with the weights
    /// read from the Kiln file(s) as they are.
    #[arg(long, value_name = "GRAPH")]
    pub onnx_graph: Option<PathBuf>,
}

impl ConvertArgs {
    /// The conversion these flags ask for.
    pub fn options(&self) -> Options {
        Options {
            input: self.input.clone(),
            output: self.output.clone(),
            from: self.read.from,
            read: self.read.options(),
            to: self.to,
            fsync: !self.no_fsync,
            max_shard_size: self.max_shard_size,
            onnx_graph: self.onnx_graph.clone(),
        }
    }
}

/// The `kiln convert` subcommand: prints the notes and a summary on stderr;
/// returns the exit code (0 done, 1 the input could not be converted, 2
/// usage or I/O; 130 after SIGINT/SIGTERM, from the signal handler).
pub fn run(args: &ConvertArgs) -> anyhow::Result<u8> {
    install_cleanup();
    let bar = Bar { quiet: args.quiet, bar: OnceCell::new() };
    match kiln_convert::convert(&args.options(), &bar) {
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
            Ok(error::exit_code(&e))
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, Command, FromArgMatches};

    use super::ConvertArgs;
    use kiln_convert::Options;

    fn parse(args: &[&str]) -> ConvertArgs {
        let command = ConvertArgs::augment_args(Command::new("convert").no_binary_name(true));
        ConvertArgs::from_arg_matches(&command.try_get_matches_from(args).unwrap()).unwrap()
    }

    #[test]
    fn the_flags_defaults_are_the_converters() {
        let given = parse(&["in.gguf", "-o", "out.kiln"]).options();
        assert_eq!(format!("{given:?}"), format!("{:?}", Options::new("in.gguf", "out.kiln")));
    }

    #[test]
    fn every_flag_reaches_the_options() {
        let given = parse(&[
            "in.onnx",
            "-o",
            "out.kiln",
            "--from",
            "onnx",
            "--to",
            "record",
            "--no-fsync",
            "--no-verify-lineage",
            "--metadata-budget",
            "1K",
            "--max-member-size",
            "2MB",
            "--max-ratio",
            "7",
            "--max-shard-size",
            "500MB",
            "--onnx-graph",
            "g.onnx",
        ])
        .options();
        assert_eq!(given.from, Some(kiln_convert::Format::Onnx));
        assert_eq!(given.to, kiln_convert::To::Record);
        assert!(!given.fsync && !given.read.verify_lineage);
        assert_eq!((given.read.metadata_budget, given.read.max_member, given.read.max_ratio), (1024, 2_000_000, 7));
        assert_eq!(given.max_shard_size, Some(500_000_000));
        assert_eq!(given.onnx_graph.as_deref(), Some(std::path::Path::new("g.onnx")));
    }
}
