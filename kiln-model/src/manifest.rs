//! Manifests of sharded models (`spec/model-file.md`, "Manifests"): the
//! model's metadata, its shard files and every tensor with its shard and
//! digest, so `inspect` and a remote open need the manifest only.
//!
//! [`Manifest::parse`] checks the Frozen rules and then steps M1 to M5;
//! nothing is allocated. [`Manifest::check_shard`] (feature `sha2`) holds a
//! parsed shard against its entry (steps 4 to 6 of "Opening a shard of a
//! manifest"); resolving and opening the shard files is the caller's, inside
//! the manifest's folder only (a shard name passed M2 is a plain file name).

use super::{Metadata, METADATA};
use crate::bytes::{array, u32_at, u64_at, usize_from_u32};
use crate::digest::{Digests, DIGEST_LEN};
use crate::error::{fail, Result, Rule};
use crate::frozen::{check_frame, Checker, Field, Ty};
use crate::names::{table_words, LookupTable, NameTable};
use kiln_nostd::Rule as CoreRule;
use kiln_nostd::{DType, Limits};

/// The manifest record's canonical type text.
pub const MANIFEST_TYPE: &str = concat!(
    "struct{metadata:dict<str,str>,",
    "shards:list<struct{name:str,length:u64,digest:list<u8>,}>,",
    "tensors:list<struct{name:str,shard:u32,dtype:u16,shape:list<u64>,byte_length:u64,layout:str,block_size:u32,",
    "quant:opt<struct{scheme:u16,axis:u16,group_size:u32,scale:str,outer:str,}>,}>,",
    "digests:list<u8>,}"
);

static SHARD_ENTRY_FIELDS: [Field; 3] =
    [Field::new("name", &Ty::STR), Field::new("length", &Ty::U64), Field::new("digest", &Ty::BYTES)];
static SHARD_ENTRY: Ty = Ty::structure(&SHARD_ENTRY_FIELDS);
static SHARDS: Ty = Ty::list(&SHARD_ENTRY);
static SHAPE: Ty = Ty::list(&Ty::U64);
static QUANT_FIELDS: [Field; 5] = [
    Field::new("scheme", &Ty::U16),
    Field::new("axis", &Ty::U16),
    Field::new("group_size", &Ty::U32),
    Field::new("scale", &Ty::STR),
    Field::new("outer", &Ty::STR),
];
static QUANT: Ty = Ty::structure(&QUANT_FIELDS);
static OPT_QUANT: Ty = Ty::opt(&QUANT);
static TENSOR_FIELDS: [Field; 8] = [
    Field::new("name", &Ty::STR),
    Field::new("shard", &Ty::U32),
    Field::new("dtype", &Ty::U16),
    Field::new("shape", &SHAPE),
    Field::new("byte_length", &Ty::U64),
    Field::new("layout", &Ty::STR),
    Field::new("block_size", &Ty::U32),
    Field::new("quant", &OPT_QUANT),
];
static TENSOR: Ty = Ty::structure(&TENSOR_FIELDS);
static TENSORS: Ty = Ty::list(&TENSOR);
static FIELDS: [Field; 4] = [
    Field::new("metadata", &METADATA),
    Field::new("shards", &SHARDS),
    Field::new("tensors", &TENSORS),
    Field::new("digests", &Ty::BYTES),
];
static RECORD: Ty = Ty::structure(&FIELDS);

/// The schema hash of [`MANIFEST_TYPE`].
pub const MANIFEST_HASH: u64 = crate::frozen::hash_text(MANIFEST_TYPE);
const _: () = assert!(RECORD.schema_hash() == MANIFEST_HASH);

/// The signed manifest's canonical type text: a manifest with the signed
/// record's `signature` first and `release` after the metadata
/// (`spec/model-file.md`, "Signed models"). Its reader's kind is
/// [`Kind::Manifest`](super::Kind::Manifest); [`Manifest::signature`] tells them apart.
pub const SIGNED_MANIFEST_TYPE: &str = concat!(
    "struct{signature:struct{key:list<u8>,sig:list<u8>,},metadata:dict<str,str>,",
    "release:struct{version:u64,target:str,},",
    "shards:list<struct{name:str,length:u64,digest:list<u8>,}>,",
    "tensors:list<struct{name:str,shard:u32,dtype:u16,shape:list<u64>,byte_length:u64,layout:str,block_size:u32,",
    "quant:opt<struct{scheme:u16,axis:u16,group_size:u32,scale:str,outer:str,}>,}>,",
    "digests:list<u8>,}"
);
static SIGNED_FIELDS: [Field; 6] = [
    Field::new("signature", &super::signed::SIGNATURE),
    Field::new("metadata", &METADATA),
    Field::new("release", &super::signed::RELEASE),
    Field::new("shards", &SHARDS),
    Field::new("tensors", &TENSORS),
    Field::new("digests", &Ty::BYTES),
];
static SIGNED_RECORD: Ty = Ty::structure(&SIGNED_FIELDS);
/// The schema hash of [`SIGNED_MANIFEST_TYPE`].
pub const SIGNED_MANIFEST_HASH: u64 = crate::frozen::hash_text(SIGNED_MANIFEST_TYPE);
const _: () = assert!(SIGNED_RECORD.schema_hash() == SIGNED_MANIFEST_HASH);

