//! Per-file validation. Everything `kiln validate` checks goes through
//! [`validate_source`] (a stream) or [`validate_bytes`], with a [`Target`]
//! built once from `--type` and `--framed` by [`ValidateOptions::new`].

use std::fmt;
use std::path::PathBuf;

use kiln_model::Metadata;
use kiln_model::{host, Error};
use kiln_nostd::frozen::{Reader, Schema};
use kiln_nostd::{Directory, Limits};

use crate::input::Source;
use crate::schema::{self, SchemaError, NODES};
use crate::stream;

/// The four flags `kiln validate` and `kiln decode` share: what a file holds and the caps.
#[derive(clap::Args, Debug)]
pub struct ValueArgs {
    /// Canonical type text of the value (`struct{id:i64,name:str,}`), or
    /// `@SCHEMA.json` for the type of a JSON Schema. Without it, `validate`
    /// reads a model file (spec/model-file.md) or, failing its frame, a
    /// standalone tensor directory, told apart by content (or, without
    /// --framed, the formats `kiln convert` reads); `decode` reads `tensors`.
    #[arg(long = "type", value_name = "TEXT")]
    pub type_text: Option<String>,
    /// Files start with a 16-byte KLN0 frame whose schema hash must match --type (SCHEMA otherwise).
    #[arg(long)]
    pub framed: bool,
    /// Cap on counts (list and dict counts, tensor_count); a larger count is LIMIT.
    #[arg(long, value_name = "N", default_value_t = kiln_nostd::directory::DEFAULT_CAP)]
    pub count_cap: u32,
    /// Cap on byte runs (str and list<u8> lengths, name heaps); a larger length is LIMIT.
    #[arg(long, value_name = "N", default_value_t = kiln_nostd::directory::DEFAULT_CAP)]
    pub byte_cap: u32,
}

impl ValueArgs {
    /// The options these flags ask for, `default_type` standing in for a missing --type;
    /// `Err` is the message for an unsupported --type.
    pub fn options(&self, default_type: Option<&str>) -> Result<ValidateOptions, TypeError> {
        let limits = Limits { count_cap: self.count_cap, byte_cap: self.byte_cap };
        ValidateOptions::new(self.type_text.as_deref().or(default_type), self.framed, limits)
    }
}

/// The canonical type text of a tensor directory.
pub const TENSORS: &str = "tensors";

/// What each file is checked as.
#[derive(Clone, Debug)]
pub enum Target {
    /// No `--type` and no `--framed`: a model file when the input starts
    /// like one (spec/model-file.md), otherwise a standalone directory block
    /// checked exactly as [`Target::Tensors`].
    Any,
    /// One standalone, unframed tensor directory block (`--type tensors`
    /// without `--framed`): checked by the directory parser, with a name
    /// table in heap scratch.
    Tensors,
    /// One Frozen value of this type, behind a 16-byte frame when `framed`.
    Frozen {
        /// The parsed type (its text lives for the whole run).
        schema: Box<Schema<'static, NODES>>,
        /// The file starts with `KLN0` and the schema hash.
        framed: bool,
    },
}

/// How `kiln validate` (and `kiln decode`) check each file.
#[derive(Clone, Debug)]
pub struct ValidateOptions {
    /// What a file must hold.
    pub target: Target,
    /// Count and byte caps (LIMIT above them).
    pub limits: Limits,
}

