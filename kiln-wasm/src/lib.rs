//! # kiln-wasm
//!
//! The Kiln v2 validator (`kiln-nostd`) for JavaScript. This crate is the
//! low-level half: the npm package in `pkg/` (sources in `js/`) wraps it in
//! the public API (`parseDirectory`, `DirectoryLoader`, `openRemote`, ...).
//!
//! JavaScript never receives a view of wasm memory. A check goes:
//!
//! 1. [`Checker::begin`] reads the 64-byte header and plans a *skeleton* (see
//!    [`skeleton`]): how many leading bytes to copy and how long the buffer the
//!    core sees must be.
//! 2. JavaScript copies that prefix (header, descriptors, name heap, padding)
//!    into the arena, and for each [`Checker::probes`] range copies the one
//!    payload byte, if any, that could change the verdict. The payload itself
//!    is never copied.
//! 3. [`Checker::check`] runs `kiln_nostd::Parser` over the skeleton and
//!    returns a compact table (offsets, dtypes, shapes, name positions), or an
//!    error with the core's code, absolute offset and rule.
//!
//! JavaScript then builds typed arrays over the caller's own `ArrayBuffer`.
//!
//! Frozen values (`decodeValue`, `decodeFrame` in `js/frozen.js`) go another
//! way, since every byte of a value is checked: [`Checker::frozen_begin`]
//! parses the type text and reserves room, JavaScript copies the whole value
//! into the arena, [`Checker::frozen`] runs `kiln_nostd::frozen::Reader` over
//! it and returns the type's nodes and, for each `tensors` value, the table
//! [`skeleton::table`] builds (see [`frozen`]). The arena is zeroed again
//! afterwards. JavaScript walks the caller's bytes with that description, so
//! every typed array and tensor view it returns is over the caller's buffer.

use kiln_nostd::frozen::{Reader, Schema};
use kiln_nostd::{scratch_len, Error, Header, Limits, Parser};
use wasm_bindgen::prelude::*;

mod arena;
pub mod frozen;
pub mod skeleton;

use skeleton::{Plan, Probe, MAX_SKELETON};

/// An error as JavaScript sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorInfo {
    /// The spec's code (`"TYPE"`, ...).
    pub code: &'static str,
    /// Absolute byte offset in the caller's buffer.
    pub offset: u64,
    /// The core's rule id (`"NonzeroGap"`, ...), or a rule of this crate.
    pub rule: &'static str,
    /// One line a person understands.
    pub description: &'static str,
}

impl From<Error> for ErrorInfo {
    fn from(e: Error) -> Self {
        ErrorInfo {
            code: e.code().as_str(),
            offset: e.offset() as u64,
            rule: e.rule().id(),
            description: e.rule().description(),
        }
    }
}

/// The checker without the JavaScript glue (host-testable).
pub struct Core {
    arena: arena::Arena,
    plan: Plan,
    probes: Vec<u32>,
    scratch: Vec<u32>,
    utf16: skeleton::alloc_free::Utf16Map,
    table: Vec<u32>,
    error: Option<ErrorInfo>,
    /// The last error is about the type text (offset into it), not the input.
    error_in_type: bool,
    seed: u64,
    /// Frozen: the type text and the input length of the pending check.
    type_text: String,
    frozen_len: usize,
    frozen_out: Vec<u32>,
}

impl Default for Core {
    fn default() -> Self {
        Core::new(0x6b69_6c6e)
    }
}

impl Core {
    /// A checker whose name hash uses `seed` (verdicts never depend on it).
    pub fn new(seed: u64) -> Self {
        Core {
            arena: arena::Arena::new(),
            plan: Plan::default(),
            probes: Vec::new(),
            scratch: Vec::new(),
            utf16: Default::default(),
            table: Vec::new(),
            error: None,
            error_in_type: false,
            seed,
            type_text: String::new(),
            frozen_len: 0,
            frozen_out: Vec::new(),
        }
    }

    /// Step 1: plans the skeleton for an input of `total` bytes starting with
    /// `head`, and reserves it. Returns the prefix length to copy.
    pub fn begin(&mut self, head: &[u8], total: u64) -> Result<usize, ErrorInfo> {
        self.error = None;
        self.error_in_type = false;
        self.plan = skeleton::plan(head, total);
        let fail = |rule, description| ErrorInfo { code: "LIMIT", offset: 0, rule, description };
        if self.plan.len > MAX_SKELETON {
            return Err(self.fail(fail(
                "WasmAddressSpace",
                "the block is larger than this wasm32 build can check (about 3.75 GiB)",
            )));
        }
        let len = usize::try_from(self.plan.len).unwrap_or(usize::MAX);
        if !self.arena.reserve(len) {
            return Err(self.fail(fail("WasmMemory", "wasm memory could not grow to hold the block's skeleton")));
        }
        Ok(usize::try_from(self.plan.prefix).unwrap_or(0))
    }

