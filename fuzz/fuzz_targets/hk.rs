//! The HK reader: `HkFile::parse` on arbitrary bytes.
//!
//! Oracles: an error offset lies inside the buffer (or at its end for EOF);
//! an accepted file's metadata, TOC entries (data, scales, residual) and
//! appendix records are slices of the caller's buffer, the iterators yield
//! what the header counts, lookups by name find the first entry of that
//! name, and references resolve to entries of the same file.
#![no_main]

use kiln_fuzz::check_offset;
use kiln_hk::HkFile;
use libfuzzer_sys::fuzz_target;

fn inside(buf: &[u8], s: &[u8]) {
    let r = buf.as_ptr_range();
    assert!(s.is_empty() || (r.start <= s.as_ptr() && s.as_ptr_range().end <= r.end), "slice outside the buffer");
}

fuzz_target!(|data: &[u8]| {
    let hk = match HkFile::parse(data) {
        Err(e) => return check_offset(e.offset(), e.code(), data.len(), &e),
        Ok(hk) => hk,
    };
    assert_eq!(hk.bytes().len(), data.len());
    for pair in hk.metadata() {
        assert!(pair.offset < data.len());
        inside(data, pair.key.as_bytes());
        inside(data, pair.raw);
        let _ = (pair.value.tag(), pair.value.type_name());
        assert!(hk.meta(pair.key).is_some());
    }
    let mut n = 0u64;
    for t in hk.tensors() {
        assert_eq!(t.index() as u64, n);
        n += 1;
        assert!(t.entry_offset() < data.len());
        inside(data, t.name().as_bytes());
        inside(data, t.data());
        let d = t.data_span();
        assert_eq!(t.data().len() as u64, d.size);
        if let Some(s) = t.scales() {
            inside(data, s);
        }
        if let Some(r) = t.residual() {
            inside(data, r);
        }
        assert!(t.shape().len() <= 8);
        let _ = (t.storage(), t.tile_layout(), t.sparsity(), t.element_count(), t.block_size(), t.sparsity_ratio());
        let found = hk.find(t.name()).expect("a listed name is found");
        assert!(found.index() <= t.index(), "find() skips an earlier entry of the same name");
        if let Some(r) = hk.resolve(&t) {
            inside(data, r.data());
        }
    }
    assert_eq!(n, hk.tensor_count());
    for rec in hk.appendix() {
        assert!(rec.offset < data.len());
        inside(data, rec.name.as_bytes());
        inside(data, rec.target.as_bytes());
        inside(data, rec.data);
        let _ = (rec.entry_type_name(), rec.parent_hash_offset());
    }
});
