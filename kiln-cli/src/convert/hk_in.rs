//! HK input, through the no_std reader `kiln_nostd::hk`.

use anyhow::anyhow;
use kiln_nostd::hk::{sparsity_name, tile_layout_name, Family, HkFile, MetaValue, StorageType, TocEntry};
use kiln_nostd::DType;

use super::codes::{ggml_block, ggml_code, hk_code};
use super::json;
use super::model::{Format, Model, Source, TensorOut, KEY_SOURCE_TYPES, KEY_VALUE_ENCODING};

fn offset_in(bytes: &[u8], part: &[u8]) -> u64 {
    (part.as_ptr() as usize - bytes.as_ptr() as usize) as u64
}

/// The Kiln form of one entry's data (dtype, layout, block size), and a note when it is approximate.
fn data_tensor(
    name: &str,
    e: &TocEntry<'_>,
    storage: StorageType,
    offset: u64,
    len: u64,
) -> (TensorOut, Option<String>) {
    let shape = e.shape().to_vec();
    let plain = e.tile_layout() == 0 && e.sparsity() == 0;
    if let (Some(dtype), true) = (storage.kiln_dtype(), plain) {
        return (TensorOut::dense(name, dtype, shape, offset, len), None);
    }
    if let (Some(b), true) = (storage.ggml_type().and_then(ggml_block), plain) {
        let count = e.element_count();
        // HK does not say in which order it lists dimensions, so only the total is checked.
        if count % b.elements == 0 && (count / b.elements).checked_mul(b.bytes) == Some(len) {
            let t = TensorOut::opaque(name, ggml_code(&b), b.name, b.bytes as u32, shape, Source::File { offset }, len);
            return (t, None);
        }
        let layout = format!("hk.{}", storage.name());
        let t = TensorOut::opaque(name, hk_code(storage), &layout, 1, shape, Source::File { offset }, len);
        let note = format!(
            "tensor {name}: {} data of {len} bytes does not match ggml's {} layout for this shape; stored as opaque {layout} (block 1)",
            storage.name(),
            b.name
        );
        return (t, Some(note));
    }
    let mut layout = format!("hk.{}", storage.name());
    let mut note = None;
    if !plain {
        let tile = tile_layout_name(e.tile_layout()).unwrap_or("?");
        let sparsity = sparsity_name(e.sparsity()).unwrap_or("?");
        layout = format!("{layout}.{tile}.{sparsity}");
        note = Some(format!(
            "tensor {name}: {} with tile layout {tile} and sparsity {sparsity} is not a plain row-major array; stored as opaque {layout}",
            storage.name()
        ));
    } else if storage.family() != Family::Dense {
        note = Some(format!(
            "tensor {name}: HK {} has no Kiln or ggml equivalent; stored as opaque {layout} (code {}, block 1)",
            storage.name(),
            hk_code(storage)
        ));
    }
    (TensorOut::opaque(name, hk_code(storage), layout, 1, shape, Source::File { offset }, len), note)
}

pub fn read(bytes: &[u8]) -> anyhow::Result<Model> {
    let hk = HkFile::parse(bytes).map_err(|e| anyhow!("not a valid HK file: {e} (rule {})", e.rule().id()))?;
    let mut model = Model::new(Format::Hk);
    model.metadata.insert(KEY_VALUE_ENCODING.into(), "json".into());
    let mut types = serde_json::Map::new();
    for p in hk.metadata() {
        let text = match p.value {
            MetaValue::String(s) => json::string(s),
            MetaValue::Int64(v) => v.to_string(),
            MetaValue::Float64(v) => json::f64(v),
            MetaValue::Bool(b) => b.to_string(),
            // Already JSON text: carried verbatim.
            MetaValue::Json(s) => s.to_string(),
            MetaValue::Bytes(b) => json::string(&json::hex(b)),
        };
        if model.metadata.insert(p.key.to_string(), text).is_some() {
            model.note(format!("metadata key {:?} appears more than once; the last value is kept", p.key));
        }
        let ty = if let MetaValue::Bytes(_) = p.value { "bytes(hex)" } else { p.value.type_name() };
        types.insert(p.key.to_string(), serde_json::Value::String(ty.into()));
    }
    let h = hk.header();
    model.metadata.insert(
        "kiln.convert.hk_header".into(),
        serde_json::json!({
            "version": format!("{}.{}", h.version_major, h.version_minor),
            "flags": h.flags, "alignment": h.alignment,
            "split_index": h.split_index, "split_count": h.split_count,
        })
        .to_string(),
    );
    model.metadata.insert(KEY_SOURCE_TYPES.into(), serde_json::Value::Object(types).to_string());

    for e in hk.tensors() {
        let name = e.name().to_string();
        match e.storage() {
            StorageType::NullRef => {
                model.note(format!(
                    "tensor {name}: null_ref (no bytes stored) kept as a zero-length opaque hk.null_ref tensor with its shape"
                ));
                let t = TensorOut::opaque(
                    &name,
                    hk_code(StorageType::NullRef),
                    "hk.null_ref",
                    1,
                    e.shape().to_vec(),
                    Source::Bytes(Vec::new()),
                    0,
                );
                model.tensors.push(t);
                continue;
            }
            StorageType::SharedRef => {
                let target = hk.resolve(&e).ok_or_else(|| anyhow!("tensor {name}: shared_ref without a target"))?;
                model.note(format!(
                    "tensor {name}: shared_ref to {}; Kiln payload ranges do not overlap, so its bytes are copied",
                    target.name()
                ));
                push_entry(&mut model, bytes, &name, &target);
                continue;
            }
            _ => push_entry(&mut model, bytes, &name, &e),
        }
    }
    for (i, r) in hk.appendix().enumerate() {
        let key = format!("hk.appendix.{i}");
        let data_name = format!("{key}.data");
        model.metadata.insert(
            key.clone(),
            serde_json::json!({
                "entry_type": r.entry_type, "entry_type_name": r.entry_type_name(), "flags": r.flags,
                "generation": r.generation, "timestamp": r.timestamp,
                "parent_hash": json::hex(&r.parent_hash),
                "metrics": r.metrics.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
                "data_crc32": r.data_crc32, "name": r.name, "target": r.target,
                "data_tensor": data_name,
            })
            .to_string(),
        );
        let off = offset_in(bytes, r.data);
        model.tensors.push(TensorOut::dense(data_name, DType::U8, vec![r.data.len() as u64], off, r.data.len() as u64));
    }
    let n = hk.appendix().count();
    if n > 0 {
        model.note(format!(
            "{n} appendix record(s): headers in metadata hk.appendix.N, payloads as u8 tensors hk.appendix.N.data"
        ));
    }
    Ok(model)
}

fn push_entry(model: &mut Model, bytes: &[u8], name: &str, e: &TocEntry<'_>) {
    let data = e.data();
    let (t, note) = data_tensor(name, e, e.storage(), offset_in(bytes, data), data.len() as u64);
    model.tensors.push(t);
    if let Some(n) = note {
        model.note(n);
    }
    for (suffix, part) in [("hk_scales", e.scales()), ("hk_residual", e.residual())] {
        if let Some(part) = part {
            let n = format!("{name}.{suffix}");
            model.note(format!("tensor {name}: HK {suffix} region ({} bytes) stored as u8 tensor {n}", part.len()));
            model.tensors.push(TensorOut::dense(
                n,
                DType::U8,
                vec![part.len() as u64],
                offset_in(bytes, part),
                part.len() as u64,
            ));
        }
    }
}
