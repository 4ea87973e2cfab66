//! Every `kiln ...` command line in the docs parses with the CLI's own parser
//! (`kiln_cli::command()`, the one `main` uses), so a renamed or removed flag fails
//! here even in a block the docs do not run (`<!-- doc: local -->`). The lines
//! come from `scripts/docs/check.py --kiln-commands` (the one extractor of the
//! docs' blocks; `KILN_DOC_FILES` narrows it): a command written out is parsed
//! exactly (`try_get_matches_from`, nothing run); a usage synopsis
//! (`<!-- doc: synopsis -->`, with `[optional]` parts and placeholders) must
//! name a subcommand that exists and only flags that subcommand has.
//! Each verdict is printed as `doc-command ok|FAIL FILE:LINE ...`, which
//! check.py reads back to report it under its block.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Parses one command line as written: Ok, or clap's error.
fn parse_exact(argv: &[String]) -> Result<(), String> {
    match kiln_cli::command().try_get_matches_from(argv) {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) => {
            Ok(())
        }
        Err(e) => Err(e.to_string().lines().next().unwrap_or_default().to_owned()),
    }
}

/// A usage synopsis: its subcommand exists and each flag it names is one of that
/// subcommand's (or a global one); placeholders are not parsed.
fn check_synopsis(argv: &[String]) -> Result<(), String> {
    let mut root = kiln_cli::command();
    root.build();
    let name = argv.get(1).ok_or("no subcommand")?;
    let sub = root.find_subcommand(name).ok_or_else(|| format!("no subcommand {name:?}"))?;
    for token in &argv[2..] {
        let known = if let Some(long) = token.strip_prefix("--") {
            let long = long.split('=').next().unwrap_or_default();
            long.is_empty()
                || sub
                    .get_arguments()
                    .chain(root.get_arguments())
                    .any(|a| a.get_long() == Some(long) || a.get_all_aliases().is_some_and(|v| v.contains(&long)))
        } else if let Some(short) = token.strip_prefix('-').filter(|s| s.len() == 1) {
            let c = short.chars().next().unwrap_or_default();
            sub.get_arguments().chain(root.get_arguments()).any(|a| a.get_short() == Some(c))
        } else {
            true // a placeholder, a value, or `-` (standard input)
        };
        if !known {
            return Err(format!("`kiln {name}` has no flag {token}"));
        }
    }
    Ok(())
}

fn check(mode: &str, argv: &[String]) -> Result<(), String> {
    match mode {
        "synopsis" => check_synopsis(argv),
        _ => parse_exact(argv),
    }
}

#[test]
fn every_documented_kiln_command_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("python3")
        .arg(root.join("scripts/docs/check.py"))
        .arg("--kiln-commands")
        .output()
        .expect("python3 runs scripts/docs/check.py");
    assert!(out.status.success(), "check.py --kiln-commands: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let mut failed = Vec::new();
    let mut count = 0;
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("one JSON object per line");
        let at = v["at"].as_str().expect("at");
        let mode = v["mode"].as_str().expect("mode");
        let argv: Vec<String> =
            v["argv"].as_array().expect("argv").iter().map(|a| a.as_str().expect("a string").to_owned()).collect();
        count += 1;
        match check(mode, &argv) {
            Ok(()) => println!("doc-command ok {at}"),
            Err(e) => {
                println!("doc-command FAIL {at} {e}");
                failed.push(format!("{at}: {}: {e}", argv.join(" ")));
            }
        }
    }
    assert!(count > 0 || std::env::var_os("KILN_DOC_FILES").is_some(), "no kiln command found in the docs");
    assert!(failed.is_empty(), "documented kiln commands the CLI does not accept:\n{}", failed.join("\n"));
}

fn args(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn a_stale_flag_fails_both_ways() {
    assert!(check("argv", &args("kiln validate --json a.kiln")).is_ok());
    assert!(check("argv", &args("kiln validate --no-such-flag a.kiln")).is_err());
    assert!(check("argv", &args("kiln validate --count-cap N a.kiln")).is_err(), "a placeholder is not a number");
    assert!(check("argv", &args("kiln frobnicate a.kiln")).is_err());
    assert!(check("argv", &args("kiln convert --help")).is_ok());
    assert!(check("synopsis", &args("kiln validate --type TEXT --count-cap N FILE")).is_ok());
    assert!(check("synopsis", &args("kiln convert IN -o OUT")).is_ok());
    assert!(check("synopsis", &args("kiln validate --no-such-flag FILE")).is_err());
    assert!(check("synopsis", &args("kiln frobnicate FILE")).is_err());
    assert!(check("synopsis", &args("kiln inspect -q FILE")).is_err(), "inspect has no -q");
}
