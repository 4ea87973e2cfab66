//! `kiln sign`, `kiln verify` and `kiln delta` (`spec/model-file.md`,
//! "Signed models" and "Delta updates"): Ed25519 keys as OpenSSL writes
//! them (PKCS#8 and SPKI PEM), the core's signed record and its check.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use clap::Args;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use kiln_model::signed::SigningPlan;
use kiln_model::{Kind, Model, Trust};
use serde::Serialize;

use crate::input::Input;
use crate::output::ErrorFields;
use kiln_convert::error::{io_fail, Usage};
use kiln_convert::outfile::{self, Target};
use kiln_host::paths;

/// `kiln sign`.
#[derive(Args, Debug)]
pub struct SignArgs {
    /// The private key: PKCS#8 PEM, as `openssl genpkey -algorithm ed25519 -out key.pem` writes it.
    #[arg(long, value_name = "KEY")]
    key: PathBuf,
    /// The release version the signed model carries (a device takes only a higher one than it runs).
    #[arg(long)]
    version: u64,
    /// The release target: the device or product the model is for.
    #[arg(long)]
    target: String,
    /// Place the payload region at a multiple of this many bytes in the file (1: no padding,
    /// the smallest file, for updates sent to devices). Default: as in the input.
    #[arg(long, value_name = "BYTES")]
    align: Option<u64>,
    /// The model file to sign (a plain, digests or signed record; its digests are checked first
    /// and computed when it has none).
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// The signed model file (replaced atomically; never the input).
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// Do not fsync OUT before renaming it into place.
    #[arg(long)]
    no_fsync: bool,
}

/// `kiln verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The public key: SPKI PEM, as `openssl pkey -in key.pem -pubout -out pub.pem` writes it.
    #[arg(long, value_name = "PUB")]
    pubkey: PathBuf,
    /// Accept only models whose release names this target.
    #[arg(long)]
    target: Option<String>,
    /// Accept only models whose release version is above this one (the running model's).
    #[arg(long, value_name = "VERSION")]
    newer_than: Option<u64>,
    /// Print one JSON object per file and line.
    #[arg(long)]
    json: bool,
    /// Signed model files to check.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
}

/// `kiln delta`.
#[derive(Args, Debug)]
pub struct DeltaArgs {
    /// The model the device runs (the base).
    #[arg(value_name = "OLD")]
    old: PathBuf,
    /// The signed model to send.
    #[arg(value_name = "NEW")]
    new: PathBuf,
    /// The delta update (replaced atomically).
    #[arg(short, long, value_name = "UPDATE")]
    output: PathBuf,
}

fn read_text(path: &Path, what: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path).map_err(io_fail(format!("cannot read the {what} {}", path.display())))
}

/// The private key of a PKCS#8 PEM file.
pub fn signing_key(path: &Path) -> anyhow::Result<SigningKey> {
    let pem = read_text(path, "key")?;
    SigningKey::from_pkcs8_pem(&pem)
        .map_err(|e| Usage(format!("{} is not an Ed25519 private key in PKCS#8 PEM ({e})", path.display())).into())
}

/// The public key of an SPKI PEM file.
pub fn verifying_key(path: &Path) -> anyhow::Result<VerifyingKey> {
    let pem = read_text(path, "public key")?;
    VerifyingKey::from_public_key_pem(&pem)
        .map_err(|e| Usage(format!("{} is not an Ed25519 public key in SPKI PEM ({e})", path.display())).into())
}

