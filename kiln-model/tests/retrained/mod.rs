//! The example model retrained: some of its tensors changed, with their
//! digests, for the tests of updates that send only what changed (the delta
//! and power-cut tests).

use kiln_model::Model;
use kiln_nostd::digest::sha256;

const EXAMPLE: &[u8] = include_bytes!("../../../spec/examples/digits-mlp.model.kiln");

/// The example with every tensor named in `names` changed (its digest too).
pub fn retrained(names: &[&str]) -> Vec<u8> {
    let mut f = EXAMPLE.to_vec();
    let m = Model::parse(EXAMPLE).unwrap();
    let table = m.digests().unwrap();
    for (i, t) in m.directory().iter().enumerate() {
        if names.contains(&t.name().unwrap()) {
            let at = t.absolute_offset();
            for b in &mut f[at..at + t.byte_len()] {
                *b = b.wrapping_add(1);
            }
            let d = sha256(&f[at..at + t.byte_len()]);
            f[table.offset_of(i)..table.offset_of(i) + 32].copy_from_slice(&d);
        }
    }
    f
}
