//! No-panic link check for kiln-nostd.
//!
//! Every public decoder (and writer) entry point is called on inputs the
//! optimiser cannot see (volatile reads of statics), and the panic handler
//! calls a symbol that does not exist. So the release binary links only if
//! no panic path survived optimisation anywhere in what is called here.
//!
//! The binary also runs (QEMU lm3s6965evb): it exits 0 when the embedded
//! example model (spec/examples/digits-mlp.kiln) parsed, the writer round
//! trip matched and the Frozen record read back, 1 otherwise. The harness
//! itself uses no `core::fmt` (formatting machinery has panic paths of its
//! own). kiln-nostd's Frozen reader does: `TypeRef::hash` measures the type
//! text with `core::fmt::write`; the `frozen` link shows that path panic-free.
#![no_std]
#![no_main]

use core::ptr::read_volatile;

use cortex_m as _; // critical-section implementation
use cortex_m_rt::entry;
use cortex_m_semihosting::debug;

#[cfg(not(feature = "locate-panics"))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    extern "Rust" {
        #[link_name = "\n\nERROR: a panic path survived optimisation\n\n"]
        fn undefined() -> !;
    }
    // SAFETY: never runs; the symbol does not exist, so any reference fails the link.
    unsafe { undefined() }
}

/// Diagnosis only (check.sh uses it after a failed link): a handler that links,
/// so the surviving panic calls can be found in the disassembly.
#[cfg(feature = "locate-panics")]
#[panic_handler]
#[inline(never)]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {
        cortex_m::asm::udf();
    }
}

/// A value the optimiser must treat as unknown.
#[inline(always)]
fn opaque<T: Copy>(v: &T) -> T {
    // SAFETY: `v` is a valid reference.
    unsafe { read_volatile(v) }
}

/// Where results go, so nothing is optimised away.
static mut SINK: u32 = 0;

#[inline(always)]
fn mix(sink: &mut u32, v: usize) {
    *sink = sink.rotate_left(5) ^ (v as u32);
}

#[cfg(any(feature = "parse", feature = "typical", feature = "incremental"))]
#[allow(dead_code)] // NAME and INDEX serve the views
mod inputs {
    #[repr(C, align(64))]
    pub struct Aligned<T>(pub T);
    /// The bundled example model (8 tensors, one of them MXFP4-quantized).
    /// Only `.rodata` depends on it: every input goes through `opaque`, so
    /// the code measured is the same for any model.
    const LEN: usize = include_bytes!("../../spec/examples/digits-mlp.kiln").len();
    pub static MODEL: Aligned<[u8; LEN]> = Aligned(*include_bytes!("../../spec/examples/digits-mlp.kiln"));

    pub static INPUT: &[u8] = &MODEL.0;
    pub static INPUT_LEN: usize = LEN;
    pub static START: usize = 0;
    pub static NAME: &str = "fc1.weight";
    /// fc1.weight.mxfp4, the quantized tensor.
    pub static INDEX: usize = 4;
    pub static COUNT_CAP: u32 = 1024;
    pub static SEED: u64 = 0x1234_5678;
    /// Packet size for the incremental validator, and whether the block is embedded.
    pub static CHUNK: usize = 256;
    pub static EMBEDDED: bool = false;
}

#[cfg(feature = "parse")]
mod decoder {
    use super::{inputs::*, mix, opaque};
    use kiln_nostd::{scratch_len, Directory, Error, Header, Limits, Parser};
    #[cfg(feature = "views")]
    use kiln_nostd::{NameIndex, Tensor};

    fn error(sink: &mut u32, e: Error) {
        mix(sink, e.code() as usize);
        mix(sink, e.offset());
        mix(sink, e.rule() as usize);
        // The human-readable texts (kept out of the validator size figure).
        #[cfg(feature = "error-text")]
        {
            mix(sink, e.rule().id().len());
            mix(sink, e.rule().description().len());
            mix(sink, e.code().as_str().len());
            mix(sink, kiln_nostd::ErrorCode::from_name(e.code().as_str()).map_or(9, |c| c as usize));
        }
    }

