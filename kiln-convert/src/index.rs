//! A Hugging Face index (`model.safetensors.index.json`):
//! `{"metadata": {"total_size": N, ...}, "weight_map": {tensor: shard file}}`.
//!
//! The index is read twice as a stream (a 60 MB index of 500,000 names is
//! never held: a buffered reader, one entry's two strings at a time). The
//! first pass ([`scan`]) checks every shard name (a plain file name in the
//! index's folder) and collects the distinct ones before any shard is
//! opened; the second ([`check`]), once the shards are read, checks each
//! entry against the shards' tensors: a tensor the index places in a shard
//! that lacks it, a shard tensor the index does not name, a tensor in two
//! shards and a `total_size` other than the shards' payload bytes are errors
//! naming the tensor and the shards.

use std::collections::BTreeSet;
use std::fmt;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use anyhow::{anyhow, bail};
use serde::de::{self, DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, Visitor};

use super::error::io_fail;
use super::model::Model;
use crate::paths::plain_file_name;

/// What the first pass over an index found.
#[derive(Debug, Default)]
pub struct IndexScan {
    /// The distinct shard file names, sorted by bytes (the input shard order).
    pub shards: Vec<String>,
    /// `metadata.total_size`, when the index has one.
    pub total_size: Option<u64>,
    /// The `weight_map` entries.
    pub entries: u64,
}

/// What a pass does with the index's parts.
trait Handler {
    /// One `weight_map` entry.
    fn entry(&mut self, tensor: String, shard: String) -> Result<(), String>;
    /// `metadata.total_size`.
    fn total_size(&mut self, n: u64);
}

/// Opens the index for one streaming pass (a regular file, not mapped).
fn reader(path: &Path) -> anyhow::Result<BufReader<File>> {
    let file = crate::platform::open_input(path).map_err(io_fail(format!("cannot read {}", path.display())))?;
    let meta = file.metadata().map_err(io_fail(format!("cannot read {}", path.display())))?;
    if !meta.is_file() {
        return Err(super::error::Usage(format!(
            "{} is {}; an index must be a regular file",
            path.display(),
            crate::platform::kind_of(&meta)
        ))
        .into());
    }
    Ok(BufReader::with_capacity(1 << 16, file))
}

/// One streaming pass over the index with `h`.
fn pass(path: &Path, h: &mut dyn Handler) -> anyhow::Result<()> {
    let mut de = serde_json::Deserializer::from_reader(reader(path)?);
    let mut seen_map = false;
    let done = de.deserialize_map(Top { h, seen_map: &mut seen_map }).and_then(|()| de.end());
    if let Err(e) = done {
        if e.is_io() {
            return Err(io_fail(format!("cannot read {}", path.display()))(e.into()));
        }
        bail!("{}: not a valid Hugging Face index: {e}", path.display());
    }
    if !seen_map {
        bail!("{}: not a Hugging Face index: it has no \"weight_map\" object", path.display());
    }
    Ok(())
}

struct Top<'h> {
    h: &'h mut dyn Handler,
    seen_map: &'h mut bool,
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object with \"metadata\" and \"weight_map\"")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metadata" => map.next_value_seed(MetaSeed(&mut *self.h))?,
                "weight_map" => {
                    map.next_value_seed(WeightMap(&mut *self.h))?;
                    *self.seen_map = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// `metadata`: `total_size` read, the rest skipped.
struct MetaSeed<'h>(&'h mut dyn Handler);

impl<'de> DeserializeSeed<'de> for MetaSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MetaSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "total_size" {
                let n = map.next_value::<TotalSize>()?;
                self.0.total_size(n.0);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// `total_size`: a whole number of bytes (some writers print it as a float).
struct TotalSize(u64);

impl<'de> de::Deserialize<'de> for TotalSize {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TotalSizeVisitor)
    }
}

struct TotalSizeVisitor;

impl Visitor<'_> for TotalSizeVisitor {
    type Value = TotalSize;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a whole number of bytes")
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<TotalSize, E> {
        Ok(TotalSize(n))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<TotalSize, E> {
        u64::try_from(n).map(TotalSize).map_err(|_| E::custom(format!("total_size {n} is negative")))
    }
    fn visit_f64<E: de::Error>(self, x: f64) -> Result<TotalSize, E> {
        // Whole and in range: the conversion is exact (checked by the round trip).
        let n = format!("{x:.0}").parse::<u64>().ok().filter(|&n| n.to_string() == format!("{x:.0}"));
        match n {
            Some(n) if x.fract() == 0.0 => Ok(TotalSize(n)),
            _ => Err(E::custom(format!("total_size {x} is not a whole number of bytes"))),
        }
    }
}

/// `weight_map`: each entry handed over as it is read.
struct WeightMap<'h>(&'h mut dyn Handler);

impl<'de> DeserializeSeed<'de> for WeightMap<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for WeightMap<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of tensor name -> shard file name")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(tensor) = map.next_key::<String>()? {
            let shard = map.next_value::<String>()?;
            self.0.entry(tensor, shard).map_err(de::Error::custom)?;
        }
        Ok(())
    }
}

