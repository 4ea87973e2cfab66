//! `kiln decode`: one checked Frozen value printed as JSON.
//!
//! | Kiln | JSON |
//! |---|---|
//! | `struct{..}` | object, fields in declaration order |
//! | `dict<str,V>` | object, keys in wire (byte) order |
//! | `list<T>` | array |
//! | `list<u8>` | lowercase hex string (`"00ff"`) |
//! | `opt<T>` | `null` or the value |
//! | `str` | string |
//! | `bool` | `true` / `false` |
//! | `i8`..`i32`, `u8`..`u32` | number |
//! | `i64` `u64` `int` `uint` | number when within ±(2^53−1), else a decimal string |
//! | `f32` `f64` | shortest round-trip number (`-0.0` kept); `"NaN"`, `"Infinity"`, `"-Infinity"` |
//! | `tensors` | array of tensor objects, as in `kiln inspect --json` |
//!
//! The whole file is checked before anything is printed, so an invalid file
//! prints no JSON.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use kiln_nostd::frozen::{Kind, Reader, Value};
use kiln_nostd::Directory;
use serde_json::Value as Json;

use crate::input::Input;
use crate::inspect::tensor_table;
use crate::validate::{parse_tensors, Target, ValueArgs, TENSORS};

/// Largest integer magnitude a JSON number carries exactly in a double.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// `kiln decode` arguments.
#[derive(Args, Debug)]
pub struct DecodeArgs {
    #[command(flatten)]
    pub value: ValueArgs,
    /// Print the JSON on one line (default: indented; arrays of scalars fill lines of up to 100 columns).
    #[arg(long)]
    pub compact: bool,
    /// The file to decode (memory-mapped).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

/// Runs `kiln decode`: 0 printed, 1 the file is invalid (error on stderr),
/// 2 a bad --type or an unreadable file.
pub fn run(args: &DecodeArgs) -> anyhow::Result<u8> {
    let opts = match args.value.options(Some(TENSORS)) {
        Ok(opts) => opts,
        Err(err) => {
            eprintln!("kiln: {err}");
            return Ok(crate::EXIT_ERROR);
        }
    };
    let input = match Input::open(&args.file) {
        Ok(input) => input,
        Err(err) => {
            eprintln!("kiln: cannot read {}: {err}", args.file.display());
            return Ok(crate::EXIT_ERROR);
        }
    };
    let bytes = input.bytes();
    let mut out = BufWriter::new(io::stdout().lock());
    let mut json = JsonWriter::new(&mut out, !args.compact);
    let checked = match &opts.target {
        // `decode` always has a --type, so `Any` does not occur; it would be a directory.
        Target::Tensors | Target::Any => parse_tensors(bytes, opts.limits).map(|dir| json.tensors(&dir)),
        Target::Frozen { schema, framed } => Reader::new()
            .limits(opts.limits)
            .framed(*framed)
            .read(bytes, schema)
            .map(|v| json.value(v))
            .map_err(Into::into),
    };
    match checked {
        Ok(written) => {
            written.and_then(|()| out.write_all(b"\n")).and_then(|()| out.flush()).context("writing to stdout")?;
            Ok(crate::EXIT_OK)
        }
        Err(err) => {
            eprintln!("{}", crate::output::inspect_error_human(&args.file.display().to_string(), &err));
            Ok(crate::EXIT_REJECTED)
        }
    }
}

/// Writes JSON for checked values, indented or compact.
pub struct JsonWriter<W: Write> {
    w: W,
    pretty: bool,
    depth: usize,
    /// Column of the next byte (pretty line filling).
    col: usize,
}

/// The JSON text of a 64-bit-range signed integer.
pub fn int_text(n: i64) -> String {
    if n.unsigned_abs() <= MAX_SAFE_INTEGER {
        n.to_string()
    } else {
        format!("\"{n}\"")
    }
}

/// The JSON text of an unsigned integer.
pub fn uint_text(n: u64) -> String {
    if n <= MAX_SAFE_INTEGER {
        n.to_string()
    } else {
        format!("\"{n}\"")
    }
}

/// The JSON text of a float: `Debug` is Rust's shortest round-trip form
/// (`1.0`, `-0.0`, `1e-7`), which is a JSON number; the non-finite values
/// become strings.
fn float_text<F: Into<f64> + std::fmt::Debug + Copy>(x: F) -> String {
    let wide: f64 = x.into();
    if wide.is_nan() {
        "\"NaN\"".to_owned()
    } else if wide == f64::INFINITY {
        "\"Infinity\"".to_owned()
    } else if wide == f64::NEG_INFINITY {
        "\"-Infinity\"".to_owned()
    } else {
        format!("{x:?}")
    }
}

/// A kind whose JSON is one token (so a list of it fills lines).
fn is_token(kind: Kind) -> bool {
    !kind.is_container() && kind != Kind::Tensors
}

/// Pretty output keeps arrays of scalars within this many columns when it can.
pub const WIDTH: usize = 100;

/// The JSON token of a scalar value (bool, number, string).
fn token(v: Value<'_, '_>) -> String {
    match v.kind() {
        Kind::Bool => (if v.as_bool() == Some(true) { "true" } else { "false" }).to_owned(),
        Kind::I8 | Kind::I16 | Kind::I32 | Kind::I64 | Kind::Int => int_text(v.as_i64().unwrap_or(0)),
        Kind::U8 | Kind::U16 | Kind::U32 | Kind::U64 | Kind::Uint => uint_text(v.as_u64().unwrap_or(0)),
        Kind::F32 => float_text(v.as_f32().unwrap_or(f32::NAN)),
        Kind::F64 => float_text(v.as_f64().unwrap_or(f64::NAN)),
        _ => {
            let text = match v.as_str() {
                Some(s) => std::borrow::Cow::Borrowed(s),
                None => String::from_utf8_lossy(v.as_str_bytes().unwrap_or(&[])),
            };
            serde_json::to_string(&text).unwrap_or_default()
        }
    }
}

impl<W: Write> JsonWriter<W> {
    /// A writer; `pretty` indents objects by two spaces.
    pub fn new(w: W, pretty: bool) -> Self {
        JsonWriter { w, pretty, depth: 0, col: 0 }
    }

