//! The pairwise check-order matrix (spec/check-order-matrix.json) through the
//! Rust core.
//!
//! `spec/reference/gen_check_order.py` parses the rule tables of
//! spec/kiln-v2.md (section 14.1 and 14.2) and plants two faults into one
//! valid block for every pair of rules it can: a fault of a later step in an
//! earlier descriptor than a fault of an earlier step, two faults of one step
//! in two descriptors, two faults in one descriptor, and the Frozen orders
//! (frame, schema hash, values in encoding order, TRAILING). Each case holds
//! the verdict the table orders first, already checked with the Python
//! reference. Here every case must give the same code, offset and rule
//! (`Rule::id`, the variant's name) through the same APIs as the goldens:
//! a standalone directory through `Parser` with and without name scratch,
//! anything else through `frozen::validate`.

use kiln_nostd::frozen::{self, Schema};
use kiln_nostd::{wire::Header, Error, Limits, Parser};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// One case of the matrix.
#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    framed: bool,
    hex: String,
    /// The error code; the matrix holds rejects only.
    expect: String,
    /// The absolute offset of the winning fault.
    offset: usize,
    /// The reference's rule id (spec/reference/kiln_ref.py).
    rule: String,
    /// The `kiln_nostd::Rule` variant for it, from the spec's table.
    rust_rule: String,
    /// The input: both faults and the tensors.
    note: String,
    relation: String,
    /// Steps of the winning (a) and the losing (b) fault (1..12, 8a..8d; F1..F4 for Frozen).
    a_step: String,
    b_step: String,
}

#[derive(Deserialize)]
struct Skipped {
    reason: String,
}

#[derive(Deserialize)]
struct Matrix {
    cap: u64,
    cases: Vec<Case>,
    skipped: Vec<Skipped>,
}

