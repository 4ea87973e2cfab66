#!/usr/bin/env python3
"""Docs that run: every fenced code block of the repository's docs is run, or carries a marker
saying why not, and every `kiln ...` command line in them is held to the CLI's own parser.

    scripts/docs/check.py                  # run every runnable block, check every kiln command
    scripts/docs/check.py --list           # the blocks: file:line, language, what is done with each
    scripts/docs/check.py --kiln-commands  # the kiln command lines, as JSON lines (read by
                                           # kiln-cli/tests/doc_commands.rs, which parses them)
    scripts/docs/check.py README.md docs/conversion.md   # only these files
    scripts/docs/check.py --self-test      # the checker's own rules, on a doc made for them

The rules (markers, scope, fixtures) are in docs/README.md, "Docs that run". In short: a block
in sh/bash/console, python, js/mjs, rust or c runs unless an HTML comment on the line before
its fence says `<!-- doc: local -->`, `<!-- doc: illustrative -->`, `<!-- doc: synopsis -->` or
`<!-- doc: tested-by PATH -->`; `<!-- doc: setup NAME -->` first runs scripts/docs/setup/NAME.sh
in the block's folder. Each file's blocks run in document order in one scratch folder of their
own (a doc reads as one session: a later block may use what an earlier one wrote), with `spec/`
and `scripts/` linked in, the built `kiln` first on PATH, the installed Python package `kiln` and the npm
package kiln-wasm/pkg as `node_modules/kiln-wasm`.

Environment: KILN (the kiln binary; default $CARGO_TARGET_DIR/release/kiln, else
target/release/kiln), KILN_WASM_PKG (default kiln-wasm/pkg), CARGO_TARGET_DIR.
Ends with `N passed, N failed`; exits 1 when a block fails.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SETUP = Path(__file__).resolve().parent / "setup"

# The docs in scope. Out of scope: CHANGELOG.md (history: its lines describe past releases).
SCOPE = ["README.md", "docs/*.md", "spec/*.md", "*/README.md", "*/*/README.md"]
OUT_OF_SCOPE = {"CHANGELOG.md"}

RUNNABLE = {"sh": "sh", "bash": "sh", "shell": "sh", "console": "console", "python": "python", "py": "python",
            "js": "js", "mjs": "js", "javascript": "js", "rust": "rust", "c": "c"}
# Not commands (the rule that puts them out of scope): program output and transcripts ("text",
# no language), grammars and format descriptions (spec/*.md's blocks are all of this kind), and
# file contents that are data or configuration (json, toml, cmake, html, ts). Their `$ kiln ...`
# transcript lines are still checked against the parser.
KINDS = {"local", "illustrative", "synopsis", "tested-by", "setup"}

# Blocks whose fence names a file (```js main.js) in these docs are snippets a test takes by
# name; the test must name each of them.
NAMED_SNIPPETS = {"kiln-wasm/js/README.md": "kiln-wasm/test/toolchains.test.mjs"}

BLOCK_SECONDS = 60


@dataclass
class Block:
    file: str  # relative to ROOT
    line: int  # the opening fence's line, 1-based
    lang: str  # the info string's first word, lowercased ("" for none)
    name: str  # what follows the language in the info string
    text: str
    markers: dict = field(default_factory=dict)  # kind -> argument ("" for none)
    index: int = 0

    @property
    def at(self):
        return f"{self.file}:{self.line}"

    @property
    def kind(self):
        return RUNNABLE.get(self.lang)

    def disposition(self):
        """What the checker does with the block: run, or why not."""
        for k in ("tested-by", "synopsis", "local", "illustrative"):
            if k in self.markers:
                return k
        if self.name and self.file in NAMED_SNIPPETS:
            return "tested-by"
        if self.kind is None:
            return "not code"
        return "run"


MARKER = re.compile(r"^\s*<!--\s*doc:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^`\s]*)\s*(.*?)\s*$")


def scope_files(args):
    """The docs to check: those named, else every file of SCOPE the repository tracks (not
    kiln-wasm/pkg/README.md, the copy build.sh makes, nor anything under node_modules)."""
    if args:
        return [str(Path(a).resolve().relative_to(ROOT)) for a in args]
    git = subprocess.run(["git", "ls-files", "-z", "--", "*.md"], cwd=ROOT, capture_output=True)
    tracked = set(git.stdout.decode().split("\0")) if git.returncode == 0 else None
    seen = []
    for pattern in SCOPE:
        for p in sorted(ROOT.glob(pattern)):
            rel = str(p.relative_to(ROOT))
            if rel in OUT_OF_SCOPE or (tracked is not None and rel not in tracked) or "node_modules/" in rel:
                continue
            if rel not in seen and p.is_file():
                seen.append(rel)
    return seen


def parse_markers(lines, fence_index, where):
    """The `<!-- doc: ... -->` comments on the lines right above a fence (any other comment
    lines in between are allowed). Directives in one comment are separated by `;`."""
    markers = {}
    i = fence_index - 1
    while i >= 0 and lines[i].strip().startswith("<!--") and lines[i].strip().endswith("-->"):
        m = MARKER.match(lines[i])
        if m:
            for directive in filter(None, (d.strip() for d in m.group(1).split(";"))):
                kind, _, arg = directive.partition(" ")
                if kind not in KINDS:
                    raise SystemExit(f"{where}: unknown doc marker {kind!r} (known: {', '.join(sorted(KINDS))})")
                markers[kind] = arg.strip()
        i -= 1
    return markers


def extract(rel):
    """The fenced blocks of one Markdown file, with their markers."""
    lines = (ROOT / rel).read_text(encoding="utf-8").splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang, name = m.group(1), m.group(2), m.group(3).lower(), m.group(4)
        body = []
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""):
            # Indented fences (in a list item) carry their indentation on every line.
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        if j == len(lines):
            raise SystemExit(f"{rel}:{i + 1}: a fence that is never closed")
        blocks.append(Block(rel, i + 1, lang, name, "\n".join(body) + "\n", parse_markers(lines, i, f"{rel}:{i + 1}")))
        i = j + 1
    return blocks


def inline_commands(rel):
    """`kiln ...` in inline code spans of the prose (outside fences): (line, argv), checked as
    synopses (a span may hold placeholders such as FILE or OUT)."""
    lines = (ROOT / rel).read_text(encoding="utf-8").splitlines()
    prose, inside, fence = [], False, ""
    for n, line in enumerate(lines):
        m = FENCE.match(line)
        if m and (not inside or line.strip().strip(fence[0]) == ""):
            if not inside:
                inside, fence = True, m.group(2)
            elif line.strip().startswith(fence):
                inside = False
            prose.append("")
            continue
        prose.append("" if inside else line)
    text = "\n".join(prose)
    out = []
    for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", text):
        span = " ".join(m.group(1).split())
        if not re.match(r"^kiln [a-z]", span):
            continue
        line = text.count("\n", 0, m.start()) + 1
        for argv in kiln_argvs(span.replace("[", " ").replace("]", " ").replace("...", " ").replace("…", " ")):
            out.append((line, argv))
    return out


# --- kiln command lines ------------------------------------------------------------------------

SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "|&", ";;"}
REDIRECTS = {"<", ">", ">>", "<<", "<<<", ">&", "<&", "&>", ">|"}


def shell_lines(text, transcript):
    """Logical command lines: continuations joined; in a transcript only `$ ` lines."""
    out = []
    pending, start = "", None
    for n, raw in enumerate(text.splitlines()):
        line = raw
        if transcript:
            if pending == "" and not line.startswith("$ "):
                continue
            if pending == "":
                line = line[2:]
        if start is None:
            start = n
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending, start = "", None
    return out


def simple_commands(line):
    """The argument vectors of the simple commands of one shell line: comments, redirections,
    pipes and lists understood, leading `NAME=value` assignments dropped."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        tokens = list(lex)
    except ValueError as e:  # an unbalanced quote
        raise ValueError(f"cannot split {line!r}: {e}") from None
    commands, cur, skip = [], [], False
    for t in tokens:
        if skip:
            skip = False
            continue
        if t in SEPARATORS:
            commands.append(cur)
            cur = []
        elif t in REDIRECTS:
            skip = True
        else:
            cur.append(t)
    commands.append(cur)
    out = []
    for argv in commands:
        while argv and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]) or argv[0] in ("time", "sudo", "exec", "!")):
            argv = argv[1:]
        if argv:
            out.append(argv)
    return out