/// The longest shard name, in bytes.
pub const SHARD_NAME_MAX: usize = 255;

/// Scheme codes of the quantization in a manifest entry.
const SCHEME_SCALES: u16 = 1;
const SCHEME_SCALES_OUTER: u16 = 2;

/// A checked manifest, borrowed from the caller's buffer.
#[derive(Clone, Copy, Debug)]
pub struct Manifest<'a> {
    buf: &'a [u8],
    /// Where the parts are (the offsets of the count words, and the counts).
    layout: ManifestLayout,
    metadata: Metadata<'a>,
    digests: Digests<'a>,
}

/// Where the parts of a checked manifest are, without its bytes: a binding
/// that owns a copy of the bytes keeps this beside them and makes the
/// [`Manifest`] again with [`view`](Self::view), with no second check and no
/// borrow to hold across calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManifestLayout {
    /// The manifest's length in bytes.
    len: usize,
    /// Where the metadata starts (after the frame, or the signature) and ends.
    metadata_at: usize,
    metadata_end: usize,
    /// A signed manifest: where its `release` field starts.
    release_at: Option<usize>,
    /// Offset of the `shards` count word, and the count.
    shards_at: usize,
    shard_count: usize,
    /// Offset of the `tensors` count word (where the model id's bytes start), and the count.
    tensors_at: usize,
    tensor_count: usize,
    /// Offset of the `digests` length word.
    digests_at: usize,
}

impl ManifestLayout {
    /// The manifest of `buf`, which must hold the bytes this layout was taken
    /// from (`None` when its length differs). Other bytes of that length give
    /// a manifest whose accessors read them as they are: wrong entries, never
    /// a panic or a read out of bounds.
    #[must_use]
    pub fn view<'a>(&self, buf: &'a [u8]) -> Option<Manifest<'a>> {
        (buf.len() == self.len).then(|| self.view_unchecked(buf))
    }

    fn view_unchecked<'a>(&self, buf: &'a [u8]) -> Manifest<'a> {
        let digests_start = self.digests_at.saturating_add(4);
        Manifest {
            buf,
            layout: *self,
            metadata: Metadata { bytes: buf.get(self.metadata_at..self.metadata_end).unwrap_or(&[]) },
            digests: Digests::new(buf.get(digests_start..).unwrap_or(&[]), digests_start),
        }
    }
}

/// One shard of the manifest's shard list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardEntry<'a> {
    /// Its 1-based position.
    pub index: u32,
    /// Its file name: a plain name in the manifest's folder (step M2).
    pub name: ShardName<'a>,
    /// Its length in bytes.
    pub length: u64,
    /// SHA-256 of its bytes before the payload region.
    pub prefix_digest: &'a [u8; DIGEST_LEN],
    /// Where its first tensor entry is in the tensor table, found in the
    /// one walk [`Manifest::shards`] makes, so that a shard's tensors are
    /// reached without walking the entries of the shards before it.
    first: TensorAt,
}

/// A position in the manifest's tensor table: an entry's offset and index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TensorAt {
    at: usize,
    index: usize,
}

/// A shard file name that passed step M2: 1 to 255 bytes of UTF-8 without
/// `/`, `\`, `:`, NUL or control characters (Unicode's Cc: C0, DEL and C1),
/// not `.` or `..`. Only such a
/// name can be joined to the manifest's folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardName<'a>(&'a str);

impl<'a> ShardName<'a> {
    /// The name.
    pub const fn as_str(&self) -> &'a str {
        self.0
    }

    /// Checks `name` by step M2's first rule.
    #[must_use]
    pub fn new(name: &'a str) -> Option<ShardName<'a>> {
        is_plain_file_name(name).then_some(ShardName(name))
    }
}

/// Step M2's name rule.
fn is_plain_file_name(name: &str) -> bool {
    // `char::is_control` is Unicode's Cc category: U+0000 to U+001F and U+007F to U+009F.
    let bad = |c: char| matches!(c, '/' | '\\' | ':') || c.is_control();
    (1..=SHARD_NAME_MAX).contains(&name.len()) && name != "." && name != ".." && !name.contains(bad)
}

