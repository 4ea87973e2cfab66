//! The ONNX hand-off's check (kiln-onnx, rules R1 to R3 of docs/onnx.md)
//! for `kiln.onnx`: the Python side opens and validates the Kiln files; the
//! rules and the pairing are the converter's own, from the same crate.

use std::collections::HashMap;

use kiln_nostd::DType;
use kiln_onnx::{GraphError, KilnTensor};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A refusal as `ValueError(message, initializer, file)`; `kiln.onnx` raises
/// its `GraphError` from it.
fn graph_error(e: GraphError) -> PyErr {
    PyValueError::new_err((e.message, e.initializer, e.file))
}

/// What the graph (its bytes) needs: (the Kiln model that records its
/// digest, the Kiln files its external initializers are in, the external
/// initializers as (name, file, offset, length, in a subgraph, read by a node), the checked list as
/// (name, "kiln" | "inline")).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub(crate) fn onnx_requirements(
    graph: &[u8],
) -> PyResult<(String, Vec<String>, Vec<(String, String, u64, u64, bool, bool)>, Vec<(String, &'static str)>)> {
    let req = kiln_onnx::requirements(graph).map_err(graph_error)?;
    let externals =
        req.externals.iter().map(|e| (e.name.clone(), e.file.clone(), e.offset, e.len, e.subgraph, e.used)).collect();
    let checked = req.checked.iter().map(|(n, c)| (n.clone(), c.as_str())).collect();
    Ok((req.model, req.files, externals, checked))
}

/// Holds the graph against its validated Kiln files: `recorded` the graph
/// digest the Kiln model records (None when it records none), `tables`
/// {file: {tensor: (dtype code, shape, payload offset, payload length)}}.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub(crate) fn onnx_pair(
    graph: &[u8],
    recorded: Option<&str>,
    tables: HashMap<String, HashMap<String, (u16, Vec<u64>, u64, u64)>>,
) -> PyResult<()> {
    let req = kiln_onnx::requirements(graph).map_err(graph_error)?;
    kiln_onnx::pair(&req, graph, recorded, |file, name| {
        let &(code, ref shape, offset, len) = tables.get(file)?.get(name)?;
        Some(KilnTensor { dtype: DType::from_code(code)?, shape: shape.clone(), offset, len })
    })
    .map_err(graph_error)
}

/// The ONNX type code of each Kiln dtype name both have (the conversion's table).
#[pyfunction]
pub(crate) fn onnx_dtypes() -> Vec<(i32, &'static str)> {
    kiln_onnx::dtype::DTYPES.iter().map(|&(code, _, d)| (code, d.name())).collect()
}

/// The graph with the external initializers in `data` ({name: bytes}) made
/// inline (`kiln_onnx::check::with_inline`): what `kiln.onnx` hands the
/// runtime for initializers of subgraphs, whose external data it would
/// otherwise look for on disk.
#[pyfunction]
pub(crate) fn onnx_with_inline(graph: &[u8], data: HashMap<String, Vec<u8>>) -> PyResult<Vec<u8>> {
    kiln_onnx::check::with_inline(graph, &data).map_err(graph_error)
}

/// The operators whose inputs shape inference reads as data (rule R1), by
/// input position, the payload limits (standard domain, other domains), and
/// the operators shape data propagates through.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub(crate) fn onnx_reads_data() -> (Vec<(&'static str, Vec<usize>)>, u64, u64, Vec<&'static str>) {
    let table = kiln_onnx::rule::READS_DATA.iter().map(|&(op, inputs)| (op, inputs.to_vec())).collect();
    let propagates = kiln_onnx::rule::PROPAGATES.to_vec();
    (table, kiln_onnx::rule::INLINE_LIMIT, kiln_onnx::rule::OTHER_DOMAIN_LIMIT, propagates)
}
