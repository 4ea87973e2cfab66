//! `kiln convert` of ONNX models: every dtype both formats have, in each of
//! ONNX's three storage forms (inline `raw_data`, typed fields, external
//! data beside the model), the graph written back with its initializers
//! pointing into the Kiln output, and hostile models refused with an error
//! that names the initializer, never reading a file outside the model's
//! folder. Models are built here with the same generated messages the
//! reader decodes (kiln_convert::onnx::proto); the `onnx` Python
//! package's own loader and onnxruntime are checked in kiln-py/tests/test_onnx.py.

use std::path::Path;
use std::process::{Command, Output};

use kiln_convert::onnx::proto::tensor_proto::{DataLocation, DataType};
use kiln_convert::onnx::proto::{
    attribute_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, SparseTensorProto,
    StringStringEntryProto, TensorProto,
};
use kiln_model::Model;
use prost::Message;

fn kiln(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln")).args(args).current_dir(dir).output().expect("kiln")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `kiln convert ARGS` must exit with `code`; its stderr.
fn convert(dir: &Path, args: &[&str], code: i32) -> String {
    let mut all = vec!["convert", "-q"];
    all.extend_from_slice(args);
    let o = kiln(dir, &all);
    assert_eq!(o.status.code(), Some(code), "kiln {all:?}:\n{}", stderr(&o));
    stderr(&o)
}

fn model(initializers: Vec<TensorProto>) -> ModelProto {
    ModelProto {
        ir_version: Some(10),
        producer_name: Some("kiln-tests".into()),
        producer_version: Some("1".into()),
        opset_import: vec![
            OperatorSetIdProto { domain: Some(String::new()), version: Some(17) },
            OperatorSetIdProto { domain: Some("com.example".into()), version: Some(2) },
        ],
        metadata_props: vec![StringStringEntryProto { key: Some("author".into()), value: Some("someone".into()) }],
        graph: Some(GraphProto {
            name: Some("g".into()),
            node: vec![NodeProto {
                op_type: Some("Identity".into()),
                input: vec!["a".into()],
                output: vec!["y".into()],
                ..Default::default()
            }],
            initializer: initializers,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn raw(name: &str, ty: DataType, dims: &[i64], bytes: &[u8]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        data_type: Some(i32::from(ty)),
        dims: dims.to_vec(),
        raw_data: Some(bytes.to_vec().into()),
        ..Default::default()
    }
}

fn external(name: &str, ty: DataType, dims: &[i64], entries: &[(&str, &str)]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        data_type: Some(i32::from(ty)),
        dims: dims.to_vec(),
        data_location: Some(i32::from(DataLocation::External)),
        external_data: entries
            .iter()
            .map(|(k, v)| StringStringEntryProto { key: Some((*k).into()), value: Some((*v).into()) })
            .collect(),
        ..Default::default()
    }
}

fn save(dir: &Path, name: &str, m: &ModelProto) {
    std::fs::write(dir.join(name), m.encode_to_vec()).unwrap();
}

/// Every tensor of a Kiln model file: name -> (dtype name, shape, bytes).
fn tensors(path: &Path) -> Vec<(String, String, Vec<u64>, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    let m = Model::parse_verified(&bytes).expect("a valid model file with digests");
    m.directory()
        .iter()
        .map(|t| (t.name().unwrap().to_string(), t.dtype().name().to_string(), t.shape().to_vec(), t.bytes().to_vec()))
        .collect()
}

fn metadata(path: &Path) -> Vec<(String, String)> {
    let bytes = std::fs::read(path).unwrap();
    let m = Model::parse(&bytes).unwrap();
    m.metadata().iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// (ONNX type, Kiln dtype, dims, little-endian payload, the same as ONNX's typed field).
struct Case {
    ty: DataType,
    kiln: &'static str,
    dims: Vec<i64>,
    bytes: Vec<u8>,
    typed: fn(&mut TensorProto, &[u8]),
}

fn le_chunks<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
    b.chunks_exact(N).map(|c| c.try_into().unwrap())
}

fn cases() -> Vec<Case> {
    let seq = |n: usize| (0..n).map(|i| (i * 37 + 11) as u8).collect::<Vec<u8>>();
    let small = |b: &[u8]| b.to_vec();
    let f32s = |t: &mut TensorProto, b: &[u8]| t.float_data = le_chunks::<4>(b).map(f32::from_le_bytes).collect();
    let f64s = |t: &mut TensorProto, b: &[u8]| t.double_data = le_chunks::<8>(b).map(f64::from_le_bytes).collect();
    let i64s = |t: &mut TensorProto, b: &[u8]| t.int64_data = le_chunks::<8>(b).map(i64::from_le_bytes).collect();
    let u64s = |t: &mut TensorProto, b: &[u8]| t.uint64_data = le_chunks::<8>(b).map(u64::from_le_bytes).collect();
    let u32s = |t: &mut TensorProto, b: &[u8]| {
        t.uint64_data = le_chunks::<4>(b).map(|c| u64::from(u32::from_le_bytes(c))).collect()
    };
    let i32s = |t: &mut TensorProto, b: &[u8]| t.int32_data = le_chunks::<4>(b).map(i32::from_le_bytes).collect();
    let i16s = |t: &mut TensorProto, b: &[u8]| {
        t.int32_data = le_chunks::<2>(b).map(|c| i32::from(i16::from_le_bytes(c))).collect()
    };
    let u16s = |t: &mut TensorProto, b: &[u8]| {
        t.int32_data = le_chunks::<2>(b).map(|c| i32::from(u16::from_le_bytes(c))).collect()
    };
    let i8s = |t: &mut TensorProto, b: &[u8]| t.int32_data = b.iter().map(|&x| i32::from(x as i8)).collect();
    let u8s = |t: &mut TensorProto, b: &[u8]| t.int32_data = b.iter().map(|&x| i32::from(x)).collect();
    // Finite f32/f64 values (a NaN's payload bits survive raw_data and the typed fields alike).
    let floats = |n: usize| (0..n).flat_map(|i| (i as f32 * 0.75 - 3.0).to_le_bytes()).collect::<Vec<u8>>();
    let doubles = |n: usize| (0..n).flat_map(|i| (i as f64 * -1.25 + 0.1).to_le_bytes()).collect::<Vec<u8>>();
    let mut odd4 = seq(3);
    odd4[2] &= 0x0f; // 5 nibbles: the pad nibble is zero
    vec![
        Case { ty: DataType::Float, kiln: "f32", dims: vec![2, 3], bytes: floats(6), typed: f32s },
        Case { ty: DataType::Double, kiln: "f64", dims: vec![3], bytes: doubles(3), typed: f64s },
        Case { ty: DataType::Float16, kiln: "f16", dims: vec![4], bytes: seq(8), typed: u16s },
        Case { ty: DataType::Bfloat16, kiln: "bf16", dims: vec![2, 2], bytes: seq(8), typed: u16s },
        Case { ty: DataType::Int8, kiln: "i8", dims: vec![5], bytes: seq(5), typed: i8s },
        Case { ty: DataType::Int16, kiln: "i16", dims: vec![3], bytes: seq(6), typed: i16s },
        Case { ty: DataType::Int32, kiln: "i32", dims: vec![3], bytes: seq(12), typed: i32s },
        Case { ty: DataType::Int64, kiln: "i64", dims: vec![2], bytes: seq(16), typed: i64s },
        Case { ty: DataType::Uint8, kiln: "u8", dims: vec![5], bytes: seq(5), typed: u8s },
        Case { ty: DataType::Uint16, kiln: "u16", dims: vec![3], bytes: seq(6), typed: u16s },
        Case { ty: DataType::Uint32, kiln: "u32", dims: vec![3], bytes: seq(12), typed: u32s },
        Case { ty: DataType::Uint64, kiln: "u64", dims: vec![2], bytes: seq(16), typed: u64s },
        Case { ty: DataType::Bool, kiln: "bool", dims: vec![4], bytes: small(&[1, 0, 0, 1]), typed: u8s },
        Case { ty: DataType::Float8e4m3fn, kiln: "f8e4m3", dims: vec![6], bytes: seq(6), typed: u8s },
        Case { ty: DataType::Float8e5m2, kiln: "f8e5m2", dims: vec![6], bytes: seq(6), typed: u8s },
        Case { ty: DataType::Float8e8m0, kiln: "e8m0", dims: vec![6], bytes: seq(6), typed: u8s },
        Case { ty: DataType::Int4, kiln: "i4", dims: vec![5], bytes: odd4.clone(), typed: u8s },
        Case { ty: DataType::Uint4, kiln: "u4", dims: vec![2, 3], bytes: seq(3), typed: u8s },
        Case { ty: DataType::Float4e2m1, kiln: "e2m1", dims: vec![5], bytes: odd4, typed: u8s },
        // A scalar and an empty tensor.
        Case { ty: DataType::Float, kiln: "f32", dims: vec![], bytes: floats(1), typed: f32s },
        Case { ty: DataType::Int64, kiln: "i64", dims: vec![0, 4], bytes: vec![], typed: i64s },
    ]
}

#[test]
fn every_dtype_converts_bit_exact_from_raw_typed_and_external_data() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases = cases();
    let (mut raws, mut typed, mut ext, mut side) = (vec![], vec![], vec![], Vec::new());
    for (i, c) in cases.iter().enumerate() {
        raws.push(raw(&format!("t{i}"), c.ty, &c.dims, &c.bytes));
        let mut t = raw(&format!("t{i}"), c.ty, &c.dims, &[]);
        t.raw_data = None;
        (c.typed)(&mut t, &c.bytes);
        typed.push(t);
        // External: each payload at an odd offset of one side file; the last
        // one without a length (it reaches the end of the file).
        side.push(0xee);
        let (off, len) = (side.len().to_string(), c.bytes.len().to_string());
        side.extend_from_slice(&c.bytes);
        let mut entries = vec![("location", "weights.bin"), ("offset", off.as_str())];
        if i + 1 < cases.len() {
            entries.push(("length", len.as_str()));
        }
        ext.push(external(&format!("t{i}"), c.ty, &c.dims, &entries));
    }
    std::fs::write(d.join("weights.bin"), &side).unwrap();
    for (file, inits) in [("raw.onnx", raws), ("typed.onnx", typed), ("ext.onnx", ext)] {
        save(d, file, &model(inits));
        let out = file.replace(".onnx", ".kiln");
        convert(d, &[file, "-o", &out], 0);
        let got = tensors(&d.join(&out));
        assert_eq!(got.len(), cases.len());
        for (i, (c, (name, dtype, shape, bytes))) in cases.iter().zip(got).enumerate() {
            assert_eq!(name, format!("t{i}"));
            assert_eq!(dtype, c.kiln, "{file} t{i}");
            assert_eq!(shape, c.dims.iter().map(|&x| x as u64).collect::<Vec<_>>(), "{file} t{i}");
            assert_eq!(bytes, c.bytes, "{file} t{i} ({})", c.kiln);
        }
        // `validate` and `inspect` read it by its extension.
        let o = kiln(d, &["validate", file]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), format!("{file}: ok (onnx)"));
        let o = kiln(d, &["inspect", "--json", file]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["format"], "onnx");
        assert_eq!(v["tensor_count"], cases.len());
    }
}

#[test]
fn opset_producer_and_metadata_props_are_carried() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    save(d, "m.onnx", &model(vec![raw("w", DataType::Float, &[1], &[0, 0, 128, 63])]));
    convert(d, &["m.onnx", "-o", "m.kiln"], 0);
    let meta = metadata(&d.join("m.kiln"));
    let get = |k: &str| meta.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    assert_eq!(get("onnx.opset_import"), Some("ai.onnx:17,com.example:2"));
    assert_eq!(get("onnx.ir_version"), Some("10"));
    assert_eq!(get("onnx.producer_name"), Some("kiln-tests"));
    assert_eq!(get("onnx.producer_version"), Some("1"));
    assert_eq!(get("onnx.graph_name"), Some("g"));
    assert_eq!(get("author"), Some("someone"));
    assert_eq!(get("kiln.convert.source_format"), Some("onnx"));
}

