//! Inputs the `convert_*` fuzz targets (fuzz/) found, each reduced to what
//! triggers it, run through the converter's library entry point (the same
//! code path as `kiln convert`): each must be refused with a clear error, or
//! converted correctly, never panic.

use kiln_convert::{convert_bytes, Format, ReadOptions, To};

/// Converts `data` read as `format` to a Kiln record; the error text or the output.
fn convert(data: &[u8], format: Format) -> Result<Vec<u8>, String> {
    convert_bytes(data, Some(format), &ReadOptions::default(), To::Record)
        .map(|done| done.output)
        .map_err(|e| format!("{e:#}"))
}

/// A .npy file with this header dict (padded to 64 bytes) and payload.
fn npy(dict: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut head = dict.to_vec();
    while (10 + head.len() + 1) % 64 != 0 {
        head.push(b' ');
    }
    head.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&u16::try_from(head.len()).unwrap().to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(payload);
    out
}

#[test]
fn npy_descr_starting_with_a_multibyte_character_is_refused_not_a_panic() {
    // Found by convert_npy: the byte order was split off as the first byte,
    // inside a two-byte UTF-8 character.
    let data = npy(b"{'descr': '\xc2\x8eb1', 'fortran_order': False, 'shape': (3,), }", b"\x01\x00\x01");
    let err = convert(&data, Format::Npy).unwrap_err();
    // numpy.dtype refuses it too: the file is not valid.
    assert!(err.contains("\"Â\\u{8e}b1\" is not a NumPy dtype"), "{err}");
    // The same header with a real byte-order mark converts.
    let data = npy(b"{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", b"\x01\x00\x01");
    convert(&data, Format::Npy).unwrap();
}
