//! safetensors input, through the `safetensors` crate's header parser
//! (which checks the header length, the JSON, the dtypes, that offsets are
//! contiguous and that the data fills the file exactly).
//!
//! Before the crate parses the header (into maps sized by the header), a
//! streaming pass over the JSON that stores nothing counts the tensors, their
//! name bytes and the `__metadata__` bytes, so a header that Kiln could not
//! hold (more than 65,535 bytes of names) or that is over the metadata budget
//! is refused first, in bounded memory.
//!
//! The way back: a file this converter wrote from Kiln carries, for every
//! tensor safetensors has no dtype for, `__metadata__["kiln.dtype.NAME"]`
//! (and `kiln.quant.NAME` for scheme 1/2 links); those records are read back
//! here, so Kiln -> safetensors -> Kiln restores i4, u4, odd-length e2m1,
//! opaque blocks and quantization links exactly.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use anyhow::anyhow;
use kiln_nostd::int::u64_from;
use kiln_nostd::DType;
use safetensors::tensor::{Dtype, TensorInfo};
use safetensors::SafeTensorError;
use serde::de::{self, Deserializer as _, IgnoredAny, MapAccess, Visitor};

use super::codes::{SAFETENSORS_DENSE, SAFETENSORS_OPAQUE};
use super::error::{at, limit_at};
use super::meta::Dups;
use super::model::{Format, Model, QuantOut, ReadOptions, Source, TensorOut, KEY_VALUE_ENCODING};

/// The largest header the `safetensors` crate reads (its `MAX_HEADER_SIZE`).
const MAX_HEADER: usize = 100_000_000;

/// Counts from the streaming pass.
#[derive(Default, Debug)]
struct Scan {
    tensors: u64,
    name_bytes: u64,
    meta_entries: u64,
    meta_bytes: u64,
}

struct ScanVisitor<'s>(&'s mut Scan);

impl<'de> Visitor<'de> for ScanVisitor<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            if key == "__metadata__" {
                map.next_value_seed(MetaSeed(self.0))?;
            } else {
                self.0.tensors = self.0.tensors.saturating_add(1);
                self.0.name_bytes = self.0.name_bytes.saturating_add(u64_from(key.len()));
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// A JSON string, borrowed from the header where it has no escapes (a
/// 16 MiB metadata value is then never copied to be looked at).
struct Text<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Text<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(v.to_string())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(v)))
    }
}

struct MetaSeed<'s>(&'s mut Scan);

impl<'de> de::DeserializeSeed<'de> for MetaSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MetaSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of strings")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(Text(k)) = map.next_key::<Text<'de>>()? {
            let Text(v) = map.next_value::<Text<'de>>()?;
            self.0.meta_entries = self.0.meta_entries.saturating_add(1);
            self.0.meta_bytes = self.0.meta_bytes.saturating_add(u64_from(k.len())).saturating_add(u64_from(v.len()));
        }
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// The header bytes (after the 8-byte length), when the length is plausible.
fn header(bytes: &[u8]) -> Option<&[u8]> {
    let n = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    let end = usize::try_from(n).ok()?.checked_add(8)?;
    bytes.get(8..end)
}

/// Byte offset in the file of a serde_json error at (line, column) of the header.
fn json_offset(head: &[u8], line: usize, column: usize) -> u64 {
    let mut at = 0usize;
    for _ in 1..line {
        match head.get(at..).and_then(|rest| rest.iter().position(|&b| b == b'\n')) {
            Some(p) => at = at.saturating_add(p).saturating_add(1),
            None => break,
        }
    }
    8u64.saturating_add(u64_from(at.saturating_add(column.saturating_sub(1))))
}

/// Where `name` appears as a JSON key in the header (for errors naming a tensor).
fn key_offset(head: &[u8], name: &str) -> Option<u64> {
    let needle = serde_json::to_string(name).ok()?;
    let pos = head.windows(needle.len()).position(|w| w == needle.as_bytes())?;
    Some(8u64.saturating_add(u64_from(pos)))
}

