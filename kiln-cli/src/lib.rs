//! The `kiln` command-line tool as a library: the binary (`src/main.rs`)
//! only calls [`main`]. The converter and the foreign-format readers are the
//! `kiln-convert` crate's; `kiln convert` parses its flags into that crate's
//! options and draws its progress bar.
//!
//! Exit codes: 0 all files accepted, 1 a file was rejected, 2 usage or I/O
//! error (2 wins over 1).

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

mod convert;
mod decode;
pub mod foreign;
mod gen_rust;
mod input;
mod inspect;
pub mod models;
mod output;
mod schema;
mod sign;
mod stream;
mod validate;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use kiln_model::{Kind, Metadata};
use kiln_nostd::{Directory, Limits};

use crate::input::{Source, STDIN};
use crate::output::FileReport;

/// Every file accepted.
const EXIT_OK: u8 = 0;
/// At least one file rejected.
const EXIT_REJECTED: u8 = 1;
/// A usage or I/O error.
const EXIT_ERROR: u8 = 2;

#[derive(Parser, Debug)]
#[command(name = "kiln", version, about = "Validate, inspect and decode Kiln v2 tensor directories and Frozen values")]
#[command(after_help = "Exit codes: 0 every file accepted, 1 a file was rejected, 2 a usage or I/O error.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check files against the Kiln v2 rules; one line per file.
    ///
    /// Prints `PATH: ok` or `PATH: CODE at byte N: description` per file
    /// (or one JSON object per line with --json). Exits 0 when every file is
    /// accepted, 1 when any is rejected, 2 on a usage or I/O error.
    ///
    /// Without --type, the formats `kiln convert` reads (safetensors, GGUF,
    /// HK, .npy, .npz; detected by content, or --from) get their reader's
    /// verdict: `PATH: ok (FORMAT)`, and with --json the object gains a
    /// "format" key (and "error"/"offset"/"rule" where the reader knows them).
    ///
    /// Model files (spec/model-file.md) are checked whole, their digests
    /// included (--no-verify-digests skips the hashing): `PATH: ok (model
    /// file, N tensors, digests verified)`; a shard alone says which model and
    /// position it is. A manifest checks the whole sharded model: the manifest,
    /// then every shard in order, opened only inside the manifest's folder; a
    /// fault names the shard file (`CODE at byte N of SHARD (tensor T): ...`,
    /// the offset in that file), and a missing shard rejects the model. With
    /// --json a model file's object gains "kind" and "digests_verified" (and
    /// "shard" for a shard alone); a manifest's gains "shards", one object per
    /// shard file, and on a fault "shard_file" and "tensor".
    Validate(ValidateArgs),
    /// Show a tensor directory's header and a table of its tensors.
    ///
    /// A manifest of a sharded model shows its metadata, its shard files and
    /// every tensor with its shard, from the manifest alone.
    ///
    /// Safetensors, GGUF, HK, .npy and .npz files (by content, or --from) get
    /// their metadata and a table of their tensors as `kiln convert` would
    /// carry them. Exits 1 (and prints the error) when the file is not valid,
    /// 2 when it cannot be read.
    Inspect(InspectArgs),
    /// Print one Frozen value (of --type) as JSON.
    ///
    /// Exits 1 (error on stderr, nothing on stdout) when the file is not a
    /// valid value of the type, 2 on a bad --type or an unreadable file.
    Decode(decode::DecodeArgs),
    /// Print the Kiln type text of a JSON Schema and its schema hash.
    ///
    /// Exits 1 when the schema uses a construct outside the supported subset.
    SchemaToType(gen_rust::SchemaToTypeArgs),
    /// Print Rust structs with #[derive(Kiln)] for a JSON Schema.
    ///
    /// Exits 1 when the schema uses a construct outside the supported subset.
    GenRust(gen_rust::GenRustArgs),
    /// Convert safetensors, GGUF, HK, NumPy .npy/.npz to Kiln, or Kiln to safetensors.
    ///
    /// The output is a framed Kiln record struct{metadata:dict<str,str>,tensors:tensors,}
    /// (or, with --to tensors, a standalone directory plus OUT.meta.json); an OUT ending
    /// in .safetensors converts a Kiln input back. Prints what could not be carried as-is.
    ///
    /// Output guarantees: OUT is replaced atomically (a new temporary file with a random
    /// name, created exclusively beside OUT, checked, flushed to disk (fsync; --no-fsync
    /// skips it), then renamed over it; OUT.meta.json only after OUT); on any failure, Ctrl-C or SIGTERM nothing is left behind and OUT
    /// is untouched. OUT that is the input file itself (same device and inode: also a hard
    /// link or a `..` path) is refused, and so is OUT that is a directory, device, FIFO or
    /// socket. A symbolic link OUT is written through (its target is replaced); a replaced
    /// OUT keeps its permission bits. IN must be a regular file (a FIFO is refused, never
    /// waited on).
    ///
    /// Budgets: --metadata-budget (64M) bounds the converted metadata; an .npz member is
    /// refused above --max-member-size (64G) decompressed or --max-ratio (1000:1). HK
    /// appendix lineage is verified (--no-verify-lineage skips it, with a note).
    ///
    /// Exits 0 on success, 1 when the input cannot be converted, 2 on a usage or I/O
    /// error, 130 when interrupted.
    Convert(convert::ConvertArgs),
    /// Sign a model file with an Ed25519 key: a signed record (spec/model-file.md).
    ///
    /// The output keeps the input's metadata, digests (computed when it has none) and block
    /// byte for byte, and carries the signer's public key and the release (--version,
    /// --target) under the signature, which covers every byte before the payloads. The key is
    /// a PKCS#8 PEM file as `openssl genpkey -algorithm ed25519` writes it. OUT is written as
    /// `kiln convert` writes (a temporary file beside it, checked with the key, renamed).
    /// Exits 0 when written, 1 when IN is not a valid model file, 2 on a usage or I/O error.
    Sign(sign::SignArgs),
    /// Check signed model files against a public key: the signature, then every digest and
    /// rule of the model, so one changed byte anywhere fails it.
    ///
    /// The key is an SPKI PEM file as `openssl pkey -pubout` writes it; --target and
    /// --newer-than also require the release to be for that target and above that version.
    /// An unsigned model is rejected (SIGNATURE). Exits 0 when every file verifies, 1 when one
    /// is rejected, 2 on a usage or I/O error.
    Verify(sign::VerifyArgs),
    /// Write the delta update that takes a device from OLD to the signed model NEW: only the
    /// payloads OLD does not already hold, with NEW's signed table (spec/model-file.md).
    ///
    /// Prints the bytes sent against the full update. Exits 0 when written, 1 when an input is
    /// not a valid model, 2 on a usage or I/O error.
    Delta(sign::DeltaArgs),
}

