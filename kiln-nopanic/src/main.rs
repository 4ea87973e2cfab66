//! No-panic link check for kiln-nostd.
//!
//! Every public decoder (and writer) entry point is called on inputs the
//! optimiser cannot see (volatile reads of statics), and the panic handler
//! calls a symbol that does not exist. So the release binary links only if
//! no panic path survived optimisation anywhere in what is called here.
//!
//! The binary also runs (QEMU lm3s6965evb, or `virt` for riscv32imc): it
//! exits 0 when the embedded example model (spec/examples/digits-mlp.kiln)
//! parsed, the writer round trip matched and the Frozen record read back,
//! 1 otherwise. The harness
//! itself uses no `core::fmt` (formatting machinery has panic paths of its
//! own). kiln-nostd's Frozen reader does: `TypeRef::hash` measures the type
//! text with `core::fmt::write`; the `frozen` link shows that path panic-free.
#![no_std]
#![no_main]

use core::ptr::read_volatile;

use rt::entry;

#[cfg(not(feature = "locate-panics"))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    extern "Rust" {
        #[link_name = "\n\nERROR: a panic path survived optimisation\n\n"]
        fn undefined() -> !;
    }
    // SAFETY: never runs; the symbol does not exist, so any reference fails the link.
    unsafe { undefined() }
}

/// Diagnosis only (ci.sh uses it after a failed link): a handler that links,
/// so the surviving panic calls can be found in the disassembly.
#[cfg(feature = "locate-panics")]
#[panic_handler]
#[inline(never)]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    rt::trap()
}

/// The runtime of each architecture: reset and entry (cortex-m-rt, riscv-rt),
/// the exit status for QEMU, a trap for the diagnosis handler.
#[cfg(target_arch = "arm")]
mod rt {
    use cortex_m as _; // critical-section implementation
    pub use cortex_m_rt::entry;
    use cortex_m_semihosting::debug;

    /// Semihosting exit: QEMU's process status is 0 when `ok`, 1 otherwise.
    /// Inlined, as the call in `main` was before this module: the Cortex-M size
    /// figures stay those of the same code.
    #[inline(always)]
    pub fn exit(ok: bool) -> ! {
        debug::exit(if ok { debug::EXIT_SUCCESS } else { debug::EXIT_FAILURE });
        loop {
            cortex_m::asm::nop();
        }
    }

    #[cfg(feature = "locate-panics")]
    pub fn trap() -> ! {
        cortex_m::asm::udf()
    }

    /// The stack pointer.
    #[cfg(feature = "signed-vectors")]
    #[inline(always)]
    pub fn sp() -> usize {
        cortex_m::register::msp::read() as usize
    }

    /// Bytes to the host's standard output (semihosting; no formatting).
    #[cfg(feature = "signed-vectors")]
    pub fn print(bytes: &[u8]) {
        if let Ok(mut out) = cortex_m_semihosting::hio::hstdout() {
            let _ = out.write_all(bytes);
        }
    }
}

/// RISC-V: QEMU `virt` (`-bios none`); the exit goes through its sifive_test device.
#[cfg(target_arch = "riscv32")]
mod rt {
    pub use riscv_rt::entry;

    /// QEMU virt's sifive_test device: 0x5555 ends QEMU with status 0,
    /// `(code << 16) | 0x3333` with status `code`.
    const SIFIVE_TEST: *mut u32 = 0x10_0000 as *mut u32;

    #[inline(always)]
    pub fn exit(ok: bool) -> ! {
        let word = if ok { 0x5555 } else { (1 << 16) | 0x3333 };
        // SAFETY: the device register of the machine this binary is linked for; a 32-bit store.
        unsafe { core::ptr::write_volatile(SIFIVE_TEST, word) };
        loop {
            core::hint::spin_loop();
        }
    }

    #[cfg(feature = "locate-panics")]
    pub fn trap() -> ! {
        // SAFETY: `unimp` raises an illegal-instruction exception and touches nothing.
        unsafe { core::arch::asm!("unimp", options(noreturn)) }
    }

    /// The stack pointer.
    #[cfg(feature = "signed-vectors")]
    #[inline(always)]
    pub fn sp() -> usize {
        let sp: usize;
        // SAFETY: reads a register, touches no memory.
        unsafe { core::arch::asm!("mv {}, sp", out(reg) sp, options(nomem, nostack)) };
        sp
    }

    /// QEMU virt's UART (NS16550A) transmit register.
    #[cfg(feature = "signed-vectors")]
    const UART: *mut u8 = 0x1000_0000 as *mut u8;

