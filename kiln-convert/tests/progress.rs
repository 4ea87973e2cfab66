//! What a `Progress` sees: one `start` with the payload bytes of every
//! output file together, `advance` calls that add up to it, one `finish`,
//! for a single file and for a sharded output alike (the bar `kiln convert`
//! draws is this trait's one implementation).

use std::cell::RefCell;

use kiln_convert::{convert, Options, Progress, Silent};

const GGUF: &str = "../tests/corpus/ppocr-cls-q8_0-q4_0.gguf";

#[derive(Default)]
struct Seen {
    calls: RefCell<Vec<(&'static str, u64)>>,
}

impl Progress for Seen {
    fn start(&self, total: u64) {
        self.calls.borrow_mut().push(("start", total));
    }
    fn advance(&self, bytes: u64) {
        self.calls.borrow_mut().push(("advance", bytes));
    }
    fn finish(&self) {
        self.calls.borrow_mut().push(("finish", 0));
    }
}

/// Runs `options` with a recorder; checks the order and sums; returns the total.
fn seen(options: &Options) -> u64 {
    let progress = Seen::default();
    convert(options, &progress).unwrap();
    let calls = progress.calls.into_inner();
    let (first, last) = (calls.first().unwrap(), calls.last().unwrap());
    assert_eq!((first.0, last.0), ("start", "finish"), "{calls:?}");
    let middle = &calls[1..calls.len() - 1];
    assert!(middle.iter().all(|(what, _)| *what == "advance"), "{calls:?}");
    assert_eq!(middle.iter().map(|(_, n)| n).sum::<u64>(), first.1, "advances add up to the total");
    first.1
}

#[test]
fn progress_sees_every_payload_byte_once() {
    let dir = tempfile::tempdir().unwrap();
    let single = seen(&Options { fsync: false, ..Options::new(GGUF, dir.path().join("one.kiln")) });
    assert!(single > 0);
    let sharded =
        Options { fsync: false, max_shard_size: Some(20_000), ..Options::new(GGUF, dir.path().join("s.kiln")) };
    assert_eq!(seen(&sharded), single, "a sharded output copies the same payloads");
    let shards =
        dir.path().read_dir().unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("s-"));
    assert!(shards.count() > 1, "more than one shard");
}

#[test]
fn silent_and_recorded_conversions_write_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.kiln"), dir.path().join("b.kiln"));
    convert(&Options::new(GGUF, &a), &Silent).unwrap();
    convert(&Options::new(GGUF, &b), &Seen::default()).unwrap();
    assert_eq!(std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
}
