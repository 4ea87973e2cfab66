//! Kiln input (for the way back): a standalone tensor directory, or a record
//! written by `kiln convert` (frame + `struct{metadata:dict<str,str>,tensors:tensors,}`).

use anyhow::{anyhow, bail};
use kiln_nostd::frozen::{self, Schema};
use kiln_nostd::int::u64_from;
use kiln_nostd::{Directory, Limits, Parser};

use super::meta::Dups;
use super::model::{Format, Model, QuantOut, ReadOptions, Source, TensorOut};
use super::write_kiln::{KEY_PAD, RECORD_TYPE};

/// The record's tensors and metadata, or a standalone directory. The
/// record's `kiln.convert.*` keys were written by an earlier conversion and
/// still describe its values: they are carried as they are (the padding key
/// is recomputed).
pub fn read(bytes: &[u8], opts: &ReadOptions) -> anyhow::Result<Model> {
    let mut model = Model::new(Format::Kiln, opts);
    let dir = if bytes.starts_with(b"KLN0") {
        let schema: Schema<'_> = Schema::parse(RECORD_TYPE).map_err(|e| anyhow!("{e}"))?;
        let v = frozen::read(bytes, &schema, &Limits::MAX, true)
            .map_err(|e| anyhow!("not a `kiln convert` record ({RECORD_TYPE}): {e} (rule {})", e.rule().id()))?;
        let dict = v.field("metadata").and_then(|m| m.as_dict()).ok_or_else(|| anyhow!("record without metadata"))?;
        for (k, val) in dict.iter() {
            let val = val.as_str().ok_or_else(|| anyhow!("metadata value of {k} is not a string"))?;
            if k != KEY_PAD {
                model.metadata.push(k, val, "")?;
            }
        }
        model.metadata.seal(Dups::Refuse)?;
        v.field("tensors").and_then(|t| t.as_tensors()).ok_or_else(|| anyhow!("record without tensors"))?
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
            name: name.to_string(),
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            layout: t.layout().map(str::to_string),
            block_size: t.block_size(),
            quant,
            source: Source::File { offset: u64_from(t.absolute_offset()) },
            len: u64_from(t.byte_len()),
            input: 0,
            shard: 0,
        });
    }
    Ok(model)
}
