//! safetensors input, through the `safetensors` crate's header parser
//! (which checks the header length, the JSON, the dtypes, that offsets are
//! contiguous and that the data fills the file exactly).

use anyhow::Context;
use safetensors::tensor::SafeTensors;

use super::codes::{SAFETENSORS_DENSE, SAFETENSORS_OPAQUE};
use super::model::{Format, Model, Source, TensorOut, KEY_VALUE_ENCODING};

pub fn read(bytes: &[u8]) -> anyhow::Result<Model> {
    let (header_len, meta) = SafeTensors::read_metadata(bytes).context("not a valid safetensors file")?;
    let data_start = 8 + header_len as u64;
    let mut model = Model::new(Format::Safetensors);
    model.metadata.insert(KEY_VALUE_ENCODING.into(), "text".into());
    if let Some(m) = meta.metadata() {
        for (k, v) in m {
            model.metadata.insert(k.clone(), v.clone());
        }
    }
    // A dict of tensors: sorted by name, the canonical order.
    let mut infos: Vec<_> = meta.tensors().into_iter().collect();
    infos.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for (name, info) in infos {
        let (begin, end) = info.data_offsets;
        let offset = data_start + begin as u64;
        let len = (end - begin) as u64;
        let shape: Vec<u64> = info.shape.iter().map(|&d| d as u64).collect();
        let dtype_name = info.dtype.to_string();
        if let Some((_, dtype)) = SAFETENSORS_DENSE.iter().find(|(n, _)| *n == dtype_name) {
            model.tensors.push(TensorOut::dense(name, *dtype, shape, offset, len));
        } else if let Some((n, code, block, _)) = SAFETENSORS_OPAQUE.iter().find(|(n, ..)| *n == dtype_name) {
            model.note(format!(
                "tensor {name}: safetensors {n} has no Kiln dtype; stored as opaque code {code} (layout safetensors.{n}, block {block} bytes)"
            ));
            let layout = format!("safetensors.{n}");
            model.tensors.push(TensorOut::opaque(name, *code, layout, *block, shape, Source::File { offset }, len));
        } else {
            model.note(format!(
                "tensor {name}: safetensors dtype {dtype_name} is unknown to this converter; NOT carried"
            ));
        }
    }
    Ok(model)
}