    fn raw(&mut self, s: &str) -> io::Result<()> {
        self.col = match s.rfind('\n') {
            Some(i) => s.len().saturating_sub(i).saturating_sub(1),
            None => self.col.saturating_add(s.len()),
        };
        self.w.write_all(s.as_bytes())
    }

    fn newline(&mut self) -> io::Result<()> {
        if self.pretty {
            let indent = "  ".repeat(self.depth);
            self.raw("\n")?;
            self.raw(&indent)?;
        }
        Ok(())
    }

    /// One element per line when pretty.
    fn array<T>(
        &mut self,
        items: impl Iterator<Item = T>,
        mut each: impl FnMut(&mut Self, T) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut items = items.peekable();
        if items.peek().is_none() {
            return self.raw("[]");
        }
        self.raw("[")?;
        self.depth = self.depth.saturating_add(1);
        let mut first = true;
        for item in items {
            if !first {
                self.raw(",")?;
            }
            first = false;
            self.newline()?;
            each(self, item)?;
        }
        self.depth = self.depth.saturating_sub(1);
        self.newline()?;
        self.raw("]")
    }

    /// An array of scalar tokens. Pretty: `[a, b]` on the current line when
    /// it fits in [`WIDTH`] columns, else the elements fill indented lines
    /// of that width and `]` closes on its own line. Compact: `[a,b]`.
    fn tokens(&mut self, items: impl Iterator<Item = String>) -> io::Result<()> {
        if !self.pretty {
            self.raw("[")?;
            for (i, t) in items.enumerate() {
                if i > 0 {
                    self.raw(",")?;
                }
                self.raw(&t)?;
            }
            return self.raw("]");
        }
        // Collect until the line would overflow; then switch to wrapping.
        let mut pending: Vec<String> = Vec::new();
        let mut width = self.col.saturating_add(2);
        let mut items = items.fuse();
        let mut wrapping = false;
        for t in items.by_ref() {
            width = width.saturating_add(t.len()).saturating_add(if pending.is_empty() { 0 } else { 2 });
            pending.push(t);
            if width > WIDTH {
                wrapping = true;
                break;
            }
        }
        if !wrapping {
            return self.raw(&format!("[{}]", pending.join(", ")));
        }
        self.raw("[")?;
        self.depth = self.depth.saturating_add(1);
        self.newline()?;
        let line_start = self.col;
        for (i, t) in pending.into_iter().chain(items).enumerate() {
            if i > 0 {
                if self.col.saturating_add(2).saturating_add(t.len()) > WIDTH && self.col > line_start {
                    self.raw(",")?;
                    self.newline()?;
                } else {
                    self.raw(", ")?;
                }
            }
            self.raw(&t)?;
        }
        self.depth = self.depth.saturating_sub(1);
        self.newline()?;
        self.raw("]")
    }

