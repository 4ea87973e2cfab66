//! Writing Kiln in one streaming pass.
//!
//! The canonical layout is a pure function of the tensor list (names,
//! dtypes, shapes, payload lengths), so the 64-byte header, the descriptors
//! and the name heap are computed first (`plan`), written, and then each
//! payload is copied from the input with the zero gaps between them. The
//! result is checked afterwards by the crate's own validator on the mapped
//! output; that check reads only the header, descriptors, gaps and the bool
//! and packed payloads, so it costs little.

use std::collections::{BTreeMap, HashMap};

use anyhow::{anyhow, bail, Context};
use kiln_model::Kind;
use kiln_nostd::digest::DIGEST_LEN;
use kiln_nostd::frozen;
use kiln_nostd::int::{u64_from, usize_from};
use kiln_nostd::wire::descriptor::{Descriptor, NO_AXIS, NO_INDEX, NO_NAME};
use kiln_nostd::wire::layout;

use super::copy::Sink;
use super::meta::Metadata;
use super::model::{Source, TensorOut};

/// The Frozen type of a `kiln convert` record: the metadata dict, then the
/// tensor block. The dict holds one padding entry (`KEY_PAD`) whose length
/// places the block so that the payloads carrying most bytes sit at the same
/// file offset, modulo `pad_modulus`, as in the input file: the kernel's
/// file-to-file copy then moves whole page-cache folios (measured: about a
/// third less system time than a copy whose source and destination straddle
/// pages differently), and every payload keeps the alignment it had in the
/// input, up to 64 bytes.
pub const RECORD_TYPE: &str = "struct{metadata:dict<str,str>,tensors:tensors,}";

/// The padding entry's key (its value is spaces).
pub const KEY_PAD: &str = "kiln.convert.pad";

/// The congruence [`pad_len`] aims for: 2 MiB (the largest page-cache folio)
/// for at least 256 MiB of payload, so the padding costs at most 0.8%; one
/// 4 KiB page below that.
pub fn pad_modulus(payload_bytes: u64) -> u64 {
    if payload_bytes >= 256 << 20 {
        2 << 20
    } else {
        4096
    }
}

/// The computed directory: header + descriptors + heap + padding, and where each payload goes.
#[derive(Debug)]
pub struct Plan {
    /// Bytes up to the payload base.
    pub head: Vec<u8>,
    /// Each tensor's byte_offset (from the payload base).
    pub offsets: Vec<u64>,
    /// Total block length.
    pub block_len: u64,
}

