//! NumPy `.npy` (format versions 1.0, 2.0, 3.0) and `.npz` (a zip of `.npy`
//! members, stored or deflated) input. The `.npy` header is a Python dict
//! literal; it is parsed here by hand as `ast.literal_eval` reads it (with
//! NumPy's allowance for Python 2's long ints), with every length checked.
//! A Fortran-order array is transposed to row-major order as it is copied
//! ([`Source::Transposed`]).

use std::fs::File;
use std::io::Read;

use anyhow::{anyhow, bail, Context};
use kiln_nostd::int::{u64_from, usize_from};
use kiln_nostd::DType;

use super::error::{at, limit};
use super::model::{Checked, Format, Model, ReadOptions, Source, TensorOut, Transposed, Zip};

/// A parsed `.npy` header: what NumPy's `_read_array_header` reads.
#[derive(Debug, PartialEq, Eq)]
pub struct NpyHeader {
    /// The Kiln dtype, or why Kiln cannot hold the array (a valid one: a
    /// NumPy dtype with no Kiln counterpart, or more than 8 dimensions).
    pub kiln: Result<DType, String>,
    /// Multi-byte elements stored big-endian (`>` in descr).
    pub big_endian: bool,
    /// `fortran_order`: the data is column-major (transposed while copied).
    pub fortran: bool,
    pub shape: Vec<u64>,
    /// Bytes from the start of the member to the first data byte.
    pub data_offset: u64,
    /// Data length in bytes; `None` for a dtype whose items have no fixed
    /// size here (Python objects, pickled; structured and subarray dtypes).
    pub len: Option<u64>,
}

const MAGIC: &[u8] = b"\x93NUMPY";
/// numpy refuses headers above 10,000 bytes unless told otherwise
/// (max_header_size); this reader allows more.
const MAX_HEADER: usize = 1 << 20;

/// The Kiln dtypes of NumPy's one-character type codes and names (`descr`
/// is whatever `numpy.dtype` reads; `np.save` writes the `<f4` form).
const NUMPY_NAMED: [(&str, DType); 24] = [
    ("?", DType::Bool),
    ("b", DType::I8),
    ("B", DType::U8),
    ("h", DType::I16),
    ("H", DType::U16),
    ("i", DType::I32),
    ("I", DType::U32),
    ("q", DType::I64),
    ("Q", DType::U64),
    ("e", DType::F16),
    ("f", DType::F32),
    ("d", DType::F64),
    ("bool", DType::Bool),
    ("int8", DType::I8),
    ("uint8", DType::U8),
    ("int16", DType::I16),
    ("uint16", DType::U16),
    ("int32", DType::I32),
    ("uint32", DType::U32),
    ("int64", DType::I64),
    ("uint64", DType::U64),
    ("float16", DType::F16),
    ("float32", DType::F32),
    ("float64", DType::F64),
];

/// The units a datetime64/timedelta64 descr may name.
const TIME_UNITS: [&str; 15] =
    ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "\u{3bc}s", "ns", "ps", "fs", "as", "generic"];