def kiln_argvs(line):
    """The argument vectors of the `kiln` commands in one shell line (`cargo run ... -p kiln-cli
    -- ARGS` counts as `kiln ARGS`)."""
    found = []
    for argv in simple_commands(line):
        if Path(argv[0]).name == "kiln":
            found.append(["kiln"] + argv[1:])
        elif argv[0] == "cargo" and "run" in argv and "--" in argv and ("kiln-cli" in argv or "kiln" in argv):
            found.append(["kiln"] + argv[argv.index("--") + 1:])
    return found


def kiln_commands(block):
    """(line, mode, argv) for every kiln command line of a block; mode "synopsis" for usage
    lines ([optional] parts, placeholders), else "argv" (parsed exactly as written)."""
    disp = block.disposition()
    if block.kind in ("sh", "console") or (block.kind is None and block.lang in ("", "text")):
        transcript = block.kind == "console" or block.kind is None
        out = []
        for n, line in shell_lines(block.text, transcript):
            if disp == "synopsis":
                line = line.replace("[", " ").replace("]", " ").replace("...", " ")
            for argv in kiln_argvs(line):
                out.append((block.line + 1 + n, "synopsis" if disp == "synopsis" else "argv", argv))
        return out
    return []


SCRIPT = re.compile(r"^(?:\./)?[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*\.(?:sh|py|mjs|js|cjs)$|^(?:\./)?[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+\.sh$")
INTERPRETERS = {"python3", "python", "node", "bash", "sh"}


