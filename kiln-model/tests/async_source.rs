//! Async ranged reading (`source::AsyncReadAt`, `open_async`, `read_tensor_async`,
//! `read_rows_async`, `verify_async`, `Options::verify_model_async`) against
//! the blocking forms: the same result (verdict, code, rule, offset, read
//! error, buffer size, summary, bytes copied) and the same reads in the same
//! order, on
//!
//! - every directory golden, regression and check-order case, and every
//!   model-file case (`spec/model-cases.json`);
//! - the example model (`spec/examples/digits-mlp.kiln`) and its model file
//!   (`digits-mlp.model.kiln`), with flipped bytes, truncated, and mutated
//!   blocks;
//! - a source whose reads return `Pending` before they complete, and a
//!   source that fails its k-th call (for every k the operation makes);
//! - the adapters: `Flash` and `AsyncFlash` over a mock NOR flash (reads of
//!   4-byte units), `Io` and `AsyncIo` over a mock seekable reader.
//!
//! Futures run under `embassy_futures::block_on`, or under `run` below where
//! the test counts the `Pending` polls.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

#[path = "../../kiln-nostd/tests/cases/mod.rs"]
mod cases;

use cases::{json_cases, mutate, repo_root, templates, Rng};

use kiln_model::source::{self, AsyncReadAt, Options, ReadAt, SourceError, TensorId, Window};
use kiln_nostd::{Directory, Incremental, Limits, Parser};

/// A call a source received: `len`, or a read of `n` bytes at an offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    Len,
    Read(u64, usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Broken;

/// Bytes in memory that log every call, refuse reads past their end (the
/// module promises never to ask) and fail the `fail_at`th call (1-based).
struct Mem<'a> {
    bytes: &'a [u8],
    calls: Vec<Call>,
    fail_at: usize,
}

impl<'a> Mem<'a> {
    fn new(bytes: &'a [u8], fail_at: usize) -> Self {
        Mem { bytes, calls: Vec::new(), fail_at }
    }

    fn call(&mut self, c: Call, buf: &mut [u8]) -> Result<u64, Broken> {
        self.calls.push(c);
        if self.calls.len() == self.fail_at {
            return Err(Broken);
        }
        if let Call::Read(at, n) = c {
            assert!(n > 0, "no empty reads");
            let end = at as usize + n;
            assert!(end <= self.bytes.len(), "read {at}..{end} past the source's {} bytes", self.bytes.len());
            buf.copy_from_slice(&self.bytes[at as usize..end]);
        }
        Ok(self.bytes.len() as u64)
    }
}

impl ReadAt for Mem<'_> {
    type Error = Broken;
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Broken> {
        self.call(Call::Read(offset, buf.len()), buf).map(drop)
    }
    fn len(&mut self) -> Result<u64, Broken> {
        self.call(Call::Len, &mut [])
    }
}

/// `Mem` behind the async trait; every call first returns `Pending` once
/// (`yield_now`) when `yields`.
struct AsyncMem<'a> {
    mem: Mem<'a>,
    yields: bool,
}

impl<'a> AsyncMem<'a> {
    fn new(bytes: &'a [u8], fail_at: usize, yields: bool) -> Self {
        AsyncMem { mem: Mem::new(bytes, fail_at), yields }
    }
}

impl AsyncReadAt for AsyncMem<'_> {
    type Error = Broken;
    async fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Broken> {
        if self.yields {
            embassy_futures::yield_now().await;
        }
        self.mem.read_at(offset, buf)
    }
    async fn len(&mut self) -> Result<u64, Broken> {
        if self.yields {
            embassy_futures::yield_now().await;
        }
        self.mem.len()
    }
}

/// Polls `f` to completion with a no-op waker; its output and how many polls
/// returned `Pending`.
fn run<F: Future>(f: F) -> (F::Output, usize) {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    let mut pending = 0;
    loop {
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(out) => return (out, pending),
            Poll::Pending => pending += 1,
        }
    }
}

fn prefix_for(buf: &[u8]) -> usize {
    let need = Incremental::prefix_len(buf.get(..64).unwrap_or(&[]), &Limits::DEFAULT).ok().flatten().unwrap_or(64);
    need.min(buf.len() + 64).max(64)
}

