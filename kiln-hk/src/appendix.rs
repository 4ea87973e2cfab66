//! HK appendix records (append-only, after the payloads) and, with the
//! `sha2` feature, the SHA-256 lineage chain between them.

use crate::error::{fail, Error, Result, Rule};

use super::cursor::Cursor;

/// Length of a record header.
pub const RECORD_HEADER_LEN: usize = 80;
/// Flag bit 0.
pub const RECORD_ACTIVE: u8 = 1;
/// Flag bit 1.
pub const RECORD_COMPRESSED: u8 = 2;

/// Names of the entry types 1..=6.
pub const ENTRY_TYPES: [&str; 6] =
    ["lora_adapter", "delta_patch", "new_layer", "code_eval", "kv_cache_sink", "topology_head"];

const AT_PARENT_HASH: usize = 16;
const AT_RESERVED: usize = 66;

/// One appendix record of a checked file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AppendixRecord<'a> {
    /// Absolute offset of the record header.
    pub offset: usize,
    /// 1..=6, see [`ENTRY_TYPES`].
    pub entry_type: u8,
    /// Bit 0 ACTIVE, bit 1 COMPRESSED.
    pub flags: u8,
    /// Generation counter.
    pub generation: u32,
    /// Timestamp.
    pub timestamp: u64,
    /// SHA-256 of the previous record (unchecked for the first).
    pub parent_hash: [u8; 32],
    /// metric_loss, metric_acc, metric_pass, metric_custom.
    pub metrics: [f32; 4],
    /// data_crc32 (currently always 0; not verified).
    pub data_crc32: u32,
    /// Record name.
    pub name: &'a str,
    /// Record target.
    pub target: &'a str,
    /// Record payload.
    pub data: &'a [u8],
}

impl AppendixRecord<'_> {
    /// The entry type's name.
    #[must_use]
    pub fn entry_type_name(&self) -> Option<&'static str> {
        ENTRY_TYPES.get(usize::from(self.entry_type).checked_sub(1)?).copied()
    }

    /// Absolute offset of the parent_hash field.
    pub fn parent_hash_offset(&self) -> usize {
        self.offset.saturating_add(AT_PARENT_HASH)
    }
}

/// Reads one record at `pos` (8-aligned, below `buf.len()`); returns it and
/// the start of the next record.
pub(crate) fn read_record(buf: &[u8], pos: usize) -> Result<(AppendixRecord<'_>, usize)> {
    let mut c = Cursor::new(buf, pos, buf.len(), Rule::HkAppendixTruncated);
    let entry_type = c.u8()?;
    if !(1..=6).contains(&entry_type) {
        return fail(Rule::HkAppendixType, pos);
    }
    let flags = c.u8()?;
    if flags & !(RECORD_ACTIVE | RECORD_COMPRESSED) != 0 {
        return fail(Rule::HkAppendixReserved, pos.saturating_add(1));
    }
    let name_len = c.u16()?;
    let generation = c.u32()?;
    let timestamp = c.u64()?;
    let parent_hash = c.array::<32>()?;
    let mut metrics = [0f32; 4];
    for m in metrics.iter_mut() {
        *m = f32::from_bits(c.u32()?);
    }
    let target_len = c.u16()?;
    if c.u16()? != 0 {
        return fail(Rule::HkAppendixReserved, pos.saturating_add(AT_RESERVED));
    }
    let data_crc32 = c.u32()?;
    let data_size = c.u64()?;
    let name_at = c.pos();
    let name = c.take(usize::from(name_len))?;
    let target_at = c.pos();
    let target = c.take(usize::from(target_len))?;
    let data = c.take_u64_len(data_size)?;
    let name = core::str::from_utf8(name).map_err(|_| Error::new(Rule::HkAppendixUtf8, name_at))?;
    let target = core::str::from_utf8(target).map_err(|_| Error::new(Rule::HkAppendixUtf8, target_at))?;
    // Zero padding to a multiple of 8; the last record may end at the file's end.
    let end = c.pos();
    let padded = end.checked_add(7).map_or(usize::MAX, |e| e & !7).min(buf.len());
    // Fallback not taken: end <= padded <= buf.len() (clamped above).
    let pad = buf.get(end..padded).unwrap_or(&[]);
    if let Some(i) = pad.iter().position(|&b| b != 0) {
        return fail(Rule::HkAppendixPadding, end.saturating_add(i));
    }
    let record = AppendixRecord {
        offset: pos,
        entry_type,
        flags,
        generation,
        timestamp,
        parent_hash,
        metrics,
        data_crc32,
        name,
        target,
        data,
    };
    Ok((record, padded))
}

/// Iterator over the appendix records of a checked file.
#[derive(Clone, Debug)]
pub struct AppendixIter<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Iterator for AppendixIter<'a> {
    type Item = AppendixRecord<'a>;
    fn next(&mut self) -> Option<AppendixRecord<'a>> {
        if self.pos == 0 || self.pos >= self.buf.len() {
            return None;
        }
        let (r, next) = read_record(self.buf, self.pos).ok()?;
        self.pos = next;
        Some(r)
    }
}

/// Which form of parent hash a record used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LinkForm {
    /// SHA-256(name ‖ target ‖ data) of the previous record.
    Full,
    /// The older form: SHA-256(data) of the previous record.
    PayloadOnly,
}

/// The outcome of a lineage check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Lineage {
    /// Number of records.
    pub records: usize,
    /// Links in the full form.
    pub full: usize,
    /// Links in the older payload-only form.
    pub payload_only: usize,
}

/// The SHA-256 of `name ‖ target ‖ data` (the full form).
#[cfg(feature = "sha2")]
pub fn record_hash(r: &AppendixRecord<'_>) -> [u8; 32] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(r.name.as_bytes());
    h.update(r.target.as_bytes());
    h.update(r.data);
    h.finalize().into()
}

/// The SHA-256 of `data` alone (the older form).
#[cfg(feature = "sha2")]
pub fn payload_hash(r: &AppendixRecord<'_>) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(r.data).into()
}

/// Checks the parent_hash of every record after the first.
#[cfg(feature = "sha2")]
pub(crate) fn verify<'a>(records: impl Iterator<Item = AppendixRecord<'a>>) -> Result<Lineage> {
    let mut out = Lineage::default();
    let mut prev: Option<AppendixRecord<'a>> = None;
    for r in records {
        if let Some(p) = prev {
            if r.parent_hash == record_hash(&p) {
                out.full = out.full.saturating_add(1);
            } else if r.parent_hash == payload_hash(&p) {
                out.payload_only = out.payload_only.saturating_add(1);
            } else {
                return fail(Rule::HkLineageHash, r.parent_hash_offset());
            }
        }
        out.records = out.records.saturating_add(1);
        prev = Some(r);
    }
    Ok(out)
}

/// Which form links `child` to `parent`, or `None` when neither matches.
#[cfg(feature = "sha2")]
#[must_use]
pub fn link_form(parent: &AppendixRecord<'_>, child: &AppendixRecord<'_>) -> Option<LinkForm> {
    if child.parent_hash == record_hash(parent) {
        Some(LinkForm::Full)
    } else if child.parent_hash == payload_hash(parent) {
        Some(LinkForm::PayloadOnly)
    } else {
        None
    }
}
