//! Name heap rules (check step 8) and name uniqueness.
//!
//! The heap is the tensor names in descriptor order, then the layout names in
//! descriptor order, with no gap. Uniqueness is checked with an open-addressing
//! table in caller scratch (linear expected time) or, without scratch, by
//! comparing every pair (quadratic, no memory).

use crate::bytes::{usize_from_u32, usize_sat};
use crate::error::{fail, Result, Rule};
use crate::wire::descriptor::Descriptors;
use crate::wire::descriptor::{field_at, RawDescriptor, AT_LAYOUT_OFF, AT_NAME_LEN, AT_NAME_OFF, NO_NAME};
use crate::wire::header::AT_FLAGS;

/// The heap and where it sits in the block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Heap<'a> {
    pub bytes: &'a [u8],
    /// Block offset of heap byte 0.
    pub at: usize,
    /// The whole heap as text, when it is valid UTF-8 (the usual case). A
    /// name is then valid exactly when it starts and ends on a character
    /// boundary, so one pass over the heap replaces one pass per name.
    pub text: Option<&'a str>,
}

impl<'a> Heap<'a> {
    /// The heap `bytes` at block offset `at`. The whole-heap pass is for
    /// hosts and browsers with many names; bare-metal targets check name by
    /// name, which links less code (the per-name path also serves any heap
    /// that is not UTF-8).
    pub fn new(bytes: &'a [u8], at: usize) -> Self {
        let text = if cfg!(any(target_pointer_width = "64", target_arch = "wasm32")) {
            core::str::from_utf8(bytes).ok()
        } else {
            None
        };
        Heap { bytes, at, text }
    }

    /// The `len` bytes at heap offset `off` as text, if inside and UTF-8.
    pub fn str(&self, off: u16, len: u16) -> Option<&'a str> {
        let start = usize::from(off);
        let end = start.checked_add(usize::from(len))?;
        match self.text {
            Some(t) => t.get(start..end),
            None => core::str::from_utf8(self.bytes.get(start..end)?).ok(),
        }
    }

    /// The `len` bytes at heap offset `off`, if inside.
    pub fn slice(&self, off: u16, len: u16) -> Option<&'a [u8]> {
        let start = usize::from(off);
        self.bytes.get(start..start.checked_add(usize::from(len))?)
    }

    /// The name bytes of descriptor `raw` (empty when unnamed).
    #[inline]
    pub fn name(&self, raw: &RawDescriptor) -> &'a [u8] {
        let (off, len) = raw.name_field();
        // A name is compared only after step 8's name checks put it in the heap: never empty by fallback.
        self.slice(off, len).unwrap_or(&[])
    }
}

/// Walks the name heap in descriptor order, one descriptor at a time.
///
/// The reference's order inside step 8 (spec/kiln-v2.md section 14) is per
/// descriptor: its name rules (uniqueness last), then its layout rules, so
/// a layout fault of descriptor 0 comes before a name fault of descriptor 1.
#[derive(Clone, Copy, Default)]
pub(crate) struct NameCursor {
    /// Heap offset where the next name must start.
    pub cursor: usize,
    /// Heap offset where the next layout name must start, once a layout name
    /// was seen: the raw sum of every descriptor's name_len, then past each
    /// layout name.
    pub layout_cursor: Option<usize>,
}

impl NameCursor {
    /// Step 8 name rules for descriptor `i`: the name matches the flag,
    /// starts at the cursor, fits, and is UTF-8.
    pub fn check(&mut self, heap: Heap<'_>, raw: &RawDescriptor, i: usize, names_flag: bool) -> Result<()> {
        let (name_off, name_len) = raw.name_field();
        if !names_flag {
            if name_len != 0 || name_off != NO_NAME {
                return fail(Rule::NameWithoutFlag, field_at(i, AT_NAME_OFF));
            }
            return Ok(());
        }
        if name_len == 0 {
            return fail(Rule::MissingName, field_at(i, AT_NAME_LEN));
        }
        self.cursor = take(heap, self.cursor, name_off, name_len, i, AT_NAME_OFF, Rule::NameUtf8)?;
        Ok(())
    }

