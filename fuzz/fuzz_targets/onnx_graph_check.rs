//! The sessions' check of an ONNX graph (kiln-onnx: rules R1 to R3 of
//! docs/onnx.md) on arbitrary bytes, and the converter's Constant lift.
//!
//! Oracles beyond "no panic": a graph the check accepts lists every
//! initializer of every graph once in its R3 list, with "kiln" exactly for
//! external data and "inline" exactly for what rule R1 keeps inline; every
//! external initializer's file is a plain name among the files named. The
//! lift keeps the model's weights (the same names) and leaves no Constant
//! weight behind.
#![no_main]

use kiln_onnx::check::Checked;
use kiln_onnx::proto::tensor_proto::DataLocation;
use kiln_onnx::{Origin, Place};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(model) = kiln_onnx::decode(bytes::Bytes::copy_from_slice(data)) else {
        assert!(kiln_onnx::requirements(data).is_err(), "undecodable bytes accepted");
        return;
    };
    if model.graph.is_none() {
        return;
    }
    let weights = kiln_onnx::weights(&model);
    let read = kiln_onnx::data_read(&model);
    if let Ok(req) = kiln_onnx::requirements(data) {
        let inits: Vec<_> = weights.iter().filter(|w| !matches!(w.origin, Origin::Constant { .. })).collect();
        assert_eq!(req.checked.len(), inits.len());
        for ((name, how), w) in req.checked.iter().zip(&inits) {
            assert_eq!(name, w.name);
            let external = w.tensor.data_location == Some(i32::from(DataLocation::External));
            assert_eq!(*how == Checked::Kiln, external, "{name}");
            if !external {
                assert_eq!(kiln_onnx::place(&read, name, w.tensor.data_type(), &w.tensor.dims), Place::Inline, "{name}");
            }
        }
        for e in &req.externals {
            assert!(req.files.contains(&e.file));
            assert!(kiln_model::ShardName::new(&e.file).is_some());
        }
    }
    let mut lifted = model.clone();
    kiln_onnx::lift(&mut lifted);
    let after = kiln_onnx::weights(&lifted);
    assert!(after.iter().all(|w| !matches!(w.origin, Origin::Constant { .. })), "a Constant weight was left");
    let mut a: Vec<&str> = weights.iter().map(|w| w.name).collect();
    let mut b: Vec<&str> = after.iter().map(|w| w.name).collect();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b, "the lift changed the weights");
});
