//! The shard planner: which output shard each tensor goes to.
//!
//! The output shards are ranges of the tensor list, in order. A sharded
//! input keeps its shard assignment (a range never holds tensors of two
//! input shards); a shard is split further only where its tensors or their
//! names do not fit one Kiln directory block, or where `--max-shard-size`
//! is exceeded (rulings 13 and 7 of the model decisions):
//!
//! * the names and layout names of one block take at most [`MAX_HEAP`]
//!   bytes (`name_off` is a u16 and 0xFFFF means "no name");
//! * one block holds at most [`MAX_TENSORS`] tensors (the count cap);
//! * with a maximum size, a shard's payload bytes (about its file size) stay
//!   within it, except that a tensor larger than the maximum gets a shard
//!   of its own;
//! * a quantized tensor stays in the same shard as its scale and outer
//!   tensors (a descriptor's `scale_index` is an index inside its block):
//!   the tensors from the first to the last of such a group are never cut.

use std::ops::Range;

use anyhow::bail;
use kiln_nostd::int::u64_from;

use super::model::TensorOut;

/// The most bytes of tensor names plus layout names one block holds.
pub const MAX_HEAP: u64 = 65_535;
/// The most tensors one block holds (the count cap).
pub const MAX_TENSORS: u64 = 16_777_216;

/// What a run of tensors that must not be cut costs a shard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cost {
    heap: u64,
    tensors: u64,
    payload: u64,
}

impl Cost {
    fn of(t: &TensorOut) -> Cost {
        let layout = t.layout.as_ref().map_or(0, |l| u64_from(l.len()));
        Cost { heap: u64_from(t.name.len()).saturating_add(layout), tensors: 1, payload: t.len }
    }
    fn plus(self, o: Cost) -> Cost {
        Cost {
            heap: self.heap.saturating_add(o.heap),
            tensors: self.tensors.saturating_add(o.tensors),
            payload: self.payload.saturating_add(o.payload),
        }
    }
    /// Fits one block.
    fn fits_block(self) -> bool {
        self.heap <= MAX_HEAP && self.tensors <= MAX_TENSORS
    }
    /// Fits one block and the maximum size.
    fn fits(self, max: Option<u64>) -> bool {
        self.fits_block() && max.is_none_or(|m| self.payload <= m)
    }
}

/// For each tensor, the last tensor a quantization link that starts at it
/// reaches (itself when none does): a link between tensors `i < j` joins
/// `i..=j`. A link to a tensor not in the list is left to the writer.
fn link_ends(tensors: &[TensorOut]) -> Vec<usize> {
    let mut end: Vec<usize> = (0..tensors.len()).collect();
    if tensors.iter().all(|t| t.quant.is_none()) {
        return end;
    }
    // Row numbers sorted by name (a word a tensor, not a hash map of names:
    // the table may hold 500,000 tensors).
    let name = |i: usize| tensors.get(i).map_or("", |t| &*t.name);
    let mut by_name: Vec<usize> = (0..tensors.len()).collect();
    by_name.sort_unstable_by(|&a, &b| name(a).cmp(name(b)));
    let find = |n: &str| by_name.binary_search_by(|&i| name(i).cmp(n)).ok().and_then(|k| by_name.get(k).copied());
    for (i, t) in tensors.iter().enumerate() {
        let Some(q) = &t.quant else { continue };
        let linked = std::iter::once(q.scale.as_str()).chain(q.outer.as_deref());
        for j in linked.filter_map(find) {
            if let Some(e) = end.get_mut(i.min(j)) {
                *e = (*e).max(i.max(j));
            }
        }
    }
    end
}

/// The unbreakable runs ("atoms") of the tensor list: overlapping
/// quantization links merge into one run; every other tensor is its own.
fn atoms(tensors: &[TensorOut]) -> anyhow::Result<Vec<Range<usize>>> {
    let ends = link_ends(tensors);
    let mut out = Vec::new();
    let mut i = 0usize;
    while i < tensors.len() {
        let mut reach = ends.get(i).copied().unwrap_or(i);
        let mut j = i;
        while j < reach {
            j = j.saturating_add(1);
            reach = reach.max(ends.get(j).copied().unwrap_or(j));
        }
        let range = i..reach.saturating_add(1);
        check_one_input_shard(tensors.get(range.clone()).unwrap_or_default())?;
        i = range.end;
        out.push(range);
    }
    Ok(out)
}