    /// Step 8 layout rules for descriptor `i`, after its name rules: an
    /// absent layout name (layout_len 0) has layout_off 0xFFFF; a present one
    /// starts where the previous layout name ended (the first one right after
    /// all tensor names: `names_total`, computed on first use), fits, and is UTF-8.
    pub fn check_layout(
        &mut self,
        heap: Heap<'_>,
        raw: &RawDescriptor,
        i: usize,
        names_total: impl FnOnce() -> usize,
    ) -> Result<()> {
        let (off, len) = raw.layout_field();
        if len == 0 {
            if off != NO_NAME {
                return fail(Rule::LayoutFieldMismatch, field_at(i, AT_LAYOUT_OFF));
            }
            return Ok(());
        }
        let cursor = match self.layout_cursor {
            Some(c) => c,
            None => names_total(),
        };
        self.layout_cursor = Some(take(heap, cursor, off, len, i, AT_LAYOUT_OFF, Rule::LayoutUtf8)?);
        Ok(())
    }

    /// The heap range `check` reads for descriptor `raw`'s
    /// name (UTF-8): `None` when its verdict needs no heap byte (no name, or
    /// a fault its fields show). The incremental validator waits for these
    /// bytes before it judges the name.
    pub fn name_span(&self, heap: Heap<'_>, raw: &RawDescriptor, names_flag: bool) -> Option<(usize, usize)> {
        let (off, len) = raw.name_field();
        if !names_flag || len == 0 {
            return None;
        }
        span(heap, self.cursor, off, len)
    }

    /// The heap range `check_layout` reads, as
    /// `name_span` for the name.
    pub fn layout_span(
        &self,
        heap: Heap<'_>,
        raw: &RawDescriptor,
        names_total: impl FnOnce() -> usize,
    ) -> Option<(usize, usize)> {
        let (off, len) = raw.layout_field();
        if len == 0 {
            return None;
        }
        span(heap, self.layout_cursor.unwrap_or_else(names_total), off, len)
    }

    /// Step 8, last rule: the names and layout names fill the heap exactly.
    pub fn check_heap_total(&self, heap: Heap<'_>) -> Result<()> {
        // Fallback: no layout names: the heap ends after the tensor names.
        let end = self.layout_cursor.unwrap_or(self.cursor);
        if end != heap.bytes.len() {
            return fail(Rule::HeapHole, heap.at.saturating_add(end));
        }
        Ok(())
    }
}

/// Step 8c descriptor by descriptor (its name rules and uniqueness, then its
/// layout rules), then step 8d: the order of spec/kiln-v2.md section 14.
///
/// Resumable: given only the first `known` bytes of the heap, it stops where
/// the next rule would read a byte that is not there yet, after judging the
/// part of that entry which is (so the incremental validator reports a name
/// fault as soon as the bytes show it). Given the whole heap it runs through.
#[derive(Clone, Copy, Default)]
pub(crate) struct NameWalk {
    /// The next descriptor to judge.
    next: usize,
    /// Its name rules and uniqueness passed; its layout rules are next.
    named: bool,
    cursor: NameCursor,
}

impl NameWalk {
    /// True before the walk has put any name into a table.
    pub fn at_start(&self) -> bool {
        self.next == 0 && !self.named
    }