/// `m` with a Reshape node that reads `shape` as data (rule R1 keeps it inline).
fn reading(mut m: ModelProto, shape: &str) -> ModelProto {
    m.graph.as_mut().unwrap().node.push(NodeProto {
        op_type: Some("Reshape".into()),
        input: vec!["a".into(), shape.into()],
        output: vec![format!("reshaped {shape}")],
        ..Default::default()
    });
    m
}

/// Each case, and the same bytes repeated to 1,024 bytes or more (a leading
/// dimension of copies): small and large tensors alike go to the Kiln file
/// when no node reads them as data (rule R1).
fn small_and_large() -> Vec<(String, DataType, Vec<i64>, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, c) in cases().iter().enumerate() {
        out.push((format!("t{i}"), c.ty, c.dims.clone(), c.bytes.clone()));
        let odd_nibbles = c.dims.iter().product::<i64>() % 2 == 1 && matches!(c.kiln, "u4" | "i4" | "e2m1");
        if !c.bytes.is_empty() && !odd_nibbles {
            let copies = 1024usize.div_ceil(c.bytes.len());
            let dims = std::iter::once(copies as i64).chain(c.dims.iter().copied()).collect();
            out.push((format!("big{i}"), c.ty, dims, c.bytes.repeat(copies)));
        }
    }
    out
}