/// Lays out the canonical directory for `tensors` in the given order.
pub fn plan(tensors: &[TensorOut]) -> anyhow::Result<Plan> {
    let count = u32::try_from(tensors.len()).map_err(|_| anyhow!("more than 2^32 tensors"))?;
    // Indices fit in u32: `count` did.
    let index: HashMap<&str, u32> = tensors.iter().zip(0u32..).map(|(t, i)| (&*t.name, i)).collect();
    if index.len() != tensors.len() {
        let mut seen = std::collections::HashSet::new();
        let dup = tensors.iter().find(|t| !seen.insert(&t.name)).map(|t| t.name.clone()).unwrap_or_default();
        bail!("two tensors are named {dup:?}; Kiln names are unique");
    }
    // Heap: names in descriptor order, then layout names.
    let mut heap = Vec::new();
    let mut place = |text: &str| -> anyhow::Result<(u16, u16)> {
        let off = u16::try_from(heap.len()).ok().filter(|&o| o != NO_NAME);
        let len = u16::try_from(text.len()).ok();
        match (off, len) {
            (Some(off), Some(len)) if !text.is_empty() => {
                heap.extend_from_slice(text.as_bytes());
                Ok((off, len))
            }
            (_, _) if text.is_empty() => bail!("an empty tensor name or layout name"),
            _ => bail!(
                "the names and layout names need more than 65,535 bytes (Kiln's name heap offsets are u16); \
                 this model has too many or too long tensor names"
            ),
        }
    };
    let mut names = Vec::with_capacity(tensors.len());
    for t in tensors {
        names.push(place(&t.name)?);
    }
    let mut layouts = Vec::with_capacity(tensors.len());
    for t in tensors {
        layouts.push(match &t.layout {
            Some(l) => place(l)?,
            None => (NO_NAME, 0),
        });
    }
    let name_bytes = u32::try_from(heap.len()).map_err(|_| anyhow!("name heap too large"))?;
    // The core's layout arithmetic: the same placement the reader demands.
    let payload_base = layout::payload_base(count, name_bytes).ok_or_else(|| anyhow!("directory too large"))?;
    let mut placement = layout::Placement::new();
    let offsets = tensors
        .iter()
        .map(|t| placement.place(t.len).ok_or_else(|| anyhow!("payload too large")))
        .collect::<anyhow::Result<Vec<u64>>>()?;
    let block_len = payload_base.checked_add(placement.payload_bytes()).ok_or_else(|| anyhow!("block too large"))?;

    let head_len = usize_from(payload_base).ok_or_else(|| anyhow!("directory too large"))?;
    let mut head = Vec::with_capacity(head_len);
    let named = !tensors.is_empty();
    head.extend_from_slice(
        &kiln_nostd::wire::Header::canonical(count, name_bytes, placement.payload_bytes(), named).encode(),
    );
    let lookup = |name: &str, what: &str, of: &str| -> anyhow::Result<u32> {
        index.get(name).copied().ok_or_else(|| anyhow!("tensor {of}: its {what} tensor {name:?} is not in the output"))
    };
    for (((t, name), layout), &byte_offset) in tensors.iter().zip(&names).zip(&layouts).zip(&offsets) {
        let Some(rank) = u8::try_from(t.shape.len()).ok().filter(|&r| r <= 8) else {
            bail!("tensor {}: rank {} (Kiln allows at most 8)", t.name, t.shape.len());
        };
        let mut shape = [0u64; 8];
        for (slot, &d) in shape.iter_mut().zip(&t.shape) {
            *slot = d;
        }
        let (scheme, axis, group, scale, outer) = match &t.quant {
            None => (0, NO_AXIS, 0, NO_INDEX, NO_INDEX),
            Some(q) => (
                q.scheme,
                q.axis,
                q.group_size,
                lookup(&q.scale, "scale", &t.name)?,
                match &q.outer {
                    Some(o) => lookup(o, "outer", &t.name)?,
                    None => NO_INDEX,
                },
            ),
        };
        let d = Descriptor {
            dtype: t.dtype.code(),
            rank,
            name_off: name.0,
            name_len: name.1,
            layout_off: layout.0,
            layout_len: layout.1,
            block_size: t.block_size,
            quant_scheme: scheme,
            quant_axis: axis,
            group_size: group,
            scale_index: scale,
            outer_index: outer,
            byte_offset,
            byte_length: t.len,
            shape,
        };
        head.extend_from_slice(&d.encode());
    }
    head.extend_from_slice(&heap);
    head.resize(head_len, 0);
    Ok(Plan { head, offsets, block_len })
}

/// Streams the block: head, then each payload after its zero gap. With
/// `hash`, payloads pass through this process and their digests come back
/// (in tensor order); without, they may move file to file in the kernel.
pub fn write_block(
    sink: &mut Sink<'_>,
    tensors: &[TensorOut],
    plan: &Plan,
    hash: bool,
) -> anyhow::Result<Vec<[u8; DIGEST_LEN]>> {
    let start = sink.written();
    sink.bytes(&plan.head)?;
    let mut end = 0u64;
    let mut digests = Vec::with_capacity(if hash { tensors.len() } else { 0 });
    for (t, &at) in tensors.iter().zip(&plan.offsets) {
        // The plan placed each payload at or after the previous one's end.
        sink.zeros(at.saturating_sub(end))?;
        // The tensor's name on a failed copy (a corrupt payload, a short input).
        let named = || format!("tensor {}", t.name);
        if hash {
            digests.push(sink.tensor_hashed(t).with_context(named)?);
        } else {
            sink.tensor(t).with_context(named)?;
        }
        end = at.saturating_add(t.len);
    }
    let wrote = sink.written().saturating_sub(start);
    if wrote != plan.block_len {
        bail!("wrote {wrote} bytes for a {}-byte block", plan.block_len);
    }
    Ok(digests)
}

/// The digest table's length word and a zeroed table for `count` tensors:
/// written before the block, filled in ([`digest_table`]) once the payloads
/// have streamed past.
pub fn digest_placeholder(count: usize) -> anyhow::Result<Vec<u8>> {
    let len = count.checked_mul(DIGEST_LEN).ok_or_else(|| anyhow!("too many tensors"))?;
    let word = u32::try_from(len).map_err(|_| anyhow!("the digest table would pass 4 GiB"))?;
    let mut out = Vec::with_capacity(len.saturating_add(4));
    out.extend_from_slice(&word.to_le_bytes());
    out.resize(len.saturating_add(4), 0);
    Ok(out)
}

/// The digest table's bytes (after its length word).
pub fn digest_table(digests: &[[u8; DIGEST_LEN]]) -> Vec<u8> {
    digests.iter().flatten().copied().collect()
}

