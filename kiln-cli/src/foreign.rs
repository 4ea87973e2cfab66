//! `kiln validate` and `kiln inspect` of the formats `kiln convert` reads
//! (safetensors, GGUF, HK, .npy, .npz): detected by content, or forced with
//! `--from`. The verdict is the format's reader (the same readers `kiln
//! convert` uses, with HK's strict rulings and lineage check, and every .npz
//! member's CRC-32 read); what only Kiln cannot hold does not reject a valid
//! file, it is reported beside the verdict (`kiln_limit`). The table is the
//! tensors as they would be converted.

use std::path::Path;

use serde::Serialize;

use anyhow::anyhow;

use crate::convert::ReadArgs;
use kiln_convert::error::{exit_code, limit_reason, located};
use kiln_convert::{self as convert, Format, LegacyGgml, Model, Source};

/// A foreign file's verdict.
pub enum Verdict {
    /// Read and checked: the model as it would be converted. Its
    /// [`Model::limit`] is what Kiln cannot hold of it, if anything: the file
    /// is valid, but `kiln convert` refuses it.
    Ok(Box<Model>),
    /// Valid as far as its reader went, which stopped at something Kiln
    /// cannot hold (the reason): `kiln convert` refuses it.
    Limited(String),
    /// Refused by its format's reader.
    Rejected(anyhow::Error),
    /// Could not be read (exit 2).
    Io(anyhow::Error),
}

impl Verdict {
    /// Why Kiln cannot hold the file, when the file itself is valid.
    pub fn kiln_limit(&self) -> Option<&str> {
        match self {
            Verdict::Ok(model) => model.limit.as_deref(),
            Verdict::Limited(reason) => Some(reason),
            Verdict::Rejected(_) | Verdict::Io(_) => None,
        }
    }
}

/// Checks `path` when it is a regular file of a foreign format (by content,
/// or `--from`), or one of llama.cpp's formats before GGUF (always
/// rejected, with what to do instead): the format's name and the verdict.
/// `None` when it is Kiln (or undetected, or not a regular file), which the
/// Kiln path handles exactly as before.
pub fn probe(path: &Path, read: &ReadArgs) -> Option<(&'static str, Verdict)> {
    if read.from == Some(Format::Kiln) {
        return None;
    }
    // stat first: a FIFO or device is never opened here (the Kiln path streams it).
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let input = convert::open(path).ok()?;
    let format = match read.from {
        Some(f) => f,
        None => match Format::detect_file(input.bytes(), path) {
            Some(f) => f,
            None => {
                let legacy = LegacyGgml::detect(input.bytes())?;
                let e = anyhow!("{} ({}): {}", path.display(), legacy.magic, legacy.refusal());
                return Some((legacy.magic, Verdict::Rejected(e)));
            }
        },
    };
    if format == Format::Kiln {
        return None;
    }
    let opts = read.options();
    let result = convert::read_model(format, &input, path, &opts, false)
        .and_then(|model| convert::check_payloads(&model, &input, path).map(|()| model));
    Some((
        format.name(),
        match result {
            Ok(mut model) => {
                model.note_if_no_weights();
                if model.limit.is_none() {
                    model.limit = convert::writer_limit(&model);
                }
                Verdict::Ok(Box::new(model))
            }
            Err(e) if exit_code(&e) == 2 => Verdict::Io(e),
            Err(e) => match limit_reason(&e) {
                Some(reason) => Verdict::Limited(reason),
                None => Verdict::Rejected(e),
            },
        },
    ))
}

/// One `kiln validate --json` line: `file`, `ok`, `format`, then
/// `kiln_limit` (a valid file that Kiln cannot hold: why), or `error` (a
/// spec code, for readers that have one), `offset`, `rule`, `message`.
#[derive(Serialize)]
struct Line<'a> {
    file: &'a str,
    ok: bool,
    format: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    kiln_limit: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

/// The validate line for a verdict (`Io` is reported by the caller).
pub fn validate_line(file: &str, format: &str, verdict: &Verdict, json: bool) -> String {
    let err = match verdict {
        Verdict::Rejected(e) | Verdict::Io(e) => Some(e),
        Verdict::Ok(_) | Verdict::Limited(_) => None,
    };
    let kiln_limit = verdict.kiln_limit();
    if !json {
        return match (err, kiln_limit) {
            // The message starts with "FILE (FORMAT): ".
            (Some(e), _) => format!("{e:#}"),
            (None, Some(why)) => format!("{file}: ok ({format}); a Kiln limit, kiln convert refuses it: {why}"),
            (None, None) => format!("{file}: ok ({format})"),
        };
    }
    let at = err.and_then(located);
    let line = Line {
        file,
        ok: err.is_none(),
        format,
        kiln_limit,
        error: at.and_then(|a| a.code),
        offset: at.map(|a| a.offset),
        rule: at.and_then(|a| a.rule),
        message: err.map(|e| format!("{e:#}")),
    };
    serde_json::to_string(&line).unwrap_or_default()
}