/// One tensor of the manifest's tensor table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManifestTensor<'a> {
    /// Its position in the table.
    pub index: usize,
    /// Its name (unique across the model).
    pub name: &'a str,
    /// The 1-based shard that holds it.
    pub shard: u32,
    /// Its dtype.
    pub dtype: DType,
    /// Its shape, as stored (u64 little-endian words; see [`dims`](Self::dims)).
    shape: &'a [u8],
    /// Its payload length in bytes.
    pub byte_length: u64,
    /// Its opaque layout name (empty when none).
    pub layout: &'a str,
    /// Its opaque block size (0 when none).
    pub block_size: u32,
    /// Its quantization (scheme 1 or 2), with scale and outer by name.
    pub quant: Option<ManifestQuant<'a>>,
    /// Its digest.
    pub digest: &'a [u8; DIGEST_LEN],
    /// Offset of the entry's first byte.
    at: usize,
}

/// The quantization of a manifest entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManifestQuant<'a> {
    /// 1 (scales) or 2 (scales and an outer scale).
    pub scheme: u16,
    /// The quantized dimension.
    pub axis: u16,
    /// Elements per scale group.
    pub group_size: u32,
    /// The scale tensor's name.
    pub scale: &'a str,
    /// The outer scale tensor's name (empty for scheme 1).
    pub outer: &'a str,
}

impl<'a> ManifestTensor<'a> {
    /// The dimensions, slowest-varying first.
    pub fn dims(&self) -> impl Iterator<Item = u64> + 'a {
        self.shape.chunks_exact(8).filter_map(|c| c.try_into().ok()).map(u64::from_le_bytes)
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len() / 8
    }

    /// Offset of the entry in the manifest.
    pub fn offset(&self) -> usize {
        self.at
    }
}

/// Reads fields of a value the Frozen check has passed (the fallbacks are never taken).
#[derive(Clone, Copy)]
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn run(&mut self) -> (&'a [u8], usize) {
        let word = self.at;
        let len = u32_at(self.buf, word).map_or(0, usize_from_u32);
        let start = word.saturating_add(4);
        let end = start.saturating_add(len);
        self.at = end;
        (self.buf.get(start..end).unwrap_or(&[]), word)
    }

    fn str(&mut self) -> (&'a str, usize) {
        let (bytes, word) = self.run();
        (core::str::from_utf8(bytes).unwrap_or(""), word)
    }

    fn u16(&mut self) -> (u16, usize) {
        let at = self.at;
        self.at = at.saturating_add(2);
        (array::<2>(self.buf, at).map_or(0, u16::from_le_bytes), at)
    }

    fn u32(&mut self) -> (u32, usize) {
        let at = self.at;
        self.at = at.saturating_add(4);
        (u32_at(self.buf, at).unwrap_or(0), at)
    }

    fn u64(&mut self) -> (u64, usize) {
        let at = self.at;
        self.at = at.saturating_add(8);
        (u64_at(self.buf, at).unwrap_or(0), at)
    }

    /// A `list<u64>`: its bytes and its count word's offset.
    fn shape(&mut self) -> (&'a [u8], usize) {
        let word = self.at;
        let n = u32_at(self.buf, word).map_or(0, usize_from_u32);
        let start = word.saturating_add(4);
        let end = start.saturating_add(n.saturating_mul(8));
        self.at = end;
        (self.buf.get(start..end).unwrap_or(&[]), word)
    }

    fn byte(&mut self) -> (u8, usize) {
        let at = self.at;
        self.at = at.saturating_add(1);
        (self.buf.get(at).copied().unwrap_or(0), at)
    }
}

/// A shard entry with the offsets its rules report.
struct RawShard<'a> {
    name: (&'a str, usize),
    length: u64,
    digest: (&'a [u8], usize),
}

fn read_shard<'a>(c: &mut Cursor<'a>) -> RawShard<'a> {
    let name = c.str();
    let (length, _) = c.u64();
    let digest = c.run();
    RawShard { name, length, digest }
}

