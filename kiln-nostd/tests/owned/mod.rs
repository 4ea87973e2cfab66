//! An owned tensor for generated writer input, shared by the property tests,
//! the differential test and the writer fuzz target (`fuzz/`, by path), so
//! the owned-to-`TensorSpec` step exists once.

use kiln_nostd::{writer::QuantSpec, DType, TensorSpec};

/// A tensor that owns its name, shape, payload and layout name.
#[derive(Clone, Debug)]
pub struct OwnedTensor {
    pub name: Option<String>,
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub data: Vec<u8>,
    pub layout: Option<String>,
    pub block_size: u32,
    pub quant: QuantSpec<'static>,
}

impl OwnedTensor {
    /// The tensor as writer input, borrowing from `self`.
    pub fn spec(&self) -> TensorSpec<'_> {
        TensorSpec {
            name: self.name.as_deref(),
            dtype: self.dtype,
            shape: &self.shape,
            data: &self.data,
            layout: self.layout.as_deref(),
            block_size: self.block_size,
            quant: self.quant,
        }
    }
}

/// Writer input for a set of owned tensors, in order.
pub fn specs(ts: &[OwnedTensor]) -> Vec<TensorSpec<'_>> {
    ts.iter().map(OwnedTensor::spec).collect()
}
