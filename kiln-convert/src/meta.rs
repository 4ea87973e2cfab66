//! The metadata of a conversion, held compactly and within a budget.
//!
//! The input's own pairs ("user" pairs) live back to back in one arena
//! string (key, value, source type), indexed by 24-byte entries, so a file
//! with 300,000 tiny pairs costs about 300,000 x (24 + its bytes), not a
//! `BTreeMap` node and three allocations per pair. Values are written into
//! the arena as they are converted (GGUF and HK values straight to JSON
//! text), and every byte counts against the budget (`--metadata-budget`,
//! 64 MiB by default) before it is stored: a file whose metadata would
//! exceed it is refused at the key that crosses it.
//!
//! The converter's own keys (`kiln.convert.*`) are kept apart, and user keys
//! in that namespace are moved out of its way ([`Metadata::protect`]), so
//! the two never overwrite each other.

use std::collections::{BTreeMap, HashSet};

use anyhow::{anyhow, bail};
use kiln_nostd::int::{u64_from, usize_from_u32};

/// The default budget: 64 MiB for the whole dictionary.
pub const DEFAULT_BUDGET: u64 = 64 << 20;
/// Bytes charged per pair on top of its text: the 24-byte index entry and the
/// 8 bytes of its two lengths in the written dictionary.
const ENTRY_COST: u64 = 32;

/// The converter's namespace.
pub const NAMESPACE: &str = "kiln.convert.";
/// Where a user key in [`NAMESPACE`] is moved: this prefix + the key.
pub const MOVED: &str = "kiln.convert.input.";

#[derive(Clone, Copy, Debug)]
struct Entry {
    start: usize,
    key: u32,
    val: u32,
    ty: u32,
}

/// What to do with a key the input holds twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dups {
    /// Refuse the input (GGUF keys are unique).
    Refuse,
    /// Keep the last value, with a note (HK, per the HK rulings).
    LastWins,
}

/// Writes one value into the arena, within the budget.
pub struct ValueWriter<'a> {
    arena: &'a mut String,
    limit: usize,
}

impl ValueWriter<'_> {
    /// Appends `s`, or fails when the budget would be exceeded.
    pub fn push_str(&mut self, s: &str) -> anyhow::Result<()> {
        match self.arena.len().checked_add(s.len()) {
            Some(n) if n <= self.limit => {
                self.arena.push_str(s);
                Ok(())
            }
            _ => Err(anyhow!(OverBudget)),
        }
    }
    /// Appends one character (within the budget).
    pub fn push(&mut self, c: char) -> anyhow::Result<()> {
        self.push_str(c.encode_utf8(&mut [0; 4]))
    }
}

/// The budget was exceeded (the caller names the key and the budget).
#[derive(Debug)]
pub struct OverBudget;

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("over the metadata budget")
    }
}

impl std::error::Error for OverBudget {}

/// All metadata of one conversion.
#[derive(Debug)]
pub struct Metadata {
    arena: String,
    user: Vec<Entry>,
    sorted: bool,
    own: BTreeMap<String, String>,
    budget: u64,
}

impl Metadata {
    /// Empty metadata that may take at most `budget` bytes.
    pub fn new(budget: u64) -> Self {
        Metadata { arena: String::new(), user: Vec::new(), sorted: true, own: BTreeMap::new(), budget }
    }

    fn used(&self) -> u64 {
        u64::try_from(self.arena.len()).unwrap_or(u64::MAX).saturating_add(ENTRY_COST.saturating_mul(self.count()))
    }

    fn count(&self) -> u64 {
        u64::try_from(self.user.len()).unwrap_or(u64::MAX)
    }

    fn over(&self, key: &str) -> anyhow::Error {
        anyhow!(
            "metadata key {key:?}: the metadata needs more than the {} byte budget (raise it with --metadata-budget)",
            self.budget
        )
    }

