//! Writes a sharded model with the core's `write_sharded` (the Node tests
//! and the benchmark read it back with openRemote):
//!
//!   write_sharded OUT_DIR NAME SHARDS TENSORS BYTES [SEED [KEY=VALUE ...]]
//!
//! `NAME.kiln` (the manifest) and `NAME-0000k-of-0000N.kiln` in OUT_DIR:
//! TENSORS f32 tensors `t.{i}` of BYTES bytes each (a multiple of 4) spread
//! evenly over SHARDS shards, values from SEED; shard 1 also holds a
//! quantized i8 tensor `q` (scheme 2, with `q.scale` and `q.outer`), a bool
//! tensor `mask`, a rank-0 `scalar` and an empty `empty`. The metadata is
//! `author` and `seed`, then each KEY=VALUE given.

use kiln_model::write_sharded;
use kiln_nostd::{
    writer::{QuantSpec, TensorRef},
    DType, TensorSpec,
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        eprintln!("usage: write_sharded OUT_DIR NAME SHARDS TENSORS BYTES [SEED [KEY=VALUE ...]]");
        std::process::exit(2);
    }
    let dir = std::path::PathBuf::from(&args[1]);
    let name = &args[2];
    let shards: usize = args[3].parse().expect("SHARDS");
    let tensors: usize = args[4].parse().expect("TENSORS");
    let bytes: usize = args[5].parse().expect("BYTES");
    let seed: u32 = args.get(6).map_or(1, |s| s.parse().expect("SEED"));
    assert!(shards >= 1 && bytes % 4 == 0);
    let names: Vec<String> = (0..tensors).map(|i| format!("t.{i}")).collect();
    let data: Vec<Vec<u8>> = (0..tensors)
        .map(|i| {
            (0..bytes / 4)
                .map(|k| (((i * 31 + k) as u32).wrapping_mul(seed) % 1000) as f32 / 8.0 - 60.0)
                .flat_map(f32::to_le_bytes)
                .collect()
        })
        .collect();
    let shapes: Vec<[u64; 1]> = vec![[(bytes / 4) as u64]; tensors];
    let mut groups: Vec<Vec<TensorSpec<'_>>> = vec![Vec::new(); shards];
    let q = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let scale: Vec<u8> = [0.5f32, 0.25, 2.0, 1.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let outer = 3.0f32.to_le_bytes();
    let mask = [1u8, 0, 1];
    let scalar = (seed as f32).to_le_bytes();
    let mut qs = TensorSpec::new(DType::I8, &[4, 2], &q).named("q");
    qs.quant = QuantSpec::ScalesOuter {
        axis: 1,
        group_size: 2,
        scale: TensorRef::Name("q.scale"),
        outer: TensorRef::Name("q.outer"),
    };
    groups[0].extend([
        qs,
        TensorSpec::new(DType::F32, &[4, 1], &scale).named("q.scale"),
        TensorSpec::new(DType::F32, &[1], &outer).named("q.outer"),
        TensorSpec::new(DType::Bool, &[3], &mask).named("mask"),
        TensorSpec::new(DType::F32, &[], &scalar).named("scalar"),
        TensorSpec::new(DType::F32, &[0], &[]).named("empty"),
    ]);
    for i in 0..tensors {
        groups[i * shards / tensors.max(1)].push(TensorSpec::new(DType::F32, &shapes[i], &data[i]).named(&names[i]));
    }
    let files: Vec<String> = (1..=shards).map(|k| format!("{name}-{k:05}-of-{shards:05}.kiln")).collect();
    let list: Vec<(&str, &[TensorSpec<'_>])> = files.iter().zip(&groups).map(|(f, g)| (f.as_str(), &g[..])).collect();
    let seed_text = seed.to_string();
    let mut metadata: Vec<(&str, &str)> = vec![("author", "kiln"), ("seed", &seed_text)];
    for kv in args.iter().skip(7) {
        metadata.push(kv.split_once('=').expect("KEY=VALUE"));
    }
    metadata.sort_unstable(); // the writer takes keys in byte order
    let out = write_sharded(&metadata, &list, 64).expect("write_sharded");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.kiln")), &out.manifest).unwrap();
    for (f, b) in &out.shards {
        std::fs::write(dir.join(f), b).unwrap();
    }
    println!("{}", out.manifest.len());
}
