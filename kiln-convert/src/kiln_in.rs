//! Kiln input (for the way back): a standalone tensor directory, or a model
//! file written by `kiln convert` (spec/model-file.md: a plain, digests or
//! shard record; its digests are checked, since every payload is read).

use anyhow::{anyhow, bail};
use kiln_model::Kind;
use kiln_nostd::int::u64_from;
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
            bail!("a sharded model's manifest: convert it by its path, so its shards are found beside it");
        }
        let mut scratch = kiln_model::host::scratch_for(bytes, &Limits::MAX);
        let parser = kiln_model::host::parser(Limits::MAX, &mut scratch);
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
    push_tensors(&mut model.tensors, &dir, None, 0)?;
    Ok(model)
}

/// Appends the named tensors of `dir` (input `input`, its shard too). With
/// the shard's `digests` each payload is checked as it is copied
/// ([`Source::Verified`]); without, it is copied as it is (a model file's
/// digests were checked when it was parsed).
pub fn push_tensors(
    out: &mut Vec<TensorOut>,
    dir: &Directory<'_>,
    digests: Option<kiln_nostd::digest::Digests<'_>>,
    input: usize,
) -> anyhow::Result<()> {
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
        let offset = u64_from(t.absolute_offset());
        let source = match digests {
            Some(d) => {
                let digest = d.get(t.index()).ok_or_else(|| anyhow!("tensor {name}: no digest"))?;
                Source::Verified { offset, digest: Box::new(*digest) }
            }
            None => Source::File { offset },
        };
        out.push(TensorOut {
            name: name.into(),
            dtype: t.dtype(),
            shape: t.shape().into(),
            layout: t.layout().map(Into::into),
            block_size: t.block_size(),
            quant: quant.map(Box::new),
            source,
            len: u64_from(t.byte_len()),
            input,
            shard: input,
        });
    }
    Ok(())
}