    /// Walks on over `descs` as far as the first `known` heap bytes allow.
    /// Uniqueness uses `table` (in descriptor order), or compares every
    /// earlier name without one. Inlined: the parser's copy, given the
    /// whole heap, then carries none of the partial-heap code, and no frame
    /// of its own under the caller's (firmware stack budget: 1 KiB).
    #[inline(always)]
    pub fn walk(
        &mut self,
        descs: &Descriptors<'_>,
        heap: Heap<'_>,
        known: usize,
        names_flag: bool,
        mut table: Option<&mut NameTable<'_>>,
        seed: u64,
    ) -> Result<()> {
        let name_of = |i| heap.name(descs.raw(i));
        let names_total = || names_total(descs.raws);
        // The whole heap (the parser's case) never waits for a byte.
        let partial = known < heap.bytes.len();
        while let Some(raw) = descs.raws.get(self.next) {
            let i = self.next;
            if !self.named {
                if partial {
                    if let Some(verdict) = self.arrived(heap, raw, known, names_flag, None) {
                        return verdict;
                    }
                }
                self.cursor.check(heap, raw, i, names_flag)?;
                if names_flag {
                    let repeated = match table.as_deref_mut() {
                        Some(t) => t.insert(i, seed, name_of).is_some(),
                        None => (0..i).any(|k| same_bytes(name_of(k), name_of(i))),
                    };
                    if repeated {
                        return fail(Rule::DuplicateName, duplicate_at(i));
                    }
                }
                self.named = true;
            }
            if partial {
                if let Some(verdict) = self.arrived(heap, raw, known, names_flag, Some(descs.raws)) {
                    return verdict;
                }
            }
            self.cursor.check_layout(heap, raw, i, names_total)?;
            self.named = false;
            self.next = self.next.saturating_add(1);
        }
        self.cursor.check_heap_total(heap)
    }

    /// Before descriptor `raw`'s name (or, given every descriptor, its
    /// layout name) is judged on a partial heap: `Some` verdict when the
    /// entry's bytes are not all in yet (a fault its first bytes show, or
    /// `Ok` to wait), `None` when the rules can run. Kept out of
    /// `walk`'s frame: firmware parses with the walk, and
    /// its stack budget is 1 KiB.
    #[cold]
    #[inline(never)]
    fn arrived(
        &self,
        heap: Heap<'_>,
        raw: &RawDescriptor,
        known: usize,
        names_flag: bool,
        layout_of: Option<&[RawDescriptor]>,
    ) -> Option<Result<()>> {
        let (span, utf8) = match layout_of {
            None => (self.cursor.name_span(heap, raw, names_flag), Rule::NameUtf8),
            Some(raws) => (self.cursor.layout_span(heap, raw, || names_total(raws)), Rule::LayoutUtf8),
        };
        span.filter(|s| s.1 > known).map(|span| check_utf8_start(heap, span, known, utf8))
    }
}

/// The raw sum of every descriptor's name_len field (where the first layout
/// name must start), saturating.
pub(crate) fn names_total(raws: &[RawDescriptor]) -> usize {
    let sum = raws.iter().fold(0u64, |acc, r| acc.saturating_add(u64::from(r.name_field().1)));
    usize_sat(sum)
}

/// Step 8: a name flag on an empty directory.
pub(crate) fn check_flag_on_empty(count: usize, names_flag: bool) -> Result<()> {
    if names_flag && count == 0 {
        return fail(Rule::NameFlagOnEmpty, AT_FLAGS);
    }
    Ok(())
}

/// One heap entry: it starts at `cursor`, fits, and is UTF-8. Returns the new cursor.
#[cfg_attr(target_pointer_width = "64", inline)]
fn take(heap: Heap<'_>, cursor: usize, off: u16, len: u16, i: usize, field: usize, utf8: Rule) -> Result<usize> {
    if usize::from(off) != cursor {
        return fail(Rule::HeapOrder, field_at(i, field));
    }
    let Some(bytes) = heap.slice(off, len) else {
        return fail(Rule::HeapOverrun, field_at(i, field.saturating_add(2)));
    };
    // The whole-heap text answers for a name on a character boundary; any
    // other name is checked (once) on its own bytes.
    let on_boundary = heap.text.is_some_and(|t| t.get(cursor..cursor.saturating_add(bytes.len())).is_some());
    if !on_boundary {
        if let Err(e) = core::str::from_utf8(bytes) {
            return fail(utf8, heap.at.saturating_add(cursor).saturating_add(e.valid_up_to()));
        }
    }
    Ok(cursor.saturating_add(bytes.len()))
}

