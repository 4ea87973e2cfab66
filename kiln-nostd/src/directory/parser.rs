//! [`Parser`]: the caps, the name scratch and the seed a block is checked
//! with, and the entry points that check one. The steps themselves are
//! [`steps`](crate::steps)'; every one runs before a [`Directory`] is
//! returned, so no view handed out afterwards can point outside the buffer.

use crate::accept::PLAIN;
use crate::directory::Limits;
use crate::directory::{Directory, NameIndex};
use crate::error::{fail, Result, Rule};
use crate::names;
use crate::steps::{check_block, Checks, ONE_WALK};

/// Checks directory blocks with configurable caps and optional name scratch.
///
/// Without scratch, name uniqueness compares every pair of names (no memory,
/// quadratic time). With [`Parser::scratch`] of at least
/// [`scratch_len`](crate::directory::scratch_len)`(tensor_count)` slots, it uses a hash
/// table in that memory (linear expected time), and [`Parser::parse_indexed`]
/// hands the filled table back as a [`NameIndex`].
///
/// ```
/// # let block = kiln_nostd::wire::EMPTY_BLOCK;
/// use kiln_nostd::{Limits, Parser};
/// let mut scratch = [0u32; 64];
/// let dir = Parser::new()
///     .limits(Limits::DEFAULT.with_count_cap(1024))
///     .scratch(&mut scratch)
///     .parse(&block)?;
/// assert_eq!(dir.len(), 0);
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Debug)]
pub struct Parser<'s> {
    limits: Limits,
    scratch: Option<&'s mut [u32]>,
    seed: u64,
    /// Takes the plain-descriptor fast path where it applies (see [`PLAIN`]);
    /// tests turn it off to compare the two paths.
    plain: bool,
    /// Accepts with one walk (see [`ONE_WALK`]); tests turn it off to run
    /// the bare-metal path, the step-by-step checks alone, on the host.
    one_walk: bool,
}

impl Default for Parser<'_> {
    fn default() -> Self {
        Parser::new()
    }
}

impl<'s> Parser<'s> {
    /// Default caps (16,777,216), no scratch.
    #[must_use]
    pub const fn new() -> Self {
        Parser { limits: Limits::DEFAULT, scratch: None, seed: 0, plain: PLAIN, one_walk: ONE_WALK }
    }

    /// Uses these caps.
    #[must_use]
    pub const fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Uses `scratch` for the name table. Too small a scratch is ignored
    /// (the quadratic check runs instead), so this never changes a result.
    #[must_use]
    pub fn scratch(mut self, scratch: &'s mut [u32]) -> Self {
        self.scratch = Some(scratch);
        self
    }

    /// Seeds the name hash, so input crafted against the default seed cannot
    /// force every name into one probe chain. Results do not depend on it.
    #[must_use]
    pub const fn hash_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The caps this parser checks against.
    #[doc(hidden)]
    pub const fn caps(&self) -> Limits {
        self.limits
    }