/// Runs one operation both ways on `bytes`, failing the `fail_at`th call
/// (0: none), with the async source yielding or not; asserts the same
/// result and the same calls, and returns the number of calls.
fn same<T: PartialEq + std::fmt::Debug>(
    bytes: &[u8],
    fail_at: usize,
    yields: bool,
    blocking: impl Fn(&mut Mem<'_>) -> T,
    nonblocking: impl AsyncFn(&mut AsyncMem<'_>) -> T,
    what: &str,
) -> usize {
    let mut b = Mem::new(bytes, fail_at);
    let want = blocking(&mut b);
    let mut a = AsyncMem::new(bytes, fail_at, yields);
    let (got, pending) = run(nonblocking(&mut a));
    assert_eq!(got, want, "{what}: async result (fail at call {fail_at}, yields {yields})");
    assert_eq!(a.mem.calls, b.calls, "{what}: async calls (fail at call {fail_at}, yields {yields})");
    assert_eq!(pending, if yields { b.calls.len() } else { 0 }, "{what}: one Pending per call when yielding");
    b.calls.len()
}

/// Every call failing once, and none, both with and without `Pending`.
fn sweep<T: PartialEq + std::fmt::Debug>(
    bytes: &[u8],
    blocking: impl Fn(&mut Mem<'_>) -> T,
    nonblocking: impl AsyncFn(&mut AsyncMem<'_>) -> T,
    fail_every_call: bool,
    what: &str,
) -> usize {
    let calls = same(bytes, 0, true, &blocking, &nonblocking, what);
    same(bytes, 0, false, &blocking, &nonblocking, what);
    if fail_every_call {
        for k in 1..=calls {
            same(bytes, k, k % 2 == 0, &blocking, &nonblocking, what);
        }
    }
    calls
}

/// The verdict of `verify`, both ways, in two chunkings, with and without
/// read merging, standalone and embedded, with a short prefix buffer too.
fn compare_verify(bytes: &[u8], limits: Limits, fail_every_call: bool, what: &str) -> usize {
    let mut n = 0;
    for (chunk, coalesce, embedded, prefix) in
        [(64, 256, false, prefix_for(bytes)), (1000, 0, true, prefix_for(bytes)), (300, 256, false, 64)]
    {
        let opts = move || {
            let o = Options::new().parser(Parser::new().limits(limits)).coalesce(coalesce);
            if embedded {
                o.embedded()
            } else {
                o
            }
        };
        let blocking = |s: &mut Mem<'_>| {
            let (mut p, mut c) = (vec![0u8; prefix], vec![0u8; chunk]);
            opts().verify(s, &mut p, &mut c)
        };
        let nonblocking = async |s: &mut AsyncMem<'_>| {
            let (mut p, mut c) = (vec![0u8; prefix], vec![0u8; chunk]);
            opts().verify_async(s, &mut p, &mut c).await
        };
        let what = format!("{what}: verify, chunk {chunk}, coalesce {coalesce}, embedded {embedded}, prefix {prefix}");
        sweep(bytes, blocking, nonblocking, fail_every_call && chunk == 1000, &what);
        n += 1;
    }
    n
}

/// What an opened block shows, to compare two `Opened`s: its lengths and
/// its tensor table.
type Shown = (u64, u64, Vec<(Option<String>, &'static str, Vec<u64>, usize, u64)>);

fn shown(o: &source::Opened<'_>) -> Shown {
    let table = o
        .directory()
        .iter()
        .map(|t| {
            let name = t.name().map(String::from);
            (name, t.dtype().name(), t.shape().to_vec(), t.absolute_offset(), t.descriptor().byte_length)
        })
        .collect();
    (o.payload_base(), o.block_len(), table)
}

/// `open`, then `read_tensor` of every tensor and `read_rows` of a few row
/// ranges, both ways.
fn compare_open(bytes: &[u8], limits: Limits, fail_every_call: bool, what: &str) -> bool {
    let prefix = prefix_for(bytes);
    let blocking = |s: &mut Mem<'_>| {
        let mut p = vec![0u8; prefix];
        let o = Options::new().parser(Parser::new().limits(limits)).open(&mut *s, &mut p);
        o.map(|o| (shown(&o), reads_blocking(s, &o)))
    };
    let nonblocking = async |s: &mut AsyncMem<'_>| {
        let mut p = vec![0u8; prefix];
        match Options::new().parser(Parser::new().limits(limits)).open_async(&mut *s, &mut p).await {
            Ok(o) => Ok((shown(&o), reads_async(s, &o).await)),
            Err(e) => Err(e),
        }
    };
    sweep(bytes, blocking, nonblocking, fail_every_call, &format!("{what}: open and reads"));
    Options::new().parser(Parser::new().limits(limits)).open(bytes, &mut vec![0u8; prefix]).is_ok()
}

/// The row ranges read of a tensor of `dim0` rows.
fn row_ranges(dim0: u64) -> Vec<std::ops::Range<u64>> {
    vec![0..dim0, 0..dim0.min(1), dim0.saturating_sub(1)..dim0, dim0 / 2..dim0, 1..dim0.max(1), dim0..dim0 + 1]
}

type Reads = Vec<(Result<usize, SourceError<Broken>>, Vec<u8>)>;

fn reads_blocking(s: &mut Mem<'_>, o: &source::Opened<'_>) -> Reads {
    let mut out = Vec::new();
    for t in o.directory().iter() {
        let mut buf = vec![0u8; t.descriptor().byte_length as usize];
        let r = source::read_tensor(&mut *s, o, t, &mut buf);
        out.push((r, buf));
        if let Some(&dim0) = t.shape().first() {
            for rows in row_ranges(dim0) {
                let mut buf = vec![0u8; t.descriptor().byte_length as usize];
                let r = source::read_rows(&mut *s, o, TensorId::Index(t.index()), rows, &mut buf);
                out.push((r, buf));
            }
        }
    }
    let r = source::read_tensor(&mut *s, o, "no such tensor", &mut []);
    out.push((r, Vec::new()));
    out
}

async fn reads_async(s: &mut AsyncMem<'_>, o: &source::Opened<'_>) -> Reads {
    let mut out = Vec::new();
    for t in o.directory().iter() {
        let mut buf = vec![0u8; t.descriptor().byte_length as usize];
        let r = source::read_tensor_async(&mut *s, o, t, &mut buf).await;
        out.push((r, buf));
        if let Some(&dim0) = t.shape().first() {
            for rows in row_ranges(dim0) {
                let mut buf = vec![0u8; t.descriptor().byte_length as usize];
                let r = source::read_rows_async(&mut *s, o, TensorId::Index(t.index()), rows, &mut buf).await;
                out.push((r, buf));
            }
        }
    }
    let r = source::read_tensor_async(&mut *s, o, "no such tensor", &mut []).await;
    out.push((r, Vec::new()));
    out
}

/// `verify_model`, both ways: with digests and without, in a prefix that
/// holds the fields and in ones that do not.
fn compare_model(bytes: &[u8], fail_every_call: bool, what: &str) -> usize {
    let mut n = 0;
    for (prefix, chunk, skip) in [(8192, 64, false), (8192, 1000, true), (100, 64, false), (1300, 300, false)] {
        let opts = move || if skip { Options::new().skip_digests() } else { Options::new() };
        let blocking = |s: &mut Mem<'_>| {
            let (mut p, mut c) = (vec![0u8; prefix], vec![0u8; chunk]);
            opts().verify_model(s, &mut p, &mut c)
        };
        let nonblocking = async |s: &mut AsyncMem<'_>| {
            let (mut p, mut c) = (vec![0u8; prefix], vec![0u8; chunk]);
            opts().verify_model_async(s, &mut p, &mut c).await
        };
        let what = format!("{what}: verify_model, prefix {prefix}, chunk {chunk}, skip digests {skip}");
        sweep(bytes, blocking, nonblocking, fail_every_call && chunk == 1000, &what);
        n += 1;
    }
    n
}