/// The bytes `take` reads for an entry: those of the entry, when it starts
/// at the cursor and fits the heap (else its fault needs no byte).
fn span(heap: Heap<'_>, cursor: usize, off: u16, len: u16) -> Option<(usize, usize)> {
    let start = usize::from(off);
    let end = start.checked_add(usize::from(len))?;
    (start == cursor && end <= heap.bytes.len()).then_some((start, end))
}

/// Step 8's UTF-8 rule on the part of a heap entry that has arrived (heap
/// bytes below `known`; `span` from `NameCursor::name_span` or
/// `NameCursor::layout_span`): the fault those bytes show whatever
/// follows (an invalid sequence, not one cut short), at the offset
/// `take` reports for the whole entry.
fn check_utf8_start(heap: Heap<'_>, span: (usize, usize), known: usize, utf8: Rule) -> Result<()> {
    let (start, end) = span;
    // An entry with no byte in yet has nothing to judge.
    let bytes = heap.bytes.get(start..end.min(known)).unwrap_or(&[]);
    match core::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_some() => fail(utf8, heap.at.saturating_add(start).saturating_add(e.valid_up_to())),
        _ => Ok(()),
    }
}

/// A hash for name bytes. Word-at-a-time multiply-rotate: fast for short
/// names and well mixed; `seed` lets a caller defeat precomputed collisions.
#[cfg_attr(target_pointer_width = "64", inline)]
pub(crate) fn name_hash(bytes: &[u8], seed: u64) -> u64 {
    // wasm32 has 64-bit words and loads, and thousands of names: the word
    // hash (a directory's check there 0.9x the time of a byte-wise one with
    // names like "t.1234", 0.75-0.85x with a transformer's long names).
    if cfg!(all(not(target_pointer_width = "64"), not(target_arch = "wasm32"))) {
        // Microcontrollers: byte-wise FNV-1a, the smallest code that mixes well.
        return bytes
            .iter()
            .fold(seed ^ 0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    }
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = seed ^ crate::bytes::u64_from(bytes.len()).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        // Fallback not taken: chunks_exact(8) yields 8-byte chunks: never 0 by fallback.
        let w = crate::bytes::u64_at(c, 0).unwrap_or(0);
        h = (h ^ w).wrapping_mul(K).rotate_left(31);
    }
    (h ^ tail_word(chunks.remainder())).wrapping_mul(K)
}

/// The last 0 to 7 bytes as one word, from overlapping reads (no byte loop,
/// no copy through memory). Injective for a given length, which the hash
/// mixes in separately.
#[inline]
fn tail_word(rem: &[u8]) -> u64 {
    // Fallback not taken: i < rem.len() at every call: never 0 by fallback.
    let byte = |i: usize| u64::from(rem.get(i).copied().unwrap_or(0));
    let len = rem.len();
    if len >= 4 {
        // Fallback not taken: len >= 4: both words are there.
        let lo = crate::bytes::u32_at(rem, 0).unwrap_or(0);
        let hi = crate::bytes::u32_at(rem, len.wrapping_sub(4)).unwrap_or(0);
        u64::from(lo) | (u64::from(hi) << 32)
    } else if len > 0 {
        byte(0) | (byte(len / 2) << 8) | (byte(len.wrapping_sub(1)) << 16)
    } else {
        0
    }
}

/// Byte equality with short names compared in registers: most tensor names
/// are under 16 bytes, and a call into `memcmp` costs more than the compare.
#[inline]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if cfg!(not(target_pointer_width = "64")) {
        return a == b; // smaller code where unaligned word loads are not cheap
    }
    let len = a.len();
    if len != b.len() {
        return false;
    }
    match len {
        0..=7 => tail_word(a) == tail_word(b),
        8..=16 => {
            let last = len.wrapping_sub(8);
            crate::bytes::u64_at(a, 0) == crate::bytes::u64_at(b, 0)
                && crate::bytes::u64_at(a, last) == crate::bytes::u64_at(b, last)
        }
        _ => a == b,
    }
}

