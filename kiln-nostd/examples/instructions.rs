//! The workload whose instruction count `scripts/instructions.sh` measures
//! under callgrind (counts, unlike times, do not vary run to run):
//!
//!     instructions MODE ROUNDS
//!
//! MODE `parse`: `Parser` with name scratch over the 10,000-tensor
//! directory of the README's table (4x4 f32, names `t.0`...), then every
//! tensor's shape and bytes, then every name looked up. MODE
//! `incremental`: `Incremental` over the same block in 64 KiB chunks.
//! ROUNDS repetitions; the script runs 1 and 11 rounds and divides the
//! difference by 10 x 10,000, so the set-up (writing the block) cancels.

use kiln_nostd::{DType, Incremental, Parser, TensorSpec, Writer};
use std::hint::black_box;

const TENSORS: usize = 10_000;

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "parse".into());
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(1);
    let names: Vec<String> = (0..TENSORS).map(|i| format!("t.{i}")).collect();
    let data: Vec<u8> = (0..64u8).collect();
    let shape = [4u64, 4];
    let specs: Vec<_> = names.iter().map(|n| TensorSpec::new(DType::F32, &shape, &data).named(n)).collect();
    let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(TENSORS as u32)];
    let mut block = vec![0u8; Writer::new().encoded_len(&specs).expect("sized")];
    Writer::new().scratch(&mut scratch).write(&specs, &mut block).expect("written");
    let mut prefix = vec![0u8; 4 << 20];
    let mut acc = 0usize;
    for _ in 0..rounds {
        match mode.as_str() {
            "parse" => {
                let (dir, index) = Parser::new().scratch(&mut scratch).parse_indexed(black_box(&block)).expect("valid");
                for t in dir.iter() {
                    acc += t.shape().len() + t.bytes().len();
                }
                for name in &names {
                    acc += index.get(name).map_or(0, |t| t.bytes().len());
                }
            }
            "incremental" => {
                let mut v = Incremental::new(&mut prefix).scratch(&mut scratch);
                for c in black_box(&block).chunks(64 << 10) {
                    v.feed(c).expect("valid");
                }
                acc += v.finish().expect("valid").block_len as usize;
            }
            other => panic!("unknown mode {other}: parse or incremental"),
        }
    }
    println!("{}", black_box(acc));
}
