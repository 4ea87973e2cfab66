//! Memory bounds of the HK reader, measured: the core's counting
//! `#[global_allocator]` (kiln-nostd/tests/support, the one copy) shows that
//! parsing allocates nothing, even when the tensor and metadata counts claim
//! exabytes. (The crate has no allocator to call; this holds it to that.)
//!
//! Only allocations made by the measuring thread while a measurement runs
//! are counted (the test harness allocates on other threads).

#[path = "../../kiln-nostd/tests/support/mod.rs"]
mod support;

use support::measure;

use kiln_hk::HkFile;

/// Asserts that `f` allocated nothing and returns its result.
fn no_alloc<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let (out, calls, bytes) = measure(f);
    assert_eq!((calls, bytes), (0, 0), "{what}: {calls} allocations, {bytes} bytes");
    out
}

#[test]
fn hk_counts_claiming_exabytes_allocate_nothing() {
    let base = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.hk"));
    assert!(no_alloc("valid HK", || HkFile::parse(&base).map(|h| h.tensor_count())).is_ok());
    for (at, what) in [(16, "tensor_count"), (24, "metadata_kv_count")] {
        for v in [u64::MAX, 1 << 40, 16_777_216] {
            let mut f = base;
            f[at..at + 8].copy_from_slice(&v.to_le_bytes());
            let r = no_alloc(what, || HkFile::parse(&f).map(|h| h.tensor_count()));
            assert!(r.is_err(), "{what} = {v} accepted");
        }
    }
}
