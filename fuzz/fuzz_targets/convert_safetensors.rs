//! `kiln convert` of arbitrary bytes read as safetensors (header scan, the
//! `safetensors` crate, dtype mapping, `__metadata__`), and back.
//!
//! Oracles: `kiln_fuzz::check_conversion` (a converted file validates as
//! Kiln and holds the payload bytes the reader took), then
//! `kiln_fuzz::check_safetensors_round_trip` (Kiln -> safetensors -> Kiln
//! gives the same tensors back).
#![no_main]

use kiln_convert::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(record) = kiln_fuzz::check_conversion(data, Format::Safetensors) {
        kiln_fuzz::check_safetensors_round_trip(&record);
    }
});
