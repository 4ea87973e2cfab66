//! Random Frozen types for the property tests (`frozen_props`,
//! `frozen_by_schema`): the type tree, its canonical text (struct fields
//! are `f0`, `f1`, ...) and the strategy, so the shapes both files draw
//! from are one.

use std::fmt;

use kiln_nostd::frozen::Kind;
use proptest::prelude::*;

/// A Frozen type.
#[derive(Clone, Debug)]
pub enum T {
    Scalar(Kind),
    List(Box<T>),
    Opt(Box<T>),
    Dict(Box<T>),
    Struct(Vec<T>),
}

impl fmt::Display for T {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            T::Scalar(k) => f.write_str(k.name()),
            T::List(e) => write!(f, "list<{e}>"),
            T::Opt(e) => write!(f, "opt<{e}>"),
            T::Dict(e) => write!(f, "dict<str,{e}>"),
            T::Struct(fields) => {
                f.write_str("struct{")?;
                for (i, t) in fields.iter().enumerate() {
                    write!(f, "f{i}:{t},")?;
                }
                f.write_str("}")
            }
        }
    }
}

/// Types up to five containers deep with any scalar at the leaves.
pub fn types() -> impl Strategy<Value = T> {
    let leaf = proptest::sample::select(Kind::scalars()).prop_map(T::Scalar);
    leaf.prop_recursive(5, 40, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(|t| T::List(Box::new(t))),
            inner.clone().prop_map(|t| T::Opt(Box::new(t))),
            inner.clone().prop_map(|t| T::Dict(Box::new(t))),
            prop::collection::vec(inner, 0..4).prop_map(T::Struct),
        ]
    })
}

/// The bytes of the spec's small example block (one f32 vector).
pub fn f32_block() -> Vec<u8> {
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector.kiln")).to_vec()
}