/// Home slot for a hash, given `shift` = 64 - log2(slots): the top bits.
/// The hash ends in a multiply, and only a product's top bits depend on
/// every input bit.
#[inline]
fn slot_of(h: u64, shift: u32) -> usize {
    // Fallback: a one-slot table has shift 64, so every hash takes slot 0; the result fits usize.
    usize::try_from(h.checked_shr(shift).unwrap_or(0)).unwrap_or(0)
}

/// The 32 hash bits kept beside each index, so a probe only reads a
/// descriptor and its name when the fingerprints already agree. The high
/// half is folded in: the low bits of a product miss the high input bits.
#[inline]
fn fingerprint(h: u64) -> u32 {
    // Fallback not taken: masked to 32 bits: the conversion cannot fail.
    u32::try_from((h ^ (h >> 32)) & 0xFFFF_FFFF).unwrap_or(0)
}

/// Slots a table for `count` names uses: a power of two at least 1.5 times the count.
const fn slots_for(count: usize) -> Option<usize> {
    match slots_and_log2(count) {
        Some((slots, _)) => Some(slots),
        None => None,
    }
}

/// `slots_for` and its log2. Small cores (those of `bytes::le32`)
/// double in a loop, at most 64 rounds once per table: Cortex-M0 has no
/// count-leading-zeros instruction and would link a 108-byte routine.
const fn slots_and_log2(count: usize) -> Option<(usize, u32)> {
    let Some(n) = count.checked_add(count / 2) else { return None };
    let Some(n) = n.checked_add(1) else { return None };
    if !cfg!(all(target_os = "none", not(target_has_atomic = "32"))) {
        return match n.checked_next_power_of_two() {
            Some(p) => Some((p, p.trailing_zeros())),
            None => None,
        };
    }
    pow2_by_doubling(n)
}

/// The smallest power of two at least `n`, and its log2, in a loop.
const fn pow2_by_doubling(n: usize) -> Option<(usize, u32)> {
    let (mut slots, mut log2) = (1usize, 0u32);
    while slots < n {
        slots = match slots.checked_mul(2) {
            Some(s) => s,
            None => return None,
        };
        log2 = log2.saturating_add(1);
    }
    Some((slots, log2))
}

/// Scratch `u32`s a name table for `count` tensors needs (two per slot).
/// A `const fn`, so a fixed scratch array can be sized at compile time.
///
/// ```
/// const SCRATCH: usize = kiln_nostd::directory::scratch_len(10_000);
/// assert_eq!(SCRATCH, 2 * 16_384);
/// ```
pub const fn scratch_len(count: u32) -> usize {
    table_words(usize_from_u32(count))
}

/// `scratch_len` for a `usize` count (a `const` capacity). `usize::MAX`
/// when it overflows: no scratch is that large, so no table is built.
pub const fn table_words(count: usize) -> usize {
    match slots_for(count) {
        Some(slots) => slots.saturating_mul(2),
        None => usize::MAX,
    }
}

/// An open-addressing table in caller memory: each slot is
/// `[index + 1, fingerprint]`, 0 marking an empty slot.
pub struct NameTable<'s> {
    slots: &'s mut [[u32; 2]],
    mask: usize,
    /// 64 - log2(slots), for `slot_of`.
    shift: u32,
}

