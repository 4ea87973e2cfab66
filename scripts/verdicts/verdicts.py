#!/usr/bin/env python3
"""One verdict per front end: the same files through the CLI, Rust, Python, npm and C, each call's
verdict, code and "digests checked" flag compared with its row of docs/verification.md.

    scripts/verdicts/verdicts.py            # every driven row on every file; exits 1 on a mismatch
    scripts/verdicts/verdicts.py --list     # the table's rows: driven by which runner, or why not

The files (made fresh in a temporary folder, from a safetensors file the safetensors library
writes): good (a model file with digests, as `kiln convert` writes it), truncated (cut inside the
last payload), flipped (one payload byte changed: every structural rule still holds), foreign
(the safetensors file itself), sharded (a manifest and three shards, `--max-shard-size`), signed
(`kiln sign`). What each row must give follows from its "digests by default" cell alone:

    good, signed    accepted; digests checked = the cell (yes/always: true, no: false)
    truncated       EOF
    flipped         DIGEST when the cell is yes/always, else accepted with digests unchecked
    foreign         FRAME at byte 0 (the CLI, which reads foreign formats, accepts it and names it)
    n/a cell        FRAME at byte 0 for every file (the call takes a standalone directory block)
    sharded         a call given a path checks every shard (accepted; digests as the cell); a call
                    given the manifest's bytes alone opens it as a manifest, or refuses it with
                    SCHEMA at byte 8 (not a model file), never FRAME at byte 0

Every row of the table whose front end is CLI, Rust, Python, npm or C is driven by a runner here
or listed in NOT_DRIVEN with the reason, so a row added to the table without a runner fails.
Needs: the release `kiln` ($KILN, else $CARGO_TARGET_DIR/release/kiln), the installed Python
package, kiln-wasm/pkg, libkiln.a ($CARGO_TARGET_DIR/release), a C compiler, openssl.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
KILN = Path(os.environ.get("KILN") or TARGET / "release" / "kiln")
TABLE = ROOT / "docs" / "verification.md"
FILES = ("good", "truncated", "flipped", "foreign", "sharded", "signed")

# Rows of the table that no runner drives, and why (each one is still checked to exist).
NOT_DRIVEN = {
    ("CLI", "kiln validate -"): "standard input: the file row's checks on a pipe",
    ("CLI", "kiln verify --pubkey KEY FILE"): "signed models against a key only",
    ("CLI", "kiln convert IN -o OUT"): "a conversion, not a check",
    ("Python", "kiln.verify"): "signed models against a key only",
    ("Python", "kiln.convert"): "a conversion, not a check (kiln convert's, in process)",
    ("Python", "kiln.onnx.session"): "an ONNX graph, not a Kiln file",
    ("Rust", "Model::parse_trusted"): "signed models against a key only",
    ("Rust", "update::UpdateCheck"): "signed updates as they arrive, against a key",
    ("npm", "openRemote"): "Range requests over HTTP; reads no payload",
    ("npm", "remote.load"): "Range requests over HTTP",
    ("npm", "createOnnxSession"): "an ONNX graph, not a Kiln file",
    ("C", "kiln_model_verify_signed"): "signed models against a key only",
    ("C", "kiln_source_verify_model"): "kiln_model_verify through a read callback (kiln-c/tests/c)",
    ("C", "kiln_incremental_*"): "standalone blocks fed in chunks (kiln-c/tests/c)",
}


def table_rows():
    """{(front end, call): digests-by-default cell} from docs/verification.md's table; the call is
    the first `code` span of the call cell."""
    rows = {}
    for line in TABLE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or cells[0] in ("front end", "") or set(cells[0]) <= {"-"}:
            continue
        m = re.search(r"`([^`]+)`", cells[1])
        if not m:
            continue
        digests = cells[3].replace("*", "").strip()
        rows[(cells[0], call_name(m.group(1)))] = digests
        NAMED[(cells[0], call_name(m.group(1)))] = {call_name(c) for c in re.findall(r"`([^`]+)`", cells[1])}
    return rows


# {(front end, row's call): every call its call cell names} (`kiln.flax.load_file` in
# `kiln.torch.load_file`'s row): a runner's call must be its row's or named in that row.
NAMED = {}


def call_name(text):
    """A call as the table's cell and a runner both name it: its argument list left out
    (`kiln_model_verify(data, len, flags, ...)` is `kiln_model_verify`)."""
    return re.sub(r"\(.*\)$", "", text.strip())


def hashes(cell):
    """True for "yes"/"always", False for "no", None for "n/a"-like cells (no payload to hash)."""
    word = cell.split()[0].lower().strip("*") if cell else ""
    return {"yes": True, "always": True, "no": False}.get(word)


def make_files(tmp):
    import numpy as np
    from safetensors.numpy import save_file

    rng = np.random.default_rng(42)
    save_file({
        "a.weight": rng.standard_normal((64, 32)).astype(np.float32),
        "a.bias": np.arange(32, dtype=np.float32),
        "b.weight": rng.standard_normal((32, 16)).astype(np.float16),
    }, tmp / "foreign.safetensors")
    kiln = lambda *a: subprocess.run([str(KILN), *map(str, a)], check=True, capture_output=True)  # noqa: E731
    kiln("convert", tmp / "foreign.safetensors", "-o", tmp / "good.kiln")
    (tmp / "sharded").mkdir()
    kiln("convert", tmp / "foreign.safetensors", "-o", tmp / "sharded" / "model.kiln", "--max-shard-size", "5KB")
    good = (tmp / "good.kiln").read_bytes()
    (tmp / "truncated.kiln").write_bytes(good[: len(good) - 100])
    flipped = bytearray(good)
    flipped[-10] ^= 1  # inside b.weight's payload, the last tensor
    (tmp / "flipped.kiln").write_bytes(bytes(flipped))
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(tmp / "key.pem")], check=True,
                   capture_output=True)
    kiln("sign", "--key", tmp / "key.pem", "--version", "1", "--target", "demo", "--output", tmp / "signed.kiln",
         tmp / "good.kiln")
    return {
        "good": tmp / "good.kiln", "truncated": tmp / "truncated.kiln", "flipped": tmp / "flipped.kiln",
        "foreign": tmp / "foreign.safetensors", "sharded": tmp / "sharded" / "model.kiln",
        "signed": tmp / "signed.kiln",
    }


def expected(cell, file, by_path, foreign_ok=False):
    h = hashes(cell)
    if h is None:
        # "n/a": the call takes a standalone tensor directory only, and every file here starts
        # with a model file's frame (or is foreign): the directory magic is checked first.
        return {"ok": False, "code": "FRAME", "offset": 0}
    if file in ("good", "signed"):
        return {"ok": True, "digests_checked": bool(h)}
    if file == "truncated":
        return {"ok": False, "code": "EOF"}
    if file == "flipped":
        return {"ok": False, "code": "DIGEST"} if h else {"ok": True, "digests_checked": False}
    if file == "foreign":
        return {"ok": True} if foreign_ok else {"ok": False, "code": "FRAME", "offset": 0}
    if file == "sharded":
        if by_path:
            return {"ok": True, "digests_checked": bool(h)}
        # The manifest's bytes alone: a front door opens it as what it is (and has no payload of
        # its own to hash); a call that returns a directory refuses it as not a model file. Never
        # FRAME at byte 0, which would say the call did not know it for Kiln.
        return [{"ok": True, "digests_checked": False}, {"ok": False, "code": "SCHEMA", "offset": 8}]
    raise ValueError(file)


# Runners. Each front end prints one JSON line per call and file: {"call", "row" (the row whose
# cells apply, when not the call's own: npm's open), "by_path" (the call was given a path, so a
# manifest opens its shards), "file", "ok", "code" and "offset" when rejected, "digests_checked"
# when the call reports it}. A flag the call does not report is absent, and then not compared.

def call(cmd, front):
    """A front end's driver; its own failure (not a verdict) stops the run with its output."""
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"the {front} driver failed ({p.returncode}): {' '.join(map(str, cmd))}\n{p.stdout}{p.stderr}")
    return p.stdout


