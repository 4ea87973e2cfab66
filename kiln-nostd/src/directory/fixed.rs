//! Fixed-capacity conveniences for firmware: no heap, capacities chosen at
//! compile time, and a clear error when a directory does not fit them.

use core::fmt;

use crate::directory::Limits;
use crate::directory::{Directory, NameIndex, Tensor};
use crate::error::Result;
use crate::names::table_words;
use crate::Parser;

/// A fixed capacity was too small.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CapacityError {
    /// How many entries were needed.
    pub needed: usize,
    /// How many fit.
    pub capacity: usize,
}

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} tensors do not fit in a capacity of {}", self.needed, self.capacity)
    }
}

impl core::error::Error for CapacityError {}

impl<'a> Directory<'a> {
    /// The tensors in a `heapless::Vec` of capacity `N`.
    ///
    /// ```
    /// # let bytes = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector.kiln"));
    /// let dir = kiln_nostd::Directory::parse(&bytes)?;
    /// let all = dir.collect_tensors::<4>().expect("fits");
    /// assert_eq!(all.len(), 1);
    /// assert!(dir.collect_tensors::<0>().is_err());
    /// # Ok::<(), kiln_nostd::Error>(())
    /// ```
    pub fn collect_tensors<const N: usize>(&self) -> core::result::Result<heapless::Vec<Tensor<'a>, N>, CapacityError> {
        let mut out = heapless::Vec::new();
        for t in self.iter() {
            out.push(t).map_err(|_| CapacityError { needed: self.len(), capacity: N })?;
        }
        Ok(out)
    }
}

/// A parser with an inline name table for up to `T` tensors (`S` must be
/// at least [`scratch_len`](crate::directory::scratch_len)`(T)`; see [`FixedIndex::new`]).
/// A directory with more than `T` tensors is refused with LIMIT
/// (`TensorCountCap`): this reader's count cap is its capacity.
///
/// ```
/// use kiln_nostd::directory::FixedIndex;
/// # let bytes = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
/// let mut index = FixedIndex::<8, 32>::new();
/// let (dir, names) = index.parse(&bytes)?;
/// assert_eq!(names.get("w").map(|t| t.index()), Some(0));
/// assert!(names.is_hashed());
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
pub struct FixedIndex<const T: usize, const S: usize> {
    scratch: [u32; S],
    limits: Limits,
}

impl<const T: usize, const S: usize> Default for FixedIndex<T, S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const T: usize, const S: usize> FixedIndex<T, S> {
    // Checked when the type is used: S must hold the table for T names.
    const ENOUGH_SCRATCH: () = assert!(S >= table_words(T), "S is smaller than scratch_len(T)");

    /// An empty index with default caps (the count cap lowered to `T`).
    #[must_use]
    pub const fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::ENOUGH_SCRATCH;
        FixedIndex { scratch: [0; S], limits: Limits::DEFAULT }
    }

    /// Uses these caps (the count cap is still at most `T`).
    #[must_use]
    pub const fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Checks a standalone block and indexes its names.
    pub fn parse<'a>(&mut self, buf: &'a [u8]) -> Result<(Directory<'a>, NameIndex<'a, '_>)> {
        // Fallback: a capacity beyond u32 tensors is the u32 maximum: the count is a u32.
        let cap = u32::try_from(T).unwrap_or(u32::MAX).min(self.limits.count_cap);
        Parser::new().limits(self.limits.with_count_cap(cap)).scratch(&mut self.scratch).parse_indexed(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_len_sizes_a_fixed_index_at_compile_time() {
        // The capacity check accepts S = scratch_len(T), and that is enough for a hashed index.
        const S: usize = crate::directory::scratch_len(8);
        let bytes =
            *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
        let mut index = FixedIndex::<8, S>::new();
        let (_, names) = index.parse(&bytes).unwrap();
        assert!(names.is_hashed());
        assert_eq!(names.get("w").map(|t| t.index()), Some(0));
    }

    #[test]
    fn too_many_tensors_for_the_capacity_is_limit() {
        let bytes =
            *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
        let mut index = FixedIndex::<0, 2>::new();
        let err = index.parse(&bytes).unwrap_err();
        assert_eq!((err.code(), err.offset()), (crate::ErrorCode::Limit, 8));
    }
}