    fn fail(&mut self, e: ErrorInfo) -> ErrorInfo {
        self.error = Some(e);
        e
    }

    /// The plan of the last [`begin`](Self::begin).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Where the skeleton starts (a wasm memory address on wasm32).
    pub fn arena_ptr(&self) -> usize {
        self.arena.ptr()
    }

    /// The skeleton, `plan.len` bytes (prefix not yet copied after `begin`).
    pub fn skeleton(&mut self) -> &mut [u8] {
        let len = usize::try_from(self.plan.len).unwrap_or(0);
        self.arena.bytes(len)
    }

    /// Step 2: the probe ranges, as `[start, end, kind]` triples, once the
    /// prefix has been copied.
    pub fn probes(&mut self) -> &[u32] {
        self.probes.clear();
        let plan = self.plan;
        let prefix_len = usize::try_from(plan.prefix).unwrap_or(0);
        let mut list = core::mem::take(&mut self.probes);
        {
            let prefix = self.arena.bytes(prefix_len);
            skeleton::probes(prefix, &plan, |p: Probe| {
                // plan.len <= MAX_SKELETON < 2^32, so both ends fit.
                list.extend_from_slice(&[
                    u32::try_from(p.start).unwrap_or(u32::MAX),
                    u32::try_from(p.end).unwrap_or(u32::MAX),
                    p.kind,
                ]);
            });
        }
        self.probes = list;
        &self.probes
    }

    /// Step 3: runs the core over the skeleton, then clears the prefix.
    /// On success the table is in [`table`](Self::table).
    pub fn check(&mut self, limits: Limits) -> Result<&[u32], ErrorInfo> {
        let len = usize::try_from(self.plan.len).unwrap_or(0);
        let prefix = usize::try_from(self.plan.prefix).unwrap_or(0);
        // Name-table scratch, only when the descriptors are really there
        // (so a hostile count cannot make us allocate).
        let count = self.plan.count;
        let need = scratch_len(count);
        let descs_end = u64::from(count) * 128 + 64;
        let use_scratch = self.plan.payload_base.is_some() && self.plan.prefix >= descs_end && need < usize::MAX;
        if use_scratch && self.scratch.len() < need {
            self.scratch.resize(need, 0);
        }
        let seed = self.seed;
        let result = {
            let buf: &[u8] = self.arena.bytes(len);
            let mut parser = Parser::new().limits(limits).hash_seed(seed);
            if use_scratch {
                parser = parser.scratch(&mut self.scratch[..need]);
            }
            match parser.parse(buf) {
                Ok(dir) => {
                    skeleton::table(&dir, &mut self.utf16, &mut self.table);
                    Ok(())
                }
                Err(e) => Err(ErrorInfo::from(e)),
            }
        };
        self.arena.bytes(prefix).fill(0);
        match result {
            Ok(()) => Ok(&self.table),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The last error.
    pub fn error(&self) -> Option<ErrorInfo> {
        self.error
    }

    /// True when the last error is about the type text (its offset is a byte
    /// of the text), false when it is about the input.
    pub fn error_in_type(&self) -> bool {
        self.error_in_type
    }

    /// Frozen, step 1: checks `type_text` and reserves `len` bytes of the
    /// arena for the value; returns where to copy it (see
    /// [`arena_ptr`](Self::arena_ptr)). A bad type text is TYPE or LIMIT
    /// with [`error_in_type`](Self::error_in_type) set.
    pub fn frozen_begin(&mut self, type_text: &str, len: u64) -> Result<usize, ErrorInfo> {
        self.error = None;
        self.error_in_type = false;
        self.frozen_len = 0;
        if let Err(e) = Schema::<{ frozen::NODES }>::parse(type_text) {
            self.error_in_type = true;
            return Err(self.fail(e.into()));
        }
        self.type_text.clear();
        self.type_text.push_str(type_text);
        let too_big = ErrorInfo {
            code: "LIMIT",
            offset: 0,
            rule: "WasmAddressSpace",
            description: "the value is larger than this wasm32 build can check (about 3.75 GiB)",
        };
        let len = match usize::try_from(len) {
            Ok(l) if len <= MAX_SKELETON => l,
            _ => return Err(self.fail(too_big)),
        };
        if !self.arena.reserve(len) {
            return Err(self.fail(ErrorInfo {
                code: "LIMIT",
                offset: 0,
                rule: "WasmMemory",
                description: "wasm memory could not grow to hold a copy of the value",
            }));
        }
        self.frozen_len = len;
        Ok(self.arena.ptr())
    }

    /// The arena bytes the value is copied into after [`frozen_begin`](Self::frozen_begin).
    pub fn frozen_input(&mut self) -> &mut [u8] {
        let len = self.frozen_len;
        self.arena.bytes(len)
    }

    /// Frozen, step 2: validates the copied value (with the 16-byte frame
    /// first when `framed`), clears the copy, and returns the description
    /// [`frozen`] documents; `with_schema` false leaves the type's nodes out.
    pub fn frozen(&mut self, framed: bool, limits: Limits, with_schema: bool) -> Result<&[u32], ErrorInfo> {
        let len = self.frozen_len;
        self.frozen_len = 0;
        let text = core::mem::take(&mut self.type_text);
        let mut out = core::mem::take(&mut self.frozen_out);
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
                let buf: &[u8] = self.arena.bytes(len);
                match Reader::new().limits(limits).framed(framed).read(buf, &schema) {
                    Ok(value) => {
                        let n = frozen::tables(value, &mut self.utf16, &mut self.table, &mut out);
                        if let Some(s) = out.get_mut(count_at) {
                            *s = n;
                        }
                        Ok(())
                    }
                    Err(e) => Err(ErrorInfo::from(e)),
                }
            }
        };
        self.arena.bytes(len).fill(0);
        self.type_text = text;
        self.frozen_out = out;
        match result {
            Ok(()) => Ok(&self.frozen_out),
            Err(e) => Err(self.fail(e)),
        }
    }
}

