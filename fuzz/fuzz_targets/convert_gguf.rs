//! `kiln convert` of arbitrary bytes read as gguf (the converter's own code
//! path, input and output in a temporary directory).
//!
//! Oracle (`kiln_fuzz::check_conversion`): a refusal is an error, never a
//! panic; a file that converts gives a record the core validates, with the
//! reader's tensors (name, dtype, shape) and the payload bytes it took.
#![no_main]

use kiln_convert::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = kiln_fuzz::check_conversion(data, Format::Gguf);
});