def missing_scripts(block):
    """The repository scripts a block that is not run calls (`scripts/x.sh`, `python3 a/b.py`,
    `./ci.sh` after `cd DIR`) that do not exist: a stale line the parser check cannot see."""
    if block.kind not in ("sh", "console"):
        return []
    problems, here = [], ROOT
    for n, line in shell_lines(block.text, block.kind == "console"):
        for argv in simple_commands(line):
            if argv[0] == "cd" and len(argv) == 2 and not argv[1].startswith(("$", "~", "-")):
                here = (here / argv[1]).resolve()
                continue
            cmd = argv[1:] if Path(argv[0]).name in INTERPRETERS else argv
            if cmd and SCRIPT.match(cmd[0]) and not (here / cmd[0]).exists():
                problems.append(f"{block.file}:{block.line + 1 + n}: {cmd[0]}: no such file in {here.relative_to(ROOT) if here != ROOT else 'the repository'}")
    return problems


LOOKS_LIKE_COMMANDS = re.compile(r"^(?:cargo|cd|python3?|node|npm|npx|pip3?|rustup|cmake|qemu-system-\w+|\./|scripts/)\b")


def untagged_commands(block):
    """A block with no language (or "text") whose lines are commands, not output: it must say
    its language so that it is run or marked."""
    if block.lang not in ("", "text"):
        return []
    return [f"{block.file}:{block.line + 1 + n}: looks like a command; fence the block as ```sh"
            for n, line in enumerate(block.text.splitlines()) if LOOKS_LIKE_COMMANDS.match(line)]


# --- running -----------------------------------------------------------------------------------

class Env:
    def __init__(self, scratch):
        self.scratch = scratch
        target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
        self.kiln = Path(os.environ.get("KILN") or target / "release" / "kiln")
        self.pkg = Path(os.environ.get("KILN_WASM_PKG") or ROOT / "kiln-wasm" / "pkg")
        self.bin = scratch / ".bin"
        self.bin.mkdir()
        if self.kiln.is_file():
            (self.bin / "kiln").symlink_to(self.kiln.resolve())
        self.env = {**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}", "PYTHONDONTWRITEBYTECODE": "1"}
        self.rust_binary = None
        self.rust_errors = None

    def folder(self, rel):
        """The scratch folder of one doc: its blocks share it, in order."""
        d = self.scratch / rel.replace("/", "__")
        if not d.exists():
            d.mkdir()
            for shared in ("spec", "scripts"):
                (d / shared).symlink_to(ROOT / shared)
            nm = d / "node_modules"
            nm.mkdir()
            if self.pkg.is_dir():
                (nm / "kiln-wasm").symlink_to(self.pkg.resolve())
            ort = ROOT / "kiln-wasm" / "node_modules" / "onnxruntime-web"
            if ort.is_dir():
                (nm / "onnxruntime-web").symlink_to(ort)
        return d

    def missing(self, block):
        """Why this block cannot run here, or None."""
        if block.kind in ("sh", "console") and kiln_commands(block) and not self.kiln.is_file():
            return f"no kiln binary at {self.kiln} (cargo build --release -p kiln-cli, or set KILN)"
        if block.kind == "js" and "kiln-wasm" in block.text and not self.pkg.is_dir():
            return f"no npm package at {self.pkg} (kiln-wasm/build.sh, or set KILN_WASM_PKG)"
        return None

    def run(self, argv, cwd, stdin=None):
        try:
            p = subprocess.run(argv, cwd=cwd, env=self.env, input=stdin, capture_output=True, text=True,
                               timeout=BLOCK_SECONDS)
        except subprocess.TimeoutExpired as e:
            return 124, f"timed out after {BLOCK_SECONDS} s\n{e.stdout or ''}{e.stderr or ''}"
        return p.returncode, p.stdout + p.stderr


