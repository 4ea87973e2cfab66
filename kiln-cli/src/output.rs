//! Rendering: validate lines (human and JSON), error objects, and the
//! inspect table.

use kiln_model::Error;
use serde::Serialize;

use crate::inspect::Summary;

/// The error fields of a rejection, in contract order.
#[derive(Debug, Serialize)]
pub struct ErrorFields {
    /// The spec's code (`TYPE`, `EOF`, ...).
    pub error: &'static str,
    /// Absolute byte offset of the field that broke the rule.
    pub offset: usize,
    /// The rule's stable identifier (`DuplicateName`, ...).
    pub rule: &'static str,
    /// `CODE at byte N: description`.
    pub message: String,
}

impl From<&Error> for ErrorFields {
    fn from(err: &Error) -> Self {
        ErrorFields {
            error: err.code().as_str(),
            offset: err.offset(),
            rule: err.rule().id(),
            message: err.to_string(),
        }
    }
}

/// One file's verdict: `{"file","ok"}` plus the error fields when rejected.
/// serde writes struct fields in declaration order, so the key order is
/// file, ok, error, offset, rule, message.
#[derive(Debug, Serialize)]
pub struct FileReport<'a> {
    /// The path as given.
    pub file: &'a str,
    /// True when the file was accepted.
    pub ok: bool,
    /// Why it was rejected.
    #[serde(flatten)]
    pub error: Option<ErrorFields>,
}

impl<'a> FileReport<'a> {
    /// The report for `file` with validation result `result`.
    pub fn new(file: &'a str, result: &Result<(), Error>) -> Self {
        FileReport { file, ok: result.is_ok(), error: result.as_ref().err().map(ErrorFields::from) }
    }

    /// One line of JSON, no trailing newline.
    pub fn json(&self) -> String {
        // Serialising plain strings, numbers and bools cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// `path: ok` or `path: CODE at byte N: description`.
    pub fn human(&self) -> String {
        match &self.error {
            None => format!("{}: ok", self.file),
            Some(e) => format!("{}: {}", self.file, e.message),
        }
    }

    /// [`json`](Self::json) or [`human`](Self::human).
    pub fn line(&self, json: bool) -> String {
        if json {
            self.json()
        } else {
            self.human()
        }
    }
}

/// Writes `text` to stdout and flushes it.
pub fn print(text: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).context("writing to stdout")
}

/// The human error line of `kiln inspect`: the message and the rule id.
pub fn inspect_error_human(file: &str, err: &Error) -> String {
    format!("{file}: {err} (rule {})", err.rule().id())
}

/// The inspect summary as one pretty-printed JSON document.
pub fn summary_json(summary: &Summary<'_>) -> String {
    serde_json::to_string_pretty(summary).unwrap_or_default()
}

/// Names of the set flag bits.
fn flag_names(flags: u8) -> String {
    let mut names = Vec::new();
    if flags & kiln_nostd::wire::header::FLAG_NAMES != 0 {
        names.push("names");
    }
    if flags & kiln_nostd::wire::header::FLAG_LITTLE_ENDIAN != 0 {
        names.push("little-endian");
    }
    format!("0x{flags:02x} ({})", names.join(", "))
}

/// Control characters in a name would break the table: show them escaped.
pub(crate) fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// A metadata value as the tables show it: control characters escaped, cut to 120 characters.
pub(crate) fn shortened(text: &str) -> String {
    printable(&shorten(text, 120))
}

/// The header summary and the tensor table, ending in a newline.
/// `text`, cut to about `max` characters with a note of how much was left out.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}... ({} bytes)", &text[..at], text.len()),
        None => text.to_owned(),
    }
}

pub fn summary_human(summary: &Summary<'_>) -> String {
    let mut out = String::new();
    let facts = [
        ("file", printable(&summary.file)),
        ("tensors", summary.tensor_count.to_string()),
        ("name heap bytes", summary.name_bytes.to_string()),
        ("payload bytes", summary.payload_bytes.to_string()),
        ("block length", summary.block_length.to_string()),
        ("flags", flag_names(summary.flags)),
    ];
    for (key, value) in facts {
        out.push_str(&format!("{:<17}{value}\n", format!("{key}:")));
    }
    out.push('\n');
    if let Some(metadata) = &summary.metadata {
        out.push_str(&format!("metadata ({} entries):\n", metadata.len()));
        for (k, v) in metadata {
            out.push_str(&format!("  {} = {}\n", printable(k), printable(&shorten(v, 120))));
        }
        out.push('\n');
    }
    if summary.tensors.is_empty() {
        out.push_str("(no tensors: this file holds no weights)\n");
        return out;
    }
    let mut rows = vec![["index", "name", "dtype", "shape", "bytes", "offset", "quant", "layout"].map(String::from)];
    for t in &summary.tensors {
        rows.push([
            t.index.to_string(),
            t.name.map_or_else(|| "-".to_owned(), printable),
            t.dtype_label(),
            t.shape_label(),
            t.byte_length.to_string(),
            t.byte_offset.to_string(),
            t.quant_label(),
            t.layout_label(),
        ]);
    }
    out.push_str(&table(&rows));
    out
}

/// Left-aligned columns two spaces apart, no trailing spaces.
pub(crate) fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_is_the_contract() {
        let err = Error::new(kiln_nostd::Rule::DuplicateName, 196);
        let line = FileReport::new("a.kiln", &Err(err)).json();
        assert_eq!(
            line,
            r#"{"file":"a.kiln","ok":false,"error":"TYPE","offset":196,"rule":"DuplicateName","message":"TYPE at byte 196: two tensors have the same name"}"#
        );
        assert_eq!(FileReport::new("a.kiln", &Ok(())).json(), r#"{"file":"a.kiln","ok":true}"#);
    }

    #[test]
    fn table_aligns_and_trims() {
        let rows = [["a", "bb"].map(String::from), ["ccc", "d"].map(String::from)];
        assert_eq!(table(&rows), "a    bb\nccc  d\n");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("a\nb"), "a\\nb");
        assert_eq!(flag_names(3), "0x03 (names, little-endian)");
    }
}
