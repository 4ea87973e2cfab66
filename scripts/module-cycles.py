#!/usr/bin/env python3
"""Fails when a module of a crate imports, directly or through others, a
module that imports it back (issue: one check-order spine).

    python3 scripts/module-cycles.py                 # kiln-nostd/src
    python3 scripts/module-cycles.py --graph         # ... and print every edge
    python3 scripts/module-cycles.py path/to/src     # another crate
    python3 scripts/module-cycles.py --self-test     # first check that a planted circle is found

A node is a module (a file, or an inline `mod x { ... }` that is not a test
module). An edge A -> B is a path in A's non-test code (`use` trees and
inline `crate::`/`super::`/`self::` paths) that names B or an item of B;
paths are resolved through `pub use` re-exports, so `crate::Error` leads to
the module that defines `Error`, not to `lib.rs`. A module's own children
are part of it: an edge from a module to one of its descendants (a parent
declaring and re-exporting its children) is not counted; an edge from a
child to its parent or to a sibling is. Test code (`#[cfg(test)]` items)
is ignored: tests may use anything.
"""

import re
import sys
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments_and_strings(text: str) -> str:
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
    def __init__(self, src: Path):
        self.src = src
        self.modules = {}  # path tuple -> code
        self.inline = {}  # path tuple -> True for inline modules
        self.load(("crate",), src / "lib.rs")

    def load(self, path, file: Path):
        code = drop_test_items(strip_comments_and_strings(file.read_text()))
        self.take(path, code, file.parent if file.name in ("lib.rs", "mod.rs") else file.parent / file.stem)

    def take(self, path, code, folder: Path):
        own = code
        for m in re.finditer(r"(?:pub(?:\([a-z]+\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])", code):
            name = m.group(1)
            if m.group(2) == ";":
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


def self_test():
    """The checker finds a circle through a re-export, a child importing its
    parent's sibling and an inline module, and none in a tree without one."""
    import tempfile

    files = {
        "lib.rs": "mod a;\nmod b;\nmod c;\npub use a::Thing;\n#[cfg(test)]\nmod tests { use crate::b::X; }\n",
        "a.rs": "use crate::c::inner::Y;\npub struct Thing;\n",
        "b.rs": "pub struct X;\n",
        "c.rs": "pub mod inner { pub struct Y; pub fn f() { let _ = crate::Thing; } }\n",
    }
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            Path(d, name).write_text(text)
        found = cycles(Crate(Path(d)).edges())
        assert found == [[("crate", "a"), ("crate", "c", "inner")]], found
        Path(d, "c.rs").write_text("pub mod inner { pub struct Y; }\n// crate::Thing\n")
        assert cycles(Crate(Path(d)).edges()) == [], "a comment is not an import"
    print("self-test: ok")


def main():
    if "--self-test" in sys.argv:
        self_test()
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    src = Path(args[0]) if args else Path(__file__).resolve().parent.parent / "kiln-nostd" / "src"
    crate = Crate(src)
    edges = crate.edges()
    if "--graph" in sys.argv:
        for v in sorted(edges):
            for w in sorted(edges[v]):
                print(f"{name(v)} -> {name(w)}")
    found = cycles(edges)
    for comp in found:
        members = set(comp)
        print(f"circle: {', '.join(name(c) for c in comp)}")
        for v in comp:
            for w in sorted(edges[v] & members):
                print(f"  {name(v)} -> {name(w)}")
    if found:
        print(f"{len(found)} circle(s) among the modules of {src}")
        return 1
    print(f"no circles among the {len(edges)} modules of {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