PRELUDE = {"rust": "rs", "python": "py", "js": "mjs", "sh": "sh", "console": "sh"}


def code(block):
    """The block's code, after its setup's prelude (scripts/docs/setup/NAME.rs, .py or .mjs:
    variables the block takes as given) when there is one."""
    name = block.markers.get("setup")
    ext = PRELUDE.get(block.kind)
    if name and ext != "sh" and (SETUP / f"{name}.{ext}").is_file():
        return (SETUP / f"{name}.{ext}").read_text() + block.text
    return block.text


def run_setup(env, block, cwd):
    """`setup NAME`: scripts/docs/setup/NAME.sh runs in the block's folder first (the files the
    block takes as given); NAME.rs/.py/.mjs is a prelude (see `code`). One of them must exist."""
    name = block.markers.get("setup")
    if not name:
        return 0, ""
    script = SETUP / f"{name}.sh"
    if not any((SETUP / f"{name}.{e}").is_file() for e in ("sh", "rs", "py", "mjs")):
        return 1, f"setup {name!r}: nothing in {SETUP.relative_to(ROOT)}/ by that name"
    if not script.is_file():
        return 0, ""
    return env.run(["bash", "-euo", "pipefail", str(script)], cwd)


def run_block(env, block):
    cwd = env.folder(block.file)
    why = env.missing(block)
    if why:
        return False, why
    rc, out = run_setup(env, block, cwd)
    if rc != 0:
        return False, f"setup {block.markers['setup']} failed ({rc}):\n{out}"
    if block.kind == "sh":
        rc, out = env.run(["bash", "-euo", "pipefail", "-c", code(block)], cwd)
    elif block.kind == "console":
        script = "\n".join(line for _, line in shell_lines(block.text, True))
        rc, out = env.run(["bash", "-euo", "pipefail", "-c", script], cwd)
    elif block.kind == "python":
        rc, out = env.run([sys.executable, "-c", code(block)], cwd)
    elif block.kind == "js":
        f = cwd / f".block-{block.line}.mjs"
        f.write_text(code(block))
        rc, out = env.run(["node", f.name], cwd)
    elif block.kind == "rust":
        if env.rust_errors is not None:
            return False, env.rust_errors[block.index]
        rc, out = env.run([str(env.rust_binary), str(block.index)], cwd)
    elif block.kind == "c":
        return run_c(env, block, cwd)
    else:
        return False, f"no runner for {block.lang!r}"
    return rc == 0, f"exit {rc}\n{out}" if rc else out


def run_c(env, block, cwd):
    """A C block is a whole program: built against kiln.h and libkiln.a, then run."""
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    lib = target / "release" / "libkiln.a"
    if not lib.is_file():
        return False, f"no {lib} (cargo build --release -p kiln-c)"
    src = cwd / f".block-{block.line}.c"
    src.write_text(block.text)
    exe = cwd / f".block-{block.line}"
    rc, out = env.run(["cc", "-std=c99", "-Wall", "-Werror", f"-I{ROOT / 'kiln-c' / 'include'}", str(src), str(lib),
                       "-lpthread", "-ldl", "-lm", "-o", str(exe)], cwd)
    if rc:
        return False, out
    rc, out = env.run([str(exe)], cwd)
    return rc == 0, out


