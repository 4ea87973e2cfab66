//! `kiln validate -` and `kiln inspect -`: a block read from standard input
//! as it streams gets exactly the verdict `kiln validate FILE` gives on the
//! same bytes, and a large one is checked in constant memory.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn kiln() -> Command {
    Command::cargo_bin("kiln").expect("the kiln binary is built")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn example_model() -> Vec<u8> {
    std::fs::read(repo_root().join("spec/examples/digits-mlp.kiln")).expect("the example model")
}

/// (name, type, framed, bytes) of every golden case.
fn goldens() -> Vec<(String, String, bool, Vec<u8>)> {
    let text = std::fs::read_to_string(repo_root().join("spec/kiln-v2-cases.json")).expect("goldens");
    let v: Value = serde_json::from_str(&text).expect("JSON");
    v["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| {
            let name = c["name"].as_str().expect("name").to_owned();
            let ty = c["type"].as_str().expect("type").to_owned();
            (
                name,
                ty,
                c["framed"].as_bool().expect("framed"),
                hex::decode(c["hex"].as_str().expect("hex")).expect("hex"),
            )
        })
        .collect()
}

/// xorshift64*: the mutations are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The JSON line and exit code of `kiln validate --json EXTRA... -` with
/// `bytes` on standard input.
fn validate_stdin(extra: &[&str], bytes: &[u8]) -> (Value, Option<i32>) {
    let out = kiln().arg("validate").arg("--json").args(extra).arg("-").write_stdin(bytes).output().expect("runs");
    let line: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {:?} {:?}", out.stdout, String::from_utf8_lossy(&out.stderr)));
    (line, out.status.code())
}

/// Every case through `kiln validate --json FILE...` (one run) and through
/// `kiln validate --json -` (one run each): the same object but for "file",
/// which is "-" for standard input, and the same exit code.
fn same_as_files(extra: &[&str], cases: &[(String, Vec<u8>)]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let paths: Vec<PathBuf> = cases
        .iter()
        .enumerate()
        .map(|(i, (_, bytes))| {
            let path = dir.path().join(format!("{i}.kiln"));
            std::fs::write(&path, bytes).expect("write");
            path
        })
        .collect();
    let out = kiln().arg("validate").arg("--json").args(extra).args(&paths).output().expect("runs");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), cases.len(), "{stdout}");
    for (((name, bytes), path), line) in cases.iter().zip(&paths).zip(lines) {
        let mut want: Value = serde_json::from_str(line).expect("JSON line");
        assert_eq!(want["file"], path.to_str().expect("UTF-8 path"));
        let want_code = if want["ok"] == true { 0 } else { 1 };
        let (mut got, code) = validate_stdin(extra, bytes);
        assert_eq!(got["file"], "-", "{name}");
        assert_eq!(code, Some(want_code), "{name}: {got}");
        want["file"] = Value::Null;
        got["file"] = Value::Null;
        assert_eq!(got, want, "{name} ({} bytes)", bytes.len());
    }
}

#[test]
fn every_golden_on_stdin_gets_the_file_verdict() {
    let mut directories = Vec::new();
    let mut others = 0;
    for (name, ty, framed, bytes) in goldens() {
        if ty == "tensors" && !framed {
            directories.push((name, bytes));
        } else {
            // Frozen values are read into memory, then checked as a file is.
            let mut extra = vec!["--type", ty.as_str()];
            if framed {
                extra.push("--framed");
            }
            same_as_files(&extra, &[(name, bytes)]);
            others += 1;
        }
    }
    assert_eq!((directories.len(), others), (39, 7));
    same_as_files(&[], &directories);
}

