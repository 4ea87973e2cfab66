#!/usr/bin/env bash
# Converting a safetensors file to Kiln, timed against `cp` of the same file
# in the same run (and against `kiln convert --no-fsync`: the cost of the
# default fsync), plus the peak memory of each.
#
#   bash kiln-cli/benches/convert_vs_cp.sh [SIZE_GIB] [WORKDIR]
#
# SIZE_GIB defaults to 1; WORKDIR to a fresh directory under ${TMPDIR:-/tmp}
# (needs about 3 x SIZE of free disk). Needs python3 with numpy and
# safetensors (to write the input), and uses hyperfine when it is installed
# (`apt-get install hyperfine`), else a loop of runs timed here.
#
# Memory: /usr/bin/time -v's "Maximum resident set size" counts every page
# mapped into the process, including pages of a memory-mapped file (which
# belong to the page cache, not to the process). So the script also samples
# /proc/PID/status every few milliseconds and reports the peak of RssAnon
# (the process's own memory) and RssFile (mapped file pages) separately.
set -euo pipefail

SIZE_GIB=${1:-1}
WORK=${2:-$(mktemp -d "${TMPDIR:-/tmp}/kiln-bench.XXXXXX")}
RUNS=${RUNS:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$WORK"
cd "$WORK"

echo "== building kiln (release)"
cargo build --release -q -p kiln-cli --manifest-path "$ROOT/Cargo.toml"
# The binary cargo just built, wherever CARGO_TARGET_DIR (or a config) puts it.
TARGET_DIR=$(cargo metadata -q --format-version 1 --no-deps --manifest-path "$ROOT/Cargo.toml" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
KILN="$TARGET_DIR/release/kiln"

IN="$WORK/in-${SIZE_GIB}g.safetensors"
if [ ! -f "$IN" ]; then
  echo "== writing $IN (${SIZE_GIB} GiB of random f32 in 128 MiB tensors)"
  python3 - "$IN" "$SIZE_GIB" <<'EOF'
import sys, numpy as np
from safetensors.numpy import save_file
path, gib = sys.argv[1], float(sys.argv[2])
rng = np.random.default_rng(1)
n = max(1, int(round(gib * 8)))  # 128 MiB per tensor
t = {f"layers.{i}.weight": rng.integers(0, 2**31, size=(8192, 4096), dtype=np.uint32).view(np.float32) for i in range(n)}
save_file(t, path, metadata={"format": "pt"})
EOF
fi
ls -l "$IN"
cat "$IN" > /dev/null   # warm the page cache: both commands read a cached file

# Peak RssAnon / RssFile / VmHWM (kB) of a command, sampled from /proc.
peak() {
  python3 - "$@" <<'EOF'
import subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
peak = {"RssAnon": 0, "RssFile": 0, "VmHWM": 0}
t0 = time.perf_counter()
while p.poll() is None:
    try:
        for line in open(f"/proc/{p.pid}/status"):
            k, _, v = line.partition(":")
            if k in peak:
                peak[k] = max(peak[k], int(v.split()[0]))
    except (FileNotFoundError, ProcessLookupError, ValueError):
        pass
    time.sleep(0.002)
dt = time.perf_counter() - t0
print(f"{dt:.3f}s RssAnon {peak['RssAnon']} kB, RssFile {peak['RssFile']} kB, VmHWM {peak['VmHWM']} kB, exit {p.returncode}")
EOF
}

echo "== timing (page cache warm, $RUNS runs each; load: $(cut -d' ' -f1-3 /proc/loadavg))"
CP_CMD="cp $IN $WORK/cp.out"
KILN_CMD="$KILN convert -q $IN -o $WORK/out.kiln"
NOSYNC_CMD="$KILN convert -q --no-fsync $IN -o $WORK/out.kiln"
if command -v hyperfine >/dev/null; then
  # `sync` in --prepare: each run starts with no dirty pages from the run
  # before, so neither command pays for the other's writeback.
  hyperfine --warmup 1 --runs "$RUNS" --export-json "$WORK/hyperfine.json" \
    --prepare "rm -f $WORK/cp.out $WORK/out.kiln; sync" -n cp "$CP_CMD" -n "kiln convert" "$KILN_CMD" -n "kiln convert --no-fsync" "$NOSYNC_CMD"
  python3 - "$WORK/hyperfine.json" <<'EOF'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
cp, kc, ns = r["cp"], r["kiln convert"], r["kiln convert --no-fsync"]
print(f"mean: cp {cp['mean']:.3f}s +- {cp['stddev']:.3f}, kiln convert {kc['mean']:.3f}s +- {kc['stddev']:.3f}")
print(f"median: cp {cp['median']:.3f}s, kiln convert {kc['median']:.3f}s")
print(f"min: cp {cp['min']:.3f}s, kiln convert {kc['min']:.3f}s")
print(f"RATIO kiln/cp: mean {kc['mean'] / cp['mean']:.2f}, median {kc['median'] / cp['median']:.2f}, min {kc['min'] / cp['min']:.2f}")
print(f"no-fsync: mean {ns['mean']:.3f}s; RATIO fsync/no-fsync: mean {kc['mean'] / ns['mean']:.2f}, median {kc['median'] / ns['median']:.2f}; RATIO no-fsync/cp: median {ns['median'] / cp['median']:.2f}")
print(f"CPU (user+system, mean): cp {cp['user'] + cp['system']:.3f}s, kiln convert {kc['user'] + kc['system']:.3f}s")
EOF
else
  for name in cp kiln nosync; do
    cmd=$CP_CMD; [ "$name" = kiln ] && cmd=$KILN_CMD; [ "$name" = nosync ] && cmd=$NOSYNC_CMD
    for i in $(seq "$RUNS"); do
      rm -f "$WORK/cp.out" "$WORK/out.kiln"
      s=$(date +%s.%N); $cmd; e=$(date +%s.%N)
      echo "$name run $i: $(echo "$e - $s" | bc) s"
    done
  done
fi

echo "== peak memory"
rm -f "$WORK/cp.out" "$WORK/out.kiln"
echo "cp:           $(peak cp "$IN" "$WORK/cp.out")"
echo "kiln convert: $(peak "$KILN" convert -q "$IN" -o "$WORK/out.kiln")"
for name in cp kiln; do
  rm -f "$WORK/cp.out" "$WORK/out.kiln"
  if [ "$name" = cp ]; then cmd=$CP_CMD; else cmd=$KILN_CMD; fi
  /usr/bin/time -v $cmd 2> "$WORK/time-$name.txt" >/dev/null
  echo "$name: $(grep -E 'Maximum resident set size' "$WORK/time-$name.txt" | sed 's/^\s*//') (/usr/bin/time -v)"
done

echo "== the output checks out"
"$KILN" validate --type 'struct{metadata:dict<str,str>,tensors:tensors,}' --framed "$WORK/out.kiln" || true
ls -l "$IN" "$WORK/out.kiln"
echo "work dir: $WORK (remove it when done)"
