//! Model files and sharded models in the CLI (`spec/model-file.md`): one
//! check of a whole model for `kiln validate`, `kiln inspect` and the
//! converter's own check of what it wrote. Shards are opened only inside
//! the manifest's folder.

use std::io;
use std::path::Path;

use kiln_convert::short_id;
use kiln_host::{Fault, Shards};
use kiln_model::{Error, Kind, Manifest};
use kiln_nostd::digest::DIGEST_LEN;
use kiln_nostd::Limits;
use serde::Serialize;

use crate::output::ErrorFields;
use kiln_model::host;

/// One shard's line in a model's report.
#[derive(Debug, Serialize)]
pub struct ShardLine {
    /// The shard's file name.
    pub file: String,
    /// True when it was checked and accepted (false once the model's first
    /// fault is in it or in an earlier shard).
    pub ok: bool,
    /// Why it was rejected.
    #[serde(flatten)]
    pub error: Option<ErrorFields>,
    /// The tensor at fault, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor: Option<String>,
}

/// What `kiln validate` says of one model file or sharded model.
#[derive(Debug)]
pub struct ModelReport {
    /// The record type.
    pub kind: Kind,
    /// The verdict; for a sharded model, the first fault in shard order,
    /// with the shard's file name (`None`: the file given) and the tensor.
    pub fault: Option<Fault>,
    /// A shard given alone: which position of which model it is.
    pub shard_of: Option<(u32, u32, [u8; DIGEST_LEN])>,
    /// A sharded model: every shard, in order (those after a fault unchecked).
    pub shards: Vec<ShardLine>,
    /// The model's tensor count.
    pub tensors: usize,
    /// Whether digests were compared.
    pub verified: bool,
    /// A signed record: its key, release version and target (the signature is not checked here).
    pub signed: Option<([u8; 32], u64, String)>,
}

/// Checks the model file or manifest at `path` whose bytes are `bytes`.
/// `verify`: compare digests (step 9d).
pub fn check(path: &Path, bytes: &[u8], limits: Limits, verify: bool) -> io::Result<ModelReport> {
    match Kind::of(bytes) {
        Some(Kind::Manifest) => check_sharded(path, bytes, limits, verify),
        kind => Ok(check_file(bytes, kind.unwrap_or(Kind::Plain), limits, verify)),
    }
}

fn check_file(bytes: &[u8], kind: Kind, limits: Limits, verify: bool) -> ModelReport {
    let (fault, shard_of, tensors, signed) = match kiln_host::check_model(bytes, limits, verify) {
        Ok(m) => (
            None,
            m.shard().map(|s| (s.index, s.count, *s.model)),
            m.directory().len(),
            m.signature().map(|s| (*s.key, s.release.version, s.release.target.to_owned())),
        ),
        Err(fault) => (Some(fault), None, 0, None),
    };
    ModelReport { kind, fault, shard_of, shards: Vec::new(), tensors, verified: verify, signed }
}

fn check_sharded(path: &Path, bytes: &[u8], limits: Limits, verify: bool) -> io::Result<ModelReport> {
    if path.as_os_str() == crate::input::STDIN {
        return Err(io::Error::other(
            "a manifest read from standard input has no folder to find its shards in; give its path",
        ));
    }
    let report = |fault, shards, tensors, signed| ModelReport {
        kind: Kind::Manifest,
        fault,
        shard_of: None,
        shards,
        tensors,
        verified: verify,
        signed,
    };
    let sharded = match Shards::new(path, bytes, limits) {
        Ok(s) => s,
        Err(fault) => return Ok(report(Some(fault), Vec::new(), 0, None)),
    };
    // Checked by `Shards::new` already; an error here is the same verdict.
    let manifest = match sharded.manifest() {
        Ok(m) => m,
        Err(e) => return Ok(report(Some(e.into()), Vec::new(), 0, None)),
    };
    let mut shards = Vec::new();
    let mut fault = None;
    for entry in manifest.shards() {
        let name = entry.name.as_str().to_owned();
        if fault.is_some() {
            shards.push(ShardLine { file: name, ok: false, error: None, tensor: None });
            continue;
        }
        let file = sharded.open_shard(entry.name)?;
        let result = sharded.check_shard(&manifest, &entry, file.as_deref(), verify);
        let (error, tensor) = match &result {
            Ok(()) => (None, None),
            Err(f) => (Some(ErrorFields::from(&f.error)), f.tensor.as_ref().map(ToString::to_string)),
        };
        shards.push(ShardLine { file: name, ok: result.is_ok(), error, tensor });
        fault = result.err();
    }
    let signed = manifest.signature().map(|s| (*s.key, s.release.version, s.release.target.to_owned()));
    Ok(report(fault, shards, manifest.tensor_count(), signed))
}

