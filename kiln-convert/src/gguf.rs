//! A bounds-checked GGUF (v2, v3) reader over the mapped input.
//!
//! Every length and count is checked against the bytes that remain before
//! anything is allocated for it (the Kiln allocation rule: a claimed count
//! times the minimum size of one element must fit), offsets use checked
//! arithmetic, and nested arrays are limited to 16 levels. Nothing is copied
//! out of the file except metadata text.

use anyhow::Context;
use kiln_nostd::int::u64_from;

use super::codes::{ggml_block, ggml_code, ggml_dense};
use super::error::{at as at_byte, limit_at};
use super::json;
use super::meta::{Dups, ValueWriter};
use super::model::{
    Format, LegacyGgml, Model, ReadOptions, Source, Split, TensorOut, KEY_SOURCE_TYPES, KEY_VALUE_ENCODING,
};

const MAX_DEPTH: usize = 16;
const DEFAULT_ALIGNMENT: u64 = 32;

/// GGUF value types.
const T_U8: u32 = 0;
const T_I8: u32 = 1;
const T_U16: u32 = 2;
const T_I16: u32 = 3;
const T_U32: u32 = 4;
const T_I32: u32 = 5;
const T_F32: u32 = 6;
const T_BOOL: u32 = 7;
const T_STRING: u32 = 8;
const T_ARRAY: u32 = 9;
const T_U64: u32 = 10;
const T_I64: u32 = 11;
const T_F64: u32 = 12;

fn type_name(t: u32) -> &'static str {
    match t {
        T_U8 => "u8",
        T_I8 => "i8",
        T_U16 => "u16",
        T_I16 => "i16",
        T_U32 => "u32",
        T_I32 => "i32",
        T_F32 => "f32",
        T_BOOL => "bool",
        T_STRING => "string",
        T_ARRAY => "array",
        T_U64 => "u64",
        T_I64 => "i64",
        T_F64 => "f64",
        _ => "?",
    }
}

/// Minimum encoded size of one value of type `t` (for the count check).
fn min_size(t: u32) -> Option<u64> {
    Some(match t {
        T_U8 | T_I8 | T_BOOL => 1,
        T_U16 | T_I16 => 2,
        T_U32 | T_I32 | T_F32 => 4,
        T_U64 | T_I64 | T_F64 | T_STRING => 8,
        T_ARRAY => 12,
        _ => return None,
    })
}

struct Cur<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: u64, what: &str) -> anyhow::Result<&'a [u8]> {
        let end =
            usize::try_from(n).ok().and_then(|n| self.pos.checked_add(n)).filter(|&e| e <= self.buf.len()).ok_or_else(
                || at_byte(u64_from(self.pos), format!("{what} runs past the end of the file ({n} bytes)")),
            )?;
        let s = self.buf.get(self.pos..end).unwrap_or_default();
        self.pos = end;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self, what: &str) -> anyhow::Result<[u8; N]> {
        let at = u64_from(self.pos);
        self.take(u64_from(N), what)?.try_into().map_err(|_| at_byte(at, format!("{what}: a short read")))
    }
    fn u32(&mut self, what: &str) -> anyhow::Result<u32> {
        self.arr(what).map(u32::from_le_bytes)
    }
    fn u64(&mut self, what: &str) -> anyhow::Result<u64> {
        self.arr(what).map(u64::from_le_bytes)
    }
    fn remaining(&self) -> u64 {
        u64_from(self.buf.len().saturating_sub(self.pos))
    }
    /// count * min must fit in the remaining bytes.
    fn check_count(&self, count: u64, min: u64, what: &str) -> anyhow::Result<()> {
        match count.checked_mul(min) {
            Some(need) if need <= self.remaining() => Ok(()),
            _ => Err(at_byte(u64_from(self.pos), format!("{what} count {count} needs more bytes than the file has"))),
        }
    }
    fn string(&mut self, what: &str) -> anyhow::Result<&'a str> {
        let len = self.u64(what)?;
        let at = self.pos;
        let b = self.take(len, what)?;
        std::str::from_utf8(b).map_err(|_| at_byte(u64_from(at), format!("{what} is not UTF-8")))
    }
}

