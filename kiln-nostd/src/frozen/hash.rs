//! The schema hash: FNV-1a 64 over the tokens of the canonical type text,
//! with one 0x00 step after each token.
//!
//! Tokens are `struct{` `list<` `opt<` `dict<` (one token each), field
//! names, `:` `,` `>` `}`, and scalar names. The canonical text is the
//! concatenation of its tokens, so the hash can be taken from the text alone
//! ([`hash_text`], a `const fn`) or from a parsed or static type.

/// FNV-1a 64 offset basis.
pub const FNV_OFFSET: u64 = 14_695_981_039_346_656_037;
/// FNV-1a 64 prime.
pub const FNV_PRIME: u64 = 1_099_511_628_211;

/// An FNV-1a 64 state that mixes whole tokens.
///
/// ```
/// use kiln_nostd::frozen::Fnv;
/// let h = ["struct{", "id", ":", "i64", ",", "batch", ":", "tensors", ",", "}"]
///     .iter()
///     .fold(Fnv::new(), |h, t| h.token(t));
/// assert_eq!(h.finish(), 0xe58aadc7552f0d82);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv::new()
    }
}

impl Fnv {
    /// The offset basis.
    pub const fn new() -> Fnv {
        Fnv(FNV_OFFSET)
    }

    /// Mixes one byte.
    #[must_use]
    pub const fn byte(self, b: u8) -> Fnv {
        Fnv((self.0 ^ widen(b)).wrapping_mul(FNV_PRIME))
    }

    /// Mixes one token: its bytes, then the 0x00 step.
    #[must_use]
    pub const fn token(self, token: &str) -> Fnv {
        let mut h = self;
        let mut rest = token.as_bytes();
        while let [b, tail @ ..] = rest {
            h = h.byte(*b);
            rest = tail;
        }
        h.byte(0)
    }

    /// The hash value.
    pub const fn finish(self) -> u64 {
        self.0
    }
}

const fn widen(b: u8) -> u64 {
    // `u64::from` is not const; this is the lossless widening.
    u64::from_le_bytes([b, 0, 0, 0, 0, 0, 0, 0])
}

const fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The schema hash of canonical type text, in a `const fn`.
///
/// The text is split into the hash tokens: a run of name characters is one
/// token, joined with a directly following `<` or `{` (`list<`, `struct{`);
/// each of `:` `,` `>` `}` is a token of its own. For text that is not
/// canonical the result is still defined but meaningless; parse the text
/// with [`Schema::parse`](super::Schema::parse) to check it.
///
/// ```
/// use kiln_nostd::frozen::hash_text;
/// const H: u64 = hash_text("struct{id:i64,batch:tensors,}");
/// assert_eq!(H, 0xe58aadc7552f0d82);
/// ```
pub const fn hash_text(text: &str) -> u64 {
    let mut h = Fnv::new();
    let mut in_ident = false;
    let mut rest = text.as_bytes();
    while let [b, tail @ ..] = rest {
        let b = *b;
        rest = tail;
        if is_ident(b) {
            h = h.byte(b);
            in_ident = true;
        } else if in_ident && (b == b'<' || b == b'{') {
            h = h.byte(b).byte(0); // the keyword token ends with its bracket
            in_ident = false;
        } else {
            if in_ident {
                h = h.byte(0);
            }
            h = h.byte(b).byte(0);
            in_ident = false;
        }
    }
    if in_ident {
        h = h.byte(0);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Values from spec/reference/kiln_ref.py's schema_hash.
    const REFERENCE: [(&str, u64); 11] = [
        ("struct{id:i64,batch:tensors,}", 0xe58aadc7552f0d82),
        ("bool", 0x585b01b29d333d27),
        ("list<u8>", 0x0dea1ec684f17c06),
        ("list<opt<str>>", 0x3e1360f9cd2af92b),
        ("dict<str,f64>", 0xc1cffe41b7437f7a),
        ("struct{}", 0x805b6a2144bace1e),
        ("opt<opt<i8>>", 0x64e2a8e897f7bbae),
        ("struct{id:i64,name:str,scores:list<f32>,tags:dict<str,i32>,}", 0x7e9cc2c19777b62a),
        ("tensors", 0xbb673a9f6de6bb0f),
        ("int", 0xf5a6b5c57a90415a),
        ("uint", 0x34fa8724f14f4593),
    ];

    #[test]
    fn text_hash_matches_the_reference() {
        for (text, want) in REFERENCE {
            assert_eq!(hash_text(text), want, "{text}");
        }
    }

    #[test]
    fn every_token_takes_a_zero_step() {
        // `bool` alone is the four bytes and one 0x00 step.
        let manual = b"bool".iter().fold(Fnv::new(), |h, &b| h.byte(b)).byte(0);
        assert_eq!(hash_text("bool"), manual.finish());
        // Without the 0x00 steps the spec struct would hash differently.
        let no_steps = b"struct{id:i64,batch:tensors,}".iter().fold(Fnv::new(), |h, &b| h.byte(b));
        assert_ne!(no_steps.finish(), 0xe58aadc7552f0d82);
        // `struct{` is one token: splitting it changes the hash.
        let split = ["struct", "{", "}"].iter().fold(Fnv::new(), |h, t| h.token(t));
        assert_ne!(split.finish(), hash_text("struct{}"));
    }
}
