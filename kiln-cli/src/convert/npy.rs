//! NumPy `.npy` (format versions 1.0, 2.0, 3.0) and `.npz` (a zip of `.npy`
//! members, stored or deflated) input. The `.npy` header is a Python dict
//! literal; it is parsed here by hand, with every length checked.

use std::fs::File;
use std::io::Read;

use anyhow::{anyhow, bail, Context};
use kiln_nostd::int::{u64_from, usize_from};
use kiln_nostd::DType;

use super::error::at;
use super::model::{Checked, Format, Model, ReadOptions, Source, TensorOut, Zip};

/// A parsed `.npy` header.
#[derive(Debug, PartialEq, Eq)]
pub struct NpyHeader {
    pub dtype: DType,
    /// Multi-byte elements stored big-endian (`>` in descr).
    pub big_endian: bool,
    pub shape: Vec<u64>,
    /// Bytes from the start of the member to the first data byte.
    pub data_offset: u64,
    /// Data length in bytes.
    pub len: u64,
}

const MAGIC: &[u8] = b"\x93NUMPY";
/// numpy refuses headers above this size unless told otherwise (max_header_size).
const MAX_HEADER: usize = 1 << 20;

/// Parses the header at the start of `b` (which may be just a prefix of the member).
/// `Ok(Err(reason))` is an array this converter does not carry.
pub fn parse_header(b: &[u8]) -> anyhow::Result<Result<NpyHeader, String>> {
    if !b.starts_with(MAGIC) {
        bail!("not a .npy file (magic)");
    }
    let (major, minor) = (*b.get(6).ok_or_else(|| anyhow!("truncated .npy header"))?, b.get(7).copied().unwrap_or(0));
    let (hlen, start): (usize, usize) = match major {
        1 => (
            usize::from(u16::from_le_bytes(b.get(8..10).ok_or_else(|| anyhow!("truncated .npy header"))?.try_into()?)),
            10,
        ),
        2 | 3 => (
            usize::try_from(u32::from_le_bytes(
                b.get(8..12).ok_or_else(|| anyhow!("truncated .npy header"))?.try_into()?,
            ))?,
            12,
        ),
        _ => bail!(".npy format version {major}.{minor} is not supported"),
    };
    if hlen > MAX_HEADER {
        bail!(".npy header of {hlen} bytes is above the {MAX_HEADER}-byte limit");
    }
    // hlen <= MAX_HEADER, so the sum cannot overflow.
    let end = start.saturating_add(hlen);
    let text = b.get(start..end).ok_or_else(|| anyhow!(".npy header runs past the end ({hlen} bytes)"))?;
    // Versions 1 and 2 are latin-1; 3 is UTF-8. The keys and values we read are ASCII.
    let text: String = if major == 3 {
        std::str::from_utf8(text).context(".npy header is not UTF-8")?.to_string()
    } else {
        text.iter().map(|&c| char::from(c)).collect()
    };
    let base = u64_from(start);
    let dict = DictParser { s: text.as_bytes(), pos: 0 }.dict().map_err(|e| at(base, format!("{e:#}")))?;
    // NumPy reads the header with ast.literal_eval, where a repeated key
    // silently takes its last value, and then requires exactly these three
    // keys. A repeated key is refused here rather than guessed.
    for (i, (k, _, at_pos)) in dict.iter().enumerate() {
        if dict.iter().take(i).any(|(earlier, _, _)| earlier == k) {
            return Err(at(
                base.saturating_add(u64_from(*at_pos)),
                format!(
                    ".npy header has the key {k:?} twice (NumPy would silently use the last value); refusing to guess"
                ),
            ));
        }
        if !["descr", "fortran_order", "shape"].contains(&k.as_str()) {
            return Err(at(
                base.saturating_add(u64_from(*at_pos)),
                format!(".npy header has the key {k:?}; NumPy requires exactly descr, fortran_order and shape"),
            ));
        }
    }
    let get = |k: &str| dict.iter().find(|(key, _, _)| key == k).map(|(_, v, _)| v);
    let descr = match get("descr") {
        Some(Val::Str(s)) => s.clone(),
        Some(_) => return Ok(Err("a structured dtype (descr is not a string)".into())),
        None => bail!(".npy header has no 'descr'"),
    };
    let fortran = match get("fortran_order") {
        Some(Val::Bool(b)) => *b,
        _ => bail!(".npy header has no boolean 'fortran_order'"),
    };
    let shape = match get("shape") {
        Some(Val::Tuple(t)) => t.clone(),
        _ => bail!(".npy header has no 'shape' tuple"),
    };
    if shape.len() > 8 {
        return Ok(Err(format!("rank {} (Kiln allows at most 8)", shape.len())));
    }
    // The first character (not byte: the descr may be any text) is the byte order.
    let mut chars = descr.chars();
    let order = chars.next();
    let code = chars.as_str();
    let dtype = match code {
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "i1" => DType::I8,
        "u1" => DType::U8,
        "b1" => DType::Bool,
        "i2" => DType::I16,
        "u2" => DType::U16,
        "i4" => DType::I32,
        "u4" => DType::U32,
        "i8" => DType::I64,
        "u8" => DType::U64,
        _ => return Ok(Err(format!("NumPy dtype {descr:?} has no Kiln dtype"))),
    };
    let width = match dtype.width() {
        kiln_nostd::Width::Bytes(w) => u64::from(w),
        _ => unreachable!(),
    };
    let big_endian = match order {
        Some('<' | '|' | '=') => false,
        Some('>') => width > 1,
        _ => return Ok(Err(format!("NumPy dtype {descr:?} has no byte-order mark"))),
    };
    let count =
        shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or_else(|| anyhow!("shape product overflows"))?;
    if fortran && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Ok(Err("Fortran (column-major) order; Kiln payloads are row-major (transpose it first)".into()));
    }
    let len = count.checked_mul(width).ok_or_else(|| anyhow!("array size overflows"))?;
    Ok(Ok(NpyHeader { dtype, big_endian, shape, data_offset: u64_from(end), len }))
}