/// Writes one value as JSON text into the metadata arena (within its
/// budget, as it is read); returns the value's type description.
fn value(c: &mut Cur<'_>, t: u32, depth: usize, w: &mut ValueWriter<'_>) -> anyhow::Result<String> {
    Ok(match t {
        T_U8 => {
            w.push_str(&c.arr::<1>("u8")?[0].to_string())?;
            "u8".into()
        }
        T_I8 => {
            w.push_str(&i8::from_le_bytes(c.arr("i8")?).to_string())?;
            "i8".into()
        }
        T_U16 => {
            w.push_str(&u16::from_le_bytes(c.arr("u16")?).to_string())?;
            "u16".into()
        }
        T_I16 => {
            w.push_str(&i16::from_le_bytes(c.arr("i16")?).to_string())?;
            "i16".into()
        }
        T_U32 => {
            w.push_str(&c.u32("u32")?.to_string())?;
            "u32".into()
        }
        T_I32 => {
            w.push_str(&i32::from_le_bytes(c.arr("i32")?).to_string())?;
            "i32".into()
        }
        T_F32 => {
            w.push_str(&json::f32(f32::from_le_bytes(c.arr("f32")?)))?;
            "f32".into()
        }
        T_BOOL => {
            let at = c.pos;
            match c.arr::<1>("bool")?[0] {
                0 => w.push_str("false")?,
                1 => w.push_str("true")?,
                b => return Err(at_byte(at, format!("bool byte {b} (must be 0 or 1)"))),
            }
            "bool".into()
        }
        T_STRING => {
            w.push_str(&json::string(c.string("string")?))?;
            "string".into()
        }
        T_U64 => {
            w.push_str(&c.u64("u64")?.to_string())?;
            "u64".into()
        }
        T_I64 => {
            w.push_str(&i64::from_le_bytes(c.arr("i64")?).to_string())?;
            "i64".into()
        }
        T_F64 => {
            w.push_str(&json::f64(f64::from_le_bytes(c.arr("f64")?)))?;
            "f64".into()
        }
        T_ARRAY => {
            if depth >= MAX_DEPTH {
                return Err(at_byte(c.pos, format!("arrays nested deeper than {MAX_DEPTH}")));
            }
            let type_at = c.pos;
            let et = c.u32("array type")?;
            let min = min_size(et).ok_or_else(|| at_byte(type_at, format!("unknown array element type {et}")))?;
            let n = c.u64("array count")?;
            c.check_count(n, min, "array")?;
            w.push('[')?;
            let mut inner = String::new();
            for i in 0..n {
                if i > 0 {
                    w.push(',')?;
                }
                let ty = value(c, et, depth.saturating_add(1), w)?;
                if i == 0 {
                    inner = ty;
                }
            }
            w.push(']')?;
            if n == 0 {
                inner = type_name(et).to_string();
            }
            format!("array<{inner}>")
        }
        other => return Err(at_byte(c.pos.saturating_sub(4), format!("unknown metadata value type {other}"))),
    })
}

/// An integer metadata value of any width, as u64 (`split.*` keys; llama.cpp
/// writes `split.no` and `split.count` as u16, `split.tensors.count` as i32).
fn integer(c: &mut Cur<'_>, t: u32, key: &str) -> anyhow::Result<u64> {
    let at = c.pos;
    let negative = || at_byte(at, format!("{key} is negative"));
    Ok(match t {
        T_U8 => u64::from(u8::from_le_bytes(c.arr("u8")?)),
        T_U16 => u64::from(u16::from_le_bytes(c.arr("u16")?)),
        T_U32 => u64::from(c.u32("u32")?),
        T_U64 => c.u64("u64")?,
        T_I8 => u64::try_from(i8::from_le_bytes(c.arr("i8")?)).map_err(|_| negative())?,
        T_I16 => u64::try_from(i16::from_le_bytes(c.arr("i16")?)).map_err(|_| negative())?,
        T_I32 => u64::try_from(i32::from_le_bytes(c.arr("i32")?)).map_err(|_| negative())?,
        T_I64 => u64::try_from(i64::from_le_bytes(c.arr("i64")?)).map_err(|_| negative())?,
        other => {
            return Err(at_byte(at.saturating_sub(4), format!("{key} is a {} (must be an integer)", type_name(other))))
        }
    })
}