/// The length of the padding value for `metadata` (which must not hold
/// [`KEY_PAD`] yet): the block then starts at a file offset B with
/// B + payload_base + byte_offset congruent to the input offset, modulo
/// `modulus`, for the input tensors that hold the most bytes.
/// `fields` bytes (the shard field, the digest table) sit between the dict and the block.
/// With `follow_input` false (an ONNX input, whose inline payloads sit at
/// whatever offset the protobuf put them, and whose output a runtime maps),
/// the payload region is page-aligned instead, so every payload starts at a
/// multiple of 64 bytes in the file and the first one on a page.
pub fn pad_len(
    tensors: &[TensorOut],
    plan: &Plan,
    metadata: &Metadata,
    modulus: u64,
    fields: u64,
    follow_input: bool,
) -> anyhow::Result<usize> {
    // Residues modulo a nonzero page (4 KiB or 2 MiB): every sum below is under 3 pages.
    let page = modulus.max(1);
    let rem = |x: u64| x.checked_rem(page).unwrap_or(0);
    let base = rem(u64_from(plan.head.len()));
    let mut weight: BTreeMap<u64, u64> = BTreeMap::new();
    for (t, &off) in tensors.iter().zip(&plan.offsets).filter(|_| follow_input) {
        if let Source::File { offset } = t.source {
            let r =
                rem(rem(offset).saturating_add(page.saturating_mul(2)).saturating_sub(base).saturating_sub(rem(off)));
            let w = weight.entry(r).or_default();
            *w = w.saturating_add(t.len.max(1));
        }
    }
    // Most bytes wins; ties go to the smallest residue. Without file-backed
    // payloads, page-align the payload region.
    let target = weight
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(r, _)| *r)
        .unwrap_or(rem(page.saturating_sub(base)));
    // The dict with an empty padding value (4 + 8 + the key's bytes more).
    let with_pad = metadata.encoded_len().saturating_add(8).saturating_add(u64_from(KEY_PAD.len()));
    let start = rem(with_pad.saturating_add(16).saturating_add(fields));
    usize_from(rem(target.saturating_add(page).saturating_sub(start))).ok_or_else(|| anyhow!("padding too large"))
}

/// Streams the Frozen encoding of the metadata as a `dict<str,str>` (keys in byte order).
pub fn write_dict(sink: &mut Sink<'_>, metadata: &Metadata) -> anyhow::Result<()> {
    let word = |n: usize, what: &str| -> anyhow::Result<[u8; 4]> {
        u32::try_from(n).map(u32::to_le_bytes).map_err(|_| anyhow!("{what} longer than 4 GiB"))
    };
    sink.bytes(&word(metadata.len(), "metadata")?)?;
    for (k, v) in metadata.iter() {
        sink.bytes(&word(k.len(), "a metadata key")?)?;
        sink.bytes(k.as_bytes())?;
        sink.bytes(&word(v.len(), "a metadata value")?)?;
        sink.bytes(v.as_bytes())?;
    }
    Ok(())
}

/// The Frozen encoding of a dict<str,str> in memory (tests).
#[cfg(test)]
pub fn encode_dict(metadata: &Metadata) -> Vec<u8> {
    let mut out = (metadata.len() as u32).to_le_bytes().to_vec();
    for (k, v) in metadata.iter() {
        out.extend((k.len() as u32).to_le_bytes());
        out.extend(k.as_bytes());
        out.extend((v.len() as u32).to_le_bytes());
        out.extend(v.as_bytes());
    }
    out
}

/// The 16-byte frame of a record `kind` (plain, digests or shard).
pub fn frame(kind: Kind) -> [u8; 16] {
    frozen::frame_bytes(kind.hash())
}

#[cfg(test)]
mod tests {
    use super::super::model::QuantOut;
    use super::*;
    use kiln_nostd::{
        writer::{QuantSpec, TensorRef},
        DType, TensorSpec, Writer,
    };

    fn t(name: &str, dtype: DType, shape: &[u64], data: &[u8]) -> TensorOut {
        TensorOut {
            name: name.into(),
            dtype,
            shape: shape.into(),
            layout: None,
            block_size: 0,
            quant: None,
            source: Source::Bytes(data.into()),
            len: data.len() as u64,
            input: 0,
            shard: 0,
        }
    }