/// The low-level checker JavaScript drives (one per module instance is enough).
#[wasm_bindgen]
pub struct Checker {
    core: Core,
}

impl Default for Checker {
    fn default() -> Self {
        Checker::new()
    }
}

#[wasm_bindgen]
impl Checker {
    #[wasm_bindgen(constructor)]
    pub fn new() -> Checker {
        #[cfg(target_arch = "wasm32")]
        let seed = (js_sys::Math::random() * 9.007_199_254_740_991e15) as u64;
        #[cfg(not(target_arch = "wasm32"))]
        let seed = 0x6b69_6c6e;
        Checker { core: Core::new(seed) }
    }

    /// Plans and reserves the skeleton; returns the prefix length to copy,
    /// or -1 (see the error getters).
    pub fn begin(&mut self, head: &[u8], total: f64) -> f64 {
        let total = if total.is_finite() && total >= 0.0 { total as u64 } else { 0 };
        match self.core.begin(head, total) {
            Ok(p) => p as f64,
            Err(_) => -1.0,
        }
    }

    /// Address of the skeleton in wasm memory.
    pub fn arena_ptr(&self) -> u32 {
        u32::try_from(self.core.arena_ptr()).unwrap_or(0)
    }

    /// Length of the skeleton (L).
    pub fn skeleton_len(&self) -> f64 {
        self.core.plan().len as f64
    }

    /// The payload region's start, or -1.
    pub fn payload_base(&self) -> f64 {
        self.core.plan().payload_base.map_or(-1.0, |b| b as f64)
    }

    /// The declared block length, or -1.
    pub fn block_len(&self) -> f64 {
        self.core.plan().block_len.map_or(-1.0, |b| b as f64)
    }

    /// `[start, end, kind]` triples (a JavaScript-owned copy).
    pub fn probes(&mut self) -> js_sys::Uint32Array {
        js_sys::Uint32Array::from(self.core.probes())
    }

    /// Runs the core; the table (a JavaScript-owned copy) or `undefined`.
    pub fn check(&mut self, count_cap: u32, byte_cap: u32) -> Option<js_sys::Uint32Array> {
        let limits = Limits::DEFAULT.with_count_cap(count_cap).with_byte_cap(byte_cap);
        self.core.check(limits).ok().map(js_sys::Uint32Array::from)
    }

    pub fn error_code(&self) -> String {
        self.core.error().map_or("", |e| e.code).into()
    }

    pub fn error_offset(&self) -> f64 {
        self.core.error().map_or(0.0, |e| e.offset as f64)
    }