RUST_MAIN = """\
// Generated by scripts/docs/check.py: the runnable Rust blocks of the docs, one module each.
#![allow(warnings, clippy::all)]
%(mods)s
/// Any error a block's `?` meets, by its Debug form (not Debug itself, so the blanket From
/// below does not overlap core's `impl From<T> for T`).
pub struct DocError(String);
impl<E: std::fmt::Debug> From<E> for DocError {
    fn from(e: E) -> Self {
        DocError(format!("{e:?}"))
    }
}
/// A block written with its own `fn main`, returning () or a Result.
pub trait Outcome {
    fn into_result(self) -> Result<(), DocError>;
}
impl Outcome for () {
    fn into_result(self) -> Result<(), DocError> {
        Ok(())
    }
}
impl<E: std::fmt::Debug> Outcome for Result<(), E> {
    fn into_result(self) -> Result<(), DocError> {
        self.map_err(DocError::from)
    }
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).expect("a block number");
    let r: Result<(), DocError> = match n {
%(arms)s
        _ => panic!("no block {n}"),
    };
    if let Err(DocError(e)) = r {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
"""


def build_rust(env, blocks):
    """One scratch crate holding every runnable Rust block (one build for all of them), in
    target/docs-check/rust so that a rerun rebuilds only what changed."""
    if not blocks:
        return
    crate = ROOT / "target" / "docs-check" / "rust"
    (crate / "src").mkdir(parents=True, exist_ok=True)
    core = '"alloc", "derive", "sha2"'
    model = '"alloc", "sha2", "ed25519", "std"'
    (crate / "Cargo.toml").write_text(
        "[package]\nname = \"doc-blocks\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n"
        f"[dependencies]\nkiln-nostd = {{ path = {json.dumps(str(ROOT / 'kiln-nostd'))}, features = [{core}] }}\n"
        f"kiln-model = {{ path = {json.dumps(str(ROOT / 'kiln-model'))}, features = [{model}] }}\n\n"
        "[workspace]\n")
    shutil.copy(ROOT / "Cargo.lock", crate / "Cargo.lock")
    arms, where = [], {}
    for b in blocks:
        mod = f"b{b.index}"
        text = code(b)
        prelude = text.count("\n") - b.text.count("\n")
        if re.search(r"^\s*fn main\s*\(", text, re.M):
            new = f"// {b.at}\n{text}\npub fn run() -> Result<(), crate::DocError> {{\n    crate::Outcome::into_result(main())\n}}\n"
            first = 2 + prelude  # the generated line that holds the block's first line
        else:
            new = (f"// {b.at}\npub fn run() -> Result<(), crate::DocError> {{\n    let _ = {{\n{text}    }};\n"
                   "    Ok(())\n}\n")
            first = 4 + prelude
        where[f"src/{mod}.rs"] = (b, first)
        path = crate / "src" / f"{mod}.rs"
        if not path.exists() or path.read_text() != new:
            path.write_text(new)
        arms.append(f"        {b.index} => {mod}::run(),")
    mods = "".join(f"mod b{b.index};\n" for b in blocks)
    main = RUST_MAIN % {"mods": mods, "arms": "\n".join(arms)}
    if not (crate / "src" / "main.rs").exists() or (crate / "src" / "main.rs").read_text() != main:
        (crate / "src" / "main.rs").write_text(main)
    t0 = time.monotonic()
    p = subprocess.run(["cargo", "build", "--quiet", "--message-format=short"], cwd=crate,
                       env=env.env, capture_output=True, text=True)
    print(f"     (the Rust blocks built in {time.monotonic() - t0:.1f} s)", flush=True)
    if p.returncode:
        # Each error at the doc's own line, under its block; the other blocks are not run.
        def doc_line(m):
            b, first = where[m.group(1)]
            n = int(m.group(2))
            return f"{b.file}:{b.line + 1 + n - first}" if n >= first else f"{m.group(0)} (the setup's prelude)"
        out = re.sub(r"(src/b\d+\.rs):(\d+)(?::\d+)?", lambda m: doc_line(m) if m.group(1) in where else m.group(0),
                     p.stdout + p.stderr)
        env.rust_errors = {}
        for b, _ in where.values():
            mine = [line for line in out.splitlines() if line.startswith(f"{b.file}:") and
                    any(line.startswith(f"{b.file}:{b.line + 1 + k}:") for k in range(b.text.count("\n")))]
            env.rust_errors[b.index] = "\n".join(mine) if mine else \
                f"not run: the Rust blocks did not build (target/docs-check/rust):\n{out}"
        return
    target = Path(os.environ.get("CARGO_TARGET_DIR") or crate / "target")
    env.rust_binary = target / "debug" / "doc-blocks"


def check_named(block):
    test = NAMED_SNIPPETS[block.file]
    src = (ROOT / test).read_text()
    if f"'{block.name}'" not in src and f'"{block.name}"' not in src:
        return False, f"{test} does not take the snippet {block.name!r}"
    return True, f"taken by {test}"