    /// Bytes to the machine's UART (QEMU's standard output with -nographic).
    #[cfg(feature = "signed-vectors")]
    pub fn print(bytes: &[u8]) {
        for &b in bytes {
            // SAFETY: the UART's transmit register on this machine; QEMU's model is always ready.
            unsafe { core::ptr::write_volatile(UART, b) };
        }
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

/// An error into the sink: its code, offset and rule.
#[cfg(feature = "incremental")]
fn error(sink: &mut u32, e: kiln_nostd::Error) {
    mix(sink, e.code() as usize);
    mix(sink, e.offset());
    mix(sink, e.rule() as usize);
}

/// [`error`] for the model crate's errors (a rule of either crate).
#[cfg(any(feature = "signed", feature = "delta"))]
fn model_error(sink: &mut u32, e: kiln_model::Error) {
    mix(sink, e.code() as usize);
    mix(sink, e.offset());
    match e.rule() {
        kiln_model::AnyRule::Core(r) => mix(sink, r as usize),
        kiln_model::AnyRule::Model(r) => mix(sink, 0x100 | r as usize),
    }
}

#[cfg(any(
    feature = "parse",
    feature = "typical",
    feature = "incremental",
    feature = "c-api",
    feature = "signed",
    feature = "delta",
    feature = "digests",
    feature = "slots"
))]
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
    use kiln_nostd::{directory::scratch_len, wire::Header, Directory, Error, Limits, Parser};
    #[cfg(feature = "views")]
    use kiln_nostd::{directory::NameIndex, Tensor};

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
    use kiln_nostd::directory::FixedIndex;

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
#[cfg(feature = "signed")]
mod signed {
    use super::{inputs::*, mix, model_error as error, opaque};
    use kiln_model::update::UpdateCheck;
    use kiln_model::Trust;
    use kiln_nostd::digest::TensorHasher;
    use kiln_nostd::Limits;

    /// The trusted key (RFC 8032 test 1's public key) and the release the device wants.
    pub static KEY: [u8; 32] = [
        0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a, 0x0e, 0xe1,
        0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a,
    ];
    pub static TARGET: &str = "lm3s6965";
    pub static VERSION: u64 = 2;

    pub fn run(sink: &mut u32, buf: &[u8]) -> bool {
        let key: [u8; 32] = opaque(&KEY);
        let Some(trust) = Trust::new(&key) else { return false };
        let trust = trust.target(opaque(&TARGET)).newer_than(opaque(&VERSION));
        let mut mem = [0u8; 2048];
        let mut hasher = TensorHasher::new();
        let mut scratch = [0u32; 64];
        let limits = Limits::DEFAULT.with_count_cap(opaque(&COUNT_CAP));
        let mut check = UpdateCheck::new(trust, &mut mem, &mut hasher).scratch(&mut scratch).limits(limits);
        let chunk = opaque(&CHUNK).max(1);
        for c in buf.chunks(chunk) {
            match check.feed(c) {
                Ok(p) => mix(sink, p as usize),
                Err(e) => {
                    error(sink, e);
                    break;
                }
            }
            if let Some(d) = check.directory() {
                mix(sink, d.len());
            }
            mix(sink, check.block_start().unwrap_or(0) as usize);
        }
        mix(sink, check.consumed() as usize);
        match check.finish() {
            Ok(s) => mix(sink, s.version as usize ^ s.payload_start as usize),
            Err(e) => error(sink, e),
        }
        true
    }
}

/// The signature check on the device: RFC 8032 section 7.1's vectors
/// through the check `UpdateCheck` calls (`Trust::new`, then
/// `Trust::check_pieces` over the message in two pieces), each also with a
/// flipped signature bit and a flipped message bit, which must be refused;
/// and the check's peak stack, by painting, printed as decimal text.
#[cfg(feature = "signed-vectors")]
mod signed_vectors {
    use super::opaque;
    use kiln_model::Trust;

    /// The ceiling the check's stack must stay within: issue 44's 2 KiB on
    /// Arm. riscv32imc misses it (2,412 bytes measured: its frames for
    /// curve25519-dalek's 32-bit field arithmetic are larger), so its
    /// ceiling is the figure with a margin, to catch growth.
    #[cfg(target_arch = "arm")]
    pub const STACK_MAX: usize = 2048;
    /// See the Arm ceiling.
    #[cfg(not(target_arch = "arm"))]
    pub const STACK_MAX: usize = 2560;