    /// Adds a user pair whose value `f` writes, returning the value's source type.
    pub fn push_with(
        &mut self,
        key: &str,
        f: impl FnOnce(&mut ValueWriter<'_>) -> anyhow::Result<String>,
    ) -> anyhow::Result<()> {
        let start = self.arena.len();
        let room = self.budget.saturating_sub(self.used()).saturating_sub(ENTRY_COST);
        let limit = start.saturating_add(usize::try_from(room).unwrap_or(usize::MAX));
        let mut w = ValueWriter { arena: &mut self.arena, limit };
        let done = w.push_str(key).and_then(|()| {
            let key_end = w.arena.len();
            let ty = f(&mut w)?;
            let val_end = w.arena.len();
            w.push_str(&ty)?;
            Ok((key_end, val_end))
        });
        let (key_end, val_end) = match done {
            Ok(ends) => ends,
            Err(e) => {
                self.arena.truncate(start);
                return Err(if e.is::<OverBudget>() { self.over(key) } else { e });
            }
        };
        let len = |a: usize, b: usize| {
            u32::try_from(b.saturating_sub(a)).map_err(|_| anyhow!("a metadata string above 4 GiB"))
        };
        let entry = Entry {
            start,
            key: len(start, key_end)?,
            val: len(key_end, val_end)?,
            ty: len(val_end, self.arena.len())?,
        };
        if self.sorted && self.user.last().is_some_and(|last| self.key_of(last) > &self.arena[start..key_end]) {
            self.sorted = false;
        }
        self.user.push(entry);
        Ok(())
    }

    /// Adds a user pair with a text value and a source type ("" for none).
    pub fn push(&mut self, key: &str, value: &str, ty: &str) -> anyhow::Result<()> {
        self.push_with(key, |w| {
            w.push_str(value)?;
            Ok(ty.to_string())
        })
    }

    fn key_of(&self, e: &Entry) -> &str {
        let end = e.start.saturating_add(usize_from_u32(e.key));
        self.arena.get(e.start..end).unwrap_or("")
    }

    fn val_of(&self, e: &Entry) -> &str {
        let start = e.start.saturating_add(usize_from_u32(e.key));
        self.arena.get(start..start.saturating_add(usize_from_u32(e.val))).unwrap_or("")
    }

    fn ty_of(&self, e: &Entry) -> &str {
        let start = e.start.saturating_add(usize_from_u32(e.key)).saturating_add(usize_from_u32(e.val));
        self.arena.get(start..start.saturating_add(usize_from_u32(e.ty))).unwrap_or("")
    }

    /// Sorts the user pairs by key bytes and resolves duplicates; returns notes.
    pub fn seal(&mut self, dups: Dups) -> anyhow::Result<Vec<String>> {
        let mut user = std::mem::take(&mut self.user);
        if !self.sorted {
            // Stable: equal keys keep file order, so "last" is the file's last.
            user.sort_by(|a, b| self.key_of(a).as_bytes().cmp(self.key_of(b).as_bytes()));
        }
        let mut notes = Vec::new();
        // Equal keys are adjacent; the later entry's value moves into the kept one.
        let mut refused = None;
        user.dedup_by(|later, kept| {
            if self.key_of(later) != self.key_of(kept) {
                return false;
            }
            if dups == Dups::Refuse {
                refused.get_or_insert_with(|| self.key_of(later).to_string());
            } else if notes.len() < 20 {
                notes.push(format!(
                    "metadata key {:?} appears more than once; the last value is kept",
                    self.key_of(later)
                ));
            }
            std::mem::swap(later, kept);
            true
        });
        if let Some(key) = refused {
            bail!("metadata key {key:?} appears more than once");
        }
        self.user = user;
        self.sorted = true;
        Ok(notes)
    }

    /// Moves user keys in the converter's namespace to `kiln.convert.input.KEY`
    /// (an injective renaming into a part of the namespace the converter
    /// never writes), so nothing the converter writes can overwrite them or
    /// be mistaken for them. Returns one note per moved key.
    pub fn protect(&mut self) -> anyhow::Result<Vec<String>> {
        let hits: Vec<usize> = (self.user.iter().enumerate())
            .filter(|(_, e)| self.key_of(e).starts_with(NAMESPACE))
            .map(|(i, _)| i)
            .collect();
        let mut notes = Vec::new();
        for i in hits {
            let Some(&e) = self.user.get(i) else { continue };
            let (key, val, ty) = (self.key_of(&e).to_string(), self.val_of(&e).to_string(), self.ty_of(&e).to_string());
            let moved = format!("{MOVED}{key}");
            let start = self.arena.len();
            self.push(&moved, &val, &ty)?;
            if let Some(new) = self.user.pop() {
                debug_assert_eq!(new.start, start);
                if let Some(slot) = self.user.get_mut(i) {
                    *slot = new;
                }
            }
            notes.push(format!(
                "metadata key {key:?} is in the converter's namespace ({NAMESPACE}*); kept as {moved:?}"
            ));
        }
        if !notes.is_empty() {
            let mut user = std::mem::take(&mut self.user);
            user.sort_by(|a, b| self.key_of(a).as_bytes().cmp(self.key_of(b).as_bytes()));
            self.user = user;
        }
        Ok(notes)
    }

    /// Removes these user keys.
    pub fn remove_user(&mut self, keys: &HashSet<String>) {
        if keys.is_empty() {
            return;
        }
        let user = std::mem::take(&mut self.user);
        self.user = user.into_iter().filter(|e| !keys.contains(self.key_of(e))).collect();
    }

    /// Sets one of the converter's own keys (in [`NAMESPACE`]).
    pub fn set_own(&mut self, key: &str, value: String) {
        debug_assert!(key.starts_with(NAMESPACE), "{key}");
        self.own.insert(key.to_string(), value);
    }

    /// A user value (after [`seal`](Self::seal)).
    pub fn user(&self, key: &str) -> Option<&str> {
        let i = self.user.binary_search_by(|e| self.key_of(e).as_bytes().cmp(key.as_bytes())).ok()?;
        self.user.get(i).map(|e| self.val_of(e))
    }

    /// A value, own keys first.
    #[cfg(test)]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.own.get(key).map(String::as_str).or_else(|| self.user(key))
    }

