// Exploration only: where the time goes per phase (not a benchmark claim).
use kiln_nostd::{DType, Parser, TensorSpec, Writer};
use std::time::Instant;
fn main() {
    let n = 10_000;
    let names: Vec<String> = (0..n).map(|i| format!("t.{i}")).collect();
    let data: Vec<u8> = (0..64).collect();
    let specs: Vec<_> = names.iter().map(|nm| TensorSpec::new(DType::F32, &[4, 4], &data).named(nm)).collect();
    let mut out = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    let mut scratch = vec![0u32; kiln_nostd::scratch_len(n as u32)];
    Writer::new().scratch(&mut scratch).write(&specs, &mut out).unwrap();
    let reps = 200;
    let t = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(Parser::new().scratch(&mut scratch).parse(std::hint::black_box(&out)).unwrap());
    }
    println!("parse: {:.1} ns/tensor", t.elapsed().as_nanos() as f64 / (reps * n) as f64);
    let (dir, index) = Parser::new().scratch(&mut scratch).parse_indexed(&out).unwrap();
    let t = Instant::now();
    let mut acc = 0;
    for _ in 0..reps {
        for tt in dir.iter() {
            acc += tt.shape().len() + tt.bytes().len();
        }
    }
    println!("iterate: {:.1} ns/tensor", t.elapsed().as_nanos() as f64 / (reps * n) as f64);
    let t = Instant::now();
    for _ in 0..reps {
        for nm in &names {
            acc += index.get(nm).map_or(0, |t| t.bytes().len());
        }
    }
    println!("lookup: {:.1} ns/tensor {acc}", t.elapsed().as_nanos() as f64 / (reps * n) as f64);
    let specs: Vec<_> = names.iter().map(|_| TensorSpec::new(DType::F32, &[4, 4], &data)).collect();
    let mut out = vec![0u8; Writer::new().encoded_len(&specs).unwrap()];
    Writer::new().write(&specs, &mut out).unwrap();
    let t = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(Parser::new().parse(std::hint::black_box(&out)).unwrap());
    }
    println!("parse unnamed: {:.1} ns/tensor", t.elapsed().as_nanos() as f64 / (reps * n) as f64);
}
