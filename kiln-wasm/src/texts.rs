//! The rule ids and one-line texts a module can report, and no others.
//!
//! `Rule::id` and `Rule::description` called at run time would link every
//! rule's strings into the module, those of rules it can never report (a
//! manifest's in the open-and-validate module, an encoder's anywhere). The
//! tables here are built at compile time from the core's and the model
//! crate's `Rule::ALL`, keeping the strings of the rules whose check order
//! this build's features run (see [`reportable`], [`reportable_model`]); the
//! linker drops the rest. A rule outside the tables is reported by its code
//! with an empty id and text (JavaScript then names the code alone): the node
//! tests assert that every verdict they see has both.

use kiln_model::{AnyRule, Rule as ModelRule, Step as ModelStep};
use kiln_nostd::{error::Step, Rule};

/// How many rules the core defines.
const RULES: usize = Rule::ALL.len();
/// How many rules the model crate defines.
const MODEL_RULES: usize = ModelRule::ALL.len();

/// True when this build can report `rule`: the directory's, a Frozen
/// value's and a model record's checks are in every module; the checks of a
/// type text with `frozen`. The writers' and encoders' rules are never
/// reported (the module writes nothing).
pub const fn reportable(rule: Rule) -> bool {
    match rule.step() {
        Step::Directory(..) | Step::Frozen(_) | Step::Record => true,
        Step::Caller => {
            cfg!(feature = "frozen")
                && matches!(rule, Rule::TypeTextSyntax | Rule::DuplicateField | Rule::TypeDepth | Rule::SchemaCapacity)
        }
        // A check order added later: its texts stay until it is placed here.
        _ => true,
    }
}

/// True when this build can report the model crate's `rule`: a record's
/// fields (signed, shard) in every module; a manifest's and a shard's
/// checks against it with the `remote` feature.
pub const fn reportable_model(rule: ModelRule) -> bool {
    cfg!(feature = "remote") || !matches!(rule.step(), ModelStep::Manifest(_) | ModelStep::Shard(_))
}

/// `(id, description)` of each rule of `Rule::ALL`, in its order; `("", "")`
/// for a rule this build cannot report.
// Compile-time indexing: `i < RULES` is the loop's bound, and a bound broken
// here would stop the build, not the module.
#[allow(clippy::indexing_slicing)]
const TEXTS: [(&str, &str); RULES] = {
    let mut out = [("", ""); RULES];
    let mut i = 0;
    while i < RULES {
        let rule = Rule::ALL[i];
        if reportable(rule) {
            out[i] = (rule.id(), rule.description());
        }
        i += 1;
    }
    out
};

/// The same for the model crate's rules.
#[allow(clippy::indexing_slicing)]
const MODEL_TEXTS: [(&str, &str); MODEL_RULES] = {
    let mut out = [("", ""); MODEL_RULES];
    let mut i = 0;
    while i < MODEL_RULES {
        let rule = ModelRule::ALL[i];
        if reportable_model(rule) {
            out[i] = (rule.id(), rule.description());
        }
        i += 1;
    }
    out
};

/// `rule`'s id and description, or `("", "")` when this build cannot report it.
pub fn of(rule: AnyRule) -> (&'static str, &'static str) {
    // The rules are non-exhaustive: their position in `ALL`, not an `as` cast.
    match rule {
        AnyRule::Core(rule) => Rule::ALL.iter().position(|r| *r == rule).and_then(|i| TEXTS.get(i)),
        AnyRule::Model(rule) => ModelRule::ALL.iter().position(|r| *r == rule).and_then(|i| MODEL_TEXTS.get(i)),
    }
    .copied()
    .unwrap_or(("", ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reportable_rules_keep_the_cores_texts() {
        for rule in Rule::ALL {
            let want = if reportable(rule) { (rule.id(), rule.description()) } else { ("", "") };
            assert_eq!(of(AnyRule::Core(rule)), want, "{rule:?}");
        }
        for rule in ModelRule::ALL {
            let want = if reportable_model(rule) { (rule.id(), rule.description()) } else { ("", "") };
            assert_eq!(of(AnyRule::Model(rule)), want, "{rule:?}");
        }
        // Every build reports the directory's, a Frozen value's and a model record's rules.
        for rule in [Rule::NonzeroGap, Rule::SchemaHash, Rule::PayloadDigest, Rule::DigestTableLength] {
            assert!(reportable(rule), "{rule:?}");
        }
        // No build reports a writer's or an encoder's.
        for rule in [Rule::OutputTooSmall, Rule::IntRange, Rule::TensorsWrite, Rule::PrefixBufferTooSmall] {
            assert!(!reportable(rule), "{rule:?}");
        }
        assert_eq!(reportable_model(ModelRule::ShardMissing), cfg!(feature = "remote"));
        assert!(reportable_model(ModelRule::ShardPosition) && reportable_model(ModelRule::NotSigned));
        assert_eq!(reportable(Rule::TypeTextSyntax), cfg!(feature = "frozen"));
    }
}