    pub fn error_rule(&self) -> String {
        self.core.error().map_or("", |e| e.rule).into()
    }

    pub fn error_description(&self) -> String {
        self.core.error().map_or("", |e| e.description).into()
    }

    /// True when the last error's offset is a byte of the type text.
    pub fn error_in_type(&self) -> bool {
        self.core.error_in_type()
    }

    /// Frozen, step 1: checks the type text and reserves `len` bytes for a
    /// copy of the value; returns where to copy it, or -1 (see the error getters).
    pub fn frozen_begin(&mut self, type_text: &str, len: f64) -> f64 {
        let len = if len.is_finite() && len >= 0.0 { len as u64 } else { u64::MAX };
        match self.core.frozen_begin(type_text, len) {
            Ok(p) => p as f64,
            Err(_) => -1.0,
        }
    }

    /// Frozen, step 2: validates the copy; the description (a JavaScript-owned
    /// copy, layout in `frozen.rs`) or `undefined`.
    pub fn frozen(
        &mut self,
        framed: bool,
        count_cap: u32,
        byte_cap: u32,
        with_schema: bool,
    ) -> Option<js_sys::Uint32Array> {
        let limits = Limits::DEFAULT.with_count_cap(count_cap).with_byte_cap(byte_cap);
        self.core.frozen(framed, limits, with_schema).ok().map(js_sys::Uint32Array::from)
    }
}

/// The skeleton plan for an input of `total` bytes starting with `head`,
/// without reserving anything: `[prefix, len, payload_base, block_len, count]`
/// (-1 where the header gives no value).
#[wasm_bindgen]
pub fn plan(head: &[u8], total: f64) -> js_sys::Float64Array {
    let total = if total.is_finite() && total >= 0.0 { total as u64 } else { 0 };
    let p = skeleton::plan(head, total);
    let opt = |v: Option<u64>| v.map_or(-1.0, |v| v as f64);
    js_sys::Float64Array::from(
        &[p.prefix as f64, p.len as f64, opt(p.payload_base), opt(p.block_len), f64::from(p.count)][..],
    )
}

/// The module's linear memory (for copying the prefix in; never handed to users).
#[wasm_bindgen]
pub fn wasm_memory() -> JsValue {
    wasm_bindgen::memory()
}

/// f32 bits of every code of a narrow float dtype (`kiln_nostd::mx`): 65,536
/// for f16/bf16, 256 for f8e4m3/f8e5m2/e8m0, 16 for e2m1; `undefined` otherwise.
#[wasm_bindgen]
pub fn lut(dtype: u16) -> Option<js_sys::Uint32Array> {
    use kiln_nostd::mx;
    let table: Vec<u32> = match dtype {
        3 => (0..=u16::MAX).map(|b| mx::f16_to_f32(b).to_bits()).collect(),
        4 => (0..=u16::MAX).map(|b| mx::bf16_to_f32(b).to_bits()).collect(),
        5 => (0..=u8::MAX).map(|b| mx::f8e4m3_to_f32(b).to_bits()).collect(),
        6 => (0..=u8::MAX).map(|b| mx::f8e5m2_to_f32(b).to_bits()).collect(),
        18 => (0..16u8).map(|b| mx::e2m1_to_f32(b).to_bits()).collect(),
        19 => (0..=u8::MAX).map(|b| mx::e8m0_to_f32(b).to_bits()).collect(),
        _ => return None,
    };
    Some(js_sys::Uint32Array::from(&table[..]))
}

/// Names of dtype codes 1..=19, in code order.
#[wasm_bindgen]
pub fn dtype_names() -> js_sys::Array {
    kiln_nostd::DType::closed_set().iter().map(|d| JsValue::from_str(d.name())).collect()
}

/// The core run directly on a full copy of `bytes`: `undefined` when it
/// accepts, else `"CODE offset rule"`. For differential tests only.
#[wasm_bindgen]
pub fn check_direct(bytes: &[u8], count_cap: u32, byte_cap: u32) -> Option<String> {
    let limits = Limits::DEFAULT.with_count_cap(count_cap).with_byte_cap(byte_cap);
    let mut scratch = vec![0u32; Header::peek_count(bytes).map_or(0, |c| scratch_len(c.min(1 << 20)))];
    match Parser::new().limits(limits).scratch(&mut scratch).parse(bytes) {
        Ok(_) => None,
        Err(e) => Some(format!("{} {} {}", e.code().as_str(), e.offset(), e.rule().id())),
    }
}

/// The crate version.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").into()
}