/// A `--type` argument that does not name a Kiln type. The CLI reports it
/// once and exits 2, before reading any file.
#[derive(Debug)]
pub enum TypeError {
    /// Type text that does not parse: TYPE (malformed) or LIMIT (deeper
    /// than 64 containers, or more nodes than the CLI's capacity).
    Text {
        /// The text as given.
        text: String,
        /// The parse error; its offset is a byte of the text.
        error: Error,
    },
    /// `--type @FILE`: the file could not be read.
    Read {
        /// The schema file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// `--type @FILE`: the JSON Schema is outside the supported subset.
    Schema {
        /// The schema file.
        path: PathBuf,
        /// Where and why.
        error: SchemaError,
    },
}

/// At most this many characters of a bad type text are quoted in a message.
const QUOTE_MAX: usize = 120;

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TypeError::Text { text, error } => {
                let quoted: String = text.chars().take(QUOTE_MAX).collect();
                let more = if text.chars().count() > QUOTE_MAX { "..." } else { "" };
                write!(
                    f,
                    "invalid --type {quoted:?}{more}: {} at byte {} of the type text: {} (rule {})",
                    error.code(),
                    error.offset(),
                    error.rule().description(),
                    error.rule().id()
                )?;
                if error.rule() == kiln_nostd::Rule::SchemaCapacity {
                    write!(f, "; this build holds {NODES} type nodes")?;
                }
                Ok(())
            }
            TypeError::Read { path, error } => write!(f, "invalid --type @{}: cannot read it: {error}", path.display()),
            TypeError::Schema { path, error } => write!(f, "invalid --type @{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for TypeError {}

/// The canonical type text a `--type` argument names: the text itself, or,
/// for `@FILE`, the type of the JSON Schema in FILE.
pub fn type_text(arg: &str) -> Result<String, TypeError> {
    let Some(file) = arg.strip_prefix('@') else {
        return Ok(arg.to_owned());
    };
    let path = PathBuf::from(file);
    let json = std::fs::read_to_string(&path).map_err(|error| TypeError::Read { path: path.clone(), error })?;
    let converted = schema::from_str(&json, &root_name(&path)).map_err(|error| TypeError::Schema { path, error })?;
    Ok(converted.text())
}

/// The default root struct name for a schema file: its name up to the
/// first dot (`person.schema.json` -> `person`).
pub fn root_name(path: &std::path::Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("root");
    name.split('.').next().filter(|s| !s.is_empty()).unwrap_or("root").to_owned()
}

/// Parses canonical type text with the CLI's node capacity. The text is
/// kept for the rest of the run.
pub fn parse_type(text: String) -> Result<Box<Schema<'static, NODES>>, TypeError> {
    let text: &'static str = Box::leak(text.into_boxed_str());
    Schema::parse(text).map(Box::new).map_err(|error| TypeError::Text { text: text.to_owned(), error: error.into() })
}

impl ValidateOptions {
    /// The options for `[--type ARG] [--framed]` with `limits`. `ARG` is
    /// canonical type text or `@FILE` (a JSON Schema). Neither flag: a model
    /// file or a standalone directory, by content. `tensors` without a frame
    /// is the standalone directory check; anything else is a Frozen value
    /// (`--framed` alone means `--type tensors --framed`).
    pub fn new(type_arg: Option<&str>, framed: bool, limits: Limits) -> Result<Self, TypeError> {
        let Some(type_arg) = type_arg.or(framed.then_some(TENSORS)) else {
            return Ok(ValidateOptions { target: Target::Any, limits });
        };
        let text = type_text(type_arg)?;
        let target = if text == TENSORS && !framed {
            Target::Tensors
        } else {
            Target::Frozen { schema: parse_type(text)?, framed }
        };
        Ok(ValidateOptions { target, limits })
    }
}

/// Checks one input. A standalone directory block read from standard input
/// or another pipe is checked as it streams, holding only its directory
/// prefix; a Frozen value (`--type`, `--framed`) is read into memory first.
/// The outer `Err` is a read error; the inner result is the verdict, the
/// same as [`validate_bytes`] gives on the same bytes.
pub fn validate_source(source: Source, opts: &ValidateOptions) -> std::io::Result<Result<(), Error>> {
    match (source, &opts.target) {
        (Source::Stream(reader), Target::Tensors) => {
            Ok(stream::check(reader, opts.limits, host::process_seed(), |_| ())?.verdict)
        }
        (Source::Stream(reader), Target::Any) => match stream::sniff_model(reader)? {
            stream::Sniffed::Model(bytes) => Ok(parse_any(&bytes, opts.limits, false).map(|_| ())),
            stream::Sniffed::Other(reader) => {
                Ok(stream::check(reader, opts.limits, host::process_seed(), |_| ())?.verdict)
            }
        },
        (source, _) => Ok(validate_bytes(source.into_input()?.bytes(), opts)),
    }
}

/// Checks one file's bytes. `Ok` when the file is accepted.
pub fn validate_bytes(bytes: &[u8], opts: &ValidateOptions) -> Result<(), Error> {
    match &opts.target {
        Target::Any => parse_any(bytes, opts.limits, false).map(|_| ()),
        Target::Tensors => parse_tensors(bytes, opts.limits).map(|_| ()),
        Target::Frozen { schema, framed } => {
            Reader::new().limits(opts.limits).framed(*framed).validate(bytes, schema).map_err(Into::into)
        }
    }
}

/// Checks `bytes` as one standalone tensor directory and returns its view.
///
/// The name check gets a hash table in heap scratch sized from the header's
/// tensor count, but only when that many descriptors could fit in the buffer
/// at all (count * 128 <= length), so a hostile count cannot make us allocate.
pub fn parse_tensors(bytes: &[u8], limits: Limits) -> Result<Directory<'_>, Error> {
    let mut scratch = host::name_scratch(bytes, 0, &limits).unwrap_or_default();
    Ok(host::parser(limits, &mut scratch).parse(bytes)?)
}