fn read(path: &str) -> Vec<u8> {
    std::fs::read(repo_root().join(path)).expect(path)
}

#[test]
fn goldens_regressions_and_the_check_order_matrix() {
    let (mut n, mut goldens, mut opened) = (0, 0, 0);
    for f in cases::case_files() {
        for (name, bytes) in json_cases(&f) {
            n += compare_verify(&bytes, Limits::DEFAULT, true, &name);
            opened += usize::from(compare_open(&bytes, Limits::DEFAULT, true, &name));
            goldens += usize::from(f.ends_with("kiln-v2-cases.json"));
        }
    }
    assert_eq!(goldens, 39, "directory goldens");
    assert!(opened >= 20, "{opened} blocks opened");
    println!("{n} verify comparisons, {opened} blocks opened and read");
}

#[test]
fn model_file_cases() {
    let text = std::fs::read_to_string(repo_root().join("spec/model-cases.json")).expect("model cases");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    let mut files = 0;
    for c in v.as_array().expect("cases") {
        for (name, hx) in c["files"].as_object().expect("files") {
            let bytes = hex::decode(hx.as_str().expect("hex")).expect("hex");
            let what = format!("{} / {name}", c["name"]);
            compare_model(&bytes, true, &what);
            files += 1;
        }
    }
    assert!(files >= 283, "{files} model files");
}

