//! Name heap rules (check step 8) and name uniqueness.
//!
//! The heap is the tensor names in descriptor order, then the layout names in
//! descriptor order, with no gap. Uniqueness is checked with an open-addressing
//! table in caller scratch (linear expected time) or, without scratch, by
//! comparing every pair (quadratic, no memory).

use crate::bytes::u16_at;
use crate::descriptor::{field_at, AT_LAYOUT_LEN, AT_LAYOUT_OFF, AT_NAME_LEN, AT_NAME_OFF, NO_NAME};
use crate::error::{fail, Result, Rule};
use crate::header::AT_FLAGS;

/// The heap and where it sits in the block.
#[derive(Clone, Copy)]
pub(crate) struct Heap<'a> {
    pub bytes: &'a [u8],
    /// Block offset of heap byte 0.
    pub at: usize,
}

impl<'a> Heap<'a> {
    /// The `len` bytes at heap offset `off`, if inside.
    pub fn slice(&self, off: u16, len: u16) -> Option<&'a [u8]> {
        let start = usize::from(off);
        self.bytes.get(start..start.checked_add(usize::from(len))?)
    }
}

/// The four heap fields of one descriptor, read without decoding the rest.
#[derive(Clone, Copy)]
pub(crate) struct NameFields {
    pub name_off: u16,
    pub name_len: u16,
    pub layout_off: u16,
    pub layout_len: u16,
}

impl NameFields {
    /// Reads the fields from raw descriptor bytes.
    #[inline]
    pub fn read(raw: &[u8]) -> NameFields {
        NameFields {
            name_off: u16_at(raw, AT_NAME_OFF).unwrap_or(0),
            name_len: u16_at(raw, AT_NAME_LEN).unwrap_or(0),
            layout_off: u16_at(raw, AT_LAYOUT_OFF).unwrap_or(0),
            layout_len: u16_at(raw, AT_LAYOUT_LEN).unwrap_or(0),
        }
    }
}

/// Step 8 name rules for `count` descriptors read through `desc`.
pub(crate) fn check_heap(
    heap: Heap<'_>,
    count: usize,
    names_flag: bool,
    desc: impl Fn(usize) -> NameFields,
) -> Result<()> {
    if names_flag && count == 0 {
        return fail(Rule::NameFlagOnEmpty, AT_FLAGS);
    }
    let mut cursor = 0usize;
    for i in 0..count {
        let d = desc(i);
        if (d.layout_off == NO_NAME) != (d.layout_len == 0) {
            return fail(Rule::LayoutFieldMismatch, field_at(i, AT_LAYOUT_OFF));
        }
        if !names_flag {
            if d.name_len != 0 || d.name_off != NO_NAME {
                return fail(Rule::NameWithoutFlag, field_at(i, AT_NAME_OFF));
            }
            continue;
        }
        if d.name_len == 0 {
            return fail(Rule::MissingName, field_at(i, AT_NAME_LEN));
        }
        cursor = take(heap, cursor, d.name_off, d.name_len, i, AT_NAME_OFF, Rule::NameUtf8)?;
    }
    for i in 0..count {
        let d = desc(i);
        if d.layout_len != 0 {
            cursor = take(heap, cursor, d.layout_off, d.layout_len, i, AT_LAYOUT_OFF, Rule::LayoutUtf8)?;
        }
    }
    if cursor != heap.bytes.len() {
        return fail(Rule::HeapHole, heap.at.saturating_add(cursor));
    }
    Ok(())
}

/// One heap entry: it starts at `cursor`, fits, and is UTF-8. Returns the new cursor.
fn take(heap: Heap<'_>, cursor: usize, off: u16, len: u16, i: usize, field: usize, utf8: Rule) -> Result<usize> {
    if usize::from(off) != cursor {
        return fail(Rule::HeapOrder, field_at(i, field));
    }
    let Some(bytes) = heap.slice(off, len) else {
        return fail(Rule::HeapOverrun, field_at(i, field.saturating_add(2)));
    };
    if let Err(e) = core::str::from_utf8(bytes) {
        return fail(utf8, heap.at.saturating_add(cursor).saturating_add(e.valid_up_to()));
    }
    Ok(cursor.saturating_add(bytes.len()))
}

/// A hash for name bytes. Word-at-a-time multiply-rotate: fast for short
/// names and well mixed; `seed` lets a caller defeat precomputed collisions.
pub(crate) fn name_hash(bytes: &[u8], seed: u64) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = seed ^ crate::bytes::u64_from(bytes.len()).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = crate::bytes::u64_at(c, 0).unwrap_or(0);
        h = (h ^ w).wrapping_mul(K).rotate_left(31);
    }
    let mut tail = [0u8; 8];
    for (t, b) in tail.iter_mut().zip(chunks.remainder()) {
        *t = *b;
    }
    h = (h ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    h ^ (h >> 29)
}

/// An open-addressing table of descriptor indexes (slot value = index + 1)
/// in caller memory. Capacity is the largest power of two in the scratch.
pub(crate) struct Table<'s> {
    slots: &'s mut [u32],
    mask: usize,
}

