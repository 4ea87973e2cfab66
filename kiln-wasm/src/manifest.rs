//! Sharded models (`spec/model-file.md`, "Sharded models") for JavaScript:
//! the manifest checked by the core, its tensor table in the layout of
//! [`table`](crate::table), and each shard held against it from the shard's
//! bytes before its payload region ([`check_shard_prefix`]).
//!
//! The manifest is copied into wasm memory whole (every byte of it is
//! checked: steps M1 to M5) and kept there, parsed once. JavaScript holds
//! the same bytes and reads names from them: the table gives every name as
//! a byte range of the manifest (its "heap" is the whole manifest).
//!
//! A shard is checked when JavaScript has fetched its first bytes (frame,
//! fields, directory prefix) and knows its length; the core's verdict is
//! steps 1 to 6 of "Opening a shard of a manifest". Its steps 9d to 12 come
//! later, per tensor fetched: the block's steps 10 to 12 by a
//! [`Session`](crate::validator::Session) over the shard's bytes at hand,
//! the tensor's digest by [`DigestCore`].

use std::collections::HashMap;

use kiln_model::{check_shard_prefix, Manifest, ManifestLayout, ManifestTensor};
use kiln_model::{Error, Rule};
use kiln_nostd::digest::{TensorHasher, DIGEST_LEN};
use kiln_nostd::{Limits, Parser};

use crate::conv::{u32_of, u64_of, usize_sat};
use crate::table::{extra, heap_range, meta, slot, Entry, Extra, META, SLOTS};
use crate::ErrorInfo;

/// wasm memory cannot hold the manifest.
const NO_MEMORY: ErrorInfo = ErrorInfo {
    code: "LIMIT",
    offset: 0,
    rule: "WasmMemory",
    description: "wasm memory cannot hold a copy of the manifest",
};

/// Bytes of the smallest tensor entry in a manifest (a one-byte name, no
/// dims, no layout, no quantization): bounds the tensor count by the bytes held.
const MIN_TENSOR_ENTRY: usize = 32;
/// Bytes of the smallest shard entry (a one-byte name, its length, an empty digest).
const MIN_SHARD_ENTRY: usize = 17;

/// A checked manifest kept in wasm memory: its bytes, and where their
/// parts are (the core's `ManifestLayout`), so the manifest is viewed again
/// on each call with no borrow held across calls.
#[derive(Default)]
pub struct ManifestCore {
    buf: Box<[u8]>,
    layout: Option<ManifestLayout>,
    /// Computed on first use (a shard's check): the SHA-256 of most of the
    /// manifest, 30 ms and more for 100,000 tensors, is no part of opening it.
    model_id: Option<[u8; DIGEST_LEN]>,
    table: Vec<u32>,
    shard_of: Vec<u32>,
    shard_table: Vec<u32>,
    /// The name checks' scratch, kept from open to open: growing it zeroes
    /// only what is new, and the name table clears the part it uses.
    scratch: Vec<u32>,
    error: Option<ErrorInfo>,
}

/// Offset of `part` (a slice of `whole`) in `whole`.
fn offset_in(whole: &[u8], part: &[u8]) -> u32 {
    u32_of(part.as_ptr().addr().wrapping_sub(whole.as_ptr().addr()))
}

impl ManifestCore {
    fn fail(&mut self, e: ErrorInfo) -> ErrorInfo {
        self.error = Some(e);
        e
    }