/// What a `descr` string names: the item size (`None`: not fixed) and the
/// Kiln dtype or why there is none; `None` when NumPy has no such dtype.
fn descr_dtype(descr: &str) -> Option<(Option<u64>, Result<DType, String>)> {
    let body = descr.strip_prefix(['<', '>', '|', '=']).unwrap_or(descr);
    let kiln = |d: DType| Some((Some(u64_from(width(d))), Ok(d)));
    if let Some((_, d)) = NUMPY_NAMED.iter().find(|(n, _)| *n == body) {
        return kiln(*d);
    }
    let none = |size: Option<u64>| Some((size, Err(format!("NumPy dtype {descr:?} has no Kiln dtype"))));
    let mut chars = body.chars();
    let kind = chars.next()?;
    let rest = chars.as_str();
    let count = |r: &str| -> Option<u64> {
        if r.is_empty() {
            return Some(0);
        }
        r.bytes().all(|c| c.is_ascii_digit()).then(|| r.parse().ok()).flatten()
    };
    match (kind, rest) {
        ('b', "1") => kiln(DType::Bool),
        ('i', "1") => kiln(DType::I8),
        ('i', "2") => kiln(DType::I16),
        ('i', "4") => kiln(DType::I32),
        ('i', "8") => kiln(DType::I64),
        ('u', "1") => kiln(DType::U8),
        ('u', "2") => kiln(DType::U16),
        ('u', "4") => kiln(DType::U32),
        ('u', "8") => kiln(DType::U64),
        ('f', "2") => kiln(DType::F16),
        ('f', "4") => kiln(DType::F32),
        ('f', "8") => kiln(DType::F64),
        // long double (x86-64) and complex numbers
        ('f', "16") | ('c', "16") | ('g' | 'D', "") => none(Some(16)),
        ('c', "8") | ('F', "") => none(Some(8)),
        ('c', "32") | ('G', "") => none(Some(32)),
        // byte strings, raw bytes, unicode (UCS-4)
        ('S' | 'a' | 'V', r) => none(Some(count(r)?)),
        ('U', r) => none(Some(count(r)?.checked_mul(4)?)),
        // Python objects, pickled: no fixed size in the file
        ('O', "" | "4" | "8") => none(None),
        // datetime64 and timedelta64, with an optional [unit]
        ('M' | 'm', r) => {
            let unit = r.strip_prefix('8').unwrap_or(r);
            let ok = unit.is_empty()
                || unit
                    .strip_prefix('[')
                    .and_then(|u| u.strip_suffix(']'))
                    .is_some_and(|u| TIME_UNITS.contains(&u.trim_start_matches(|c: char| c.is_ascii_digit())));
            if ok {
                none(Some(8))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// One dimension of `shape`: a Python int (or bool, which is one).
fn dimension(d: &Py) -> anyhow::Result<u64> {
    match d {
        Py::Bool(b) => Ok(u64::from(*b)),
        Py::Int(_, Some(0)) => Ok(0),
        Py::Int(true, _) => bail!(".npy header: a negative dimension"),
        Py::Int(false, Some(m)) => u64::try_from(*m).map_err(|_| anyhow!(".npy header: dimension {m} is too large")),
        Py::Int(false, None) => bail!(".npy header: a dimension is too large"),
        _ => bail!(".npy header: 'shape' is not a tuple of ints"),
    }
}

/// Parses the header at the start of `b` (which may be just a prefix of the
/// member), as NumPy's `_read_array_header` reads it: format 1.0, 2.0 or
/// 3.0, a Python literal dict (read as `ast.literal_eval` reads it; for 1.0
/// and 2.0 also with Python 2's `2L` ints, as NumPy's `_filter_header`
/// allows) with exactly the keys descr, fortran_order and shape. `Err` is a
/// file NumPy refuses too; a valid array Kiln cannot hold has its reason in
/// [`NpyHeader::kiln`].
pub fn parse_header(b: &[u8]) -> anyhow::Result<NpyHeader> {
    if !b.starts_with(MAGIC) {
        bail!("not a .npy file (magic)");
    }
    let (major, minor) = (*b.get(6).ok_or_else(|| anyhow!("truncated .npy header"))?, b.get(7).copied().unwrap_or(0));
    let (hlen, start): (usize, usize) = match (major, minor) {
        (1, 0) => (
            usize::from(u16::from_le_bytes(b.get(8..10).ok_or_else(|| anyhow!("truncated .npy header"))?.try_into()?)),
            10,
        ),
        (2 | 3, 0) => (
            usize::try_from(u32::from_le_bytes(
                b.get(8..12).ok_or_else(|| anyhow!("truncated .npy header"))?.try_into()?,
            ))?,
            12,
        ),
        _ => bail!(".npy format version {major}.{minor} is not one NumPy reads (1.0, 2.0, 3.0)"),
    };
    if hlen > MAX_HEADER {
        bail!(".npy header of {hlen} bytes is above the {MAX_HEADER}-byte limit");
    }
    // hlen <= MAX_HEADER, so the sum cannot overflow.
    let end = start.saturating_add(hlen);
    let raw = b.get(start..end).ok_or_else(|| anyhow!(".npy header runs past the end ({hlen} bytes)"))?;
    // Versions 1 and 2 are latin-1; 3 is UTF-8.
    let text: String = if major == 3 {
        std::str::from_utf8(raw).context(".npy header is not UTF-8")?.to_string()
    } else {
        raw.iter().map(|&c| char::from(c)).collect()
    };
    let base = u64_from(start);
    // A position in `text` as a byte of the file (latin-1: one byte a character).
    let file_at = |pos: usize| {
        let n = if major == 3 { pos } else { text.get(..pos).map_or(pos, |t| t.chars().count()) };
        base.saturating_add(u64_from(n))
    };
    if let Some(nul) = text.find('\0') {
        return Err(at(file_at(nul), ".npy header holds a NUL byte (Python cannot read it)"));
    }
    let lit = Lit { s: &text, pos: 0, py2_longs: major <= 2, open: 0 };
    let value = lit.top().map_err(|(pos, msg)| at(file_at(pos), format!(".npy header: {msg}")))?;
    let Py::Dict(dict) = value else { bail!(".npy header is not a dict") };
    // NumPy reads the header with ast.literal_eval, where a repeated key
    // silently takes its last value, and then requires exactly these three
    // keys. A repeated key is refused here rather than guessed.
    for (i, (k, _, at_pos)) in dict.iter().enumerate() {
        let k = match k {
            Py::Str(k) => k.as_str(),
            _ => "(not a str)",
        };
        if dict.iter().take(i).any(|(earlier, _, _)| matches!(earlier, Py::Str(e) if e == k)) {
            return Err(at(
                file_at(*at_pos),
                format!(
                    ".npy header has the key {k:?} twice (NumPy would silently use the last value); refusing to guess"
                ),
            ));
        }
        if !["descr", "fortran_order", "shape"].contains(&k) {
            return Err(at(
                file_at(*at_pos),
                format!(".npy header has the key {k:?}; NumPy requires exactly descr, fortran_order and shape"),
            ));
        }
    }
    let get = |k: &str| dict.iter().find(|(key, _, _)| matches!(key, Py::Str(s) if s == k)).map(|(_, v, _)| v);
    let (size, kiln, big_endian) = match get("descr") {
        Some(Py::Str(d)) => {
            let (size, kiln) = descr_dtype(d).ok_or_else(|| anyhow!(".npy descr {d:?} is not a NumPy dtype"))?;
            (size, kiln, d.starts_with('>') && size.is_some_and(|s| s > 1))
        }
        Some(Py::List(_)) => (None, Err("a structured dtype (descr is a list of fields)".to_string()), false),
        Some(Py::Tuple(_)) => (None, Err("a subarray dtype (descr is a tuple)".to_string()), false),
        Some(_) => bail!(".npy descr is not a valid dtype descriptor (a str or a list of fields)"),
        None => bail!(".npy header has no 'descr'"),
    };
    let fortran = match get("fortran_order") {
        Some(Py::Bool(b)) => *b,
        _ => bail!(".npy header has no boolean 'fortran_order'"),
    };
    let shape = match get("shape") {
        Some(Py::Tuple(t)) => t.iter().map(dimension).collect::<anyhow::Result<Vec<u64>>>()?,
        _ => bail!(".npy header has no 'shape' tuple"),
    };
    let count =
        shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or_else(|| anyhow!("shape product overflows"))?;
    let len = match size {
        Some(s) => Some(count.checked_mul(s).ok_or_else(|| anyhow!("array size overflows"))?),
        None => None,
    };
    let kiln = match kiln {
        Ok(_) if shape.len() > 8 => Err(format!("rank {} (Kiln allows at most 8)", shape.len())),
        k => k,
    };
    Ok(NpyHeader { kiln, big_endian, fortran, shape, data_offset: u64_from(end), len })
}

/// A value of the header's Python literal, as `ast.literal_eval` makes it
/// (only what a `.npy` header can need is kept apart).
#[derive(Debug, Clone, PartialEq)]
enum Py {
    Str(String),
    Bytes,
    /// An int: its sign and magnitude (`None`: above `u128`).
    Int(bool, Option<u128>),
    Bool(bool),
    NoneVal,
    /// A float or complex number.
    Number,
    Tuple(Vec<Py>),
    List(Vec<Py>),
    Set,
    /// Key, value, and the key's position in the header text.
    Dict(Vec<(Py, Py, usize)>),
}

/// Containers nested deeper than this are refused (a header needs 3 levels).
const MAX_DEPTH: usize = 32;

/// A reader of the Python literal a `.npy` header holds: the subset of
/// Python's grammar `ast.literal_eval` accepts (strings with their prefixes,
/// escapes and implicit concatenation, ints in every base, floats, complex
/// numbers, signs, True/False/None, tuples, lists, sets, dicts, comments,
/// line continuations). `py2_longs`: NumPy's `_filter_header` for format
/// versions 1.0 and 2.0, which drops an `L` after a number (Python 2's long
/// ints, `(2L, 3L)`).
struct Lit<'a> {
    s: &'a str,
    pos: usize,
    py2_longs: bool,
    /// Open brackets: newlines inside them are only whitespace.
    open: usize,
}

type LitResult<T> = Result<T, (usize, String)>;

impl Lit<'_> {
    fn fail<T>(&self, msg: impl Into<String>) -> LitResult<T> {
        Err((self.pos, msg.into()))
    }
    fn rest(&self) -> &str {
        self.s.get(self.pos..).unwrap_or_default()
    }
    fn cur(&self) -> Option<char> {
        self.rest().chars().next()
    }
    fn bump(&mut self) -> Option<char> {
        let c = self.cur()?;
        self.pos = self.pos.saturating_add(c.len_utf8());
        Some(c)
    }
    /// Skips spaces, tabs, form feeds, comments, line continuations and (inside
    /// brackets, or at the ends of the text) newlines.
    fn ws(&mut self, newlines: bool) -> LitResult<()> {
        loop {
            match self.cur() {
                Some(' ' | '\t' | '\x0c') => {}
                Some('\r' | '\n') if newlines || self.open > 0 => {}
                Some('#') => {
                    while self.cur().is_some_and(|c| c != '\n' && c != '\r') {
                        self.bump();
                    }
                    continue;
                }
                Some('\\') => {
                    let after = self.rest().get(1..).unwrap_or_default();
                    let nl = if after.starts_with("\r\n") {
                        2
                    } else if after.starts_with(['\n', '\r']) {
                        1
                    } else {
                        return self.fail("a backslash outside a string");
                    };
                    if after
                        .get(nl..)
                        .unwrap_or_default()
                        .trim_start_matches([' ', '\t', '\x0c', '\r', '\n'])
                        .is_empty()
                    {
                        return self.fail("a line continuation at the end of the header");
                    }
                    self.pos = self.pos.saturating_add(nl).saturating_add(1);
                    continue;
                }
                _ => return Ok(()),
            }
            self.bump();
        }
    }
    fn peek(&mut self) -> LitResult<Option<char>> {
        self.ws(false)?;
        Ok(self.cur())
    }
    fn eat(&mut self, c: char) -> LitResult<bool> {
        if self.peek()? == Some(c) {
            self.bump();
            Ok(true)
        } else {
            Ok(false)
        }
    }
    fn word(&mut self) -> &str {
        let start = self.pos;
        while self.cur().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            self.bump();
        }
        self.s.get(start..self.pos).unwrap_or_default()
    }

    /// The whole header: one value, then only whitespace and comments.
    fn top(mut self) -> LitResult<Py> {
        // literal_eval strips leading spaces and tabs; blank lines may precede.
        self.ws(true)?;
        let v = self.value(0)?;
        self.ws(true)?;
        match self.cur() {
            None => Ok(v),
            Some(c) => self.fail(format!("{c:?} after the header's value")),
        }
    }

    fn value(&mut self, depth: usize) -> LitResult<Py> {
        if depth > MAX_DEPTH {
            return self.fail(format!("values nested more than {MAX_DEPTH} deep"));
        }
        let Some(c) = self.peek()? else { return self.fail("the header ends where a value should be") };
        match c {
            '(' | '[' | '{' => self.display(c, depth),
            '+' | '-' | '0'..='9' | '.' => {
                let neg = matches!(c, '+' | '-') && {
                    self.bump();
                    c == '-'
                };
                let n = match self.value_number()? {
                    Py::Int(_, mag) => Py::Int(neg, mag),
                    n => n,
                };
                // literal_eval's complex sums: 1+2j, -1-2j.
                if matches!(self.peek()?, Some('+' | '-')) {
                    self.bump();
                    if !self.number()?.1 {
                        return self.fail("only a complex number may be a sum");
                    }
                    return Ok(Py::Number);
                }
                Ok(n)
            }
            _ => {
                let start = self.pos;
                let w = self.word().to_string();
                if self.cur().is_some_and(|q| q == '\'' || q == '"') && w.len() <= 2 {
                    self.pos = start;
                    return self.strings();
                }
                match w.as_str() {
                    "True" => Ok(Py::Bool(true)),
                    "False" => Ok(Py::Bool(false)),
                    "None" => Ok(Py::NoneVal),
                    "" => self.fail(format!("unexpected {c:?}")),
                    _ => {
                        self.pos = start;
                        self.fail(format!("the name {w} (only literals may appear)"))
                    }
                }
            }
        }
    }

    /// A number after an optional sign (literal_eval allows one sign only).
    fn value_number(&mut self) -> LitResult<Py> {
        match self.peek()? {
            Some('0'..='9' | '.') => {}
            _ => return self.fail("a sign must be followed by a number"),
        }
        let (v, _) = self.number()?;
        Ok(v)
    }

    /// One number token (and, for format 1.0/2.0, a Python 2 `L` after it):
    /// the value and whether it is imaginary.
    fn number(&mut self) -> LitResult<(Py, bool)> {
        self.ws(false)?;
        let start = self.pos;
        while self.cur().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
            let c = self.bump();
            // An exponent's sign belongs to the number.
            if matches!(c, Some('e' | 'E')) && matches!(self.cur(), Some('+' | '-')) {
                let text = self.s.get(start..self.pos).unwrap_or_default();
                if !text.starts_with("0x") && !text.starts_with("0X") {
                    self.bump();
                }
            }
        }
        let mut text = self.s.get(start..self.pos).unwrap_or_default();
        // Python's tokenizer ends the number before a trailing L: a name.
        let long = text.len() > 1 && text.ends_with('L');
        if long {
            if !self.py2_longs {
                self.pos = start;
                return self.fail(format!("{text}: a Python 2 long int, which NumPy reads only in format 1.0 and 2.0"));
            }
            text = text.get(..text.len().saturating_sub(1)).unwrap_or_default();
        } else if self.py2_longs {
            // `2 L`: the filter drops an L token after a number, spaced or not.
            let save = self.pos;
            self.ws(false)?;
            if self.word() != "L" {
                self.pos = save;
            }
        }
        match parse_number(text) {
            Some(v) => Ok(v),
            None => {
                self.pos = start;
                self.fail(format!("{text:?} is not a Python number"))
            }
        }
    }

    /// One or more adjacent string literals (Python joins them).
    fn strings(&mut self) -> LitResult<Py> {
        let mut out: Option<Py> = None;
        loop {
            let start = self.pos;
            let prefix = self.word().to_ascii_lowercase();
            let (raw, bytes) = match prefix.as_str() {
                "" | "u" => (false, false),
                "r" => (true, false),
                "b" => (false, true),
                "br" | "rb" => (true, true),
                _ => {
                    self.pos = start;
                    return self.fail(format!("the string prefix {prefix} (literal_eval refuses it)"));
                }
            };
            let text = self.string_body(raw, bytes)?;
            out = Some(match (out, bytes) {
                (None, false) => Py::Str(text),
                (None, true) => Py::Bytes,
                (Some(Py::Str(mut s)), false) => {
                    s.push_str(&text);
                    Py::Str(s)
                }
                (Some(Py::Bytes), true) => Py::Bytes,
                _ => {
                    self.pos = start;
                    return self.fail("bytes and str literals side by side");
                }
            });
            // Another literal may follow (whitespace, comments, newlines in brackets between).
            let save = self.pos;
            self.ws(false)?;
            let next = self.pos;
            let w = self.word().len();
            let quoted = self.cur().is_some_and(|q| q == '\'' || q == '"') && w <= 2;
            self.pos = if quoted { next } else { save };
            if !quoted {
                return out.map_or_else(|| self.fail("no string"), Ok);
            }
        }
    }

    /// A quoted string body from its opening quote: the text (escapes decoded unless raw).
    fn string_body(&mut self, raw: bool, bytes: bool) -> LitResult<String> {
        let q = self.bump().unwrap_or('\'');
        let qq: String = [q, q].iter().collect();
        let triple = self.rest().starts_with(&qq);
        if triple {
            self.pos = self.pos.saturating_add(qq.len());
        } else if self.rest().starts_with(q) {
            self.bump();
            return Ok(String::new());
        }
        let mut out = String::new();
        loop {
            let Some(c) = self.bump() else { return self.fail("an unterminated string") };
            if bytes && !c.is_ascii() {
                return self.fail("a non-ASCII character in a bytes literal");
            }
            if c == q {
                if !triple {
                    return Ok(out);
                }
                if self.rest().starts_with(&qq) {
                    self.pos = self.pos.saturating_add(qq.len());
                    return Ok(out);
                }
                out.push(c);
                continue;
            }
            if (c == '\n' || c == '\r') && !triple {
                return self.fail("a newline inside a string");
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some(e) = self.bump() else { return self.fail("an unterminated string") };
            if raw {
                // A raw string keeps the backslash; it still cannot end on a lone one.
                out.push('\\');
                out.push(e);
                continue;
            }
            match e {
                '\n' => {}
                '\r' => {
                    if self.cur() == Some('\n') {
                        self.bump();
                    }
                }
                '\\' | '\'' | '"' => out.push(e),
                'a' => out.push('\x07'),
                'b' => out.push('\x08'),
                'f' => out.push('\x0c'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                'v' => out.push('\x0b'),
                '0'..='7' => {
                    let mut v = e.to_digit(8).unwrap_or(0);
                    for _ in 0..2 {
                        match self.cur().and_then(|d| d.to_digit(8)) {
                            Some(d) => {
                                v = v.saturating_mul(8).saturating_add(d);
                                self.bump();
                            }
                            None => break,
                        }
                    }
                    out.push(char::from_u32(v).unwrap_or(char::REPLACEMENT_CHARACTER));
                }
                'x' => out.push(self.hex_escape(2)?),
                'u' if !bytes => out.push(self.hex_escape(4)?),
                'U' if !bytes => out.push(self.hex_escape(8)?),
                'N' if !bytes => return self.fail("a \\N{...} escape (not read here)"),
                other => {
                    // Python keeps an unknown escape as it is (with a warning).
                    out.push('\\');
                    out.push(other);
                }
            }
        }
    }

    fn hex_escape(&mut self, n: usize) -> LitResult<char> {
        let digits = self.rest().get(..n).filter(|d| d.chars().all(|c| c.is_ascii_hexdigit()));
        let Some(digits) = digits else { return self.fail(format!("a \\x, \\u or \\U escape needs {n} hex digits")) };
        let v = u32::from_str_radix(digits, 16).ok().and_then(char::from_u32);
        let Some(v) = v else { return self.fail(format!("\\{digits} is not a character")) };
        self.pos = self.pos.saturating_add(n);
        Ok(v)
    }

    /// `( )`, `[ ]` or `{ }` and what is inside.
    fn display(&mut self, open: char, depth: usize) -> LitResult<Py> {
        self.bump();
        self.open = self.open.saturating_add(1);
        let close = match open {
            '(' => ')',
            '[' => ']',
            _ => '}',
        };
        let mut items = Vec::new();
        let mut pairs = Vec::new();
        let mut comma = false;
        let mut is_dict = None::<bool>;
        loop {
            if self.eat(close)? {
                break;
            }
            self.peek()?;
            let key_at = self.pos;
            let v = self.value(depth.saturating_add(1))?;
            if open == '{' {
                let dict = self.eat(':')?;
                if *is_dict.get_or_insert(dict) != dict {
                    return self.fail("a dict and a set mixed");
                }
                if dict {
                    let val = self.value(depth.saturating_add(1))?;
                    pairs.push((v, val, key_at));
                } else {
                    items.push(v);
                }
            } else {
                items.push(v);
            }
            if self.eat(',')? {
                comma = true;
                continue;
            }
            if !self.eat(close)? {
                return self.fail(format!("expected ',' or {close:?}"));
            }
            break;
        }
        self.open = self.open.saturating_sub(1);
        Ok(match open {
            // (x) is x; (x,) and () are tuples.
            '(' if items.len() == 1 && !comma => items.pop().unwrap_or(Py::NoneVal),
            '(' => Py::Tuple(items),
            '[' => Py::List(items),
            _ if is_dict == Some(false) => Py::Set,
            _ => Py::Dict(pairs),
        })
    }
}

/// A Python number token's value and whether it is imaginary (`None`: not a number).
fn parse_number(text: &str) -> Option<(Py, bool)> {
    let lower = text.to_ascii_lowercase();
    let digits_ok = |d: &str, radix: u32| {
        !d.is_empty()
            && !d.starts_with('_')
            && !d.ends_with('_')
            && !d.contains("__")
            && d.chars().all(|c| c == '_' || c.is_digit(radix))
    };
    let int = |d: &str, radix: u32| -> Option<(Py, bool)> {
        let clean: String = d.chars().filter(|&c| c != '_').collect();
        Some((Py::Int(false, u128::from_str_radix(&clean, radix).ok()), false))
    };
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(d) = lower.strip_prefix(prefix) {
            // Python allows one underscore right after the prefix (0x_10).
            let d = d.strip_prefix('_').unwrap_or(d);
            return digits_ok(d, radix).then(|| int(d, radix)).flatten();
        }
    }
    if digits_ok(&lower, 10) {
        // Leading zeros only in zero itself (00 is 0, 01 is an error).
        let clean: String = lower.chars().filter(|&c| c != '_').collect();
        if clean.len() > 1 && clean.starts_with('0') && clean.chars().any(|c| c != '0') {
            return None;
        }
        return int(&lower, 10);
    }
    // A float or an imaginary number: digits, one '.', an exponent, a j.
    let (body, imaginary) = match lower.strip_suffix('j') {
        Some(b) => (b, true),
        None => (lower.as_str(), false),
    };
    let (mantissa, exponent) = match body.split_once('e') {
        Some((m, e)) => (m, Some(e.strip_prefix(['+', '-']).unwrap_or(e))),
        None => (body, None),
    };
    let (whole, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let part_ok = |p: &str| p.is_empty() || digits_ok(p, 10);
    let ok = (!whole.is_empty() || !frac.is_empty())
        && part_ok(whole)
        && part_ok(frac)
        && exponent.is_none_or(|e| digits_ok(e, 10))
        && (imaginary || exponent.is_some() || mantissa.contains('.'));
    ok.then_some((Py::Number, imaginary))
}

fn width(dtype: DType) -> usize {
    match dtype.width() {
        kiln_nostd::dtype::Width::Bytes(w) => usize::from(w),
        _ => 1,
    }
}

/// The source of an array's payload: `stored` (the bytes as they are in
/// the file, swapped to little-endian as they pass if need be), transposed
/// to row-major order when the array is in Fortran order.
fn array_source(h: &NpyHeader, dtype: DType, stored: Source) -> Source {
    // Dimensions of 1 do not change the order: one other dimension, and the
    // bytes are the same in either.
    if !h.fortran || h.shape.iter().filter(|&&d| d > 1).count() < 2 {
        return stored;
    }
    Source::Transposed(Box::new(Transposed { inner: stored, shape: h.shape.clone(), width: width(dtype) }))
}

fn tensor(model: &mut Model, name: &str, h: &NpyHeader, dtype: DType, len: u64, base: u64) -> anyhow::Result<()> {
    let offset = base.checked_add(h.data_offset).ok_or_else(|| anyhow!(".npy data offset overflows"))?;
    let mut t = TensorOut::dense(name, dtype, h.shape.clone(), offset, len);
    if h.big_endian {
        t.source = Source::Swap { offset, width: width(dtype) };
        model.note(format!("tensor {name}: big-endian NumPy data byte-swapped to little-endian"));
    }
    t.source = array_source(h, dtype, t.source);
    if matches!(t.source, Source::Transposed(_)) {
        model.note(format!("tensor {name}: Fortran-order (column-major) NumPy data transposed to row-major"));
    }
    model.tensors.push(t);
    Ok(())
}

/// Reads one `.npy` array from `bytes` as the tensor `name`.
pub fn read_npy(bytes: &[u8], name: &str, opts: &ReadOptions) -> anyhow::Result<Model> {
    let mut model = Model::new(Format::Npy, opts);
    let h = parse_header(bytes)?;
    let size = u64_from(bytes.len());
    if let Some(len) = h.len {
        if h.data_offset.checked_add(len) != Some(size) {
            bail!(".npy data is {} bytes; the header says {len}", size.saturating_sub(h.data_offset));
        }
    }
    match (&h.kiln, h.len) {
        (Ok(dtype), Some(len)) => tensor(&mut model, name, &h, *dtype, len, 0)?,
        (Err(why), _) => model.limit(limit(format!("a valid .npy array that Kiln cannot hold: {why}")))?,
        (Ok(_), None) => bail!("a .npy array of no fixed size"),
    }
    Ok(model)
}

/// Reads every `.npy` member of the `.npz` archive `file` (whose bytes are `bytes`).
pub fn read_npz(file: &File, bytes: &[u8], opts: &ReadOptions) -> anyhow::Result<Model> {
    let mut model = Model::new(Format::Npz, opts);
    let mut zip = zip::ZipArchive::new(file).context("not a valid .npz (zip) archive")?;
    let mut members = Vec::new();
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).with_context(|| format!("zip member {i}"))?;
        let full = entry.name().to_string();
        if entry.is_dir() {
            continue;
        }
        let Some(name) = full.strip_suffix(".npy") else {
            model.note(format!("zip member {full:?} is not a .npy array; NOT carried"));
            continue;
        };
        let stored = entry.compression() == zip::CompressionMethod::Stored;
        let expect = entry.crc32();
        if !stored {
            // The decompression budget, from the sizes the archive declares
            // (reading stops at the declared size; more is an error).
            let (size, packed) = (entry.size(), entry.compressed_size());
            if size > opts.max_member {
                bail!(
                    "member {full}: {size} bytes decompressed, above the {} byte limit (raise it with --max-member-size)",
                    opts.max_member
                );
            }
            if size > packed.max(1).saturating_mul(opts.max_ratio) {
                bail!(
                    "member {full}: {size} bytes from {packed} compressed, a ratio above {}:1 (a decompression bomb? \
                     raise the limit with --max-ratio)",
                    opts.max_ratio
                );
            }
        }
        let header = if stored {
            let start = entry.data_start();
            let end = start.checked_add(entry.size()).filter(|&e| e <= u64_from(bytes.len()));
            let member = end
                .and_then(|e| bytes.get(usize_from(start)?..usize_from(e)?))
                .ok_or_else(|| anyhow!("member {full}: runs past the archive"))?;
            let h = parse_header(member).with_context(|| format!("member {full} (at byte {start})"))?;
            let head = usize_from(h.data_offset).and_then(|n| member.get(..n)).unwrap_or(&[]);
            let crc = crc32fast::hash(head);
            (h, Some((start, entry.size(), crc)))
        } else {
            let mut head = Vec::new();
            (&mut entry)
                .take(u64_from(MAX_HEADER.saturating_add(12)))
                .read_to_end(&mut head)
                .with_context(|| format!("member {full}"))?;
            (parse_header(&head).with_context(|| format!("member {full} (decompressed)"))?, None)
        };
        let (h, stored) = header;
        let size = entry.size();
        if let Some(len) = h.len {
            if h.data_offset.checked_add(len) != Some(size) {
                bail!("member {full}: {size} bytes, but the header says {}", h.data_offset.saturating_add(len));
            }
        }
        let (dtype, len) = match (&h.kiln, h.len) {
            (Ok(dtype), Some(len)) => (*dtype, len),
            (Err(why), _) => {
                model.note(format!("array {name}: {why}; NOT carried"));
                continue;
            }
            (Ok(_), None) => bail!("member {full}: an array of no fixed size"),
        };
        match stored {
            Some((start, _, crc)) => members.push((name.to_string(), h, dtype, len, Ok((start, crc, expect, full)))),
            None if h.big_endian => {
                model.note(format!("array {name}: big-endian data in a compressed member; NOT carried"));
            }
            None => members.push((name.to_string(), h, dtype, len, Err((i, expect, full)))),
        }
    }
    // np.savez writes a dict: the canonical order is by name.
    members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for (name, h, dtype, len, at) in members {
        let (offset, stored) = match at {
            Ok((start, crc_so_far, expect, member)) => {
                let header_len = h.data_offset;
                let offset =
                    start.checked_add(h.data_offset).ok_or_else(|| anyhow!("member {member}: offset overflows"))?;
                let swap = if h.big_endian { width(dtype) } else { 1 };
                if swap > 1 {
                    model.note(format!("tensor {name}: big-endian NumPy data byte-swapped to little-endian"));
                }
                (offset, Source::Checked(Box::new(Checked { offset, crc_so_far, header_len, expect, member, swap })))
            }
            Err((index, expect, member)) => {
                (0, Source::Zip(Box::new(Zip { index, skip: h.data_offset, expect, member })))
            }
        };
        let mut t = TensorOut::dense(&name, dtype, h.shape.clone(), offset, len);
        t.source = array_source(&h, dtype, stored);
        if matches!(t.source, Source::Transposed(_)) {
            model.note(format!("tensor {name}: Fortran-order (column-major) NumPy data transposed to row-major"));
        }
        model.tensors.push(t);
    }
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(header: &str) -> Vec<u8> {
        let mut h = header.as_bytes().to_vec();
        while (10 + h.len() + 1) % 64 != 0 {
            h.push(b' ');
        }
        h.push(b'\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend((h.len() as u16).to_le_bytes());
        out.extend(h);
        out
    }

    fn ok(header: &str) -> NpyHeader {
        parse_header(&npy(header)).unwrap_or_else(|e| panic!("{header}: {e:#}"))
    }

    fn bad(header: &str) -> String {
        format!("{:#}", parse_header(&npy(header)).err().unwrap_or_else(|| panic!("{header} was read")))
    }

    #[test]
    fn headers() {
        let h = ok("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
        assert_eq!(
            (h.kiln, h.big_endian, h.shape, h.data_offset, h.len),
            (Ok(DType::F32), false, vec![2, 3], 128, Some(24))
        );
        let h = ok("{'descr': '>i2', 'fortran_order': False, 'shape': (5,), }");
        assert_eq!((h.kiln, h.big_endian, h.shape), (Ok(DType::I16), true, vec![5]));
        let h = ok("{'descr': '|b1', 'fortran_order': True, 'shape': (), }");
        assert_eq!((h.kiln, h.shape, h.len, h.fortran), (Ok(DType::Bool), vec![], Some(1), true));
        // Valid arrays Kiln cannot hold: the reason, and the size where it is fixed.
        let h = ok("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }");
        assert_eq!((h.kiln, h.len), (Err("NumPy dtype \"<c8\" has no Kiln dtype".into()), Some(16)));
        let h = ok("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }");
        assert!(h.kiln.is_err() && h.len.is_none());
        assert_eq!(ok("{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }").len, Some(24));
        assert_eq!(ok("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }").len, None);
        assert_eq!(ok("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (2,), }").len, Some(16));
        assert!(ok("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }").kiln.is_err());
        assert!(
            bad("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }").contains("too large")
        );
        assert!(bad("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }")
            .contains("overflows"));
        assert!(parse_header(b"\x93NUMPY\x01\x00\xff\xff{").is_err());
        assert!(parse_header(b"\x93NUMPY\x09\x00").is_err());
        assert!(bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)").contains("expected ','"));
    }

    /// What NumPy's `_read_array_header` accepts: Python 2 longs (format 1.0
    /// and 2.0 only), string prefixes and escapes, any int syntax, comments.
    #[test]
    fn legacy_headers_numpy_reads() {
        for (header, shape, dtype) in [
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", vec![2, 3], DType::F32),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2 L,), }", vec![2], DType::F32),
            ("{u'descr': u'<f4', u'fortran_order': False, u'shape': (2,)}", vec![2], DType::F32),
            (
                "{\"descr\": U\"<i8\", \"fortran_order\": False, \"shape\": (0x2, 0o3, 0b1, 1_0)}",
                vec![2, 3, 1, 10],
                DType::I64,
            ),
            ("{'descr': '<' 'f8', 'fortran_order': False, 'shape': (+2,), }", vec![2], DType::F64),
            ("{'descr': r'<u2', 'fortran_order': False, 'shape': (True, 2), }", vec![1, 2], DType::U16),
            ("{'descr': '\\x3cf2', 'fortran_order': False, 'shape': (2,)}", vec![2], DType::F16),
            ("\n{'descr':'<f4',\n 'fortran_order':False, # a comment\n 'shape':(2,),}\n", vec![2], DType::F32),
            ("{'descr': 'f', 'fortran_order': False, 'shape': (2,)} # float32 by its code", vec![2], DType::F32),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': ((2),)}", vec![2], DType::F32),
            ("{'descr': '''<f4''', 'fortran_order': False, 'shape': (2,)}", vec![2], DType::F32),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': \\\n (2,)}", vec![2], DType::F32),
        ] {
            let h = ok(header);
            assert_eq!((h.shape, h.kiln), (shape, Ok(dtype)), "{header}");
        }
        // Python 2 longs are only filtered for format 1.0 and 2.0.
        let mut v3 = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }");
        v3[6] = 3;
        v3.splice(8..10, [0, 0, 0, 0]);
        let hl = u32::try_from(v3.len() - 12).unwrap();
        v3[8..12].copy_from_slice(&hl.to_le_bytes());
        assert!(format!("{:#}", parse_header(&v3).unwrap_err()).contains("Python 2 long"));
        for (header, why) in [
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2l,), }", "not a Python number"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", "no 'shape' tuple"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", "negative"),
            ("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", "boolean"),
            ("{'descr': '<f3', 'fortran_order': False, 'shape': (2,), }", "not a NumPy dtype"),
            ("{'descr': b'<f4', 'fortran_order': False, 'shape': (2,), }", "valid dtype"),
            ("{'descr': f'<f4', 'fortran_order': False, 'shape': (2,), }", "prefix"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (01,), }", "not a Python number"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", "after the header"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (--2,), }", "followed by a number"),
            ("{'descr': '<f4' b'', 'fortran_order': False, 'shape': (2,), }", "side by side"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': [2][0:0] or (2,)}", "expected"),
        ] {
            let e = bad(header);
            assert!(e.contains(why), "{header}: {e}");
        }
        let mut v11 = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
        v11[7] = 1;
        assert!(format!("{:#}", parse_header(&v11).unwrap_err()).contains("1.1"));
    }
}