/// The crate's error, at a byte offset where one is known.
fn crate_error(bytes: &[u8], e: SafeTensorError) -> anyhow::Error {
    let head = header(bytes).unwrap_or(&[]);
    let offset = match &e {
        SafeTensorError::HeaderTooLarge | SafeTensorError::HeaderTooSmall | SafeTensorError::InvalidHeaderLength => {
            Some(0)
        }
        SafeTensorError::InvalidHeader(_) => Some(8),
        SafeTensorError::InvalidHeaderDeserialization(j) => Some(json_offset(head, j.line(), j.column())),
        SafeTensorError::InvalidOffset(name) | SafeTensorError::TensorNotFound(name) => key_offset(head, name),
        SafeTensorError::MetadataIncompleteBuffer => Some(u64_from(bytes.len())),
        _ => None,
    };
    let msg = format!("not a valid safetensors file: {e}");
    match offset {
        Some(o) => at(o, msg),
        None => anyhow!(msg),
    }
}

/// The streaming pass: refuses a header Kiln could not hold before the
/// table is read, and counts its tensors (the table's size, 0 when not JSON).
fn prescan(bytes: &[u8], opts: &ReadOptions, model: &mut Model) -> anyhow::Result<usize> {
    let Some(head) = header(bytes) else { return Ok(0) };
    let mut scan = Scan::default();
    let mut de = serde_json::Deserializer::from_slice(head);
    if de.deserialize_map(ScanVisitor(&mut scan)).is_err() {
        // Not JSON: the table's reader says where and why.
        return Ok(0);
    }
    // More names than one block holds make a sharded model; more tensors than the count cap, nothing.
    if scan.tensors > u64::from(kiln_nostd::directory::DEFAULT_CAP) {
        model.limit(limit_at(
            8,
            format!(
                "{} tensors: a Kiln model holds at most {} (the count cap; a Kiln limit, not a safetensors fault)",
                scan.tensors,
                kiln_nostd::directory::DEFAULT_CAP
            ),
        ))?;
    }
    let need = scan.meta_bytes.saturating_add(scan.meta_entries.saturating_mul(32));
    if need > opts.metadata_budget {
        return Err(at(
            8,
            format!(
                "__metadata__ has {} entries of {} bytes, above the {} byte metadata budget (raise it with --metadata-budget)",
                scan.meta_entries, scan.meta_bytes, opts.metadata_budget
            ),
        ));
    }
    Ok(usize::try_from(scan.tensors).unwrap_or(0))
}

/// Reads a safetensors file; with [`ReadOptions::kiln_limits`] false
/// (validate, inspect) what Kiln cannot hold is noted in [`Model::limit`],
/// not refused, so the verdict is the format's.
pub fn read(bytes: &[u8], opts: &ReadOptions) -> anyhow::Result<Model> {
    let mut model = Model::new(Format::Safetensors, opts);
    let count = prescan(bytes, opts, &mut model)?;
    // The tensor table and its checks first, then the metadata read into the
    // model (the table holds no copy of it).
    let (data_start, mut table) = tensor_table(bytes, count)?;
    model.metadata.set_own(KEY_VALUE_ENCODING, "text".into());
    read_metadata(bytes, &mut model)?;
    // A key twice: the last value, as the safetensors readers keep it (with a note).
    let notes = model.metadata.seal(Dups::LastWins)?;
    model.notes.extend(notes);
    // The rows are made from the last record back, the records' vector
    // shrinking as the rows' grows, so the two are never both whole.
    model.tensors.reserve_exact(table.recs.len());
    let mut notes = Vec::new();
    while let Some(rec) = table.recs.pop() {
        if table.recs.len() < table.recs.capacity() / 2 {
            table.recs.shrink_to_fit();
        }
        let rec = &rec;
        let name = table.name(rec);
        let dtype_name = rec.dtype.to_string();
        let shape = table.shape(rec).to_vec();
        // The ranges were checked to tile the data section (begin <= end, inside the file).
        let offset = data_start.saturating_add(rec.begin);
        let len = rec.end.saturating_sub(rec.begin);
        if let Some((_, dtype)) = SAFETENSORS_DENSE.iter().find(|(n, _)| *n == dtype_name) {
            model.tensors.push(TensorOut::dense(name, *dtype, shape, offset, len));
        } else if let Some((n, code, block, _)) = SAFETENSORS_OPAQUE.iter().find(|(n, ..)| *n == dtype_name) {
            notes.push(format!(
                "tensor {name}: safetensors {n} has no Kiln dtype; stored as opaque code {code} (layout safetensors.{n}, block {block} bytes)"
            ));
            let layout = format!("safetensors.{n}");
            model.tensors.push(TensorOut::opaque(name, *code, layout, *block, shape, Source::File { offset }, len));
        } else {
            notes.push(format!(
                "tensor {name}: safetensors dtype {dtype_name} is unknown to this converter; NOT carried"
            ));
        }
    }
    drop(table);
    model.tensors.reverse();
    model.notes.extend(notes.into_iter().rev());
    restore(&mut model);
    // Only now: restored records are no longer user keys.
    let moved = model.metadata.protect()?;
    model.notes.extend(moved);
    Ok(model)
}