    /// `{"k": v, ...}`, one member per line when pretty.
    fn object<'k, T>(
        &mut self,
        items: impl Iterator<Item = (&'k str, T)>,
        mut each: impl FnMut(&mut Self, T) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut items = items.peekable();
        if items.peek().is_none() {
            return self.raw("{}");
        }
        self.raw("{")?;
        self.depth = self.depth.saturating_add(1);
        let mut first = true;
        for (key, item) in items {
            if !first {
                self.raw(",")?;
            }
            first = false;
            self.newline()?;
            self.raw(&serde_json::to_string(key).unwrap_or_default())?;
            self.raw(if self.pretty { ": " } else { ":" })?;
            each(self, item)?;
        }
        self.depth = self.depth.saturating_sub(1);
        self.newline()?;
        self.raw("}")
    }

    /// One checked Frozen value.
    pub fn value(&mut self, v: Value<'_, '_>) -> io::Result<()> {
        match v.kind() {
            Kind::Tensors => match v.as_tensors() {
                Some(dir) => self.tensors(&dir),
                None => self.raw("null"),
            },
            Kind::List => {
                if let Some(bytes) = v.as_bytes() {
                    return self.raw(&format!("\"{}\"", hex::encode(bytes)));
                }
                let Some(list) = v.as_list() else { return self.raw("[]") };
                if is_token(list.elem().kind()) {
                    self.tokens(list.iter().map(token))
                } else {
                    self.array(list.iter(), |w, e| w.value(e))
                }
            }
            Kind::Opt => match v.as_opt().flatten() {
                Some(inner) => self.value(inner),
                None => self.raw("null"),
            },
            Kind::Dict => match v.as_dict() {
                Some(dict) => self.object(dict.iter(), |w, e| w.value(e)),
                None => self.raw("{}"),
            },
            Kind::Struct => match v.as_struct() {
                Some(st) => self.object(st.fields(), |w, e| w.value(e)),
                None => self.raw("{}"),
            },
            _ => self.raw(&token(v)),
        }
    }

    /// A checked directory as its tensor table.
    pub fn tensors(&mut self, dir: &Directory<'_>) -> io::Result<()> {
        let table = serde_json::to_value(tensor_table(dir)).map_err(io::Error::from)?;
        self.json(&table)
    }