/// The first pass: the shard names, each checked.
struct Scanner {
    shards: BTreeSet<String>,
    total_size: Option<u64>,
    entries: u64,
}

impl Handler for Scanner {
    fn entry(&mut self, tensor: String, shard: String) -> Result<(), String> {
        plain_file_name(&shard)
            .map_err(|why| format!("tensor {tensor:?}: shard {why}; a shard must be a file in the index's folder"))?;
        self.entries = self.entries.saturating_add(1);
        if self.entries > u64::from(kiln_nostd::directory::DEFAULT_CAP) {
            return Err(format!("more than {} weight_map entries (the count cap)", kiln_nostd::directory::DEFAULT_CAP));
        }
        if !self.shards.contains(&shard) {
            self.shards.insert(shard);
        }
        Ok(())
    }
    fn total_size(&mut self, n: u64) {
        self.total_size = Some(n);
    }
}

/// The first pass over the index at `path`: its shard names, every one a
/// plain file name (checked before any file is opened), and `total_size`.
pub fn scan(path: &Path) -> anyhow::Result<IndexScan> {
    let mut s = Scanner { shards: BTreeSet::new(), total_size: None, entries: 0 };
    pass(path, &mut s)?;
    Ok(IndexScan { shards: s.shards.into_iter().collect(), total_size: s.total_size, entries: s.entries })
}

/// The second pass: every entry against the shards' tensors.
struct Checker<'m> {
    model: &'m Model,
    shards: &'m [String],
    /// Tensor indices sorted by name.
    order: Vec<usize>,
    /// Which tensors an entry named.
    seen: Vec<bool>,
}

impl Checker<'_> {
    fn name(&self, i: usize) -> &str {
        self.model.tensors.get(i).map_or("", |t| &*t.name)
    }
    fn shard_name(&self, i: usize) -> &str {
        self.shards.get(i).map_or("?", String::as_str)
    }
}

impl Handler for Checker<'_> {
    fn entry(&mut self, tensor: String, shard: String) -> Result<(), String> {
        let found = self.order.binary_search_by(|&i| self.name(i).cmp(tensor.as_str())).ok();
        let Some(i) = found.and_then(|k| self.order.get(k).copied()) else {
            return Err(format!(
                "the weight_map puts tensor {tensor:?} in {shard}, which lacks it (no shard holds it)"
            ));
        };
        let actual = self.model.tensors.get(i).map_or(0, |t| t.shard);
        if self.shard_name(actual) != shard {
            return Err(format!(
                "the weight_map puts tensor {tensor:?} in {shard}, which lacks it; it is in {}",
                self.shard_name(actual)
            ));
        }
        match self.seen.get_mut(i) {
            Some(seen) if *seen => Err(format!("the weight_map names tensor {tensor:?} twice")),
            Some(seen) => {
                *seen = true;
                Ok(())
            }
            None => Err(format!("tensor {tensor:?}: no such tensor")),
        }
    }
    fn total_size(&mut self, _: u64) {}
}

/// Tensor indices sorted by name; a name in two shards is an error naming both.
fn sorted_names(path: &Path, model: &Model, shards: &[String]) -> anyhow::Result<Vec<usize>> {
    let mut order: Vec<usize> = (0..model.tensors.len()).collect();
    let name = |i: usize| model.tensors.get(i).map_or("", |t| &*t.name);
    order.sort_unstable_by(|&a, &b| name(a).cmp(name(b)).then(a.cmp(&b)));
    for pair in order.windows(2) {
        if let [a, b] = *pair {
            if name(a) == name(b) {
                let shard =
                    |i: usize| model.tensors.get(i).and_then(|t| shards.get(t.shard)).map_or("?", String::as_str);
                bail!("{}: tensor {:?} is in two shards: {} and {}", path.display(), name(a), shard(a), shard(b));
            }
        }
    }
    Ok(order)
}

/// Checks the index at `path` against the shards read into `model`
/// (`model.tensors[i].shard` indexes `scan.shards`); a missing
/// `total_size` is a note.
pub fn check(path: &Path, scan: &IndexScan, model: &mut Model) -> anyhow::Result<()> {
    let order = sorted_names(path, model, &scan.shards)?;
    let mut c = Checker { model, shards: &scan.shards, seen: vec![false; order.len()], order };
    pass(path, &mut c)?;
    let unnamed = c.seen.iter().position(|&s| !s);
    if let Some(i) = unnamed {
        let t = model.tensors.get(i).ok_or_else(|| anyhow!("tensor {i} is missing"))?;
        bail!(
            "{}: shard {} holds tensor {:?}, which the index's weight_map does not name",
            path.display(),
            scan.shards.get(t.shard).map_or("?", String::as_str),
            t.name
        );
    }
    let payload = model.payload_bytes();
    match scan.total_size {
        Some(n) if n != payload => {
            bail!("{}: metadata.total_size is {n}, but the shards' tensors hold {payload} bytes", path.display())
        }
        Some(_) => {}
        None => model.note(format!("{}: no metadata.total_size to check the shards against", path.display())),
    }
    Ok(())
}