    /// The manifest accepted last.
    fn get(&self) -> Option<Manifest<'_>> {
        self.layout?.view(&self.buf)
    }

    /// Checks `bytes` as a manifest (the frame, the Frozen rules, M1 to M5)
    /// and keeps a copy with its tensor table.
    pub fn parse(&mut self, bytes: &[u8], limits: Limits) -> Result<(), ErrorInfo> {
        let mut copy = Vec::new();
        if copy.try_reserve_exact(bytes.len()).is_err() {
            return Err(self.fail(NO_MEMORY));
        }
        copy.extend_from_slice(bytes);
        self.parse_owned(copy, limits)
    }

    /// [`parse`](Self::parse) of bytes already in wasm memory (JavaScript's
    /// copy, handed over: a manifest of many MiB is copied once, not twice).
    pub fn parse_owned(&mut self, bytes: Vec<u8>, limits: Limits) -> Result<(), ErrorInfo> {
        self.layout = None;
        self.model_id = None;
        self.error = None;
        self.table.clear();
        self.shard_of.clear();
        self.buf = bytes.into_boxed_slice();
        let buf: &[u8] = &self.buf;
        // Linear-time name checks: scratch for as many entries as the bytes can hold.
        let most = buf.len().checked_div(MIN_SHARD_ENTRY.min(MIN_TENSOR_ENTRY)).unwrap_or(0);
        let words = Manifest::scratch_len(most);
        if self.scratch.len() < words
            && self.scratch.try_reserve_exact(words.saturating_sub(self.scratch.len())).is_ok()
        {
            self.scratch.resize(words, 0);
        }
        let scratch = self.scratch.get_mut(..words);
        let m = match Manifest::parse_with(buf, &limits, scratch) {
            Ok(m) => m,
            Err(e) => {
                self.error = Some(e.into());
                return Err(e.into());
            }
        };
        build_table(&m, buf, &mut self.table, &mut self.shard_of);
        self.layout = Some(m.layout());
        Ok(())
    }

    /// The metadata entries (padding key left out): `[key_at, key_len,
    /// value_at, value_len]` each, byte ranges of the manifest.
    pub fn metadata(&self) -> Vec<u32> {
        let Some(m) = self.get() else { return Vec::new() };
        let buf: &[u8] = &self.buf;
        let mut out = Vec::new();
        for (k, v) in m.metadata() {
            let (k, v) = (k.as_bytes(), v.as_bytes());
            out.extend_from_slice(&[offset_in(buf, k), u32_of(k.len()), offset_in(buf, v), u32_of(v.len())]);
        }
        out
    }

    /// The shards in order: `[name_at, name_len, length]` each (the name a
    /// byte range of the manifest, the file length in bytes).
    pub fn shards(&self) -> Vec<f64> {
        let Some(m) = self.get() else { return Vec::new() };
        let buf: &[u8] = &self.buf;
        let mut out = Vec::new();
        for s in m.shards() {
            let name = s.name.as_str().as_bytes();
            out.extend_from_slice(&[
                f64::from(offset_in(buf, name)),
                f64::from(u32_of(name.len())),
                crate::conv::f64_of(s.length),
            ]);
        }
        out
    }

    /// The tensor table ([`table`](crate::table)'s layout; payload offsets
    /// unknown until the shard is opened: `u32::MAX` pairs).
    pub fn table(&self) -> &[u32] {
        &self.table
    }

    /// The 1-based shard of every tensor, in table order.
    pub fn shard_of(&self) -> &[u32] {
        &self.shard_of
    }

    /// Tensor `i`'s digest.
    pub fn digest(&self, i: usize) -> Option<[u8; DIGEST_LEN]> {
        self.get()?.digests().get(i).copied()
    }

    /// The model id every shard must record.
    pub fn model_id(&mut self) -> [u8; DIGEST_LEN] {
        if let Some(id) = self.model_id {
            return id;
        }
        let id = self.get().map_or([0; DIGEST_LEN], |m| m.model_id());
        if self.layout.is_some() {
            self.model_id = Some(id);
        }
        id
    }

    /// Steps 1 to 6 for shard `index` (1-based): `prefix` holds its file
    /// from byte 0 at least up to its payload region (`None`: it does not
    /// exist), `file_len` its length. Returns the shard's tensor table
    /// (offsets absolute in the shard's file).
    pub fn check_shard(
        &mut self,
        index: u32,
        prefix: Option<&[u8]>,
        file_len: u64,
        limits: Limits,
    ) -> Result<&[u32], ErrorInfo> {
        self.error = None;
        let gone =
            ErrorInfo { code: "LIMIT", offset: 0, rule: "NoManifest", description: "no manifest has been accepted" };
        let id = self.model_id();
        let Some(m) = self.get() else { return Err(self.fail(gone)) };
        let Some(entry) = m.shard(index) else { return Err(self.fail(gone)) };
        let count = m.shard_tensors_of(&entry).count();
        let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(u32::try_from(count).unwrap_or(u32::MAX))];
        let parser = Parser::new().limits(limits).scratch(&mut scratch);
        match check_shard_prefix(&m, &id, &entry, prefix, file_len, parser) {
            Ok(shard) => {
                let dir = shard.directory();
                crate::table::build(&dir, u64_of(dir.start()), &mut self.shard_table);
                Ok(&self.shard_table)
            }
            Err(e) => Err(self.fail(e.into())),
        }
    }

    /// The PATH error for shard `index`'s name (a reader that cannot place
    /// it inside the manifest's folder): `ShardName` at its length word.
    pub fn refuse_name(&mut self, index: u32) -> ErrorInfo {
        let buf: &[u8] = &self.buf;
        let at = self
            .get()
            .and_then(|m| m.shard(index))
            .map_or(0, |s| offset_in(buf, s.name.as_str().as_bytes()).saturating_sub(4));
        self.fail(Error::new(Rule::ShardName, usize::try_from(at).unwrap_or(0)).into())
    }

    /// The last error.
    pub fn error(&self) -> Option<ErrorInfo> {
        self.error
    }
}

