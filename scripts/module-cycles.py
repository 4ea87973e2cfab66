#!/usr/bin/env python3
"""Fails when a module of a crate imports, directly or through others, a
module that imports it back (issues: one check-order spine; issue 42: no
import circle in any crate).

    python3 scripts/module-cycles.py                 # every crate of the repository
    python3 scripts/module-cycles.py kiln-cli        # the crates of the packages under a folder
    python3 scripts/module-cycles.py path/to/main.rs # one crate root (or a src/ folder)
    python3 scripts/module-cycles.py --graph         # ... and print every edge
    python3 scripts/module-cycles.py --self-test     # first check that planted circles are found

Crates are found from the Cargo.toml files, not from a list: every package
under the repository (workspace members and standalone packages alike;
`target/`, `node_modules/` and hidden folders skipped), and in each every
target Cargo builds: the library, each binary (`src/main.rs`, `src/bin/*`,
`[[bin]]` paths such as fuzz targets), examples, integration tests, benches
and the build script. Each target is a crate root of its own.

A node is a module (a file, or an inline `mod x { ... }` that is not a test
module; `#[path]` attributes are followed). An edge A -> B is a path in A's
non-test code (`use` trees and
inline `crate::`/`super::`/`self::` paths) that names B or an item of B;
paths are resolved through `pub use` re-exports, so `crate::Error` leads to
the module that defines `Error`, not to `lib.rs`. A module's own children
are part of it: an edge from a module to one of its descendants (a parent
declaring and re-exporting its children) is not counted; an edge from a
child to its parent or to a sibling is. Test code (`#[cfg(test)]` items)
is ignored: tests may use anything.
"""

import os
import re
import sys
import tomllib
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ROOT = Path(__file__).resolve().parent.parent
# Folders that hold no package of the project's own (build output, npm packages, VCS data).
SKIP_DIRS = {"target", "node_modules"}


def keep_path_attributes(text: str) -> str:
    """`#[path = "x.rs"]` -> `#[path = __path_<hex>]`, so that stripping strings keeps it."""
    return re.sub(
        r'#\[path\s*=\s*"([^"]*)"\s*\]',
        lambda m: f"#[path = __path_{m.group(1).encode().hex()}]",
        text,
    )


def strip_comments_and_strings(text: str) -> str:
    text = keep_path_attributes(text)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'b?r#*"(?:[^"\\]|\\.)*"#*', '""', text)
    text = re.sub(r"b?'(?:[^'\\]|\\.)'", "' '", text)
    return text


def matching_brace(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text) - 1


def drop_test_items(text: str) -> str:
    """Removes every item behind `#[cfg(test)]` (a block or a `use` line)."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        j = m.end()
        semi = text.find(";", j)
        brace = text.find("{", j)
        if brace == -1 or (semi != -1 and semi < brace):
            i = semi + 1
        else:
            i = matching_brace(text, brace) + 1
    out.append(text[i:])
    return "".join(out)


def expand_use_tree(tree: str) -> list:
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (renames dropped)."""
    tree = re.sub(r"\s+as\s+" + IDENT, "", tree)
    tree = re.sub(r"\s+", "", tree)
    if "{" not in tree:
        return [tree]
    k = tree.index("{")
    prefix, body = tree[:k], tree[k + 1 : matching_brace(tree, k)]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if not p:
            continue
        for q in expand_use_tree(p):
            out.append(prefix + q if q != "self" else prefix.rstrip(":"))
    return out