def check_tested_by(block):
    arg = block.markers["tested-by"]
    if not arg:
        return False, "tested-by needs the path of the test"
    path = arg.split()[0]
    if not (ROOT / path).exists():
        return False, f"tested-by {path}: no such file"
    if Path(block.file).name not in (ROOT / path).read_text(errors="replace"):
        return False, f"{path} never names {Path(block.file).name}: it cannot be the test of this block"
    return True, f"run by {path}"


def parse_commands(files):
    """Every kiln command line of `files`, in blocks and in the prose, through the CLI's parser
    (kiln-cli/tests/doc_commands.rs, which reads `--kiln-commands`): {file:line: error or None}.
    Every file is named, not only those with blocks: a doc may hold commands in its prose alone."""
    # --workspace: the features cargo-test's build resolved, so its artefacts are reused.
    p = subprocess.run(["cargo", "test", "--quiet", "--locked", "--workspace", "--test", "doc_commands", "--", "--nocapture"],
                       cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "KILN_DOC_FILES": "\n".join(sorted(files))})
    verdicts = {}
    for line in (p.stdout + p.stderr).splitlines():
        m = re.search(r"doc-command (ok|FAIL) (\S+)(?: (.*))?$", line)  # after cargo -q's progress dots
        if m:
            verdicts.setdefault(m.group(2), []).append(None if m.group(1) == "ok" else m.group(3))
    if p.returncode and not any(e for v in verdicts.values() for e in v):
        raise SystemExit(f"kiln-cli/tests/doc_commands.rs failed without a verdict:\n{p.stdout}{p.stderr}")
    return verdicts


def check_block(env, b, verdicts):
    """(problems, what was done), or what None for a block with nothing to check. verdicts:
    parse_commands' answers, or None when the parser check is skipped."""
    disp = b.disposition()
    problems = []
    if disp == "run":
        ok, out = run_block(env, b)
        if not ok:
            problems.append(out)
    elif disp == "tested-by":
        ok, out = check_named(b) if b.name and b.file in NAMED_SNIPPETS and "tested-by" not in b.markers \
            else check_tested_by(b)
        if not ok:
            problems.append(out)
    if disp in ("local", "illustrative", "synopsis"):
        problems += missing_scripts(b)
    problems += untagged_commands(b)
    cmds = kiln_commands(b)
    for line, _, argv in cmds if verdicts is not None else []:
        for err in verdicts.get(f"{b.file}:{line}", ["not checked: doc_commands.rs gave no verdict"]):
            if err:
                problems.append(f"{b.file}:{line}: {shlex.join(argv)}\n  {err}")
    if disp == "not code" and not cmds and not problems:
        return problems, None
    return problems, disp + (f", {len(cmds)} kiln command{'s' * (len(cmds) != 1)} parsed" if cmds else "")


SELF_TEST = """\
```sh
echo one > shared.txt
```

```sh
false
```

```python
assert open("shared.txt").read() == "one\\n"   # the doc's earlier block wrote it
```

```python
raise SystemExit(3)
```

```js
if (1 + 1 !== 2) process.exit(1);
```

```js
process.exit(4);
```

<!-- doc: local -->
```sh
scripts/run-suites.py --list
```

<!-- doc: illustrative -->
```sh
scripts/no-such-script.sh --flag
```

```
cargo build --release
```

```text
kiln firmware demo: output, not a command
```

<!-- doc: tested-by scripts/run-suites.py -->
```sh
false
```

<!-- doc: setup no-such-setup -->
```sh
true
```
"""
# Each block's expected verdict, in order (the text block has nothing to check: None).
SELF_TEST_EXPECT = [True, False, True, False, True, False, True, False, False, None, False, False]


