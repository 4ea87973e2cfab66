//! The open policy of hosts (feature `std`), one for the CLI and the Python
//! package: the name table's seed is random per process, so names crafted to
//! collide under a known seed cannot make every check quadratic; and name
//! scratch is sized from the block's claimed tensor count only when that
//! many descriptors fit in the bytes at hand, so a hostile count never sizes
//! an allocation.
//!
//! ```
//! use kiln_model::host;
//! use kiln_nostd::Limits;
//! let block = kiln_nostd::wire::EMPTY_BLOCK;
//! let mut scratch = host::scratch_for(&block, &Limits::DEFAULT);
//! assert_eq!(host::parser(Limits::DEFAULT, &mut scratch).parse(&block)?.len(), 0);
//! # Ok::<(), kiln_model::Error>(())
//! ```

extern crate std;

use std::vec;
use std::vec::Vec;

use crate as model;
use crate::bytes::u64_from;
use crate::header::Header;
use crate::layout::descriptors_end;
use crate::names::scratch_len;
use kiln_nostd::Limits;
use kiln_nostd::Parser;

/// The name table's seed for this process: random, fixed once drawn.
pub fn process_seed() -> u64 {
    use std::hash::BuildHasher;
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0x6b69_6c6eu64))
}

/// Name-table scratch for the block at `start` of `buf`: `None` when its
/// header does not pass steps 1 and 2, when its count is over
/// `limits.count_cap`, or when that many descriptors cannot fit in the
/// bytes from `start` (the parse then reports why).
pub fn name_scratch(buf: &[u8], start: usize, limits: &Limits) -> Option<Vec<u32>> {
    let block = buf.get(start..)?;
    let count = Header::peek_count(block)?;
    let fits = descriptors_end(count) <= u64_from(block.len());
    (fits && count <= limits.count_cap).then(|| vec![0u32; scratch_len(count)])
}

/// Where the directory block of `buf` starts: after the frame and metadata
/// of a model file, else at 0; `None` when a model file's fields before the
/// block are refused (the full parse reports that).
pub fn block_start(buf: &[u8], limits: &Limits) -> Option<usize> {
    if model::is_model_file(buf) {
        model::block_start(buf, limits).ok()
    } else {
        Some(0)
    }
}

/// Name-table scratch for whatever `buf` holds (a model file or a plain
/// directory), empty when none is warranted.
pub fn scratch_for(buf: &[u8], limits: &Limits) -> Vec<u32> {
    block_start(buf, limits).and_then(|s| name_scratch(buf, s, limits)).unwrap_or_default()
}

/// Scratch for the linear-time name checks of a manifest of `buf.len()`
/// bytes: its entries take at least 16 bytes each, so no more can be
/// claimed than that, within `limits.count_cap`.
pub fn manifest_scratch(buf: &[u8], limits: &Limits) -> Vec<u32> {
    let cap = crate::bytes::usize_sat(u64::from(limits.count_cap));
    vec![0u32; model::Manifest::scratch_len((buf.len() / 16).min(cap))]
}

/// A parser with the host policy: `limits`, the process seed, and
/// `scratch` for the name table (empty: no table, pairwise comparison).
pub fn parser(limits: Limits, scratch: &mut [u32]) -> Parser<'_> {
    let p = Parser::new().limits(limits).hash_seed(process_seed());
    if scratch.is_empty() {
        p
    } else {
        p.scratch(scratch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_nostd::{DType, TensorSpec, Writer};

    #[test]
    fn scratch_only_for_plausible_counts() {
        let data = [0u8; 4];
        let specs = [TensorSpec::new(DType::F32, &[1], &data).named("a")];
        let mut block = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
        Writer::new().write(&specs, &mut block).unwrap();
        assert_eq!(name_scratch(&block, 0, &Limits::DEFAULT).map(|s| s.len()), Some(scratch_len(1)));
        assert_eq!(name_scratch(&block, 0, &Limits::DEFAULT.with_count_cap(0)), None);
        assert_eq!(name_scratch(&block, 1, &Limits::DEFAULT), None);
        // A header claiming 2^32 - 1 tensors in 64 bytes gets no scratch.
        let mut huge = kiln_nostd::wire::EMPTY_BLOCK;
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(name_scratch(&huge, 0, &Limits::MAX), None);
        assert_eq!(name_scratch(b"nope", 0, &Limits::DEFAULT), None);
        assert_eq!(scratch_for(&block, &Limits::DEFAULT).len(), scratch_len(1));
        assert_eq!(
            parser(Limits::DEFAULT, &mut scratch_for(&block, &Limits::DEFAULT)).parse(&block).map(|d| d.len()),
            Ok(1)
        );
        assert_eq!(manifest_scratch(&[0; 32], &Limits::DEFAULT).len(), model::Manifest::scratch_len(2));
        assert_eq!(process_seed(), process_seed());
    }
}