    #[cfg(feature = "views")]
    pub fn visit(sink: &mut u32, t: &Tensor<'_>) {
        mix(sink, t.index());
        mix(sink, t.name().map_or(0, str::len));
        mix(sink, t.layout().map_or(0, str::len));
        mix(sink, usize::from(t.dtype().code()));
        mix(sink, t.rank());
        for &d in t.shape() {
            mix(sink, d as usize);
        }
        mix(sink, t.element_count() as usize);
        mix(sink, t.block_size() as usize);
        mix(sink, t.byte_offset() as usize);
        mix(sink, t.absolute_offset());
        let bytes = t.bytes();
        mix(sink, bytes.len());
        mix(sink, bytes.first().map_or(0, |&b| usize::from(b)));
        if let Some(s) = t.as_slice::<f32>() {
            mix(sink, s.len());
            mix(sink, s.last().map_or(0, |v| v.to_bits() as usize));
        }
        if let Some(s) = t.as_slice::<u8>() {
            mix(sink, s.len());
        }
        let mut out = [0f32; 64];
        match t.copy_to::<f32>(&mut out) {
            Ok(n) => mix(sink, n ^ out.first().map_or(0, |v| v.to_bits() as usize)),
            Err(_) => mix(sink, 0xE),
        }
        let mut halves = [0u16; 16];
        mix(sink, t.copy_to::<u16>(&mut halves).unwrap_or(0));
        if let Some(q) = t.quant() {
            mix(sink, usize::from(q.scheme));
            mix(sink, q.axis);
            mix(sink, q.group_size as usize);
            mix(sink, q.scale.index());
            mix(sink, q.outer.map_or(7, |o| o.index()));
        }
        let d = t.descriptor();
        mix(sink, d.byte_length as usize);
    }

    /// Exercises the decoder on `buf`; true when the checks a valid model must pass passed.
    pub fn run(sink: &mut u32, buf: &[u8]) -> bool {
        let start: usize = opaque(&START);
        let mut ok = true;

        // Parser with caps, seed and scratch; the name index it leaves behind.
        let want = Header::peek_count(buf).map_or(0, scratch_len);
        mix(sink, want);
        let mut scratch = [0u32; 64];
        let parsed = Parser::new()
            .limits(Limits::DEFAULT.with_count_cap(opaque(&COUNT_CAP)).with_byte_cap(opaque(&COUNT_CAP)))
            .hash_seed(opaque(&SEED))
            .scratch(&mut scratch)
            .parse_indexed(buf);
        match parsed {
            Ok((dir, names)) => {
                mix(sink, dir.len());
                mix(sink, dir.block_len());
                mix(sink, dir.end());
                mix(sink, dir.payload_start());
                mix(sink, dir.header().payload_bytes as usize);
                mix(sink, dir.block().len());
                ok &= names.is_hashed();
                #[cfg(feature = "views")]
                {
                    let name: &str = opaque(&NAME);
                    for t in dir.iter() {
                        visit(sink, &t);
                    }
                    mix(sink, dir.iter().len());
                    let by_index = names.get(name);
                    let by_scan = dir.find(name);
                    ok &= by_index.map(|t| t.index()) == by_scan.map(|t| t.index());
                    ok &= by_index.is_some();
                    if let Some(t) = by_index {
                        visit(sink, &t);
                    }
                    if let Some(t) = dir.get(opaque(&INDEX)) {
                        visit(sink, &t);
                    }
                    mix(sink, names.directory().len());
                }
            }
            Err(e) => {
                ok = false;
                error(sink, e);
            }
        }

        // Default parse, no scratch (quadratic name check), then an index built afterwards.
        match Directory::parse(buf) {
            Ok(dir) => {
                mix(sink, dir.is_empty() as usize);
                #[cfg(feature = "views")]
                {
                    let mut scratch = [0u32; 16];
                    let names = NameIndex::build(dir, &mut scratch);
                    mix(sink, names.get(opaque(&NAME)).map_or(99, |t| t.index()));
                    for t in dir {
                        mix(sink, t.byte_len());
                    }
                }
            }
            Err(e) => {
                ok = false;
                error(sink, e);
            }
        }

        // A block inside a larger buffer, and a slice of unknown length.
        match Parser::new().parse_at(buf, start) {
            Ok(dir) => mix(sink, dir.end() ^ dir.start()),
            Err(e) => error(sink, e),
        }
        if let Some(part) = buf.get(..opaque(&INPUT_LEN)) {
            match Directory::parse(part) {
                Ok(dir) => mix(sink, dir.len()),
                Err(e) => error(sink, e),
            }
        }
        ok
    }
}