def self_test():
    """The checker's own rules on a doc made for it: running, sharing the folder, failing,
    the markers' checks, untagged commands, an unknown marker."""
    doc = ROOT / "target" / "docs-check" / "self-test.md"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(SELF_TEST)
    rel = str(doc.relative_to(ROOT))
    blocks = extract(rel)
    assert len(blocks) == len(SELF_TEST_EXPECT), len(blocks)
    scratch = Path(tempfile.mkdtemp(prefix="kiln-docs-self-test-"))
    bad = []
    try:
        env = Env(scratch)
        for b, want in zip(blocks, SELF_TEST_EXPECT):
            problems, what = check_block(env, b, None)
            got = None if what is None else not problems
            print(f"{'ok  ' if got == want else 'FAIL'} {b.at}: expected {want}, got {got} {problems}")
            if got != want:
                bad.append(b.at)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    doc.write_text("<!-- doc: locl -->\n```sh\ntrue\n```\n")
    try:
        extract(rel)
        bad.append("an unknown marker was accepted")
    except SystemExit as e:
        print(f"ok   an unknown marker is refused: {e}")
    print(f"self-test: {len(SELF_TEST_EXPECT) + 1 - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="docs to check (default: every doc in scope)")
    ap.add_argument("--list", action="store_true", help="list the blocks and what is done with each")
    ap.add_argument("--kiln-commands", action="store_true", help="print the kiln command lines as JSON lines")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--no-parse", action="store_true",
                    help="skip the parser check of the kiln commands (while editing a doc; CI always parses)")
    ap.add_argument("--self-test", action="store_true", help="check the checker on a doc made for it")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    # Files named on the command line are relative to the current folder; KILN_DOC_FILES (how
    # the run hands its selection to doc_commands.rs) names them from the repository's root.
    chosen = [str(Path(f).resolve()) for f in a.files] or [str(ROOT / f) for f in os.environ.get("KILN_DOC_FILES", "").split()]
    files = scope_files(chosen)
    blocks = [b for f in files for b in extract(f)]
    for i, b in enumerate(blocks):
        b.index = i

    inline = {f: inline_commands(f) for f in files}
    if a.kiln_commands:
        for b in blocks:
            for line, mode, argv in kiln_commands(b):
                print(json.dumps({"at": f"{b.file}:{line}", "mode": mode, "argv": argv}))
        for f, cmds in inline.items():
            for line, argv in cmds:
                print(json.dumps({"at": f"{f}:{line}", "mode": "synopsis", "argv": argv}))
        return 0
    if a.list:
        for b in blocks:
            n = len(kiln_commands(b))
            extra = f"; {n} kiln command{'s' * (n != 1)}" if n else ""
            marker = "; ".join(f"{k} {v}".strip() for k, v in b.markers.items())
            print(f"{b.at:36} {b.lang or '-':8} {b.disposition():12} {marker}{extra}")
        summary(blocks, files, inline)
        return 0

    t0 = time.monotonic()
    verdicts = None if a.no_parse else parse_commands(files)
    scratch = Path(tempfile.mkdtemp(prefix="kiln-docs-"))
    env = Env(scratch)
    passed = failed = 0
    try:
        build_rust(env, [b for b in blocks if b.kind == "rust" and b.disposition() == "run"])
        for b in blocks:
            started = time.monotonic()
            problems, what = check_block(env, b, verdicts)
            if what is None:
                continue  # output, grammars, data: nothing to check
            if problems:
                failed += 1
                print(f"FAIL {b.at} ({b.lang}, {what})")
                for p in problems:
                    print("  " + p.rstrip().replace("\n", "\n  "))
            else:
                passed += 1
                print(f"ok   {b.at} ({b.lang}, {what}, {time.monotonic() - started:.1f} s)")
            sys.stdout.flush()
        for f, cmds in inline.items():
            problems = [f"{f}:{line}: {shlex.join(argv)}\n  {err}" for line, argv in cmds if verdicts is not None
                        for err in verdicts.get(f"{f}:{line}", ["not checked: doc_commands.rs gave no verdict"]) if err]
            if not cmds:
                continue
            if problems:
                failed += 1
                print(f"FAIL {f} (the kiln commands in its prose)")
                for p in problems:
                    print("  " + p.rstrip().replace("\n", "\n  "))
            else:
                passed += 1
                print(f"ok   {f} (the kiln commands in its prose: {len(cmds)} parsed)")
    finally:
        if a.keep:
            print(f"scratch folder kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    summary(blocks, files, inline)
    print(f"{time.monotonic() - t0:.0f} s")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def summary(blocks, files, inline):
    counts = {}
    for b in blocks:
        counts[b.disposition()] = counts.get(b.disposition(), 0) + 1
    ncmd = sum(len(kiln_commands(b)) for b in blocks)
    print(f"{len(blocks)} blocks in {len(files)} files: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
          + f"; {ncmd} kiln command lines in blocks, {sum(map(len, inline.values()))} in the prose's code spans")


if __name__ == "__main__":
    sys.exit(main())