#[test]
fn the_graph_points_into_the_kiln_file_and_keeps_everything_else() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut all = small_and_large();
    all.push(("shape".into(), DataType::Int64, vec![2], [2i64, -1].iter().flat_map(|v| v.to_le_bytes()).collect()));
    let inits: Vec<_> = all.iter().map(|(n, ty, dims, bytes)| raw(n, *ty, dims, bytes)).collect();
    let original = reading(model(inits), "shape");
    save(d, "m.onnx", &original);
    for (out, graph, shard) in [("m.kiln", "m.kiln.onnx", None), ("s.kiln", "s.kiln.onnx", Some("2000"))] {
        let mut args = vec!["m.onnx", "-o", out, "--onnx-graph", graph];
        if let Some(size) = shard {
            args.extend(["--max-shard-size", size]);
        }
        convert(d, &args, 0);
        let graph_bytes = std::fs::read(d.join(graph)).unwrap();
        let written = ModelProto::decode(graph_bytes.as_slice()).unwrap();
        let mut files = std::collections::BTreeSet::new();
        let (mut inline, mut external) = (0, 0);
        for (t, (name, _, _, bytes)) in written.graph.as_ref().unwrap().initializer.iter().zip(&all) {
            if name == "shape" {
                // Rule R1: what a node reads as data stays in the graph, as it was.
                assert_eq!(t.data_location, None, "{name}");
                assert_eq!(t.raw_data.as_deref(), Some(&bytes[..]), "{name}");
                inline += 1;
                continue;
            }
            external += 1;
            assert_eq!(t.data_location, Some(i32::from(DataLocation::External)));
            assert!(t.raw_data.is_none());
            let kv = |k: &str| t.external_data.iter().find(|e| e.key() == k).unwrap().value().to_string();
            let (file, offset, length) = (kv("location"), kv("offset").parse::<usize>().unwrap(), kv("length"));
            assert_eq!(length.parse::<usize>().unwrap(), bytes.len());
            let on_disk = std::fs::read(d.join(&file)).unwrap();
            assert_eq!(&on_disk[offset..offset + bytes.len()], &bytes[..], "{}", t.name());
            assert_eq!(offset % 64, 0, "payloads start on 64-byte boundaries");
            files.insert(file);
        }
        assert_eq!(inline, 1, "only the shape a Reshape reads");
        assert!(external > 20, "every other initializer, however small: {external}");
        assert_eq!(files.len() > 1, shard.is_some(), "{files:?}");
        // Rule R2: the graph names its Kiln model, which records the graph's SHA-256.
        let named = written.metadata_props.iter().find(|p| p.key() == "kiln.model").map(|p| p.value().to_string());
        assert_eq!(named.as_deref(), Some(out));
        assert_eq!(recorded_digest(&d.join(out)), Some(kiln_onnx::sha256_hex(&graph_bytes)));
        // Nothing else changed: put the data back and compare whole messages.
        let mut back = written.clone();
        back.metadata_props.retain(|p| p.key() != "kiln.model");
        for (t, orig) in
            back.graph.as_mut().unwrap().initializer.iter_mut().zip(&original.graph.as_ref().unwrap().initializer)
        {
            t.data_location = None;
            t.external_data.clear();
            t.raw_data = orig.raw_data.clone();
        }
        assert_eq!(back, original);
        let o = kiln(d, &["validate", graph]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
}

/// The graph digest a Kiln output records (a model file, or a manifest).
fn recorded_digest(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).unwrap();
    let key = kiln_onnx::KEY_GRAPH_SHA256;
    if let Ok(m) = Model::parse(&bytes) {
        return m.metadata().get(key).map(str::to_string);
    }
    let limits = kiln_nostd::Limits::MAX;
    let mut scratch = kiln_model::host::manifest_scratch(&bytes, &limits);
    let m = kiln_model::Manifest::parse_with(&bytes, &limits, Some(&mut scratch)).unwrap();
    m.metadata().get(key).map(str::to_string)
}

