//! Payload ranges: the intersection rule of step 9 and the canonical
//! placement of step 10.
//!
//! "Overlap" is an intersection of two nonempty half-open ranges. A range
//! that lies before an earlier one without touching it breaks only the
//! placement, which step 10 reports.

use crate::block::Payload;
use crate::bytes::{first_nonzero, usize_from_u32, usize_sat};
use crate::error::{fail, Result, Rule};
use crate::wire::descriptor::Descriptors;
use crate::wire::descriptor::{field_at, RawDescriptor, AT_BYTE_OFFSET};
use crate::wire::header::AT_PAYLOAD_BYTES;
use crate::wire::layout::Placement;

/// Step 10 for descriptor `i`: its offset is the greedy placement after
/// `running_end`, and the gap before it is zero (when the payload is at hand).
pub(crate) fn check_placement(d: &RawDescriptor, i: usize, running_end: u64, payload: Payload<'_>) -> Result<()> {
    check_offset(d, i, running_end)?;
    match payload.bytes {
        Some(bytes) => check_gap(bytes, payload.at, running_end, d.byte_offset()),
        None => Ok(()),
    }
}

/// Step 10, placement only: `byte_offset` is the next multiple of 64 at or after `running_end`.
pub(crate) fn check_offset(d: &RawDescriptor, i: usize, running_end: u64) -> Result<()> {
    if Placement::after(running_end).next_offset() != Some(d.byte_offset()) {
        return fail(Rule::NonCanonicalOffset, field_at(i, AT_BYTE_OFFSET));
    }
    Ok(())
}

/// Step 10, gap only: payload bytes `from..to` (payload offsets) are zero.
/// `payload` is the region, at block offset `at`.
pub(crate) fn check_gap(payload: &[u8], at: usize, from: u64, to: u64) -> Result<()> {
    let (from, to) = (usize_sat(from), usize_sat(to));
    match payload.get(from..to).and_then(first_nonzero) {
        Some(k) => fail(Rule::NonzeroGap, at.saturating_add(from).saturating_add(k)),
        None => Ok(()),
    }
}

/// Step 10, last rule: payload_bytes is the end of the last tensor.
pub(crate) fn check_total(running_end: u64, payload_bytes: u64) -> Result<()> {
    if running_end != payload_bytes {
        return fail(Rule::NonCanonicalPayloadBytes, AT_PAYLOAD_BYTES);
    }
    Ok(())
}

/// Step 9's intersection rule over descriptors `0..upto`, whose ranges each
/// passed their own checks: the first descriptor whose nonempty range
/// intersects an earlier nonempty range.
///
/// Linear while the ranges come in increasing order (every canonical block).
/// From the first range that starts before the furthest end so far, the
/// block is invalid (an intersection here, or a misplacement for step 10)
/// and the exact answer takes a slower path: with `scratch` of at least
/// `upto` slots, a sort and a binary search, O(n log n); without (and on
/// bare-metal targets), every later range against every earlier one.
pub(crate) fn first_intersection(descs: &Descriptors<'_>, upto: usize, scratch: Option<&mut [u32]>) -> Option<usize> {
    let nonempty = |i: &usize| descs.raw(*i).byte_length() != 0;
    let from = first_disorder(descs, upto)?;
    // Bare-metal targets (small directories) keep only the pairwise scan, for code size.
    match scratch.filter(|_| !cfg!(target_os = "none")).and_then(|s| s.get_mut(..upto)) {
        Some(order) => first_intersection_sorted(descs, from, upto, order),
        None => (from..upto).filter(nonempty).find(|&j| (0..j).filter(nonempty).any(|k| intersect(descs, j, k))),
    }
}

/// True when the nonempty ranges of descriptors `0..upto` come in increasing
/// order (each starts at or after the furthest end before it), as in every
/// canonical block: then none intersects.
pub(crate) fn in_order(descs: &Descriptors<'_>, upto: usize) -> bool {
    first_disorder(descs, upto).is_none()
}

/// The first nonempty range before `upto` that starts before the furthest end so far.
fn first_disorder(descs: &Descriptors<'_>, upto: usize) -> Option<usize> {
    let mut furthest = 0u64;
    (0..upto).filter(|&i| descs.raw(i).byte_length() != 0).find(|&i| {
        let d = descs.raw(i);
        let disorder = d.byte_offset() < furthest;
        // Fallback not taken: ranges were checked not to overflow (step 9) before placement.
        furthest = furthest.max(d.range_end().unwrap_or(u64::MAX));
        disorder
    })
}

fn intersect(descs: &Descriptors<'_>, j: usize, k: usize) -> bool {
    let (a, b) = (descs.raw(j), descs.raw(k));
    // Fallback not taken: ranges were checked not to overflow (step 9) before placement.
    let (a_end, b_end) = (a.range_end().unwrap_or(u64::MAX), b.range_end().unwrap_or(u64::MAX));
    a.byte_offset() < b_end && b.byte_offset() < a_end
}

