//! # kiln-wasm
//!
//! The Kiln v2 validator (`kiln-nostd`) for JavaScript. This crate is the
//! low-level half: the npm package in `pkg/` (sources in `js/`) wraps it in
//! the public API (`parseDirectory`, `DirectoryLoader`, `openRemote`, ...).
//!
//! JavaScript never receives a view of wasm memory. A tensor directory is
//! checked by a [`Validator`] (`kiln_nostd::Incremental` with its memory,
//! see [`validator`]):
//!
//! 1. [`header_info`] reads the 64-byte header: how much prefix memory the
//!    block needs (header, descriptors, name heap, padding) and its length.
//! 2. JavaScript creates a [`Validator`] of that size and copies bytes in
//!    through its small fixed window: the prefix, then, of the payload, only
//!    the bytes a rule reads ([`Validator::next_needed`]: gap bytes, bool
//!    tensors, odd packed last bytes); it passes over the rest with
//!    [`Validator::skip`]. A gigabyte of payload costs a few calls.
//! 3. [`Validator::finish`] gives the core's verdict on all the bytes: a
//!    compact table (see [`table`]: offsets, dtypes, shapes, name positions)
//!    or an error with the core's code, absolute offset and rule.
//!
//! JavaScript then builds typed arrays over the caller's own `ArrayBuffer`.
//! wasm memory grows with the directory, not with the file.
//!
//! A model file (`spec/model-file.md`: a frame, string metadata, then the
//! block) is opened by content: [`Head::check`] gets the file's first bytes
//! and says whether it is a model file and, for one, checks the frame and the
//! metadata with the core and says where the block starts (see [`model`]);
//! the block then goes through a [`Validator`] placed there with
//! [`Validator::place_at`], so error and table offsets are absolute in the file.
//!
//! Frozen values (`decodeValue`, `decodeFrame` in `js/frozen.js`) go another
//! way, since every byte of a value is checked: [`FrozenChecker::begin`]
//! parses the type text and reserves room, JavaScript copies the whole value
//! in, [`FrozenChecker::check`] runs `kiln_nostd::frozen::Reader` over it and
//! returns the type's nodes and, for each `tensors` value, its [`table`] (see
//! [`frozen`]). JavaScript walks the caller's bytes with that description, so
//! every typed array and tensor view it returns is over the caller's buffer.

// The core's lint set (kiln-nostd/src/lib.rs) on top of the workspace's
// (missing docs, undocumented unsafe), so hostile input cannot panic here
// either; narrow `allow`s (in `conv`) say why where one cannot fit.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::as_conversions
    )
)]
// The open module's build (build.sh: no `remote`, no `frozen`) leaves the
// helpers of the other exports unused.
#![cfg_attr(not(all(feature = "open", feature = "remote", feature = "frozen")), allow(unused_imports, dead_code))]

use kiln_nostd::frozen::{Reader, Schema};
use kiln_nostd::wire::header::{DESCRIPTOR_LEN, HEADER_LEN};
#[cfg(feature = "testing")]
use kiln_nostd::{directory::scratch_len, dtype::Width, wire::Header, DType, Parser};
use kiln_nostd::{wire::layout, Error, Limits};
use wasm_bindgen::prelude::*;

pub mod conv;
pub mod frozen;
pub mod manifest;
pub mod model;
pub mod table;
pub mod texts;
pub mod validator;
#[cfg(feature = "values")]
pub mod values;

use conv::{addr, f64_of, i32_of, u64_of_f64, usize_sat};
use validator::Session;

/// An error as JavaScript sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorInfo {
    /// The spec's code (`"TYPE"`, ...).
    pub code: &'static str,
    /// Absolute byte offset in the caller's buffer (or the remote file).
    pub offset: u64,
    /// The core's rule id (`"NonzeroGap"`, ...), or a rule of this crate.
    pub rule: &'static str,
    /// One line a person understands.
    pub description: &'static str,
}

impl From<Error> for ErrorInfo {
    fn from(e: Error) -> Self {
        kiln_model::Error::from(e).into()
    }
}

