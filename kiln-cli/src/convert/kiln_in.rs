//! Kiln input (for the way back): a standalone tensor directory, or a model
//! file written by `kiln convert` (spec/model-file.md: a plain, digests or
//! shard record; its digests are checked, since every payload is read).

use anyhow::{anyhow, bail};
use kiln_nostd::int::u64_from;
use kiln_nostd::model::{self as kiln_model, Kind};
use kiln_nostd::{Directory, Limits, Parser};

use super::meta::Dups;
use super::model::{Format, Model, QuantOut, ReadOptions, Source, TensorOut};
use super::write_kiln::KEY_PAD;

/// The record's tensors and metadata, or a standalone directory. The
/// record's `kiln.convert.*` keys were written by an earlier conversion and
/// still describe its values: they are carried as they are (the padding key
/// is recomputed).
pub fn read(bytes: &[u8], opts: &ReadOptions) -> anyhow::Result<Model> {
    let mut model = Model::new(Format::Kiln, opts);
    let dir = if bytes.starts_with(b"KLN0") {
        if Kind::of(bytes) == Some(Kind::Manifest) {
            bail!("a sharded model's manifest: convert it through its folder's shards (not yet supported for this output)");
        }
        let mut scratch = vec![0u32; kiln_nostd::scratch_len(u32::try_from(bytes.len() / 128).unwrap_or(u32::MAX))];
        let parser = Parser::new().limits(Limits::MAX).scratch(&mut scratch);
        let m = kiln_model::Model::parse_verified_with(bytes, parser)
            .map_err(|e| anyhow!("not a valid Kiln model file (spec/model-file.md): {e} (rule {})", e.rule().id()))?;
        // The padding key is hidden (and recomputed on the way out).
        for (k, val) in m.metadata().iter().filter(|(k, _)| *k != KEY_PAD) {
            model.metadata.push(k, val, "")?;
        }
        model.metadata.seal(Dups::Refuse)?;
        m.directory()
    } else {
        let dir: Directory<'_> = Parser::new()
            .limits(Limits::MAX)
            .parse(bytes)
            .map_err(|e| anyhow!("not a valid Kiln tensor directory: {e} (rule {})", e.rule().id()))?;
        dir
    };
    for t in dir.iter() {
        let Some(name) = t.name() else {
            bail!("tensor {} has no name; only named tensors can be converted", t.index());
        };
        let quant = t.quant().map(|q| QuantOut {
            scheme: q.scheme,
            // The axis came from a u16 field of the descriptor (and is below the rank).
            axis: u16::try_from(q.axis).unwrap_or(u16::MAX),
            group_size: q.group_size,
            scale: q.scale.name().unwrap_or_default().to_string(),
            outer: q.outer.and_then(|o| o.name()).map(str::to_string),
        });
        model.tensors.push(TensorOut {
            name: name.into(),
            dtype: t.dtype(),
            shape: t.shape().into(),
            layout: t.layout().map(Into::into),
            block_size: t.block_size(),
            quant: quant.map(Box::new),
            source: Source::File { offset: u64_from(t.absolute_offset()) },
            len: u64_from(t.byte_len()),
            input: 0,
            shard: 0,
        });
    }
    Ok(model)
}