#[test]
fn the_example_model_and_its_model_file() {
    let block = read("spec/examples/digits-mlp.kiln");
    let file = read("spec/examples/digits-mlp.model.kiln");
    compare_verify(&block, Limits::DEFAULT, true, "digits-mlp.kiln");
    assert!(compare_open(&block, Limits::DEFAULT, true, "digits-mlp.kiln"));
    compare_verify(&file, Limits::DEFAULT, false, "digits-mlp.model.kiln as a block");
    compare_model(&file, true, "digits-mlp.model.kiln");
    compare_model(&block, false, "digits-mlp.kiln as a model file");
}

/// Flipped bytes: every byte of the block's directory prefix; the model
/// file's fields before its block, its block prefix and the payloads at a
/// stride (each model-file copy is hashed in four configurations).
#[test]
fn flipped_bytes() {
    let block = read("spec/examples/digits-mlp.kiln");
    let file = read("spec/examples/digits-mlp.model.kiln");
    let base = Directory::parse(&block).unwrap().payload_start();
    let fields = file.len() - block.len();
    let mut n = 0;
    let block_at = (0..base).chain((base..block.len()).step_by(61));
    let file_at = (0..fields).step_by(5).chain((fields..fields + base).step_by(13));
    let file_at = file_at.chain((fields + base..file.len()).step_by(251));
    for (bytes, at, model) in [(&block, block_at.collect::<Vec<_>>(), false), (&file, file_at.collect(), true)] {
        for (k, &i) in at.iter().chain([bytes.len() - 1].iter()).enumerate() {
            let mut b = bytes.clone();
            b[i] ^= 1 << (k % 8);
            let what = format!("byte {i} flipped");
            if model {
                compare_model(&b, false, &what);
            } else {
                compare_verify(&b, Limits::DEFAULT, false, &what);
                compare_open(&b, Limits::DEFAULT, false, &what);
            }
            n += 1;
        }
    }
    println!("{n} flipped copies");
}

#[test]
fn truncations() {
    let block = read("spec/examples/digits-mlp.kiln");
    let file = read("spec/examples/digits-mlp.model.kiln");
    for (bytes, model) in [(&block, false), (&file, true)] {
        let lens = (0..1400).step_by(7).chain((1400..bytes.len()).step_by(997)).chain([bytes.len() - 1]);
        for len in lens {
            let b = &bytes[..len];
            let what = format!("truncated to {len}");
            if model {
                compare_model(b, len % 5 == 0, &what);
            } else {
                compare_verify(b, Limits::DEFAULT, len % 5 == 0, &what);
                compare_open(b, Limits::DEFAULT, false, &what);
            }
        }
    }
}