    /// Hex text to bytes at compile time (a bad digit or length stops the build).
    const fn hex<const N: usize>(s: &str) -> [u8; N] {
        const fn digit(c: u8) -> u8 {
            match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                _ => panic!("not a lower-case hex digit"),
            }
        }
        let b = s.as_bytes();
        assert!(b.len() == 2 * N, "hex text of the wrong length");
        let mut out = [0u8; N];
        let mut i = 0;
        while i < N {
            out[i] = digit(b[2 * i]) << 4 | digit(b[2 * i + 1]);
            i += 1;
        }
        out
    }

    /// (public key, signature, message): RFC 8032 section 7.1, TEST 1, 2, 3, SHA(abc).
    static VECTORS: [([u8; 32], [u8; 64], &[u8]); 4] = [
        (
            hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"),
            hex("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
            b"",
        ),
        (
            hex("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"),
            hex("92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
            &[0x72],
        ),
        (
            hex("fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025"),
            hex("6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
            &[0xaf, 0x82],
        ),
        (
            hex("ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf"),
            hex("dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704"),
            &hex::<64>("ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"),
        ),
    ];

    /// A vector that is never used (the fallback of a lookup that cannot fail).
    const VECTORS_NONE: ([u8; 32], [u8; 64], &[u8]) = ([0; 32], [0; 64], &[]);

    /// The check `UpdateCheck` makes, the message cut in two at `cut`.
    #[inline(never)]
    fn check(trust: &Trust<'_>, sig: &[u8; 64], msg: &[u8], cut: usize) -> bool {
        let (a, b) = msg.split_at_checked(cut).unwrap_or((msg, &[]));
        trust.check_pieces(sig, &[a, b]).is_ok()
    }

    /// Every vector's verdicts with its trust: valid, a flipped signature
    /// bit and a flipped message bit refused.
    #[inline(never)]
    fn verdicts(trusts: &[Option<Trust<'_>>; 4]) -> bool {
        let mut ok = true;
        for (i, ((_, sig, msg), trust)) in opaque(&&VECTORS).iter().zip(trusts).enumerate() {
            let Some(trust) = trust else { return false };
            let cut = msg.len() / 2;
            ok &= check(trust, sig, msg, cut);
            let mut bad = *sig;
            if let Some(b) = bad.get_mut(i.wrapping_mul(17) % 64) {
                *b ^= 1;
            }
            ok &= !check(trust, &bad, msg, cut);
            let mut m = [0u8; 64];
            if let Some(m) = m.get_mut(..msg.len()) {
                m.copy_from_slice(msg);
                if let Some(b) = m.first_mut() {
                    *b ^= 0x80;
                    ok &= !check(trust, sig, m, cut);
                }
            }
        }
        ok
    }

    /// One line of output: `label`, the verdict, the stack figure.
    fn report(label: &[u8], ok: bool, used: usize) {
        let mut line = [0u8; 96];
        let mut n = 0;
        for part in [label, b": ", if ok { b"ok" } else { b"FAILED" }, b", stack "] {
            n = crate::stack::put(&mut line, n, part);
        }
        n = crate::stack::put_decimal(&mut line, n, used);
        n = crate::stack::put(&mut line, n, b" bytes\n");
        crate::rt::print(line.get(..n).unwrap_or(&[]));
    }

    /// Decodes the four keys (`Trust::new`, once per key as a device does
    /// at boot), then checks every verdict (`check_pieces`, what an update
    /// runs), each with the stack painted below the caller's frame; prints
    /// both figures (the deepest byte written, the harness's `check` and
    /// `verdicts` frames included). True when every verdict is right and
    /// the signature check's stack is within [`STACK_MAX`].
    pub fn run() -> bool {
        const PAINT: usize = 6 * 1024;
        let vectors = opaque(&&VECTORS);
        let mut trusts: [Option<Trust<'_>>; 4] = [None; 4];
        let (keys_ok, key_stack) = crate::stack::measure(PAINT, || {
            for (t, (key, _, _)) in trusts.iter_mut().zip(vectors) {
                *t = Trust::new(key);
            }
            trusts.iter().all(Option::is_some)
        });
        report(b"ed25519 keys (Trust::new)", keys_ok, key_stack);
        let (ok, all_stack) = crate::stack::measure(PAINT, || verdicts(&trusts));
        report(b"ed25519 RFC 8032 vectors, each refused altered (harness frames included)", ok, all_stack);
        // The check alone, called from the painting frame (TEST SHA(abc): two SHA-512 blocks).
        let (trust, (_, sig, msg)) =
            (trusts.get(3).copied().flatten(), vectors.get(3).copied().unwrap_or(VECTORS_NONE));
        let (one_ok, sig_stack) = crate::stack::measure(PAINT, || {
            trust.is_some_and(|t| {
                t.check_pieces(&sig, &[msg.get(..10).unwrap_or(&[]), msg.get(10..).unwrap_or(&[])]).is_ok()
            })
        });
        report(b"ed25519 signature check (Trust::check_pieces)", one_ok, sig_stack);
        keys_ok && ok && one_ok && sig_stack <= STACK_MAX
    }
}

/// Stack painting (the `signed-vectors` run): paint below the stack pointer,
/// call, find the deepest word written.
#[cfg(feature = "signed-vectors")]
mod stack {
    const PAINT_WORD: u32 = 0xa5a5_a5a5;

    /// Calls `f` with `depth` bytes below the current frame painted; returns
    /// its result and how many bytes below the stack pointer it wrote.
    #[inline(never)]
    pub fn measure(depth: usize, f: impl FnOnce() -> bool) -> (bool, usize) {
        let sp = crate::rt::sp();
        // 64 bytes below the stack pointer stay unpainted: this frame's calls.
        let top = sp.saturating_sub(64) & !3;
        let bottom = sp.saturating_sub(depth) & !3;
        let mut a = bottom;
        while a < top {
            // SAFETY: [bottom, top) is free stack below this frame's stack
            // pointer (the RAM region is larger than `depth` plus the
            // frames above); nothing else runs, and `f` is called after.
            unsafe { core::ptr::write_volatile(a as *mut u32, PAINT_WORD) };
            a += 4;
        }
        let ok = f();
        let mut a = bottom;
        // SAFETY: the same words, read back after `f` returned.
        while a < top && unsafe { core::ptr::read_volatile(a as *const u32) } == PAINT_WORD {
            a += 4;
        }
        (ok, sp.saturating_sub(a))
    }

    /// `bytes` into `line` at `at`; the new end.
    pub fn put(line: &mut [u8], at: usize, bytes: &[u8]) -> usize {
        // checked_add: the slice's length is then provably `bytes.len()`.
        match at.checked_add(bytes.len()).and_then(|end| Some((end, line.get_mut(at..end)?))) {
            Some((end, dst)) => {
                dst.copy_from_slice(bytes);
                end
            }
            None => at,
        }
    }

    /// `v` in decimal into `line` at `at`; the new end.
    pub fn put_decimal(line: &mut [u8], at: usize, mut v: usize) -> usize {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            if let Some(d) = digits.get_mut(i) {
                *d = b'0' + (v % 10) as u8;
            }
            v /= 10;
            if v == 0 || i == 0 {
                break;
            }
        }
        put(line, at, digits.get(i..).unwrap_or(&[]))
    }
}

/// Applying a delta update: its head, the base check, and the plan of
/// pieces a device follows to rebuild the new model in its inactive slot.
#[cfg(feature = "delta")]
mod delta {
    use super::{inputs::*, mix, model_error as error, opaque};
    use kiln_model::delta::{base_id, DeltaHead, Piece, Plan};

    pub fn run(sink: &mut u32, buf: &[u8]) -> bool {
        // A delta's head and plan, against the input as both models' directory.
        let id = base_id(buf, opaque(&START));
        match DeltaHead::parse(buf) {
            Ok(h) => {
                mix(sink, h.len() ^ h.count());
                if let Err(e) = h.check_base(&id) {
                    error(sink, e);
                }
                if let Ok(d) = kiln_nostd::Directory::parse(buf) {
                    match Plan::new(h, d, d) {
                        Ok(plan) => {
                            for p in plan {
                                match p {
                                    Ok(Piece::Zeros(n) | Piece::Sent(n)) => mix(sink, n as usize),
                                    Ok(Piece::Base { at, len }) => mix(sink, (at ^ len) as usize),
                                    Err(e) => error(sink, e),
                                }
                            }
                        }
                        Err(e) => error(sink, e),
                    }
                }
            }
            Err(e) => error(sink, e),
        }
        true
    }
}

/// A model file with every digest compared, in memory.
#[cfg(feature = "digests")]
mod digests {
    use super::{mix, opaque};
    use kiln_model::Model;

    pub fn run(sink: &mut u32, buf: &[u8]) -> bool {
        match Model::parse_verified(opaque(&buf)) {
            Ok(m) => mix(sink, m.directory().len() ^ m.payload_start()),
            Err(e) => {
                mix(sink, e.code() as usize);
                mix(sink, e.offset());
            }
        }
        true
    }
}

/// The update state (kiln-model's `slots`): trusted keys, provisioning,
/// boot, a download into the other slot, finish, the trial boot, confirm
/// and the release counter, over a NOR flash in RAM.
#[cfg(feature = "slots")]
mod slots {
    use super::{mix, opaque};
    use embedded_storage::nor_flash::{ErrorType, NorFlash, NorFlashErrorKind, ReadNorFlash};
    use kiln_model::slots::{Keys, Layout, SlotError, Slots};

    const SECTOR: usize = 1024;
    const CAPACITY: usize = 11 * SECTOR;
    static mut MEM: [u8; CAPACITY] = [0xFF; CAPACITY];

    /// A NOR flash in RAM: programs AND, erases set 0xFF.
    struct Ram(&'static mut [u8; CAPACITY]);

    impl ErrorType for Ram {
        type Error = NorFlashErrorKind;
    }

    impl ReadNorFlash for Ram {
        const READ_SIZE: usize = 1;
        fn read(&mut self, at: u32, buf: &mut [u8]) -> Result<(), NorFlashErrorKind> {
            let at = at as usize;
            let end = at.checked_add(buf.len()).ok_or(NorFlashErrorKind::OutOfBounds)?;
            let src = self.0.get(at..end).ok_or(NorFlashErrorKind::OutOfBounds)?;
            buf.copy_from_slice(src);
            Ok(())
        }
        fn capacity(&self) -> usize {
            CAPACITY
        }
    }

    impl NorFlash for Ram {
        const WRITE_SIZE: usize = 4;
        const ERASE_SIZE: usize = SECTOR;
        fn erase(&mut self, from: u32, to: u32) -> Result<(), NorFlashErrorKind> {
            self.0.get_mut(from as usize..to as usize).ok_or(NorFlashErrorKind::OutOfBounds)?.fill(0xFF);
            Ok(())
        }
        fn write(&mut self, at: u32, bytes: &[u8]) -> Result<(), NorFlashErrorKind> {
            let at = at as usize;
            let end = at.checked_add(bytes.len()).ok_or(NorFlashErrorKind::OutOfBounds)?;
            let dst = self.0.get_mut(at..end).ok_or(NorFlashErrorKind::OutOfBounds)?;
            for (d, s) in dst.iter_mut().zip(bytes) {
                *d &= *s;
            }
            Ok(())
        }
    }

    pub static KEY: [u8; 32] = [7; 32];
    pub static LAYOUT: Layout = Layout {
        state: 0,
        keys: 2 * SECTOR as u32,
        slots: [3 * SECTOR as u32, 7 * SECTOR as u32],
        slot_len: 4 * SECTOR as u32,
    };
    pub static FACTORY: (u32, u64) = (1000, 1);
    pub static VERSION: u64 = 2;

    fn update(sink: &mut u32, s: &mut Slots<Ram>, buf: &[u8]) -> Result<u64, SlotError<NorFlashErrorKind>> {
        s.write_keys(&Keys::new(&[opaque(&KEY)]).ok_or(SlotError::Keys)?)?;
        let (len, version) = opaque(&FACTORY);
        mix(sink, s.provision(len, version)?.seq as usize);
        let b = s.boot()?;
        mix(sink, b.offset as usize ^ b.len as usize);
        let keys = s.keys()?;
        mix(sink, keys.for_file(buf).map_or(0, |k| usize::from(k[0])));
        mix(sink, s.state()?.floor() as usize);
        let mut dl = s.begin()?;
        for c in buf.chunks(256).take(12) {
            s.write(&mut dl, c)?;
        }
        s.finish(dl, opaque(&VERSION))?;
        let b = s.boot()?;
        mix(sink, usize::from(b.trial));
        Ok(s.confirm()?.counter)
    }

    pub fn run(sink: &mut u32, buf: &[u8]) -> bool {
        // SAFETY: `run` is called once, from `main`: the only reference to MEM.
        let mem = unsafe { &mut *core::ptr::addr_of_mut!(MEM) };
        let Ok(mut s) = Slots::new(Ram(mem), opaque(&LAYOUT)) else { return false };
        match update(sink, &mut s, buf) {
            Ok(counter) => counter == opaque(&VERSION),
            Err(e) => {
                mix(sink, matches!(e, SlotError::Flash(_)) as usize);
                false
            }
        }
    }
}

#[cfg(feature = "incremental")]
mod incremental {
    use super::{error, inputs::*, mix, opaque};
    use kiln_nostd::{incremental::Progress, Incremental, Limits};

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
        fn decode(d: &mut Decoder<'a>) -> kiln_nostd::error::Result<Self> {
            Ok(Record { id: i64::decode(d)?, name: <&str>::decode(d)?, scores: ListView::decode(d)? })
        }
    }

    pub fn run(sink: &mut u32) -> bool {
        let buf: &[u8] = opaque(&super::frozen_record::INPUT);
        match decode_framed::<Record<'_>>(buf) {
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
    use kiln_nostd::{
        dtype::{encode_le, le_bytes},
        writer::{sort_dict, QuantSpec, TensorRef},
        DType, Directory, Limits, TensorSpec, Writer,
    };

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
            TensorSpec::new(dtype, shape, &data).named(q_name).quantized(QuantSpec::Scales {
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

/// The C API (kiln-c): every entry point of kiln.h, called as a C program
/// would (raw pointers and lengths, all opaque), so the static library's
/// code is proven panic-free too. Handles live in plain memory, as in C.
#[cfg(feature = "c-api")]
mod c_api {
    use super::{inputs::*, mix, opaque};
    use core::ffi::{c_char, c_int, c_void, CStr};
    use core::ptr::{null, null_mut};
    use kiln_c_api::*;

    static NAME_C: &CStr = c"fc1.weight";
    static KEY_C: &CStr = c"author";
    static ROWS: (u64, u64) = (3, 5);
    static NULL_LEN: usize = 0;

    fn err() -> kiln_error {
        kiln_error { code: 0, offset: 0, rule: null(), description: null(), needed: 0, read_status: 0 }
    }

    fn error(sink: &mut u32, e: &kiln_error) {
        mix(sink, e.code as usize);
        mix(sink, e.offset as usize);
        mix(sink, e.rule as usize);
        mix(sink, e.description as usize);
        mix(sink, e.needed as usize);
        mix(sink, e.read_status as usize);
    }

    /// The read callback: bytes of the model in flash.
    unsafe extern "C" fn read_at(ctx: *mut c_void, offset: u64, buf: *mut u8, len: usize) -> c_int {
        // SAFETY: ctx is the &[u8] passed below.
        let src: &[u8] = unsafe { *(ctx as *const &[u8]) };
        let Some(bytes) = usize::try_from(offset).ok().and_then(|o| src.get(o..o.checked_add(len)?)) else {
            return 1;
        };
        // SAFETY: the library asks for `len` writable bytes at `buf`.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), buf, len) };
        0
    }

    macro_rules! each_element {
        ($sink:expr, $d:expr, $i:expr, $($view:ident $copy:ident $t:ty),*) => {$({
            let mut n = 0usize;
            // SAFETY: valid handle and out pointers, as C would pass them.
            let p = unsafe { $view($d, $i, &mut n) };
            mix($sink, p as usize ^ n);
            let mut out = [<$t>::default(); 256];
            let len = opaque(&out.len());
            // SAFETY: as above, `out` holds `len` elements.
            let rc = unsafe { $copy($d, $i, out.as_mut_ptr(), len, &mut n) };
            mix($sink, rc as usize ^ n);
            mix($sink, out.first().map_or(0, |v| *v as usize));
        })*};
    }

    // SAFETY (every unsafe block below): C API calls with pointers to live
    // memory of the stated lengths; one comment each would repeat this.
    #[allow(clippy::undocumented_unsafe_blocks)]
    pub fn run(sink: &mut u32, buf: &[u8]) -> bool {
        let mut ok = true;
        let (data, len) = (opaque(&buf.as_ptr()), opaque(&buf.len()));
        let mut e = err();
        let rc = unsafe { kiln_validate(data, len, &mut e) };
        ok &= rc == KILN_OK;
        error(sink, &e);
        mix(sink, kiln_code_name(opaque(&rc)) as usize);
        mix(sink, kiln_dtype_name(opaque(&(INDEX as u16))) as usize);
        mix(sink, unsafe { kiln_validate(null(), opaque(&NULL_LEN), null_mut()) } as usize);
        mix(sink, kiln_scratch_len(opaque(&COUNT_CAP)));

        // Parse with options (scratch, caps, seed); and without.
        let mut scratch = [0u32; 64];
        let opts = kiln_options {
            scratch: scratch.as_mut_ptr(),
            scratch_len: opaque(&scratch.len()),
            count_cap: opaque(&COUNT_CAP),
            byte_cap: opaque(&COUNT_CAP),
            hash_seed: opaque(&SEED),
        };
        let mut d = kiln_dir { opaque: [0; KILN_DIR_WORDS] };
        let rc = unsafe { kiln_parse_ex(data, len, &opts, &mut d, &mut e) };
        ok &= rc == KILN_OK;
        let mut plain = kiln_dir { opaque: [0; KILN_DIR_WORDS] };
        mix(sink, unsafe { kiln_parse(data, len, &mut plain, null_mut()) } as usize);
        let mut info = kiln_dir_info {
            tensor_count: 0,
            block_offset: 0,
            block_len: 0,
            payload_offset: 0,
            payload_len: 0,
            named: false,
            is_model: false,
            hashed_index: false,
            has_payload: false,
            metadata_count: 0,
        };
        mix(sink, unsafe { kiln_dir_get_info(&d, &mut info) } as usize);
        mix(sink, info.tensor_count ^ info.block_len as usize ^ usize::from(info.hashed_index));
        let count = unsafe { kiln_count(&d) };
        let mut t = core::mem::MaybeUninit::<kiln_tensor>::uninit();
        for i in 0..count {
            if unsafe { kiln_tensor_at(&d, i, t.as_mut_ptr()) } == KILN_OK {
                // SAFETY: filled by the successful call.
                let t = unsafe { t.assume_init_ref() };
                mix(sink, t.name.len ^ t.rank as usize ^ t.shape[0] as usize ^ t.data as usize);
                mix(sink, t.quant.scale_index as usize ^ t.dtype_name as usize ^ t.layout.len);
            }
            let mut out = [0f32; 2048];
            let mut n = 0;
            mix(sink, unsafe { kiln_tensor_dequantize_f32(&d, i, out.as_mut_ptr(), opaque(&out.len()), &mut n) }
                as usize);
            mix(sink, n ^ out.first().map_or(0, |v| v.to_bits() as usize));
        }
        let mut index = 0usize;
        let name: *const c_char = opaque(&NAME_C.as_ptr());
        ok &= unsafe { kiln_find(&d, name, &mut index) } == KILN_OK;
        let name_len = opaque(&NAME_C.to_bytes().len());
        mix(sink, unsafe { kiln_find_n(&plain, name, name_len, &mut index) } as usize ^ index);
        let i = opaque(&INDEX);
        each_element!(sink, &d, i,
            kiln_tensor_view_u8 kiln_tensor_copy_u8 u8, kiln_tensor_view_i8 kiln_tensor_copy_i8 i8,
            kiln_tensor_view_u16 kiln_tensor_copy_u16 u16, kiln_tensor_view_i16 kiln_tensor_copy_i16 i16,
            kiln_tensor_view_u32 kiln_tensor_copy_u32 u32, kiln_tensor_view_i32 kiln_tensor_copy_i32 i32,
            kiln_tensor_view_u64 kiln_tensor_copy_u64 u64, kiln_tensor_view_i64 kiln_tensor_copy_i64 i64,
            kiln_tensor_view_f32 kiln_tensor_copy_f32 f32, kiln_tensor_view_f64 kiln_tensor_copy_f64 f64);
        let mut key = kiln_str { ptr: null(), len: 0 };
        let mut value = key;
        mix(sink, unsafe { kiln_metadata_count(&d) });
        mix(sink, unsafe { kiln_metadata_at(&d, opaque(&NULL_LEN), &mut key, &mut value) } as usize ^ value.len);
        mix(sink, unsafe { kiln_metadata_get(&d, opaque(&KEY_C.as_ptr()), &mut value) } as usize ^ key.len);

        // The incremental validator, in chunks, skipping what it allows.
        let mut needed = 0u64;
        mix(sink, unsafe { kiln_prefix_len(data, len.min(64), &mut needed, &mut e) } as usize ^ needed as usize);
        let mut prefix = [0u8; 2048];
        let mut v = kiln_incremental { opaque: [0; KILN_INCREMENTAL_WORDS] };
        let mut names = [0u32; 64];
        let vopts = kiln_options { scratch: names.as_mut_ptr(), scratch_len: opaque(&names.len()), ..opts };
        mix(sink, unsafe { kiln_incremental_init(&mut v, prefix.as_mut_ptr(), opaque(&prefix.len()), &vopts) }
            as usize);
        let chunk = opaque(&CHUNK).max(1);
        let mut pos = 0usize;
        let mut table = kiln_dir { opaque: [0; KILN_DIR_WORDS] };
        while pos < len {
            let need = unsafe { kiln_incremental_next_needed(&v) };
            if need > pos as u64 && need != u64::MAX {
                let mut skipped = 0u64;
                if unsafe { kiln_incremental_skip(&mut v, need - pos as u64, &mut skipped, &mut e) } != KILN_OK
                    || skipped == 0
                {
                    break;
                }
                pos = pos.saturating_add(usize::try_from(skipped).unwrap_or(len));
                continue;
            }
            let end = pos.saturating_add(chunk).min(len);
            let Some(piece) = buf.get(pos..end) else { break };
            let mut progress = 0;
            let rc = unsafe { kiln_incremental_feed(&mut v, piece.as_ptr(), piece.len(), &mut progress, &mut e) };
            if rc == KILN_OK && progress == KILN_PROGRESS_DIRECTORY {
                mix(sink, unsafe { kiln_incremental_directory(&v, &mut table) } as usize);
                mix(sink, unsafe { kiln_find(&table, name, &mut index) } as usize ^ index);
            }
            pos = end;
        }
        mix(sink, unsafe { kiln_incremental_consumed(&v) } as usize);
        let mut summary = kiln_summary { block_len: 0, payload_base: 0, tensor_count: 0 };
        ok &= unsafe { kiln_incremental_finish(&mut v, &mut summary, &mut e) } == KILN_OK;
        error(sink, &e);
        ok &= summary.block_len == len as u64;

        // Ranged reading through the callback.
        let mut ctx: &[u8] = buf;
        let src =
            kiln_source { read_at: Some(read_at), ctx: (&mut ctx as *mut &[u8]).cast(), len: opaque(&(len as u64)) };
        let mut chunk_buf = [0u8; 128];
        let rc = unsafe {
            kiln_source_verify(
                &src,
                prefix.as_mut_ptr(),
                opaque(&prefix.len()),
                chunk_buf.as_mut_ptr(),
                opaque(&chunk_buf.len()),
                &mut e,
            )
        };
        ok &= rc == KILN_OK;
        // The digests (SHA-256, step 9d): in memory and through the callback.
        let mut verified =
            kiln_verified { record: 0, digests_checked: false, tensor_count: 0, block_offset: 0, block_len: 0 };
        ok &= unsafe { kiln_model_verify(data, len, opaque(&0u32), &mut verified, &mut e) } == KILN_OK;
        mix(sink, verified.record as usize ^ verified.tensor_count);
        let rc = unsafe {
            kiln_source_verify_model(
                &src,
                prefix.as_mut_ptr(),
                opaque(&prefix.len()),
                chunk_buf.as_mut_ptr(),
                opaque(&chunk_buf.len()),
                opaque(&0u32),
                &mut verified,
                &mut e,
            )
        };
        ok &= rc == KILN_OK;
        mix(sink, verified.block_len as usize);
        let mut opened = kiln_dir { opaque: [0; KILN_DIR_WORDS] };
        ok &= unsafe { kiln_source_open(&src, prefix.as_mut_ptr(), opaque(&prefix.len()), &mut opened, &mut e) }
            == KILN_OK;
        let mut out = [0u8; 8192];
        let mut n = 0usize;
        let rc = unsafe {
            kiln_source_read_tensor(&src, &opened, opaque(&INDEX), out.as_mut_ptr(), opaque(&out.len()), &mut n, &mut e)
        };
        mix(sink, rc as usize ^ n);
        let (a, b) = opaque(&ROWS);
        let rc = unsafe {
            kiln_source_read_rows(&src, &opened, index, a, b, out.as_mut_ptr(), opaque(&out.len()), &mut n, &mut e)
        };
        mix(sink, rc as usize ^ n);
        error(sink, &e);
        ok & slots(sink, buf)
    }

    const SECTOR: u32 = 1024;
    const CAPACITY: usize = 11 * SECTOR as usize;
    static mut FLASH: [u8; CAPACITY] = [0xFF; CAPACITY];
    static LAYOUT: kiln_slots_layout =
        kiln_slots_layout { state: 0, keys: 2 * SECTOR, slot_a: 3 * SECTOR, slot_b: 7 * SECTOR, slot_len: 4 * SECTOR };
    static KEYS: [[u8; 32]; 2] = [[7; 32], [9; 32]];

    /// The flash callbacks, over FLASH (a NOR flash in RAM).
    fn mem(offset: u32, len: usize) -> Option<&'static mut [u8]> {
        let at = usize::try_from(offset).ok()?;
        // SAFETY: single-threaded; each callback takes this one reference and drops it before returning.
        let flash = unsafe { &mut *core::ptr::addr_of_mut!(FLASH) };
        flash.get_mut(at..at.checked_add(len)?)
    }
    unsafe extern "C" fn flash_read(_: *mut c_void, offset: u32, buf: *mut u8, len: usize) -> c_int {
        let Some(src) = mem(offset, len) else { return 1 };
        // SAFETY: the library passes `len` writable bytes at `buf`.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), buf, len) };
        0
    }
    unsafe extern "C" fn flash_write(_: *mut c_void, offset: u32, buf: *const u8, len: usize) -> c_int {
        let Some(dst) = mem(offset, len) else { return 1 };
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: the library passes `len` readable bytes at `buf`.
            *d &= unsafe { buf.add(i).read() };
        }
        0
    }
    unsafe extern "C" fn flash_erase(_: *mut c_void, from: u32, to: u32) -> c_int {
        match to.checked_sub(from).and_then(|n| mem(from, n as usize)) {
            Some(d) => {
                d.fill(0xFF);
                0
            }
            None => 1,
        }
    }

    /// The slots' C API (kiln_slots_*): provisioning, keys, boot, a download, the trial, confirm.
    #[allow(clippy::undocumented_unsafe_blocks)] // as `run`
    fn slots(sink: &mut u32, buf: &[u8]) -> bool {
        let flash = kiln_flash {
            read: Some(flash_read),
            write: Some(flash_write),
            erase: Some(flash_erase),
            ctx: null_mut(),
            capacity: opaque(&(CAPACITY as u32)),
            sector: opaque(&SECTOR),
        };
        let layout = opaque(&LAYOUT);
        let mut e = err();
        let mut st = kiln_slot_state::default();
        let keys = opaque(&KEYS);
        let mut ok =
            unsafe { kiln_slots_write_keys(&flash, &layout, keys.as_ptr(), opaque(&keys.len()), &mut e) } == KILN_OK;
        ok &= unsafe { kiln_slots_provision(&flash, &layout, opaque(&1000), opaque(&1), &mut st, &mut e) } == KILN_OK;
        let mut key = [0u8; 32];
        let rc = unsafe { kiln_slots_key_for_file(&flash, &layout, buf.as_ptr(), buf.len(), &mut key, &mut e) };
        mix(sink, rc as usize ^ usize::from(key[0]));
        let mut b = kiln_boot::default();
        ok &= unsafe { kiln_slots_boot(&flash, &layout, &mut b, &mut e) } == KILN_OK;
        let mut dl = kiln_download { opaque: [0; KILN_DOWNLOAD_WORDS] };
        ok &= unsafe { kiln_slots_begin(&flash, &layout, &mut dl, &mut e) } == KILN_OK;
        for c in buf.chunks(256).take(12) {
            ok &= unsafe { kiln_slots_write(&flash, &layout, &mut dl, c.as_ptr(), c.len(), &mut e) } == KILN_OK;
        }
        ok &= unsafe { kiln_slots_finish(&flash, &layout, &mut dl, opaque(&2), &mut st, &mut e) } == KILN_OK;
        ok &= unsafe { kiln_slots_boot(&flash, &layout, &mut b, &mut e) } == KILN_OK && b.trial;
        ok &= unsafe { kiln_slots_confirm(&flash, &layout, &mut st, &mut e) } == KILN_OK;
        ok &= unsafe { kiln_slots_state(&flash, &layout, &mut st, &mut e) } == KILN_OK && st.counter == 2;
        error(sink, &e);
        ok
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
    #[cfg(feature = "signed")]
    {
        ok &= signed::run(&mut sink, opaque(&inputs::INPUT));
    }
    #[cfg(feature = "signed-vectors")]
    {
        ok &= signed_vectors::run();
    }
    #[cfg(feature = "delta")]
    {
        ok &= delta::run(&mut sink, opaque(&inputs::INPUT));
    }
    #[cfg(feature = "digests")]
    {
        ok &= digests::run(&mut sink, opaque(&inputs::INPUT));
    }
    #[cfg(feature = "slots")]
    {
        ok &= slots::run(&mut sink, opaque(&inputs::INPUT));
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
    #[cfg(feature = "c-api")]
    {
        ok &= c_api::run(&mut sink, opaque(&inputs::INPUT));
    }
    #[cfg(not(any(
        feature = "parse",
        feature = "typical",
        feature = "frozen",
        feature = "frozen-typed",
        feature = "incremental",
        feature = "c-api",
        feature = "signed",
        feature = "delta",
        feature = "digests",
        feature = "slots"
    )))]
    {
        // Baseline: the same opaque read and sink traffic, no decoder.
        static NOTHING: usize = 0;
        mix(&mut sink, opaque(&NOTHING));
    }

    // SAFETY: single-threaded; the only writer of SINK.
    unsafe { core::ptr::write_volatile(core::ptr::addr_of_mut!(SINK), sink) };
    rt::exit(ok)
}