impl ModelReport {
    /// `PATH: ok (...)` or `PATH: CODE at byte N of SHARD (tensor T): ...`.
    pub fn human(&self, file: &str) -> String {
        match &self.fault {
            None => format!("{file}: ok ({})", self.what()),
            // `CODE at byte N[ of SHARD][ (tensor T)]: TEXT`: the host crate's words.
            Some(f) => format!("{file}: {f}"),
        }
    }

    /// Whether every digest the model carries was hashed and matched: asked
    /// for (`verify`), present (not a plain record) and no fault anywhere.
    /// A rejected file never says so, since its check stopped before (or at)
    /// a digest, and a truncated file's last tensors were never hashed.
    pub fn digests_verified(&self) -> bool {
        self.verified && self.kind.has_digests() && self.fault.is_none()
    }

    /// What was checked, for the ok line.
    fn what(&self) -> String {
        let digests = match (self.kind, self.verified) {
            (Kind::Plain, _) => "no digests",
            (_, true) => "digests verified",
            (_, false) => "digests not verified",
        };
        match (self.kind, self.shard_of) {
            (Kind::Manifest, _) => {
                let signed = self.signed.as_ref().map(|(key, version, target)| {
                    format!(
                        ", release {version} for {target}, signed by key {}; signature not checked (kiln verify --pubkey)",
                        hex::encode(key)
                    )
                });
                format!(
                    "sharded model: {} shards, {} tensors, {digests}{}",
                    self.shards.len(),
                    self.tensors,
                    signed.unwrap_or_default()
                )
            }
            (_, Some((index, count, id))) => {
                format!("shard {index} of {count} of model {}, {digests}", short_id(&id))
            }
            _ => match &self.signed {
                Some((key, version, target)) => format!(
                    "signed model, {} tensors, {digests}, release {version} for {target}, signed by key {}; \
                     signature not checked (kiln verify --pubkey)",
                    self.tensors,
                    hex::encode(key)
                ),
                None => format!("model file, {} tensors, {digests}", self.tensors),
            },
        }
    }

    /// One JSON object: `{"file","ok"[,"error",...],"kind",...,"shards":[...]}`.
    pub fn json(&self, file: &str) -> String {
        #[derive(Serialize)]
        struct Json<'a> {
            file: &'a str,
            ok: bool,
            #[serde(flatten)]
            error: Option<ErrorFields>,
            #[serde(skip_serializing_if = "Option::is_none")]
            shard_file: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            tensor: Option<String>,
            kind: &'static str,
            digests_verified: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            shard: Option<ShardOf>,
            #[serde(skip_serializing_if = "Option::is_none")]
            shards: Option<&'a [ShardLine]>,
            #[serde(skip_serializing_if = "Option::is_none")]
            signed: Option<Signed<'a>>,
        }
        #[derive(Serialize)]
        struct Signed<'a> {
            key: String,
            version: u64,
            target: &'a str,
            /// Always false here: `kiln verify --pubkey` checks the signature.
            signature_checked: bool,
        }
        #[derive(Serialize)]
        struct ShardOf {
            index: u32,
            count: u32,
            model: String,
        }
        let f = self.fault.as_ref();
        let json = Json {
            file,
            ok: f.is_none(),
            error: f.map(|f| ErrorFields::from(&f.error)),
            shard_file: f.and_then(|f| f.file.as_deref()),
            tensor: f.and_then(|f| f.tensor.as_ref()).map(ToString::to_string),
            kind: self.kind.name(),
            digests_verified: self.digests_verified(),
            shard: self.shard_of.map(|(index, count, id)| ShardOf { index, count, model: hex::encode(id) }),
            shards: (self.kind == Kind::Manifest && !self.shards.is_empty()).then_some(self.shards.as_slice()),
            signed: self.signed.as_ref().map(|(key, version, target)| Signed {
                key: hex::encode(key),
                version: *version,
                target,
                signature_checked: false,
            }),
        };
        serde_json::to_string(&json).unwrap_or_default()
    }
}