fn matrix() -> Matrix {
    let path = kiln_conformance::repo_root().join("spec/check-order-matrix.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let m: Matrix = serde_json::from_str(&text).expect("parse the matrix");
    assert_eq!(m.cap, 16_777_216, "the matrix uses the spec's default cap");
    m
}

fn is_directory(c: &Case) -> bool {
    c.ty == "tensors" && !c.framed
}

/// Every way the case is checked: (API, result).
fn run(c: &Case) -> Vec<(&'static str, Result<(), Error>)> {
    let buf = hex::decode(&c.hex).expect("hex");
    if is_directory(c) {
        // Scratch sized from the header's count (bounded: a count-cap case claims 16 million).
        let count = Header::peek_count(&buf).unwrap_or(0).min(1 << 16);
        let mut scratch = vec![0u32; kiln_nostd::directory::scratch_len(count)];
        vec![
            ("Parser", Parser::new().parse(&buf).map(|_| ())),
            ("Parser+scratch", Parser::new().scratch(&mut scratch).parse(&buf).map(|_| ())),
        ]
    } else {
        let schema: Schema<'_> = Schema::parse(&c.ty).unwrap_or_else(|e| panic!("{}: type {}: {e}", c.name, c.ty));
        vec![("frozen::validate", frozen::validate(&buf, &schema, &Limits::DEFAULT, c.framed))]
    }
}

/// Rules whose offset the Rust core takes from another field or byte than
/// the reference (spec/kiln-v2.md section 15, "Where the Rust core reports
/// another offset"). For these the code and rule must still agree; every
/// other rule must agree on the offset too, so a new divergence fails.
const OFFSET_CHOICES: [&str; 9] = [
    "HeaderTruncated",    // the buffer's end, not the block start
    "DirectoryTruncated", // the buffer's end, not tensor_count
    "BlockTruncated",     // the buffer's end, not payload_bytes
    "HeapHole",           // the first uncovered heap byte, not name_bytes
    "OpaqueBlockSize",    // block_size, not byte_length
    "NameWithoutFlag",    // name_off, not name_len
    "LayoutOnDenseDtype", // layout_off, not layout_len
    "QuantFieldsOnPlain", // quant_scheme, not the stray field
    "QuantAxis",          // quant_axis for rank 0, not rank
];

/// How a result differs from the case: (kind, pattern, detail), or None.
/// The pattern (expected rule, got rule) groups disagreements of one cause.
fn disagreement(c: &Case, got: &Result<(), Error>) -> Option<(&'static str, String, String)> {
    let want = format!("{} {} {} ({})", c.expect, c.offset, c.rust_rule, c.rule);
    let Err(e) = got else {
        return Some(("accepted", format!("{} -> accept", c.rule), format!("expected {want}, accepted")));
    };
    let (code, offset, rule) = (e.code().as_str(), e.offset(), e.rule().id());
    let offset_ok = offset == c.offset || OFFSET_CHOICES.contains(&rule);
    if (code, rule) == (c.expect.as_str(), c.rust_rule.as_str()) && offset_ok {
        return None;
    }
    // The code is the contract between implementations; rule and offset are
    // diagnostics, but the matrix pins them too (spec sections 14 and 15).
    let kind = match (code == c.expect, rule == c.rust_rule) {
        (false, _) => "code",
        (true, false) => "rule",
        (true, true) => "offset",
    };
    let pattern = format!("{} {} ({}) -> {code} {rule}", c.expect, c.rust_rule, c.rule);
    Some((kind, pattern, format!("expected {want}, got {code} {offset} {rule}")))
}

#[test]
fn every_matrix_case_gives_the_table_verdict() {
    let m = matrix();
    let mut failures: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
    let mut checked = 0;
    for c in &m.cases {
        let buf_len = c.hex.len() / 2;
        for (api, got) in run(c) {
            if let Err(e) = &got {
                assert!(e.offset() <= buf_len, "{}: {api}: offset {} past the buffer", c.name, e.offset());
            }
            if let Some((kind, pattern, what)) = disagreement(c, &got) {
                let line = format!("{api}: {}: {what}; {}", c.name, c.note);
                failures.entry(kind).or_default().push((pattern, line));
            }
            checked += 1;
        }
    }
    assert!(checked >= m.cases.len());
    if failures.is_empty() {
        return;
    }
    // Code disagreements first (the contract), then rule, then offset only;
    // a per-rule tally first, so a pattern is visible before the list.
    let mut report = String::new();
    let total: usize = failures.values().map(Vec::len).sum();
    report.push_str(&format!("{total} disagreements with the check-order matrix:\n"));
    for kind in ["accepted", "code", "rule", "offset"] {
        let Some(list) = failures.get(kind) else { continue };
        let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
        for (pattern, _) in list {
            *tally.entry(pattern).or_default() += 1;
        }
        report.push_str(&format!("\n== {kind} differs: {} ({} patterns)\n", list.len(), tally.len()));
        for (pattern, n) in &tally {
            report.push_str(&format!("  {n:>4} x {pattern}\n"));
        }
        for (_, line) in list {
            report.push_str(&format!("  {line}\n"));
        }
    }
    panic!("{report}");
}

/// Directory steps in check order.
const STEPS: [&str; 15] = ["1", "2", "3", "4", "5", "6", "7", "8a", "8b", "8c", "8d", "9", "10", "11", "12"];

/// Step pairs (winner, loser) no block can hold, each for a reason the
/// generator records: a truncation removes the later fault, or one rule
/// needs tensor_count 0 and the other a descriptor or a name heap.
const INFEASIBLE: [(&str, &str); 9] = [
    ("5", "7"),   // cutting the directory short removes the padding after it
    ("5", "8b"),  // the directory must hold something to be cut short
    ("5", "12"),  // the buffer cannot end early and continue past the block
    ("7", "8b"),  // padding needs a heap, an empty directory has none
    ("8a", "8b"), // a descriptor byte needs a descriptor
    ("8b", "8c"),
    ("8b", "8d"),
    ("8b", "9"),
    ("8b", "11"),
];

/// Steps with one plantable rule that is not per descriptor: no pair inside them.
const SINGLE: [&str; 6] = ["4", "5", "7", "8b", "8d", "12"];

#[test]
fn the_matrix_is_not_trivial() {
    let m = matrix();
    let dir: Vec<&Case> = m.cases.iter().filter(|c| is_directory(c)).collect();
    assert!(dir.len() >= 2000, "{} directory cases", dir.len());
    assert!(m.cases.len() - dir.len() >= 300, "{} Frozen cases", m.cases.len() - dir.len());
    assert!(!m.skipped.is_empty() && m.skipped.iter().all(|s| !s.reason.is_empty()), "skips carry reasons");

    let mut per_pair: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for c in &dir {
        *per_pair.entry((c.a_step.as_str(), c.b_step.as_str())).or_default() += 1;
    }
    // Every step pair that can be planted at all is, in the right direction
    // (the winner's step is never after the loser's); the descriptor walks
    // (8c, 9, 10, 11) with many cases each.
    let walks = ["8c", "9", "10", "11"];
    for (i, a) in STEPS.iter().enumerate() {
        for b in &STEPS[i..] {
            let n = per_pair.get(&(*a, *b)).copied().unwrap_or(0);
            if INFEASIBLE.contains(&(*a, *b)) || (a == b && SINGLE.contains(a)) {
                assert_eq!(n, 0, "step pair {a} > {b} was thought infeasible but has {n} cases");
                continue;
            }
            let min = if walks.contains(a) && walks.contains(b) { 10 } else { 1 };
            assert!(n >= min, "step pair {a} before {b}: {n} cases, want at least {min}");
        }
    }
    let order = |s: &str| STEPS.iter().position(|x| *x == s).unwrap_or_else(|| panic!("unknown step {s}"));
    for c in &dir {
        assert!(order(&c.a_step) <= order(&c.b_step), "{}: the winner's step is after the loser's", c.name);
    }

    // Every directory rule of the Rust core wins somewhere (DirectorySizeOverflow
    // cannot happen with u32 fields; TrailingBytes, the last step, never wins a
    // pair, it only loses: b_step 12 above).
    let winners: BTreeSet<&str> = dir.iter().map(|c| c.rust_rule.as_str()).collect();
    for rule in [
        "HeaderTruncated",
        "DirectoryMagic",
        "DirectoryVersion",
        "UnknownFlag",
        "LittleEndianFlagClear",
        "HeaderReserved",
        "TensorCountCap",
        "NameBytesCap",
        "DirectoryBytesMismatch",
        "DirectoryTruncated",
        "PayloadSizeOverflow",
        "BlockTruncated",
        "NonzeroPadding",
        "DescriptorReserved",
        "NameFlagOnEmpty",
        "NameWithoutFlag",
        "MissingName",
        "LayoutFieldMismatch",
        "HeapOrder",
        "HeapOverrun",
        "HeapHole",
        "NameUtf8",
        "LayoutUtf8",
        "DuplicateName",
        "UnknownDtype",
        "RankTooLarge",
        "ShapeTail",
        "ShapeOverflow",
        "RangeOverflow",
        "RangePastPayload",
        "LengthMismatch",
        "LayoutOnDenseDtype",
        "OpaqueWithoutLayout",
        "OpaqueBlockSize",
        "RangeOverlap",
        "NonCanonicalOffset",
        "NonCanonicalPayloadBytes",
        "NonzeroGap",
        "BoolByte",
        "PackedHighNibble",
        "UnknownQuantScheme",
        "QuantFieldsOnPlain",
        "QuantAxis",
        "ScaleIndex",
        "QuantChain",
        "ScaleCount",
        "OuterIndex",
        "OuterTensor",
    ] {
        assert!(winners.contains(rule), "no case where {rule} is the verdict");
    }

    // The relations the generator builds.
    let count = |rel: &str| m.cases.iter().filter(|c| c.relation == rel).count();
    assert!(count("cross-step") >= 1500, "cross-step {}", count("cross-step"));
    assert!(count("same-step") >= 300, "same-step {}", count("same-step"));
    assert!(count("same-descriptor") >= 150, "same-descriptor {}", count("same-descriptor"));
    for rel in ["frozen-frame", "frozen-frame-value", "frozen-position", "frozen-unit", "frozen-value-trailing"] {
        assert!(count(rel) >= 10, "{rel}: {}", count(rel));
    }

    // A step-9 LIMIT in a later descriptor beats tensors stored out of order
    // (not intersecting) in earlier ones: step 9 "overlap" means intersect.
    for rule in ["shape_overflow", "range_overflow", "byte_size_overflow"] {
        let n = dir
            .iter()
            .filter(|c| c.rule == rule && c.b_step == "10" && c.name.contains("offset_not_canonical.swap"))
            .count();
        assert!(n >= 1, "no {rule} case over out-of-order ranges");
    }
    let pinned = dir.iter().find(|c| c.name == "pinned/out-of-order-ranges-then-shape-overflow").expect("pinned case");
    assert_eq!(
        (pinned.expect.as_str(), pinned.offset, pinned.rust_rule.as_str()),
        ("LIMIT", 64 + 2 * 128 + 48, "ShapeOverflow")
    );
}

#[test]
fn the_committed_matrix_equals_a_fresh_regeneration() {
    let root = kiln_conformance::repo_root();
    let out = std::process::Command::new("python3")
        .arg(root.join("spec/reference/gen_check_order.py"))
        .arg("--check")
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// The step of a row of a spec table (`1`, `8c`, `F3`, `M2`), as the core
/// and the model crate state it.
fn step_of(text: &str, order: &str) -> kiln_model::Step {
    use kiln_model::Step;
    use kiln_nostd::error::Step as CoreStep;
    let (letters, digits): (String, String) = text.chars().partition(|c| c.is_ascii_alphabetic());
    let n: u8 = digits.parse().unwrap_or_else(|_| panic!("step {text}"));
    match (order, letters.as_str()) {
        ("directory", "") => Step::Core(CoreStep::Directory(n, 0)),
        ("directory", sub) => Step::Core(CoreStep::Directory(n, sub.as_bytes()[0])),
        ("frozen", "F") => Step::Core(CoreStep::Frozen(n)),
        ("manifest", "M") => Step::Manifest(n),
        ("shard", "") => Step::Shard(n),
        _ => panic!("step {text} in the {order} table"),
    }
}

/// Rows `(Rust Rule, step)` of the Markdown tables in `text`, from the columns given.
fn table_rows(text: &str, rule_col: usize, step_col: usize) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("|---"))
        .filter_map(|l| {
            let cols: Vec<&str> = l.split('|').map(str::trim).collect();
            let rule = cols.get(rule_col)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((rule.to_string(), cols.get(step_col)?.to_string()))
        })
        .collect()
}