/// One tensor of the header, compact (a header of 200,000 tensors holds
/// 200,000 of these at once): its name is a range of the header (or, when
/// the JSON escapes it, of [`Table::owned`]), its shape a range of
/// [`Table::shapes`].
struct Rec {
    begin: u64,
    end: u64,
    name_at: u32,
    name_len: u32,
    shape_at: u32,
    rank: u8,
    owned: bool,
    dtype: Dtype,
}

/// The tensors of a header, with the bytes their records point into.
struct Table<'h> {
    head: &'h str,
    owned: String,
    shapes: Vec<u64>,
    recs: Vec<Rec>,
}

impl Table<'_> {
    fn name(&self, r: &Rec) -> &str {
        let text = if r.owned { self.owned.as_str() } else { self.head };
        let at = usize::try_from(r.name_at).unwrap_or(usize::MAX);
        let end = at.saturating_add(usize::try_from(r.name_len).unwrap_or(usize::MAX));
        text.get(at..end).unwrap_or_default()
    }
    fn shape(&self, r: &Rec) -> &[u64] {
        let at = usize::try_from(r.shape_at).unwrap_or(usize::MAX);
        self.shapes.get(at..at.saturating_add(usize::from(r.rank))).unwrap_or_default()
    }
}

/// Fills a [`Table`] from the header's JSON, one entry at a time: each entry
/// is read as the crate's [`TensorInfo`] (its field and dtype rules) and
/// kept as a [`Rec`]; `__metadata__` must be null or a map of strings.
struct TableVisitor<'t, 'h>(&'t mut Table<'h>);

impl<'de> Visitor<'de> for TableVisitor<'_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let t = self.0;
        let too_large = || de::Error::custom("the header is too large");
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            if key == "__metadata__" {
                map.next_value_seed(MetaSeed(&mut Scan::default()))?;
                continue;
            }
            let info: TensorInfo = map.next_value()?;
            let rank =
                u8::try_from(info.shape.len()).map_err(|_| de::Error::custom("a shape of over 255 dimensions"))?;
            let shape_at = u32::try_from(t.shapes.len()).map_err(|_| too_large())?;
            t.shapes.extend(info.shape.iter().map(|&d| u64_from(d)));
            // A name without escapes is where serde_json found it, in the header.
            let head = t.head.as_bytes().as_ptr_range();
            let (at, owned) = match &key {
                Cow::Borrowed(s) if head.contains(&s.as_ptr()) => {
                    (s.as_ptr().addr().wrapping_sub(head.start.addr()), false)
                }
                _ => {
                    t.owned.push_str(&key);
                    (t.owned.len().saturating_sub(key.len()), true)
                }
            };
            t.recs.push(Rec {
                begin: u64_from(info.data_offsets.0),
                end: u64_from(info.data_offsets.1),
                name_at: u32::try_from(at).map_err(|_| too_large())?,
                name_len: u32::try_from(key.len()).map_err(|_| too_large())?,
                shape_at,
                rank,
                owned,
                dtype: info.dtype,
            });
        }
        Ok(())
    }
}