/// Checks `bytes` by content (`kiln_host::check_file`): a model file (its
/// metadata and directory; its digests compared when `verify`) when it
/// starts like one, otherwise one standalone directory, exactly as
/// [`parse_tensors`] checks it.
pub fn parse_any(bytes: &[u8], limits: Limits, verify: bool) -> Result<(Option<Metadata<'_>>, Directory<'_>), Error> {
    kiln_host::check_file(bytes, limits, verify).map_err(|fault| fault.error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(ty: &str, framed: bool) -> ValidateOptions {
        ValidateOptions::new(Some(ty), framed, Limits::DEFAULT).unwrap_or_else(|e| panic!("{ty}: {e}"))
    }

    #[test]
    fn targets_follow_type_and_frame() {
        assert!(matches!(opts("tensors", false).target, Target::Tensors));
        assert!(matches!(opts("tensors", true).target, Target::Frozen { framed: true, .. }));
        let Target::Frozen { schema, framed } = opts("list<u8>", false).target else { panic!("frozen") };
        assert_eq!((schema.text(), framed), ("list<u8>", false));
    }

    #[test]
    fn bad_type_text_names_the_code() {
        let e = ValidateOptions::new(Some("list<u8"), false, Limits::DEFAULT).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid --type \"list<u8\": TYPE at byte 7 of the type text: the type text is not canonical Kiln type text (rule TypeTextSyntax)"
        );
        let deep = format!("{}u8{}", "list<".repeat(65), ">".repeat(65));
        let e = ValidateOptions::new(Some(&deep), true, Limits::DEFAULT).unwrap_err().to_string();
        assert!(
            e.contains("LIMIT at byte 320 of the type text") && e.contains("(rule TypeDepth)") && e.contains("..."),
            "{e}"
        );
        let e = ValidateOptions::new(Some("@/nonexistent/s.json"), false, Limits::DEFAULT).unwrap_err().to_string();
        assert!(e.starts_with("invalid --type @/nonexistent/s.json: cannot read it: "), "{e}");
    }

    #[test]
    fn frozen_values_and_frames() {
        let o = opts("struct{id:i64,name:opt<str>,}", false);
        let mut buf = 7i64.to_le_bytes().to_vec();
        buf.extend([1, 2, 0, 0, 0, b'h', b'i']);
        assert!(validate_bytes(&buf, &o).is_ok());
        assert_eq!(validate_bytes(&buf[..buf.len() - 1], &o).unwrap_err().code().as_str(), "EOF");
        let framed = opts("struct{id:i64,name:opt<str>,}", true);
        let Target::Frozen { schema, .. } = &framed.target else { panic!("frozen") };
        let mut f = kiln_nostd::frozen::frame_bytes(schema.hash()).to_vec();
        f.extend(&buf);
        assert!(validate_bytes(&f, &framed).is_ok());
        f[8] ^= 1;
        let e = validate_bytes(&f, &framed).unwrap_err();
        assert_eq!((e.code().as_str(), e.offset()), ("SCHEMA", 8));
        // A framed empty directory.
        let mut t = kiln_nostd::frozen::frame_bytes(kiln_nostd::frozen::hash_text("tensors")).to_vec();
        t.extend(kiln_nostd::wire::EMPTY_BLOCK);
        assert!(validate_bytes(&t, &opts("tensors", true)).is_ok());
        assert_eq!(validate_bytes(&t, &opts("tensors", false)).unwrap_err().code().as_str(), "FRAME");
    }

    #[test]
    fn empty_input_is_eof_at_zero() {
        let opts = opts("tensors", false);
        let err = validate_bytes(&[], &opts).unwrap_err();
        assert_eq!((err.code().as_str(), err.offset()), ("EOF", 0));
        assert!(validate_bytes(&kiln_nostd::wire::EMPTY_BLOCK, &opts).is_ok());
    }
}