fn constant(out: &str, value: TensorProto) -> NodeProto {
    NodeProto {
        op_type: Some("Constant".into()),
        name: Some(format!("make {out}")),
        output: vec![out.into()],
        attribute: vec![AttributeProto {
            name: Some("value".into()),
            r#type: Some(i32::from(attribute_proto::AttributeType::Tensor)),
            t: Some(value),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn with_branch(mut m: ModelProto, body: GraphProto) -> ModelProto {
    m.graph.as_mut().unwrap().node.push(NodeProto {
        op_type: Some("If".into()),
        name: Some("branch".into()),
        input: vec!["cond".into()],
        output: vec!["z".into()],
        attribute: vec![AttributeProto {
            name: Some("then_branch".into()),
            r#type: Some(i32::from(attribute_proto::AttributeType::Graph)),
            g: Some(body),
            ..Default::default()
        }],
        ..Default::default()
    });
    m
}

/// Weights wherever an export puts them (rule R1): Constant values of 1,024
/// bytes or more and every subgraph initializer are tensors of the Kiln
/// file; the graph written lifts the Constants into initializers of their
/// own graph and points every large initializer, in subgraphs too, into Kiln.
#[test]
fn weights_in_constant_nodes_and_subgraphs_are_converted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let big = |n: usize| (0..n).map(|i| (i * 7 % 251) as u8).collect::<Vec<u8>>();
    let mut m = model(vec![raw("w", DataType::Float, &[256], &big(1024))]);
    let g = m.graph.as_mut().unwrap();
    g.node.push(constant("c.big", raw("", DataType::Float, &[16, 16], &big(1024))));
    g.node.push(constant("c.small", raw("", DataType::Int64, &[2], &big(16))));
    g.node.push(constant("c.scale", raw("", DataType::Float, &[], &big(4))));
    let body = GraphProto {
        name: Some("then".into()),
        initializer: vec![
            raw("sub.big", DataType::Uint8, &[2048], &big(2048)),
            raw("sub.small", DataType::Int8, &[3], &big(3)),
        ],
        node: vec![constant("sub.c", raw("", DataType::Float16, &[512], &big(1024)))],
        ..Default::default()
    };
    let m = with_branch(reading(m, "c.small"), body);
    save(d, "m.onnx", &m);
    let err = convert(d, &["m.onnx", "-o", "t.kiln"], 0);
    assert!(err.contains("3 weights held in Constant nodes and 2 subgraph initializers are tensors too"), "{err}");
    let names: Vec<String> = tensors(&d.join("t.kiln")).into_iter().map(|t| t.0).collect();
    assert_eq!(names, ["w", "c.big", "c.scale", "sub.big", "sub.small", "sub.c"], "all but the shape a Reshape reads");
    let by_name = |n: &str| tensors(&d.join("t.kiln")).into_iter().find(|t| t.0 == n).unwrap();
    assert_eq!(by_name("c.big").3, big(1024));
    assert_eq!(by_name("sub.big").3, big(2048));

    let o = kiln(d, &["convert", "m.onnx", "-o", "m.kiln", "--onnx-graph", "m.kiln.onnx"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("6 initializers as external data"), "{}", stderr(&o));
    assert!(stderr(&o).contains("3 of them lifted from Constant nodes), 0 left inline"), "{}", stderr(&o));
    let written = ModelProto::decode(std::fs::read(d.join("m.kiln.onnx")).unwrap().as_slice()).unwrap();
    let g = written.graph.as_ref().unwrap();
    let ext = |t: &TensorProto| t.data_location == Some(i32::from(DataLocation::External));
    let main: Vec<(&str, bool)> = g.initializer.iter().map(|t| (t.name(), ext(t))).collect();
    assert_eq!(main, [("w", true), ("c.big", true), ("c.scale", true)]);
    let ops: Vec<&str> = g.node.iter().map(NodeProto::op_type).collect();
    assert_eq!(ops, ["Identity", "Constant", "Reshape", "If"], "Constants are lifted but the shape a Reshape reads");
    let sub = g.node[3].attribute[0].g.as_ref().unwrap();
    let inner: Vec<(&str, bool)> = sub.initializer.iter().map(|t| (t.name(), ext(t))).collect();
    assert_eq!(inner, [("sub.big", true), ("sub.small", true), ("sub.c", true)]);
    assert!(sub.node.is_empty());
}

/// A graph changed after the conversion no longer matches the digest its
/// Kiln model records: the converter's own check (the sessions' check) says so.
#[test]
fn the_graph_digest_binds_the_graph_to_its_kiln_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = model(vec![raw("w", DataType::Float, &[256], &[1; 1024]), raw("b", DataType::Int64, &[2], &[2; 16])]);
    save(d, "m.onnx", &reading(m, "b"));
    convert(d, &["m.onnx", "-o", "m.kiln", "--onnx-graph", "m.kiln.onnx"], 0);
    let graph = std::fs::read(d.join("m.kiln.onnx")).unwrap();
    let req = kiln_onnx::requirements(&graph).unwrap();
    assert_eq!(req.model, "m.kiln");
    let checked: Vec<(&str, &str)> = req.checked.iter().map(|(n, c)| (n.as_str(), c.as_str())).collect();
    assert_eq!(checked, [("w", "kiln"), ("b", "inline")]);
    let recorded = recorded_digest(&d.join("m.kiln"));
    let places = kiln_convert::onnx::graph::places(&d.join("m.kiln")).unwrap();
    let lookup = |f: &str, n: &str| places.get(n).filter(|s| s.file == f).map(|s| s.tensor.clone());
    kiln_onnx::pair(&req, &graph, recorded.as_deref(), lookup).unwrap();
    // The inline shape changed: same size, other bytes.
    let mut changed = ModelProto::decode(graph.as_slice()).unwrap();
    changed.graph.as_mut().unwrap().initializer[1].raw_data = Some(vec![3u8; 16].into());
    let changed = changed.encode_to_vec();
    let e = kiln_onnx::pair(&kiln_onnx::requirements(&changed).unwrap(), &changed, recorded.as_deref(), lookup)
        .unwrap_err();
    assert!(e.message.contains("SHA-256") && e.message.contains("m.kiln records"), "{e}");
    let e = kiln_onnx::pair(&req, &graph, None, lookup).unwrap_err();
    assert!(e.message.contains("records no graph digest"), "{e}");
    // An inline initializer that rule R1 puts in Kiln is refused by name.
    let mut inlined = ModelProto::decode(graph.as_slice()).unwrap();
    let w = &mut inlined.graph.as_mut().unwrap().initializer[0];
    w.data_location = None;
    w.external_data.clear();
    w.raw_data = Some(vec![1u8; 1024].into());
    let e = kiln_onnx::requirements(&inlined.encode_to_vec()).unwrap_err();
    assert_eq!(e.initializer.as_deref(), Some("w"));
    assert!(e.message.contains("1024 bytes") && e.message.contains("no node reads it as data"), "{e}");
    // No kiln.model: not a graph kiln convert wrote.
    let mut anonymous = ModelProto::decode(graph.as_slice()).unwrap();
    anonymous.metadata_props.retain(|p| p.key() != "kiln.model");
    let e = kiln_onnx::requirements(&anonymous.encode_to_vec()).unwrap_err();
    assert!(e.message.contains("names no Kiln model"), "{e}");
}

/// Tensors Kiln cannot hold and sparse initializers stay in the graph with
/// `--onnx-graph`, named in a note; the Kiln file holds the rest.
#[test]
fn with_a_graph_what_kiln_cannot_hold_stays_inline_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut m = model(vec![
        raw("w", DataType::Float, &[256], &[1; 1024]),
        TensorProto {
            name: Some("labels".into()),
            data_type: Some(i32::from(DataType::String)),
            dims: vec![2],
            string_data: vec![b"cat".to_vec().into(), b"dog".to_vec().into()],
            ..Default::default()
        },
    ]);
    m.graph.as_mut().unwrap().sparse_initializer =
        vec![SparseTensorProto { values: Some(raw("s", DataType::Float, &[1], &[0; 4])), ..Default::default() }];
    save(d, "m.onnx", &m);
    let o = kiln(d, &["convert", "m.onnx", "-o", "m.kiln", "--onnx-graph", "m.kiln.onnx"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("2 tensors Kiln cannot hold stay inline in the graph") && err.contains("labels (STRING)"),
        "{err}"
    );
    assert!(err.contains("s (sparse)"), "{err}");
    let names: Vec<String> = tensors(&d.join("m.kiln")).into_iter().map(|t| t.0).collect();
    assert_eq!(names, ["w"]);
    let written = ModelProto::decode(std::fs::read(d.join("m.kiln.onnx")).unwrap().as_slice()).unwrap();
    assert_eq!(written.graph.as_ref().unwrap().initializer[1].string_data.len(), 2);
    // Without the graph, the refusal stands: nothing would hold the strings.
    let err = convert(d, &["m.onnx", "-o", "x.kiln"], 1);
    assert!(err.contains("sparse") || err.contains("STRING"), "{err}");
}

#[test]
fn types_kiln_lacks_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (ty, name) in [
        (DataType::String, "STRING"),
        (DataType::Complex64, "COMPLEX64"),
        (DataType::Complex128, "COMPLEX128"),
        (DataType::Float8e4m3fnuz, "FLOAT8E4M3FNUZ"),
        (DataType::Float8e5m2fnuz, "FLOAT8E5M2FNUZ"),
        (DataType::Undefined, "UNDEFINED"),
    ] {
        save(d, "m.onnx", &model(vec![raw("ok", DataType::Float, &[1], &[0; 4]), raw("odd one", ty, &[1], &[0; 8])]));
        let err = convert(d, &["m.onnx", "-o", "m.kiln"], 1);
        assert!(err.contains("initializer \"odd one\"") && err.contains(name), "{name}: {err}");
        assert!(!d.join("m.kiln").exists());
    }
}

/// Hostile models: each refused (exit 1) with the reason in the message.
#[test]
fn hostile_models_are_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("model");
    std::fs::create_dir(&d).unwrap();
    // Files outside the model's folder that a hostile location might name.
    std::fs::write(dir.path().join("outside.bin"), [7u8; 64]).unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();
    std::fs::write(d.join("sub/x.bin"), [7u8; 64]).unwrap();
    std::fs::write(d.join("side.bin"), [7u8; 16]).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(dir.path().join("outside.bin"), d.join("link.bin")).unwrap();
    let outside = dir.path().join("outside.bin").display().to_string();
    let ext = |entries: &[(&str, &str)]| model(vec![external("w", DataType::Float, &[4], entries)]);
    let good = model(vec![raw("w", DataType::Float, &[4], &[1; 16])]).encode_to_vec();
    let mut cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated", good[..good.len() - 5].to_vec(), "protobuf"),
        ("empty file", vec![], "empty"),
        ("not protobuf", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff".to_vec(), "protobuf"),
        ("location ..", ext(&[("location", "../outside.bin")]).encode_to_vec(), "plain file name"),
        ("location sub/", ext(&[("location", "sub/x.bin")]).encode_to_vec(), "plain file name"),
        ("absolute", ext(&[("location", &outside)]).encode_to_vec(), "plain file name"),
        ("drive", ext(&[("location", "C:\\x.bin")]).encode_to_vec(), "plain file name"),
        ("missing", ext(&[("location", "nothere.bin")]).encode_to_vec(), "missing"),
        ("no location", ext(&[("offset", "0")]).encode_to_vec(), "without a location"),
        (
            "offset past",
            ext(&[("location", "side.bin"), ("offset", "8"), ("length", "16")]).encode_to_vec(),
            "ends past",
        ),
        (
            "far offset",
            ext(&[("location", "side.bin"), ("offset", "18446744073709551615"), ("length", "16")]).encode_to_vec(),
            "ends past",
        ),
        ("wrong length", ext(&[("location", "side.bin"), ("length", "12")]).encode_to_vec(), "takes 16"),
        ("bad number", ext(&[("location", "side.bin"), ("offset", "-1")]).encode_to_vec(), "decimal"),
        ("unknown key", ext(&[("location", "side.bin"), ("basepath", "/")]).encode_to_vec(), "basepath"),
        ("short raw", model(vec![raw("w", DataType::Float, &[4], &[0; 15])]).encode_to_vec(), "takes 16"),
        ("bool byte", model(vec![raw("w", DataType::Bool, &[2], &[1, 2])]).encode_to_vec(), "bool"),
        ("pad nibble", model(vec![raw("w", DataType::Int4, &[3], &[0x21, 0xf3])]).encode_to_vec(), "nibble"),
        ("negative dim", model(vec![raw("w", DataType::Float, &[-1], &[])]).encode_to_vec(), "negative"),
        ("overflow", model(vec![raw("w", DataType::Float, &[1 << 40, 1 << 40], &[])]).encode_to_vec(), "overflows"),
        (
            "duplicate",
            model(vec![raw("w", DataType::Uint8, &[1], &[1]), raw("w", DataType::Uint8, &[1], &[1])]).encode_to_vec(),
            "twice",
        ),
        ("no name", model(vec![raw("", DataType::Uint8, &[1], &[1])]).encode_to_vec(), "no name"),
    ];
    #[cfg(unix)]
    cases.push(("symlink out", ext(&[("location", "link.bin")]).encode_to_vec(), "symbolic link"));
    let typed = |f: fn(&mut TensorProto)| {
        let mut t = raw("w", DataType::Int8, &[2], &[]);
        t.raw_data = None;
        f(&mut t);
        model(vec![t]).encode_to_vec()
    };
    cases.push(("int8 range", typed(|t| t.int32_data = vec![1, 300]), "out of range"));
    cases.push(("count", typed(|t| t.int32_data = vec![1, 2, 3]), "3 values"));
    cases.push(("wrong field", typed(|t| t.float_data = vec![1.0, 2.0]), "float_data"));
    cases.push(("no data", typed(|_| {}), "no data"));
    cases.push((
        "raw and typed",
        typed(|t| {
            t.int32_data = vec![1, 2];
            t.raw_data = Some(vec![1, 2].into());
        }),
        "both",
    ));
    // A packed float_data claiming 2^40 bytes: refused before anything that size exists.
    let mut huge = vec![0x3a, 0x10]; // ModelProto.graph (7), 16 bytes
    huge.extend([0x2a, 0x0e]); // GraphProto.initializer (5), 14 bytes
    huge.extend([0x22, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0, 0, 0, 0, 0, 0]); // TensorProto.float_data (4), 2^40
    huge.push(0);
    cases.push(("huge count", huge, "protobuf"));
    let sparse = {
        let mut m = model(vec![]);
        m.graph.as_mut().unwrap().sparse_initializer =
            vec![SparseTensorProto { values: Some(raw("s", DataType::Float, &[1], &[0; 4])), ..Default::default() }];
        m.encode_to_vec()
    };
    cases.push(("sparse", sparse, "sparse"));
    let outside = {
        let mut m = model(vec![]);
        let body = GraphProto {
            initializer: vec![external("inner", DataType::Float, &[1], &[("location", "../secret.bin")])],
            ..Default::default()
        };
        m.graph.as_mut().unwrap().node[0].attribute = vec![AttributeProto {
            name: Some("then_branch".into()),
            r#type: Some(i32::from(attribute_proto::AttributeType::Graph)),
            g: Some(body),
            ..Default::default()
        }];
        m.encode_to_vec()
    };
    cases.push(("external data of a subgraph outside the folder", outside, "model's own folder"));
    let huge_constant = {
        let mut m = model(vec![]);
        let claim = TensorProto {
            data_type: Some(i32::from(DataType::Float)),
            dims: vec![1 << 20, 1 << 20],
            ..Default::default()
        };
        m.graph.as_mut().unwrap().node.push(constant("c", claim));
        m.encode_to_vec()
    };
    cases.push(("a Constant claiming 4 TiB", huge_constant, "no data"));
    let deep = {
        let mut body = GraphProto::default();
        for _ in 0..200 {
            let node = NodeProto {
                op_type: Some("If".into()),
                attribute: vec![AttributeProto {
                    name: Some("then_branch".into()),
                    g: Some(body),
                    ..Default::default()
                }],
                ..Default::default()
            };
            body = GraphProto { node: vec![node], ..Default::default() };
        }
        let mut m = model(vec![]);
        m.graph = Some(body);
        m.encode_to_vec()
    };
    cases.push(("subgraphs nested 200 deep", deep, "protobuf"));
    for (what, bytes, needle) in cases {
        std::fs::write(d.join("m.onnx"), &bytes).unwrap();
        let err = convert(&d, &["m.onnx", "-o", "m.kiln"], 1);
        assert!(err.contains(needle), "{what}: {err}");
        // An ONNX model has no shards: a path error speaks of its external data, not of shards.
        assert!(!err.contains("shard"), "{what}: {err}");
        assert!(!d.join("m.kiln").exists(), "{what}");
        let o = kiln(&d, &["validate", "m.onnx"]);
        // Valid ONNX that Kiln cannot hold passes validate, with the reason (issue 41).
        let (code, said) = if matches!(what, "sparse" | "subgraph") { (0, "a Kiln limit") } else { (1, needle) };
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(code), "{what}: {out}");
        assert!(out.contains(said), "{what}: {out}");
    }
}