class Crate:
    """The modules of one crate, loaded from its root file."""

    def __init__(self, root: Path):
        self.root = root
        self.modules = {}  # path tuple -> code
        self.inline = {}  # path tuple -> True for inline modules
        self.load(("crate",), root, owns_folder=True)

    def load(self, path, file: Path, owns_folder=False):
        """Loads a module file. A crate root, a `mod.rs` and a file named by `#[path]` own
        their folder (their children sit beside them); `a.rs`'s children sit in `a/`."""
        code = drop_test_items(strip_comments_and_strings(file.read_text()))
        owns_folder = owns_folder or file.name == "mod.rs"
        self.take(path, code, file.parent if owns_folder else file.parent / file.stem)

    def take(self, path, code, folder: Path):
        own = code
        for m in re.finditer(r"(?:pub(?:\([a-z]+\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])", code):
            name = m.group(1)
            if m.group(2) == ";":
                # The attributes right before the item: a `#[path]` names the file.
                attrs = re.search(r"(?:#\[[^\]]*\]\s*)*$", code[: m.start()]).group(0)
                named = re.search(r"#\[path = __path_([0-9a-f]*)\]", attrs)
                if named:
                    cand = folder / bytes.fromhex(named.group(1)).decode()
                    if cand.exists():
                        self.load(path + (name,), cand, owns_folder=True)
                    continue
                for cand in (folder / f"{name}.rs", folder / name / "mod.rs"):
                    if cand.exists():
                        self.load(path + (name,), cand)
                        break
            else:
                end = matching_brace(code, m.end() - 1)
                body = code[m.end() : end]
                own = own.replace(body, "")
                self.inline[path + (name,)] = True
                self.take(path + (name,), body, folder / name)
        self.modules[path] = own

    def uses(self, path):
        code = self.modules[path]
        out = []
        for m in re.finditer(r"\buse\s+([^;]+);", code):
            out += expand_use_tree(m.group(1))
        code_wo_use = re.sub(r"\buse\s+[^;]+;", "", code)
        out += re.findall(r"\b((?:crate|super|self)(?:::" + IDENT + r")+)", code_wo_use)
        return out

    def absolute(self, path, p: str):
        segs = p.split("::")
        if segs[0] == "crate":
            return ("crate",) + tuple(segs[1:])
        base = path
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
        return base + tuple(segs)

    def reexports(self, path):
        """name -> absolute target path, for `pub use` / `pub(crate) use` in a module."""
        out = {}
        for m in re.finditer(r"\bpub(?:\([a-z]+\))?\s+use\s+([^;]+);", self.modules[path]):
            for p in expand_use_tree(m.group(1)):
                if p.endswith("*"):
                    continue
                out[p.split("::")[-1]] = self.absolute(path, p)
        return out

    def resolve(self, target, depth=0):
        """The module an absolute path leads to, through re-exports."""
        for k in range(len(target), 0, -1):
            mod = target[:k]
            if mod in self.modules:
                if k < len(target) and depth < 16:
                    re_ = self.reexports(mod).get(target[k])
                    if re_ is not None and re_ != target[: k + 1]:
                        return self.resolve(re_ + target[k + 1 :], depth + 1)
                return mod
        return None

    def edges(self):
        out = {}
        for path in self.modules:
            deps = set()
            for p in self.uses(path):
                first = p.split("::")[0]
                if first not in ("crate", "super", "self"):
                    continue
                mod = self.resolve(self.absolute(path, p))
                if mod is None or mod == path or mod[: len(path)] == path:
                    continue
                deps.add(mod)
            out[path] = deps
        return out


def cycles(edges):
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            strong(v)
    return comps


def name(path):
    return "::".join(path)


def packages(top: Path):
    """Every folder under `top` whose Cargo.toml declares a package, in path order."""
    out = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        if "Cargo.toml" in files:
            with open(Path(folder, "Cargo.toml"), "rb") as f:
                manifest = tomllib.load(f)
            if "package" in manifest:
                out.append((Path(folder), manifest))
    return out


def crate_roots(folder: Path, manifest):
    """(kind, root file) of each target Cargo builds from the package, as Cargo infers them:
    the ones the manifest names, then (unless `auto*` is false) the ones found by layout."""
    pkg = manifest["package"]
    roots = []

    def add(kind, rel):
        file = folder / rel
        if file.is_file() and all(file.resolve() != r.resolve() for _, r in roots):
            roots.append((kind, file))

    lib = manifest.get("lib", {})
    add("lib", lib.get("path", "src/lib.rs"))
    layout = {  # kind: (manifest table, auto key, folder of one-file targets)
        "bin": ("bin", "autobins", "src/bin"),
        "example": ("example", "autoexamples", "examples"),
        "test": ("test", "autotests", "tests"),
        "bench": ("bench", "autobenches", "benches"),
    }
    for kind, (table, auto, sub) in layout.items():
        for target in manifest.get(table, []):
            if "path" in target:
                add(kind, target["path"])
                continue
            t = target.get("name", "")
            add(kind, f"{sub}/{t}.rs")
            add(kind, f"{sub}/{t}/main.rs")
            if kind == "bin" and t == pkg.get("name"):
                add(kind, "src/main.rs")
        if pkg.get(auto, True) is not False:
            if kind == "bin":
                add(kind, "src/main.rs")
            d = folder / sub
            if d.is_dir():
                for entry in sorted(d.iterdir()):
                    if entry.suffix == ".rs":
                        add(kind, entry.relative_to(folder))
                    elif entry.is_dir():
                        add(kind, entry.relative_to(folder) / "main.rs")
    build = pkg.get("build", True)
    if build is not False:
        add("build", build if isinstance(build, str) else "build.rs")
    return roots


def crates_under(top: Path):
    """(package folder, kind, root file) of every crate under `top`; a .rs file or a src/
    folder without a Cargo.toml is taken as one crate root."""
    if top.is_file():
        return [(top.parent, "crate", top)]
    found = [(folder, kind, root) for folder, manifest in packages(top) for kind, root in crate_roots(folder, manifest)]
    if not found:
        for cand in ("lib.rs", "main.rs"):
            if (top / cand).is_file():
                return [(top, "crate", top / cand)]
    return found


def circles_of(root: Path):
    """The module graph of one crate and its circles."""
    edges = Crate(root).edges()
    return edges, cycles(edges)