/// What a typical firmware does, and nothing else: one parse with a fixed
/// name index, look weights up by name, read them as f32 in place (or copy
/// them out), and walk the table. The size table reports this beside the
/// every-API figure.
#[cfg(feature = "typical")]
mod typical {
    use super::{inputs::*, mix, opaque};
    use kiln_nostd::FixedIndex;

    pub fn run(sink: &mut u32, buf: &[u8]) -> bool {
        let mut index = FixedIndex::<32, 128>::new();
        let Ok((dir, names)) = index.parse(buf) else { return false };
        for t in dir.iter() {
            mix(sink, t.name().map_or(0, str::len));
            mix(sink, t.shape().len());
            mix(sink, t.bytes().len());
        }
        let Some(w) = names.get(opaque(&NAME)) else { return false };
        match w.as_slice::<f32>() {
            Some(v) => mix(sink, v.len()),
            None => {
                let mut out = [0f32; 64];
                mix(sink, w.copy_to(&mut out).unwrap_or(0));
            }
        }
        true
    }
}

/// A block that arrives in packets (an over-the-air update): the
/// incremental validator, fed in chunks of an opaque size, skipping what
/// `next_needed` allows, with caps, seed and name scratch; the tensor table
/// when it is complete, and the verdict at the end.
#[cfg(feature = "incremental")]
mod incremental {
    use super::{inputs::*, mix, opaque};
    use kiln_nostd::{Error, Incremental, Limits, Progress};

    fn error(sink: &mut u32, e: Error) {
        mix(sink, e.code() as usize);
        mix(sink, e.offset());
        mix(sink, e.rule() as usize);
    }

    pub fn run(sink: &mut u32, buf: &[u8]) -> bool {
        let limits = Limits::DEFAULT.with_count_cap(opaque(&COUNT_CAP)).with_byte_cap(opaque(&COUNT_CAP));
        match Incremental::prefix_len(buf.get(..64).unwrap_or(&[]), &limits) {
            Ok(n) => mix(sink, n.unwrap_or(1)),
            Err(e) => error(sink, e),
        }
        let mut prefix = [0u8; 2048];
        let mut scratch = [0u32; 64];
        let v = Incremental::new(&mut prefix).limits(limits).hash_seed(opaque(&SEED)).scratch(&mut scratch);
        let mut v = if opaque(&EMBEDDED) { v.embedded() } else { v };
        let chunk = opaque(&CHUNK).max(1);
        let (len, mut pos) = (buf.len(), 0usize);
        let mut saw_directory = false;
        while pos < len {
            let need = usize::try_from(v.next_needed()).unwrap_or(len).min(len);
            if need > pos {
                match v.skip(u64::try_from(need - pos).unwrap_or(0)) {
                    Ok(0) => break,
                    Ok(n) => pos = pos.saturating_add(usize::try_from(n).unwrap_or(len)),
                    Err(e) => {
                        error(sink, e);
                        break;
                    }
                }
                continue;
            }
            let end = pos.saturating_add(chunk).min(len);
            match v.feed(buf.get(pos..end).unwrap_or(&[])) {
                Ok(Progress::Directory) => {
                    saw_directory = true;
                    mix(sink, v.header().map_or(0, |h| h.tensor_count as usize));
                    if let Some(dir) = v.directory() {
                        mix(sink, dir.len());
                        mix(sink, dir.find(opaque(&NAME)).map_or(0, |t| t.shape().len() ^ t.absolute_offset()));
                    }
                }
                Ok(p) => mix(sink, p as usize),
                Err(e) => error(sink, e),
            }
            pos = end;
        }
        mix(sink, v.consumed() as usize);
        match v.finish() {
            Ok(s) => {
                mix(sink, s.payload_base as usize);
                saw_directory && s.block_len == buf.len() as u64
            }
            Err(e) => {
                error(sink, e);
                false
            }
        }
    }
}

