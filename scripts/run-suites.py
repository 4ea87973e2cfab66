#!/usr/bin/env python3
"""Every suite of the project, side by side on the machine's two cores, each with its output in
its own log; at the end a table of suite, verdict and seconds. scripts/test-all.sh runs it.

    scripts/run-suites.py                       # every suite (setup parts included)
    scripts/run-suites.py --only clippy,miri-s390x   # some suites (and the setup they need)
    scripts/run-suites.py --list                # the suites, what each needs, its budget

Jobs start in the order listed below as soon as what they need is done and there is room (a
cargo build counts two cores, Miri and fuzzing one, downloads none). Host suites share one
target directory outside the clone ($KILN_CACHE/target), so a second run on the machine
rebuilds only the project's own crates. Logs: target/test-logs/<suite>.log.

Environment: KILN_SEED (the budgeted suites' sample; default: the commit), KILN_CACHE
(default ~/.cache/kiln), CARGO_TARGET_DIR (default $KILN_CACHE/target), KILN_MIRI_SECONDS,
KILN_BE_SECONDS, KILN_FUZZ_SECONDS (the budgets).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from budget import seed_of_run  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("KILN_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kiln")
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or CACHE / "target")
LOGS = ROOT / "target" / "test-logs"
# Two cores, four units: two build suites (two units each), or one and two single-threaded
# suites (Miri, fuzzing). A build suite spends much of its time outside cargo (running tests,
# Node, pytest, QEMU) on fewer than two cores; a second one fills that, and while both are
# inside cargo one waits on the shared target directory's lock. With three units (one build
# suite at a time) a warm run took 24.2 min, its build suites alone 20 min end to end.
CAPACITY = 4
# Wall-clock budgets of the whole run (README, issue 29): a run on a new machine, setup
# included, and a second run on the same machine.
BUDGET_FRESH = 45 * 60
BUDGET_WARM = 20 * 60
WARM_MARK = CACHE / "last-run"

# No job may hold the run past this: a hung suite fails with its log shown instead of
# running the whole run into CI's 90-minute stop with nothing reported.
JOB_LIMIT = int(os.environ.get("KILN_JOB_LIMIT", str(30 * 60)))

# The core's and the model crate's optional features that no workspace member turns on
# (defmt aside).
CORE_EXTRA_FEATURES = ",".join(f"kiln-nostd/{f}" for f in ("derive",))
MODEL_EXTRA_FEATURES = ",".join(f"kiln-model/{f}" for f in (
    "embedded-storage", "embedded-io", "embedded-storage-async", "embedded-io-async", "slots"))


def every_feature(*crates):
    """`crate/feature,...` for every feature the crates' Cargo.toml declare (check-foreign turns
    them all on at once), read from cargo's metadata so that the list is the manifests' own."""
    meta = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    packages = {p["name"]: p for p in json.loads(meta.stdout)["packages"]}
    return ",".join(f"{c}/{f}" for c in crates for f in sorted(packages[c]["features"]) if f != "default")


# The one feature set of the workspace's test build (cargo-test), which other suites reuse.
WORKSPACE_FEATURES = f"{CORE_EXTRA_FEATURES},{MODEL_EXTRA_FEATURES}"
FOREIGN_TARGETS = ("x86_64-pc-windows-gnu", "x86_64-apple-darwin", "aarch64-apple-darwin")

MIRI_SECONDS = os.environ.get("KILN_MIRI_SECONDS", "210")
BE_SECONDS = os.environ.get("KILN_BE_SECONDS", "90")
FUZZ_SECONDS = os.environ.get("KILN_FUZZ_SECONDS", "150")


class Job:
    def __init__(self, name, cmd, needs=(), cpu=2, env=None, note="", after=(), limit=JOB_LIMIT):
        self.name = name
        self.limit = limit  # seconds before the job is stopped and counted as failed
        self.after = list(after)  # jobs it waits for, whatever their verdict (order only)
        self.cmd = cmd  # a bash command line, run from the repository root
        self.needs = list(needs)
        self.cpu = cpu  # cores it keeps busy
        self.env = env or {}
        self.note = note
        self.proc = None
        self.started = None
        self.seconds = None
        self.cpu_seconds = 0.0  # user + system, the job and what it waited for
        self.verdict = None


def jobs():
    """The suites in the order they should start; cpu: the cores each keeps busy. The longest
    chain (wasm-bindgen's install, the npm package and browser, then the Python package that
    reads its files) and the single-core suites go first."""
    cache = lambda name: {"CARGO_TARGET_DIR": str(CACHE / name)}  # noqa: E731
    miri = lambda arch, order, after=(): Job(  # noqa: E731
        f"miri-{arch}", f"scripts/budget.py miri {arch}-unknown-linux-gnu --seconds {MIRI_SECONDS}", ["setup-rust"],
        cpu=1, env=cache(f"target-miri-{arch}"), note=f"Miri, {order}, a {MIRI_SECONDS} s sample", after=after)
    # The three foreign targets in one cargo run, which shares the host's build scripts and macros,
    # with every feature of the core and the model crate (the OS-specific code behind them: the
    # model crate's `std` file reads) turned on in that one pass, not in a second one.
    targets = " ".join(f"--target {t}" for t in FOREIGN_TARGETS)
    every = every_feature("kiln-nostd", "kiln-model")
    check = Job(
        "check-foreign", f"cargo clippy --workspace --exclude kiln-wasm --all-targets --locked --features {every}"
        f" {targets} -- -D warnings",
        ["setup-rust"], note=f"checked and linted for {', '.join(FOREIGN_TARGETS)}, not linked")
    return [
        Job("setup-apt", "scripts/setup.sh apt", cpu=0, note="Debian packages"),
        Job("setup-rust", "scripts/setup.sh rust", cpu=0, note="targets, components, nightly Miri"),
        Job("setup-python", "scripts/setup.sh python", cpu=0, note="pip packages"),
        # Only python-package needs these, so the 5.8 GB download of a new machine delays nothing else.
        Job("setup-frameworks", "scripts/setup.sh frameworks", cpu=0, note="PyTorch and JAX (CPU) from PyPI"),
        Job("setup-wasm-bindgen", "scripts/setup.sh wasm-bindgen", note="cargo install wasm-bindgen-cli 0.2.130"),
        Job("python-reference", "python3 -m unittest discover -s spec/reference", ["setup-python"], cpu=1,
            note="the Python reference codec and generator"),
        Job("generated", "python3 fuzz/make_seeds.py --check && python3 spec/regressions/make_regressions.py --check"
            " && python3 spec/reference/gen_v2_cases.py --check && python3 spec/reference/gen_model_cases.py --check"
            " && python3 spec/reference/gen_dequant_cases.py --check && python3 spec/examples/make_digits_onnx.py --check",
            ["setup-python"], cpu=1,
            note="fuzz seeds, regression cases, goldens and digits-mlp.onnx are current"),
        Job("fmt", "cargo fmt --all --check", ["setup-rust"], cpu=1, note="cargo fmt --check"),
        Job("module-cycles", "python3 scripts/module-cycles.py --self-test", cpu=1,
            note="no module imports one that imports it back, in any crate (Cargo.toml targets)"),
        miri("x86_64", "little-endian"),
        Job("clippy", "cargo clippy --workspace --all-targets --locked -- -D warnings", ["setup-rust"],
            note="the workspace, -D warnings"),
        # After the main test build: two Miri runs at once would keep the builds waiting.
        miri("s390x", "big-endian", after=["cargo-test"]),
        # The core's optional features no member turns on go into the one workspace build, so the
        # core's suite runs with every feature without a second build (defmt: see no_std, clippy-features;
        # its linker script cannot link the host's cdylibs).
        Job("cargo-test", f"cargo test --workspace --locked --features {WORKSPACE_FEATURES}",
            ["setup-rust", "setup-python", "setup-apt"],
            note="unit, integration, doc and CLI tests; the differential test; the core and the model crate with"
            " every feature but defmt"),
        # kiln-wasm's Rust tests and the kiln CLI its Node tests run: cargo-test's workspace build.
        Job("wasm-and-web", "kiln-wasm/ci.sh", ["setup-rust", "setup-apt", "setup-wasm-bindgen"],
            env={"KILN_WORKSPACE_FEATURES": WORKSPACE_FEATURES},
            note="the npm package under Node, the page in headless Chromium"),
        # The wheel PyPI would get, built once: python-package tests it.
        Job("python-wheel", "scripts/python-wheel.sh", ["setup-rust", "setup-python"], limit=15 * 60,
            note="the manylinux2014 abi3 wheel (maturin --zig), audited, a smoke in fresh venvs"),
        # The interop tests read files with the npm package, so they come after it.
        Job("python-package", "scripts/python-package.sh target/wheels/*.whl",
            ["setup-rust", "setup-python", "setup-frameworks", "wasm-and-web", "python-wheel"],
            note="the wheel installed, its lints, pytest"),
        Job("setup-cargo-fuzz", "scripts/setup.sh cargo-fuzz", note="cargo install cargo-fuzz 0.13.2"),
        Job("fuzz", f"fuzz/ci.sh --budget {FUZZ_SECONDS}", ["setup-rust", "setup-cargo-fuzz"], cpu=1,
            env=cache("target-fuzz"), note=f"every target, {FUZZ_SECONDS} s in all"),
        Job("big-endian", f"scripts/budget.py big-endian --seconds {BE_SECONDS}", ["setup-rust", "setup-apt"],
            env=cache("target-s390x"), note=f"qemu-s390x, a {BE_SECONDS} s sample"),
        Job("setup-cbindgen", "scripts/setup.sh cbindgen", note="cargo install cbindgen 0.29.4"),
        Job("c-api", "kiln-c/ci.sh", ["setup-rust", "setup-apt", "setup-cbindgen"],
            note="kiln.h current, libkiln.a, the C and C++ tests (ASan, UBSan), CMake"),
        Job("clippy-features",
            "cargo clippy -p kiln-nostd -p kiln-model -p kiln-hk --all-targets --all-features --locked -- -D warnings",
            ["setup-rust"], note="the core, the model crate and the HK reader with every feature"),
        # The published crates alone (default features, then every feature, as docs.rs builds
        # them), then the workspace, whose members turn on some of the core's features.
        Job("docs", "export RUSTDOCFLAGS='-D warnings'"
            " && cargo doc --no-deps --locked -p kiln-nostd -p kiln-derive -p kiln-hk -p kiln-model"
            " && cargo doc --no-deps --locked -p kiln-nostd -p kiln-model --all-features"
            " && cargo doc --no-deps --locked --workspace",
            ["setup-rust"], limit=5 * 60, note="rustdoc -D warnings: the published crates, the workspace"),
        # Cargo verifies each package against the others' .crate files through a local registry,
        # and takes a registry package as immutable: its sources extracted once under
        # $CARGO_HOME/registry/src and its build fingerprinted by name and version (0.1.0 until a
        # release). A second run on a machine would build the first run's core. So: a target
        # directory of its own, our crates' builds and extracted sources removed first.
        Job("publish-dry-run", 'rm -rf "$CARGO_TARGET_DIR"/debug/.fingerprint/kiln-* "$CARGO_TARGET_DIR"/debug/deps/*kiln_*'
            ' "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/kiln-{derive,nostd,hk,model}-*'
            " && cargo publish --dry-run --locked -p kiln-derive -p kiln-nostd -p kiln-hk -p kiln-model",
            ["setup-rust"], limit=5 * 60, env=cache("target-publish"),
            note="the four crates packaged and built as crates.io would"),
        # The mutation test's 100,000 cases run in cargo-test; here a fifth of them.
        # One cargo run for the three crates: one build of the core for them all.
        Job("i686", "KILN_INCR_CASES=20000 cargo test -p kiln-nostd -p kiln-model -p kiln-hk --features"
            " kiln-nostd/alloc,kiln-nostd/derive,kiln-nostd/sha2,kiln-model/std --locked"
            " --target i686-unknown-linux-gnu",
            ["setup-rust", "setup-apt"], note="the core's, the model crate's and the HK reader's suites where usize"
            " is 32 bits"),
        Job("no_std", "for t in thumbv7em-none-eabihf thumbv6m-none-eabi riscv32imc-unknown-none-elf"
            " wasm32-unknown-unknown; do"
            " cargo build -p kiln-nostd -p kiln-model -p kiln-hk --release --locked --target $t || exit 1; done &&"
            " cargo build -p kiln-nostd -p kiln-model --release --locked --target thumbv7em-none-eabihf"
            " --features kiln-nostd/defmt,kiln-model/defmt &&"
            " for t in thumbv6m-none-eabi riscv32imc-unknown-none-elf; do"
            " cargo build -p kiln-model --release --locked --target $t"
            " --features embedded-storage,embedded-io,embedded-storage-async,embedded-io-async,sha2,slots || exit 1; done",
            ["setup-rust"], note="the core (and the model crate, the HK reader) for the card's four targets, with"
            " defmt, and with the source adapters"),
        Job("setup-defmt-print", "scripts/setup.sh defmt-print", note="cargo install defmt-print 1.2.0"),
        Job("firmware", "firmware-demo/ci.sh", ["setup-rust", "setup-apt", "setup-defmt-print"],
            note="the QEMU demo, the defmt log, the no-panic link proof"),
        Job("firmware-c", "firmware-c/ci.sh", ["setup-rust", "setup-apt"], note="the C firmware demo under QEMU"),
        Job("firmware-riscv", "firmware-riscv/ci.sh", ["setup-rust", "setup-apt"], limit=5 * 60,
            note="the RISC-V demo (riscv32imc) under QEMU virt"),
        Job("firmware-pflash", "firmware-pflash/ci.sh", ["setup-rust", "setup-apt"], limit=5 * 60,
            note="A/B slots on QEMU virt's file-backed pflash: killed mid-update, restarted on the same file, recovers"),
        check,
        Job("rss", "scripts/rss.sh", ["setup-apt"], note="peak RSS on hostile files"),
        # The release kiln rss.sh built, the Python package python-package installed (after the npm
        # package), the kiln-cli test build cargo-test made, openssl (setup-apt): each doc block runs
        # or is marked.
        Job("doc-blocks", "cargo build --release --locked -q -p kiln-cli && scripts/docs/check.py --self-test"
            " && scripts/docs/check.py",
            ["setup-rust", "setup-apt", "setup-python", "python-package"], after=["cargo-test", "rss"], limit=5 * 60,
            note="every block of the docs runs or is marked; every kiln command line parsed"),
        # The same files through every front end, each verdict against its row of
        # docs/verification.md: the release kiln and libkiln.a (c-api built it), the installed Python
        # package (python-package), the npm package (wasm-and-web), the Rust driver cargo-test built.
        # The Rust driver with cargo-test's features, so that after it the build is its artifact.
        Job("verdicts", "cargo build --release --locked -q -p kiln-cli -p kiln-c"
            f" && cargo build --workspace --examples --locked -q --features {WORKSPACE_FEATURES}"
            " && scripts/verdicts/verdicts.py",
            ["setup-rust", "setup-apt", "setup-python", "python-package", "c-api"], after=["cargo-test"], cpu=1,
            limit=5 * 60, note="one verdict per front end (CLI, Rust, Python, npm, C) against docs/verification.md"),
        # The release build rss.sh made; the full 4 GiB run is local (README). bench-onnx.py
        # uses kiln-py as python-package installed it.
        Job("bench-smoke", "python3 scripts/bench-checkpoints.py --mib 64 --runs 1 --check"
            " && python3 scripts/bench-checkpoints.py --single --mib 64 --tensors 2000 --runs 1"
            " && python3 scripts/bench-onnx.py --smoke", ["setup-python"],
            after=["rss", "python-package"], note="the checkpoint and onnxruntime benchmarks at a smoke size"),
    ]


def run(selected, table_only=False):
    todo = jobs()
    if selected:
        unknown = set(selected) - {j.name for j in todo}
        if unknown:
            raise SystemExit(f"unknown suites: {', '.join(sorted(unknown))}")
        keep = set()
        stack = list(selected)
        while stack:
            n = stack.pop()
            if n not in keep:
                keep.add(n)
                stack += next(j for j in todo if j.name == n).needs
        todo = [j for j in todo if j.name in keep]
    if table_only:
        for j in todo:
            print(f"{j.name:32} needs {','.join(j.needs) or '-':40} {j.note}")
        return 0

    warm = WARM_MARK.exists()
    LOGS.mkdir(parents=True, exist_ok=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CARGO_TARGET_DIR": str(TARGET), "CARGO_TERM_COLOR": "never"}
    env["KILN_SEED"] = str(seed_of_run())
    print(f"run: {'warm (a previous run finished on this machine)' if warm else 'fresh machine'};"
          f" KILN_SEED={env['KILN_SEED']}; target {TARGET}; logs {LOGS.relative_to(ROOT)}/", flush=True)
    t0 = time.monotonic()
    running, done = [], {}
    pending = list(todo)
    names_todo = {j.name for j in todo}
    try:
        while pending or running:
            for j in list(running):
                rc = reap(j, block=False)
                over = rc is None and time.monotonic() - j.started > j.limit
                if over:
                    os.killpg(j.proc.pid, signal.SIGKILL)  # the job's whole process group
                    rc = reap(j, block=True)
                if rc is None:
                    continue
                j.seconds = time.monotonic() - j.started
                j.verdict = f"FAILED (over {j.limit} s)" if over else "ok" if rc == 0 else f"FAILED ({rc})"
                running.remove(j)
                done[j.name] = j
                report(j)
            busy = sum(j.cpu for j in running)
            for j in list(pending):
                failed_need = [n for n in j.needs if n in done and done[n].verdict != "ok"]
                if failed_need:
                    j.seconds, j.verdict = 0.0, f"not run ({failed_need[0]} failed)"
                    pending.remove(j)
                    done[j.name] = j
                    print(f"=== {j.name}: {j.verdict}", flush=True)
                    continue
                if any(n not in done for n in j.needs) or any(n in names_todo and n not in done for n in j.after):
                    continue
                if running and busy + j.cpu > CAPACITY:
                    continue
                start(j, env)
                running.append(j)
                pending.remove(j)
                busy += j.cpu
            time.sleep(0.2)
    finally:
        # Each job has its own process group (so a limit stops all of it); an interrupted
        # runner stops them too.
        for j in running:
            if j.proc.poll() is None:
                os.killpg(j.proc.pid, signal.SIGKILL)
    wall = time.monotonic() - t0
    return summary(todo, wall, warm, whole=not selected)


def start(j, env):
    print(f"=== {j.name}: started ({j.note or j.cmd})", flush=True)
    log = open(LOGS / f"{j.name}.log", "w")
    log.write(f"$ {j.cmd}\n")
    log.flush()
    j.started = time.monotonic()
    j.proc = subprocess.Popen(["bash", "-c", j.cmd], cwd=ROOT, env={**env, **j.env}, stdout=log,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()


def reap(j, block):
    """The job's exit code once its shell has exited (else None), and its CPU seconds: user and
    system time of the shell and every process it waited for, so a suite's share of the two
    cores is known as well as its wall-clock seconds."""
    pid, status, usage = os.wait4(j.proc.pid, 0 if block else os.WNOHANG)
    if pid == 0:
        return None
    j.proc.returncode = os.waitstatus_to_exitcode(status)
    j.cpu_seconds = usage.ru_utime + usage.ru_stime
    return j.proc.returncode


def report(j):
    print(f"=== {j.name}: {j.verdict} ({j.seconds:.0f} s, {j.cpu_seconds:.0f} s of CPU)", flush=True)
    if j.verdict != "ok":
        lines = (LOGS / f"{j.name}.log").read_text(errors="replace").splitlines()
        shown = lines[-200:]
        print(f"--- {j.name}: the last {len(shown)} of {len(lines)} lines of target/test-logs/{j.name}.log")
        print("\n".join(shown))
        print(f"--- end of {j.name}", flush=True)


def summary(todo, wall, warm, whole):
    print()
    print(f"{'suite':32} {'verdict':28} {'seconds':>8} {'CPU s':>8}")
    for j in todo:
        print(f"{j.name:32} {j.verdict:28} {j.seconds:8.0f} {j.cpu_seconds:8.0f}")
    slow = sorted(todo, key=lambda j: -j.seconds)[:3]
    print(f"slowest: {', '.join(f'{j.name} {j.seconds:.0f} s' for j in slow)}")
    budget = BUDGET_WARM if warm else BUDGET_FRESH
    kind = "warm" if warm else "fresh-machine"
    print(f"total: {wall:.0f} s wall ({wall / 60:.1f} min) against the {kind} budget of {budget // 60} min;"
          f" {sum(j.seconds for j in todo):.0f} s of suites, {sum(j.cpu_seconds for j in todo):.0f} s of CPU")
    if wall > budget:
        print(f"WARNING: this {kind} run took {wall / 60:.1f} min, over its {budget // 60} min budget")
    failed = [j for j in todo if j.verdict != "ok"]
    # After a whole run the machine is warm, whatever the verdicts: what setup installed stays.
    if whole:
        WARM_MARK.write_text(time.strftime("%Y-%m-%dT%H:%M:%S\n"))
    print(f"suites: {len(todo) - len(failed)} passed, {len(failed)} failed")
    if failed:
        print(f"FAILED: {' '.join(j.name for j in failed)}")
        return 1
    print("all suites passed")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated suites (and what they need)")
    ap.add_argument("--list", action="store_true", help="list the suites and exit")
    a = ap.parse_args()
    return run(a.only.split(",") if a.only else None, a.list)


if __name__ == "__main__":
    sys.exit(main())