/// The header's tensor table, sorted by name (the canonical order of a dict
/// of tensors), with where the data section starts. The checks are the
/// `safetensors` crate's (`SafeTensors::read_metadata`: header length, UTF-8,
/// JSON, dtypes, ranges that tile the data section, which fills the file
/// exactly), made here on compact records: the crate's own table holds each
/// entry several times over (a buffered copy of the JSON, a hash map and a
/// vector, the names cloned), 15x the header for 200,000 tensors.
/// A name given twice is refused (the crate keeps the last entry).
fn tensor_table(bytes: &[u8], count: usize) -> anyhow::Result<(u64, Table<'_>)> {
    let fail = |e: SafeTensorError| crate_error(bytes, e);
    let n = u64::from_le_bytes(bytes.get(..8).ok_or_else(|| fail(SafeTensorError::HeaderTooSmall))?.try_into()?);
    let n = usize::try_from(n).map_err(|_| fail(SafeTensorError::HeaderTooLarge))?;
    if n > MAX_HEADER {
        return Err(fail(SafeTensorError::HeaderTooLarge));
    }
    let stop = n.checked_add(8).ok_or_else(|| fail(SafeTensorError::InvalidHeaderLength))?;
    let raw = bytes.get(8..stop).ok_or_else(|| fail(SafeTensorError::InvalidHeaderLength))?;
    let head = std::str::from_utf8(raw).map_err(|e| fail(SafeTensorError::InvalidHeader(e)))?;
    // `count`, the prescan's, sizes the vectors exactly (bounded by the header's size).
    let recs = Vec::with_capacity(count.min(n / 32));
    let mut table = Table { head, owned: String::new(), shapes: Vec::with_capacity(recs.capacity()), recs };
    let mut de = serde_json::Deserializer::from_str(head);
    (de.deserialize_map(TableVisitor(&mut table)).and_then(|()| de.end()))
        .map_err(|e| fail(SafeTensorError::InvalidHeaderDeserialization(e)))?;
    // The crate's checks, in its order: by data offsets, each range starting
    // where the last ended, its length what the dtype and shape take.
    table.recs.sort_unstable_by_key(|r| (r.begin, r.end));
    let mut start = 0u64;
    for r in &table.recs {
        if r.begin != start || r.end < r.begin {
            return Err(fail(SafeTensorError::InvalidOffset(table.name(r).to_string())));
        }
        start = r.end;
        let bits = (table.shape(r).iter().try_fold(1u64, |a, &d| a.checked_mul(d)))
            .and_then(|count| count.checked_mul(u64_from(r.dtype.bitsize())))
            .ok_or_else(|| fail(SafeTensorError::ValidationOverflow))?;
        if bits % 8 != 0 {
            return Err(fail(SafeTensorError::MisalignedSlice));
        }
        if r.end.saturating_sub(r.begin) != bits / 8 {
            return Err(fail(SafeTensorError::TensorInvalidInfo));
        }
    }
    if start.checked_add(u64_from(stop)) != Some(u64_from(bytes.len())) {
        return Err(fail(SafeTensorError::MetadataIncompleteBuffer));
    }
    let mut recs = std::mem::take(&mut table.recs);
    recs.sort_unstable_by(|a, b| table.name(a).as_bytes().cmp(table.name(b).as_bytes()));
    table.recs = recs;
    let twice = table.recs.windows(2).find_map(|w| match w {
        [a, b] if table.name(a) == table.name(b) => Some(table.name(a)),
        _ => None,
    });
    if let Some(name) = twice {
        let msg = format!("not a valid safetensors file: tensor {name} is given twice");
        return Err(match key_offset(raw, name) {
            Some(o) => at(o, msg),
            None => anyhow!(msg),
        });
    }
    Ok((u64_from(stop), table))
}

/// Reads `__metadata__` into the model's metadata straight from the header
/// (values borrowed from the mapped bytes where they have no escapes).
fn read_metadata(bytes: &[u8], model: &mut Model) -> anyhow::Result<()> {
    let Some(head) = header(bytes) else { return Ok(()) };
    let mut de = serde_json::Deserializer::from_slice(head);
    let mut failed = None;
    let seen = de.deserialize_map(MetaReader { model, failed: &mut failed });
    if let Some(e) = failed {
        return Err(e);
    }
    // The crate parsed this header already; a failure here would be ours.
    seen.map_err(|e| crate_error(bytes, SafeTensorError::InvalidHeaderDeserialization(e)))
}

/// Finds `__metadata__` at the top level of the header and pushes its pairs.
struct MetaReader<'m> {
    model: &'m mut Model,
    failed: &'m mut Option<anyhow::Error>,
}

impl<'de> Visitor<'de> for MetaReader<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            if key != "__metadata__" {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let pairs = map.next_value::<Option<MetaPairs<'de>>>()?;
            for (k, v) in pairs.map(|p| p.0).unwrap_or_default() {
                if let Err(e) = self.model.metadata.push(&k, &v, "") {
                    *self.failed = Some(e);
                    return Err(de::Error::custom("over the metadata budget"));
                }
            }
        }
        Ok(())
    }
}

/// The pairs of `__metadata__`, borrowed where they can be.
struct MetaPairs<'de>(Vec<(Cow<'de, str>, Cow<'de, str>)>);

impl<'de> de::Deserialize<'de> for MetaPairs<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(PairsVisitor)
    }
}

struct PairsVisitor;