impl<'s> NameTable<'s> {
    /// A cleared table, or `None` when the scratch is too small for `count`.
    pub fn new(scratch: &'s mut [u32], count: usize) -> Option<NameTable<'s>> {
        crate::bytes::clear(scratch.get_mut(..slots_for(count)?.checked_mul(2)?)?);
        NameTable::resume(scratch, count)
    }

    /// The table `new` made in `scratch` for `count` names,
    /// holding what was inserted since: for a check that goes on as more
    /// names arrive. Inlined, so `new` is one function.
    #[inline(always)]
    pub fn resume(scratch: &'s mut [u32], count: usize) -> Option<NameTable<'s>> {
        let (want, log2) = slots_and_log2(count)?;
        let words = scratch.get_mut(..want.checked_mul(2)?)?;
        let slots: &mut [[u32; 2]] = bytemuck::try_cast_slice_mut(words).ok()?;
        Some(NameTable { slots, mask: want.wrapping_sub(1), shift: 64u32.saturating_sub(log2) })
    }

    /// Inserts descriptor `index`, whose name is `name_of(index)`; returns
    /// the index of an earlier tensor with the same name instead, if there is one.
    pub fn insert<'n>(&mut self, index: usize, seed: u64, name_of: impl Fn(usize) -> &'n [u8]) -> Option<usize> {
        let name = name_of(index);
        let h = name_hash(name, seed);
        let (fp, mut slot) = (fingerprint(h), slot_of(h, self.shift));
        // There are more slots than tensors, so an empty slot is always found.
        for _ in 0..self.slots.len() {
            let cell = self.slots.get_mut(slot)?;
            match usize::try_from(cell[0]).ok()?.checked_sub(1) {
                None => {
                    *cell = [u32::try_from(index.checked_add(1)?).ok()?, fp];
                    return None;
                }
                Some(other) if cell[1] == fp && same_bytes(name_of(other), name) => return Some(other),
                Some(_) => slot = slot.wrapping_add(1) & self.mask,
            }
        }
        None
    }

    /// A table in `scratch` when there are names to check and it is large
    /// enough; otherwise no table, and the scratch is handed back unused.
    pub fn claim(
        scratch: Option<&'s mut [u32]>,
        count: usize,
        has_names: bool,
    ) -> (Option<NameTable<'s>>, Option<&'s mut [u32]>) {
        NameTable::claim_as(scratch, count, has_names, true)
    }

    /// `claim`, or with `clear` false a table that keeps
    /// what it held (`resume`). Inlined, so the parser's
    /// `claim` (a constant `clear`) is as small as a function of its own.
    #[inline(always)]
    pub fn claim_as(
        scratch: Option<&'s mut [u32]>,
        count: usize,
        has_names: bool,
        clear: bool,
    ) -> (Option<NameTable<'s>>, Option<&'s mut [u32]>) {
        let fits = |s: &[u32]| slots_for(count).and_then(|n| n.checked_mul(2)).is_some_and(|n| n <= s.len());
        match scratch {
            Some(s) if has_names && fits(s) => {
                (if clear { NameTable::new(s, count) } else { NameTable::resume(s, count) }, None)
            }
            other => (None, other),
        }
    }

    /// Gives the table's memory back as plain scratch (its contents are left as they are).
    pub fn into_scratch(self) -> &'s mut [u32] {
        bytemuck::cast_slice_mut(self.slots)
    }

    /// Freezes the table for lookups.
    pub fn freeze(self) -> LookupTable<'s> {
        LookupTable { slots: self.slots, mask: self.mask, shift: self.shift }
    }
}

/// A filled table, read-only.
#[derive(Clone, Copy, Debug)]
pub struct LookupTable<'s> {
    slots: &'s [[u32; 2]],
    mask: usize,
    shift: u32,
}

impl LookupTable<'_> {
    /// The index of the tensor named `name`, if any.
    #[cfg_attr(target_pointer_width = "64", inline)]
    pub fn find<'n>(&self, name: &[u8], seed: u64, name_of: impl Fn(usize) -> &'n [u8]) -> Option<usize> {
        let h = name_hash(name, seed);
        let (fp, mut slot) = (fingerprint(h), slot_of(h, self.shift));
        for _ in 0..self.slots.len() {
            let [stored, stored_fp] = *self.slots.get(slot)?;
            let index = usize::try_from(stored).ok()?.checked_sub(1)?;
            if stored_fp == fp && same_bytes(name_of(index), name) {
                return Some(index);
            }
            slot = slot.wrapping_add(1) & self.mask;
        }
        None
    }
}