/// `Rule::step` (the rules! tables' step column) is the spec's: every row of
/// the rule tables of spec/kiln-v2.md (section 14) and spec/model-file.md
/// (M1 to M5, opening a shard) gives its Rust rule the step the core or the
/// model crate says, and every rule either places in one of those orders has a row.
#[test]
fn each_rules_step_is_the_spec_tables() {
    use kiln_model::{AnyRule, Step};
    use kiln_nostd::{error::Step as CoreStep, Rule};
    let all: Vec<AnyRule> =
        Rule::ALL.into_iter().map(AnyRule::from).chain(kiln_model::Rule::ALL.into_iter().map(AnyRule::from)).collect();
    let root = env!("CARGO_MANIFEST_DIR").to_string() + "/../spec/";
    let spec = std::fs::read_to_string(root.clone() + "kiln-v2.md").expect("spec");
    let model = std::fs::read_to_string(root + "model-file.md").expect("model-file");
    let section = |tag: &str| {
        let begin = spec.find(&format!("<!-- rule-table:{tag}:begin -->")).expect("table");
        let end = spec.find(&format!("<!-- rule-table:{tag}:end -->")).expect("table end");
        spec[begin..end].to_string()
    };
    let by_id = |id: &str| all.iter().copied().find(|r| r.id() == id).unwrap_or_else(|| panic!("no Rule {id}"));
    let mut rows = Vec::new();
    for (rule, step) in table_rows(&section("directory"), 2, 3) {
        rows.push((rule, step_of(&step, "directory")));
    }
    for (rule, step) in table_rows(&section("frozen"), 2, 3) {
        rows.push((rule, step_of(&step, "frozen")));
    }
    for (rule, step) in table_rows(&model, 3, 1) {
        if let Some(s) = step.strip_prefix('M') {
            rows.push((rule, step_of(&format!("M{s}"), "manifest")));
        } else if step.len() == 1 && rule.starts_with("Shard") {
            rows.push((rule, step_of(&step, "shard")));
        } else if let Some(sub) = ["3d", "9d", "9s"].into_iter().find(|s| step.starts_with(s)) {
            rows.push((rule, step_of(sub, "directory")));
        }
    }
    assert!(rows.len() >= 100, "{} rows", rows.len());
    let mut seen = BTreeSet::new();
    for (id, step) in &rows {
        let rule = by_id(id);
        seen.insert(rule.id());
        // TRAILING ends both orders: step 12 of a directory, F4 of a Frozen value.
        if rule == Rule::TrailingBytes && *step == Step::Core(CoreStep::Frozen(4)) {
            continue;
        }
        assert_eq!(rule.step(), *step, "{id}: the spec's step");
    }
    for rule in all.iter().copied() {
        let placed = matches!(
            rule.step(),
            Step::Core(CoreStep::Directory(..) | CoreStep::Frozen(_)) | Step::Manifest(_) | Step::Shard(_)
        );
        assert_eq!(placed, seen.contains(rule.id()), "{}: {:?} and a row in the spec's tables", rule.id(), rule.step());
    }
    // Steps compare within one order only.
    assert!(CoreStep::Directory(3, 0).precedes(CoreStep::Directory(3, b'd')));
    assert!(CoreStep::Directory(9, b'd').precedes(CoreStep::Directory(10, 0)));
    // The signature (9s) before the digests (9d): the signed prefix is whole before any payload byte.
    assert!(CoreStep::Directory(9, 0).precedes(CoreStep::Directory(9, b's')));
    assert!(CoreStep::Directory(9, b's').precedes(CoreStep::Directory(9, b'd')));
    assert!(!CoreStep::Directory(10, 0).precedes(CoreStep::Directory(9, b'd')));
    assert!(
        !CoreStep::Frozen(1).precedes(CoreStep::Directory(12, 0))
            && !CoreStep::Directory(1, 0).precedes(CoreStep::Frozen(4))
    );
}