    /// Any JSON value, in the same style.
    pub fn json(&mut self, v: &Json) -> io::Result<()> {
        match v {
            Json::Array(items) if items.iter().all(|i| !matches!(i, Json::Array(_) | Json::Object(_))) => {
                self.tokens(items.iter().map(|i| i.to_string()))
            }
            Json::Array(items) => self.array(items.iter(), |w, e| w.json(e)),
            Json::Object(map) => self.object(map.iter().map(|(k, v)| (k.as_str(), v)), |w, e| w.json(e)),
            other => self.raw(&other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_nostd::frozen::{read, Schema};

    fn decode(ty: &str, buf: &[u8], pretty: bool) -> String {
        let schema: Schema<'_> = Schema::parse(ty).unwrap();
        let v = read(buf, &schema, &kiln_nostd::Limits::DEFAULT, false).unwrap();
        let mut out = Vec::new();
        JsonWriter::new(&mut out, pretty).value(v).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn integers_beyond_2_53_are_strings() {
        assert_eq!(int_text(9_007_199_254_740_991), "9007199254740991");
        assert_eq!(int_text(-9_007_199_254_740_991), "-9007199254740991");
        assert_eq!(int_text(9_007_199_254_740_992), "\"9007199254740992\"");
        assert_eq!(int_text(i64::MIN), "\"-9223372036854775808\"");
        assert_eq!(uint_text(u64::MAX), "\"18446744073709551615\"");
        assert_eq!(decode("i64", &(-5i64).to_le_bytes(), false), "-5");
        assert_eq!(decode("uint", &u64::MAX.to_le_bytes(), false), "\"18446744073709551615\"");
        assert_eq!(decode("i8", &[0xff], false), "-1");
    }

    #[test]
    fn floats_keep_sign_and_name_the_non_finite() {
        assert_eq!(decode("f32", &(-0.0f32).to_le_bytes(), false), "-0.0");
        assert_eq!(decode("f32", &0.1f32.to_le_bytes(), false), "0.1");
        assert_eq!(decode("f32", &1e-7f32.to_le_bytes(), false), "1e-7");
        assert_eq!(decode("f64", &f64::from_bits(0x7FF8_0000_0000_0001).to_le_bytes(), false), "\"NaN\"");
        assert_eq!(decode("f64", &f64::INFINITY.to_le_bytes(), false), "\"Infinity\"");
        assert_eq!(decode("f32", &f32::NEG_INFINITY.to_le_bytes(), false), "\"-Infinity\"");
        assert_eq!(decode("f64", &1e300f64.to_le_bytes(), false), "1e300");
        for x in ["-0.0", "0.1", "1e-7", "1e300", "2.5"] {
            serde_json::from_str::<Json>(x).expect("a JSON number");
        }
    }

    #[test]
    fn containers_pretty_and_compact() {
        // struct{id:u16,tags:dict<str,list<u8>>,o:opt<str>,n:opt<bool>,l:list<i32>,e:list<str>,}
        let ty = "struct{id:u16,tags:dict<str,list<u8>>,o:opt<str>,n:opt<bool>,l:list<i32>,e:list<str>,}";
        let mut buf = vec![7, 0];
        buf.extend([2, 0, 0, 0, 1, 0, 0, 0, b'a', 2, 0, 0, 0, 0, 0xff, 1, 0, 0, 0, b'b', 0, 0, 0, 0]);
        buf.extend([1, 2, 0, 0, 0, b'h', b'"']);
        buf.push(0);
        buf.extend([2, 0, 0, 0, 1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff]);
        buf.extend([0, 0, 0, 0]);
        assert_eq!(
            decode(ty, &buf, false),
            r#"{"id":7,"tags":{"a":"00ff","b":""},"o":"h\"","n":null,"l":[1,-2],"e":[]}"#
        );
        assert_eq!(
            decode(ty, &buf, true),
            "{\n  \"id\": 7,\n  \"tags\": {\n    \"a\": \"00ff\",\n    \"b\": \"\"\n  },\n  \"o\": \"h\\\"\",\n  \"n\": null,\n  \"l\": [1, -2],\n  \"e\": []\n}"
        );
        // A list of structs: one per line.
        assert_eq!(
            decode("list<struct{a:bool,}>", &[2, 0, 0, 0, 1, 0], true),
            "[\n  {\n    \"a\": true\n  },\n  {\n    \"a\": false\n  }\n]"
        );
        assert_eq!(decode("struct{}", &[], true), "{}");
    }

    #[test]
    fn long_scalar_arrays_fill_lines() {
        let mut buf = 40u32.to_le_bytes().to_vec();
        for i in 0..40u32 {
            buf.extend((i * 1000).to_le_bytes());
        }
        let text = decode("list<u32>", &buf, true);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "[");
        assert!(lines[1].starts_with("  0, 1000, 2000,") && lines[1].ends_with(','), "{text}");
        assert!(lines.iter().all(|l| l.len() <= WIDTH), "{text}");
        assert_eq!(lines.last(), Some(&"]"));
        let parsed: Json = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed.as_array().map(Vec::len), Some(40));
        assert_eq!(parsed[39], 39000);
        // Short ones stay on the line, after the key.
        assert_eq!(
            decode("struct{a:list<u8>,b:list<i8>,}", &[0, 0, 0, 0, 2, 0, 0, 0, 1, 0xff], true),
            "{\n  \"a\": \"\",\n  \"b\": [1, -1]\n}"
        );
    }

    #[test]
    fn tensors_print_their_table() {
        let out = decode(
            "tensors",
            include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector.kiln")),
            false,
        );
        let table: Json = serde_json::from_str(&out).unwrap();
        assert_eq!(table[0]["dtype"], "f32");
        assert_eq!(table[0]["shape"], serde_json::json!([2]));
        assert_eq!(table[0]["byte_offset"], 192);
        assert_eq!(decode("tensors", &kiln_nostd::wire::EMPTY_BLOCK, true), "[]");
    }
}