def self_test():
    """The checker finds a circle through a re-export, a child importing its
    parent's sibling and an inline module, and none in a tree without one;
    across a repository it finds every package's crates (workspace member or
    standalone) and a circle in a binary crate and in a `[[bin]]` fuzz target
    whose module is named by `#[path]`."""
    import tempfile

    files = {
        "lib.rs": "mod a;\nmod b;\nmod c;\npub use a::Thing;\n#[cfg(test)]\nmod tests { use crate::b::X; }\n",
        "a.rs": "use crate::c::inner::Y;\npub struct Thing;\n",
        "b.rs": "pub struct X;\n",
        "c.rs": "pub mod inner { pub struct Y; pub fn f() { let _ = crate::Thing; } }\n",
    }
    with tempfile.TemporaryDirectory() as d:
        for name_, text in files.items():
            Path(d, name_).write_text(text)
        found = cycles(Crate(Path(d, "lib.rs")).edges())
        assert found == [[("crate", "a"), ("crate", "c", "inner")]], found
        Path(d, "c.rs").write_text("pub mod inner { pub struct Y; }\n// crate::Thing\n")
        assert cycles(Crate(Path(d, "lib.rs")).edges()) == [], "a comment is not an import"

    repo = {
        "Cargo.toml": '[workspace]\nmembers = ["app"]\nexclude = ["tool"]\n',
        # A workspace member: a library (at a path of its own) without a circle, a binary with one.
        "app/Cargo.toml": '[package]\nname = "app"\n[lib]\npath = "lib/lib.rs"\n',
        "app/lib/lib.rs": "pub mod x;\npub mod y;\n#[cfg(test)]\nmod t { use crate::x::A; }\n",
        "app/lib/x.rs": "use crate::y::B;\npub struct A;\n",
        "app/lib/y.rs": "pub struct B;\n",
        "app/src/main.rs": "mod x;\nmod y;\nfn main() {}\n",
        "app/src/x.rs": "use crate::y::B;\npub struct A;\n",
        "app/src/y.rs": "pub struct B;\npub fn f() { let _ = crate::x::A; }\n",
        # A standalone package: a fuzz target whose `#[path]` module and inline module form a
        # circle, and a src/bin/NAME/main.rs crate whose child module sits beside it.
        "tool/Cargo.toml": '[package]\nname = "tool"\n[workspace]\n[[bin]]\nname = "t"\npath = "fuzz_targets/t.rs"\n',
        "tool/fuzz_targets/t.rs": '#[path = "../shared/m.rs"]\nmod m;\nmod n { pub fn g() { crate::m::f(); } }\n',
        "tool/shared/m.rs": "pub fn f() { crate::n::g(); }\n",
        "tool/src/bin/extra/main.rs": "mod p;\nfn main() { p::q(); }\n",
        "tool/src/bin/extra/p.rs": "pub fn q() {}\n",
        # Build output is not the project's: never read.
        "tool/target/debug/Cargo.toml": "not toml [",
    }
    with tempfile.TemporaryDirectory() as d:
        top = Path(d)
        for rel, text in repo.items():
            (top / rel).parent.mkdir(parents=True, exist_ok=True)
            (top / rel).write_text(text)
        crates = crates_under(top)
        got = sorted((str(root.relative_to(top)), kind) for _, kind, root in crates)
        want = [
            ("app/lib/lib.rs", "lib"),
            ("app/src/main.rs", "bin"),
            ("tool/fuzz_targets/t.rs", "bin"),
            ("tool/src/bin/extra/main.rs", "bin"),
        ]
        assert got == want, got
        with_circle = {
            str(root.relative_to(top)): circles
            for _, _, root in crates
            if (circles := circles_of(root)[1])
        }
        assert with_circle == {
            "app/src/main.rs": [[("crate", "x"), ("crate", "y")]],
            "tool/fuzz_targets/t.rs": [[("crate", "m"), ("crate", "n")]],
        }, with_circle
        assert len(Crate(top / "tool/src/bin/extra/main.rs").modules) == 2, "p.rs sits beside main.rs"
    print("self-test: ok")


def main():
    if "--self-test" in sys.argv:
        self_test()
    args = [Path(a) for a in sys.argv[1:] if not a.startswith("--")]
    crates = [c for top in (args or [ROOT]) for c in crates_under(top)]
    if not crates:
        print(f"no crate found under {', '.join(map(str, args))}")
        return 1
    total, modules, per_package = 0, 0, {}
    for folder, kind, root in crates:
        edges, found = circles_of(root)
        modules += len(edges)
        total += len(found)
        shown = os.path.relpath(root)
        if "--graph" in sys.argv:
            for v in sorted(edges):
                for w in sorted(edges[v]):
                    print(f"{shown}: {name(v)} -> {name(w)}")
        for comp in found:
            members = set(comp)
            print(f"circle in {shown} ({kind}): {', '.join(name(c) for c in comp)}")
            for v in comp:
                for w in sorted(edges[v] & members):
                    print(f"  {name(v)} -> {name(w)}")
        n = per_package.setdefault(os.path.relpath(folder), [0, 0, 0])
        n[0] += 1
        n[1] += len(edges)
        n[2] += len(found)
    for pkg, (n_crates, n_modules, n_circles) in per_package.items():
        print(f"{pkg}: {n_crates} crate(s), {n_modules} modules, {n_circles} circle(s)")
    if total:
        print(f"{total} circle(s) among the modules of {len(crates)} crates")
        return 1
    print(f"no circles among the {modules} modules of {len(crates)} crates in {len(per_package)} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