    /// A parser with the same settings that borrows this one's scratch, for
    /// a caller that parses the same buffer twice (a shard's prefix, then
    /// its whole block) with one name table's room.
    pub fn reborrow(&mut self) -> Parser<'_> {
        Parser { scratch: self.scratch.as_deref_mut(), ..*self }
    }

    /// What [`steps`](crate::steps) checks with: `walk` is the accepting
    /// walk (with the plain fast path or not) where it is linked, else the
    /// step-by-step checks alone.
    fn checks(self) -> Checks<'s> {
        let walk = if ONE_WALK && self.one_walk { Some(self.plain) } else { None };
        Checks { limits: self.limits, scratch: self.scratch, seed: self.seed, walk }
    }

    /// Checks a standalone block: `buf` must hold exactly one block (step 12).
    /// A model file is FRAME at byte 0, the directory magic's rule, and the
    /// message names `kiln_model::open` ([`Error::hint`](crate::Error::hint)).
    pub fn parse<'a>(self, buf: &'a [u8]) -> Result<Directory<'a>> {
        self.run(buf, 0, true).map(|(dir, _)| dir)
    }

    /// Checks a block that starts at `start` inside `buf` and may be followed
    /// by other data (a `tensors` field). Error offsets are absolute in `buf`;
    /// [`Directory::end`] is where the next field starts.
    pub fn parse_at<'a>(self, buf: &'a [u8], start: usize) -> Result<Directory<'a>> {
        self.run(buf, start, false).map(|(dir, _)| dir)
    }

    /// Like [`parse`](Self::parse), and keeps the name table for O(1) lookups.
    /// Without (enough) scratch the index falls back to a linear search.
    pub fn parse_indexed<'a>(self, buf: &'a [u8]) -> Result<(Directory<'a>, NameIndex<'a, 's>)> {
        let seed = self.seed;
        let (dir, table) = self.run(buf, 0, true)?;
        Ok((dir, NameIndex::from_parts(dir, table, seed)))
    }

    /// The caps, scratch and seed, for a check composed outside the crate
    /// (a shard's prefix against its manifest, a manifest's names, in `kiln-model`).
    pub fn into_parts(self) -> (Limits, Option<&'s mut [u32]>, u64) {
        (self.limits, self.scratch, self.seed)
    }

    fn run<'a>(
        self,
        buf: &'a [u8],
        start: usize,
        standalone: bool,
    ) -> Result<(Directory<'a>, Option<names::LookupTable<'s>>)> {
        let Some(block) = buf.get(start..) else {
            return fail(Rule::HeaderTruncated, buf.len());
        };
        let (header, regions, table) = check_block(block, self.checks(), standalone).map_err(|e| e.shifted(start))?;
        Ok((Directory::from_checked(buf, start, header, regions), table))
    }
}

// The convenience entry point lives with the parser that does the work, so
// the views never depend on the checks.
impl<'a> Directory<'a> {
    /// Checks a standalone block with the default caps. See [`Parser`] for options.
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        Parser::new().parse(buf)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::error::Rule;
    use crate::wire::header::{DESCRIPTOR_LEN, HEADER_LEN};
    use crate::{
        writer::{QuantSpec, TensorRef},
        DType, TensorSpec, Writer,
    };
    use std::vec;
    use std::vec::Vec;