/// A Frozen value on the device: one framed record of type
/// `struct{id:i64,name:str,scores:list<f32>,}`, built at compile time as
/// bytes, checked against a schema parsed from the type text (both opaque)
/// with `frozen::Reader` (frame, schema hash, counts, UTF-8, trailing
/// bytes), then read through the borrowed `Value` API.
#[cfg(any(feature = "frozen", feature = "frozen-typed"))]
#[cfg_attr(not(feature = "frozen"), allow(dead_code, unused_imports))]
mod frozen_record {
    use super::{mix, opaque};
    use kiln_nostd::frozen::{frame_bytes, hash_text, Reader, Schema, FRAME_LEN};

    const TYPE: &str = "struct{id:i64,name:str,scores:list<f32>,}";
    pub const ID: i64 = 42;
    pub const NAME: &[u8] = b"kiln";
    pub const SCORES: [f32; 3] = [0.5, -1.25, 3.0];
    const LEN: usize = FRAME_LEN + 8 + 4 + NAME.len() + 4 + 4 * SCORES.len();

    pub static TYPE_TEXT: &str = TYPE;
    static RECORD: [u8; LEN] = record();
    pub static INPUT: &[u8] = &RECORD;

    /// Frame (`KLN0`, profile 0, schema hash), then the fields in order:
    /// i64 LE, str as u32 length + bytes, list<f32> as u32 count + f32 LE.
    const fn record() -> [u8; LEN] {
        let mut out = [0u8; LEN];
        let mut at = put(&mut out, 0, &frame_bytes(hash_text(TYPE)));
        at = put(&mut out, at, &ID.to_le_bytes());
        at = put(&mut out, at, &(NAME.len() as u32).to_le_bytes());
        at = put(&mut out, at, NAME);
        at = put(&mut out, at, &(SCORES.len() as u32).to_le_bytes());
        let mut i = 0;
        while i < SCORES.len() {
            at = put(&mut out, at, &SCORES[i].to_le_bytes());
            i += 1;
        }
        assert!(at == LEN);
        out
    }

    const fn put(out: &mut [u8; LEN], at: usize, bytes: &[u8]) -> usize {
        let mut i = 0;
        while i < bytes.len() {
            out[at + i] = bytes[i];
            i += 1;
        }
        at + bytes.len()
    }