#[test]
fn mutated_blocks() {
    let mut rng = Rng(0xa5_u64 << 32 | 0x17);
    let templates = templates();
    for k in 0..300 {
        let mut b = templates[k % templates.len()].clone();
        for _ in 0..1 + rng.below(3) {
            mutate(&mut rng, &mut b);
        }
        let limits = if k % 17 == 0 { Limits::DEFAULT.with_count_cap(2).with_byte_cap(4) } else { Limits::DEFAULT };
        compare_verify(&b, limits, k % 3 == 0, &format!("case {k}"));
        compare_open(&b, limits, k % 3 == 0, &format!("case {k}"));
    }
}

/// One small block with every payload rule (a gap, bool bytes), each way,
/// every call failing once: the suite's sample under Miri.
#[test]
fn a_small_block_every_way() {
    let block = &templates()[0];
    assert!(compare_open(block, Limits::DEFAULT, true, "a small block"));
    compare_verify(block, Limits::DEFAULT, true, "a small block");
    let mut bad = block.clone();
    let last = bad.len() - 1;
    bad[last] = 2; // a bool byte
    assert!(compare_open(&bad, Limits::DEFAULT, true, "a bad bool byte"));
    compare_verify(&bad, Limits::DEFAULT, true, "a bad bool byte");
}

/// The trait's forwarding impls: `&[u8]`, `&mut`, `Window`, `Ready`.
#[test]
fn sources_in_memory() {
    let block = read("spec/examples/digits-mlp.kiln");
    let mut image = vec![0xffu8; block.len() + 2000];
    image[1000..1000 + block.len()].copy_from_slice(&block);
    let (mut p1, mut c1, mut p2, mut c2) = ([0u8; 2048], [0u8; 100], [0u8; 2048], [0u8; 100]);
    embassy_futures::block_on(async {
        // `&[u8]` and `Ready(&[u8])`, as the blocking `&[u8]`.
        let want = source::verify(&block[..], &mut p1, &mut c1);
        assert_eq!(source::verify_async(&block[..], &mut p2, &mut c2).await, want);
        assert_eq!(source::verify_async(source::Ready(&block[..]), &mut p2, &mut c2).await, want);
        let mut slice = &block[..];
        assert_eq!(AsyncReadAt::len(&mut slice).await, Ok(block.len() as u64));
        assert_eq!(AsyncReadAt::is_empty(&mut slice).await, Ok(false));
        assert_eq!(AsyncReadAt::read_at(&mut slice, block.len() as u64, &mut [0]).await, Err(source::OutOfBounds));
        // A window, embedded and standalone, and its bounds.
        for (len, embedded) in [(image.len() - 1000, true), (block.len(), false)] {
            let opts = || if embedded { Options::new().embedded() } else { Options::new() };
            let want = opts().verify(Window::new(&image[..], 1000, len as u64), &mut p1, &mut c1);
            let got = opts().verify_async(Window::new(&image[..], 1000, len as u64), &mut p2, &mut c2).await;
            assert_eq!(got, want);
            assert!(got.is_ok());
        }
        let mut w = Window::new(&image[..], 1000, 10);
        assert_eq!(AsyncReadAt::read_at(&mut w, 8, &mut [0u8; 3]).await, Err(source::ReadError::OutOfBounds));
        assert_eq!(AsyncReadAt::read_at(&mut w, u64::MAX, &mut [0u8; 3]).await, Err(source::ReadError::OutOfBounds));
        let mut b = [0u8; 2];
        AsyncReadAt::read_at(&mut w, 8, &mut b).await.unwrap();
        assert_eq!(b, image[1008..1010]);
        // A window past the image: the inner source's error.
        let mut past = Window::new(&image[..], image.len() as u64 - 1, 10);
        assert_eq!(
            AsyncReadAt::read_at(&mut past, 0, &mut [0u8; 2]).await,
            Err(source::ReadError::Source(source::OutOfBounds))
        );
    });
}

/// `AsyncFlash` and `Flash` over the same mock part (4-byte read units),
/// the model at an unaligned address: the same results, the same flash
/// reads, and the same errors when the part fails.
#[cfg(all(feature = "embedded-storage", feature = "embedded-storage-async"))]
mod flash {
    use super::*;
    use embedded_storage::nor_flash::{check_read, ErrorType, NorFlashErrorKind, ReadNorFlash};