/// The manifest's tensor table in [`table`](crate::table)'s layout, with
/// the manifest as the name heap, and each tensor's shard.
fn build_table(m: &Manifest<'_>, buf: &[u8], out: &mut Vec<u32>, shard_of: &mut Vec<u32>) {
    let count = m.tensor_count();
    let none = u32::MAX;
    out.clear();
    // The rows and the dims of rank-2 tensors reserved at once (growing a
    // table of many MiB copies it).
    let rows_end = META.saturating_add(count.saturating_mul(SLOTS));
    out.reserve(rows_end.saturating_add(count.saturating_mul(4)));
    out.push(u32_of(count));
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0]); // start, block length, payload: none
    out.extend_from_slice(&[0, u32_of(buf.len()), 0]); // the heap: the whole manifest
    out.resize(rows_end, 0);
    // The rows first, then the indices of the scale and outer tensors of
    // the quantized ones, found among the rows (M4: in the quantized
    // tensor's own shard) by the names' byte ranges the rows hold: a map
    // of only the names referred to, and no entry of the manifest read
    // again. M3 and M4 hold: names are unique and every one referred to exists.
    let mut quantized: Vec<(usize, usize, &str, &str)> = Vec::new();
    shard_of.clear();
    shard_of.reserve(count);
    for t in m.tensors() {
        shard_of.push(t.shard);
        let extra_at = push_row(&t, buf, out);
        if let (Some(q), Some(at)) = (t.quant, extra_at) {
            quantized.push((t.index, at, q.scale, q.outer));
        }
    }
    if quantized.is_empty() {
        return;
    }
    let mut index: HashMap<&[u8], u32> = HashMap::new();
    let mut lengths: Vec<usize> = Vec::new();
    let mut shards: Vec<u32> = Vec::new();
    // Each distinct length and shard once (few, however many tensors are
    // quantized): every row is held against them.
    for &(i, _, scale, outer) in &quantized {
        for name in [scale, outer].into_iter().filter(|n| !n.is_empty()) {
            index.insert(name.as_bytes(), none);
            if !lengths.contains(&name.len()) {
                lengths.push(name.len());
            }
        }
        if let Some(&s) = shard_of.get(i).filter(|s| !shards.contains(s)) {
            shards.push(s);
        }
    }
    for (i, shard) in shard_of.iter().enumerate() {
        let at = META.saturating_add(i.saturating_mul(SLOTS));
        let row = out.get(at..at.saturating_add(SLOTS)).unwrap_or_default();
        let (Some(&name_at), Some(&name_len)) = (row.get(slot::NAME_AT), row.get(slot::NAME_LEN)) else {
            continue;
        };
        let len = usize_sat(u64::from(name_len));
        if !lengths.contains(&len) || !shards.contains(shard) {
            continue;
        }
        let from = usize_sat(u64::from(name_at));
        if let Some(slot) = buf.get(from..from.saturating_add(len)).and_then(|n| index.get_mut(n)) {
            *slot = u32_of(i);
        }
    }
    let find = |name: &str| if name.is_empty() { none } else { index.get(name.as_bytes()).copied().unwrap_or(none) };
    for (_, extra_at, scale, outer) in quantized {
        if let Some(record) = out.get_mut(extra_at..extra_at.saturating_add(crate::table::EXTRA_SLOTS)) {
            if let Some(s) = record.get_mut(extra::SCALE) {
                *s = find(scale);
            }
            if let Some(o) = record.get_mut(extra::OUTER) {
                *o = find(outer);
            }
        }
    }
    debug_assert_eq!(meta::HEAP_END, 8);
}