    pub fn run(sink: &mut u32) -> bool {
        let text: &str = opaque(&TYPE_TEXT);
        let buf: &[u8] = opaque(&INPUT);
        let schema = match Schema::<16>::parse(text) {
            Ok(s) => s,
            Err(e) => {
                mix(sink, e.offset());
                return false;
            }
        };
        mix(sink, schema.hash() as usize);
        let v = match Reader::new().framed(true).read(buf, &schema) {
            Ok(v) => v,
            Err(e) => {
                mix(sink, e.code() as usize);
                mix(sink, e.offset());
                return false;
            }
        };
        let id = v.field("id").and_then(|f| f.as_i64());
        let name = v.field("name").and_then(|f| f.as_str());
        let Some(scores) = v.field("scores").and_then(|f| f.as_list()) else { return false };
        mix(sink, id.map_or(0, |i| i as usize));
        mix(sink, name.map_or(0, str::len));
        // Zero-copy when aligned, else a copy; both through the list view.
        // Compared as bits: no soft-float code in the figure.
        let mut out = [0f32; 8];
        let values: &[f32] = match scores.view::<f32>() {
            Some(s) => s,
            None => {
                let n = scores.copy_to(&mut out).unwrap_or(0);
                out.get(..n).unwrap_or(&[])
            }
        };
        let mut same = values.len() == SCORES.len();
        for (v, want) in values.iter().zip(SCORES.iter()) {
            mix(sink, v.to_bits() as usize);
            same &= v.to_bits() == want.to_bits();
        }
        id == Some(ID) && name.map(str::as_bytes) == Some(NAME) && same
    }
}

/// The same record through the typed decoder: the type is a `Ty` built at
/// compile time, so the check is monomorphized for it (no type-text parser,
/// no code for kinds the record does not use).
#[cfg(feature = "frozen-typed")]
mod typed_record {
    use super::{mix, opaque};
    use kiln_nostd::frozen::{decode_framed, Decode, Decoder, Field, KilnType, ListView, Ty};

    static SCORES: Ty = Ty::list(&Ty::F32);
    static FIELDS: [Field; 3] =
        [Field::new("id", &Ty::I64), Field::new("name", &Ty::STR), Field::new("scores", &SCORES)];
    static RECORD_TY: Ty = Ty::structure(&FIELDS);

    /// What `#[derive(Kiln)]` would generate for this struct.
    struct Record<'a> {
        id: i64,
        name: &'a str,
        scores: ListView<'a, f32>,
    }

    impl KilnType for Record<'_> {
        const TY: &'static Ty = &RECORD_TY;
    }

    impl<'a> Decode<'a> for Record<'a> {
        fn decode(d: &mut Decoder<'a>) -> kiln_nostd::Result<Self> {
            Ok(Record { id: i64::decode(d)?, name: <&str>::decode(d)?, scores: ListView::decode(d)? })
        }
    }

    pub fn run(sink: &mut u32) -> bool {
        let buf: &[u8] = opaque(&super::frozen_record::INPUT);
        match decode_framed::<Record>(buf) {
            Ok(r) => {
                mix(sink, r.id as usize);
                mix(sink, r.name.len());
                let mut same = r.scores.len() == super::frozen_record::SCORES.len();
                for (v, want) in r.scores.iter().zip(super::frozen_record::SCORES.iter()) {
                    mix(sink, v.to_bits() as usize);
                    same &= v.to_bits() == want.to_bits();
                }
                r.id == super::frozen_record::ID && r.name.as_bytes() == super::frozen_record::NAME && same
            }
            Err(e) => {
                mix(sink, e.code() as usize);
                mix(sink, e.offset());
                false
            }
        }
    }
}

#[cfg(feature = "writer")]
mod writer {
    use super::{mix, opaque};
    use kiln_nostd::{encode_le, le_bytes, sort_dict, DType, Directory, Limits, Quant, TensorRef, TensorSpec, Writer};

    static Q_NAME: &str = "q";
    static S_NAME: &str = "s";
    static Q_CODE: u16 = 8; // i8
    static Q_DIMS: [u64; 8] = [4, 8, 0, 0, 0, 0, 0, 0];
    static Q_RANK: usize = 2;
    static Q_DATA: [u8; 32] = [1; 32];
    static AXIS: u16 = 1;
    static GROUP: u32 = 8;
    static SCALES: [f32; 4] = [0.5, 0.25, 0.125, 1.0];

    #[repr(C, align(64))]
    struct Out([u8; 1024]);
    static mut OUT: Out = Out([0; 1024]);

