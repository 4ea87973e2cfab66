#!/usr/bin/env bash
# Peak RSS of `kiln validate` on hostile files: each claims gigabytes
# (16,777,216 or 2^32 - 1 tensors, a 4 GiB name heap, 2^64-byte payloads,
# 8-dimensional shapes near overflow) in a few hundred bytes. Every run must
# reject the file and stay under the limit (default 16 MiB), measured with
# /usr/bin/time -v ("Maximum resident set size"). Then `kiln convert` on the
# hostile inputs of issue 12 (release build, each under 64 MiB) and the big
# headers and indexes of issue 24 and the 200,000-tensor safetensors file of
# issue 41 (2x their size + 16 MiB; issue 41 by peak RssAnon); the tables are
# in kiln-cli/README.md.
#
#   scripts/rss.sh            # build kiln-cli (release), generate, measure
#   RSS_LIMIT_KIB=16384 scripts/rss.sh
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT_KIB=${RSS_LIMIT_KIB:-16384}
[ -x /usr/bin/time ] || { apt-get install -y time >/dev/null; }
cargo build --release -p kiln-cli >&2
KILN=${CARGO_TARGET_DIR:-target}/release/kiln
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

python3 - "$DIR" <<'PY'
import struct, sys, os
d = sys.argv[1]
M = (1 << 64) - 1

def header(count=0, name_bytes=0, payload=0, flags=2, dir_bytes=None):
    if dir_bytes is None:
        dir_bytes = count * 128 + name_bytes
    return b"KLNT" + bytes([2, flags, 0, 0]) + struct.pack("<IIQQ", count, name_bytes, payload, dir_bytes) + bytes(32)

def desc(dtype=2, rank=1, shape=(2,), off=0, length=8):
    s = list(shape) + [0] * (8 - len(shape))
    return struct.pack("<HBBHHHHIHHIIIQQ8Q16s", dtype, rank, 0, 0xFFFF, 0, 0xFFFF, 0, 0, 0, 0xFFFF, 0,
                       0xFFFFFFFF, 0xFFFFFFFF, off, length, *s, bytes(16))

files = {
    "count-16777216": header(count=16_777_216),
    "count-16777217": header(count=16_777_217),
    "count-4294967295": header(count=0xFFFFFFFF),
    "name-heap-4GiB": header(count=1, name_bytes=0xFFFFFFFF),
    "payload-2^64-1": header(payload=M),
    "payload-2^63": header(payload=1 << 63),
    "range-offset-overflow": header(count=1, payload=8) + desc(off=M - 3) + bytes(8),
    "range-length-2^64-1": header(count=1, payload=8) + desc(length=M) + bytes(8),
    "shape-8d-256^8": header(count=1, payload=8) + desc(rank=8, shape=[256] * 8) + bytes(8),
    "shape-8d-255^8": header(count=1, payload=8) + desc(rank=8, shape=[255] * 8) + bytes(8),
    "shape-8d-2^63x2": header(count=1, payload=8) + desc(rank=8, shape=[1 << 63, 2, 1, 1, 1, 1, 1, 1]) + bytes(8),
    "shape-f64-2^61": header(count=1, payload=0) + desc(dtype=1, shape=(1 << 61,), length=0),
}
for name, b in files.items():
    with open(os.path.join(d, name + ".kiln"), "wb") as f:
        f.write(b)
PY

