//! A standalone tensor directory: `Directory::parse` on arbitrary bytes.
//!
//! Oracles: the quadratic and the hashed (seeded, scratch) name checks and
//! the Frozen `tensors` validator return the same result; an accepted block
//! has views inside the buffer, in order, not overlapping, and re-encodes
//! byte for byte; an error offset lies inside the buffer (or at its end for
//! EOF); every name of an accepted block is found through the index; the
//! incremental validator, fed the input in chunks whose lengths are drawn
//! from the input's own bytes, gives the same verdict (code, offset, rule),
//! and an error it reports before the input's end is certain: the rest of
//! the input as all zeros, or all 0xFF, gives Parser the same verdict.
#![no_main]

use kiln_fuzz::{check_directory, check_error};
use kiln_nostd::frozen::{self, Schema};
use kiln_nostd::{directory::scratch_len, wire::Header, Incremental, Limits, Parser};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let plain = Parser::new().parse(data);

    // Scratch only when that many descriptors could fit (as kiln-cli does).
    let count = Header::peek_count(data).unwrap_or(0);
    let slots = if (count as usize) <= data.len() / 128 { scratch_len(count) } else { 0 };
    let mut scratch = vec![0u32; slots];
    let hashed = Parser::new().scratch(&mut scratch).hash_seed(0x9E37_79B9).parse_indexed(data);
    assert_eq!(plain.as_ref().err(), hashed.as_ref().err(), "hashed and quadratic name checks disagree");

    let schema: Schema<'_> = Schema::parse("tensors").expect("type text");
    let fro = frozen::validate(data, &schema, &Limits::DEFAULT, false);
    assert_eq!(plain.as_ref().err(), fro.as_ref().err(), "Parser and frozen::validate disagree");

    let (verdict, early) = incremental(data);
    assert_eq!(verdict, plain.as_ref().map(|_| ()).map_err(|e| *e), "Incremental and Parser disagree");
    if let (Some((end, e)), Err(want)) = (early, &plain) {
        if e == *want {
            for fill in [0x00, 0xff] {
                let mut other = data.to_vec();
                other[end..].fill(fill);
                assert_eq!(Parser::new().parse(&other).err(), Some(e), "reported after {end} bytes, before it was certain");
            }
        }
    }

    match plain {
        Ok(dir) => {
            assert_eq!((dir.start(), dir.end()), (0, data.len()));
            check_directory(data, &dir);
            let (_, index) = hashed.expect("agreed");
            for t in dir.iter() {
                if let Some(n) = t.name() {
                    assert_eq!(index.get(n).map(|f| f.index()), Some(t.index()), "index misses {n:?}");
                }
            }
        }
        Err(e) => check_error(&e, data.len()),
    }
});

/// The incremental verdict, chunk lengths 1 to 97 taken from the input's
/// bytes, so the fuzzer steers the chunking along with the block; and the
/// first error `feed` returned, with the bytes fed until then.
fn incremental(data: &[u8]) -> (Result<(), kiln_nostd::Error>, Option<(usize, kiln_nostd::Error)>) {
    let need = Incremental::prefix_len(data.get(..64).unwrap_or(&[]), &Limits::DEFAULT).ok().flatten().unwrap_or(64);
    let mut prefix = vec![0u8; need.min(data.len() + 64).max(64)];
    let mut v = Incremental::new(&mut prefix);
    let (mut at, mut k, mut early) = (0usize, 0usize, None);
    while at < data.len() {
        let n = 1 + usize::from(data[k % data.len()]) % 97;
        k = k.wrapping_add(7);
        let end = (at + n).min(data.len());
        if let (Err(e), None) = (v.feed(&data[at..end]), early) {
            early = Some((end, e));
        }
        at = end;
    }
    (v.finish().map(|_| ()), early)
}