    pub fn run(sink: &mut u32) -> bool {
        let dims: [u64; 8] = opaque(&Q_DIMS);
        let shape = dims.get(..opaque(&Q_RANK)).unwrap_or(&[]);
        let dtype = DType::from_code(opaque(&Q_CODE)).unwrap_or(DType::U8);
        let data: [u8; 32] = opaque(&Q_DATA);
        let scales: [f32; 4] = opaque(&SCALES);
        let mut scale_bytes = [0u8; 16];
        let n = encode_le(&scales, &mut scale_bytes).unwrap_or(0);
        mix(sink, le_bytes(&scales).map_or(0, <[u8]>::len));
        let scale_shape = [4u64];
        let q_name: &str = opaque(&Q_NAME);
        let s_name: &str = opaque(&S_NAME);
        let mut specs = [
            TensorSpec::new(DType::F32, &scale_shape, scale_bytes.get(..n).unwrap_or(&[])).named(s_name),
            TensorSpec::new(dtype, shape, &data).named(q_name).quantized(Quant::Scales {
                axis: opaque(&AXIS),
                group_size: opaque(&GROUP),
                scale: TensorRef::Index(0),
            }),
        ];
        if sort_dict(&mut specs).is_err() {
            return false;
        }
        let planned = Writer::new().encoded_len(&specs);
        // SAFETY: the only reference to OUT.
        let out: &mut [u8] = unsafe { &mut (*core::ptr::addr_of_mut!(OUT)).0 };
        let mut scratch = [0u32; 8];
        let written = Writer::new().limits(Limits::DEFAULT).scratch(&mut scratch).write(&specs, out);
        mix(sink, written.unwrap_or(0));
        let (Ok(planned), Ok(written)) = (planned, written) else { return false };
        let Some(block) = out.get(..written) else { return false };
        // Read back: q is quantized by s.
        let dir = match Directory::parse(block) {
            Ok(d) => d,
            Err(_) => return false,
        };
        for t in dir.iter() {
            super::decoder::visit(sink, &t);
        }
        let scale_of_q = dir.find(q_name).and_then(|t| t.quant()).and_then(|q| q.scale.name());
        planned == written && scale_of_q == Some(s_name)
    }
}

#[entry]
fn main() -> ! {
    let mut sink = 0u32;
    #[allow(unused_mut)]
    let mut ok = true;

    #[cfg(feature = "typical")]
    {
        ok &= typical::run(&mut sink, opaque(&inputs::INPUT));
    }
    #[cfg(feature = "parse")]
    {
        let buf: &[u8] = opaque(&inputs::INPUT);
        ok &= decoder::run(&mut sink, buf);
        #[cfg(feature = "canary-indexing")]
        {
            // Deliberate panic path: an unchecked index the optimiser cannot prove in bounds.
            mix(&mut sink, usize::from(buf[opaque(&inputs::INDEX) * 100_000]));
        }
    }
    #[cfg(feature = "incremental")]
    {
        ok &= incremental::run(&mut sink, opaque(&inputs::INPUT));
    }
    #[cfg(feature = "writer")]
    {
        ok &= writer::run(&mut sink);
    }
    #[cfg(feature = "frozen")]
    {
        ok &= frozen_record::run(&mut sink);
    }
    #[cfg(feature = "frozen-typed")]
    {
        ok &= typed_record::run(&mut sink);
    }
    #[cfg(not(any(
        feature = "parse",
        feature = "typical",
        feature = "frozen",
        feature = "frozen-typed",
        feature = "incremental"
    )))]
    {
        // Baseline: the same opaque read and sink traffic, no decoder.
        static NOTHING: usize = 0;
        mix(&mut sink, opaque(&NOTHING));
    }

    // SAFETY: single-threaded; the only writer of SINK.
    unsafe { core::ptr::write_volatile(core::ptr::addr_of_mut!(SINK), sink) };
    debug::exit(if ok { debug::EXIT_SUCCESS } else { debug::EXIT_FAILURE });
    loop {
        cortex_m::asm::nop();
    }
}
