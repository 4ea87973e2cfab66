//! Writing safetensors (the way back from Kiln), streaming.
//!
//! The header is built exactly as the `safetensors` crate's `serialize`
//! builds it (tensors sorted by descending dtype, then name; the crate's own
//! `TensorInfo` serialization; spaces to a multiple of 8), except that
//! `__metadata__` keys are written in sorted order rather than in the
//! crate's HashMap order, so the output is deterministic. A file written by
//! the crate (or by the Python package, which wraps it) with at most one
//! metadata key therefore round-trips to identical bytes.

use std::borrow::Cow;
use std::collections::BTreeMap;

use anyhow::{anyhow, bail, Context};
use kiln_nostd::int::u64_from;
use kiln_nostd::DType;
use safetensors::tensor::{Metadata, TensorInfo};
use safetensors::Dtype;

use super::codes::{SAFETENSORS_DENSE, SAFETENSORS_OPAQUE};
use super::copy::Sink;
use super::meta::{Metadata as KilnMetadata, MOVED};
use super::model::{Model, TensorOut, KEY_PREFIX};

fn st_dtype(name: &str) -> Option<Dtype> {
    // Dtype has no FromStr; its Display names are the wire names.
    const ALL: [Dtype; 22] = [
        Dtype::BOOL,
        Dtype::F4,
        Dtype::F6_E2M3,
        Dtype::F6_E3M2,
        Dtype::U8,
        Dtype::I8,
        Dtype::F8_E5M2,
        Dtype::F8_E4M3,
        Dtype::F8_E8M0,
        Dtype::F8_E4M3FNUZ,
        Dtype::F8_E5M2FNUZ,
        Dtype::I16,
        Dtype::U16,
        Dtype::F16,
        Dtype::BF16,
        Dtype::I32,
        Dtype::U32,
        Dtype::F32,
        Dtype::C64,
        Dtype::F64,
        Dtype::I64,
        Dtype::U64,
    ];
    ALL.into_iter().find(|d| d.to_string() == name)
}

/// The safetensors form of one tensor: dtype and shape, and metadata/notes when it is not exact.
fn map(
    t: &TensorOut,
    meta: &mut BTreeMap<Cow<'_, str>, Cow<'_, str>>,
    notes: &mut Vec<String>,
) -> anyhow::Result<(Dtype, Vec<usize>)> {
    let mut record = |key: String, value: String| -> anyhow::Result<()> {
        if meta.contains_key(key.as_str()) {
            bail!(
                "tensor {}: the metadata already has a key {key:?}, where the converter records what safetensors cannot hold; \
                 refusing to overwrite it",
                t.name
            );
        }
        meta.insert(Cow::Owned(key), Cow::Owned(value));
        Ok(())
    };
    let usize_shape = |s: &[u64]| -> anyhow::Result<Vec<usize>> {
        s.iter().map(|&d| usize::try_from(d).map_err(|_| anyhow!("tensor {}: dimension too large", t.name))).collect()
    };
    let count: u64 = t.shape.iter().product();
    let exact = match t.dtype {
        DType::Opaque(code) => SAFETENSORS_OPAQUE
            .iter()
            .find(|(n, c, ..)| *c == code && t.layout.as_deref() == Some(&format!("safetensors.{n}")))
            .and_then(|(n, ..)| st_dtype(n)),
        DType::E2M1 if count % 2 == 1 => None,
        d => SAFETENSORS_DENSE.iter().find(|(_, k)| *k == d).and_then(|(n, _)| st_dtype(n)),
    };
    if let Some(q) = &t.quant {
        record(
            format!("kiln.quant.{}", t.name),
            serde_json::json!({"scheme": q.scheme, "axis": q.axis, "group_size": q.group_size, "scale": q.scale, "outer": q.outer})
                .to_string(),
        )?;
        notes.push(format!(
            "tensor {}: quantization scheme {} recorded in __metadata__ kiln.quant.{}",
            t.name, q.scheme, t.name
        ));
    }
    if let Some(d) = exact {
        return Ok((d, usize_shape(&t.shape)?));
    }
    record(
        format!("kiln.dtype.{}", t.name),
        serde_json::json!({
            "dtype": t.dtype.name(), "code": t.dtype.code(), "layout": t.layout,
            "block_size": t.block_size, "shape": t.shape.as_slice(),
        })
        .to_string(),
    )?;
    notes.push(format!(
        "tensor {}: Kiln {}{} has no safetensors dtype; written as U8 bytes [{}], its dtype and shape in __metadata__ kiln.dtype.{} \
         (kiln convert restores it on the way back)",
        t.name,
        t.dtype.name(),
        t.layout.as_deref().map(|l| format!(" ({l})")).unwrap_or_default(),
        t.len,
        t.name
    ));
    Ok((Dtype::U8, vec![usize::try_from(t.len)?]))
}