    struct Part<'a> {
        data: &'a [u8],
        reads: Vec<(u32, usize)>,
        fail_at: usize,
    }

    impl ErrorType for Part<'_> {
        type Error = NorFlashErrorKind;
    }

    impl Part<'_> {
        fn read(&mut self, at: u32, buf: &mut [u8]) -> Result<(), NorFlashErrorKind> {
            self.reads.push((at, buf.len()));
            if self.reads.len() == self.fail_at {
                return Err(NorFlashErrorKind::Other);
            }
            check_read(&*self, at, buf.len())?;
            buf.copy_from_slice(&self.data[at as usize..][..buf.len()]);
            Ok(())
        }
    }

    impl ReadNorFlash for Part<'_> {
        const READ_SIZE: usize = 4;
        fn read(&mut self, at: u32, buf: &mut [u8]) -> Result<(), NorFlashErrorKind> {
            Part::read(self, at, buf)
        }
        fn capacity(&self) -> usize {
            self.data.len()
        }
    }

    impl embedded_storage_async::nor_flash::ReadNorFlash for Part<'_> {
        const READ_SIZE: usize = 4;
        async fn read(&mut self, at: u32, buf: &mut [u8]) -> Result<(), NorFlashErrorKind> {
            embassy_futures::yield_now().await;
            Part::read(self, at, buf)
        }
        fn capacity(&self) -> usize {
            self.data.len()
        }
    }

    type Outcome = (
        Result<u64, SourceError<source::ReadError<source::ReadError<NorFlashErrorKind>>>>,
        Result<
            Vec<(Result<usize, SourceError<source::ReadError<source::ReadError<NorFlashErrorKind>>>>, Vec<u8>)>,
            String,
        >,
    );

    fn blocking(image: &[u8], at: u64, len: u64, fail_at: usize) -> (Outcome, Vec<(u32, usize)>) {
        let mut flash = source::Flash::<_, 16>::new(Part { data: image, reads: Vec::new(), fail_at });
        let (mut p, mut c) = ([0u8; 2048], [0u8; 256]);
        let mut part = Window::new(&mut flash, at, len);
        let v = Options::new().embedded().verify(&mut part, &mut p, &mut c).map(|s| s.block_len);
        let reads = match Options::new().embedded().open(&mut part, &mut p) {
            Ok(o) => Ok(o
                .directory()
                .iter()
                .map(|t| {
                    let mut buf = vec![0u8; t.byte_len()];
                    (source::read_tensor(&mut part, &o, t, &mut buf), buf)
                })
                .collect()),
            Err(e) => Err(format!("{e:?}")),
        };
        ((v, reads), flash.into_inner().reads)
    }

    fn nonblocking(image: &[u8], at: u64, len: u64, fail_at: usize) -> (Outcome, Vec<(u32, usize)>) {
        let mut flash = source::AsyncFlash::<_, 16>::new(Part { data: image, reads: Vec::new(), fail_at });
        let (mut p, mut c) = ([0u8; 2048], [0u8; 256]);
        let outcome = embassy_futures::block_on(async {
            let mut part = Window::new(&mut flash, at, len);
            let v = Options::new().embedded().verify_async(&mut part, &mut p, &mut c).await.map(|s| s.block_len);
            let reads = match Options::new().embedded().open_async(&mut part, &mut p).await {
                Ok(o) => {
                    let mut out = Vec::new();
                    for t in o.directory().iter() {
                        let mut buf = vec![0u8; t.byte_len()];
                        out.push((source::read_tensor_async(&mut part, &o, t, &mut buf).await, buf));
                    }
                    Ok(out)
                }
                Err(e) => Err(format!("{e:?}")),
            };
            (v, reads)
        });
        (outcome, flash.into_inner().reads)
    }

    #[test]
    fn async_flash_reads_as_flash() {
        let block = read("spec/examples/digits-mlp.kiln");
        let mut image = vec![0xffu8; 24 * 1024];
        image[1030..1030 + block.len()].copy_from_slice(&block);
        let len = (image.len() - 1030) as u64;
        let (want, reads) = blocking(&image, 1030, len, 0);
        assert_eq!(want.0, Ok(block.len() as u64));
        let dir = Directory::parse(&block).unwrap();
        let copied: Vec<Vec<u8>> = want.1.as_ref().unwrap().iter().map(|(_, b)| b.clone()).collect();
        assert_eq!(copied, dir.iter().map(|t| t.bytes().to_vec()).collect::<Vec<_>>());
        assert_eq!(nonblocking(&image, 1030, len, 0), (want, reads.clone()));
        // The part failing at each of its reads.
        for k in 1..=reads.len() {
            assert_eq!(nonblocking(&image, 1030, len, k), blocking(&image, 1030, len, k), "flash read {k} fails");
        }
        // Past the part's end: the flash's own refusal, and past u32: out of bounds.
        assert_eq!(nonblocking(&image, 1030, u64::MAX, 0), blocking(&image, 1030, u64::MAX, 0));
        assert_eq!(nonblocking(&image, 1 << 32, 1 << 20, 0), blocking(&image, 1 << 32, 1 << 20, 0));
        // A corrupted copy: the same verdict.
        image[1030 + 70] = 1;
        let (bad, _) = nonblocking(&image, 1030, block.len() as u64, 0);
        assert_eq!(bad, blocking(&image, 1030, block.len() as u64, 0).0);
        assert!(bad.0.is_err());
    }

    #[test]
    fn unaligned_reads_through_the_bounce() {
        let data: Vec<u8> = (0..4096u32).map(|i| (i * 7 + i / 256) as u8).collect();
        let mut rng = Rng(11);
        let mut f = source::AsyncFlash::<_, 4>::new(Part { data: &data, reads: Vec::new(), fail_at: 0 });
        let mut g = source::Flash::<_, 4>::new(Part { data: &data, reads: Vec::new(), fail_at: 0 });
        embassy_futures::block_on(async {
            assert_eq!(f.len().await, Ok(4096));
            for _ in 0..1000 {
                let at = rng.below(4096);
                let n = rng.below((4096 - at).min(300) + 1);
                let mut out = vec![0u8; n];
                f.read_at(at as u64, &mut out).await.unwrap();
                assert_eq!(out, &data[at..at + n], "{at}+{n}");
                g.read_at(at as u64, &mut out).unwrap();
            }
            assert_eq!(f.inner().reads, g.inner().reads);
            assert_eq!(
                f.read_at(4094, &mut [0u8; 4]).await,
                Err(source::ReadError::Source(NorFlashErrorKind::OutOfBounds))
            );
        });
    }
}

