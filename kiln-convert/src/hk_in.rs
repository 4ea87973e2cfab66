//! HK input, through the no_std reader `kiln_hk`, made strict by the
//! project's HK rulings (summarized in `docs/conversion.md`): on top of what
//! `HkFile::parse` checks, [`strict`] rejects flags that contradict
//! `alignment`, misaligned payloads and `tensor_data_offset`, overlapping
//! payload ranges, overlapping sections and empty ranges past the end of
//! the file; and the appendix lineage is verified (SHA-256) unless the
//! caller asked not to (`--no-verify-lineage`).
//!
//! Names the converter derives (scale and residual regions, appendix
//! payloads, appendix header keys) are chosen so they never collide with the
//! file's own tensor names and metadata keys.

use std::collections::HashSet;

use anyhow::{anyhow, Context};
use kiln_hk::{
    sparsity_name, tile_layout_name, Family, HkFile, MetaValue, Span, StorageType, TocEntry, FLAG_FLEXIBLE_ALIGNMENT,
    FLAG_TILE_ALIGNED, FLAG_UNIVERSAL_PAGE_ALIGNED,
};
use kiln_nostd::int::u64_from;
use kiln_nostd::DType;

use super::codes::{ggml_block, ggml_code, hk_code};
use super::error::{hk_error, limit_at};
use super::json;
use super::meta::Dups;
use super::model::{Format, Model, ReadOptions, Source, TensorOut, KEY_SOURCE_TYPES, KEY_VALUE_ENCODING};

/// The converter's key for the HK header fields.
pub const KEY_HK_HEADER: &str = "kiln.convert.hk_header";
/// The converter's key mapping derived tensor names to what they hold.
pub const KEY_HK_PARTS: &str = "kiln.convert.hk_parts";

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
        if count.checked_rem(b.elements) == Some(0)
            && count.checked_div(b.elements).and_then(|n| n.checked_mul(b.bytes)) == Some(len)
        {
            let block = u32::try_from(b.bytes).unwrap_or(u32::MAX);
            let t = TensorOut::opaque(name, ggml_code(&b), b.name, block, shape, Source::File { offset }, len);
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

/// Absolute offset of an entry's data span field (residual +16, scales +32).
fn spans_field(e: &TocEntry<'_>) -> u64 {
    let n =
        2usize.saturating_add(e.name().len()).saturating_add(4).saturating_add(8usize.saturating_mul(e.shape().len()));
    u64::try_from(e.entry_offset().saturating_add(n)).unwrap_or(u64::MAX)
}

/// The HK rulings `HkFile::parse` does not check (see the module documentation).
pub fn strict(hk: &HkFile<'_>) -> anyhow::Result<()> {
    let h = hk.header();
    let len = u64::try_from(hk.bytes().len()).unwrap_or(u64::MAX);
    let align = if h.alignment == 0 { 65_536 } else { u64::from(h.alignment) };
    let rule = |offset: u64, id: &'static str, message: String| {
        anyhow::Error::new(super::error::At { offset, code: Some("TYPE"), rule: Some(id), message })
    };
    for (flag, name, holds, what) in [
        (FLAG_TILE_ALIGNED, "TILE_ALIGNED", align % 128 == 0, "a multiple of 128"),
        (FLAG_FLEXIBLE_ALIGNMENT, "FLEXIBLE_ALIGNMENT", align % 128 != 0, "not a multiple of 128"),
        (FLAG_UNIVERSAL_PAGE_ALIGNED, "UNIVERSAL_PAGE_ALIGNED", align >= 4096, "at least 4096"),
    ] {
        let set = h.flags & flag != 0;
        if set != holds {
            return Err(rule(
                8,
                "HkAlignmentFlag",
                format!(
                    "the {name} flag is {} but alignment {align} is {}{what}",
                    if set { "set" } else { "clear" },
                    if holds { "" } else { "not " }
                ),
            ));
        }
    }
    let sections = [
        ("metadata", h.metadata_offset, h.metadata_size, 0x20u64),
        ("TOC", h.tensor_toc_offset, h.tensor_toc_size, 0x30),
    ];
    for (name, offset, size, field) in sections {
        if size == 0 && offset > len {
            return Err(rule(
                field,
                "HkEmptyPastEnd",
                format!("the empty {name} section's offset {offset} lies past the end of the file ({len})"),
            ));
        }
    }
    let (m, t) = (sections[0], sections[1]);
    if m.2 > 0 && t.2 > 0 && m.1 < t.1.saturating_add(t.2) && t.1 < m.1.saturating_add(m.2) {
        return Err(rule(0x30, "HkSectionOverlap", "the metadata and TOC sections overlap".into()));
    }
    if h.tensor_data_offset.checked_rem(align) != Some(0) {
        return Err(rule(
            0x40,
            "HkMisaligned",
            format!("tensor_data_offset {} is not a multiple of the alignment {align}", h.tensor_data_offset),
        ));
    }
    // (start, end, entry index, field offset) of every non-empty payload span.
    let mut spans: Vec<(u64, u64, usize, u64)> = Vec::new();
    for e in hk.tensors() {
        if matches!(e.storage(), StorageType::NullRef | StorageType::SharedRef) {
            continue; // all zero (checked), or an earlier entry's span
        }
        let base = spans_field(&e);
        for (delta, span, part, absent_ok) in [
            (0u64, e.data_span(), "data", false),
            (16, e.residual_span(), "residual", true),
            (32, e.scale_span(), "scales", true),
        ] {
            let field = base.saturating_add(delta);
            if absent_ok && span.offset == 0 {
                continue;
            }
            if span.size == 0 {
                if span.offset > len {
                    return Err(rule(
                        field,
                        "HkEmptyPastEnd",
                        format!(
                            "tensor {}: its empty {part} range at {} lies past the end of the file ({len})",
                            e.name(),
                            span.offset
                        ),
                    ));
                }
                continue;
            }
            if span.offset.checked_rem(align) != Some(0) {
                return Err(rule(
                    field,
                    "HkMisaligned",
                    format!(
                        "tensor {}: its {part} starts at {}, not a multiple of the alignment {align}",
                        e.name(),
                        span.offset
                    ),
                ));
            }
            spans.push((span.offset, span.offset.saturating_add(span.size), e.index(), field));
        }
    }
    spans.sort_unstable();
    let mut prev: Option<(u64, u64, usize, u64)> = None;
    let mut max_end = 0u64;
    for s in spans {
        if let Some(p) = prev {
            let identical_elsewhere = (p.0, p.1) == (s.0, s.1) && p.2 != s.2;
            if s.0 < max_end && !identical_elsewhere {
                return Err(rule(
                    s.3,
                    "HkOverlap",
                    format!(
                        "payload range [{}, {}) overlaps another payload range (only shared_ref may share bytes)",
                        s.0, s.1
                    ),
                ));
            }
        }
        max_end = max_end.max(s.1);
        prev = Some(s);
    }
    Ok(())
}