/// A tensor entry with the offsets its rules report.
struct RawTensor<'a> {
    at: usize,
    name: (&'a str, usize),
    shard: (u32, usize),
    dtype: (u16, usize),
    shape: (&'a [u8], usize),
    byte_length: (u64, usize),
    layout: (&'a str, usize),
    block_size: u32,
    quant: Option<(ManifestQuant<'a>, usize)>,
}

fn read_tensor<'a>(c: &mut Cursor<'a>) -> RawTensor<'a> {
    let at = c.at;
    let name = c.str();
    let shard = c.u32();
    let dtype = c.u16();
    let shape = c.shape();
    let byte_length = c.u64();
    let layout = c.str();
    let (block_size, _) = c.u32();
    let (tag, tag_at) = c.byte();
    let quant = (tag == 1).then(|| {
        let (scheme, _) = c.u16();
        let (axis, _) = c.u16();
        let (group_size, _) = c.u32();
        let (scale, _) = c.str();
        let (outer, _) = c.str();
        (ManifestQuant { scheme, axis, group_size, scale, outer }, tag_at)
    });
    RawTensor { at, name, shard, dtype, shape, byte_length, layout, block_size, quant }
}

impl<'a> Manifest<'a> {
    /// Checks `buf` as exactly one manifest with the default caps: the frame,
    /// the Frozen rules, then steps M1 to M5. Name uniqueness compares every
    /// pair; [`parse_with`](Self::parse_with) with scratch takes linear time.
    pub fn parse(buf: &'a [u8]) -> Result<Manifest<'a>> {
        Manifest::parse_with(buf, &Limits::DEFAULT, None)
    }

    /// The scratch [`parse_with`](Self::parse_with) needs for linear-time
    /// name checks of a manifest with up to `count` shards and tensors.
    pub const fn scratch_len(count: usize) -> usize {
        table_words(count).saturating_add(count)
    }

    /// [`parse`](Self::parse) with caps and optional scratch of
    /// [`scratch_len`](Self::scratch_len) words for the larger of the shard
    /// and tensor counts (less: every pair is compared).
    pub fn parse_with(buf: &'a [u8], limits: &Limits, scratch: Option<&mut [u32]>) -> Result<Manifest<'a>> {
        Manifest::parse_policy(buf, limits, scratch, None)
    }

    /// [`parse_with`](Self::parse_with) with the key and release checks of a
    /// signature policy (a signed manifest's fields are read first).
    pub(crate) fn parse_policy(
        buf: &'a [u8],
        limits: &Limits,
        mut scratch: Option<&mut [u32]>,
        policy: Option<&super::signed::Policy<'_>>,
    ) -> Result<Manifest<'a>> {
        let signed = super::Kind::of(buf).is_some() && buf.get(8..16) == Some(&SIGNED_MANIFEST_HASH.to_le_bytes()[..]);
        let (hash, record) = if signed { (SIGNED_MANIFEST_HASH, &SIGNED_RECORD) } else { (MANIFEST_HASH, &RECORD) };
        let mut at = check_frame(buf, hash)?;
        let checker = Checker { buf, limits: *limits, utf8: true };
        let end = if signed {
            // Field by field, so the key and release checks come as their
            // fields are read (spec/model-file.md, "Signed models").
            at = super::signed::check_signature_field(&checker, at, policy)?.2;
            let metadata_end = checker.value(&METADATA, at)?;
            let shards_at = super::signed::check_release(&checker, metadata_end, policy)?.1;
            let tensors_at = checker.value(&SHARDS, shards_at)?;
            let digests_at = checker.value(&TENSORS, tensors_at)?;
            checker.value(&crate::frozen::Ty::BYTES, digests_at)?
        } else {
            checker.value(record, at)?
        };
        if end != buf.len() {
            return fail(CoreRule::TrailingBytes, end);
        }
        let mut metadata_end = crate::frozen::skip(buf, &METADATA, at);
        let metadata_at = at;
        let release_at = signed.then_some(metadata_end);
        let shards_at = match release_at {
            Some(r) => super::signed::check_release(&checker, r, policy)?.1,
            None => metadata_end,
        };
        if !signed {
            metadata_end = shards_at;
        }
        let tensors_at = crate::frozen::skip(buf, &SHARDS, shards_at);
        let word = |at| u32_at(buf, at).map_or(0, usize_from_u32);
        let (shard_count, tensor_count) = (word(shards_at), word(tensors_at));
        let mut layout = ManifestLayout {
            len: buf.len(),
            metadata_at,
            metadata_end,
            release_at,
            shards_at,
            shard_count,
            tensors_at,
            tensor_count,
            // Where the digests field starts: M3 walks every tensor entry
            // and finds it (no third walk of them here).
            digests_at: 0,
        };
        let m = layout.view_unchecked(buf);
        m.check_shards(scratch.as_deref_mut())?; // M1, M2
        layout.digests_at = m.check_tensors(scratch)?; // M3, M4
        let m = layout.view_unchecked(buf);
        if m.digests.as_bytes().len() != tensor_count.saturating_mul(DIGEST_LEN) {
            return fail(Rule::ManifestDigestCount, layout.digests_at); // M5
        }
        Ok(m)
    }

    /// Where this manifest's parts are, to keep beside an owned copy of its
    /// bytes (see [`ManifestLayout`]).
    #[must_use]
    pub fn layout(&self) -> ManifestLayout {
        self.layout
    }

    /// M1 and M2.
    fn check_shards(&self, scratch: Option<&mut [u32]>) -> Result<()> {
        if self.layout.shard_count == 0 {
            return fail(Rule::ManifestNoShards, self.layout.shards_at);
        }
        let mut names = Names::new(scratch, self.layout.shard_count);
        let mut c = Cursor { buf: self.buf, at: self.layout.shards_at.saturating_add(4) };
        for i in 0..self.layout.shard_count {
            let s = read_shard(&mut c);
            if !is_plain_file_name(s.name.0) {
                return fail(Rule::ShardName, s.name.1);
            }
            let earlier = || self.shards().take(i).any(|e| e.name.0 == s.name.0);
            if names.repeats(i, s.name.1, self.buf, earlier) {
                return fail(Rule::ShardNameRepeated, s.name.1);
            }
            if s.digest.0.len() != DIGEST_LEN {
                return fail(Rule::ShardDigestLength, s.digest.1);
            }
        }
        Ok(())
    }

    /// M3 entry by entry, then M4 entry by entry. Returns where the
    /// entries end: the digests field, which M4 reads (the layout's
    /// `digests_at` may be unknown on entry: the M3 walk finds it).
    fn check_tensors(&self, scratch: Option<&mut [u32]>) -> Result<usize> {
        let mut names = Names::new(scratch, self.layout.tensor_count);
        let mut c = Cursor { buf: self.buf, at: self.layout.tensors_at.saturating_add(4) };
        let mut previous_shard = 0u32;
        // M4 reads the entries up to the last quantized one again.
        let mut quantized = 0usize;
        for i in 0..self.layout.tensor_count {
            let t = read_tensor(&mut c);
            if t.quant.is_some() {
                quantized = i.saturating_add(1);
            }
            if t.name.0.is_empty() {
                return fail(Rule::ManifestNameEmpty, t.name.1);
            }
            let earlier = || self.raw_names().take(i).any(|n| n == t.name.0);
            if names.repeats(i, t.name.1, self.buf, earlier) {
                return fail(Rule::ManifestNameRepeated, t.name.1);
            }
            let shard = t.shard.0;
            if shard == 0 || usize_from_u32(shard) > self.layout.shard_count || shard < previous_shard {
                return fail(Rule::ManifestShard, t.shard.1);
            }
            previous_shard = shard;
            check_dtype_and_size(&t)?;
        }
        // The entries passed the Frozen rules: the walk ends where the digests field starts.
        let digests_at = c.at;
        let m = ManifestLayout { digests_at, ..self.layout }.view_unchecked(self.buf);
        let lookup = names.freeze();
        let mut c = Cursor { buf: self.buf, at: self.layout.tensors_at.saturating_add(4) };
        for i in 0..quantized {
            let t = read_tensor(&mut c);
            if let Some((q, tag_at)) = t.quant {
                if !m.quant_holds(i, t.shard.0, &q, &lookup) {
                    return fail(Rule::ManifestQuant, tag_at);
                }
            }
        }
        Ok(digests_at)
    }

    /// M4 for entry `i` in shard `shard`.
    fn quant_holds(&self, i: usize, shard: u32, q: &ManifestQuant<'_>, lookup: &Lookup<'_>) -> bool {
        let in_shard = |name: &str| {
            lookup
                .find(name, self)
                .and_then(|j| Some((j, self.tensor(j)?.shard)))
                .filter(|&(j, s)| j != i && s == shard)
                .map(|(j, _)| j)
        };
        let Some(scale) = in_shard(q.scale) else { return false };
        match q.scheme {
            SCHEME_SCALES => q.outer.is_empty(),
            SCHEME_SCALES_OUTER => in_shard(q.outer).is_some_and(|o| o != scale),
            _ => false,
        }
    }

    /// The tensor names in table order, read without the entries' other checks.
    fn raw_names(&self) -> impl Iterator<Item = &'a str> + 'a {
        let mut c = Cursor { buf: self.buf, at: self.layout.tensors_at.saturating_add(4) };
        (0..self.layout.tensor_count).map(move |_| read_tensor(&mut c).name.0)
    }

    /// The model's metadata, without the padding key.
    pub fn metadata(&self) -> Metadata<'a> {
        self.metadata
    }

    /// The metadata field's bytes (count word and entries, padding key included).
    #[cfg_attr(not(all(feature = "alloc", feature = "ed25519")), allow(dead_code))]
    pub(crate) fn metadata_bytes(&self) -> &'a [u8] {
        self.buf.get(self.layout.metadata_at..self.layout.metadata_end).unwrap_or(&[])
    }

    /// The bytes from the `shards` field to the end (shards, tensors, digests).
    #[cfg_attr(not(all(feature = "alloc", feature = "ed25519")), allow(dead_code))]
    pub(crate) fn tables_bytes(&self) -> &'a [u8] {
        self.buf.get(self.layout.shards_at..).unwrap_or(&[])
    }

    /// A signed manifest's key, signature and release, as read (see
    #[cfg_attr(feature = "ed25519", doc = "[`parse_trusted`](Self::parse_trusted)).")]
    #[cfg_attr(not(feature = "ed25519"), doc = "`parse_trusted`, feature `ed25519`).")]
    #[must_use]
    pub fn signature(&self) -> Option<super::Signature<'a>> {
        use super::signed::{KEY_AT, KEY_LEN, SIGNATURE_LEN, SIG_AT};
        let at = self.layout.release_at?;
        let key = self.buf.get(KEY_AT..KEY_AT.saturating_add(KEY_LEN))?.try_into().ok()?;
        let sig = self.buf.get(SIG_AT..SIG_AT.saturating_add(SIGNATURE_LEN))?.try_into().ok()?;
        let version = u64_at(self.buf, at)?;
        let target_at = at.saturating_add(12);
        let target = self.buf.get(target_at..self.layout.shards_at).and_then(|b| core::str::from_utf8(b).ok())?;
        Some(super::Signature { key, sig, release: super::Release { version, target, at } })
    }

    /// Checks `buf` as a signed manifest that `trust` accepts: the key and
    /// release checks as its fields are read, steps M1 to M5, then the
    /// signature over every byte of it but the signature's own (step 9s
    /// of a model file; a manifest has no payloads). An unsigned manifest
    /// is [`Rule::NotSigned`]. Its shards are then checked against it as
    /// for any manifest: the tensor table holds every digest and layout.
    #[cfg(feature = "ed25519")]
    pub fn parse_trusted(
        buf: &'a [u8],
        limits: &Limits,
        scratch: Option<&mut [u32]>,
        trust: &super::Trust<'_>,
    ) -> Result<Manifest<'a>> {
        // The frame's own rules first; an unsigned manifest is then NotSigned
        // in the schema check's place.
        if crate::frozen::read_frame(buf)? != SIGNED_MANIFEST_HASH && super::Kind::of(buf).is_some() {
            return fail(Rule::NotSigned, 8);
        }
        let policy = trust.policy();
        let m = Manifest::parse_policy(buf, limits, scratch, Some(&policy))?;
        let Some(sig) = m.signature() else { return fail(Rule::NotSigned, 8) };
        trust.check_pieces(sig.sig, &super::signed::signed_message(buf, buf.len()))?;
        Ok(m)
    }

    /// The number of shards.
    pub fn shard_count(&self) -> usize {
        self.layout.shard_count
    }

    /// The shards, in order. The walk also passes over the tensor table
    /// once, so each entry knows where its tensors start
    /// ([`shard_tensors_of`](Self::shard_tensors_of)).
    pub fn shards(&self) -> impl Iterator<Item = ShardEntry<'a>> + 'a {
        let mut c = Cursor { buf: self.buf, at: self.layout.shards_at.saturating_add(4) };
        let mut t = Cursor { buf: self.buf, at: self.layout.tensors_at.saturating_add(4) };
        let mut next = 0usize;
        let tensor_count = self.layout.tensor_count;
        (1..=self.layout.shard_count).filter_map(move |index| {
            let s = read_shard(&mut c);
            let index = u32::try_from(index).ok()?;
            // The table is grouped by shard in order (M3): skip the entries of earlier shards.
            while next < tensor_count {
                let mut peek = Cursor { ..t };
                if read_tensor(&mut peek).shard.0 >= index {
                    break;
                }
                t = peek;
                next = next.saturating_add(1);
            }
            Some(ShardEntry {
                index,
                name: ShardName(s.name.0),
                length: s.length,
                prefix_digest: s.digest.0.try_into().ok()?,
                first: TensorAt { at: t.at, index: next },
            })
        })
    }

    /// Shard `index` (1-based).
    #[must_use]
    pub fn shard(&self, index: u32) -> Option<ShardEntry<'a>> {
        self.shards().find(|s| s.index == index)
    }

    /// The number of tensors of the model.
    pub fn tensor_count(&self) -> usize {
        self.layout.tensor_count
    }

    /// The tensors, in table order (grouped by shard, each shard's in its descriptor order).
    pub fn tensors(&self) -> impl Iterator<Item = ManifestTensor<'a>> + 'a {
        self.tensors_from(TensorAt { at: self.layout.tensors_at.saturating_add(4), index: 0 })
    }

    /// The tensors from the entry at `from` to the end of the table.
    fn tensors_from(&self, from: TensorAt) -> impl Iterator<Item = ManifestTensor<'a>> + 'a {
        let mut c = Cursor { buf: self.buf, at: from.at };
        let digests = self.digests;
        (from.index..self.layout.tensor_count).filter_map(move |index| {
            let t = read_tensor(&mut c);
            Some(ManifestTensor {
                index,
                name: t.name.0,
                shard: t.shard.0,
                dtype: DType::from_code(t.dtype.0)?,
                shape: t.shape.0,
                byte_length: t.byte_length.0,
                layout: t.layout.0,
                block_size: t.block_size,
                quant: t.quant.map(|(q, _)| q),
                digest: digests.get(index)?,
                at: t.at,
            })
        })
    }

    /// Tensor `i` of the table (a walk from the start: for many lookups,
    /// iterate [`tensors`](Self::tensors) once).
    #[must_use]
    pub fn tensor(&self, i: usize) -> Option<ManifestTensor<'a>> {
        self.tensors().nth(i)
    }

    /// The tensor named `name`, and its position inside its shard.
    #[must_use]
    pub fn find(&self, name: &str) -> Option<(ManifestTensor<'a>, usize)> {
        let mut within = 0usize;
        let mut shard = 0u32;
        for t in self.tensors() {
            within = if t.shard == shard { within.saturating_add(1) } else { 0 };
            shard = t.shard;
            if t.name == name {
                return Some((t, within));
            }
        }
        None
    }

    /// The tensors shard `index` holds, in its descriptor order (a walk
    /// from the start of the table: for each shard in turn, use
    /// [`shard_tensors_of`](Self::shard_tensors_of)).
    pub fn shard_tensors(&self, index: u32) -> impl Iterator<Item = ManifestTensor<'a>> + 'a {
        self.tensors().skip_while(move |t| t.shard < index).take_while(move |t| t.shard == index)
    }

    /// The tensors of `shard`, an entry of this manifest's
    /// [`shards`](Self::shards), in its descriptor order, starting where
    /// they are in the table.
    pub fn shard_tensors_of(&self, shard: &ShardEntry<'_>) -> impl Iterator<Item = ManifestTensor<'a>> + 'a {
        let index = shard.index;
        self.tensors_from(shard.first).take_while(move |t| t.shard == index)
    }

    /// The digests of the tensor table.
    pub fn digests(&self) -> Digests<'a> {
        self.digests
    }

    /// The bytes the model id is the SHA-256 of: from the `tensors` count
    /// word to the end of the manifest.
    pub fn model_id_bytes(&self) -> &'a [u8] {
        self.buf.get(self.layout.tensors_at..).unwrap_or(&[])
    }

    /// The model id every shard records.
    #[cfg(feature = "sha2")]
    pub fn model_id(&self) -> [u8; DIGEST_LEN] {
        crate::digest::sha256(self.model_id_bytes())
    }

    /// Steps 4 to 6 of "Opening a shard of a manifest" for `shard`, a shard
    /// file [`Model::parse`](super::Model::parse) accepted (steps 1 to 3
    /// and the file's length are the caller's, who opened it), at the
    /// position of `entry` (one of this manifest's [`shards`](Self::shards)):
    /// its model id, index and count, its tensors against their entries,
    /// then its prefix digest. `model_id` is [`model_id`](Self::model_id),
    /// computed once for all shards. Offsets are in the shard's file.
    #[cfg(feature = "sha2")]
    pub fn check_shard(
        &self,
        entry: &ShardEntry<'_>,
        model_id: &[u8; DIGEST_LEN],
        file: &[u8],
        shard: &super::Model<'_>,
    ) -> Result<()> {
        let index = entry.index;
        let Some(id) = shard.shard() else { return fail(CoreRule::SchemaHash, 8) };
        if id.model != model_id {
            return fail(Rule::ShardModel, id.model_offset());
        }
        if id.index != index {
            return fail(Rule::ShardIndex, id.index_offset());
        }
        if usize_from_u32(id.count) != self.layout.shard_count {
            return fail(Rule::ShardCount, id.count_offset());
        }
        self.check_shard_tensors(entry, shard)?;
        let prefix = file.get(..shard.payload_start()).unwrap_or(&[]);
        if crate::digest::sha256(prefix) != *entry.prefix_digest {
            return fail(Rule::ShardPrefixDigest, 0);
        }
        Ok(())
    }

    /// Step 5: the shard's tensors against the manifest's entries for it.
    #[cfg(feature = "sha2")]
    fn check_shard_tensors(&self, shard_entry: &ShardEntry<'_>, shard: &super::Model<'_>) -> Result<()> {
        let dir = shard.directory();
        let table = shard.digests();
        if self.shard_tensors_of(shard_entry).count() != dir.len() {
            return fail(Rule::ShardTensorCount, dir.start().saturating_add(8));
        }
        for (i, (entry, t)) in self.shard_tensors_of(shard_entry).zip(dir.iter()).enumerate() {
            if !same_tensor(&entry, &t) {
                return fail(Rule::ShardTensor, dir.start().saturating_add(crate::layout::descriptor_at(i)));
            }
            if table.and_then(|d| d.get(i)) != Some(entry.digest) {
                let at = table.map_or(0, |d| d.offset_of(i));
                return fail(Rule::ShardTensorDigest, at);
            }
        }
        Ok(())
    }
}