#[test]
fn onnx_is_read_by_its_extension_or_from_only() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bytes = model(vec![raw("w", DataType::Float, &[1], &[0, 0, 128, 63])]).encode_to_vec();
    std::fs::write(d.join("m.pb"), &bytes).unwrap();
    std::fs::write(d.join("M.ONNX"), &bytes).unwrap();
    // Not by content: a .pb file is not recognised, so validate's verdict on it is the Kiln path's.
    let o = kiln(d, &["validate", "m.pb"]);
    assert!(!o.status.success());
    assert!(!String::from_utf8_lossy(&o.stdout).contains("onnx"));
    convert(d, &["m.pb", "-o", "a.kiln"], 1);
    convert(d, &["m.pb", "--from", "onnx", "-o", "a.kiln"], 0);
    convert(d, &["M.ONNX", "-o", "b.kiln"], 0);
    assert_eq!(tensors(&d.join("a.kiln")), tensors(&d.join("b.kiln")));
    let o = kiln(d, &["validate", "--from", "onnx", "m.pb"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn onnx_graph_is_refused_where_it_cannot_hold() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("elsewhere")).unwrap();
    let mut m = model(vec![raw("w", DataType::Float, &[1], &[0, 0, 128, 63])]);
    save(d, "m.onnx", &m);
    let err = convert(d, &["m.onnx", "-o", "m.kiln", "--onnx-graph", "elsewhere/m.onnx"], 2);
    assert!(err.contains("folder"), "{err}");
    let err = convert(d, &["m.onnx", "-o", "m.kiln", "--onnx-graph", "m.onnx"], 2);
    assert!(err.contains("input"), "{err}");
    let err = convert(d, &["m.onnx", "-o", "m.safetensors", "--onnx-graph", "g.onnx"], 2);
    assert!(err.contains("safetensors"), "{err}");
    // A newer IR version than the schema knows: fields could be lost, so no graph.
    m.ir_version = Some(kiln_convert::onnx::known_ir_version() + 1);
    save(d, "new.onnx", &m);
    let err = convert(d, &["new.onnx", "-o", "n.kiln", "--onnx-graph", "n.kiln.onnx"], 1);
    assert!(err.contains("IR version"), "{err}");
    assert!(!d.join("n.kiln").exists() && !d.join("n.kiln.onnx").exists());
    convert(d, &["new.onnx", "-o", "n.kiln"], 0);
    // Not ONNX at all.
    let err = convert(d, &["n.kiln", "-o", "again.kiln", "--onnx-graph", "g.onnx"], 2);
    assert!(err.contains("ONNX inputs"), "{err}");
}

