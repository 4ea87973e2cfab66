//! The allocation rule, measured: a counting global allocator proves that a
//! hostile count is refused before any storage is reserved for it.
//!
//! Only allocations made by the test's own thread while a measurement runs
//! are counted (the harness allocates on other threads).

mod support;

use std::collections::BTreeMap;

use kiln_derive::Kiln;
use kiln_nostd::frozen::decode;
use kiln_nostd::{ErrorCode, Rule};
use support::measure;

#[derive(Kiln, Debug)]
struct Item {
    id: u32,
    name: String,
}

#[test]
fn twelve_bytes_claiming_16m_structs_is_eof_with_no_allocation() {
    let buf = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    let (r, calls, bytes) = measure(|| decode::<Vec<Item>>(&buf).map(|v| v.len()));
    let e = r.unwrap_err();
    assert_eq!((e.code(), e.rule(), e.offset()), (ErrorCode::Eof, Rule::CountPastEnd, 0));
    assert_eq!((calls, bytes), (0, 0));
}

#[test]
fn hostile_lengths_of_every_owned_kind_allocate_nothing() {
    let claim = [0xff, 0xff, 0xff, 0x00, 1, 2, 3, 4]; // 16,777,215 claimed, 4 present
    let (r, calls, _) = measure(|| decode::<String>(&claim).map(|s| s.len()));
    assert_eq!((r.unwrap_err().rule(), calls), (Rule::ByteLengthPastEnd, 0));
    let (r, calls, _) = measure(|| decode::<Vec<u8>>(&claim).map(|s| s.len()));
    assert_eq!((r.unwrap_err().rule(), calls), (Rule::ByteLengthPastEnd, 0)); // list<u8>: a byte run
    let (r, calls, _) = measure(|| decode::<Vec<f64>>(&claim).map(|s| s.len()));
    assert_eq!((r.unwrap_err().rule(), calls), (Rule::CountPastEnd, 0));
    let (r, calls, _) = measure(|| decode::<BTreeMap<String, u8>>(&claim).map(|s| s.len()));
    assert_eq!((r.unwrap_err().rule(), calls), (Rule::CountPastEnd, 0));
    // Above the cap: LIMIT, still nothing allocated.
    let over = [1, 0, 0, 1];
    let (r, calls, _) = measure(|| decode::<Vec<Vec<u8>>>(&over).map(|s| s.len()));
    assert_eq!((r.unwrap_err().code(), calls), (ErrorCode::Limit, 0));
}

#[test]
fn a_nested_hostile_count_allocates_only_what_the_outer_count_proved() {
    // Outer list: 1 element (fits), inner list claims 16,777,216 u64 in 0 bytes.
    let buf = [1, 0, 0, 0, 0, 0, 0, 1];
    let (r, _calls, bytes) = measure(|| decode::<Vec<Vec<u64>>>(&buf).map(|v| v.len()));
    assert_eq!(r.unwrap_err().rule(), Rule::CountPastEnd);
    assert!(bytes <= std::mem::size_of::<Vec<u64>>(), "allocated {bytes} bytes");
}

#[test]
fn the_counter_sees_a_legitimate_decode() {
    let buf = [2, 0, 0, 0, 1, 0, 2, 0];
    let (r, calls, bytes) = measure(|| decode::<Vec<u16>>(&buf));
    assert_eq!(r.unwrap(), [1, 2]);
    assert!(calls >= 1 && bytes >= 4);
}