#[test]
fn mutated_blocks_on_stdin_get_the_file_verdict() {
    let model = example_model();
    let mut cases = vec![("model".to_owned(), model.clone())];
    // Header, descriptors, name heap (1088..1181), padding (..1216), payloads.
    let spots = [0, 3, 4, 5, 6, 8, 12, 16, 24, 31, 63, 64, 66, 67, 76, 104, 112, 191, 1088, 1180, 1215, 1216, 20191];
    for at in spots {
        for flip in [0x01u8, 0xFF] {
            let mut bytes = model.clone();
            bytes[at] ^= flip;
            cases.push((format!("model[{at}]^{flip:#x}"), bytes));
        }
    }
    for len in [1, 63, 64, 65, 1000, 1216, 1217, 9000, model.len() - 1] {
        cases.push((format!("model[..{len}]"), model[..len].to_vec()));
    }
    for extra in [1, 70_000] {
        let mut bytes = model.clone();
        bytes.resize(model.len() + extra, 0);
        cases.push((format!("model + {extra} bytes"), bytes));
    }
    // Random single-byte changes of the model and of the accepted goldens.
    let accepted: Vec<Vec<u8>> = goldens()
        .into_iter()
        .map(|(.., bytes)| bytes)
        .filter(|bytes| kiln_nostd::Parser::new().parse(bytes).is_ok())
        .collect();
    let mut rng = Rng(0x6b69_6c6e_7374_6469);
    for i in 0..60 {
        let mut bytes = if i % 2 == 0 { model.clone() } else { accepted[rng.below(accepted.len())].clone() };
        let at = rng.below(bytes.len());
        bytes[at] = rng.next() as u8;
        cases.push((format!("random #{i}: byte {at}"), bytes));
    }
    same_as_files(&[], &cases);
}

#[test]
fn standard_input_is_named_once() {
    kiln()
        .args(["validate", "-", "-"])
        .write_stdin(kiln_nostd::wire::EMPTY_BLOCK.to_vec())
        .assert()
        .code(2)
        .stdout("")
        .stderr("kiln: standard input (-) can be named only once\n");
}

#[test]
fn validate_stdin_human_line() {
    kiln().args(["validate", "-"]).write_stdin(example_model()).assert().code(0).stdout("-: ok\n");
    kiln()
        .args(["validate", "-"])
        .write_stdin(&example_model()[..100])
        .assert()
        .code(1)
        .stdout("-: EOF at byte 100: the descriptors and name heap run past the end of the buffer\n");
}

#[test]
fn inspect_stdin_prints_the_file_table() {
    let path = repo_root().join("spec/examples/digits-mlp.kiln");
    let path = path.to_str().expect("UTF-8 path");
    for json in [false, true] {
        let flag: &[&str] = if json { &["--json"] } else { &[] };
        let file = kiln().arg("inspect").args(flag).arg(path).output().expect("runs");
        let piped = kiln().arg("inspect").args(flag).arg("-").write_stdin(example_model()).output().expect("runs");
        assert_eq!((file.status.code(), piped.status.code()), (Some(0), Some(0)));
        let (file, piped) =
            (String::from_utf8(file.stdout).expect("UTF-8"), String::from_utf8(piped.stdout).expect("UTF-8"));
        if json {
            let (mut a, mut b): (Value, Value) =
                (serde_json::from_str(&file).expect("JSON"), serde_json::from_str(&piped).expect("JSON"));
            assert_eq!(b["file"], "-");
            assert_eq!(b["tensors"].as_array().map(Vec::len), Some(8));
            a["file"] = Value::Null;
            b["file"] = Value::Null;
            assert_eq!(a, b);
        } else {
            assert!(piped.starts_with("file:            -\n"), "{piped}");
            assert!(piped.contains("fc1.weight.mxfp4.scales  e8m0"), "{piped}");
            assert_eq!(file.lines().skip(1).collect::<Vec<_>>(), piped.lines().skip(1).collect::<Vec<_>>());
        }
    }
}

#[test]
fn inspect_stdin_reports_a_rejected_block() {
    let mut model = example_model();
    model.push(0);
    kiln()
        .args(["inspect", "-"])
        .write_stdin(model.clone())
        .assert()
        .code(1)
        .stdout("")
        .stderr("-: TRAILING at byte 20192: the buffer continues past the end of the value (rule TrailingBytes)\n");
    kiln().args(["inspect", "--json", "-"]).write_stdin(model).assert().code(1).stdout(
        "{\"file\":\"-\",\"ok\":false,\"error\":\"TRAILING\",\"offset\":20192,\"rule\":\"TrailingBytes\",\"message\":\"TRAILING at byte 20192: the buffer continues past the end of the value\"}\n",
    );
}