/// Tensor `t`'s row of the table, its dims and, for an opaque layout or
/// quantization, its extra record, whose index it returns. A function of
/// its own, not inlined into the loop: called once per tensor, it is
/// compiled by the browser's optimizing tier while the first open is still
/// running (a loop inlined into one long call runs all of that call in the
/// baseline tier). The payload offset (known once the shard is read) and
/// the scale and outer indices (filled in by the caller) are left absent.
#[inline(never)]
fn push_row(t: &ManifestTensor<'_>, buf: &[u8], out: &mut Vec<u32>) -> Option<usize> {
    let none = u32::MAX;
    let plain = t.layout.is_empty() && t.block_size == 0 && t.quant.is_none();
    let extra = (!plain).then(|| {
        let (scheme_axis, group) = match t.quant {
            None => (0, 0),
            Some(q) => (u32::from(q.scheme) | u32::from(q.axis) << 16, q.group_size),
        };
        let layout = t.layout.as_bytes();
        Extra {
            layout: heap_range(offset_in(buf, layout), u32_of(layout.len())),
            block_size: t.block_size,
            scheme_axis,
            group,
            scale: none,
            outer: none,
        }
    });
    let name = t.name.as_bytes();
    let rank = u32::try_from(t.rank()).unwrap_or(0);
    let entry = Entry {
        dtype_rank: u32::from(t.dtype.code()) | rank << 16,
        offset: u64::MAX,
        length: t.byte_length,
        name: [offset_in(buf, name), u32_of(name.len())],
        extra,
    };
    crate::table::put(out, t.index, t.dims(), entry)
}

/// Bytes JavaScript copies into a [`DigestCore`] per call.
pub const DIGEST_WINDOW: usize = 65_536;

/// One tensor's payload hashed as JavaScript copies it in (a ranged load
/// reads the payload anyway), compared with its digest: the core's
/// [`TensorHasher`]; a mismatch is DIGEST (`PayloadDigest`) at the tensor's
/// first payload byte.
pub struct DigestCore {
    hasher: TensorHasher,
    window: Vec<u8>,
    error: Option<ErrorInfo>,
}

impl Default for DigestCore {
    fn default() -> Self {
        DigestCore { hasher: TensorHasher::new(), window: vec![0; DIGEST_WINDOW], error: None }
    }
}

impl DigestCore {
    /// The window JavaScript copies bytes into.
    pub fn window(&mut self) -> &mut [u8] {
        &mut self.window
    }

    /// Hashes the first `n` bytes of the window.
    pub fn update(&mut self, n: usize) {
        let bytes = self.window.get(..n.min(DIGEST_WINDOW)).unwrap_or_default();
        self.hasher.update(bytes);
    }

    /// Hashes `bytes` (host tests).
    pub fn update_bytes(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
    }

    /// Compares the bytes hashed since the last call with `expected` (32
    /// bytes); the tensor's payload starts at `offset` in its file. Starts over.
    pub fn check(&mut self, expected: &[u8], offset: u64) -> Result<(), ErrorInfo> {
        self.error = None;
        let digest = <[u8; DIGEST_LEN]>::try_from(expected).unwrap_or([0; DIGEST_LEN]);
        // `matches` starts the hasher over whatever the expected bytes are.
        let ok = self.hasher.matches(&digest) && expected.len() == DIGEST_LEN;
        if ok {
            return Ok(());
        }
        let e = ErrorInfo::from(Error::at(kiln_nostd::Rule::PayloadDigest, offset));
        self.error = Some(e);
        Err(e)
    }

    /// The SHA-256 of the bytes hashed since the last call. Starts over.
    pub fn finish(&mut self) -> [u8; DIGEST_LEN] {
        self.hasher.finish()
    }

    /// The last error.
    pub fn error(&self) -> Option<ErrorInfo> {
        self.error
    }
}