/// One tensor of a manifest in `kiln inspect`.
#[derive(Debug, Serialize)]
struct ManifestRow<'a> {
    index: usize,
    name: &'a str,
    shard: u32,
    shard_file: &'a str,
    dtype: &'static str,
    dtype_code: u16,
    shape: Vec<u64>,
    byte_length: u64,
    #[serde(skip_serializing_if = "str::is_empty")]
    layout: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    block_size: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    quant: Option<String>,
    digest: String,
}

/// One shard of a manifest in `kiln inspect`.
#[derive(Debug, Serialize)]
struct ShardRow<'a> {
    index: u32,
    file: &'a str,
    length: u64,
}

/// `kiln inspect` of a manifest: its metadata, shards and every tensor with
/// its shard, from the manifest alone (the shards are not opened).
pub fn inspect_manifest(file: &str, bytes: &[u8], json: bool) -> Result<String, Error> {
    let limits = Limits::DEFAULT;
    let mut scratch = host::manifest_scratch(bytes, &limits);
    let m = Manifest::parse_with(bytes, &limits, Some(&mut scratch))?;
    let shards: Vec<ShardRow<'_>> =
        m.shards().map(|s| ShardRow { index: s.index, file: s.name.as_str(), length: s.length }).collect();
    // Shards are listed 1..=N in order: shard k is row k - 1 (a search per tensor was tensors x shards).
    let file_of = |k: u32| {
        let row = usize::try_from(k).ok().and_then(|k| k.checked_sub(1)).and_then(|i| shards.get(i));
        row.filter(|s| s.index == k).map_or("", |s| s.file)
    };
    let rows: Vec<ManifestRow<'_>> = m
        .tensors()
        .map(|t| ManifestRow {
            index: t.index,
            name: t.name,
            shard: t.shard,
            shard_file: file_of(t.shard),
            dtype: t.dtype.name(),
            dtype_code: t.dtype.code(),
            shape: t.dims().collect(),
            byte_length: t.byte_length,
            layout: t.layout,
            block_size: t.dtype.is_opaque().then_some(t.block_size),
            quant: t.quant.map(|q| {
                let outer = if q.outer.is_empty() { String::new() } else { format!(",outer={}", q.outer) };
                format!("scheme {}(axis={},group={},scale={}{outer})", q.scheme, q.axis, q.group_size, q.scale)
            }),
            digest: hex::encode(t.digest),
        })
        .collect();
    let metadata: Vec<(&str, &str)> = m.metadata().iter().collect();
    let id = m.model_id();
    if json {
        #[derive(Serialize)]
        struct Doc<'a> {
            file: &'a str,
            kind: &'static str,
            model: String,
            metadata: &'a [(&'a str, &'a str)],
            shards: &'a [ShardRow<'a>],
            tensors: &'a [ManifestRow<'a>],
        }
        let model = hex::encode(id);
        let doc = Doc { file, kind: "manifest", model, metadata: &metadata, shards: &shards, tensors: &rows };
        return Ok(serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n");
    }
    let payload: u64 = rows.iter().map(|r| r.byte_length).fold(0, u64::saturating_add);
    let mut out = format!(
        "file:            {file}\nkind:            sharded model (manifest)\nmodel id:        {}\nshards:          {}\ntensors:         {}\npayload bytes:   {payload}\n\n",
        hex::encode(id),
        shards.len(),
        rows.len()
    );
    if !metadata.is_empty() {
        out.push_str(&format!("metadata ({} entries):\n", metadata.len()));
        for (k, v) in &metadata {
            out.push_str(&format!("  {k} = {}\n", crate::output::shortened(v)));
        }
        out.push('\n');
    }
    let mut table = vec![["shard", "file", "bytes"].map(String::from)];
    table.extend(shards.iter().map(|s| [s.index.to_string(), s.file.to_owned(), s.length.to_string()]));
    out.push_str(&crate::output::table(&table));
    out.push('\n');
    let mut table = vec![["index", "name", "shard", "dtype", "shape", "bytes", "quant"].map(String::from)];
    for r in &rows {
        let dims: Vec<String> = r.shape.iter().map(u64::to_string).collect();
        let dtype = if r.dtype_code >= 4096 { format!("opaque:{}", r.dtype_code) } else { r.dtype.to_owned() };
        table.push([
            r.index.to_string(),
            crate::output::printable(r.name),
            r.shard.to_string(),
            dtype,
            format!("[{}]", dims.join(", ")),
            r.byte_length.to_string(),
            r.quant.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    out.push_str(&crate::output::table(&table));
    Ok(out)
}