/// True when a shard's tensor is the one its manifest entry describes.
#[cfg(feature = "sha2")]
fn same_tensor(entry: &ManifestTensor<'_>, t: &kiln_nostd::Tensor<'_>) -> bool {
    let quant_agrees = match (entry.quant, t.quant()) {
        (None, None) => true,
        (Some(q), Some(tq)) => {
            q.scheme == tq.scheme
                && usize::from(q.axis) == tq.axis
                && q.group_size == tq.group_size
                && tq.scale.name() == Some(q.scale)
                && tq.outer.map_or(q.outer.is_empty(), |o| o.name() == Some(q.outer))
        }
        _ => false,
    };
    t.name() == Some(entry.name)
        && t.dtype() == entry.dtype
        && t.shape().iter().copied().eq(entry.dims())
        && u64::try_from(t.byte_len()).is_ok_and(|n| n == entry.byte_length)
        && t.layout().unwrap_or("") == entry.layout
        && t.block_size() == entry.block_size
        && quant_agrees
}

/// M3's dtype, rank, layout and size rules for one entry.
fn check_dtype_and_size(t: &RawTensor<'_>) -> Result<()> {
    let Some(dtype) = DType::from_code(t.dtype.0) else {
        return fail(Rule::ManifestDtype, t.dtype.1);
    };
    let rank = t.shape.0.len() / 8;
    if rank > 8 {
        return fail(Rule::ManifestRank, t.shape.1);
    }
    let mut dims = t.shape.0.chunks_exact(8).filter_map(|c| c.try_into().ok()).map(u64::from_le_bytes);
    // A zero dimension makes the product 0 whatever the others are (as in a descriptor).
    let count = if dims.clone().any(|d| d == 0) { Some(0) } else { dims.try_fold(1u64, crate::bytes::mul_u64) };
    let Some(count) = count else {
        return fail(Rule::ManifestCountOverflow, t.shape.1);
    };
    let (layout, block_size) = (t.layout.0, t.block_size);
    let fits = match dtype.is_opaque() {
        true => !layout.is_empty() && block_size != 0,
        false => layout.is_empty() && block_size == 0,
    };
    if !fits {
        return fail(Rule::ManifestLayout, t.layout.1);
    }
    let (len, len_at) = t.byte_length;
    if dtype.is_opaque() {
        if len.checked_rem(u64::from(block_size)) != Some(0) {
            return fail(Rule::ManifestLength, len_at);
        }
        return Ok(());
    }
    match dtype.byte_length(count) {
        None => fail(Rule::ManifestSizeOverflow, len_at),
        Some(expected) if expected != len => fail(Rule::ManifestLength, len_at),
        Some(_) => Ok(()),
    }
}

