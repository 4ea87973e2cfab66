//! The front door: [`open`] takes whatever `kiln convert` and the writers
//! produce (a plain directory block, a model file, a signed model, a
//! manifest), tells them apart by content and checks the one it found.

use kiln_nostd::{Directory, Parser};

use crate::{Kind, Manifest, Model, Result};

/// How [`open`] checks: the caps, the name scratch and hash seed, and
/// whether payloads are hashed or a signature is required. One value for
/// every form [`open`] accepts; the defaults are those of
/// [`Directory::parse`], [`Model::parse`] and [`Manifest::parse`].
///
/// By default nothing is hashed: a view over a buffer already in memory
/// trusts its payload bytes until asked (`docs/verification.md`, ruling 6).
/// `verify_digests` (feature `sha2`) turns step 9d on; a required
/// signature (`trust`, feature `ed25519`) implies it.
#[derive(Debug)]
pub struct Options<'s> {
    /// The caps, name scratch and hash seed: one [`Parser`], declared once.
    parser: Parser<'s>,
    verify_digests: bool,
    #[cfg(feature = "ed25519")]
    trust: Option<crate::Trust<'s>>,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options::new()
    }
}

impl<'s> From<Parser<'s>> for Options<'s> {
    fn from(parser: Parser<'s>) -> Self {
        Options::new().parser(parser)
    }
}

impl<'s> Options<'s> {
    /// Default caps, no scratch, seed 0, no hashing, no signature required.
    #[must_use]
    pub const fn new() -> Self {
        Options {
            parser: Parser::new(),
            verify_digests: false,
            #[cfg(feature = "ed25519")]
            trust: None,
        }
    }

    /// Checks with `parser`'s caps, name scratch and hash seed (for the
    /// block, and the caps for a model file's or manifest's fields). The
    /// scratch wants at least [`kiln_nostd::directory::scratch_len`] words
    /// for a block's tensor count, or [`Manifest::scratch_len`] for a
    /// manifest's (less: every pair is compared).
    ///
    /// ```
    /// use kiln_model::{open, Options};
    /// use kiln_nostd::{Limits, Parser};
    /// # let file = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector.model.kiln"));
    /// let mut names = [0u32; 64];
    /// let parser = Parser::new().limits(Limits::DEFAULT.with_count_cap(1024)).scratch(&mut names);
    /// assert_eq!(open(&file, &mut Options::new().parser(parser))?.name(), "plain");
    /// # Ok::<(), kiln_model::Error>(())
    /// ```
    #[must_use]
    pub fn parser(mut self, parser: Parser<'s>) -> Self {
        self.parser = parser;
        self
    }

    /// Hashes every payload of a model file with digests and compares it
    /// with its digest (step 9d, as [`Model::parse_verified`]). A plain
    /// block or plain model file has no digests: nothing to compare.
    #[cfg(feature = "sha2")]
    #[must_use]
    pub const fn verify_digests(mut self, on: bool) -> Self {
        self.verify_digests = on;
        self
    }

    /// Requires a signature `trust` accepts (as [`Model::parse_trusted`] and
    /// [`Manifest::parse_trusted`]): anything unsigned is
    /// [`NotSigned`](crate::Rule::NotSigned), and every digest is checked.
    #[cfg(feature = "ed25519")]
    #[must_use]
    pub fn trust(mut self, trust: crate::Trust<'s>) -> Self {
        self.trust = Some(trust);
        self
    }

    /// Whether payloads are hashed: asked for, or implied by a required signature.
    pub fn hashes(&self) -> bool {
        #[cfg(feature = "ed25519")]
        if self.trust.is_some() {
            return true;
        }
        self.verify_digests
    }
}

/// What [`open`] found, checked.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Opened<'a> {
    /// A plain tensor directory block (`kiln convert --to tensors`, [`kiln_nostd::Writer`]).
    Directory(Directory<'a>),
    /// A model file: a plain, digests, shard or signed record
    /// ([`Model::kind`] says which).
    Model(Model<'a>),
    /// A sharded model's manifest: the shards are files of their own
    /// (`check_shard`, feature `sha2`).
    Manifest(Manifest<'a>),
}

impl<'a> Opened<'a> {
    /// The record type, `None` for a plain directory block.
    pub fn kind(&self) -> Option<Kind> {
        match self {
            Opened::Directory(_) => None,
            Opened::Model(m) => Some(m.kind()),
            Opened::Manifest(_) => Some(Kind::Manifest),
        }
    }

    /// The tensor directory, when the input holds one (not a manifest).
    pub fn directory(&self) -> Option<Directory<'a>> {
        match self {
            Opened::Directory(d) => Some(*d),
            Opened::Model(m) => Some(m.directory()),
            Opened::Manifest(_) => None,
        }
    }

    /// A short name of what was found: `directory`, or the record type's
    /// name (`plain`, `digests`, `shard`, `signed`, `manifest`).
    pub fn name(&self) -> &'static str {
        self.kind().map_or("directory", Kind::name)
    }
}

/// Opens `bytes` as whatever Kiln form it holds, told apart by content: a
/// model file or manifest by its frame's schema hash ([`Kind::of`]), anything
/// else as a plain directory block. Each form gets its own reader's verdict
/// ([`Directory::parse`], [`Model::parse`] or, hashing, `Model::parse_verified`,
/// [`Manifest::parse_with`], or with a required signature the
/// `parse_trusted` forms), so a rejected input reports the same code, offset
/// and rule as that reader.
///
/// ```
/// use kiln_model::{open, Opened, Options};
/// # let file = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector.model.kiln"));
/// # let block = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector-named.kiln"));
/// // What `kiln convert` writes: a model file ...
/// let found = open(&file, &mut Options::new())?;
/// assert!(matches!(found, Opened::Model(m) if m.metadata().get("author") == Some("kiln")));
/// assert_eq!(found.name(), "plain");
/// // ... or a plain block: the same call.
/// let found = open(&block, &mut Options::new())?;
/// assert_eq!(found.directory().and_then(|d| d.find("w")).map(|w| w.shape().len()), Some(1));
/// # Ok::<(), kiln_model::Error>(())
/// ```
pub fn open<'a>(bytes: &'a [u8], options: &mut Options<'_>) -> Result<Opened<'a>> {
    let kind = Kind::of(bytes);
    #[cfg(feature = "ed25519")]
    if let Some(trust) = options.trust {
        return Ok(match kind {
            Some(Kind::Manifest) => {
                let (limits, scratch, _) = options.parser.reborrow().into_parts();
                Opened::Manifest(Manifest::parse_trusted(bytes, &limits, scratch, &trust)?)
            }
            // A plain block or any unsigned record: the signed reader's NotSigned.
            _ => Opened::Model(Model::parse_trusted_with(bytes, &trust, options.parser.reborrow())?),
        });
    }
    Ok(match kind {
        None => Opened::Directory(options.parser.reborrow().parse(bytes)?),
        Some(Kind::Manifest) => {
            let (limits, scratch, _) = options.parser.reborrow().into_parts();
            Opened::Manifest(Manifest::parse_with(bytes, &limits, scratch)?)
        }
        Some(_) => Opened::Model(model_file(bytes, options)?),
    })
}

fn model_file<'a>(bytes: &'a [u8], options: &mut Options<'_>) -> Result<Model<'a>> {
    #[cfg(feature = "sha2")]
    if options.verify_digests {
        return Model::parse_verified_with(bytes, options.parser.reborrow());
    }
    Model::parse_with(bytes, options.parser.reborrow())
}