/// `AsyncIo` and `Io` over the same mock seekable reader (short reads of
/// at most 100 bytes): the same results and errors.
#[cfg(all(feature = "embedded-io", feature = "embedded-io-async"))]
mod io {
    use super::*;
    use embedded_io::{ErrorKind, ErrorType, ReadExactError, SeekFrom};

    struct Cursor<'a> {
        data: &'a [u8],
        pos: u64,
        calls: usize,
        fail_at: usize,
    }

    impl ErrorType for Cursor<'_> {
        type Error = ErrorKind;
    }

    impl Cursor<'_> {
        fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
            self.calls += 1;
            if self.calls == self.fail_at {
                return Err(ErrorKind::Other);
            }
            let at = (self.pos as usize).min(self.data.len());
            let n = buf.len().min(self.data.len() - at).min(100);
            buf[..n].copy_from_slice(&self.data[at..at + n]);
            self.pos += n as u64;
            Ok(n)
        }
        fn seek(&mut self, pos: SeekFrom) -> Result<u64, ErrorKind> {
            self.calls += 1;
            if self.calls == self.fail_at {
                return Err(ErrorKind::Interrupted);
            }
            self.pos = match pos {
                SeekFrom::Start(p) => p,
                SeekFrom::End(d) => (self.data.len() as i64 + d) as u64,
                SeekFrom::Current(d) => (self.pos as i64 + d) as u64,
            };
            Ok(self.pos)
        }
    }

    impl embedded_io::Read for Cursor<'_> {
        fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
            Cursor::read(self, buf)
        }
    }
    impl embedded_io::Seek for Cursor<'_> {
        fn seek(&mut self, pos: SeekFrom) -> Result<u64, ErrorKind> {
            Cursor::seek(self, pos)
        }
    }
    impl embedded_io_async::Read for Cursor<'_> {
        async fn read(&mut self, buf: &mut [u8]) -> Result<usize, ErrorKind> {
            embassy_futures::yield_now().await;
            Cursor::read(self, buf)
        }
    }
    impl embedded_io_async::Seek for Cursor<'_> {
        async fn seek(&mut self, pos: SeekFrom) -> Result<u64, ErrorKind> {
            Cursor::seek(self, pos)
        }
    }

    type Outcome = (Result<u64, SourceError<ReadExactError<ErrorKind>>>, Result<Vec<u8>, String>, usize);

    fn blocking(data: &[u8], fail_at: usize) -> Outcome {
        let mut src = source::Io::new(Cursor { data, pos: 0, calls: 0, fail_at });
        let (mut p, mut c) = ([0u8; 2048], [0u8; 300]);
        let v = source::verify(&mut src, &mut p, &mut c).map(|s| s.block_len);
        let t = source::open(&mut src, &mut p).map_err(|e| format!("{e:?}")).and_then(|o| {
            let mut out = vec![0u8; 8192];
            source::read_tensor(&mut src, &o, "samples.x", &mut out).map(|_| out).map_err(|e| format!("{e:?}"))
        });
        (v, t, src.into_inner().calls)
    }

    fn nonblocking(data: &[u8], fail_at: usize) -> Outcome {
        let mut src = source::AsyncIo::new(Cursor { data, pos: 0, calls: 0, fail_at });
        let (mut p, mut c) = ([0u8; 2048], [0u8; 300]);
        let (v, t) = embassy_futures::block_on(async {
            let v = source::verify_async(&mut src, &mut p, &mut c).await.map(|s| s.block_len);
            let t = match source::open_async(&mut src, &mut p).await {
                Ok(o) => {
                    let mut out = vec![0u8; 8192];
                    match source::read_tensor_async(&mut src, &o, "samples.x", &mut out).await {
                        Ok(_) => Ok(out),
                        Err(e) => Err(format!("{e:?}")),
                    }
                }
                Err(e) => Err(format!("{e:?}")),
            };
            (v, t)
        });
        (v, t, src.into_inner().calls)
    }

    #[test]
    fn async_io_reads_as_io() {
        let block = read("spec/examples/digits-mlp.kiln");
        let want = blocking(&block, 0);
        assert_eq!(want.0, Ok(block.len() as u64));
        let x = Directory::parse(&block).unwrap().find("samples.x").unwrap().bytes().to_vec();
        assert_eq!(want.1.as_deref(), Ok(&x[..]));
        assert_eq!(nonblocking(&block, 0), want);
        for k in (1..=want.2).step_by(3).chain([1, 2, want.2]) {
            assert_eq!(nonblocking(&block, k), blocking(&block, k), "call {k} fails");
        }
        // A reader that ends early (inside the padding before byte 10880, which
        // verify reads): UnexpectedEof, both ways.
        let short = &block[..10870];
        let (mut p, mut c) = ([0u8; 2048], [0u8; 300]);
        let mut src = source::AsyncIo::new(Cursor { data: short, pos: 0, calls: 0, fail_at: 0 });
        let got = embassy_futures::block_on(async {
            let mut w = Window::new(&mut src, 0, block.len() as u64);
            Options::new().embedded().verify_async(&mut w, &mut p, &mut c).await
        });

        let mut src = source::Io::new(Cursor { data: short, pos: 0, calls: 0, fail_at: 0 });
        let want = Options::new().embedded().verify(Window::new(&mut src, 0, block.len() as u64), &mut p, &mut c);
        assert_eq!(got, want);
        assert_eq!(got, Err(SourceError::Read(source::ReadError::Source(ReadExactError::UnexpectedEof))));
    }
}
