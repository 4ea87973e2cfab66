//! `kiln convert` of arbitrary bytes read as ONNX (`--from onnx`: prost's
//! decoding of onnx-ml.proto, the initializers' raw, typed and external
//! forms, the dtype table, the metadata).
//!
//! Oracle: `kiln_fuzz::check_conversion` (a converted model validates as
//! Kiln and holds the payload bytes the reader took; an inline `raw_data`
//! payload is also the very range of the input it names). External data
//! names files beside the input, which the fuzzer's temporary folder does not
//! hold: such models are refused, and never read anything outside it.
#![no_main]

use kiln_convert::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kiln_fuzz::check_conversion(data, Format::Onnx);
});