impl From<kiln_model::Error> for ErrorInfo {
    fn from(e: kiln_model::Error) -> Self {
        let (rule, description) = texts::of(e.rule());
        ErrorInfo { code: e.code().as_str(), offset: e.offset_u64(), rule, description }
    }
}

fn limits_of(count_cap: u32, byte_cap: u32) -> Limits {
    Limits::DEFAULT.with_count_cap(count_cap).with_byte_cap(byte_cap)
}

fn random_seed() -> u64 {
    #[cfg(target_arch = "wasm32")]
    let seed = u64_of_f64(js_sys::Math::random() * 9.007_199_254_740_991e15);
    #[cfg(not(target_arch = "wasm32"))]
    let seed = 0x6b69_6c6e;
    seed
}

#[cfg(feature = "open")]
/// What the first bytes of a block say: `[prefix, blockLength, payloadBase,
/// count]`, -1 where unknown. `prefix` is the memory a [`Validator`] needs
/// (64 for a header that fails steps 1 to 4; -1 with fewer than 64 bytes).
#[wasm_bindgen]
pub fn header_info(head: &[u8], count_cap: u32, byte_cap: u32) -> js_sys::Float64Array {
    let n = validator::need(head, &limits_of(count_cap, byte_cap));
    let opt = |v: Option<u64>| v.map_or(-1.0, f64_of);
    js_sys::Float64Array::from(&[opt(n.prefix), opt(n.block_len), opt(n.payload_base), f64::from(n.count)][..])
}

/// Bytes JavaScript copies in per call: the validator's window.
pub const WINDOW: usize = 65_536;

#[cfg(feature = "open")]
/// One standalone tensor directory being checked, fed by JavaScript (see the
/// crate docs). Methods that can reject return -1 then; the error getters
/// say why. Call `free()` when done (the package does).
#[wasm_bindgen]
pub struct Validator {
    session: Session,
    window: Vec<u8>,
    /// The planned runs, and the same as `[start, length]` numbers for JavaScript.
    runs: Vec<[u64; 2]>,
    plan: Vec<f64>,
}

/// Runs planned per [`Validator::plan`] call.
const PLAN_RUNS: usize = 4096;

#[cfg(feature = "open")]
#[wasm_bindgen]
impl Validator {
    /// A validator with `mem` bytes of prefix memory (from [`header_info`])
    /// and name scratch for `count` tensors.
    #[wasm_bindgen(constructor)]
    pub fn new(mem: f64, count: u32, count_cap: u32, byte_cap: u32) -> Validator {
        let session = Session::new(u64_of_f64(mem), count, limits_of(count_cap, byte_cap), random_seed());
        Validator { session, window: vec![0; WINDOW], runs: Vec::new(), plan: Vec::new() }
    }

    /// Starts over on a new block, as `new` would, reusing the memory this
    /// validator holds when it is large enough.
    pub fn reset(&mut self, mem: f64, count: u32, count_cap: u32, byte_cap: u32) {
        self.session.reset(u64_of_f64(mem), count, limits_of(count_cap, byte_cap), random_seed());
    }

    /// Places the block at absolute offset `start` of the file (after a model
    /// file's frame and metadata): error and table offsets become absolute.
    /// Call after `new` or `reset`; feed, skip and the like stay in block offsets.
    pub fn place_at(&mut self, start: f64) {
        self.session.place_at(u64_of_f64(start));
    }

    /// Checks the payload against a digest table too (step 9d; see
    /// [`Session::digests`]): before the first byte. False when refused.
    pub fn set_digests(&mut self, table: &[u8]) -> bool {
        self.session.digests(table)
    }

    /// Address of the window in wasm memory (JavaScript copies bytes there).
    pub fn window_ptr(&self) -> u32 {
        addr(self.window.as_ptr())
    }

    /// Length of the window.
    pub fn window_len(&self) -> u32 {
        conv::u32_of(WINDOW)
    }