    /// Blocks that exercise both paths: all plain, and plain runs broken by
    /// a bool, a packed, an opaque and a quantized tensor; named and unnamed.
    fn blocks() -> Vec<Vec<u8>> {
        let f32s = [0u8; 24];
        let bools = [1u8, 0, 1];
        let nibbles = [0x21u8, 0x03];
        let scales = [0u8; 2];
        let plain = |n: Option<&'static str>| {
            let t = TensorSpec::new(DType::F32, &[2, 3], &f32s);
            n.map_or(t, |n| t.named(n))
        };
        let sets: Vec<Vec<TensorSpec<'_>>> = vec![
            vec![plain(Some("a")), plain(Some("bb")), TensorSpec::new(DType::U8, &[3], &bools).named("c")],
            vec![plain(None), TensorSpec::new(DType::U16, &[0, 4], &[]), plain(None)],
            vec![
                plain(Some("w")),
                TensorSpec::new(DType::Bool, &[3], &bools).named("flags"),
                plain(Some("x")),
                TensorSpec::new(DType::U4, &[3], &nibbles).named("q").quantized(QuantSpec::Scales {
                    axis: 0,
                    group_size: 2,
                    scale: TensorRef::Name("s"),
                }),
                TensorSpec::new(DType::E8M0, &[2], &scales).named("s"),
                TensorSpec::opaque(4096, "blk", 4, &[8], &[0; 8]).named("o"),
                plain(Some("y")),
            ],
        ];
        sets.iter()
            .map(|specs| {
                let mut out = vec![0u8; Writer::new().encoded_len(specs).unwrap()];
                Writer::new().write(specs, &mut out).unwrap();
                out
            })
            .collect()
    }

    fn parse(bytes: &[u8], plain: bool, scratch: bool) -> Result<usize> {
        let mut s = [0u32; 64];
        let p = Parser { plain, ..Parser::new() };
        let p = if scratch { p.scratch(&mut s) } else { p };
        p.parse(bytes).map(|d| d.len())
    }

    /// The bare-metal path: the step-by-step checks alone. An accepted
    /// block's name index finds every tensor.
    fn parse_steps(bytes: &[u8], scratch: bool) -> Result<usize> {
        let mut s = [0u32; 64];
        let p = Parser { one_walk: false, ..Parser::new() };
        let p = if scratch { p.scratch(&mut s) } else { p };
        let (dir, index) = p.parse_indexed(bytes)?;
        assert_eq!(index.is_hashed(), scratch && dir.iter().any(|t| t.name().is_some()));
        for t in dir.iter() {
            if let Some(n) = t.name() {
                assert_eq!(index.get(n).map(|f| f.index()), Some(t.index()));
            }
        }
        Ok(dir.len())
    }

    /// The fast path is an optimisation only: on every single-byte change
    /// and truncation of the blocks above, it gives exactly the result
    /// (accept, or the same code, rule and offset) of the rule-by-rule path.
    /// Debug builds also assert, descriptor by descriptor, that the
    /// rule-by-rule path accepts whatever the fast path accepted.
    #[test]
    fn fast_path_agrees_with_the_rules_on_every_mutation() {
        // Interpreted under Miri: a sample (every 61st byte, two values).
        let (stride, values): (usize, &[u8]) = if cfg!(miri) {
            (61, &[0x00, 0xff])
        } else {
            (1, &[0x00, 0x01, 0x02, 0x3f, 0x40, 0x7f, 0x80, 0xc0, 0xfe, 0xff])
        };
        let mut compared = 0;
        for block in blocks() {
            assert!(parse(&block, true, true).is_ok());
            for at in (0..block.len()).step_by(stride) {
                for &v in values {
                    let mut m = block.clone();
                    m[at] = v;
                    for scratch in [true, false] {
                        let want = parse(&m, false, scratch);
                        assert_eq!(parse(&m, true, scratch), want, "byte {at} = {v:#x}");
                        assert_eq!(parse_steps(&m, scratch), want, "steps only: byte {at} = {v:#x}");
                        compared += 1;
                    }
                }
            }
            for len in (0..block.len()).step_by(stride) {
                let want = parse(&block[..len], false, true);
                assert_eq!(parse(&block[..len], true, true), want, "len {len}");
                assert_eq!(parse_steps(&block[..len], true), want, "steps only: len {len}");
            }
        }
        assert!(compared > 10_000 / (stride * stride), "{compared}");
    }

    /// A duplicate inside a plain run is reported as the rules report it,
    /// and a reserved byte in a later descriptor still wins over it.
    #[test]
    fn duplicates_in_a_plain_run() {
        let data = [0u8; 4];
        let specs: Vec<_> = ["a", "b", "c"].iter().map(|n| TensorSpec::new(DType::F32, &[1], &data).named(n)).collect();
        let mut block = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
        Writer::new().write(&specs, &mut block).unwrap();
        // Rename "c" to "a" in the heap (names start after 3 descriptors).
        let heap = HEADER_LEN + 3 * DESCRIPTOR_LEN;
        block[heap + 2] = b'a';
        let dup = parse(&block, true, true).unwrap_err();
        assert_eq!(dup.rule(), Rule::DuplicateName);
        assert_eq!(dup, parse(&block, false, true).unwrap_err());
        assert_eq!(dup, parse(&block, true, false).unwrap_err());
        block[HEADER_LEN + 2 * DESCRIPTOR_LEN + 3] = 1; // reserved byte of descriptor 2
        assert_eq!(parse(&block, true, true).unwrap_err().rule(), Rule::DescriptorReserved);
    }
}
