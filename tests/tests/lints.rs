//! One lint table for the whole tree: every workspace member opts into the
//! root Cargo.toml's `[workspace.lints]`, and every standalone package (the
//! workspace's `exclude` list, which cannot inherit it) carries the same
//! table as its own `[lints]`. The strict block of the library code (no
//! indexing, unchecked arithmetic, unwrap, panic or `as`) is kiln-nostd's,
//! word for word, in every crate that has one.

use std::fs;

/// The lint tables of a manifest whose headers start with `prefix` (e.g.
/// `workspace.lints`), headers given without the prefix, comments and blank
/// lines left out: `["[rust]", "missing_docs = \"warn\"", ...]`.
fn lint_tables(manifest: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line.starts_with(&format!("[{prefix}."));
            if inside {
                out.push(line.replacen(&format!("{prefix}."), "", 1));
            }
        } else if inside && !line.is_empty() && !line.starts_with('#') {
            out.push(line.to_string());
        }
    }
    out
}

/// The folders a root manifest lists under `key` (`members`, `exclude`).
fn folders(manifest: &str, key: &str) -> Vec<String> {
    let line = manifest.lines().find(|l| l.starts_with(&format!("{key} = ["))).expect("key in the root manifest");
    line.split('"').skip(1).step_by(2).map(str::to_string).collect()
}

fn read(path: &str) -> String {
    let path = kiln_conformance::repo_root().join(path);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_crate_takes_the_workspace_lint_table() {
    let root = read("Cargo.toml");
    let table = lint_tables(&root, "workspace.lints");
    assert!(table.iter().any(|l| l == "[rust]") && table.len() > 2, "no [workspace.lints] table: {table:?}");

    let members = folders(&root, "members");
    assert!(members.len() >= 5, "members: {members:?}");
    for member in &members {
        let manifest = read(&format!("{member}/Cargo.toml"));
        assert!(
            manifest.contains("\n[lints]\nworkspace = true\n"),
            "{member}/Cargo.toml does not opt in with `[lints] workspace = true`"
        );
    }

    let standalone = folders(&root, "exclude");
    assert!(standalone.len() >= 4, "exclude: {standalone:?}");
    for package in &standalone {
        let copy = lint_tables(&read(&format!("{package}/Cargo.toml")), "lints");
        assert_eq!(copy, table, "{package}/Cargo.toml's [lints] differs from the root's [workspace.lints]");
    }
}

/// The `#![cfg_attr(not(test), deny(...))]` block of a crate root that
/// denies `clippy::indexing_slicing`, from `#![cfg_attr(` to its `)]`.
fn strict_block(source: &str) -> Option<&str> {
    let mut from = 0;
    while let Some(at) = source[from..].find("#![cfg_attr(") {
        let start = from + at;
        // A one-line attribute (`#![cfg_attr(feature = "x", doc = "...")]`) is not the block.
        let line_end = source[start..].find('\n').map_or(source.len(), |i| start + i);
        if source[start..line_end].trim_end().ends_with(")]") {
            from = line_end;
            continue;
        }
        let end = start + source[start..].find("\n)]")? + 3;
        if source[start..end].contains("clippy::indexing_slicing") {
            return Some(&source[start..end]);
        }
        from = end;
    }
    None
}

#[test]
fn every_strict_block_is_the_cores() {
    let core = read("kiln-nostd/src/lib.rs");
    let block = strict_block(&core).expect("kiln-nostd/src/lib.rs has the strict block");
    assert!(block.contains("clippy::as_conversions"), "{block}");
    // Every crate root of the tree, one or two folders down (kiln-c/api).
    let root = kiln_conformance::repo_root();
    let mut roots = Vec::new();
    for entry in fs::read_dir(&root).expect("the repository").flatten() {
        let dir = entry.path();
        roots.push(dir.join("src/lib.rs"));
        if let Ok(inner) = fs::read_dir(&dir) {
            roots.extend(inner.flatten().map(|e| e.path().join("src/lib.rs")));
        }
    }
    let mut found = Vec::new();
    for path in roots.iter().filter(|p| p.is_file()) {
        let source = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if source.contains("clippy::indexing_slicing") {
            let name = path.strip_prefix(&root).unwrap_or(path).display().to_string();
            let copy =
                strict_block(&source).unwrap_or_else(|| panic!("{name}: no #![cfg_attr(not(test), deny(..))] block"));
            assert_eq!(copy, block, "{name}'s strict lint block differs from kiln-nostd/src/lib.rs's");
            found.push(name);
        }
    }
    found.sort();
    assert!(found.len() >= 4, "{found:?}");
}