    /// Feeds the first `n` bytes of the window, then passes over up to
    /// `skip` bytes no rule reads (as [`skip`](Self::skip)); returns how
    /// many were passed over, or -1 on a rejection. One call per needed run.
    pub fn feed(&mut self, n: u32, skip: f64) -> f64 {
        let n = usize_sat(u64::from(n)).min(WINDOW);
        if self.session.feed(self.window.get(..n).unwrap_or_default()).is_err() {
            return -1.0;
        }
        if skip > 0.0 {
            self.skip(skip)
        } else {
            0.0
        }
    }

    /// Plans the runs of bytes the verdict reads next, up to those that end
    /// by block offset `limit` and fit the window together: returns how
    /// many; [`plan_ptr`](Self::plan_ptr) holds `[start, length]` (block
    /// offsets) for each. JavaScript copies their bytes into the window one
    /// after another, then calls [`feed_runs`](Self::feed_runs): one call
    /// for many gaps instead of one each. 0: no plan, go byte by byte.
    pub fn plan(&mut self, limit: f64) -> u32 {
        if self.runs.is_empty() {
            self.runs = vec![[0; 2]; PLAN_RUNS];
            self.plan = vec![0.0; PLAN_RUNS.saturating_mul(2)];
        }
        let n = self.session.plan(u64_of_f64(limit), conv::u64_of(WINDOW), &mut self.runs);
        for (r, p) in self.runs.iter().take(n).zip(self.plan.chunks_exact_mut(2)) {
            if let [start, len] = p {
                *start = f64_of(r[0]);
                *len = f64_of(r[1].saturating_sub(r[0]));
            }
        }
        conv::u32_of(n)
    }

    /// Where the plan's numbers are in wasm memory (`f64`s).
    pub fn plan_ptr(&self) -> u32 {
        addr(self.plan.as_ptr())
    }

    /// Takes the first `n` planned runs, their bytes in the window one
    /// after another. Returns how many were taken (fewer: go on byte by
    /// byte from where the validator stands), or -1 on a rejection.
    pub fn feed_runs(&mut self, n: u32) -> i32 {
        let runs = self.runs.get(..usize_sat(u64::from(n))).unwrap_or_default();
        match self.session.feed_runs(runs, &self.window) {
            Ok(k) => i32::try_from(k).unwrap_or(i32::MAX),
            Err(_) => -1,
        }
    }

    /// Advances to block offset `to` without the bytes: passes over what no
    /// rule reads, zeros for what one does. 0 or -1.
    pub fn pass_unknown(&mut self, to: f64) -> i32 {
        match self.session.pass_unknown(u64_of_f64(to)) {
            Ok(()) => 0,
            Err(_) => -1,
        }
    }

    /// Passes over up to `n` bytes, stopping at the next byte a rule reads;
    /// returns how many (fewer than `n`: the byte after them is needed), or
    /// -1 (after a rejection the bytes are still counted).
    pub fn skip(&mut self, n: f64) -> f64 {
        match self.session.skip(u64_of_f64(n)) {
            Ok(k) => f64_of(k),
            Err(_) => -1.0,
        }
    }

    /// Block offset of the next byte a rule reads; `Infinity` when none.
    pub fn next_needed(&self) -> f64 {
        match self.session.next_needed() {
            u64::MAX => f64::INFINITY,
            n => f64_of(n),
        }
    }

    /// Bytes taken so far (fed and passed over).
    pub fn fed(&self) -> f64 {
        f64_of(self.session.fed())
    }

    /// Builds the tensor table once the directory prefix is in and valid;
    /// returns its length in `u32`s (read it at [`table_ptr`](Self::table_ptr)
    /// and copy it out before the next call), or -1.
    pub fn table(&mut self) -> i32 {
        self.session.table().map_or(-1, |t| i32_of(t.len()))
    }

    /// The verdict on all the bytes taken: the table's length (as for
    /// [`table`](Self::table)), or -1 (see the error getters). Ends the validator.
    pub fn finish(&mut self) -> i32 {
        self.session.finish().map_or(-1, |t| i32_of(t.len()))
    }