# Flags per file (caps raised to the wire maximum where the claim needs it).
declare -A ARGS=(
  [count-4294967295]="--count-cap 4294967295"
  [name-heap-4GiB]="--byte-cap 4294967295"
)
printf '%-24s %6s %8s %s\n' file bytes rss_kib result
worst=0
fail=0
for f in "$DIR"/*.kiln; do
  name=$(basename "$f" .kiln)
  out=$( { /usr/bin/time -v "$KILN" validate ${ARGS[$name]:-} "$f" >"$DIR/out" 2>"$DIR/err"; } 2>&1 || true)
  # /usr/bin/time writes its report to its own stderr, captured above.
  rss=$(grep -h "Maximum resident set size" "$DIR/err" <(echo "$out") | awk '{print $NF}' | tail -1)
  code=$(grep -h "Exit status" "$DIR/err" <(echo "$out") | awk '{print $NF}' | tail -1)
  verdict=$(grep -hoE '\b(FRAME|LIMIT|EOF|TYPE|UTF8|TRAILING|SCHEMA)\b' "$DIR/out" "$DIR/err" | head -1)
  printf '%-24s %6s %8s exit %s %s\n' "$name" "$(stat -c %s "$f")" "$rss" "$code" "${verdict:-?}"
  [ "${rss:-0}" -gt "$worst" ] && worst=$rss
  if [ "${code:-0}" = 0 ]; then echo "  ^ accepted a hostile file"; fail=1; fi
  if [ "${rss:-999999}" -ge "$LIMIT_KIB" ]; then echo "  ^ peak RSS above ${LIMIT_KIB} KiB"; fail=1; fi
done
echo "peak RSS over all files: ${worst} KiB (limit ${LIMIT_KIB} KiB)"

# Hostile ONNX models (protobuf, a few bytes each, claiming terabytes or
# nesting past any stack): `kiln validate` and `kiln convert` refuse each
# within the same limit.
python3 - "$DIR" <<'PY'
import os, sys
d = sys.argv[1]
def varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out
def ld(field, body, claim=None):
    return varint(field << 3 | 2) + varint(len(body) if claim is None else claim) + body
def model(graph):
    return varint(1 << 3) + varint(10) + ld(7, graph)
tensor = varint(2 << 3) + varint(1) + ld(8, b"w")
nested = ld(5, tensor)
for _ in range(5000):  # GraphProto.node -> NodeProto.attribute -> AttributeProto.g -> GraphProto ...
    nested = ld(1, ld(5, ld(6, nested)))
def node(op, outputs, attrs=b""):  # NodeProto: output 2, op_type 4, attribute 5
    return b"".join(ld(2, o) for o in outputs) + ld(4, op) + attrs
# A Constant whose value claims 2^20 x 2^20 floats and holds none (AttributeProto: name 1, t 5).
huge = ld(1, varint(1 << 20) + varint(1 << 20)) + varint(2 << 3) + varint(1)
constant = ld(1, node(b"Constant", [b"c"], ld(5, ld(1, b"value") + ld(5, huge))))
# A subgraph initializer whose external data lies outside the model's folder.
outside = varint(2 << 3) + varint(1) + ld(8, b"w") + ld(1, varint(4)) + varint(14 << 3) + varint(1) + ld(13, ld(1, b"location") + ld(2, b"../../etc/passwd"))
branch = ld(1, node(b"If", [b"y"], ld(5, ld(1, b"then_branch") + ld(6, ld(5, outside)))))
files = {
    "onnx-constant-4TiB": model(constant),
    "onnx-subgraph-outside": model(branch),
    "onnx-packed-2^40": model(ld(5, tensor + ld(4, b"\0" * 8, claim=1 << 40))),
    "onnx-raw-2^31": model(ld(5, tensor + ld(9, b"\0" * 8, claim=(1 << 31) - 1))),
    "onnx-dims-2^40": model(ld(5, ld(1, b"\1" * 8, claim=1 << 40) + tensor)),
    "onnx-graph-2^62": model(b"") [:-1] + varint(1 << 62),
    "onnx-nested-5000": model(nested),
}
for name, b in files.items():
    with open(os.path.join(d, name + ".onnx"), "wb") as f:
        f.write(b)
PY
for f in "$DIR"/*.onnx; do
  name=$(basename "$f" .onnx)
  for cmd in validate convert; do
    extra=(); [ "$cmd" = convert ] && extra=(-q -o "$DIR/out.kiln")
    /usr/bin/time -v "$KILN" "$cmd" "$f" "${extra[@]}" >"$DIR/out" 2>"$DIR/err" || true
    rss=$(grep -h "Maximum resident set size" "$DIR/err" | awk '{print $NF}' | tail -1)
    code=$(grep -h "Exit status" "$DIR/err" | awk '{print $NF}' | tail -1)
    printf '%-24s %6s %8s exit %s %s\n' "$name" "$(stat -c %s "$f")" "$rss" "$code" "$cmd"
    if [ "${code:-0}" = 0 ]; then echo "  ^ accepted a hostile file"; fail=1; fi
    if [ "${rss:-999999}" -ge "$LIMIT_KIB" ]; then echo "  ^ peak RSS above ${LIMIT_KIB} KiB"; fail=1; fi
  done
done
cargo test --release -p kiln-cli --test convert_hardening -- --nocapture p11 p24 p41 2>&1 | grep -E '^\||test result|panicked' || fail=1
exit $fail