/// What the npm session refuses on the wire, the session check (kiln-onnx)
/// refuses too, in the same words: subgraphs nested past 30, an attribute's
/// `g` given twice, external data in a function's subgraph, a negative
/// dimension on any initializer (kiln-py/tests/test_onnx_agree.py runs both
/// sessions over these and more).
#[test]
fn the_session_check_refuses_what_the_npm_session_refuses() {
    use kiln_convert::onnx::proto::FunctionProto;
    let named = |mut m: ModelProto| {
        m.metadata_props.push(StringStringEntryProto { key: Some("kiln.model".into()), value: Some("m.kiln".into()) });
        m
    };
    let branch = |body: GraphProto| NodeProto {
        op_type: Some("If".into()),
        attribute: vec![AttributeProto { name: Some("then_branch".into()), g: Some(body), ..Default::default() }],
        ..Default::default()
    };
    let nested = |depth: usize| {
        // At the bottom, a shape its Reshape reads as data: inline (rule R1).
        let mut body = GraphProto {
            initializer: vec![raw("leaf", DataType::Int64, &[2], &[0; 16])],
            node: vec![NodeProto {
                op_type: Some("Reshape".into()),
                input: vec!["x".into(), "leaf".into()],
                output: vec!["y".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        for _ in 1..depth {
            body = GraphProto { node: vec![branch(body)], ..Default::default() };
        }
        let mut m = named(model(vec![]));
        m.graph.as_mut().unwrap().node.push(branch(body));
        m.encode_to_vec()
    };
    let req = kiln_onnx::requirements(&nested(30)).unwrap();
    assert_eq!(req.checked, vec![("leaf".to_string(), kiln_onnx::Checked::Inline)]);
    let e = kiln_onnx::requirements(&nested(31)).unwrap_err();
    assert!(e.message.starts_with("subgraphs nested more than 30 deep"), "{e}");

    // A second `g` in one attribute: protobuf's parsers would merge the two.
    let attr =
        AttributeProto { name: Some("then_branch".into()), g: Some(GraphProto::default()), ..Default::default() };
    let mut attr_bytes = attr.encode_to_vec();
    attr_bytes.extend_from_slice(&[6 << 3 | 2, 0]); // g again, empty
    let node = NodeProto { op_type: Some("If".into()), name: Some("two".into()), ..Default::default() };
    let mut node_bytes = node.encode_to_vec();
    node_bytes.push(5 << 3 | 2);
    node_bytes.push(u8::try_from(attr_bytes.len()).unwrap());
    node_bytes.extend_from_slice(&attr_bytes);
    let mut m = named(model(vec![]));
    m.graph.as_mut().unwrap().node.clear();
    let mut graph_bytes = m.graph.take().unwrap().encode_to_vec();
    graph_bytes.push(1 << 3 | 2);
    graph_bytes.push(u8::try_from(node_bytes.len()).unwrap());
    graph_bytes.extend_from_slice(&node_bytes);
    let mut bytes = m.encode_to_vec();
    bytes.push(7 << 3 | 2);
    bytes.push(u8::try_from(graph_bytes.len()).unwrap());
    bytes.extend_from_slice(&graph_bytes);
    let e = kiln_onnx::requirements(&bytes).unwrap_err();
    assert_eq!(e.message, r#"attribute "then_branch" of node "two" (If) gives its graph (g) 2 times"#);

    // External data on an initializer of a function's subgraph: refused by name.
    let ext = external("fw", DataType::Float, &[300], &[("location", "m.kiln"), ("offset", "0"), ("length", "1200")]);
    let mut m = named(model(vec![]));
    m.functions.push(FunctionProto {
        name: Some("F".into()),
        node: vec![branch(GraphProto { initializer: vec![ext], ..Default::default() })],
        ..Default::default()
    });
    let e = kiln_onnx::requirements(&m.encode_to_vec()).unwrap_err();
    assert_eq!(e.initializer.as_deref(), Some("fw"), "{e}");
    assert!(e.message.contains("of a function is external data"), "{e}");

    // A negative dimension, even on a type Kiln cannot hold (which R1 would keep inline).
    let mut vocab = raw("vocab", DataType::String, &[-2], &[]);
    vocab.raw_data = None;
    let e = kiln_onnx::requirements(&named(model(vec![vocab])).encode_to_vec()).unwrap_err();
    assert_eq!(
        (e.initializer.as_deref(), e.message.as_str()),
        (Some("vocab"), r#"initializer "vocab" has a negative dimension"#)
    );
}

/// A conversion that moves no weight succeeds and says so, as does `kiln inspect`.
#[test]
fn a_model_without_weights_converts_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut m = model(vec![]);
    m.graph.as_mut().unwrap().node.push(constant("small", raw("", DataType::Int64, &[2], &[1; 16])));
    save(d, "m.onnx", &reading(m, "small"));
    let err = convert(d, &["m.onnx", "-o", "m.kiln"], 0);
    assert!(err.contains("note: no weights"), "{err}");
    let o = kiln(d, &["inspect", "m.kiln"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("no tensors: this file holds no weights"));
    let o = kiln(d, &["inspect", "m.onnx"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("no weights: the input holds no tensor"));
}
