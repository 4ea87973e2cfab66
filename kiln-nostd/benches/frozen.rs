//! Decode one record with Kiln (borrowed + lazy, and owned) against postcard
//! and bincode decoding the equivalent serde struct, in one run:
//!
//! `{id: i64, name: str, scores: list<f32> (1,024), tags: dict<str,i32> (16)}`
//!
//! Both Kiln timings include full validation of the buffer (every count,
//! UTF-8 of the name and the keys, key order, TRAILING).
//!
//! cargo bench -p kiln-nostd --features alloc --bench frozen -- --warm-up-time 1 --measurement-time 3

// criterion_group! defines an undocumented `pub fn`.
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use kiln_derive::Kiln;
use kiln_nostd::frozen::{self, decode, encode, encoded_len, DictView, ListView, Schema};
use kiln_nostd::Limits;
use serde::{Deserialize, Serialize};

/// Borrowed, lazily read view: the list and the dict stay in the buffer.
#[derive(Kiln, Debug)]
struct RecordView<'a> {
    id: i64,
    name: &'a str,
    scores: ListView<'a, f32>,
    tags: DictView<'a, i32>,
}

/// Owned: decoded into Vec / String / BTreeMap.
#[derive(Kiln, Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    id: i64,
    name: String,
    scores: Vec<f32>,
    tags: BTreeMap<String, i32>,
}

fn record() -> Record {
    Record {
        id: 0x0123_4567_89ab_cdef,
        name: "sensor-array/front-left".to_owned(),
        scores: (0..1024).map(|i| (i as f32) * 0.25 - 100.0).collect(),
        tags: (0..16).map(|i| (format!("tag-{i:02}"), i * 1000 - 7)).collect(),
    }
}

fn bench(c: &mut Criterion) {
    let rec = record();
    let mut kiln_buf = vec![0u8; encoded_len(&rec)];
    encode(&rec, &mut kiln_buf).unwrap();
    let postcard_buf = postcard::to_allocvec(&rec).unwrap();
    let bincode_buf = bincode::serialize(&rec).unwrap();

    // Sanity: every codec decodes the same record.
    assert_eq!(decode::<Record>(&kiln_buf).unwrap(), rec);
    assert_eq!(postcard::from_bytes::<Record>(&postcard_buf).unwrap(), rec);
    assert_eq!(bincode::deserialize::<Record>(&bincode_buf).unwrap(), rec);
    let view: RecordView<'_> = decode(&kiln_buf).unwrap();
    assert_eq!((view.id, view.name, view.scores.len(), view.tags.len()), (rec.id, &rec.name[..], 1024, 16));
    let schema: Schema<'_> = Schema::parse(RecordView::TYPE_TEXT).unwrap();
    assert_eq!(schema.hash(), Record::SCHEMA_HASH);
    eprintln!("sizes: kiln {} B, postcard {} B, bincode {} B", kiln_buf.len(), postcard_buf.len(), bincode_buf.len());

    let mut g = c.benchmark_group("decode_record");
    g.bench_function("kiln_borrowed_typed", |b| {
        b.iter(|| {
            let v: RecordView<'_> = decode(black_box(&kiln_buf)).unwrap();
            black_box((v.id, v.name.len(), v.scores.len(), v.tags.len()))
        })
    });
    g.bench_function("kiln_borrowed_schema", |b| {
        b.iter(|| {
            let v = frozen::read(black_box(&kiln_buf), &schema, &Limits::DEFAULT, false).unwrap();
            let s = v.as_struct().unwrap();
            let mut f = s.fields();
            let id = f.next().and_then(|(_, v)| v.as_i64());
            let name = f.next().and_then(|(_, v)| v.as_str_bytes()).map(<[u8]>::len);
            let scores = f.next().and_then(|(_, v)| v.as_list()).map(|l| l.len());
            let tags = f.next().and_then(|(_, v)| v.as_dict()).map(|d| d.len());
            black_box((id, name, scores, tags))
        })
    });
    g.bench_function("kiln_borrowed_typed_then_read_all", |b| {
        b.iter(|| {
            let v: RecordView<'_> = decode(black_box(&kiln_buf)).unwrap();
            let sum: f32 = v.scores.iter().sum();
            let tags: i64 = v.tags.iter().map(|(_, x)| i64::from(x)).sum();
            black_box((v.id, v.name.len(), sum, tags))
        })
    });
    g.bench_function("kiln_owned", |b| b.iter(|| black_box(decode::<Record>(black_box(&kiln_buf)).unwrap())));
    g.bench_function("postcard_owned", |b| {
        b.iter(|| black_box(postcard::from_bytes::<Record>(black_box(&postcard_buf)).unwrap()))
    });
    g.bench_function("bincode_owned", |b| {
        b.iter(|| black_box(bincode::deserialize::<Record>(black_box(&bincode_buf)).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