impl<'de> Visitor<'de> for PairsVisitor {
    type Value = MetaPairs<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of strings")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetaPairs<'de>, A::Error> {
        let mut out = Vec::new();
        while let Some(Text(k)) = map.next_key::<Text<'de>>()? {
            let Text(v) = map.next_value::<Text<'de>>()?;
            out.push((k, v));
        }
        Ok(MetaPairs(out))
    }
}

/// `kiln.dtype.NAME`: what a U8 tensor really is.
#[derive(serde::Deserialize)]
struct DtypeRecord {
    dtype: String,
    code: u16,
    layout: Option<String>,
    block_size: u32,
    shape: Vec<u64>,
}

/// `kiln.quant.NAME`: a scheme 1/2 link.
#[derive(serde::Deserialize)]
struct QuantRecord {
    scheme: u16,
    axis: u16,
    group_size: u32,
    scale: String,
    outer: Option<String>,
}

/// Why a `kiln.dtype.NAME` record does not describe tensor `t`, or the restored tensor.
fn restored(t: &TensorOut, rec: &DtypeRecord) -> Result<TensorOut, String> {
    let dtype = DType::from_code(rec.code).ok_or_else(|| format!("code {} is not a Kiln dtype", rec.code))?;
    if dtype.name() != rec.dtype {
        return Err(format!("code {} is {}, not {}", rec.code, dtype.name(), rec.dtype));
    }
    if t.dtype != DType::U8 || t.shape.len() != 1 {
        return Err("the tensor is not the one-dimensional U8 the converter writes".into());
    }
    if rec.shape.len() > 8 {
        return Err(format!("rank {}", rec.shape.len()));
    }
    let count = rec.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or("the shape overflows")?;
    match dtype.byte_length(count) {
        Some(n) if n == t.len => {}
        Some(n) => return Err(format!("{} elements of {} need {n} bytes, the tensor has {}", count, rec.dtype, t.len)),
        None => {
            let layout_ok = rec.layout.as_deref().is_some_and(|l| !l.is_empty());
            if !layout_ok || rec.block_size == 0 || t.len.checked_rem(u64::from(rec.block_size)) != Some(0) {
                return Err("an opaque dtype needs a layout and a block size dividing the byte length".into());
            }
        }
    }
    let mut out = t.clone();
    out.dtype = dtype;
    out.shape = rec.shape.as_slice().into();
    if dtype.is_opaque() {
        out.layout = rec.layout.as_deref().map(Into::into);
        out.block_size = rec.block_size;
    }
    Ok(out)
}