/// Reads a `split.*` key's value into `split` (the key is consumed: it
/// describes the set, not the model, and is not copied into the metadata).
fn split_key(c: &mut Cur<'_>, t: u32, key: &str, split: &mut Split, opts: &ReadOptions) -> anyhow::Result<()> {
    match key {
        "split.no" => split.no = integer(c, t, key)?,
        "split.count" => split.count = integer(c, t, key)?,
        "split.tensors.count" => split.tensors = integer(c, t, key)?,
        _ => {
            // Another split.* key: read past its value, keep nothing.
            let mut scratch = super::meta::Metadata::new(opts.metadata_budget);
            scratch.push_with(key, |w| value(c, t, 0, w))?;
        }
    }
    Ok(())
}

/// The most tensors a Kiln directory can name: names are non-empty and the
/// name heap holds at most 65,535 bytes.
pub const MAX_KILN_TENSORS: u64 = 65_535;

pub fn read(bytes: &[u8], opts: &ReadOptions) -> anyhow::Result<Model> {
    let mut c = Cur { buf: bytes, pos: 0 };
    let magic = c.arr::<4>("magic")?;
    if &magic != b"GGUF" {
        return Err(at_byte(
            0,
            LegacyGgml::detect(bytes).map_or_else(|| "not a GGUF file (magic)".into(), LegacyGgml::refusal),
        ));
    }
    let version = c.u32("version")?;
    if !(2..=3).contains(&version) {
        let swapped = version.swap_bytes();
        if (1..=3).contains(&swapped) {
            return Err(at_byte(
                4,
                format!(
                    "a big-endian GGUF file (version {swapped}, byte-swapped); only little-endian GGUF is supported"
                ),
            ));
        }
        return Err(at_byte(4, format!("GGUF version {version} is not supported (2 and 3 are)")));
    }
    let tensor_count = c.u64("tensor_count")?;
    let kv_count = c.u64("metadata_kv_count")?;
    // Minimum sizes: a KV is key (8) + type (4) + 1; a tensor info is name (8) + n_dims (4) + type (4) + offset (8).
    c.check_count(kv_count, 13, "metadata")?;
    c.check_count(tensor_count, 24, "tensor")?;
    let mut model = Model::new(Format::Gguf, opts);
    // What Kiln can hold, before anything is allocated: a dict count is a
    // u32, and a directory names at most 65,535 tensors. (Checking only,
    // the file is read on: the counts fit in it, as check_count saw.)
    if tensor_count > MAX_KILN_TENSORS {
        model.limit(limit_at(
            8,
            format!(
                "{tensor_count} tensors: a Kiln directory holds at most {MAX_KILN_TENSORS} (its names share a 64 KiB heap)"
            ),
        ))?;
    }
    if kv_count > u64::from(u32::MAX) {
        model.limit(limit_at(16, format!("{kv_count} metadata pairs: a Kiln dict holds at most 2^32 - 1")))?;
    }

    model.metadata.set_own(KEY_VALUE_ENCODING, "json".into());
    let mut alignment = DEFAULT_ALIGNMENT;
    let mut split: Option<Split> = None;
    for _ in 0..kv_count {
        let key_at = c.pos;
        let key = c.string("metadata key")?;
        let type_at = c.pos;
        let t = c.u32("metadata value type")?;
        if key == "general.alignment" {
            if t != T_U32 {
                return Err(at_byte(type_at, format!("general.alignment is a {} (must be u32)", type_name(t))));
            }
            let a = u32::from_le_bytes(
                bytes.get(c.pos..).and_then(|b| b.get(..4)).and_then(|b| b.try_into().ok()).unwrap_or([0; 4]),
            );
            alignment = u64::from(a);
            if alignment == 0 || !alignment.is_power_of_two() {
                return Err(at_byte(c.pos, format!("general.alignment {alignment} is not a power of two")));
            }
        }
        if key.starts_with("split.") {
            split_key(&mut c, t, key, split.get_or_insert_with(Split::default), opts)
                .with_context(|| format!("metadata key {key:?} (at byte {key_at})"))?;
            continue;
        }
        model
            .metadata
            .push_with(key, |w| value(&mut c, t, 0, w))
            .with_context(|| format!("metadata key {key:?} (at byte {key_at})"))?;
    }
    let notes = model.metadata.seal(Dups::Refuse)?;
    model.notes.extend(notes);
    let moved = model.metadata.protect()?;
    model.notes.extend(moved);
    let types = model.metadata.types_json()?;
    model.metadata.set_own(KEY_SOURCE_TYPES, types);

    struct Info {
        name: String,
        dims: Vec<u64>,
        ty: u32,
        offset: u64,
        at: usize,
    }
    let mut infos = Vec::new();
    let mut name_bytes = 0u64;
    for _ in 0..tensor_count {
        let at = c.pos;
        let name = c.string("tensor name")?.to_string();
        name_bytes = name_bytes.saturating_add(u64_from(name.len()));
        if name_bytes > MAX_KILN_TENSORS && model.limit.is_none() {
            model.limit(limit_at(
                at,
                format!(
                    "tensor {name}: the tensor names need more than 65,535 bytes, a Kiln limit (name offsets are u16)"
                ),
            ))?;
        }
        let dims_at = c.pos;
        let n_dims = c.u32("n_dims")?;
        if n_dims > 8 {
            return Err(at_byte(
                dims_at,
                format!("tensor {name}: {n_dims} dimensions (Kiln and ggml allow at most 8)"),
            ));
        }
        c.check_count(u64::from(n_dims), 8, "dimension")?;
        let dims = (0..n_dims).map(|_| c.u64("dimension")).collect::<anyhow::Result<Vec<_>>>()?;
        let ty = c.u32("tensor type")?;
        let offset = c.u64("tensor offset")?;
        infos.push(Info { name, dims, ty, offset, at });
    }
    // alignment is a nonzero power of two (checked where it was read).
    let data_start = u64_from(c.pos).checked_next_multiple_of(alignment).unwrap_or(u64::MAX);
    let file_len = u64_from(bytes.len());
    if data_start > file_len && !infos.is_empty() {
        return Err(at_byte(
            c.pos,
            format!("the tensor data section starts at {data_start}, past the end of the file ({file_len})"),
        ));
    }
    for info in infos {
        let Info { name, dims, ty, offset, at } = info;
        if offset.checked_rem(alignment) != Some(0) {
            return Err(at_byte(
                at,
                format!("tensor {name}: offset {offset} is not a multiple of the alignment {alignment}"),
            ));
        }
        let count = dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| at_byte(at, format!("tensor {name}: the element count overflows")))?;
        // ggml lists the fastest-varying dimension first; Kiln (like NumPy) lists it last.
        let shape: Vec<u64> = dims.iter().rev().copied().collect();
        let (len, tensor) = if let Some(dtype) = ggml_dense(ty) {
            let width = match dtype.width() {
                kiln_nostd::dtype::Width::Bytes(w) => u64::from(w),
                _ => unreachable!("dense ggml types are whole-byte"),
            };
            let len = count.checked_mul(width).ok_or_else(|| at_byte(at, format!("tensor {name}: size overflows")))?;
            (len, TensorOut::dense(&name, dtype, shape, 0, len))
        } else if let Some(b) = ggml_block(ty) {
            let row = dims.first().copied().unwrap_or(1);
            if row.checked_rem(b.elements) != Some(0) {
                return Err(at_byte(
                    at,
                    format!("tensor {name}: {} needs rows of a multiple of {} elements, not {row}", b.name, b.elements),
                ));
            }
            let len = count
                .checked_div(b.elements)
                .and_then(|blocks| blocks.checked_mul(b.bytes))
                .ok_or_else(|| at_byte(at, format!("tensor {name}: size overflows")))?;
            let block_size = u32::try_from(b.bytes).map_err(|_| at_byte(at, format!("tensor {name}: block size")))?;
            let t = TensorOut::opaque(&name, ggml_code(&b), b.name, block_size, shape, Source::File { offset: 0 }, len);
            (len, t)
        } else {
            model.note(format!(
                "tensor {name}: ggml type {ty} is unknown to this converter (its size cannot be computed); NOT carried"
            ));
            continue;
        };
        let abs = data_start
            .checked_add(offset)
            .filter(|s| s.checked_add(len).is_some_and(|e| e <= file_len))
            .ok_or_else(|| {
                at_byte(
                    at,
                    format!("tensor {name}: bytes {offset}+{len} of the data section run past the end of the file"),
                )
            })?;
        let mut tensor = tensor;
        tensor.source = Source::File { offset: abs };
        model.tensors.push(tensor);
    }
    model.split = split.map(|s| Split { file_tensors: tensor_count, ..s });
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(out: &mut Vec<u8>, text: &str) {
        out.extend((text.len() as u64).to_le_bytes());
        out.extend(text.as_bytes());
    }

    /// A GGUF v3 file: two KVs (one nested array), an f32 [3, 2] tensor and a Q8_0 [1, 32] tensor.
    fn sample() -> Vec<u8> {
        let mut f = b"GGUF".to_vec();
        f.extend(3u32.to_le_bytes());
        f.extend(2u64.to_le_bytes());
        f.extend(2u64.to_le_bytes());
        s(&mut f, "general.name");
        f.extend(T_STRING.to_le_bytes());
        s(&mut f, "tiny");
        s(&mut f, "x.nested");
        f.extend(T_ARRAY.to_le_bytes());
        f.extend(T_ARRAY.to_le_bytes());
        f.extend(2u64.to_le_bytes());
        for vals in [&[1u16, 2][..], &[3u16][..]] {
            f.extend(T_U16.to_le_bytes());
            f.extend((vals.len() as u64).to_le_bytes());
            for v in vals {
                f.extend(v.to_le_bytes());
            }
        }
        s(&mut f, "w");
        f.extend(2u32.to_le_bytes());
        f.extend(2u64.to_le_bytes());
        f.extend(3u64.to_le_bytes());
        f.extend(0u32.to_le_bytes());
        f.extend(0u64.to_le_bytes());
        s(&mut f, "q");
        f.extend(2u32.to_le_bytes());
        f.extend(32u64.to_le_bytes());
        f.extend(1u64.to_le_bytes());
        f.extend(8u32.to_le_bytes());
        f.extend(32u64.to_le_bytes());
        f.resize(f.len().div_ceil(32) * 32, 0);
        f.extend((0..24).map(|i| i as u8));
        f.resize(f.len() + 8, 0);
        f.extend((0..34).map(|i| i as u8));
        f
    }

    #[test]
    fn reads_a_small_file() {
        let m = read(&sample(), &ReadOptions::default()).unwrap();
        assert_eq!(m.metadata.get("general.name"), Some("\"tiny\""));
        assert_eq!(m.metadata.get("x.nested"), Some("[[1,2],[3]]"));
        assert_eq!(m.tensors.len(), 2);
        assert_eq!((m.tensors[0].shape.to_vec(), m.tensors[0].len), (vec![3, 2], 24));
        assert_eq!((m.tensors[1].shape.to_vec(), m.tensors[1].len, m.tensors[1].block_size), (vec![1, 32], 34, 34));
        assert_eq!(m.tensors[1].dtype.code(), 4096 + 8);
    }

    #[test]
    fn every_prefix_and_corruption_is_an_error_not_a_panic() {
        let f = sample();
        for n in 0..f.len() {
            assert!(read(&f[..n], &ReadOptions::default()).is_err(), "prefix {n}");
        }
        for at in 0..f.len() {
            for v in [0u8, 0x7f, 0xff] {
                let mut b = f.clone();
                b[at] = v;
                let _ = read(&b, &ReadOptions::default());
            }
        }
    }
}