/// The nonempty ranges before `upto` sorted by offset in `order`; then the
/// smallest `m` (at or after `from`) such that the ranges `0..=m` are not
/// pairwise disjoint, found by binary search (disjointness of a prefix is
/// monotone: a subset of disjoint ranges is disjoint).
fn first_intersection_sorted(descs: &Descriptors<'_>, from: usize, upto: usize, order: &mut [u32]) -> Option<usize> {
    let mut n = 0usize;
    for i in (0..upto).filter(|&i| descs.raw(i).byte_length() != 0) {
        *order.get_mut(n)? = u32::try_from(i).ok()?;
        n = n.saturating_add(1);
    }
    let order = order.get_mut(..n)?;
    let index = |k: u32| usize_from_u32(k);
    heapsort_by_key(order, |k| (descs.raw(index(k)).byte_offset(), k));
    // Walks the sorted ranges of descriptors 0..=m: disjoint exactly when
    // each starts at or after the end of the one before.
    let disjoint = |m: usize| {
        let mut end = 0u64;
        order.iter().map(|&k| index(k)).filter(|&k| k <= m).all(|k| {
            let d = descs.raw(k);
            let ok = d.byte_offset() >= end;
            // Fallback not taken: ranges were checked not to overflow (step 9) before placement.
            end = d.range_end().unwrap_or(u64::MAX);
            ok
        })
    };
    let (mut lo, mut hi) = (from, upto.checked_sub(1)?);
    if disjoint(hi) {
        return None;
    }
    // Invariant: 0..=hi is not disjoint; 0..lo is.
    while lo < hi {
        let mid = lo.saturating_add(hi.saturating_sub(lo) / 2);
        if disjoint(mid) {
            lo = mid.saturating_add(1);
        } else {
            hi = mid;
        }
    }
    Some(hi)
}

/// Sorts `v` by `key` in place: heapsort, O(n log n), no allocation and no
/// panic path (core's sort keeps one for an inconsistent order).
fn heapsort_by_key<K: Ord>(v: &mut [u32], key: impl Fn(u32) -> K) {
    let k = |v: &[u32], i: usize| v.get(i).map(|&x| key(x));
    let sift = |v: &mut [u32], mut root: usize, end: usize| loop {
        let left = root.saturating_mul(2).saturating_add(1);
        if left >= end {
            return;
        }
        let right = left.saturating_add(1);
        let child = if right < end && k(v, right) > k(v, left) { right } else { left };
        if k(v, root) >= k(v, child) {
            return;
        }
        swap(v, root, child);
        root = child;
    };
    let len = v.len();
    for start in (0..len / 2).rev() {
        sift(v, start, len);
    }
    for end in (1..len).rev() {
        swap(v, 0, end);
        sift(v, 0, end);
    }
}

fn swap(v: &mut [u32], a: usize, b: usize) {
    if let (Some(&x), Some(&y)) = (v.get(a), v.get(b)) {
        if let Some(p) = v.get_mut(a) {
            *p = y;
        }
        if let Some(p) = v.get_mut(b) {
            *p = x;
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::wire::header::{DESCRIPTOR_LEN, HEADER_LEN};
    use std::vec;

    /// Descriptors with the given (offset, length) ranges, other fields zero.
    fn table(ranges: &[(u64, u64)]) -> std::vec::Vec<u8> {
        let mut b = vec![0u8; HEADER_LEN + ranges.len() * DESCRIPTOR_LEN];
        for (i, &(o, l)) in ranges.iter().enumerate() {
            let at = HEADER_LEN + i * DESCRIPTOR_LEN + AT_BYTE_OFFSET;
            b[at..at + 8].copy_from_slice(&o.to_le_bytes());
            b[at + 8..at + 16].copy_from_slice(&l.to_le_bytes());
        }
        b
    }

    fn both(ranges: &[(u64, u64)]) -> Option<usize> {
        let b = table(ranges);
        let descs = Descriptors::new(&b, ranges.len());
        let mut scratch = vec![0u32; ranges.len()];
        let sorted = first_intersection(&descs, ranges.len(), Some(&mut scratch));
        let pairwise = first_intersection(&descs, ranges.len(), None);
        assert_eq!(sorted, pairwise, "{ranges:?}");
        sorted
    }

    #[test]
    fn out_of_order_is_not_an_intersection() {
        assert_eq!(both(&[(64, 4), (0, 4), (128, 4)]), None);
        assert_eq!(both(&[(64, 4), (0, 64), (128, 4)]), None); // touching
        assert_eq!(both(&[(64, 4), (0, 65), (128, 4)]), Some(1));
        assert_eq!(both(&[(64, 4), (0, 4), (2, 0), (66, 1)]), Some(3)); // zero length intersects nothing
        assert_eq!(both(&[(0, 8), (4, 8)]), Some(1));
        assert_eq!(both(&[(100, 10), (0, 10), (50, 10), (20, 10), (105, 1)]), Some(4));
    }

    /// The sorted search and the pairwise scan agree on random range sets,
    /// dense enough that both answers (none, and every position) occur.
    #[test]
    fn sorted_search_agrees_with_the_pairwise_scan() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let (mut found, mut none) = (0, 0);
        let rounds = if cfg!(miri) { 50 } else { 5_000 };
        for _ in 0..rounds {
            let n = 1 + usize::try_from(next(12)).unwrap();
            let span = 16 + next(400);
            let ranges: std::vec::Vec<_> = (0..n).map(|_| (next(span), next(24))).collect();
            match both(&ranges) {
                Some(_) => found += 1,
                None => none += 1,
            }
        }
        assert!(found > rounds / 50 && none > rounds / 50, "{found} {none}");
    }
}