    /// The planned head plus payloads equals the crate's canonical Writer output.
    #[test]
    fn plan_matches_the_canonical_writer() {
        let w: Vec<u8> = (0..96u8).collect();
        let mut q = t("q", DType::E2M1, &[64], &[0x21; 32]);
        q.quant = Some(Box::new(QuantOut { scheme: 1, axis: 0, group_size: 32, scale: "s".into(), outer: None }));
        let mut op = t("k", DType::Opaque(4108), &[256], &[7; 144]);
        op.layout = Some("Q4_K".into());
        op.block_size = 144;
        let tensors = vec![
            t("w", DType::F32, &[4, 6], &w),
            t("b", DType::F16, &[3], &[0, 0x3c, 0, 0x3c, 0, 0]),
            t("empty", DType::U8, &[0], &[]),
            q,
            t("s", DType::E8M0, &[2], &[127, 128]),
            op,
            t("scalar", DType::F64, &[], &1.0f64.to_le_bytes()),
        ];
        let plan = plan(&tensors).unwrap();
        let mut ours = plan.head.clone();
        for (t, &at) in tensors.iter().zip(&plan.offsets) {
            ours.resize(plan.head.len() + at as usize, 0);
            let Source::Bytes(b) = &t.source else { unreachable!() };
            ours.extend(b);
        }
        assert_eq!(ours.len() as u64, plan.block_len);

        let specs: Vec<TensorSpec<'_>> = tensors
            .iter()
            .map(|t| {
                let Source::Bytes(b) = &t.source else { unreachable!() };
                let mut s = TensorSpec::new(t.dtype, &t.shape, b).named(&t.name);
                s.layout = t.layout.as_deref();
                s.block_size = t.block_size;
                if let Some(q) = &t.quant {
                    s.quant =
                        QuantSpec::Scales { axis: q.axis, group_size: q.group_size, scale: TensorRef::Name(&q.scale) };
                }
                s
            })
            .collect();
        let mut theirs = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
        Writer::new().write(&specs, &mut theirs).unwrap();
        assert_eq!(ours, theirs);
    }

    #[test]
    fn padding_makes_the_biggest_payloads_congruent_with_the_input() {
        let file = |name: &str, offset: u64, len: u64| TensorOut {
            source: Source::File { offset },
            ..t(name, DType::U8, &[len], &[])
        };
        let tensors = vec![file("a", 100_000, 40), file("big", 123_457, 1 << 20), file("c", 7, 64)];
        let tensors: Vec<TensorOut> = tensors
            .into_iter()
            .map(|mut t| {
                t.len = t.shape[0];
                t
            })
            .collect();
        let p = plan(&tensors).unwrap();
        for (modulus, fields) in [(4096u64, 0u64), (2 << 20, 0), (4096, 4 + 32 * 2), (2 << 20, 4 + 32 * 2)] {
            let mut meta = Metadata::new(1 << 20);
            meta.push("k", "v", "").unwrap();
            meta.seal(super::super::meta::Dups::Refuse).unwrap();
            let pad = pad_len(&tensors, &p, &meta, modulus, fields, true).unwrap();
            assert!((pad as u64) < modulus);
            meta.set_own(KEY_PAD, " ".repeat(pad));
            let block_start = 16 + encode_dict(&meta).len() as u64 + fields;
            let big_at = block_start + p.head.len() as u64 + p.offsets[1];
            assert_eq!(big_at % modulus, 123_457 % modulus);
        }
        assert_eq!(pad_modulus(1 << 20), 4096);
        assert_eq!(pad_modulus(1 << 30), 2 << 20);
    }

    #[test]
    fn empty_and_hash() {
        let p = plan(&[]).unwrap();
        assert_eq!(p.head, kiln_nostd::wire::EMPTY_BLOCK);
        assert_eq!(&frame(Kind::Digests)[..4], b"KLN0");
        assert_eq!(Kind::of(&frame(Kind::Shard)), Some(Kind::Shard));
        let mut m = Metadata::new(1 << 20);
        m.push("b", "2", "").unwrap();
        m.push("a", "1", "").unwrap();
        m.seal(super::super::meta::Dups::Refuse).unwrap();
        let dict = encode_dict(&m);
        assert_eq!(dict, [2, 0, 0, 0, 1, 0, 0, 0, b'a', 1, 0, 0, 0, b'1', 1, 0, 0, 0, b'b', 1, 0, 0, 0, b'2']);
    }

    #[test]
    fn refuses_what_kiln_cannot_hold() {
        assert!(plan(&[t("a", DType::U8, &[1], &[1]), t("a", DType::U8, &[1], &[1])]).is_err());
        let long: Vec<TensorOut> = (0..700).map(|i| t(&format!("{i:0>100}"), DType::U8, &[0], &[])).collect();
        assert!(plan(&long).unwrap_err().to_string().contains("65,535"));
        assert!(plan(&[t("r", DType::U8, &[1; 9], &[1])]).is_err());
    }
}