def lines(front, text):
    out = []
    for line in text.splitlines():
        j = json.loads(line)
        j["front"] = front
        j.setdefault("row", j["call"])
        out.append(j)
    return out


def run_cli(files):
    out = []
    for name, path in files.items():
        p = subprocess.run([str(KILN), "validate", "--json", str(path)], capture_output=True, text=True)
        j = json.loads(p.stdout)
        v = {"front": "CLI", "call": "kiln validate FILE", "row": "kiln validate FILE", "by_path": True,
             "file": name, "ok": j["ok"], "foreign_ok": True}
        if not j["ok"]:
            v.update(code=j["error"], offset=j["offset"])
        if "digests_verified" in j:
            v["digests_checked"] = j["digests_verified"]
        out.append(v)
        # inspect: exit 0 and the table, or exit 1 and the verdict's JSON object.
        p = subprocess.run([str(KILN), "inspect", "--json", str(path)], capture_output=True, text=True)
        v = {"front": "CLI", "call": "kiln inspect FILE", "row": "kiln inspect FILE", "by_path": True,
             "file": name, "ok": p.returncode == 0, "foreign_ok": True}
        if p.returncode != 0:
            j = json.loads(p.stdout)
            v.update(code=j["error"], offset=j["offset"])
        out.append(v)
    return out