    /// Every pair in key-byte order (user pairs sealed first).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        let mut user = self.user.iter().map(|e| (self.key_of(e), self.val_of(e))).peekable();
        let mut own = self.own.iter().map(|(k, v)| (k.as_str(), v.as_str())).peekable();
        std::iter::from_fn(move || match (user.peek(), own.peek()) {
            (Some(u), Some(o)) => {
                if u.0.as_bytes() < o.0.as_bytes() {
                    user.next()
                } else {
                    if u.0 == o.0 {
                        user.next();
                    }
                    own.next()
                }
            }
            (Some(_), None) => user.next(),
            (None, _) => own.next(),
        })
    }

    /// User pairs with their source types, in key order.
    pub fn user_types(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.user.iter().map(|e| (self.key_of(e), self.ty_of(e)))
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// No pairs at all.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// The length of the Frozen `dict<str,str>` encoding.
    pub fn encoded_len(&self) -> u64 {
        self.iter().fold(4u64, |n, (k, v)| {
            n.saturating_add(8).saturating_add(u64_from(k.len())).saturating_add(u64_from(v.len()))
        })
    }

    /// The source types as one JSON object text (key order), within the budget.
    pub fn types_json(&self) -> anyhow::Result<String> {
        let mut out = String::from("{");
        for (k, ty) in self.user_types() {
            if ty.is_empty() {
                continue;
            }
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&super::json::string(k));
            out.push(':');
            out.push_str(&super::json::string(ty));
            if u64::try_from(out.len()).unwrap_or(u64::MAX).saturating_add(self.used()) > self.budget {
                bail!(
                    "the metadata and its source types need more than the {} byte budget (raise it with --metadata-budget)",
                    self.budget
                );
            }
        }
        out.push('}');
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_merged_and_deduplicated() {
        let mut m = Metadata::new(DEFAULT_BUDGET);
        m.push("b", "2", "u8").unwrap();
        m.push("a", "1", "").unwrap();
        m.push("b", "3", "u16").unwrap();
        assert!(m.seal(Dups::LastWins).unwrap()[0].contains("\"b\""));
        m.set_own("kiln.convert.x", "own".into());
        assert_eq!(m.iter().collect::<Vec<_>>(), [("a", "1"), ("b", "3"), ("kiln.convert.x", "own")]);
        assert_eq!(m.types_json().unwrap(), r#"{"b":"u16"}"#);
        assert_eq!(m.encoded_len(), 4 + 10 + 10 + 8 + 14 + 3);
        let mut d = Metadata::new(DEFAULT_BUDGET);
        d.push("k", "1", "").unwrap();
        d.push("k", "2", "").unwrap();
        assert!(d.seal(Dups::Refuse).unwrap_err().to_string().contains("\"k\""));
    }

    #[test]
    fn namespace_keys_are_moved_not_overwritten() {
        let mut m = Metadata::new(DEFAULT_BUDGET);
        m.push("kiln.convert.pad", "x", "string").unwrap();
        m.push("z", "1", "").unwrap();
        m.seal(Dups::Refuse).unwrap();
        let notes = m.protect().unwrap();
        assert_eq!(notes.len(), 1);
        m.set_own("kiln.convert.pad", "   ".into());
        let all: Vec<_> = m.iter().collect();
        assert_eq!(all, [("kiln.convert.input.kiln.convert.pad", "x"), ("kiln.convert.pad", "   "), ("z", "1")]);
        assert!(m.types_json().unwrap().contains("kiln.convert.input.kiln.convert.pad"));
    }

    #[test]
    fn the_budget_is_enforced_per_key() {
        let mut m = Metadata::new(100);
        m.push("a", &"x".repeat(50), "").unwrap();
        let e = m.push("big", &"y".repeat(50), "").unwrap_err().to_string();
        assert!(e.contains("\"big\"") && e.contains("--metadata-budget"), "{e}");
        assert_eq!(m.iter().count(), 1, "the refused pair left nothing behind");
    }
}