/// Uniqueness without scratch: every pair, lengths compared first.
/// Returns (earlier, later) for the first duplicate in descriptor order.
pub(crate) fn find_duplicate_quadratic<'n>(
    count: usize,
    name_of: impl Fn(usize) -> &'n [u8],
) -> Option<(usize, usize)> {
    for j in 1..count {
        let b = name_of(j);
        for i in 0..j {
            if same_bytes(name_of(i), b) {
                return Some((i, j));
            }
        }
    }
    None
}

/// The block offset to report for a duplicate found at descriptor `later`.
pub(crate) fn duplicate_at(later: usize) -> usize {
    field_at(later, AT_NAME_OFF)
}

#[cfg(test)]
mod tests {
    #[test]
    fn doubling_finds_the_next_power_of_two() {
        for n in (0..5000).chain([usize::MAX / 2, usize::MAX / 2 + 1, usize::MAX / 2 + 2, usize::MAX]) {
            let want = n.checked_next_power_of_two().map(|p| (p, p.trailing_zeros()));
            assert_eq!(super::pow2_by_doubling(n), want, "{n}");
        }
    }

    use super::*;

    #[test]
    fn table_finds_duplicates_and_lookups() {
        let names: [&[u8]; 4] = [b"a", b"bb", b"c", b"bb"];
        let mut scratch = [0u32; 16];
        let mut t = NameTable::new(&mut scratch, 4).unwrap();
        let dup = (0..4).find_map(|j| t.insert(j, 7, |i| names[i]).map(|i| (i, j)));
        assert_eq!(dup, Some((1, 3)));
        assert_eq!(find_duplicate_quadratic(4, |i| names[i]), Some((1, 3)));
        assert_eq!(find_duplicate_quadratic(3, |i| names[i]), None);
    }

    #[test]
    fn small_scratch_is_refused() {
        assert_eq!(scratch_len(4), 16);
        assert_eq!(scratch_len(0), 2);
        let mut scratch = [0u32; 15];
        assert!(NameTable::new(&mut scratch, 4).is_none());
        let mut scratch = [0u32; 16];
        assert!(NameTable::new(&mut scratch, 4).is_some());
    }

    #[test]
    fn short_compare_agrees_with_slice_equality() {
        let words: [&[u8]; 12] = [
            b"",
            b"a",
            b"b",
            b"ab",
            b"ba",
            b"abc",
            b"abcdefg",
            b"abcdefgh",
            b"abcdefgi",
            b"abcdefghijklmnop",
            b"abcdefghijklmnoq",
            b"abcdefghijklmnopq",
        ];
        for x in words {
            for y in words {
                assert_eq!(same_bytes(x, y), x == y, "{x:?} {y:?}");
            }
        }
        assert!(!same_bytes(b"xbcdefghijklmnopq", b"abcdefghijklmnopq"));
    }

    #[test]
    fn tail_words_differ_for_different_tails_of_one_length() {
        extern crate std;
        use std::collections::HashSet;
        for len in 0..8usize {
            let mut seen = HashSet::new();
            // Every tail that differs in one byte from the first.
            for pos in 0..len {
                for v in [1u8, 0x80, 0xff] {
                    let mut t = [0u8; 7];
                    t[pos] = v;
                    assert!(seen.insert(tail_word(&t[..len])), "len {len} pos {pos} v {v}");
                }
            }
        }
    }

    #[test]
    fn lookups_probe_past_collisions() {
        let names: [&[u8]; 3] = [b"x", b"y", b"z"];
        let mut scratch = [0u32; 16];
        let mut t = NameTable::new(&mut scratch, 3).unwrap();
        assert!((0..3).all(|j| t.insert(j, 0, |i| names[i]).is_none()));
        let f = t.freeze();
        for (i, n) in names.iter().enumerate() {
            assert_eq!(f.find(n, 0, |k| names[k]), Some(i));
        }
        assert_eq!(f.find(b"w", 0, |k| names[k]), None);
    }
}
