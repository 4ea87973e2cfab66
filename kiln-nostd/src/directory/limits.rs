//! Configurable caps on counts and byte runs.

/// The spec's default cap for counts and for one string or byte run.
pub const DEFAULT_CAP: u32 = 16_777_216;

/// Caps checked before any count is trusted. A value above a cap is LIMIT.
///
/// ```
/// use kiln_nostd::Limits;
/// let l = Limits::DEFAULT.with_count_cap(1000);
/// assert_eq!(l.count_cap, 1000);
/// assert_eq!(l.byte_cap, 16_777_216);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Limits {
    /// Cap on list and dict counts and on tensor_count.
    pub count_cap: u32,
    /// Cap on a string or byte-run length and on name_bytes.
    pub byte_cap: u32,
}

impl Limits {
    /// Both caps at 16,777,216.
    pub const DEFAULT: Limits = Limits { count_cap: DEFAULT_CAP, byte_cap: DEFAULT_CAP };
    /// Both caps at the wire maximum, 4,294,967,295.
    pub const MAX: Limits = Limits { count_cap: u32::MAX, byte_cap: u32::MAX };

    /// These limits with another count cap.
    #[must_use]
    pub const fn with_count_cap(self, count_cap: u32) -> Self {
        Limits { count_cap, ..self }
    }

    /// These limits with another byte cap.
    #[must_use]
    pub const fn with_byte_cap(self, byte_cap: u32) -> Self {
        Limits { byte_cap, ..self }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}