#[derive(Debug, Clone, PartialEq)]
enum Val {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
    Other,
}

struct DictParser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl DictParser<'_> {
    fn ws(&mut self) {
        while self.s.get(self.pos).is_some_and(|c| c.is_ascii_whitespace()) {
            self.pos = self.pos.saturating_add(1);
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.pos).copied()
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos = self.pos.saturating_add(1);
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> anyhow::Result<()> {
        if self.eat(c) {
            Ok(())
        } else {
            bail!(".npy header: expected {:?} at byte {}", char::from(c), self.pos)
        }
    }
    fn string(&mut self) -> anyhow::Result<String> {
        let q = self
            .peek()
            .filter(|c| *c == b'\'' || *c == b'"')
            .ok_or_else(|| anyhow!(".npy header: expected a string at {}", self.pos))?;
        self.pos = self.pos.saturating_add(1);
        let start = self.pos;
        while let Some(&c) = self.s.get(self.pos) {
            if c == b'\\' {
                bail!(".npy header: escapes in strings are not supported");
            }
            if c == q {
                let out = String::from_utf8_lossy(self.s.get(start..self.pos).unwrap_or_default()).into_owned();
                self.pos = self.pos.saturating_add(1);
                return Ok(out);
            }
            self.pos = self.pos.saturating_add(1);
        }
        bail!(".npy header: unterminated string")
    }
    fn word(&mut self) -> &str {
        self.ws();
        let start = self.pos;
        while self.s.get(self.pos).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') {
            self.pos = self.pos.saturating_add(1);
        }
        std::str::from_utf8(self.s.get(start..self.pos).unwrap_or_default()).unwrap_or("")
    }
    fn value(&mut self, depth: usize) -> anyhow::Result<Val> {
        if depth > 8 {
            bail!(".npy header nests too deeply");
        }
        match self.peek() {
            Some(b'\'' | b'"') => Ok(Val::Str(self.string()?)),
            Some(open @ (b'(' | b'[')) => {
                self.pos = self.pos.saturating_add(1);
                let close = if open == b'(' { b')' } else { b']' };
                let mut dims = Vec::new();
                let mut other = false;
                loop {
                    if self.eat(close) {
                        break;
                    }
                    match self.value(depth.saturating_add(1))? {
                        Val::Tuple(t) if t.len() == 1 && open == b'(' => dims.extend(t),
                        _ => other = true,
                    }
                    if !self.eat(b',') {
                        self.expect(close)?;
                        break;
                    }
                }
                Ok(if other || open == b'[' { Val::Other } else { Val::Tuple(dims) })
            }
            Some(b'{') => {
                self.dict_depth(depth.saturating_add(1))?;
                Ok(Val::Other)
            }
            _ => match self.word() {
                "True" => Ok(Val::Bool(true)),
                "False" => Ok(Val::Bool(false)),
                w if !w.is_empty() && w.bytes().all(|c| c.is_ascii_digit()) => {
                    // Python ints may carry an 'L' suffix in old files; digits only here.
                    let n: u64 = w.parse().map_err(|_| anyhow!(".npy header: dimension {w} is too large"))?;
                    Ok(Val::Tuple(vec![n]))
                }
                "" => bail!(".npy header: unexpected byte at {}", self.pos),
                _ => Ok(Val::Other),
            },
        }
    }
    /// The top-level dict: (key, value, byte of the key in the header text).
    fn dict(mut self) -> anyhow::Result<Vec<(String, Val, usize)>> {
        self.dict_depth(0)
    }
    fn dict_depth(&mut self, depth: usize) -> anyhow::Result<Vec<(String, Val, usize)>> {
        self.expect(b'{')?;
        let mut out = Vec::new();
        loop {
            if self.eat(b'}') {
                return Ok(out);
            }
            self.ws();
            let key_at = self.pos;
            let k = self.string()?;
            self.expect(b':')?;
            let v = self.value(depth)?;
            out.push((k, v, key_at));
            if !self.eat(b',') {
                self.expect(b'}')?;
                return Ok(out);
            }
        }
    }
}