/// Writes `parts` to OUT through a temporary file beside it, checks the
/// written bytes with `check`, and renames it into place.
fn write_out(
    given: &Path,
    input: &std::fs::File,
    parts: &[&[u8]],
    fsync: bool,
    check: impl FnOnce(&[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    crate::convert::install_cleanup();
    let target = Target::resolve(given, input)?;
    let temp = target.temp()?;
    let mut file = std::io::BufWriter::new(temp.file()?);
    let mut n = 0u64;
    for p in parts {
        file.write_all(p).map_err(io_fail(format!("cannot write {}", temp.path().display())))?;
        n = n.saturating_add(u64::try_from(p.len()).unwrap_or(u64::MAX));
    }
    file.flush().map_err(io_fail(format!("cannot write {}", temp.path().display())))?;
    drop(file);
    let written = Input::open(temp.path()).map_err(io_fail(format!("cannot read back {}", temp.path().display())))?;
    check(written.bytes())?;
    drop(written);
    if fsync {
        outfile::sync(&temp)?;
    }
    outfile::persist(vec![(temp, &target)])?;
    Ok(n)
}

fn open(path: &Path) -> anyhow::Result<(std::fs::File, Input)> {
    let file = std::fs::File::open(path).map_err(io_fail(format!("cannot open {}", path.display())))?;
    let input = Input::open(path).map_err(io_fail(format!("cannot read {}", path.display())))?;
    Ok((file, input))
}

fn rejected(path: &Path, e: &kiln_model::Error) -> anyhow::Error {
    anyhow!("{}: {} at byte {}: {}", path.display(), e.code(), e.offset_u64(), e.rule().description())
}

/// `kiln sign`: exit 0 written, 1 the input is not a valid model, 2 usage or I/O.
pub fn run_sign(args: &SignArgs) -> anyhow::Result<u8> {
    match sign(args) {
        Ok(()) => Ok(0),
        Err(e) => {
            eprintln!("kiln sign: {e:#}");
            Ok(kiln_convert::error::exit_code(&e))
        }
    }
}

fn sign(args: &SignArgs) -> anyhow::Result<()> {
    let key = signing_key(&args.key)?;
    let public = key.verifying_key().to_bytes();
    let (file, input) = open(&args.input)?;
    let bytes = input.bytes();
    if Kind::of(bytes) == Some(Kind::Manifest) {
        return sign_manifest(args, &key, &file, bytes);
    }
    let mut plan = SigningPlan::new(bytes, &public, args.version, &args.target, args.align)
        .map_err(|e| rejected(&args.input, &e))?;
    plan.sign(bytes, |m| key.sign(m).to_bytes()).map_err(|e| rejected(&args.input, &e))?;
    let block = bytes.get(plan.block_at..).unwrap_or(&[]);
    let trust = Trust::new(&public).ok_or_else(|| Usage("the key is of small order: not a signing key".into()))?;
    let n = write_out(&args.output, &file, &[&plan.head, block], !args.no_fsync, |written| {
        Model::parse_trusted(written, &trust).map(drop).map_err(|e| anyhow!("the written file does not verify: {e}"))
    })?;
    eprintln!(
        "kiln sign: {} -> {}: {n} bytes, release {} for {}, key {}",
        args.input.display(),
        args.output.display(),
        args.version,
        args.target,
        hex::encode(public)
    );
    Ok(())
}

/// A sharded model: its manifest is signed (the shards stay as they are).
fn sign_manifest(args: &SignArgs, key: &SigningKey, file: &std::fs::File, bytes: &[u8]) -> anyhow::Result<()> {
    let public = key.verifying_key().to_bytes();
    let signed = kiln_model::sign_manifest(bytes, &public, args.version, &args.target, |m| key.sign(m).to_bytes())
        .map_err(|e| rejected(&args.input, &e))?;
    let n = write_out(&args.output, file, &[&signed], !args.no_fsync, |written| {
        (written == signed.as_slice()).then_some(()).ok_or_else(|| anyhow!("the written manifest differs"))
    })?;
    let (from, to) = (paths::folder_of(&args.input), paths::folder_of(&args.output));
    if from.canonicalize().ok() != to.canonicalize().ok() {
        eprintln!(
            "kiln sign: note: the shards are in {}; a signed manifest finds them only in its own folder",
            from.display()
        );
    }
    eprintln!(
        "kiln sign: {} -> {}: a signed manifest ({n} bytes; the shards are unchanged), release {} for {}, key {}",
        args.input.display(),
        args.output.display(),
        args.version,
        args.target,
        hex::encode(public)
    );
    Ok(())
}

/// `kiln verify` of a manifest: its signature, then every shard against it.
fn verify_manifest(
    path: &Path,
    bytes: &[u8],
    trust: &Trust<'_>,
) -> anyhow::Result<Result<(usize, u64, String), kiln_model::Error>> {
    let limits = kiln_nostd::Limits::DEFAULT;
    let mut scratch = kiln_model::host::manifest_scratch(bytes, &limits);
    let m = match kiln_model::Manifest::parse_trusted(bytes, &limits, Some(&mut scratch), trust) {
        Ok(m) => m,
        Err(e) => return Ok(Err(e)),
    };
    let release = m.signature().map(|s| (s.release.version, s.release.target.to_owned())).unwrap_or_default();
    let report = crate::models::check(path, bytes, limits, true)?;
    Ok(match report.fault {
        Some(f) => Err(f.error),
        None => Ok((report.tensors, release.0, release.1)),
    })
}

/// `kiln delta`: exit 0 written, 1 an input is not a valid model, 2 usage or I/O.
pub fn run_delta(args: &DeltaArgs) -> anyhow::Result<u8> {
    let go = || -> anyhow::Result<(usize, usize)> {
        let (_, old) = open(&args.old)?;
        let (file, new) = open(&args.new)?;
        if Kind::of(new.bytes()) != Some(Kind::Signed) {
            return Err(anyhow!("{}: not a signed model (a device takes only signed updates)", args.new.display()));
        }
        let d = kiln_model::delta::make(old.bytes(), new.bytes()).map_err(|e| anyhow!("{e}"))?;
        let rebuilt = kiln_model::delta::apply(old.bytes(), &d).map_err(|e| anyhow!("{e}"))?;
        if rebuilt != new.bytes() {
            return Err(anyhow!("the delta does not rebuild {}", args.new.display()));
        }
        write_out(&args.output, &file, &[&d], true, |written| {
            (written == d.as_slice()).then_some(()).ok_or_else(|| anyhow!("the written delta differs"))
        })?;
        Ok((d.len(), new.bytes().len()))
    };
    match go() {
        Ok((sent, full)) => {
            let permille = sent.saturating_mul(1000).checked_div(full).unwrap_or(0);
            eprintln!(
                "kiln delta: {} -> {}: {sent} bytes for the {full}-byte model ({}.{}%)",
                args.old.display(),
                args.output.display(),
                permille.checked_div(10).unwrap_or(0),
                permille.checked_rem(10).unwrap_or(0),
            );
            Ok(0)
        }
        Err(e) => {
            eprintln!("kiln delta: {e:#}");
            Ok(kiln_convert::error::exit_code(&e))
        }
    }
}

/// `kiln verify`: exit 0 every file verified, 1 one was rejected, 2 usage or I/O.
pub fn run_verify(args: &VerifyArgs) -> anyhow::Result<u8> {
    let key = match verifying_key(&args.pubkey) {
        Ok(k) => k.to_bytes(),
        Err(e) => {
            eprintln!("kiln verify: {e:#}");
            return Ok(2);
        }
    };
    let Some(mut trust) = Trust::new(&key) else {
        eprintln!("kiln verify: {}: a key of small order verifies forged signatures", args.pubkey.display());
        return Ok(2);
    };
    if let Some(t) = &args.target {
        trust = trust.target(t);
    }
    if let Some(v) = args.newer_than {
        trust = trust.newer_than(v);
    }
    let mut out = std::io::stdout().lock();
    let (mut any_rejected, mut io_failed) = (false, false);
    for path in &args.files {
        let input = match Input::open(path) {
            Ok(i) => i,
            Err(e) => {
                eprintln!("kiln: cannot read {}: {e}", path.display());
                io_failed = true;
                continue;
            }
        };
        let bytes = input.bytes();
        let verdict = if Kind::of(bytes) == Some(Kind::Manifest) {
            match verify_manifest(path, bytes, &trust) {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("kiln: cannot read a shard of {}: {e:#}", path.display());
                    io_failed = true;
                    continue;
                }
            }
        } else {
            Model::parse_trusted(bytes, &trust).map(|m| {
                let r = m.signature().map(|s| s.release);
                (m.directory().len(), r.map_or(0, |r| r.version), r.map_or(String::new(), |r| r.target.to_owned()))
            })
        };
        any_rejected |= verdict.is_err();
        let file = path.display().to_string();
        let what = if Kind::of(bytes) == Some(Kind::Manifest) { "signed sharded model" } else { "signed model" };
        let line = match (&verdict, args.json) {
            (Ok((tensors, version, target)), false) => {
                format!(
                    "{file}: ok ({what}, {tensors} tensors, release {version} for {target}, key {}, signature and digests verified)",
                    hex::encode(key)
                )
            }
            (Err(e), false) => {
                format!("{file}: {} at byte {}: {}", e.code(), e.offset_u64(), e.rule().description())
            }
            (v, true) => {
                #[derive(Serialize)]
                struct Json<'a> {
                    file: &'a str,
                    ok: bool,
                    #[serde(flatten)]
                    error: Option<ErrorFields>,
                    #[serde(skip_serializing_if = "Option::is_none")]
                    version: Option<u64>,
                    #[serde(skip_serializing_if = "Option::is_none")]
                    target: Option<&'a str>,
                    key: String,
                }
                let release = v.as_ref().ok();
                serde_json::to_string(&Json {
                    file: &file,
                    ok: v.is_ok(),
                    error: v.as_ref().err().map(ErrorFields::from),
                    version: release.map(|r| r.1),
                    target: release.map(|r| r.2.as_str()),
                    key: hex::encode(key),
                })
                .unwrap_or_default()
            }
        };
        writeln!(out, "{line}").context("writing to stdout")?;
    }
    out.flush().context("writing to stdout")?;
    Ok(if io_failed {
        2
    } else if any_rejected {
        1
    } else {
        0
    })
}