/// Name uniqueness for shard names or tensor names: a table in scratch
/// (names found through their offsets, kept in the scratch's tail) or,
/// without enough scratch, every pair.
struct Names<'s> {
    table: Option<(NameTable<'s>, &'s mut [u32])>,
}

/// Looks names up after [`Names`] has seen all of them.
struct Lookup<'s> {
    table: Option<(LookupTable<'s>, &'s [u32])>,
}

fn name_at(buf: &[u8], word: usize) -> &[u8] {
    let mut c = Cursor { buf, at: word };
    c.run().0
}

impl<'s> Names<'s> {
    fn new(scratch: Option<&'s mut [u32]>, count: usize) -> Names<'s> {
        let words = table_words(count);
        let table = scratch.filter(|s| s.len() >= words.saturating_add(count)).and_then(|s| {
            let (head, offsets) = s.split_at_mut(words);
            Some((NameTable::new(head, count)?, offsets))
        });
        Names { table }
    }

    /// Records name `i` (its length word at `word`); true when an earlier
    /// one is the same. Without a table, `earlier` compares it with each
    /// earlier name.
    fn repeats(&mut self, i: usize, word: usize, buf: &[u8], earlier: impl FnOnce() -> bool) -> bool {
        let Some((table, offsets)) = self.table.as_mut() else {
            return earlier();
        };
        if let Some(slot) = offsets.get_mut(i) {
            // A manifest is at most 4 GiB (its lengths are u32 words): offsets fit.
            *slot = u32::try_from(word).unwrap_or(u32::MAX);
        }
        let offsets: &[u32] = offsets;
        let name_of = |j: usize| offsets.get(j).map_or(&[][..], |&w| name_at(buf, usize_from_u32(w)));
        table.insert(i, 0, name_of).is_some()
    }

    fn freeze(self) -> Lookup<'s> {
        Lookup { table: self.table.map(|(t, offsets)| (t.freeze(), &*offsets)) }
    }
}

impl Lookup<'_> {
    /// The index of the tensor named `name`.
    fn find(&self, name: &str, m: &Manifest<'_>) -> Option<usize> {
        match &self.table {
            Some((table, offsets)) => {
                let name_of = |j: usize| offsets.get(j).map_or(&[][..], |&w| name_at(m.buf, usize_from_u32(w)));
                table.find(name.as_bytes(), 0, name_of)
            }
            None => m.tensors().position(|t| t.name == name),
        }
    }
}