#[derive(Serialize)]
struct TensorRow<'a> {
    index: usize,
    name: &'a str,
    dtype: &'static str,
    dtype_code: u16,
    shape: &'a [u64],
    element_count: u64,
    /// Absolute offset in the input (null for a compressed .npz member or a null_ref).
    byte_offset: Option<u64>,
    byte_length: u64,
    layout: Option<&'a str>,
    block_size: Option<u32>,
}

#[derive(Serialize)]
struct Summary<'a> {
    file: &'a str,
    format: &'static str,
    tensor_count: usize,
    payload_bytes: u64,
    metadata: Vec<(&'a str, &'a str)>,
    notes: &'a [String],
    tensors: Vec<TensorRow<'a>>,
}

fn summary<'a>(file: &'a str, model: &'a Model) -> Summary<'a> {
    let tensors = model
        .tensors
        .iter()
        .enumerate()
        .map(|(index, t)| TensorRow {
            index,
            name: &t.name,
            dtype: t.dtype.name(),
            dtype_code: t.dtype.code(),
            shape: &t.shape,
            element_count: t.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).unwrap_or(u64::MAX),
            byte_offset: match &t.source {
                Source::File { offset } | Source::Swap { offset, .. } | Source::Verified { offset, .. } => {
                    Some(*offset)
                }
                Source::Checked(c) => Some(c.offset),
                Source::Zip(_) | Source::Bytes(_) | Source::Transposed(_) => None,
            },
            byte_length: t.len,
            layout: t.layout.as_deref(),
            block_size: t.dtype.is_opaque().then_some(t.block_size),
        })
        .collect();
    Summary {
        file,
        format: model.format.name(),
        tensor_count: model.tensors.len(),
        payload_bytes: model.payload_bytes(),
        metadata: model.metadata.iter().collect(),
        notes: &model.notes,
        tensors,
    }
}

/// Control characters escaped, everything else as it is.
fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// `kiln inspect` of a foreign file: the metadata and the tensor table
/// (Kiln dtypes as converted, offsets in the input), and the notes.
pub fn inspect_text(file: &str, model: &Model, json: bool) -> String {
    let s = summary(file, model);
    if json {
        return serde_json::to_string_pretty(&s).unwrap_or_default() + "\n";
    }
    let mut out = String::new();
    for (k, v) in [
        ("file", file.to_string()),
        ("format", s.format.to_string()),
        ("tensors", s.tensor_count.to_string()),
        ("payload bytes", s.payload_bytes.to_string()),
    ] {
        out.push_str(&format!("{:<17}{v}\n", format!("{k}:")));
    }
    out.push('\n');
    if !s.metadata.is_empty() {
        out.push_str(&format!("metadata ({} entries):\n", s.metadata.len()));
        for (k, v) in &s.metadata {
            let shown: String = v.chars().take(120).collect();
            let more = if v.chars().count() > 120 { format!("... ({} bytes)", v.len()) } else { String::new() };
            out.push_str(&format!("  {} = {}{more}\n", printable(k), printable(&shown)));
        }
        out.push('\n');
    }
    if !s.notes.is_empty() {
        out.push_str("notes (as kiln convert would print them):\n");
        for n in s.notes {
            out.push_str(&format!("  {n}\n"));
        }
        out.push('\n');
    }
    if s.tensors.is_empty() {
        out.push_str("(no tensors)\n");
        return out;
    }
    let mut rows = vec![["index", "name", "dtype", "shape", "bytes", "offset", "layout"].map(String::from)];
    for t in &s.tensors {
        let dims: Vec<String> = t.shape.iter().map(u64::to_string).collect();
        rows.push([
            t.index.to_string(),
            printable(t.name),
            if t.dtype == "opaque" { format!("opaque:{}", t.dtype_code) } else { t.dtype.to_string() },
            format!("[{}]", dims.join(", ")),
            t.byte_length.to_string(),
            t.byte_offset.map_or_else(|| "-".into(), |o| o.to_string()),
            match (t.layout, t.block_size) {
                (Some(l), Some(b)) => format!("{l}/{b}"),
                _ => "-".into(),
            },
        ]);
    }
    let mut widths = [0usize; 7];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in &rows {
        let mut line = String::new();
        for (cell, w) in row.iter().zip(widths) {
            line.push_str(cell);
            line.extend(std::iter::repeat_n(' ', w.saturating_sub(cell.chars().count()).saturating_add(2)));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