/// A run linked by quantization must come from one input shard.
fn check_one_input_shard(run: &[TensorOut]) -> anyhow::Result<()> {
    let Some(a) = run.first() else { return Ok(()) };
    if let Some(b) = run.iter().find(|t| t.shard != a.shard) {
        bail!(
            "tensors {} and {} are linked by quantization (a tensor and its scale share a shard) but are in input shards {} and {}",
            a.name,
            b.name,
            a.shard.saturating_add(1),
            b.shard.saturating_add(1)
        );
    }
    Ok(())
}

/// Plans the output shards of `tensors` (in input shard order, see
/// [`TensorOut::shard`]) with an optional maximum payload size per shard:
/// ranges of the list, in order, covering it (one empty range for no tensors).
pub fn plan(tensors: &[TensorOut], max_shard_size: Option<u64>) -> anyhow::Result<Vec<Range<usize>>> {
    let mut shards = Vec::new();
    let mut start = 0usize;
    let mut cost = Cost::default();
    for atom in atoms(tensors)? {
        let members = tensors.get(atom.clone()).unwrap_or_default();
        let own = members.iter().fold(Cost::default(), |c, t| c.plus(Cost::of(t)));
        if !own.fits_block() {
            let first = members.first().map_or("", |t| &*t.name);
            bail!(
                "tensor {first}{}: {} bytes of names and layout names, {} tensors: more than one Kiln directory block holds \
                 ({MAX_HEAP} bytes of names, {MAX_TENSORS} tensors)",
                if members.len() > 1 { " and the tensors linked to it by quantization" } else { "" },
                own.heap,
                own.tensors
            );
        }
        let new_input_shard =
            atom.start > start && tensors.get(atom.start).map(|t| t.shard) != tensors.get(start).map(|t| t.shard);
        if atom.start > start && (new_input_shard || !cost.plus(own).fits(max_shard_size)) {
            shards.push(start..atom.start);
            start = atom.start;
            cost = Cost::default();
        }
        cost = cost.plus(own);
    }
    shards.push(start..tensors.len());
    Ok(shards)
}

#[cfg(test)]
mod tests {
    use super::super::model::QuantOut;
    use super::*;
    use kiln_nostd::DType;

    fn t(name: &str, len: u64, shard: usize) -> TensorOut {
        let mut t = TensorOut::dense(name, DType::U8, vec![len], 0, len);
        t.shard = shard;
        t
    }

    fn named(n: usize, name_len: usize) -> Vec<TensorOut> {
        (0..n).map(|i| t(&format!("{i:0width$}", width = name_len), 1, 0)).collect()
    }

    #[test]
    fn one_small_input_is_one_shard() {
        assert_eq!(plan(&[], None).unwrap(), vec![0..0]);
        assert_eq!(plan(&[t("a", 4, 0), t("b", 4, 0)], None).unwrap(), vec![0..2]);
    }

    #[test]
    fn a_sharded_input_keeps_its_shards() {
        let ts = [t("a", 1, 0), t("b", 1, 0), t("c", 1, 1), t("d", 1, 2), t("e", 1, 2)];
        assert_eq!(plan(&ts, None).unwrap(), vec![0..2, 2..3, 3..5]);
        // A large maximum merges nothing across input shards.
        assert_eq!(plan(&ts, Some(1 << 40)).unwrap(), vec![0..2, 2..3, 3..5]);
    }

    #[test]
    fn names_of_exactly_65535_bytes_fit_one_block() {
        // 13,107 names of 5 bytes = 65,535 bytes.
        let ts = named(13_107, 5);
        assert_eq!(ts.iter().map(|t| t.name.len()).sum::<usize>(), 65_535);
        assert_eq!(plan(&ts, None).unwrap(), vec![0..13_107]);
        // The writer agrees: the block can be laid out.
        assert!(super::super::write_kiln::plan(&ts).is_ok());
    }