    /// Where the table is in wasm memory.
    pub fn table_ptr(&mut self) -> u32 {
        addr(self.session.table_ptr())
    }
}

/// The Frozen value checker without the JavaScript glue (host-testable).
#[derive(Default)]
pub struct FrozenCore {
    /// The copy of the value (reused; grows to the largest value checked).
    input: Vec<u8>,
    input_len: usize,
    type_text: String,
    table: Vec<u32>,
    out: Vec<u32>,
    error: Option<ErrorInfo>,
    /// The last error is about the type text (offset into it), not the input.
    error_in_type: bool,
}

impl FrozenCore {
    fn fail(&mut self, e: ErrorInfo) -> ErrorInfo {
        self.error = Some(e);
        e
    }

    /// Step 1: checks `type_text` and reserves `len` bytes for a copy of the
    /// value; a bad type text is TYPE or LIMIT with
    /// [`error_in_type`](Self::error_in_type) set.
    pub fn begin(&mut self, type_text: &str, len: u64) -> Result<(), ErrorInfo> {
        self.error = None;
        self.error_in_type = false;
        self.input_len = 0;
        if let Err(e) = Schema::<{ frozen::NODES }>::parse(type_text) {
            self.error_in_type = true;
            return Err(self.fail(e.into()));
        }
        self.type_text.clear();
        self.type_text.push_str(type_text);
        let memory = ErrorInfo {
            code: "LIMIT",
            offset: 0,
            rule: "WasmMemory",
            description: "wasm memory cannot hold a copy of the value",
        };
        let Ok(len) = usize::try_from(len) else { return Err(self.fail(memory)) };
        if self.input.len() < len {
            if self.input.try_reserve_exact(len.saturating_sub(self.input.len())).is_err() {
                return Err(self.fail(memory));
            }
            self.input.resize(len, 0);
        }
        self.input_len = len;
        Ok(())
    }

    /// The bytes the value is copied into after [`begin`](Self::begin).
    pub fn input(&mut self) -> &mut [u8] {
        let len = self.input_len;
        // `begin` grew `input` to at least `input_len`.
        self.input.get_mut(..len).unwrap_or_default()
    }