#[derive(Args, Debug)]
struct ValidateArgs {
    #[command(flatten)]
    value: validate::ValueArgs,
    /// Print one JSON object per file and line:
    /// {"file","ok"[,"error","offset","rule","message"]}.
    #[arg(long)]
    json: bool,
    /// Files to check (memory-mapped). `-` is standard input, read as it
    /// streams: a tensor directory is checked in constant memory (its
    /// directory prefix and a 64 KiB chunk); with --type/--framed the value is
    /// read into memory first.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// Do not hash payloads against a model file's digests (spec/model-file.md; hashed by
    /// default). A manifest's shards are still opened and checked against it.
    #[arg(long)]
    no_verify_digests: bool,
    #[command(flatten)]
    read: convert::ReadArgs,
}

#[derive(Args, Debug)]
struct InspectArgs {
    /// The tensor directory file (memory-mapped), or `-` for standard input
    /// (read as it streams; only the directory prefix is kept).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Print one JSON document (header fields and a `tensors` array).
    #[arg(long)]
    json: bool,
    /// Also hash every payload against a model file's digests before the table is printed
    /// (off by default: inspect reads the directory; `kiln validate` hashes). A manifest's
    /// shards are then opened and checked against it, as `kiln validate` does.
    #[arg(long)]
    verify_digests: bool,
    #[command(flatten)]
    read: convert::ReadArgs,
}

