//! A directory inside a struct: `struct{id:i64,batch:tensors,}`, the fuzzer's
//! bytes being the whole record (an i64, then a block, then maybe more).
//!
//! Oracles: `Parser::parse_at(buf, 8)` (errors absolute in the buffer, no
//! TRAILING), the Frozen validator, the derived typed decoder and the
//! framed validator agree; accepted blocks satisfy the view and canonical
//! oracles and the typed value re-encodes to the input.
#![no_main]

use kiln_fuzz::{check_directory, check_error};
use kiln_nostd::frozen::{self, Kiln, Schema};
use kiln_nostd::{Directory, ErrorCode, Limits, Parser, Rule};
use libfuzzer_sys::fuzz_target;

#[derive(Kiln, Debug)]
struct Batch<'a> {
    id: i64,
    batch: Directory<'a>,
}

const TYPE: &str = "struct{id:i64,batch:tensors,}";

fuzz_target!(|data: &[u8]| {
    assert_eq!(Batch::TYPE_TEXT, TYPE);
    let len = data.len();
    let at = Parser::new().parse_at(data, 8);
    match &at {
        Ok(d) => {
            assert_eq!(d.start(), 8);
            assert!(d.end() <= len);
            check_directory(data, d);
        }
        Err(e) => {
            check_error(e, len);
            assert!(e.offset() >= 8 || len < 8, "parse_at error before the block: {e}");
        }
    }

    let schema: Schema<'_> = Schema::parse(TYPE).expect("type text");
    let fro = frozen::validate(data, &schema, &Limits::DEFAULT, false);
    match (&at, &fro) {
        (Err(a), Err(f)) => {
            if len >= 8 {
                assert_eq!(a, f, "parse_at and frozen::validate disagree");
            } else {
                assert_eq!((f.rule(), f.offset()), (Rule::ValueTruncated, 0));
            }
        }
        (Err(a), Ok(())) => panic!("parse_at rejects ({a}) what frozen accepts"),
        (Ok(d), Err(f)) => {
            assert!(d.end() < len, "frozen rejects ({f}) a record parse_at accepts");
            assert_eq!((f.code(), f.offset()), (ErrorCode::Trailing, d.end()));
        }
        (Ok(d), Ok(())) => assert_eq!(d.end(), len),
    }
    if let Err(e) = &fro {
        check_error(e, len);
    }

    let typed = frozen::decode::<Batch<'_>>(data);
    assert_eq!(typed.as_ref().err(), fro.as_ref().err(), "typed decode and frozen::validate disagree");
    if let Ok(b) = &typed {
        assert_eq!(b.id.to_le_bytes(), data[..8]);
        let mut out = vec![0u8; frozen::encoded_len(b)];
        assert_eq!(frozen::encode(b, &mut out), Ok(len));
        assert!(out == data, "typed re-encoding differs from an accepted record");
    }

    // The same record framed: errors move by 16, nothing else changes.
    let mut framed = frozen::frame_bytes(schema.hash()).to_vec();
    framed.extend_from_slice(data);
    let ff = frozen::validate(&framed, &schema, &Limits::DEFAULT, true);
    match (&fro, &ff) {
        (Ok(()), Ok(())) => {}
        (Err(a), Err(b)) => assert_eq!((a.rule(), a.offset() + 16), (b.rule(), b.offset()), "framing changes the error"),
        _ => panic!("framing changes the verdict: {fro:?} vs {ff:?}"),
    }
});