/// One safetensors file's header (its length word included) and the order
/// its payloads follow it in (indices into the tensors it was planned for).
pub struct SafetensorsPlan {
    pub header: Vec<u8>,
    pub order: Vec<usize>,
}

/// The plan of one file holding every tensor of `model`.
pub fn plan(model: &Model, notes: &mut Vec<String>) -> anyhow::Result<SafetensorsPlan> {
    plan_part(&model.metadata, &model.tensors, notes)
}

/// The plan of one file holding `tensors` (all of a model, or one shard's)
/// with the model's `metadata` in `__metadata__`: every shard of a sharded
/// output carries the whole metadata, as the Hub's writers put it in each.
pub fn plan_part(
    metadata: &KilnMetadata,
    tensors: &[TensorOut],
    notes: &mut Vec<String>,
) -> anyhow::Result<SafetensorsPlan> {
    // The user's keys; converter keys are dropped, except user keys an
    // earlier conversion moved out of the converter's namespace, which get
    // their own names back.
    let mut meta: BTreeMap<Cow<'_, str>, Cow<'_, str>> = BTreeMap::new();
    let mut dropped = 0usize;
    for (k, v) in metadata.iter() {
        if let Some(original) = k.strip_prefix(MOVED) {
            meta.insert(Cow::Borrowed(original), Cow::Borrowed(v));
        } else if k.starts_with(KEY_PREFIX) {
            dropped = dropped.saturating_add(1);
        } else {
            meta.insert(Cow::Borrowed(k), Cow::Borrowed(v));
        }
    }
    if dropped > 0 {
        notes.push(format!("{dropped} converter key(s) (kiln.convert.*) are not written into __metadata__"));
    }
    let mut entries = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        let (dtype, shape) = map(t, &mut meta, notes)?;
        entries.push((i, dtype, shape));
    }
    // The crate's order: descending dtype, then name.
    let name = |i: usize| tensors.get(i).map(|t| &*t.name);
    entries.sort_by(|a, b| b.1.cmp(&a.1).then(name(a.0).cmp(&name(b.0))));
    let mut offset = 0usize;
    let mut infos = Vec::with_capacity(entries.len());
    for (i, dtype, shape) in &entries {
        let t = tensors.get(*i).ok_or_else(|| anyhow!("tensor {i} is missing"))?;
        let n = usize::try_from(t.len)?;
        let end = offset.checked_add(n).ok_or_else(|| anyhow!("the payloads do not fit in memory addresses"))?;
        infos.push((
            t.name.to_string(),
            TensorInfo { dtype: *dtype, shape: shape.clone(), data_offsets: (offset, end) },
        ));
        offset = end;
    }
    // The crate's checks (contiguous offsets, sizes matching dtype and shape).
    Metadata::new(None, infos.clone()).map_err(|e| anyhow!("cannot describe these tensors in safetensors: {e}"))?;
    let mut json = String::from("{");
    if !meta.is_empty() {
        json.push_str("\"__metadata__\":");
        json.push_str(&serde_json::to_string(&meta)?);
    }
    for (name, info) in &infos {
        if json.len() > 1 {
            json.push(',');
        }
        json.push_str(&serde_json::to_string(name)?);
        json.push(':');
        json.push_str(&serde_json::to_string(info)?);
    }
    json.push('}');
    let mut header = json.into_bytes();
    header.resize(header.len().next_multiple_of(8), b' ');
    let mut out = u64_from(header.len()).to_le_bytes().to_vec();
    out.extend(header);
    Ok(SafetensorsPlan { header: out, order: entries.into_iter().map(|e| e.0).collect() })
}

/// Writes the file `plan` describes for all of `model`'s tensors.
pub fn write(sink: &mut Sink<'_>, model: &Model, plan: &SafetensorsPlan) -> anyhow::Result<()> {
    write_part(sink, &model.tensors, plan)
}

/// Writes the file `plan` describes for `tensors` (what it was planned for):
/// the header, then each payload streamed from its input.
pub fn write_part(sink: &mut Sink<'_>, tensors: &[TensorOut], plan: &SafetensorsPlan) -> anyhow::Result<()> {
    sink.bytes(&plan.header)?;
    for &i in &plan.order {
        let t = tensors.get(i).ok_or_else(|| anyhow!("tensor {i} is missing"))?;
        sink.tensor(t).with_context(|| format!("tensor {}", t.name))?;
    }
    Ok(())
}