fn width(dtype: DType) -> usize {
    match dtype.width() {
        kiln_nostd::Width::Bytes(w) => usize::from(w),
        _ => 1,
    }
}

fn tensor(model: &mut Model, name: &str, h: NpyHeader, base: u64) -> anyhow::Result<()> {
    let offset = base.checked_add(h.data_offset).ok_or_else(|| anyhow!(".npy data offset overflows"))?;
    let mut t = TensorOut::dense(name, h.dtype, h.shape, offset, h.len);
    if h.big_endian {
        t.source = Source::Swap { offset, width: width(h.dtype) };
        model.note(format!("tensor {name}: big-endian NumPy data byte-swapped to little-endian"));
    }
    model.tensors.push(t);
    Ok(())
}

/// Reads one `.npy` array from `bytes` as the tensor `name`.
pub fn read_npy(bytes: &[u8], name: &str, opts: &ReadOptions) -> anyhow::Result<Model> {
    let mut model = Model::new(Format::Npy, opts);
    match parse_header(bytes)? {
        Ok(h) => {
            let size = u64_from(bytes.len());
            if h.data_offset.checked_add(h.len) != Some(size) {
                bail!(".npy data is {} bytes; the header says {}", size.saturating_sub(h.data_offset), h.len);
            }
            tensor(&mut model, name, h, 0)?;
        }
        Err(why) => bail!("cannot convert this .npy array: {why}"),
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
            parse_header(member).with_context(|| format!("member {full} (at byte {start})"))?.map(|h| {
                let head = usize_from(h.data_offset).and_then(|n| member.get(..n)).unwrap_or(&[]);
                let crc = crc32fast::hash(head);
                (h, Some((start, entry.size(), crc)))
            })
        } else {
            let mut head = Vec::new();
            (&mut entry)
                .take(u64_from(MAX_HEADER.saturating_add(12)))
                .read_to_end(&mut head)
                .with_context(|| format!("member {full}"))?;
            parse_header(&head).with_context(|| format!("member {full} (decompressed)"))?.map(|h| (h, None))
        };
        match header {
            Err(why) => model.note(format!("array {name}: {why}; NOT carried")),
            Ok((h, Some((start, size, crc)))) => {
                if h.data_offset.checked_add(h.len) != Some(size) {
                    bail!("member {full}: {size} bytes, but the header says {}", h.data_offset.saturating_add(h.len));
                }
                members.push((name.to_string(), h, Ok((start, crc, expect, full))));
            }
            Ok((h, None)) => {
                if h.data_offset.checked_add(h.len) != Some(entry.size()) {
                    bail!(
                        "member {full}: {} bytes, but the header says {}",
                        entry.size(),
                        h.data_offset.saturating_add(h.len)
                    );
                }
                if h.big_endian {
                    model.note(format!("array {name}: big-endian data in a compressed member; NOT carried"));
                    continue;
                }
                members.push((name.to_string(), h, Err((i, expect, full))));
            }
        }
    }
    // np.savez writes a dict: the canonical order is by name.
    members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for (name, h, at) in members {
        match at {
            Ok((start, crc_so_far, expect, member)) => {
                let header_len = h.data_offset;
                let offset =
                    start.checked_add(h.data_offset).ok_or_else(|| anyhow!("member {member}: offset overflows"))?;
                let swap = if h.big_endian { width(h.dtype) } else { 1 };
                if swap > 1 {
                    model.note(format!("tensor {name}: big-endian NumPy data byte-swapped to little-endian"));
                }
                let mut t = TensorOut::dense(&name, h.dtype, h.shape, offset, h.len);
                t.source = Source::Checked(Box::new(Checked { offset, crc_so_far, header_len, expect, member, swap }));
                model.tensors.push(t);
            }
            Err((index, expect, member)) => {
                let skip = h.data_offset;
                let mut t = TensorOut::dense(&name, h.dtype, h.shape, 0, h.len);
                t.source = Source::Zip(Box::new(Zip { index, skip, expect, member }));
                model.tensors.push(t);
            }
        }
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

    #[test]
    fn headers() {
        let h = parse_header(&npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }")).unwrap().unwrap();
        assert_eq!((h.dtype, h.big_endian, h.shape, h.data_offset, h.len), (DType::F32, false, vec![2, 3], 128, 24));
        let h = parse_header(&npy("{'descr': '>i2', 'fortran_order': False, 'shape': (5,), }")).unwrap().unwrap();
        assert_eq!((h.dtype, h.big_endian, h.shape), (DType::I16, true, vec![5]));
        let h = parse_header(&npy("{'descr': '|b1', 'fortran_order': True, 'shape': (), }")).unwrap().unwrap();
        assert_eq!((h.dtype, h.shape, h.len), (DType::Bool, vec![], 1));
        assert!(parse_header(&npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }")).unwrap().is_err());
        assert!(parse_header(&npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }"))
            .unwrap()
            .is_err());
        assert!(parse_header(&npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }")).unwrap().is_err());
        assert!(
            parse_header(&npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }")).is_err()
        );
        assert!(parse_header(&npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }"
        ))
        .is_err());
        assert!(parse_header(b"\x93NUMPY\x01\x00\xff\xff{").is_err());
        assert!(parse_header(b"\x93NUMPY\x09\x00").is_err());
        assert!(parse_header(&npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)")).is_err());
    }
}