/// The command-line parser `main` uses, for checks that a documented command line
/// parses (kiln-cli/tests/doc_commands.rs) without running it.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Parses the command line and runs the command: what the `kiln` binary does.
pub fn main() -> ExitCode {
    let cli = Cli::parse(); // usage errors exit 2 here
    let result = match cli.command {
        Command::Validate(args) => run_validate(&args),
        Command::Inspect(args) => run_inspect(&args),
        Command::Decode(args) => decode::run(&args),
        Command::SchemaToType(args) => gen_rust::run_schema_to_type(&args),
        Command::GenRust(args) => gen_rust::run_gen_rust(&args),
        Command::Convert(args) => convert::run(&args),
        Command::Sign(args) => sign::run_sign(&args),
        Command::Verify(args) => sign::run_verify(&args),
        Command::Delta(args) => sign::run_delta(&args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            // A closed stdout (`kiln validate ... | head`) is not worth a message.
            if !is_broken_pipe(&err) {
                eprintln!("kiln: {err:#}");
            }
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().filter_map(|e| e.downcast_ref::<io::Error>()).any(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

fn run_validate(args: &ValidateArgs) -> anyhow::Result<u8> {
    let opts = match args.value.options(None) {
        Ok(opts) => opts,
        Err(unsupported) => {
            eprintln!("kiln: {unsupported}");
            return Ok(EXIT_ERROR);
        }
    };
    if args.files.iter().filter(|p| p.as_os_str() == STDIN).count() > 1 {
        eprintln!("kiln: standard input (-) can be named only once");
        return Ok(EXIT_ERROR);
    }
    let mut out = io::stdout().lock();
    let (mut rejected, mut io_failed) = (false, false);
    for path in &args.files {
        let plain = args.value.type_text.is_none() && !args.value.framed && path.as_os_str() != STDIN;
        if let Some((format, verdict)) = plain.then(|| foreign::probe(path, &args.read)).flatten() {
            if let foreign::Verdict::Io(e) = &verdict {
                eprintln!("kiln: cannot read {}: {e:#}", path.display());
                io_failed = true;
                continue;
            }
            rejected |= matches!(verdict, foreign::Verdict::Rejected(_));
            let line = foreign::validate_line(&display(path), format, &verdict, args.json);
            writeln!(out, "{line}").context("writing to stdout")?;
            continue;
        }
        let source = match Source::open(path) {
            Ok(source) => source,
            Err(err) => {
                eprintln!("kiln: cannot read {}: {err}", path.display());
                io_failed = true;
                continue;
            }
        };
        // A model file or manifest, from a file or standard input (read into memory).
        let by_content = args.value.type_text.is_none() && !args.value.framed;
        let (source, held) = match (by_content, source) {
            (true, Source::Stream(reader)) => match stream::sniff_model(reader) {
                Ok(stream::Sniffed::Model(bytes)) => (None, Some(Held::Bytes(bytes))),
                Ok(stream::Sniffed::Other(reader)) => (Some(Source::Stream(Box::new(reader))), None),
                Err(err) => {
                    eprintln!("kiln: cannot read {}: {err}", path.display());
                    io_failed = true;
                    continue;
                }
            },
            (true, Source::File(input)) if Kind::of(input.bytes()).is_some() => (None, Some(Held::File(input))),
            (_, source) => (Some(source), None),
        };
        let source = match (source, held) {
            (_, Some(held)) => {
                let report = match models::check(path, held.bytes(), opts.limits, !args.no_verify_digests) {
                    Ok(report) => report,
                    Err(err) => {
                        eprintln!("kiln: cannot read a shard of {}: {err}", path.display());
                        io_failed = true;
                        continue;
                    }
                };
                rejected |= report.fault.is_some();
                let file = display(path);
                let line = if args.json { report.json(&file) } else { report.human(&file) };
                writeln!(out, "{line}").context("writing to stdout")?;
                continue;
            }
            (Some(source), None) => source,
            (None, None) => continue,
        };
        let checked = validate::validate_source(source, &opts);
        let result = match checked {
            Ok(result) => result,
            Err(err) => {
                eprintln!("kiln: cannot read {}: {err}", path.display());
                io_failed = true;
                continue;
            }
        };
        rejected |= result.is_err();
        let file = display(path);
        writeln!(out, "{}", FileReport::new(&file, &result).line(args.json)).context("writing to stdout")?;
    }
    out.flush().context("writing to stdout")?;
    Ok(if io_failed {
        EXIT_ERROR
    } else if rejected {
        EXIT_REJECTED
    } else {
        EXIT_OK
    })
}

/// A model file's bytes, mapped or read from a stream.
enum Held {
    File(input::Input),
    Bytes(Vec<u8>),
}

impl Held {
    fn bytes(&self) -> &[u8] {
        match self {
            Held::File(input) => input.bytes(),
            Held::Bytes(b) => b,
        }
    }
}

/// What `kiln inspect` prints for a checked directory (and the metadata of
/// a model file, padding key hidden) read from `file`.
fn inspect_text(file: &str, metadata: Option<Metadata<'_>>, dir: &Directory<'_>, json: bool) -> String {
    let summary = inspect::Summary::new(file.to_owned(), dir).with_metadata(metadata);
    if json {
        output::summary_json(&summary) + "\n"
    } else {
        output::summary_human(&summary)
    }
}

fn run_inspect(args: &InspectArgs) -> anyhow::Result<u8> {
    let file = display(&args.file);
    if args.file.as_os_str() != STDIN {
        if let Some((format, verdict)) = foreign::probe(&args.file, &args.read) {
            return Ok(match verdict {
                foreign::Verdict::Ok(model) if model.limit.is_none() => {
                    output::print(&foreign::inspect_text(&file, &model, args.json))?;
                    EXIT_OK
                }
                // No table of what convert would write: it writes nothing.
                foreign::Verdict::Ok(_) | foreign::Verdict::Limited(_) | foreign::Verdict::Rejected(_) => {
                    let line = foreign::validate_line(&file, format, &verdict, args.json);
                    if args.json {
                        output::print(&(line + "\n"))?;
                    } else if let foreign::Verdict::Rejected(_) = verdict {
                        eprintln!("{file}: {line}");
                    } else {
                        eprintln!("{line}");
                    }
                    EXIT_REJECTED
                }
                foreign::Verdict::Io(e) => {
                    eprintln!("kiln: cannot read {file}: {e:#}");
                    EXIT_ERROR
                }
            });
        }
    }
    // A file is checked in place; a stream as it arrives, the table built
    // from its directory prefix and printed once the whole block passed.
    let checked = Source::open(&args.file).and_then(|source| match source {
        Source::File(input) if Kind::of(input.bytes()) == Some(Kind::Manifest) => {
            if args.verify_digests {
                // The whole sharded model, as `kiln validate` checks it; its report names the shard.
                let report = models::check(&args.file, input.bytes(), Limits::DEFAULT, true)?;
                if report.fault.is_some() {
                    return Ok(Err(report));
                }
            }
            Ok(Ok(models::inspect_manifest(&file, input.bytes(), args.json)))
        }
        Source::File(input) => Ok(Ok(match validate::parse_any(input.bytes(), Limits::DEFAULT, args.verify_digests) {
            Ok((metadata, dir)) => Ok(inspect_text(&file, metadata, &dir, args.json)),
            Err(err) => Err(err),
        })),
        Source::Stream(reader) => {
            let reader = match stream::sniff_model(reader)? {
                stream::Sniffed::Model(bytes) => {
                    return Ok(Ok(validate::parse_any(&bytes, Limits::DEFAULT, args.verify_digests)
                        .map(|(metadata, dir)| inspect_text(&file, metadata, &dir, args.json))));
                }
                stream::Sniffed::Other(reader) => reader,
            };
            let seed = kiln_model::host::process_seed();
            let streamed =
                stream::check(reader, Limits::DEFAULT, seed, |dir| inspect_text(&file, None, dir, args.json))?;
            Ok(Ok(match (streamed.verdict, streamed.directory) {
                (Ok(()), Some(text)) => Ok(text),
                // Cannot happen: an accepted block's prefix passed before its payload.
                (Ok(()), None) => return Err(io::Error::other("the block passed, but its directory was not reported")),
                (Err(err), _) => Err(err),
            }))
        }
    });
    let result = match checked {
        Ok(Ok(result)) => result,
        Ok(Err(report)) => {
            // A sharded model's fault, reported as `kiln validate` reports it.
            if args.json {
                output::print(&(report.json(&file) + "\n"))?;
            } else {
                eprintln!("{}", report.human(&file));
            }
            return Ok(EXIT_REJECTED);
        }
        Err(err) => {
            eprintln!("kiln: cannot read {}: {err}", args.file.display());
            return Ok(EXIT_ERROR);
        }
    };
    let mut out = io::stdout().lock();
    match result {
        Ok(text) => {
            out.write_all(text.as_bytes()).context("writing to stdout")?;
            out.flush().context("writing to stdout")?;
            Ok(EXIT_OK)
        }
        Err(err) => {
            if args.json {
                writeln!(out, "{}", FileReport::new(&file, &Err(err)).json()).context("writing to stdout")?;
            } else {
                eprintln!("{}", output::inspect_error_human(&file, &err));
            }
            Ok(EXIT_REJECTED)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