/// Scratch slots a table for `count` names wants (load factor at most 1/2).
pub fn scratch_len(count: u32) -> usize {
    let n = usize::try_from(count).unwrap_or(usize::MAX);
    if n == 0 {
        return 0;
    }
    n.saturating_mul(2).checked_next_power_of_two().unwrap_or(usize::MAX)
}

impl<'s> Table<'s> {
    /// A cleared table, or `None` when the scratch is too small for `count`.
    pub fn new(scratch: &'s mut [u32], count: usize) -> Option<Table<'s>> {
        let want = count.checked_mul(2)?.checked_next_power_of_two()?;
        let slots = scratch.get_mut(..want)?;
        slots.fill(0);
        Some(Table { slots, mask: want.wrapping_sub(1) })
    }

    /// Inserts descriptor `index` named `name`; returns the index of an
    /// earlier tensor with the same name instead, if there is one.
    pub fn insert<'n>(&mut self, name: &[u8], index: usize, seed: u64, name_of: impl Fn(usize) -> &'n [u8]) -> Option<usize> {
        let mut slot = usize::try_from(name_hash(name, seed)).unwrap_or(0) & self.mask;
        loop {
            let cell = self.slots.get_mut(slot)?;
            match usize::try_from(*cell).ok()?.checked_sub(1) {
                None => {
                    *cell = u32::try_from(index.checked_add(1)?).ok()?;
                    return None;
                }
                Some(other) if name_of(other) == name => return Some(other),
                Some(_) => slot = slot.wrapping_add(1) & self.mask,
            }
        }
    }

    /// Freezes the table for lookups.
    pub fn freeze(self) -> FrozenTable<'s> {
        FrozenTable { slots: self.slots, mask: self.mask }
    }
}

/// A filled table, read-only.
#[derive(Clone, Copy)]
pub(crate) struct FrozenTable<'s> {
    slots: &'s [u32],
    mask: usize,
}

impl FrozenTable<'_> {
    /// The index of the tensor named `name`, if any.
    pub fn find<'n>(&self, name: &[u8], seed: u64, name_of: impl Fn(usize) -> &'n [u8]) -> Option<usize> {
        let mut slot = usize::try_from(name_hash(name, seed)).unwrap_or(0) & self.mask;
        // At most every slot once, so a full table cannot loop forever.
        for _ in 0..self.slots.len() {
            let index = usize::try_from(*self.slots.get(slot)?).ok()?.checked_sub(1)?;
            if name_of(index) == name {
                return Some(index);
            }
            slot = slot.wrapping_add(1) & self.mask;
        }
        None
    }
}

/// Uniqueness without scratch: every pair, lengths compared first.
/// Returns (earlier, later) for the first duplicate in descriptor order.
pub(crate) fn find_duplicate_quadratic<'n>(count: usize, name_of: impl Fn(usize) -> &'n [u8]) -> Option<(usize, usize)> {
    for j in 1..count {
        let b = name_of(j);
        for i in 0..j {
            if name_of(i) == b {
                return Some((i, j));
            }
        }
    }
    None
}

/// Uniqueness with a table: fills `table`, returns the first duplicate.
pub(crate) fn find_duplicate_hashed<'n>(
    table: &mut Table<'_>,
    count: usize,
    seed: u64,
    name_of: impl Fn(usize) -> &'n [u8] + Copy,
) -> Option<(usize, usize)> {
    (0..count).find_map(|j| table.insert(name_of(j), j, seed, name_of).map(|i| (i, j)))
}

/// The block offset to report for a duplicate found at descriptor `later`.
pub(crate) fn duplicate_at(later: usize) -> usize {
    field_at(later, AT_NAME_OFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_finds_duplicates_and_lookups() {
        let names: [&[u8]; 4] = [b"a", b"bb", b"c", b"bb"];
        let mut scratch = [0u32; 16];
        let mut t = Table::new(&mut scratch, 4).unwrap();
        let dup = find_duplicate_hashed(&mut t, 4, 7, |i| names[i]);
        assert_eq!(dup, Some((1, 3)));
        assert_eq!(find_duplicate_quadratic(4, |i| names[i]), Some((1, 3)));
        assert_eq!(find_duplicate_quadratic(3, |i| names[i]), None);
    }

    #[test]
    fn small_scratch_is_refused() {
        let mut scratch = [0u32; 7];
        assert!(Table::new(&mut scratch, 4).is_none());
        assert_eq!(scratch_len(4), 8);
        assert_eq!(scratch_len(0), 0);
    }

    #[test]
    fn lookups_probe_past_collisions() {
        let names: [&[u8]; 3] = [b"x", b"y", b"z"];
        let mut scratch = [0u32; 8];
        let mut t = Table::new(&mut scratch, 3).unwrap();
        assert_eq!(find_duplicate_hashed(&mut t, 3, 0, |i| names[i]), None);
        let f = t.freeze();
        for (i, n) in names.iter().enumerate() {
            assert_eq!(f.find(n, 0, |k| names[k]), Some(i));
        }
        assert_eq!(f.find(b"w", 0, |k| names[k]), None);
    }
}