/// Applies the converter's `kiln.dtype.*` / `kiln.quant.*` records and drops the ones used.
fn restore(model: &mut Model) {
    // The names, for the links' targets: only when there are links (a copy
    // of every name, which a model of 200,000 tensors would feel).
    let linked = model.metadata.iter().any(|(k, _)| k.starts_with("kiln.quant."));
    let names: HashSet<String> =
        if linked { model.tensors.iter().map(|t| t.name.to_string()).collect() } else { HashSet::new() };
    let mut used = HashSet::new();
    let mut notes = Vec::new();
    for t in &mut model.tensors {
        let key = format!("kiln.dtype.{}", t.name);
        if let Some(text) = model.metadata.user(&key) {
            match serde_json::from_str::<DtypeRecord>(text).map_err(|e| e.to_string()).and_then(|r| restored(t, &r)) {
                Ok(r) => {
                    notes.push(format!(
                        "tensor {}: restored as Kiln {}{} {:?} from __metadata__ {key}",
                        t.name,
                        r.dtype.name(),
                        r.layout.as_deref().map(|l| format!(" ({l})")).unwrap_or_default(),
                        r.shape
                    ));
                    *t = r;
                    used.insert(key);
                }
                Err(why) => notes.push(format!(
                    "tensor {}: __metadata__ {key} does not describe it ({why}); kept as safetensors wrote it, and the record kept as metadata",
                    t.name
                )),
            }
        }
        let key = format!("kiln.quant.{}", t.name);
        if let Some(text) = model.metadata.user(&key) {
            match serde_json::from_str::<QuantRecord>(text) {
                Ok(q) if names.contains(&q.scale) && q.outer.as_ref().is_none_or(|o| names.contains(o)) => {
                    notes.push(format!("tensor {}: quantization scheme {} restored from __metadata__ {key}", t.name, q.scheme));
                    t.quant = Some(Box::new(QuantOut {
                        scheme: q.scheme,
                        axis: q.axis,
                        group_size: q.group_size,
                        scale: q.scale,
                        outer: q.outer,
                    }));
                    used.insert(key);
                }
                _ => notes.push(format!(
                    "tensor {}: __metadata__ {key} is not a quantization link to tensors of this file; kept as metadata",
                    t.name
                )),
            }
        }
    }
    model.metadata.remove_user(&used);
    model.notes.extend(notes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(head: &str, data: usize) -> Vec<u8> {
        let mut b = u64_from(head.len()).to_le_bytes().to_vec();
        b.extend_from_slice(head.as_bytes());
        b.resize(b.len().saturating_add(data), 0);
        b
    }

    /// An error's message without where: a JSON fault is found at its own
    /// place here, where the crate (buffering the whole map) reports the map's end.
    fn plain(e: &anyhow::Error) -> String {
        let text = e.to_string();
        let text = text.split_once(": ").filter(|(b, _)| b.starts_with("byte ")).map_or(text.as_str(), |(_, m)| m);
        text.split(" at line ").next().unwrap_or_default().to_string()
    }

    /// The table's checks give the `safetensors` crate's verdict and
    /// message on every fault it knows (the crate is the oracle), and a name
    /// given twice, which the crate reads as its last entry, is refused.
    #[test]
    fn the_table_checks_what_the_crate_checks() {
        let w = |d: &str, s: &str, o: &str| format!(r#""w":{{"dtype":"{d}","shape":{s},"data_offsets":{o}}}"#);
        let cases: Vec<Vec<u8>> = vec![
            file(&format!("{{{}}}", w("F32", "[2]", "[0,8]")), 8),
            file(&format!("{{{}}}", w("F32", "[2]", "[0,8]")), 4),
            file(&format!("{{{}}}", w("F32", "[2]", "[0,8]")), 12),
            file(&format!("{{{}}}", w("F32", "[3]", "[0,8]")), 8),
            file(&format!("{{{}}}", w("F32", "[2]", "[4,12]")), 12),
            file(&format!("{{{}}}", w("F32", "[2]", "[8,0]")), 8),
            file(&format!("{{{}}}", w("F4", "[3]", "[0,1]")), 1),
            file(&format!("{{{}}}", w("F32", "[4294967296,4294967296,4294967296]", "[0,8]")), 8),
            file(&format!("{{{}}}", w("Q4", "[2]", "[0,8]")), 8),
            file(&format!("{{{}}}", w("F32", "[2]", "[0]")), 8),
            file(r#"{"w":{"dtype":"F32","shape":[2]}}"#, 8),
            file(r#"{"__metadata__":{"a":"b"},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#, 1),
            file(r#"{"__metadata__":null}"#, 0),
            file(r#"{"__metadata__":{"a":1}}"#, 0),
            file(
                r#"{"a\"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"c":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
                2,
            ),
            file(
                r#"{"a\"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]},"c":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
                3,
            ),
            file(r#"{} x"#, 0),
            file("{\"\u{e9}\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", 1),
            b"\xff\x00\x00\x00\x00\x00\x00\x00{}".to_vec(),
            b"\x02\x00\x00\x00\x00\x00\x00\x00\xff\xfe".to_vec(),
            b"\x02\x00".to_vec(),
        ];
        for bytes in &cases {
            let ours = tensor_table(bytes, 0).map(|(start, t)| {
                let names: Vec<String> = t.recs.iter().map(|r| t.name(r).to_string()).collect();
                (start, names)
            });
            let theirs = safetensors::SafeTensors::read_metadata(bytes);
            let what = String::from_utf8_lossy(bytes);
            match (&ours, theirs) {
                (Ok((start, names)), Ok((n, meta))) => {
                    assert_eq!(*start, u64_from(n) + 8, "{what}");
                    let mut want: Vec<String> = meta.tensors().into_keys().collect();
                    want.sort();
                    assert_eq!(names, &want, "{what}");
                }
                (Err(e), Err(c)) => assert_eq!(plain(e), plain(&crate_error(bytes, c)), "{what}"),
                (o, c) => panic!("{what}: ours {:?}, the crate's {:?}", o.as_ref().map(|_| ()), c.map(|_| ())),
            }
        }
        let twice = file(
            r#"{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}"#,
            2,
        );
        let e = tensor_table(&twice, 2).map(|_| ()).unwrap_err();
        assert!(format!("{e:#}").contains("tensor w is given twice"), "{e:#}");
    }
}
