//! Quantization metadata rules (check step 11). Kiln never applies a scale;
//! it checks that the named scale tensors exist and have one element per group.

use crate::dtype::DType;
use crate::error::{fail, Result, Rule};
use crate::wire::descriptor::{
    field_at, RawDescriptor, AT_GROUP_SIZE, AT_OUTER_INDEX, AT_QUANT_AXIS, AT_QUANT_SCHEME, AT_SCALE_INDEX, NO_AXIS,
    NO_INDEX,
};

/// Scheme 0: no quantization.
pub const SCHEME_NONE: u16 = 0;
/// Scheme 1: one sibling holds the block scales.
pub const SCHEME_SCALES: u16 = 1;
/// Scheme 2: scheme 1 plus a one-element f32 outer scale.
pub const SCHEME_SCALES_OUTER: u16 = 2;

/// The number of scales a tensor of `dims` quantized along `axis` in groups
/// of `group_size` needs: ceil(`dims[axis]` / group) * product of the other dims.
/// `None` when the axis is out of range, the group is 0, or on overflow.
/// The product is exact: a zero dimension makes it 0 whatever the others are.
#[must_use]
pub fn scale_count(dims: &[u64], axis: usize, group_size: u32) -> Option<u64> {
    let groups = div_ceil_u32(*dims.get(axis)?, group_size)?;
    if groups == 0 || dims.contains(&0) {
        return Some(0);
    }
    dims.iter().enumerate().filter(|&(i, _)| i != axis).try_fold(groups, |acc, (_, &d)| acc.checked_mul(d))
}

/// ceil(n / d), by [`div_rem_u32`](crate::bytes::div_rem_u32): quantized
/// tensors are rare, and 32-bit targets then link no 64-bit division routine.
fn div_ceil_u32(n: u64, d: u32) -> Option<u64> {
    let (q, r) = crate::bytes::div_rem_u32(n, d)?;
    q.checked_add(u64::from(r != 0))
}

/// Step 11 quantization rules for descriptor `index` of `count`.
#[cfg_attr(target_pointer_width = "64", inline)]
pub(crate) fn check_quant<'r>(
    d: &RawDescriptor,
    index: usize,
    count: usize,
    desc: impl Fn(usize) -> &'r RawDescriptor,
) -> Result<()> {
    let at = |field| field_at(index, field);
    match d.quant_scheme() {
        SCHEME_NONE => {
            if d.group_size() != 0
                || d.quant_axis() != NO_AXIS
                || d.scale_index() != NO_INDEX
                || d.outer_index() != NO_INDEX
            {
                return fail(Rule::QuantFieldsOnPlain, at(AT_QUANT_SCHEME));
            }
            Ok(())
        }
        SCHEME_SCALES | SCHEME_SCALES_OUTER => {
            let axis = usize::from(d.quant_axis());
            if d.rank() == 0 || axis >= usize::from(d.rank()) {
                return fail(Rule::QuantAxis, at(AT_QUANT_AXIS));
            }
            if d.group_size() == 0 {
                return fail(Rule::QuantAxis, at(AT_GROUP_SIZE));
            }
            let Some(scale_i) = sibling(d.scale_index(), index, count, None) else {
                return fail(Rule::ScaleIndex, at(AT_SCALE_INDEX));
            };
            let scale = desc(scale_i);
            if scale.quant_scheme() != SCHEME_NONE {
                return fail(Rule::QuantChain, at(AT_SCALE_INDEX));
            }
            let dims = d.shape();
            // Fallback not taken: the rank was checked to be at most 8.
            let dims = dims.get(..usize::from(d.rank())).unwrap_or(&[]);
            if scale_count(dims, axis, d.group_size()) != scale.element_count() {
                return fail(Rule::ScaleCount, at(AT_SCALE_INDEX));
            }
            check_outer(d, index, count, scale_i, desc)
        }
        _ => fail(Rule::UnknownQuantScheme, at(AT_QUANT_SCHEME)),
    }
}

fn check_outer<'r>(
    d: &RawDescriptor,
    index: usize,
    count: usize,
    scale_i: usize,
    desc: impl Fn(usize) -> &'r RawDescriptor,
) -> Result<()> {
    let at = field_at(index, AT_OUTER_INDEX);
    if d.quant_scheme() == SCHEME_SCALES {
        return if d.outer_index() == NO_INDEX { Ok(()) } else { fail(Rule::OuterIndex, at) };
    }
    let Some(outer_i) = sibling(d.outer_index(), index, count, Some(scale_i)) else {
        return fail(Rule::OuterIndex, at);
    };
    let outer = desc(outer_i);
    if outer.quant_scheme() != SCHEME_NONE {
        return fail(Rule::QuantChain, at);
    }
    if outer.dtype() != Some(DType::F32) || outer.element_count() != Some(1) {
        return fail(Rule::OuterTensor, at);
    }
    Ok(())
}

/// `raw` as an index of another tensor: in range, not `me`, not `also_not`.
fn sibling(raw: u32, me: usize, count: usize, also_not: Option<usize>) -> Option<usize> {
    let i = usize::try_from(raw).ok()?;
    (i < count && i != me && Some(i) != also_not).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shift_subtract_division_matches_native() {
        let ns = [0u64, 1, 2, 31, 32, 33, 1 << 32, (1 << 32) + 1, u64::MAX - 1, u64::MAX, 0x1234_5678_9abc_def0];
        for &n in &ns {
            for d in [1u32, 2, 3, 7, 32, 1000, u32::MAX - 1, u32::MAX] {
                assert_eq!(div_ceil_u32(n, d), Some(n.div_ceil(u64::from(d))), "{n} / {d}");
            }
            assert_eq!(div_ceil_u32(n, 0), None);
        }
    }

    #[test]
    fn scale_counts() {
        assert_eq!(scale_count(&[32], 0, 32), Some(1));
        assert_eq!(scale_count(&[33], 0, 32), Some(2));
        assert_eq!(scale_count(&[4, 64], 1, 32), Some(8));
        assert_eq!(scale_count(&[4, 64], 0, 3), Some(128));
        assert_eq!(scale_count(&[4], 1, 3), None);
        assert_eq!(scale_count(&[4], 0, 0), None);
    }
}