/// A large block generated as it is written to kiln's standard input.
#[cfg(target_os = "linux")]
mod large {
    use std::io::Write;
    use std::process::{Command as StdCommand, Stdio};

    use kiln_nostd::{DType, Directory, TensorSpec, Writer};

    /// A block of `tensors` f32 tensors of `each` bytes: its directory prefix
    /// (written by `Writer` for small tensors, then given the large sizes and
    /// offsets) and the block length. The payload is not built.
    fn large_prefix(tensors: usize, each: u64) -> (Vec<u8>, u64) {
        let names: Vec<String> = (0..tensors).map(|i| format!("layer{i}.weight")).collect();
        let small = [0u8; 64];
        let specs: Vec<TensorSpec<'_>> =
            names.iter().map(|n| TensorSpec::new(DType::F32, &[16], &small).named(n)).collect();
        let mut block = vec![0u8; Writer::new().encoded_len(&specs).expect("plannable")];
        Writer::new().write(&specs, &mut block).expect("valid");
        let base = Directory::parse(&block).expect("valid").payload_start();
        let mut prefix = block[..base].to_vec();
        let payload = each * tensors as u64;
        prefix[16..24].copy_from_slice(&payload.to_le_bytes()); // header payload_bytes
        for i in 0..tensors {
            let d = 64 + 128 * i;
            prefix[d + 32..d + 40].copy_from_slice(&(each * i as u64).to_le_bytes()); // byte_offset
            prefix[d + 40..d + 48].copy_from_slice(&each.to_le_bytes()); // byte_length
            prefix[d + 48..d + 56].copy_from_slice(&(each / 4).to_le_bytes()); // shape[0]
        }
        (prefix, base as u64 + payload)
    }

    /// Peak resident memory of a running process, in KiB.
    fn vm_hwm_kib(pid: u32) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM line");
        line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("VmHWM in kB")
    }

    #[test]
    fn a_256_mib_stream_validates_in_constant_memory() {
        const MIB: u64 = 1 << 20;
        let (prefix, block_len) = large_prefix(4, 64 * MIB);
        for trailing in [false, true] {
            let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("kiln"))
                .args(["validate", "--json", "-"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn kiln");
            let mut stdin = child.stdin.take().expect("stdin");
            let prefix = prefix.clone();
            let writer = std::thread::spawn(move || {
                stdin.write_all(&prefix).expect("write the prefix");
                let mut chunk = vec![0u8; 1 << 20];
                let mut left = block_len - prefix.len() as u64;
                let mut n = 0u8;
                while left > 0 {
                    let len = left.min(chunk.len() as u64) as usize;
                    chunk[..len].iter_mut().for_each(|b| {
                        *b = n;
                        n = n.wrapping_add(1);
                    });
                    stdin.write_all(&chunk[..len]).expect("write the payload");
                    left -= len as u64;
                }
                if trailing {
                    stdin.write_all(&[0]).expect("write a trailing byte");
                }
                stdin // still open: kiln is waiting for more
            });
            let stdin = writer.join().expect("writer thread");
            let peak_kib = vm_hwm_kib(child.id());
            drop(stdin);
            let out = child.wait_with_output().expect("kiln exits");
            let line = String::from_utf8(out.stdout).expect("UTF-8");
            eprintln!("{} MiB streamed: kiln peak RSS {peak_kib} KiB", block_len / MIB);
            if trailing {
                assert_eq!(out.status.code(), Some(1), "{line}");
                assert_eq!(
                    line,
                    format!(
                        "{{\"file\":\"-\",\"ok\":false,\"error\":\"TRAILING\",\"offset\":{block_len},\"rule\":\"TrailingBytes\",\"message\":\"TRAILING at byte {block_len}: the buffer continues past the end of the value\"}}\n"
                    )
                );
            } else {
                assert_eq!(out.status.code(), Some(0), "{line}");
                assert_eq!(line, "{\"file\":\"-\",\"ok\":true}\n");
            }
            assert!(block_len > 256 * MIB);
            assert!(peak_kib < 64 * 1024, "peak RSS {peak_kib} KiB for a {block_len}-byte block");
        }
    }
}