def run_python(files):
    return lines("Python", call([sys.executable, HERE / "verdict_py.py", json.dumps({k: str(v) for k, v in files.items()})],
                                "Python"))


def run_node(files):
    pkg = Path(os.environ.get("KILN_WASM_PKG") or ROOT / "kiln-wasm" / "pkg")
    return lines("npm", call(["node", HERE / "verdict.mjs", pkg / "index.js",
                              json.dumps({k: str(v) for k, v in files.items()})], "npm"))


def run_c(files, tmp):
    lib = TARGET / "release" / "libkiln.a"
    exe = tmp / "verdict-c"
    call(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'kiln-c' / 'include'}",
          HERE / "verdict.c", lib, "-lpthread", "-ldl", "-lm", "-o", exe], "C compiler")
    return lines("C", call([exe, *(f"{k}={v}" for k, v in files.items())], "C"))


def run_rust(files):
    exe = Path(os.environ.get("KILN_VERDICT_RS") or TARGET / "debug" / "examples" / "verdict")
    return lines("Rust", call([exe, *(f"{k}={v}" for k, v in files.items())], "Rust"))


def compare(got, want):
    """Equal on every field the table fixes (on one of them, when the table allows several); a
    "digests checked" flag the call does not report is left out (main() names those calls)."""
    if isinstance(want, list):
        return any(compare(got, w) for w in want)
    return all(got.get(k) == v for k, v in want.items() if k in got or k != "digests_checked")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="the table's rows and whether each is driven")
    args = ap.parse_args()
    rows = table_rows()
    in_scope = {k for k in rows if k[0] in ("CLI", "Rust", "Python", "npm", "C")}
    failures = [f"NOT_DRIVEN names {k}, which is not a row of {TABLE.name}" for k in NOT_DRIVEN if k not in rows]
    if args.list:
        for key in sorted(in_scope):
            why = NOT_DRIVEN.get(key)
            print(f"{key[0]:7} {key[1]:44} {'not driven: ' + why if why else 'driven'}")
        return 0
    with tempfile.TemporaryDirectory(prefix="kiln-verdicts-") as t:
        tmp = Path(t)
        files = make_files(tmp)
        got = run_cli(files) + run_rust(files) + run_python(files) + run_node(files) + run_c(files, tmp)
    driven, silent, reported, seen = set(), set(), set(), {}
    for v in got:
        call, row = (v["front"], v["call"]), (v["front"], v["row"])
        if row not in rows or (call not in rows and call[1] not in NAMED.get(row, ())):
            failures.append(f"{v['front']} `{v['call']}` (row `{v['row']}`): not a row of {TABLE.name}")
            continue
        driven.add(call)
        seen.setdefault((call, row), set()).add(v["file"])
        want = expected(rows[row], v["file"], v["by_path"], v.get("foreign_ok", False))
        result = {k: v[k] for k in ("ok", "code", "offset", "digests_checked") if k in v}
        (reported if "digests_checked" in v else silent).add(f"{v['front']} {v['call']}")
        good = compare(result, want)
        label = v["call"] if v["row"] == v["call"] else f"{v['call']} (as {v['row']})"
        print(f"{'ok  ' if good else 'FAIL'} {v['front']:6} {label:36} {v['file']:9} {json.dumps(result)}")
        if not good:
            failures.append(f"{v['front']} `{label}` on {v['file']}: got {result}, its row says {want}")
    for (call, row), names in seen.items():
        if set(FILES) - names:
            failures.append(f"{call[0]} `{call[1]}`: no verdict on {', '.join(sorted(set(FILES) - names))}")
    for key in sorted(in_scope - driven):
        if key not in NOT_DRIVEN:
            failures.append(f"{key[0]} `{key[1]}`: a row of {TABLE.name} with no runner and no reason in NOT_DRIVEN")
    print(f"\n{len(got)} verdicts, {len(driven)} rows driven, {len(NOT_DRIVEN)} not (NOT_DRIVEN says why);"
          f" {len(failures)} failures")
    silent -= reported
    if silent:
        print("calls that do not report whether digests were checked (verdict and code compared):",
              ", ".join(sorted(silent)))
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
