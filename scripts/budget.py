#!/usr/bin/env python3
"""Run the core's slow suites (Miri, the big-endian suite under qemu-s390x) in full or
as a seeded sample that fits a time budget. They cover the no_std readers of hostile bytes:
kiln-nostd, the model crate and the HK reader (kiln-model, kiln-hk: both were part of the
core), in one cargo run.

    scripts/budget.py miri x86_64-unknown-linux-gnu --seconds 210   # CI: a sample
    scripts/budget.py miri s390x-unknown-linux-gnu --full           # every test
    scripts/budget.py big-endian --seconds 90
    scripts/budget.py big-endian --full --write-costs               # and refresh the cost table
    scripts/budget.py miri x86_64-unknown-linux-gnu --full --write-costs --cap 60 --files hk
                                                   # quick refresh: each test alone, at most 60 s
    scripts/budget.py miri x86_64-unknown-linux-gnu --full --write-costs --cap 60 --unknown
                                                   # only the tests the table has no row for
    KILN_SEED=1843653853 scripts/budget.py big-endian --dry-run     # print a run's sample again

The sample is a pure function of the seed (KILN_SEED, else the commit), the test list and
the cost table (scripts/costs/<suite>.tsv, seconds per test from the last full run, scaled to
a CI run's seconds by CONTENTION): every
test file gets at least one test, then tests drawn in seeded order fill the budget. So
KILN_SEED=N replays a sample exactly, and each commit draws another. A test too slow for
any budget runs only in the full run (scripts/robustness-full.sh). A sample refuses to run
while its suite's own table lacks a row for one of its tests or keeps one for a test it no
longer has: a test drawn at a guessed cost stops its file at the time limit.
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COSTS = ROOT / "scripts" / "costs"
# A test the cost table does not know yet (added since the last full run) is
# assumed to cost this much, so a new slow test cannot blow the budget by much.
UNKNOWN_COST = 5.0
# Starting one file's test binary costs this much on top of its tests' own seconds, on a quiet
# machine like the table's. Under Miri the runner compiles the test crate from source and
# interprets the harness's start-up: 1.9-2.8 s for a test file, 8.3 s for the unit tests, 2.45 s
# a file on average (every file runs in every sample, so the mean gives the sum).
START_COST = {"miri": 2.5, "big-endian": 2.0}
# A CI run's seconds per quiet second: a sample's estimate is scaled by it, so that its budget
# is seconds of a CI run. Miri's samples share the two cores with the builds: the sample of
# 9d9b667 (150 quiet seconds of tests and 59 of start-up) took 277 s on x86_64, started beside
# clippy and cargo-test (1.33x), and 199 s on s390x, after them (0.95x). The big-endian suite's
# harness runs two tests at a time, which its table (seconds per test) does not count: its
# files took 49 s for a 90 s estimate.
CONTENTION = {"miri": 1.4, "big-endian": 1.0}
# A sampled file may run SLACK times its estimate plus GRACE seconds (a slower machine, a
# cold cache) before it is stopped and counted as failed.
SLACK = 4
GRACE = 60.0
# The cost recorded for a test stopped at the measuring cap (--cap): more than any budget.
OVER_CAP = 1e6
# The crates the suites test. Their test files' stems must differ (the cost table keys a
# test by its file's stem, "lib" for the unit tests of both).
PACKAGES = ("kiln-nostd", "kiln-model", "kiln-hk")
FEATURES_MIRI = "kiln-nostd/alloc,kiln-nostd/derive,kiln-nostd/sha2,kiln-hk/sha2"
BIG_ENDIAN = ("s390x-", "powerpc-", "powerpc64-", "mips-", "mips64-", "sparc64-")


def seed_of_run() -> int:
    """KILN_SEED if set, else the first 32 bits of the commit, else the clock."""
    env = os.environ.get("KILN_SEED")
    if env:
        return int(env, 0)
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        return int(head.stdout.strip()[:8], 16)
    except (OSError, subprocess.CalledProcessError, ValueError):
        return int(time.time())


class Suite:
    """How to build, list and run one suite's test binaries."""

    def __init__(self, name: str, cargo: list, env: dict):
        self.name = name
        self.cargo = cargo  # the cargo command up to the target selection
        # libtest's --report-time is unstable: RUSTC_BOOTSTRAP lets a stable-built harness take
        # it. Set for the listing too: cargo fingerprints it, so a listing built without it would
        # leave every file's first timed run rebuilding its test binary (and, the first time,
        # every dependency) inside that file's time limit.
        self.env = {**os.environ, **env, "RUSTC_BOOTSTRAP": "1"}

    def command(self, selector: list, harness: list) -> list:
        return self.cargo + selector + ["--"] + harness

    def list_tests(self) -> tuple:
        """({file: [test names not ignored]}, {(file, name) of every test, ignored too}); file is
        'lib' or the integration test's stem. One listing run (libtest's JSON list says which
        tests are ignored): under Miri each test binary's start-up is interpreted, so a second
        run for `--ignored` cost a minute."""
        out = subprocess.run(
            self.command(["--lib", "--tests"], ["--list", "--format", "json", "-Z", "unstable-options"]),
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if out.returncode != 0:
            sys.stdout.write(out.stdout)
            raise SystemExit(f"{self.name}: listing the tests failed")
        files = {}
        every = set()
        current = None
        for line in out.stdout.splitlines():
            m = re.search(r"Running (?:unittests )?(\S+)", line)
            if m:
                current = "lib" if m.group(1).startswith("src/") else Path(m.group(1)).stem
                files.setdefault(current, set())
                continue
            if current is None or not line.startswith("{"):
                continue
            event = json.loads(line)
            if event.get("type") == "test" and event.get("event") == "discovered":
                every.add((current, event["name"]))
                if not event.get("ignore"):
                    files[current].add(event["name"])
        return {f: sorted(t) for f, t in sorted(files.items())}, every

    def run_file(self, file: str, tests, log, timeout=None) -> tuple:
        """Run some (None: all) tests of one file; (ok, {test: seconds}); ok is None on a timeout."""
        selector = ["--lib"] if file == "lib" else ["--test", file]
        harness = ["-Z", "unstable-options", "--report-time"]
        if tests is not None:
            harness += ["--exact"] + list(tests)
        proc = subprocess.Popen(
            self.command(selector, harness), cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )
        times = {}
        timer = None
        if timeout:
            import threading

            import signal

            # The whole group: cargo, its runner and the interpreter under it.
            timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
            timer.start()
        for line in proc.stdout:
            log.write(line)
            log.flush()
            # Failures also go to the suite's own output, which the runner shows.
            if re.match(r"^test .* FAILED|^error|^thread '.*' panicked|Undefined Behavior|^failures:", line):
                sys.stdout.write(f"    {line}")
            m = re.match(r"^test (\S.*) \.\.\. ok <([0-9.]+)s>", line)
            if m:
                times[m.group(1)] = float(m.group(2))
        rc = proc.wait()
        if timer is not None:
            if not timer.is_alive():
                return None, times
            timer.cancel()
        return rc == 0, times


def packages() -> list:
    return [a for p in PACKAGES for a in ("-p", p)]


def miri_suite(target: str) -> Suite:
    big = "1" if target.startswith(BIG_ENDIAN) else "0"
    flags = os.environ.get("MIRIFLAGS", "-Zmiri-deterministic-floats -Zmiri-disable-isolation")
    cargo = ["cargo", "+nightly", "miri", "test", "--no-fail-fast", *packages(), "--features", FEATURES_MIRI,
             "--target", target]
    return Suite(f"miri-{target.split('-')[0]}", cargo, {"MIRIFLAGS": flags, "KILN_EXPECT_BIG_ENDIAN": big})


def big_endian_suite() -> Suite:
    cargo = ["cargo", "test", "--no-fail-fast", *packages(), "--all-features", "--target",
             "s390x-unknown-linux-gnu"]
    env = {
        "CARGO_TARGET_S390X_UNKNOWN_LINUX_GNU_LINKER": os.environ.get(
            "CARGO_TARGET_S390X_UNKNOWN_LINUX_GNU_LINKER", "s390x-linux-gnu-gcc"),
        "CARGO_TARGET_S390X_UNKNOWN_LINUX_GNU_RUNNER": os.environ.get(
            "CARGO_TARGET_S390X_UNKNOWN_LINUX_GNU_RUNNER", "qemu-s390x -L /usr/s390x-linux-gnu"),
        "KILN_EXPECT_BIG_ENDIAN": "1",
    }
    return Suite("big-endian", cargo, env)


def read_costs(name: str) -> dict:
    costs = {}
    path = COSTS / f"{name}.tsv"
    if path.exists():
        for line in path.read_text().splitlines():
            if line and not line.startswith("#"):
                file, test, secs = line.split("\t")
                costs[(file, test)] = float(secs)
    return costs


def write_costs(name: str, file: str, measured: dict, keep: bool = False) -> None:
    """Replace one file's rows of the cost table with what its full run measured (keep: add
    the measured rows to the file's others)."""
    costs = {k: v for k, v in read_costs(name).items() if keep or k[0] != file}
    costs.update({(file, t): s for t, s in measured.items()})
    COSTS.mkdir(exist_ok=True)
    lines = [f"# seconds per test from the last full run of {name} (scripts/budget.py ... --full --write-costs)"]
    lines += [f"{f}\t{t}\t{s:.3f}" for (f, t), s in sorted(costs.items())]
    (COSTS / f"{name}.tsv").write_text("\n".join(lines) + "\n")


def draw(tests: dict, costs: dict, budget: float, seed: int, name: str, start: float, scale: float) -> tuple:
    """A seeded sample within the budget: every file first, then seeded order; costs and start in
    quiet seconds, times scale against the budget. A file whose every test ran past the cap when
    measured is left to the full run (and named): one of its tests would spend the whole budget."""
    rng = random.Random(f"{seed}:{name}")
    cost = lambda f, t: scale * costs.get((f, t), UNKNOWN_COST)  # noqa: E731
    chosen = {f: [] for f in tests}
    full_only = sorted(f for f, names in tests.items()
                       if names and min(costs.get((f, t), UNKNOWN_COST) for t in names) >= OVER_CAP)
    spent = scale * start * sum(1 for f, names in tests.items() if names and f not in full_only)
    share = budget / (2 * max(1, len(tests)))
    for f, names in tests.items():
        if not names or f in full_only:
            continue
        cheap = [t for t in names if cost(f, t) <= share] or [min(names, key=lambda t: cost(f, t))]
        pick = rng.choice(cheap)
        chosen[f].append(pick)
        spent += cost(f, pick)
    rest = [(f, t) for f, names in tests.items() for t in names if t not in chosen[f]]
    rng.shuffle(rest)
    for f, t in rest:
        if spent + cost(f, t) <= budget:
            chosen[f].append(t)
            spent += cost(f, t)
    return {f: sorted(ts) for f, ts in chosen.items()}, spent, full_only


def measure_capped(suite: Suite, tests: dict, plan: dict, cap: float, log_path: Path, keep: bool) -> int:
    """Each planned test alone (None: every test of its file), two at a time, each stopped after
    cap seconds; keep: the file's other rows stay."""
    from concurrent.futures import ThreadPoolExecutor

    def one(ft):
        f, t = ft
        with open(f"{log_path}.{f}.{t.replace(':', '_')}", "w") as log:
            t0 = time.monotonic()
            ok, times = suite.run_file(f, [t], log, timeout=cap)
            return f, t, ok, times.get(t, time.monotonic() - t0)

    work = [(f, t) for f, ts in plan.items() for t in (tests[f] if ts is None else ts)]
    results = {}
    failed = []
    with ThreadPoolExecutor(2) as pool:
        for f, t, ok, secs in pool.map(one, work):
            # A test stopped at the cap costs more than any budget: the sample never draws it.
            results.setdefault(f, {})[t] = secs if ok else OVER_CAP
            print(f"  {f} {t}: {'ok' if ok else 'over the cap' if ok is None else 'FAILED'} {secs:.1f} s", flush=True)
            if ok is False:
                failed.append(f"{f}::{t}")
    for f, times in results.items():
        write_costs(suite.name, f, times, keep)
    print(f"{suite.name}: costs written for {', '.join(results)}")
    if failed:
        print(f"{suite.name}: FAILED {' '.join(failed)}")
        return 1
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", choices=["miri", "big-endian"])
    ap.add_argument("target", nargs="?", default="x86_64-unknown-linux-gnu", help="Miri's target triple")
    ap.add_argument("--seconds", type=float, default=240, help="the sample's budget (estimated from the cost table)")
    ap.add_argument("--full", action="store_true", help="every test, no sample")
    ap.add_argument("--dry-run", action="store_true", help="print the sample and stop")
    ap.add_argument("--write-costs", action="store_true", help="with --full: rewrite scripts/costs/<suite>.tsv")
    ap.add_argument("--files", help="with --full: only these test files (comma-separated; lib is the unit tests)")
    ap.add_argument("--cap", type=float, help="with --full --write-costs: each test alone, stopped after CAP seconds "
                    "and entered as too slow for a sample (two at a time; a quick refresh of the table)")
    ap.add_argument("--unknown", action="store_true", help="with --full --write-costs --cap: only the tests the "
                    "table has no row for (new or renamed since it was written)")
    args = ap.parse_args()

    suite = miri_suite(args.target) if args.suite == "miri" else big_endian_suite()
    started = time.monotonic()
    tests, every = suite.list_tests()
    total = sum(len(t) for t in tests.values())
    costs = read_costs(suite.name)
    # The command that refreshes this suite's table, for the messages below.
    refresh = f"scripts/budget.py {args.suite}{' ' + args.target if args.suite == 'miri' else ''} --full --write-costs"
    # A suite's own table must match its tests (a borrowed one may differ by a cfg): a test it
    # has no row for would be drawn at UNKNOWN_COST whatever it costs (a 70 s test drawn at 5 s
    # stops its file at the time limit), and a renamed test leaves its row behind and comes back
    # unknown. Either fails the sample before it runs, with the command that mends it.
    stale = sorted(k for k in costs if k not in every)
    unknown = [(f, t) for f, ts in tests.items() for t in ts if (f, t) not in costs] if costs else []
    if not args.full and (stale or unknown):
        if stale:
            print(f"{suite.name}: scripts/costs/{suite.name}.tsv has rows for {len(stale)} test(s) this suite does not"
                  f" have (renamed or removed; delete or rename the rows): {' '.join(f'{f}::{t}' for f, t in stale)}")
        if unknown:
            print(f"{suite.name}: scripts/costs/{suite.name}.tsv has no row for {len(unknown)} test(s):"
                  f" {' '.join(f'{f}::{t}' for f, t in unknown)}. Measure them: {refresh} --cap 60 --unknown")
        return 1
    if not costs and args.suite == "miri":
        # Miri's cost is the interpreter's, nearly the same on every target: borrow another's table.
        for other in sorted(COSTS.glob("miri-*.tsv")):
            costs = read_costs(other.stem)
            break
    listed = time.monotonic() - started
    log_path = ROOT / "target" / "test-logs" / f"{suite.name}-tests.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)

    if args.full:
        wanted = args.files.split(",") if args.files else list(tests)
        plan = {f: None for f in tests if f in wanted}
        if args.unknown:
            plan = {f: ts for f in plan if (ts := [t for t in tests[f] if (f, t) in unknown])}
        print(f"{suite.name}: every test, {total} in {len(tests)} files")
    else:
        seed = seed_of_run()
        plan, estimate, full_only = draw(tests, costs, args.seconds, seed, suite.name, START_COST[args.suite],
                                         CONTENTION[args.suite])
        n = sum(len(t) for t in plan.values())
        empty = [f for f, ts in tests.items() if not ts]
        print(f"{suite.name}: seed {seed} (KILN_SEED={seed} replays this sample); {n} of {total} tests in "
              f"{sum(1 for t in plan.values() if t)} of {len(tests) - len(empty) - len(full_only)} files, estimated {estimate:.0f} s"
              f" of a {args.seconds:.0f} s budget ({CONTENTION[args.suite]}x the quiet seconds)"
              + (f" ({', '.join(empty)}: every test ignored in this suite)" if empty else "")
              + (f" ({', '.join(full_only)}: every test over the measuring cap, in the full run only)"
                 if full_only else ""))
        for f, ts in plan.items():
            print(f"  {f} ({len(ts)}/{len(tests[f])}): {' '.join(ts)}")
        sys.stdout.flush()
        missing = [f for f, ts in plan.items() if not ts and tests[f] and f not in full_only]
        if missing:
            print(f"{suite.name}: the sample misses {missing}", file=sys.stderr)
            return 1
        if args.dry_run:
            return 0
    order = "big-endian" if suite.env.get("KILN_EXPECT_BIG_ENDIAN") == "1" else "little-endian"
    print(f"{suite.name}: byte order {order}", flush=True)

    failed = []
    if args.full and args.cap:
        return measure_capped(suite, tests, plan, args.cap, log_path, args.unknown)
    with open(log_path, "w") as log:
        for f, ts in plan.items():
            if ts is not None and not ts:
                continue
            t0 = time.monotonic()
            # A sampled file is stopped well past its estimate: a test the cost table misjudges
            # (new since the last full run, or a regression) fails the suite instead of hanging CI.
            limit = None
            if ts is not None:
                limit = GRACE + SLACK * CONTENTION[args.suite] * (
                    START_COST[args.suite] + sum(costs.get((f, t), UNKNOWN_COST) for t in ts))
            ok, times = suite.run_file(f, ts, log, timeout=limit)
            if ok is None:
                slow = [t for t in ts if t not in times]
                print(f"  {f}: stopped after {limit:.0f} s, {SLACK}x its estimate; still running: {' '.join(slow)}."
                      f" Measure them: {refresh} --cap 60 --files {f}", flush=True)
            if ok and args.full and args.write_costs:
                write_costs(suite.name, f, times)
            ran = len(tests[f]) if ts is None else len(ts)
            print(f"  {f}: {'ok' if ok else 'FAILED'}, {len(times)}/{ran} passed, {time.monotonic() - t0:.0f} s",
                  flush=True)
            if not ok:
                failed.append(f)
    elapsed = time.monotonic() - started
    print(f"{suite.name}: {elapsed:.0f} s ({listed:.0f} s building and listing); log {log_path.relative_to(ROOT)}")
    if not args.full and elapsed > 2 * args.seconds + listed:
        print(f"{suite.name}: warning: the sample took over twice its budget; refresh the cost table with "
              f"{refresh}")
    if args.full and args.write_costs:
        print(f"{suite.name}: scripts/costs/{suite.name}.tsv updated for the files that passed")
    if failed:
        print(f"{suite.name}: FAILED in {' '.join(failed)} (see the log)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