    #[test]
    fn one_byte_more_splits_at_the_tensor_that_crosses() {
        let mut ts = named(13_107, 5);
        {
            let t = ts.last_mut().unwrap();
            t.name = format!("{}x", t.name).into();
        }
        assert_eq!(plan(&ts, None).unwrap(), vec![0..13_106, 13_106..13_107]);
        // Layout names count too.
        let mut ts = named(13_107, 5);
        ts[0].layout = Some("L".into());
        assert_eq!(plan(&ts, None).unwrap(), vec![0..13_106, 13_106..13_107]);
        // Every part fits the writer.
        let ts = named(30_000, 5);
        let shards = plan(&ts, None).unwrap();
        assert_eq!(shards, vec![0..13_107, 13_107..26_214, 26_214..30_000]);
        for r in shards {
            assert!(super::super::write_kiln::plan(&ts[r]).is_ok());
        }
    }

    #[test]
    fn a_name_longer_than_a_block_is_an_error() {
        let e = plan(&[t(&"n".repeat(65_536), 1, 0)], None).unwrap_err().to_string();
        assert!(e.contains("65536 bytes of names") && e.contains("more than one Kiln directory block"), "{e}");
        assert_eq!(plan(&[t(&"n".repeat(65_535), 1, 0)], None).unwrap(), vec![0..1]);
    }

    #[test]
    fn the_maximum_size_splits_and_a_large_tensor_stands_alone() {
        let ts = [t("a", 40, 0), t("b", 40, 0), t("c", 40, 0), t("big", 500, 0), t("d", 10, 0), t("e", 10, 0)];
        assert_eq!(plan(&ts, Some(100)).unwrap(), vec![0..2, 2..3, 3..4, 4..6]);
        // Exactly the maximum fits.
        assert_eq!(plan(&ts[..2], Some(80)).unwrap(), vec![0..2]);
        assert_eq!(plan(&ts[..2], Some(79)).unwrap(), vec![0..1, 1..2]);
        // Zero-length tensors never split a shard.
        let zeros = [t("z0", 0, 0), t("z1", 0, 0)];
        assert_eq!(plan(&zeros, Some(0)).unwrap(), vec![0..2]);
    }

    fn quantized(name: &str, scale: &str, outer: Option<&str>) -> TensorOut {
        let mut q = t(name, 40, 0);
        q.quant = Some(Box::new(QuantOut {
            scheme: 1,
            axis: 0,
            group_size: 1,
            scale: scale.into(),
            outer: outer.map(Into::into),
        }));
        q
    }

    #[test]
    fn a_quantized_tensor_stays_with_its_scale_and_outer() {
        // q at 1 links to s at 3 and o at 4: 1..5 is never cut, even past the maximum.
        let ts =
            [t("a", 40, 0), quantized("q", "s", Some("o")), t("b", 40, 0), t("s", 40, 0), t("o", 40, 0), t("c", 40, 0)];
        assert_eq!(plan(&ts, Some(40)).unwrap(), vec![0..1, 1..5, 5..6]);
        // A scale before the tensor.
        let ts = [t("s", 40, 0), t("x", 40, 0), quantized("q", "s", None), t("y", 40, 0)];
        assert_eq!(plan(&ts, Some(40)).unwrap(), vec![0..3, 3..4]);
        // Overlapping groups merge.
        let ts = [quantized("q1", "s1", None), quantized("q2", "s2", None), t("s1", 1, 0), t("s2", 1, 0), t("z", 1, 0)];
        assert_eq!(plan(&ts, Some(1)).unwrap(), vec![0..4, 4..5]);
    }

    #[test]
    fn a_quantized_tensor_whose_scale_is_in_another_input_shard_is_an_error() {
        let mut s = t("s", 1, 1);
        s.shard = 1;
        let ts = [quantized("q", "s", None), s];
        let e = plan(&ts, None).unwrap_err().to_string();
        assert!(e.contains("q and s") && e.contains("input shards 1 and 2"), "{e}");
    }

    #[test]
    fn the_count_cap_splits() {
        let c = Cost { heap: 0, tensors: MAX_TENSORS, payload: 0 };
        assert!(c.fits(None));
        assert!(!c.plus(Cost { heap: 0, tensors: 1, payload: 0 }).fits(None));
        assert!(!Cost { heap: MAX_HEAP + 1, tensors: 1, payload: 0 }.fits_block());
    }
}
