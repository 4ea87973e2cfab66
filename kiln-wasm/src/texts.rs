//! The rule ids and one-line texts a module can report, and no others.
//!
//! `Rule::id` and `Rule::description` called at run time would link every
//! rule's strings into the module, those of rules it can never report (a
//! manifest's in the open-and-validate module, an encoder's anywhere). The
//! table here is built at compile time from `Rule::ALL`, keeping the strings
//! of the rules whose check order this build's features run (see
//! [`reportable`]); the linker drops the rest. A rule outside the table is
//! reported by its code with an empty id and text (JavaScript then names the
//! code alone): the node tests assert that every verdict they see has both.

use kiln_nostd::{Rule, Step};

/// How many rules the core defines.
const RULES: usize = Rule::ALL.len();

/// True when this build can report `rule`: the directory's, a Frozen
/// value's and a model record's checks are in every module; a manifest's and
/// a shard's with the `remote` feature; the checks of a type text with
/// `frozen`. The writers' and encoders' rules are never reported (the module
/// writes nothing).
pub const fn reportable(rule: Rule) -> bool {
    match rule.step() {
        Step::Directory(..) | Step::Frozen(_) | Step::Record => true,
        Step::Manifest(_) | Step::Shard(_) => cfg!(feature = "remote"),
        Step::Caller => {
            cfg!(feature = "frozen")
                && matches!(rule, Rule::TypeTextSyntax | Rule::DuplicateField | Rule::TypeDepth | Rule::SchemaCapacity)
        }
        // A check order added later: its texts stay until it is placed here.
        _ => true,
    }
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

/// `rule`'s id and description, or `("", "")` when this build cannot report it.
pub fn of(rule: Rule) -> (&'static str, &'static str) {
    // `Rule` is non-exhaustive: its position in `ALL`, not an `as` cast.
    Rule::ALL.iter().position(|r| *r == rule).and_then(|i| TEXTS.get(i)).copied().unwrap_or(("", ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reportable_rules_keep_the_cores_texts() {
        for rule in Rule::ALL {
            let want = if reportable(rule) { (rule.id(), rule.description()) } else { ("", "") };
            assert_eq!(of(rule), want, "{rule:?}");
        }
        // Every build reports the directory's, a Frozen value's and a model record's rules.
        for rule in [Rule::NonzeroGap, Rule::SchemaHash, Rule::PayloadDigest, Rule::DigestTableLength] {
            assert!(reportable(rule), "{rule:?}");
        }
        // No build reports a writer's or an encoder's.
        for rule in [Rule::OutputTooSmall, Rule::IntRange, Rule::TensorsWrite, Rule::PrefixBufferTooSmall] {
            assert!(!reportable(rule), "{rule:?}");
        }
        assert_eq!(reportable(Rule::ShardMissing), cfg!(feature = "remote"));
        assert_eq!(reportable(Rule::TypeTextSyntax), cfg!(feature = "frozen"));
    }
}