/// Parses and checks an HK file: the no_std reader, the strict rulings, the lineage.
pub fn check<'a>(bytes: &'a [u8], opts: &ReadOptions, notes: &mut Vec<String>) -> anyhow::Result<HkFile<'a>> {
    let hk = HkFile::parse(bytes).map_err(hk_error).context("not a valid HK file")?;
    strict(&hk).context("not a valid HK file")?;
    let records = hk.appendix().count();
    if opts.verify_lineage {
        let lineage = hk.verify_lineage().map_err(hk_error).context("HK appendix lineage does not verify")?;
        if lineage.payload_only > 0 {
            notes.push(format!("{} appendix link(s) use the older payload-only lineage hash", lineage.payload_only));
        }
    } else if records > 1 {
        notes.push(format!("appendix lineage ({records} records) NOT verified (--no-verify-lineage)"));
    }
    Ok(hk)
}

/// A name not in `taken` (`base`, else `base.1`, `base.2`, ...), now taken.
fn fresh(base: String, taken: &mut HashSet<String>) -> String {
    let mut name = base.clone();
    let mut i = 0u32;
    while taken.contains(&name) {
        i = i.saturating_add(1);
        name = format!("{base}.{i}");
    }
    taken.insert(name.clone());
    name
}

pub fn read(bytes: &[u8], opts: &ReadOptions) -> anyhow::Result<Model> {
    let mut model = Model::new(Format::Hk, opts);
    let hk = check(bytes, opts, &mut model.notes)?;
    model.metadata.set_own(KEY_VALUE_ENCODING, "json".into());
    for p in hk.metadata() {
        let ty = if let MetaValue::Bytes(_) = p.value { "bytes(hex)" } else { p.value.type_name() };
        model.metadata.push_with(p.key, |w| {
            match p.value {
                MetaValue::String(s) => w.push_str(&json::string(s))?,
                MetaValue::Int64(v) => w.push_str(&v.to_string())?,
                MetaValue::Float64(v) => w.push_str(&json::f64(v))?,
                MetaValue::Bool(b) => w.push_str(if b { "true" } else { "false" })?,
                // Already JSON text: carried verbatim.
                MetaValue::Json(s) => w.push_str(s)?,
                MetaValue::Bytes(b) => {
                    w.push('"')?;
                    // In pieces: the writer refuses what passes its bound before all of it is made.
                    for piece in b.chunks(512) {
                        w.push_str(&hex::encode(piece))?;
                    }
                    w.push('"')?;
                }
            }
            Ok(ty.to_string())
        })?;
    }
    let notes = model.metadata.seal(Dups::LastWins)?;
    model.notes.extend(notes);

    // Names: the file's own first; derived names avoid all of them.
    let mut taken: HashSet<String> = HashSet::new();
    for e in hk.tensors() {
        if e.name().is_empty() {
            model.limit(limit_at(
                e.entry_offset(),
                "a tensor with an empty name: valid HK, but a Kiln limit (names are non-empty)",
            ))?;
        }
        if !taken.insert(e.name().to_string()) {
            model.limit(limit_at(
                e.entry_offset(),
                format!("tensor name {:?} appears twice: valid HK, but a Kiln limit (names are unique)", e.name()),
            ))?;
        }
    }
    let mut parts = serde_json::Map::new();
    for e in hk.tensors() {
        let name = e.name();
        match e.storage() {
            StorageType::NullRef => {
                model.note(format!(
                    "tensor {name}: null_ref (no bytes stored) kept as a zero-length opaque hk.null_ref tensor with its shape"
                ));
                let t = TensorOut::opaque(
                    name,
                    hk_code(StorageType::NullRef),
                    "hk.null_ref",
                    1,
                    e.shape().to_vec(),
                    Source::Bytes(Box::default()),
                    0,
                );
                model.tensors.push(t);
            }
            StorageType::SharedRef => {
                let target = hk.resolve(&e).ok_or_else(|| anyhow!("tensor {name}: shared_ref without a target"))?;
                model.note(format!(
                    "tensor {name}: shared_ref to {}; Kiln payload ranges do not overlap, so its bytes are copied",
                    target.name()
                ));
                push_entry(&mut model, name, &target, &mut taken, &mut parts);
            }
            _ => push_entry(&mut model, name, &e, &mut taken, &mut parts),
        }
    }
    let mut n = 0usize;
    for (i, r) in hk.appendix().enumerate() {
        let data_name = fresh(format!("hk.appendix.{i}.data"), &mut taken);
        let mut key = format!("hk.appendix.{i}");
        let mut k = 0u32;
        while model.metadata.user(&key).is_some() {
            k = k.saturating_add(1);
            key = format!("hk.appendix.{i}.{k}");
        }
        if k > 0 {
            model.note(format!(
                "appendix record {i}: the file has a metadata key hk.appendix.{i}; its header is in {key}"
            ));
        }
        let header = serde_json::json!({
            "entry_type": r.entry_type, "entry_type_name": r.entry_type_name(), "flags": r.flags,
            "generation": r.generation, "timestamp": r.timestamp,
            "parent_hash": hex::encode(r.parent_hash),
            "metrics": r.metrics.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
            "data_crc32": r.data_crc32, "name": r.name, "target": r.target,
            "data_tensor": data_name,
        });
        model.metadata.push(&key, &header.to_string(), "")?;
        parts.insert(data_name.clone(), serde_json::json!({"of": key, "part": "appendix data"}));
        let off = u64::try_from(r.offset).unwrap_or(0);
        // The data follows the 80-byte header, the name and the target.
        let data_at =
            off.saturating_add(80).saturating_add(u64_from(r.name.len())).saturating_add(u64_from(r.target.len()));
        let dlen = u64_from(r.data.len());
        model.tensors.push(TensorOut::dense(data_name, DType::U8, vec![dlen], data_at, dlen));
        n = i.saturating_add(1);
    }
    if n > 0 {
        model.note(format!(
            "{n} appendix record(s): headers in metadata hk.appendix.N, payloads as u8 tensors hk.appendix.N.data"
        ));
    }
    model.metadata.seal(Dups::Refuse)?;
    let moved = model.metadata.protect()?;
    model.notes.extend(moved);
    let h = hk.header();
    model.metadata.set_own(
        KEY_HK_HEADER,
        serde_json::json!({
            "version": format!("{}.{}", h.version_major, h.version_minor),
            "flags": h.flags, "alignment": h.alignment,
            "split_index": h.split_index, "split_count": h.split_count,
        })
        .to_string(),
    );
    if !parts.is_empty() {
        model.metadata.set_own(KEY_HK_PARTS, serde_json::Value::Object(parts).to_string());
    }
    let types = model.metadata.types_json()?;
    model.metadata.set_own(KEY_SOURCE_TYPES, types);
    Ok(model)
}

fn push_entry(
    model: &mut Model,
    name: &str,
    e: &TocEntry<'_>,
    taken: &mut HashSet<String>,
    parts: &mut serde_json::Map<String, serde_json::Value>,
) {
    let data: Span = e.data_span();
    let (t, note) = data_tensor(name, e, e.storage(), data.offset, data.size);
    model.tensors.push(t);
    if let Some(n) = note {
        model.note(n);
    }
    for (suffix, span) in [("hk_scales", e.scale_span()), ("hk_residual", e.residual_span())] {
        if span.offset == 0 {
            continue;
        }
        let base = format!("{name}.{suffix}");
        let n = fresh(base.clone(), taken);
        let renamed = if n == base { String::new() } else { format!(" (the file has a tensor named {base})") };
        model.note(format!("tensor {name}: HK {suffix} region ({} bytes) stored as u8 tensor {n}{renamed}", span.size));
        parts.insert(n.clone(), serde_json::json!({"of": name, "part": suffix.trim_start_matches("hk_")}));
        model.tensors.push(TensorOut::dense(n, DType::U8, vec![span.size], span.offset, span.size));
    }
}