    /// Step 2: validates the copied value (with the 16-byte frame first when
    /// `framed`) and returns the description [`frozen`] documents;
    /// `with_schema` false leaves the type's nodes out.
    pub fn check(&mut self, framed: bool, limits: Limits, with_schema: bool) -> Result<&[u32], ErrorInfo> {
        let len = core::mem::take(&mut self.input_len);
        let text = core::mem::take(&mut self.type_text);
        let mut out = core::mem::take(&mut self.out);
        out.clear();
        let result = match Schema::<{ frozen::NODES }>::parse(&text) {
            Err(e) => {
                self.error_in_type = true;
                Err(ErrorInfo::from(e))
            }
            Ok(schema) => {
                out.push(0);
                if with_schema {
                    let n = frozen::schema_nodes(schema.root(), &text, &mut out);
                    if let Some(s) = out.first_mut() {
                        *s = n;
                    }
                }
                let count_at = out.len();
                out.push(0);
                let buf: &[u8] = self.input.get(..len).unwrap_or_default();
                match Reader::new().limits(limits).framed(framed).read(buf, &schema) {
                    Ok(value) => {
                        let n = frozen::tables(value, &mut self.table, &mut out);
                        if let Some(s) = out.get_mut(count_at) {
                            *s = n;
                        }
                        Ok(())
                    }
                    Err(e) => Err(ErrorInfo::from(e)),
                }
            }
        };
        self.type_text = text;
        self.out = out;
        match result {
            Ok(()) => Ok(&self.out),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The last error.
    pub fn error(&self) -> Option<ErrorInfo> {
        self.error
    }

    /// True when the last error's offset is a byte of the type text.
    pub fn error_in_type(&self) -> bool {
        self.error_in_type
    }
}

#[cfg(feature = "frozen")]
/// The Frozen value checker JavaScript drives (one per module instance).
#[wasm_bindgen]
#[derive(Default)]
pub struct FrozenChecker {
    core: FrozenCore,
}

#[cfg(feature = "frozen")]
#[wasm_bindgen]
impl FrozenChecker {
    /// A checker with no memory yet (it grows to the largest value checked).
    #[wasm_bindgen(constructor)]
    pub fn new() -> FrozenChecker {
        FrozenChecker::default()
    }

    /// Checks the type text and reserves `len` bytes for a copy of the
    /// value; returns where to copy it, or -1 (see the error getters).
    pub fn begin(&mut self, type_text: &str, len: f64) -> f64 {
        // Negative and NaN lengths cannot be had: asked for as too large (LIMIT).
        let len = if len >= 0.0 { u64_of_f64(len) } else { u64::MAX };
        match self.core.begin(type_text, len) {
            Ok(()) => f64::from(addr(self.core.input().as_ptr())),
            Err(_) => -1.0,
        }
    }

    /// Validates the copy; the description (a JavaScript-owned copy, layout
    /// in `frozen.rs`) or `undefined`.
    pub fn check(
        &mut self,
        framed: bool,
        count_cap: u32,
        byte_cap: u32,
        with_schema: bool,
    ) -> Option<js_sys::Uint32Array> {
        self.core.check(framed, limits_of(count_cap, byte_cap), with_schema).ok().map(js_sys::Uint32Array::from)
    }

    /// True when the last error's offset is a byte of the type text.
    pub fn error_in_type(&self) -> bool {
        self.core.error_in_type()
    }
}

#[cfg(feature = "open")]
/// The first bytes of a file, checked as a model file's frame and metadata
/// (see [`model`]); one per module instance.
#[wasm_bindgen]
#[derive(Default)]
pub struct Head {
    core: model::HeadCore,
}

#[cfg(feature = "open")]
#[wasm_bindgen]
impl Head {
    /// A head checker (its entries are kept until the next check).
    #[wasm_bindgen(constructor)]
    pub fn new() -> Head {
        Head::default()
    }

    /// Checks `bytes`, the first bytes of a file of `total` bytes (Infinity
    /// when unknown). Returns `[kind, value]`: kind 0 a plain directory
    /// (block at 0), 1 a model file (value: where its block starts), 2 more
    /// bytes needed (value: at least this many from the start), -1 rejected
    /// (see the error getters).
    pub fn check(&mut self, bytes: &[u8], total: f64, count_cap: u32, byte_cap: u32) -> js_sys::Float64Array {
        let total = if total.is_finite() { u64_of_f64(total) } else { u64::MAX };
        let r = match self.core.check(bytes, total, limits_of(count_cap, byte_cap)) {
            model::Head::Plain => [0.0, 0.0],
            model::Head::Model(start) => [1.0, f64_of(start)],
            model::Head::Need(n) => [2.0, f64_of(n)],
            model::Head::Manifest => [3.0, 0.0],
            model::Head::Error(_) => [-1.0, 0.0],
        };
        js_sys::Float64Array::from(&r[..])
    }

    /// The metadata entries of the model file just checked, padding key left
    /// out: `[key_at, key_len, value_at, value_len]` each, byte ranges of the file.
    pub fn entries(&self) -> js_sys::Uint32Array {
        js_sys::Uint32Array::from(self.core.entries())
    }

    /// Length of the padding key's value (0 without it).
    pub fn padding(&self) -> f64 {
        f64_of(self.core.padding())
    }

    /// The record type of the model file just checked: 0 plain, 1 digests, 2 shard.
    pub fn kind(&self) -> i32 {
        model::kind_code(self.core.kind())
    }

    /// Its digest table: `[at, length]` (bytes of the file), or `[-1, 0]` for a plain record.
    pub fn digests(&self) -> js_sys::Float64Array {
        let r = self.core.digests().map_or([-1.0, 0.0], |(at, len)| [f64_of(at), f64_of(len)]);
        js_sys::Float64Array::from(&r[..])
    }

    /// A shard record's `[model_at, index, count]` (its model id is the 32
    /// bytes at `model_at`), or empty for another record type.
    pub fn shard(&self) -> js_sys::Float64Array {
        let r: Vec<f64> = self.core.shard().map_or(Vec::new(), |s| s.iter().map(|&v| f64_of(v)).collect());
        js_sys::Float64Array::from(&r[..])
    }
}

#[cfg(feature = "open")]
/// The record type `head` (its first 16 bytes) starts as, by the frame's
/// schema hash (`kiln_model::Kind::of`): 0 plain, 1 digests, 2 shard,
/// 3 manifest, -1 none of them (a plain directory, another Frozen type).
#[wasm_bindgen]
pub fn model_kind(head: &[u8]) -> i32 {
    model::kind_code(kiln_model::Kind::of(head))
}

#[cfg(feature = "remote")]
/// A sharded model's manifest checked by the core and kept in wasm memory
/// (see [`manifest`]); shards are checked against it one at a time.
#[wasm_bindgen]
#[derive(Default)]
pub struct ManifestReader {
    core: manifest::ManifestCore,
}

#[cfg(feature = "remote")]
#[wasm_bindgen]
impl ManifestReader {
    /// A reader with no manifest yet.
    #[wasm_bindgen(constructor)]
    pub fn new() -> ManifestReader {
        ManifestReader::default()
    }

    /// Checks `bytes` as a manifest; false on a rejection (see the error getters).
    pub fn parse(&mut self, bytes: Vec<u8>, count_cap: u32, byte_cap: u32) -> bool {
        self.core.parse_owned(bytes, limits_of(count_cap, byte_cap)).is_ok()
    }

    /// The metadata entries, padding key left out: `[key_at, key_len, value_at, value_len]` each.
    pub fn metadata(&self) -> js_sys::Uint32Array {
        js_sys::Uint32Array::from(&self.core.metadata()[..])
    }

    /// The shards: `[name_at, name_len, length]` each.
    pub fn shards(&self) -> js_sys::Float64Array {
        js_sys::Float64Array::from(&self.core.shards()[..])
    }

    /// The tensor table (`js/directory.js` reads it; the manifest is its name heap).
    pub fn table(&self) -> js_sys::Uint32Array {
        js_sys::Uint32Array::from(self.core.table())
    }

    /// The 1-based shard of each tensor.
    pub fn shard_of(&self) -> js_sys::Uint32Array {
        js_sys::Uint32Array::from(self.core.shard_of())
    }

    /// Tensor `i`'s digest (32 bytes), or `undefined`.
    pub fn digest(&self, i: u32) -> Option<js_sys::Uint8Array> {
        let i = usize::try_from(i).ok()?;
        self.core.digest(i).map(|d| js_sys::Uint8Array::from(&d[..]))
    }

    /// The model id (32 bytes) every shard records.
    pub fn model_id(&mut self) -> js_sys::Uint8Array {
        js_sys::Uint8Array::from(&self.core.model_id()[..])
    }

    /// Holds shard `index` (1-based) against the manifest from `prefix`, its
    /// file's bytes from 0 up to at least its payload region, and its length
    /// (steps 1 to 6). Returns its tensor table, or `undefined` (see the error getters).
    pub fn check_shard(
        &mut self,
        index: u32,
        prefix: &[u8],
        file_len: f64,
        count_cap: u32,
        byte_cap: u32,
    ) -> Option<js_sys::Uint32Array> {
        let t = self.core.check_shard(index, Some(prefix), u64_of_f64(file_len), limits_of(count_cap, byte_cap));
        t.ok().map(js_sys::Uint32Array::from)
    }

    /// The verdict for shard `index` when its file does not exist (`ShardMissing`).
    pub fn shard_missing(&mut self, index: u32) {
        let _ = self.core.check_shard(index, None, 0, Limits::DEFAULT);
    }

    /// The verdict for shard `index` when its name cannot be placed in the manifest's folder (PATH).
    pub fn refuse_name(&mut self, index: u32) {
        self.core.refuse_name(index);
    }
}

#[cfg(feature = "open")]
/// One tensor's payload hashed as JavaScript copies it into the window,
/// then compared with its digest (see [`manifest::DigestCore`]).
#[wasm_bindgen]
#[derive(Default)]
pub struct DigestCheck {
    core: manifest::DigestCore,
}

#[cfg(feature = "open")]
#[wasm_bindgen]
impl DigestCheck {
    /// A hasher with no bytes yet.
    #[wasm_bindgen(constructor)]
    pub fn new() -> DigestCheck {
        DigestCheck::default()
    }

    /// Where the window is in wasm memory.
    pub fn window_ptr(&mut self) -> u32 {
        addr(self.core.window().as_ptr())
    }

    /// Length of the window.
    pub fn window_len(&self) -> u32 {
        conv::u32_of(manifest::DIGEST_WINDOW)
    }

    /// Hashes the first `n` bytes of the window.
    pub fn update(&mut self, n: u32) {
        self.core.update(usize_sat(u64::from(n)));
    }

    /// True when the bytes hashed match `expected`; else DIGEST at `offset`
    /// (the tensor's first payload byte). Starts over either way.
    pub fn check(&mut self, expected: &[u8], offset: f64) -> bool {
        self.core.check(expected, u64_of_f64(offset)).is_ok()
    }

    /// The SHA-256 of the bytes hashed (32 bytes: a cache entry's trailer). Starts over.
    pub fn finish(&mut self) -> Vec<u8> {
        self.core.finish().to_vec()
    }
}

/// The four error getters of a checker whose `$field` has `error() ->
/// Option<ErrorInfo>`, in an `impl` block of their own (`#[wasm_bindgen]`
/// does not expand macros inside an `impl` it exports), so every checker
/// JavaScript drives reports errors the same way (`errorFrom` in `js/validate.js`).
macro_rules! error_getters {
    ($ty:ty, $field:ident) => {
        #[wasm_bindgen]
        impl $ty {
            /// The last error's code (`"TYPE"`, ...), or `""` without one.
            pub fn error_code(&self) -> String {
                self.$field.error().map_or("", |e| e.code).into()
            }

            /// The last error's byte offset (absolute in the file, the value
            /// or the shard's file), 0 without one.
            pub fn error_offset(&self) -> f64 {
                self.$field.error().map_or(0.0, |e| f64_of(e.offset))
            }

            /// The last error's rule id (`"NonzeroGap"`, ...), or `""`.
            pub fn error_rule(&self) -> String {
                self.$field.error().map_or("", |e| e.rule).into()
            }

            /// The last error's rule in one sentence, or `""`.
            pub fn error_description(&self) -> String {
                self.$field.error().map_or("", |e| e.description).into()
            }
        }
    };
}

#[cfg(feature = "open")]
error_getters!(Validator, session);
#[cfg(feature = "frozen")]
error_getters!(FrozenChecker, core);
#[cfg(feature = "open")]
error_getters!(Head, core);
#[cfg(feature = "remote")]
error_getters!(ManifestReader, core);
#[cfg(feature = "open")]
error_getters!(DigestCheck, core);

#[cfg(feature = "open")]
/// True when `head` starts like a model file (`KLN0` and the schema hash of
/// the plain, digests or shard record), the test every reader applies (`kiln_model::is_model_file`).
#[wasm_bindgen]
pub fn is_model_file(head: &[u8]) -> bool {
    kiln_model::is_model_file(head)
}

#[cfg(feature = "open")]
/// True when `name` is a plain file name in its folder (`kiln_model::ShardName`:
/// 1 to 255 bytes, not `.` or `..`, no `/`, `\\`, `:` or control character), the rule a
/// manifest's shard names follow and, in js/onnx.js, an ONNX graph's `kiln.model` and
/// external-data `location` (as kiln-onnx checks them for the CLI and Python).
#[wasm_bindgen]
pub fn is_plain_file_name(name: &str) -> bool {
    kiln_model::ShardName::new(name).is_some()
}

/// The module's linear memory (for copying bytes in; never handed to users).
#[wasm_bindgen]
pub fn wasm_memory() -> JsValue {
    wasm_bindgen::memory()
}

#[cfg(feature = "open")]
/// The block layout's sizes, `[HEADER_LEN, DESCRIPTOR_LEN, ALIGN]`
/// (`kiln_nostd::wire::layout`): `js/layout.js` names them, so the JavaScript's
/// offset arithmetic uses the core's numbers.
#[wasm_bindgen]
pub fn layout_sizes() -> js_sys::Uint32Array {
    let sizes = [HEADER_LEN, DESCRIPTOR_LEN, usize_sat(layout::ALIGN)].map(conv::u32_of);
    js_sys::Uint32Array::from(&sizes[..])
}

#[cfg(feature = "open")]
/// Where descriptor `i` starts in a block (`kiln_nostd::wire::layout::descriptor_offset`).
#[wasm_bindgen]
pub fn descriptor_offset(i: f64) -> f64 {
    f64_of(layout::descriptor_offset(u64_of_f64(i)))
}

#[cfg(feature = "open")]
/// Where the payload region of a block starts (`kiln_nostd::wire::layout::payload_base`), -1 on overflow.
#[wasm_bindgen]
pub fn payload_base(tensor_count: u32, name_bytes: u32) -> f64 {
    layout::payload_base(tensor_count, name_bytes).map_or(-1.0, f64_of)
}

#[cfg(feature = "testing")]
/// The tensor table's layout ([`table::LAYOUT`]), for the test that holds
/// `js/directory.js`'s constants to it.
#[wasm_bindgen]
pub fn table_layout() -> js_sys::Uint32Array {
    js_sys::Uint32Array::from(&table::LAYOUT.map(conv::u32_of)[..])
}

#[cfg(feature = "testing")]
/// Bits per element of dtype `code` (`kiln_nostd::DType::width`): 8 x bytes,
/// 4 for packed nibbles, 0 for opaque and unknown codes. For the test that
/// holds `js/elements.js`'s view types to the core's widths.
#[wasm_bindgen]
pub fn dtype_bits(code: u16) -> u32 {
    match DType::from_code(code).map(DType::width) {
        Some(Width::Bytes(w)) => u32::from(w).saturating_mul(8),
        Some(Width::Nibble) => 4,
        _ => 0,
    }
}

#[cfg(feature = "open")]
/// Names of dtype codes 1..=19, in code order.
#[wasm_bindgen]
pub fn dtype_names() -> js_sys::Array {
    kiln_nostd::DType::closed_set().iter().map(|d| JsValue::from_str(d.name())).collect()
}

#[cfg(feature = "testing")]
/// The core run directly on a full copy of `bytes`, a model file (any
/// record: plain, digests, shard) or a plain directory, as
/// `kiln_model::parse_any` opens it (digests not hashed): `undefined`
/// when it accepts, else `[code, offset, rule]`. For differential tests only
/// (an array, not formatted text: formatting would bring the core's
/// `fmt` code into the module).
#[wasm_bindgen]
pub fn check_direct(bytes: &[u8], count_cap: u32, byte_cap: u32) -> Option<js_sys::Array> {
    let limits = limits_of(count_cap, byte_cap);
    let start = if kiln_model::is_model_file(bytes) { kiln_model::block_start(bytes, &limits).unwrap_or(0) } else { 0 };
    let head = bytes.get(start..).unwrap_or_default();
    let mut scratch = vec![0u32; Header::peek_count(head).map_or(0, |c| scratch_len(c.min(1 << 20)))];
    match kiln_model::parse_any_with(bytes, Parser::new().limits(limits).scratch(&mut scratch)) {
        Ok(_) => None,
        Err(e) => Some(js_sys::Array::of3(
            &e.code().as_str().into(),
            &crate::conv::f64_of(crate::conv::u64_of(e.offset())).into(),
            &texts::of(e.rule()).0.into(),
        )),
    }
}

/// The crate version.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").into()
}
