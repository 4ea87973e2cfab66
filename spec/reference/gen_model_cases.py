#!/usr/bin/env python3
"""Regenerate spec/model-cases.json: golden cases for model files, digests, sharded
models, signed models and delta updates (spec/model-file.md).

    python3 spec/reference/gen_model_cases.py            # write the file
    python3 spec/reference/gen_model_cases.py --check    # compare with the file on disk
    python3 spec/reference/gen_model_cases.py --out PATH # write (or --check) another path

A case is a folder of files and the one a reader is given:

    {"name", "note", "files": {filename: hex}, "open": filename, "verify": bool,
     "expect": null | {"code", "rule", "offset", "file"},
     "trust": {"key": hex, "target": null | str, "newer_than": null | int,
               "usable": bool}                                    (optional)
     "delta": {"base": filename, "result": null | filename}}      (optional)

A reader given `open` takes it as a model file, a manifest or a plain directory by its
first 16 bytes (spec/model-file.md, "Telling a model file from a plain directory"); a
manifest's shards are the other files, by name. `verify` says whether payload digests
are checked (step 9d). `expect` is the first fault: its code, the rule (the Rust `Rule`
name for the rules spec/model-file.md adds, kiln_ref's rule id for Frozen and directory
rules, null where the spec names no rule), the byte offset in the file the fault is in,
and that file's name (the manifest's own name for a fault in the manifest).

`trust`: the reader is given a key ("Signed models": `kiln verify --pubkey`,
`Model::parse_trusted`, `Manifest::parse_trusted`): the Ed25519 public key, the target
it is for (null: none) and the version it runs (null: none; a model must carry a higher
one). It accepts signed records and signed manifests only, and always verifies digests
(`verify` is true). `usable` false: the key is one a reader refuses when it is given
(of small order, or no point at all); nothing is opened and `expect` is null.

`delta`: `open` is a delta update applied to the device's model `base` ("Delta
updates"). The delta's own rules give a fault in `open`; else the device rebuilds NEW,
which must be byte for byte the file `result`, and checks it as any model file (as a
signed one when `trust` is given): a fault there is in `result`. `result` is null when
the delta itself is rejected.

Every expectation here is written from how the case was built (positions counted from
the encoding, not read back by the checker); the script refuses to write (exit 1,
naming the case) when model_ref does not give exactly that result, or when a rule of
the spec's new tables has no case.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import delta_ref as D  # noqa: E402
import ed25519_ref as E  # noqa: E402
import kiln_ref as K  # noqa: E402
import model_ref as M  # noqa: E402
from kiln_ref import DESC, HDR, Tensor  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "model-cases.json"

# every rule the tables of spec/model-file.md add
NEW_RULES = (
    "DigestTableLength", "DigestTableCount", "PayloadDigest",
    "ShardModelLength", "ShardPosition",
    "ManifestNoShards", "ShardName", "ShardNameRepeated", "ShardDigestLength",
    "ManifestNameEmpty", "ManifestNameRepeated", "ManifestShard", "ManifestDtype",
    "ManifestRank", "ManifestCountOverflow", "ManifestLayout", "ManifestSizeOverflow",
    "ManifestLength", "ManifestQuant", "ManifestDigestCount",
    "ShardMissing", "ShardLength", "ShardModel", "ShardIndex", "ShardCount",
    "ShardTensorCount", "ShardTensor", "ShardTensorDigest", "ShardPrefixDigest",
    "NotSigned", "SignatureKeyLength", "SignatureLength", "SignatureKey", "ReleaseTarget",
    "ReleaseVersion", "SignatureInvalid",
    "DeltaBaseLength", "DeltaBase", "DeltaReuseCount", "DeltaReuse",
)

MD = {"description": "tiny test model", "license": "CC0-1.0"}
STEM = "tiny"
MANIFEST = STEM + ".kiln"
SINGLE = "model.kiln"
F32_2 = bytes.fromhex("0000803f000000c0")        # 1.0, -2.0


# ---------------------------------------------------------------- byte helpers

def put(buf: bytes, off: int, fmt: str, value) -> bytes:
    b = bytearray(buf)
    struct.pack_into("<" + fmt, b, off, value)
    return bytes(b)


def flip(buf: bytes, off: int, mask: int = 0x01) -> bytes:
    b = bytearray(buf)
    b[off] ^= mask
    return bytes(b)


def sha(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def r64(x: int) -> int:
    return (x + 63) & ~63


def md_len(metadata) -> int:
    return len(K.encode("dict<str,str>", metadata))


# ---------------------------------------------------------------- tensors

def T(name, dtype, shape, payload, **kw) -> Tensor:
    return Tensor(dtype, tuple(shape), bytes(payload), name=name, **kw)


def rich_tensors():
    """Every kind of tensor the cases need: a vector, an empty tensor after a short one, a
    rank-0 tensor, an opaque tensor, scheme 1 with its scale, scheme 2 with scale and outer."""
    return [
        T("w", "f32", (2,), F32_2),
        T("ids", "u8", (5,), b"\x01\x02\x03\x04\x05"),
        T("empty", "u8", (0,), b""),
        T("scalar", "f32", (), bytes.fromhex("0000803f")),
        T("q4k", 4096, (36,), bytes(range(18)), layout="Q4_K", block_size=18),
        T("mx", "e2m1", (32,), bytes(range(16)), quant_scheme=1, quant_axis=0,
          group_size=32, scale_index=6),
        T("mx.scale", "e8m0", (1,), b"\x7f"),
        T("q2", "e2m1", (16,), bytes(range(8)), quant_scheme=2, quant_axis=0,
          group_size=16, scale_index=8, outer_index=9),
        T("q2.scale", "f8e4m3", (1,), b"\x38"),
        T("q2.outer", "f32", (1,), bytes.fromhex("0000803f")),
    ]


def two_tensors():
    return [T("a", "f32", (2,), F32_2), T("b", "u8", (3,), b"\x07\x08\x09")]


def payload_offsets(tensors) -> list[int]:
    out, running = [], 0
    for t in tensors:
        off = r64(running)
        out.append(off)
        running = off + len(t.payload)
    return out


def block_layout(tensors):
    """(payload_base, [payload offset]) of the canonical block of the tensors."""
    heap = sum(len(t.name.encode()) for t in tensors if t.name is not None)
    heap += sum(len(t.layout.encode()) for t in tensors if t.layout)
    return r64(64 + 128 * len(tensors) + heap), payload_offsets(tensors)


def raw_block(tensors, offsets, payload_bytes) -> bytes:
    """The canonical block of the tensors with the payloads moved to other offsets."""
    block = K.encode_directory(tensors, validate=False)
    base, _offs = block_layout(tensors)
    out = bytearray(block[:base])
    struct.pack_into("<Q", out, HDR.PAYLOAD_BYTES, payload_bytes)
    region = bytearray(payload_bytes)
    for i, (t, off) in enumerate(zip(tensors, offsets)):
        struct.pack_into("<Q", out, 64 + 128 * i + DESC.BYTE_OFFSET, off)
        region[off:off + len(t.payload)] = t.payload
    return bytes(out + region)


# ---------------------------------------------------------------- record positions

def positions(kind, metadata, tensors, model_len=32, n_digests=None):
    """Byte positions in a record built by M.assemble: counted from the encoding."""
    p = {}
    pos = 16 + md_len(metadata)
    if kind == "shard":
        p["shard"] = pos
        p["model"] = pos + 4
        p["index"] = pos + 4 + model_len
        p["count"] = p["index"] + 4
        pos = p["count"] + 4
    if kind in ("digests", "shard"):
        p["digests"] = pos
        pos += 4 + 32 * (len(tensors) if n_digests is None else n_digests)
    return _block_positions(p, pos, tensors)


def _block_positions(p: dict, pos: int, tensors) -> dict:
    """p with the positions of a canonical block of `tensors` starting at `pos`."""
    p["block"] = pos
    base, offs = block_layout(tensors)
    p["base"] = pos + base
    p["payload"] = [pos + base + o for o in offs]
    p["desc"] = [pos + 64 + 128 * i for i in range(len(tensors))]
    p["end"] = pos + base + (offs[-1] + len(tensors[-1].payload) if tensors else 0)
    return p


# ---------------------------------------------------------------- sharded models

class Sharded:
    """A sharded model under construction: every part can be changed before encoding."""

    def __init__(self, shards, metadata=MD, names=None, shard_metadata=None):
        self.shards = [[K._as_tensor(t) for t in s] for s in shards]
        n = len(self.shards)
        self.metadata = dict(metadata)
        self.shard_md = dict(shard_metadata or {})
        self.names = names or [M.shard_file_name(STEM, k, n) for k in range(1, n + 1)]
        self.entries = M.manifest_entries(self.shards)
        self.digests = b"".join(M.tensor_digests(s) for s in self.shards)
        self.mid = M.model_id(self.entries, self.digests)
        self.files = {}
        for k, (name, ts) in enumerate(zip(self.names, self.shards), 1):
            self.files[name] = self.shard_bytes(ts, k, n)
        self.shard_list = []
        for name in self.names:
            self.shard_list.append({"name": name, "length": 0, "digest": b""})
            self.reseal(name)

    def shard_bytes(self, tensors, index, count, model=None, digests=None, block=None,
                    metadata=None):
        return M.assemble("shard", self.shard_md if metadata is None else metadata,
                          K.encode_directory(tensors) if block is None else block,
                          M.tensor_digests(tensors) if digests is None else digests,
                          (self.mid if model is None else model, index, count))

    def reseal(self, name):
        """Make the manifest's length and prefix digest of shard `name` those of its file."""
        data = self.files[name]
        for s in self.shard_list:
            if s["name"] == name:
                s["length"] = len(data)
                s["digest"] = sha(data[:M.prefix_length(data)])

    def manifest(self, frame_hash=None) -> bytes:
        return M.encode_manifest(self.metadata, self.shard_list, self.entries, self.digests,
                                 frame_hash)

    def folder(self, drop=(), manifest=None):
        out = {MANIFEST: self.manifest() if manifest is None else manifest}
        for name, data in self.files.items():
            if name not in drop:
                out[name] = data
        return out

    def shard_pos(self, k, model_len=32):
        """Positions in shard k's file (1-based)."""
        return positions("shard", self.shard_md, self.shards[k - 1], model_len)

    def mpos(self):
        """Positions in the manifest, counted from the encoding of its parts."""
        p = {}
        pos = 16 + md_len(self.metadata)
        p["shards"] = pos
        pos += 4
        p["shard"] = []
        for s in self.shard_list:
            q = {"name": pos}
            pos += 4 + len(s["name"].encode())
            q["length"] = pos
            pos += 8
            q["digest"] = pos
            pos += 4 + len(s["digest"])
            p["shard"].append(q)
        p["tensors"] = pos
        pos += 4
        p["entry"] = []
        for e in self.entries:
            q = {"name": pos}
            pos += 4 + len(e["name"].encode())
            q["shard"] = pos
            pos += 4
            q["dtype"] = pos
            pos += 2
            q["shape"] = pos
            pos += 4 + 8 * len(e["shape"])
            q["byte_length"] = pos
            pos += 8
            q["layout"] = pos
            pos += 4 + len(e["layout"].encode())
            q["block_size"] = pos
            pos += 4
            q["quant"] = pos
            pos += len(K.encode(M.QUANT_TYPE, e["quant"]))
            p["entry"].append(q)
        p["digests"] = pos
        return p


def base2():
    """Two shards: [a f32[2]] and [b u8[3]]."""
    a, b = two_tensors()
    return Sharded([[a], [b]])


def twins():
    """Two shards of the same length (so a swap passes the length check)."""
    return Sharded([[T("a", "f32", (2,), F32_2)], [T("b", "f32", (2,), bytes(8))]])


def rich_sharded():
    ts = rich_tensors()
    s1 = ts[:5]
    s2 = [ts[5], ts[6]]
    s3 = [ts[7], ts[8], ts[9]]
    s2[0].scale_index = 1
    s3[0].scale_index, s3[0].outer_index = 1, 2
    return Sharded([s1, s2, s3])


def quant_sharded():
    """Three small shards: [w], [mx (scheme 1), mx.scale], [q2 (scheme 2), q2.scale, q2.outer]."""
    ts = rich_tensors()
    s2 = [ts[5], ts[6]]
    s3 = [ts[7], ts[8], ts[9]]
    s2[0].scale_index = 1
    s3[0].scale_index, s3[0].outer_index = 1, 2
    return Sharded([[ts[0]], s2, s3])


# ---------------------------------------------------------------- cases

class Cases:
    def __init__(self):
        self.list = []

    def add(self, name, note, files, open_, expect, verify=True, trust=None, delta=None):
        if expect is not None:
            code, rule, offset, file = expect
            expect = {"code": code, "rule": rule, "offset": offset, "file": file}
        case = {"name": name, "note": note, "files": dict(files), "open": open_,
                "verify": verify, "expect": expect}
        if trust is not None:
            assert verify, "a reader with a key verifies digests"
            case["trust"] = dict(trust)
        if delta is not None:
            case["delta"] = dict(delta)
        self.list.append(case)

    def single(self, name, note, data, expect3, verify=True, trust=None):
        expect = None if expect3 is None else tuple(expect3) + (SINGLE,)
        self.add(name, note, {SINGLE: data}, SINGLE, expect, verify, trust)

    def sharded(self, name, note, sm: Sharded, expect, verify=True, drop=(), manifest=None,
                only_manifest=False, trust=None):
        files = {MANIFEST: sm.manifest() if manifest is None else manifest} if only_manifest \
            else sm.folder(drop, manifest)
        if expect is not None and expect[3] is None:
            expect = tuple(expect[:3]) + (MANIFEST,)
        self.add(name, note, files, MANIFEST, expect, verify, trust)


def model_file_cases(c: Cases):
    ts = rich_tensors()
    plain = M.write_model(MD, ts, digests=False)
    dig = M.write_model(MD, ts)
    c.single("plain-rich", "a plain record: every tensor kind (empty after a short tensor, "
             "rank 0, opaque, scheme 1, scheme 2)", plain, None)
    c.single("digests-rich", "a digests record of the same tensors", dig, None)
    c.single("digests-empty-model", "a digests record with no tensors: an empty table",
             M.write_model({}, []), None)
    c.single("plain-empty-model", "a plain record with no tensors and no metadata",
             M.write_model({}, [], digests=False), None)
    c.single("digests-only-empty-tensor", "one empty tensor: its digest is SHA-256 of nothing",
             M.write_model({}, [T("z", "f32", (0, 3), b"")]), None)

    p = positions("digests", MD, ts)
    # DIGEST, a flipped payload byte that passes every structural rule
    c.single("digests-flipped-payload", "one payload bit flipped in tensor 1 (`ids`): every "
             "structural rule passes; DIGEST at the tensor's first payload byte",
             flip(dig, p["payload"][1] + 2), ("DIGEST", "PayloadDigest", p["payload"][1]))
    c.single("digests-flipped-payload-no-verify", "the same file read without verifying",
             flip(dig, p["payload"][1] + 2), None, verify=False)
    small = [T("ids", "u8", (5,), b"\x01\x02\x03\x04\x05"), T("empty", "u8", (0,), b""),
             T("w", "f32", (2,), F32_2)]
    sdig = M.write_model(MD, small)
    ps = positions("digests", MD, small)
    c.single("digests-flipped-last-payload-byte", "the last byte of the last tensor",
             flip(sdig, len(sdig) - 1, 0x80), ("DIGEST", "PayloadDigest", ps["payload"][2]))
    c.single("digests-wrong-digest-of-empty", "the empty tensor's digest entry changed",
             flip(sdig, ps["digests"] + 4 + 32 * 1 + 31),
             ("DIGEST", "PayloadDigest", ps["payload"][1]))
    c.single("plain-flipped-payload", "a plain record has no digests: a flipped payload "
             "byte is not a fault", flip(plain, positions("plain", MD, ts)["payload"][0]), None)

    # DigestTableLength, DigestTableCount
    two = two_tensors()
    block = K.encode_directory(two)
    dg = M.tensor_digests(two)
    p2 = positions("digests", MD, two)
    c.single("digest-table-length", "a 65-byte digest table: not a multiple of 32",
             M.assemble("digests", MD, block, dg + b"\x00"),
             ("TYPE", "DigestTableLength", p2["digests"]))
    c.single("digest-table-count", "three digests for two tensors (step 3d)",
             M.assemble("digests", MD, block, dg + sha(b"x")),
             ("TYPE", "DigestTableCount", p2["digests"]))
    c.single("digest-table-count-short", "one digest for two tensors",
             M.assemble("digests", MD, block, dg[:32]),
             ("TYPE", "DigestTableCount", p2["digests"]))
    # step 3d against the directory's steps 2, 3 and 4
    bad_bytes = put(block, HDR.DIRECTORY_BYTES, "Q", 1)
    c.single("order-3d-before-step-4", "directory_bytes wrong (step 4) and one digest for two "
             "tensors: step 3d is first", M.assemble("digests", MD, bad_bytes, dg[:32]),
             ("TYPE", "DigestTableCount", p2["digests"]))
    c.single("order-step-4-alone", "directory_bytes wrong with a right digest table",
             M.assemble("digests", MD, bad_bytes, dg),
             ("TYPE", "dir_bytes_mismatch", p2["block"] + HDR.DIRECTORY_BYTES))
    c.single("order-step-2-before-3d", "version 3 (step 2) and one digest for two tensors",
             M.assemble("digests", MD, put(block, HDR.VERSION, "B", 3), dg[:32]),
             ("FRAME", "dir_version", p2["block"] - 32 + HDR.VERSION))
    c.single("order-step-3-before-3d", "tensor_count above the count cap (step 3) with a "
             "two-entry digest table", M.assemble("digests", MD,
                                                  put(block, HDR.TENSOR_COUNT, "I", K.DEFAULT_CAP + 1), dg),
             ("LIMIT", "dir_count_cap", p2["block"] + HDR.TENSOR_COUNT))
    c.single("order-step-9-before-9d", "a mismatching digest and dtype 0 in a later tensor "
             "(step 9): step 9 is first",
             M.assemble("digests", MD, put(block, 64 + 128 + DESC.DTYPE, "H", 0),
                        flip(dg, 0)),
             ("TYPE", "dtype_zero", p2["desc"][1] + DESC.DTYPE))

    # step 9d against step 10 and 11
    gap = flip(block, p2["payload"][0] - p2["block"] + 8)      # first gap byte after `a`
    c.single("order-digest-before-gap", "tensor 0 mismatches its digest and the gap before "
             "tensor 1 is nonzero: DIGEST (9d) wins over step 10",
             M.assemble("digests", MD, gap, flip(dg, 0)),
             ("DIGEST", "PayloadDigest", p2["payload"][0]))
    c.single("order-gap-alone", "the same gap with right digests: step 10",
             M.assemble("digests", MD, gap, dg),
             ("TYPE", "gap_nonzero", p2["payload"][0] + 8))
    c.single("order-gap-no-verify", "digest mismatch and gap, not verifying: step 10",
             M.assemble("digests", MD, gap, flip(dg, 0)),
             ("TYPE", "gap_nonzero", p2["payload"][0] + 8), verify=False)
    three = [T("a", "f32", (2,), F32_2), T("b", "f32", (2,), F32_2), T("c", "f32", (2,), F32_2)]
    dg3 = M.tensor_digests(three)
    p3 = positions("digests", MD, three)
    moved0 = raw_block(three, [64, 128, 192], 200)
    c.single("order-misplaced-before-mismatch", "tensor 0 stored at 64 (not canonical), "
             "tensor 1 mismatches its digest: 9d stops at tensor 0, step 10 wins",
             M.assemble("digests", MD, moved0, dg3[:32] + flip(dg3[32:64], 0) + dg3[64:]),
             ("TYPE", "offset_not_canonical", p3["desc"][0] + DESC.BYTE_OFFSET))
    moved1 = raw_block(three, [0, 128, 192], 200)
    c.single("order-mismatch-before-misplaced", "tensor 0 mismatches, tensor 1 misplaced: "
             "DIGEST at tensor 0",
             M.assemble("digests", MD, moved1, flip(dg3, 0)),
             ("DIGEST", "PayloadDigest", p3["base"]))
    c.single("order-misplaced-then-mismatch-later", "tensor 0 fine, tensor 1 misplaced, "
             "tensor 2 mismatches: step 10 at tensor 1",
             M.assemble("digests", MD, moved1, dg3[:64] + flip(dg3[64:], 0)),
             ("TYPE", "offset_not_canonical", p3["desc"][1] + DESC.BYTE_OFFSET))
    boolt = [T("flags", "bool", (3,), b"\x01\x00\x01")]
    pb = positions("digests", MD, boolt)
    badbool = put(K.encode_directory(boolt), pb["payload"][0] - pb["block"] + 1, "B", 2)
    c.single("order-digest-before-bool-byte", "a bool byte 02 (step 11) whose digest was "
             "taken before the change: DIGEST", M.assemble("digests", MD, badbool,
                                                          M.tensor_digests(boolt)),
             ("DIGEST", "PayloadDigest", pb["payload"][0]))
    c.single("order-bool-byte-digest-matches", "the same byte with a digest of the bad "
             "bytes: step 11", M.assemble("digests", MD, badbool,
                                         sha(b"\x01\x02\x01")),
             ("TYPE", "bool_byte", pb["payload"][0] + 1))
    c.single("digests-trailing", "one byte after the block", sdig + b"\x00",
             ("TRAILING", "trailing", len(sdig)))
    c.single("digests-trailing-and-mismatch", "a mismatch and a trailing byte: DIGEST",
             flip(sdig, ps["payload"][0]) + b"\x00",
             ("DIGEST", "PayloadDigest", ps["payload"][0]))
    c.single("digests-truncated-table", "the file cut inside the digest table",
             sdig[:ps["digests"] + 40], ("EOF", "length_past_end", ps["digests"]))
    c.single("digests-bad-metadata-order", "metadata keys out of order (Frozen rule)",
             M.assemble("digests", {}, block, dg)[:16]
             + bytes.fromhex("02000000" "0100000062" "00000000" "0100000061" "00000000")
             + K.encode("list<u8>", dg) + block,
             ("TYPE", "dict_key_order", 16 + 4 + 5 + 4))
    c.single("model-kind-profile", "a digests frame with profile 1: a model file by its "
             "hash, FRAME at 4", put(sdig, 4, "B", 1), ("FRAME", "frame_profile", 4))
    c.single("other-frame-is-a-directory", "a frame of another type: checked as a plain "
             "directory, FRAME at 0", put(sdig, 8, "Q", K.schema_hash("tensors")),
             ("FRAME", "dir_magic", 0))
    c.single("plain-directory", "a standalone directory block opens as before",
             K.encode_directory(two), None)


def shard_alone_cases(c: Cases):
    sm = rich_sharded()
    for k, name in enumerate(sm.names, 1):
        c.add(f"shard-alone-{k}", f"shard {k} of 3 on its own: a valid model file",
              {name: sm.files[name]}, name, None)
    a, b = two_tensors()
    mid = sha(b"some model")
    block = K.encode_directory([a])
    dg = M.tensor_digests([a])
    ok = M.assemble("shard", {}, block, dg, (mid, 1, 2))
    c.single("shard-alone-no-metadata", "a shard record read directly", ok, None)
    p = positions("shard", {}, [a])
    c.single("shard-model-length", "a 31-byte model id",
             M.assemble("shard", {}, block, dg, (mid[:31], 1, 2)),
             ("TYPE", "ShardModelLength", p["shard"]))
    c.single("shard-model-length-long", "a 33-byte model id",
             M.assemble("shard", {}, block, dg, (mid + b"\x00", 1, 2)),
             ("TYPE", "ShardModelLength", p["shard"]))
    c.single("shard-position-count-zero", "count 0 (and index 1): offset of count",
             M.assemble("shard", {}, block, dg, (mid, 1, 0)), ("TYPE", "ShardPosition", p["count"]))
    c.single("shard-position-both-zero", "index 0 and count 0: count's offset",
             M.assemble("shard", {}, block, dg, (mid, 0, 0)), ("TYPE", "ShardPosition", p["count"]))
    c.single("shard-position-index-zero", "index 0 of 2",
             M.assemble("shard", {}, block, dg, (mid, 0, 2)), ("TYPE", "ShardPosition", p["index"]))
    c.single("shard-position-index-above", "index 3 of 2",
             M.assemble("shard", {}, block, dg, (mid, 3, 2)), ("TYPE", "ShardPosition", p["index"]))
    c.single("shard-position-last", "index 2 of 2 is fine",
             M.assemble("shard", {}, block, dg, (mid, 2, 2)), None)
    c.single("shard-position-before-digest-length", "index 0 and a 33-byte digest table: "
             "the shard field is checked first",
             M.assemble("shard", {}, block, dg + b"\x00", (mid, 0, 2)),
             ("TYPE", "ShardPosition", p["index"]))
    c.single("shard-alone-flipped-payload", "a shard alone verifies its digests",
             flip(ok, p["payload"][0]), ("DIGEST", "PayloadDigest", p["payload"][0]))
    c.single("shard-model-eof", "the file ends inside the model id",
             ok[:p["model"] + 10], ("EOF", "length_past_end", p["shard"]))


def manifest_cases(c: Cases):
    sm = rich_sharded()
    c.sharded("sharded-rich", "three shards: every tensor kind, scheme 1 and 2 with their "
              "scale and outer in the same shard", sm, None)
    c.sharded("sharded-two", "two shards of one tensor each", base2(), None)
    one = Sharded([two_tensors()])
    c.sharded("sharded-one-shard", "a sharded model of one shard", one, None)
    empty_shard = Sharded([[two_tensors()[0]], []])
    c.sharded("sharded-empty-shard", "a shard holding no tensors", empty_shard, None)
    padded = Sharded([two_tensors()], shard_metadata={"kiln.convert.pad": " " * 7})
    c.sharded("sharded-shard-padding-key", "a shard with the padding key as its metadata",
              padded, None)

    # Frozen rules of the manifest
    m = base2().manifest()
    c.sharded("manifest-as-digests-record", "the manifest's frame carries the digests "
              "record's hash: it opens as a model file, whose digest table is read at the "
              "shards count word (2 bytes long)", base2(),
              ("TYPE", "DigestTableLength", base2().mpos()["shards"], None),
              only_manifest=True, manifest=put(m, 8, "Q", M.HASHES["digests"]))
    c.sharded("manifest-other-hash", "the manifest's frame carries another hash: it opens "
              "as a plain directory, FRAME at 0", base2(), ("FRAME", "dir_magic", 0, None),
              only_manifest=True, manifest=put(m, 8, "Q", M.HASHES["manifest"] ^ 1))
    c.sharded("manifest-truncated", "the manifest cut by one byte", base2(),
              ("EOF", "length_past_end", base2().mpos()["digests"], None),
              only_manifest=True, manifest=m[:-1])
    c.sharded("manifest-trailing", "a byte after the manifest", base2(),
              ("TRAILING", "trailing", len(m), None), only_manifest=True, manifest=m + b"\x00")

    s = base2()
    s.shard_list = []
    c.sharded("order-trailing-before-m1", "no shards and a byte after the manifest: the "
              "Frozen rules (TRAILING) come before M1", s,
              ("TRAILING", "trailing", len(s.manifest()), None), only_manifest=True,
              manifest=s.manifest() + b"\x00")
    # M1
    s = base2()
    s.shard_list = []
    c.sharded("manifest-no-shards", "an empty shard list", s,
              ("TYPE", "ManifestNoShards", s.mpos()["shards"], None), only_manifest=True)
    # M2
    bad_names = [
        ("slash", "sub/tiny-00001-of-00002.kiln"), ("backslash", "sub\\tiny.kiln"),
        ("dotdot", ".."), ("dot", "."), ("nul", "tiny\x00.kiln"), ("colon", "c:tiny.kiln"),
        ("absolute", "/etc/tiny.kiln"), ("parent-path", "../tiny-00001-of-00002.kiln"),
        ("windows-absolute", "C:\\models\\tiny.kiln"), ("empty", ""),
        ("control", "tiny\x1f.kiln"), ("del", "tiny\x7f.kiln"), ("newline", "tiny\n.kiln"),
        ("too-long", "a" * 251 + ".kiln" + "x"),
    ]
    for tag, bad in bad_names:
        s = base2()
        s.shard_list[1]["name"] = bad
        c.sharded(f"shard-name-{tag}", f"shard 2 named {bad[:40]!r}: not a plain file name",
                  s, ("PATH", "ShardName", s.mpos()["shard"][1]["name"], None), only_manifest=True)
    s = base2()
    s.shard_list[0]["name"] = "a" * 250 + ".kiln"
    s.names[0] = s.shard_list[0]["name"]
    s.files = {s.names[0]: s.files[M.shard_file_name(STEM, 1, 2)],
               s.names[1]: s.files[s.names[1]]}
    c.sharded("shard-name-255-bytes", "a 255-byte shard name is a plain file name", s, None)
    s = base2()
    s.shard_list[0]["name"] = "modèle-1.kiln"
    s.files = {"modèle-1.kiln": s.files[s.names[0]], s.names[1]: s.files[s.names[1]]}
    c.sharded("shard-name-utf8", "a non-ASCII shard name", s, None)
    for tag, bad in (("c1-control", "tiny\u0085.kiln"), ("c1-first", "\u0080tiny.kiln"),
                     ("c1-last", "tiny.kiln\u009f")):
        s = base2()
        s.shard_list[1]["name"] = bad
        c.sharded(f"shard-name-{tag}", f"shard 2 named {bad!r}: a C1 control (Unicode's Cc) is a control "
                  "character", s, ("PATH", "ShardName", s.mpos()["shard"][1]["name"], None),
                  only_manifest=True)
    s = base2()
    s.shard_list[1]["name"] = "tiny\u00a0.kiln"
    s.files = {s.names[0]: s.files[s.names[0]], "tiny\u00a0.kiln": s.files[s.names[1]]}
    c.sharded("shard-name-nbsp", "U+00A0, just past the C1 range, is not a control character: a plain "
              "file name", s, None)
    s = base2()
    s.shard_list[1]["name"] = s.shard_list[0]["name"]
    c.sharded("shard-name-repeated", "both shards named alike", s,
              ("PATH", "ShardNameRepeated", s.mpos()["shard"][1]["name"], None), only_manifest=True)
    s = base2()
    s.shard_list[0]["digest"] = s.shard_list[0]["digest"][:31]
    c.sharded("shard-digest-length", "a 31-byte prefix digest", s,
              ("TYPE", "ShardDigestLength", s.mpos()["shard"][0]["digest"], None),
              only_manifest=True)
    s = base2()
    s.shard_list[0]["digest"] = b""
    s.shard_list[1]["name"] = "../x"
    c.sharded("order-m2-entry-by-entry", "shard 1's digest is empty and shard 2's name has "
              "`/`: M2 runs entry by entry, shard 1 first", s,
              ("TYPE", "ShardDigestLength", s.mpos()["shard"][0]["digest"], None),
              only_manifest=True)
    s = base2()
    s.shard_list[1]["name"] = "../x"
    s.entries[0]["name"] = ""
    c.sharded("order-m2-before-m3", "a bad shard name and an empty tensor name", s,
              ("PATH", "ShardName", s.mpos()["shard"][1]["name"], None), only_manifest=True)

    # M3
    def m3(name, note, edit, rule, field, code="TYPE", entry=0, sm=None):
        s = sm or base2()
        edit(s)
        c.sharded(name, note, s, (code, rule, s.mpos()["entry"][entry][field], None),
                  only_manifest=True)

    m3("manifest-name-empty", "tensor 1's name empty",
       lambda s: s.entries[1].update(name=""), "ManifestNameEmpty", "name", entry=1)
    m3("manifest-name-in-two-shards", "the tensor of shard 2 renamed `a`: one name in two "
       "shards", lambda s: s.entries[1].update(name="a"), "ManifestNameRepeated", "name", entry=1)
    m3("manifest-shard-zero", "tensor 0 in shard 0",
       lambda s: s.entries[0].update(shard=0), "ManifestShard", "shard")
    m3("manifest-shard-above", "tensor 1 in shard 3 of 2",
       lambda s: s.entries[1].update(shard=3), "ManifestShard", "shard", entry=1)
    m3("manifest-shard-descending", "entries in shard order 2, 1",
       lambda s: (s.entries[0].update(shard=2), s.entries[1].update(shard=1)),
       "ManifestShard", "shard", entry=1)
    for tag, code in (("zero", 0), ("reserved", 20), ("reserved-high", 4095), ("above", 32768)):
        m3(f"manifest-dtype-{tag}", f"dtype {code}",
           lambda s, code=code: s.entries[0].update(dtype=code), "ManifestDtype", "dtype")
    m3("manifest-rank", "nine dimensions",
       lambda s: s.entries[0].update(shape=[1] * 8 + [2]), "ManifestRank", "shape")
    m3("manifest-count-overflow", "shape [2^32, 2^32, 2]",
       lambda s: s.entries[0].update(shape=[1 << 32, 1 << 32, 2]), "ManifestCountOverflow",
       "shape", code="LIMIT")
    m3("manifest-zero-dim-no-overflow", "shape [0, 2^40, 2^40]: a zero dimension never "
       "overflows; byte_length 8 is wrong for 0 elements",
       lambda s: s.entries[0].update(shape=[0, 1 << 40, 1 << 40]), "ManifestLength",
       "byte_length")
    m3("manifest-layout-on-dense", "a layout name on f32",
       lambda s: s.entries[0].update(layout="Q4_K"), "ManifestLayout", "layout")
    m3("manifest-block-size-on-dense", "block_size 4 on f32",
       lambda s: s.entries[0].update(block_size=4), "ManifestLayout", "layout")
    rich = rich_sharded()
    m3("manifest-opaque-no-layout", "the opaque tensor without its layout name",
       lambda s: s.entries[4].update(layout=""), "ManifestLayout", "layout", entry=4, sm=rich)
    m3("manifest-opaque-block-zero", "the opaque tensor with block_size 0",
       lambda s: s.entries[4].update(block_size=0), "ManifestLayout", "layout", entry=4,
       sm=rich_sharded())
    m3("manifest-opaque-not-multiple", "the opaque tensor with byte_length 19 (block 18)",
       lambda s: s.entries[4].update(byte_length=19), "ManifestLength", "byte_length",
       entry=4, sm=rich_sharded())
    m3("manifest-size-overflow", "f32 of 2^63 elements",
       lambda s: s.entries[0].update(shape=[1 << 32, 1 << 31]), "ManifestSizeOverflow",
       "byte_length", code="LIMIT")
    m3("manifest-length", "byte_length 9 for f32[2]",
       lambda s: s.entries[0].update(byte_length=9), "ManifestLength", "byte_length")
    m3("manifest-length-packed", "byte_length 15 for e2m1[32]",
       lambda s: s.entries[1].update(byte_length=15), "ManifestLength", "byte_length",
       entry=1, sm=quant_sharded())
    m3("order-m3-before-m4", "a bad quant in tensor 1 and a bad length in tensor 2",
       lambda s: (s.entries[1]["quant"].update(scheme=3), s.entries[2].update(byte_length=2)),
       "ManifestLength", "byte_length", entry=2, sm=quant_sharded())
    m3("order-m3-entry-by-entry", "tensor 0 has a bad dtype, tensor 1 an empty name: entry "
       "by entry, tensor 0 first",
       lambda s: (s.entries[0].update(dtype=0), s.entries[1].update(name="")),
       "ManifestDtype", "dtype")

    # M4 (entries 1 = mx (scheme 1, shard 2), 3 = q2 (scheme 2, shard 3))
    def m4(name, note, entry, **q):
        s = quant_sharded()
        if q.pop("absent_to_present", False):
            s.entries[entry]["quant"] = dict(scheme=0, axis=0, group_size=0, scale="", outer="")
        s.entries[entry]["quant"].update(q)
        c.sharded(name, note, s, ("TYPE", "ManifestQuant", s.mpos()["entry"][entry]["quant"],
                                  None), only_manifest=True)

    m4("manifest-quant-scheme-0", "a quant struct with scheme 0 on `w`", 0,
       absent_to_present=True)
    m4("manifest-quant-scheme-3", "scheme 3", 1, scheme=3)
    m4("manifest-quant-scale-unknown", "scale names no tensor", 1, scale="nope")
    m4("manifest-quant-scale-empty", "scale empty", 1, scale="")
    m4("manifest-quant-scale-self", "scale names the tensor itself", 1, scale="mx")
    m4("manifest-quant-scale-other-shard", "scale names a tensor of shard 1", 1, scale="w")
    m4("manifest-quant-scheme-1-outer", "scheme 1 with an outer name", 1, outer="w")
    m4("manifest-quant-outer-empty", "scheme 2 with no outer", 3, outer="")
    m4("manifest-quant-outer-is-scale", "scheme 2, outer = scale", 3, outer="q2.scale")
    m4("manifest-quant-outer-self", "scheme 2, outer = itself", 3, outer="q2")
    m4("manifest-quant-outer-other-shard", "scheme 2, outer in shard 1", 3, outer="w")
    m4("manifest-quant-outer-later-name", "scheme 2 with scheme 1's scale as outer "
       "(another shard)", 3, outer="mx.scale")
    # M5
    s = base2()
    s.digests = s.digests[:32]
    c.sharded("manifest-digest-count", "one digest for two tensors", s,
              ("TYPE", "ManifestDigestCount", s.mpos()["digests"], None), only_manifest=True)
    s = base2()
    s.digests += bytes(32)
    c.sharded("manifest-digest-count-long", "three digests for two tensors", s,
              ("TYPE", "ManifestDigestCount", s.mpos()["digests"], None), only_manifest=True)
    s = base2()
    s.digests = s.digests[:32]
    s.entries[1]["quant"] = {"scheme": 1, "axis": 0, "group_size": 1, "scale": "b", "outer": ""}
    c.sharded("order-m4-before-m5", "a bad quant and a short digest table", s,
              ("TYPE", "ManifestQuant", s.mpos()["entry"][1]["quant"], None), only_manifest=True)


def shard_open_cases(c: Cases):
    # 1 missing
    s = base2()
    c.sharded("shard-missing", "shard 2 is not in the folder", s,
              ("SHARD", "ShardMissing", 0, s.names[1]), drop=(s.names[1],))
    s = base2()
    s.files[s.names[1]] = s.files[s.names[1]][:-1]
    c.sharded("shard-missing-first", "shard 1 missing and shard 2 cut short: shard order",
              s, ("SHARD", "ShardMissing", 0, s.names[0]), drop=(s.names[0],))
    # 2 length
    s = base2()
    n2 = s.names[1]
    full = s.files[n2]
    s.files[n2] = full[:-1]
    c.sharded("shard-cut-by-one-byte", "shard 2 one byte short", s,
              ("SHARD", "ShardLength", len(full) - 1, n2))
    s = base2()
    s.files[n2] = s.files[n2] + b"\x00"
    c.sharded("shard-one-byte-long", "shard 2 one byte long: offset is the manifest's length",
              s, ("SHARD", "ShardLength", len(full), n2))
    s = base2()
    s.files[n2] = b""
    c.sharded("shard-empty-file", "shard 2 is an empty file", s, ("SHARD", "ShardLength", 0, n2))
    # swapped
    s = twins()
    a, b = s.names
    s.files[a], s.files[b] = s.files[b], s.files[a]
    c.sharded("shards-swapped", "two shards of the same length swapped: step 4, index", s,
              ("SHARD", "ShardIndex", s.shard_pos(1)["index"], a))
    s = base2()
    a, b = s.names
    s.files[a], s.files[b] = s.files[b], s.files[a]
    c.sharded("shards-swapped-other-lengths", "two shards of different lengths swapped: the "
              "length check sees it first", s,
              ("SHARD", "ShardLength", min(len(s.files[a]), s.shard_list[0]["length"]), a))
    # 3 the shard's own checks
    s = base2()
    a1 = s.shards[0]
    s.files[s.names[0]] = M.assemble("digests", {}, K.encode_directory(a1),
                                     M.tensor_digests(a1) + bytes(44))
    s.shard_list[0]["length"] = len(s.files[s.names[0]])
    c.sharded("shard-is-digests-record", "shard 1 is a digests record (same length): "
              "SCHEMA at 8", s, ("SCHEMA", "schema_hash", 8, s.names[0]))
    s = base2()
    s.files[s.names[0]] = M.assemble("shard", {}, K.encode_directory(s.shards[0]),
                                     M.tensor_digests(s.shards[0]) * 2, (s.mid, 1, 2))
    s.shard_list[0]["length"] = len(s.files[s.names[0]])
    c.sharded("shard-digest-table-count", "shard 1 with two digests for one tensor (its "
              "own step 3d)", s, ("TYPE", "DigestTableCount", s.shard_pos(1)["digests"],
                                  s.names[0]))
    s = base2()
    data = s.files[s.names[1]]
    s.files[s.names[1]] = put(data, s.shard_pos(2)["count"], "I", 0)
    c.sharded("shard-position-in-model", "shard 2 records count 0: its own rule at step 3",
              s, ("TYPE", "ShardPosition", s.shard_pos(2)["count"], s.names[1]))
    s = base2()
    s.files[s.names[1]] = put(s.files[s.names[1]], s.shard_pos(2)["block"] + HDR.VERSION, "B", 1)
    c.sharded("shard-block-step-2", "shard 2's block with version 1", s,
              ("FRAME", "dir_version", s.shard_pos(2)["block"] + HDR.VERSION, s.names[1]))
    # 4 model, index, count
    s = base2()
    other = Sharded([[T("a", "f32", (2,), F32_2)], [T("b", "u8", (3,), b"\x07\x08\x0a")]])
    s.files[s.names[1]] = other.files[other.names[1]]
    c.sharded("shard-of-another-model", "shard 2 taken from another model (one payload byte "
              "differs, so another model id)", s,
              ("SHARD", "ShardModel", s.shard_pos(2)["model"], s.names[1]))
    s = base2()
    s.files[s.names[0]] = s.shard_bytes(s.shards[0], 1, 2, model=bytes(32))
    c.sharded("shard-model-zero", "shard 1 with a zero model id", s,
              ("SHARD", "ShardModel", s.shard_pos(1)["model"], s.names[0]))
    s = base2()
    s.files[s.names[1]] = s.shard_bytes(s.shards[1], 1, 2)
    c.sharded("shard-index", "shard 2 records index 1", s,
              ("SHARD", "ShardIndex", s.shard_pos(2)["index"], s.names[1]))
    s = base2()
    s.files[s.names[1]] = s.shard_bytes(s.shards[1], 2, 3)
    c.sharded("shard-count", "shard 2 records count 3", s,
              ("SHARD", "ShardCount", s.shard_pos(2)["count"], s.names[1]))
    s = base2()
    s.files[s.names[1]] = s.shard_bytes(s.shards[1], 1, 3, model=bytes(32))
    c.sharded("order-model-index-count", "model, index and count all wrong: model first", s,
              ("SHARD", "ShardModel", s.shard_pos(2)["model"], s.names[1]))
    s = base2()
    s.files[s.names[1]] = s.shard_bytes(s.shards[1], 1, 3)
    c.sharded("order-index-before-count", "index and count wrong: index first", s,
              ("SHARD", "ShardIndex", s.shard_pos(2)["index"], s.names[1]))
    # 5 tensors
    s = base2()
    extra = s.shards[1] + [T("c", "u8", (1,), b"\x00")]
    s.files[s.names[1]] = s.shard_bytes(extra, 2, 2)
    s.reseal(s.names[1])
    c.sharded("shard-tensor-count", "shard 2 holds one tensor more than the manifest says",
              s, ("SHARD", "ShardTensorCount",
                  positions("shard", s.shard_md, extra)["block"] + HDR.TENSOR_COUNT,
                  s.names[1]))
    s = base2()
    s.files[s.names[0]] = s.shard_bytes([T("z", "f32", (2,), F32_2)], 1, 2)
    c.sharded("shard-tensor-name", "shard 1's tensor named `z` (the manifest says `a`)", s,
              ("SHARD", "ShardTensor", s.shard_pos(1)["desc"][0], s.names[0]))
    s = base2()
    s.files[s.names[1]] = s.shard_bytes([T("b", "i8", (3,), b"\x07\x08\x09")], 2, 2)
    c.sharded("shard-tensor-dtype", "shard 2's tensor is i8 (the manifest says u8)", s,
              ("SHARD", "ShardTensor", s.shard_pos(2)["desc"][0], s.names[1]))
    s = base2()
    s.files[s.names[0]] = s.shard_bytes([T("a", "f32", (1, 2), F32_2)], 1, 2)
    c.sharded("shard-tensor-shape", "shard 1's tensor has shape [1, 2]", s,
              ("SHARD", "ShardTensor", s.shard_pos(1)["desc"][0], s.names[0]))
    s = rich_sharded()
    t = s.shards[1]
    t2 = [T("mx", "e2m1", (32,), t[0].payload, quant_scheme=1, quant_axis=0, group_size=16,
            scale_index=1), T("mx.scale", "e8m0", (2,), b"\x7f\x7f")]
    s.files[s.names[1]] = s.shard_bytes(t2, 2, 3)
    s.reseal(s.names[1])
    c.sharded("shard-tensor-quant", "shard 2's scheme-1 tensor with group 16 and two "
              "scales: its first descriptor differs", s,
              ("SHARD", "ShardTensor", s.shard_pos(2)["desc"][0], s.names[1]))
    s = rich_sharded()
    t = s.shards[2]
    t3 = [T("q2", "e2m1", (16,), t[0].payload, quant_scheme=2, quant_axis=0, group_size=16,
            scale_index=2, outer_index=1), t[1], t[2]]
    s.files[s.names[2]] = s.shard_bytes(t3, 3, 3, block=K.encode_directory(t3, validate=False))
    c.sharded("shard-tensor-scale-by-name", "shard 3's scheme-2 tensor with scale_index and "
              "outer_index exchanged (same length, same payloads): scale and outer compare "
              "by name, ShardTensor before the directory's own step 11",
              s, ("SHARD", "ShardTensor", s.shard_pos(3)["desc"][0], s.names[2]))
    s = base2()
    s.files[s.names[1]] = s.shard_bytes([T("b", "u8", (3,), b"\x07\x08\x0a")], 2, 2)
    c.sharded("shard-tensor-digest", "shard 2 of another version: same layout, another "
              "payload and its own (right) digest", s,
              ("SHARD", "ShardTensorDigest", s.shard_pos(2)["digests"] + 4, s.names[1]))
    s = base2()
    s.files[s.names[0]] = s.shard_bytes([T("z", "f32", (2,), bytes(8))], 1, 2)
    c.sharded("order-tensor-before-digest", "shard 1's tensor renamed and changed: "
              "ShardTensor first", s,
              ("SHARD", "ShardTensor", s.shard_pos(1)["desc"][0], s.names[0]))
    s = Sharded([two_tensors(), [T("c", "u8", (1,), b"\x01")]])
    s.files[s.names[0]] = s.shard_bytes([s.shards[0][0], T("b", "u8", (3,), b"\x07\x08\x0a")],
                                        1, 2)
    c.sharded("order-digest-of-0-before-tensor-of-1", "per descriptor: descriptor 1's "
              "digest differs; descriptor 0 is fine", s,
              ("SHARD", "ShardTensorDigest", s.shard_pos(1)["digests"] + 4 + 32, s.names[0]))
    s = Sharded([two_tensors(), [T("c", "u8", (1,), b"\x01")]])
    s.files[s.names[0]] = s.shard_bytes([T("a", "f32", (2,), bytes(8)),
                                         T("x", "u8", (3,), b"\x07\x08\x09")], 1, 2)
    c.sharded("order-digest-0-before-tensor-1", "descriptor 0's digest differs and "
              "descriptor 1's name differs: descriptor 0 first (descriptor by descriptor)", s,
              ("SHARD", "ShardTensorDigest", s.shard_pos(1)["digests"] + 4, s.names[0]))
    # 6 prefix
    s = Sharded([two_tensors()[:1], two_tensors()[1:]], shard_metadata={"k": "a"})
    s.files[s.names[1]] = M.assemble("shard", {"k": "b"}, K.encode_directory(s.shards[1]),
                                     M.tensor_digests(s.shards[1]), (s.mid, 2, 2))
    c.sharded("shard-prefix-digest", "shard 2's metadata changed (same length)", s,
              ("SHARD", "ShardPrefixDigest", 0, s.names[1]))
    s = base2()
    s.shard_list[0]["digest"] = bytes(32)
    c.sharded("shard-prefix-digest-in-manifest", "the manifest's prefix digest of shard 1 "
              "is zero", s, ("SHARD", "ShardPrefixDigest", 0, s.names[0]))
    # 7 steps 9d to 12
    s = base2()
    n1 = s.names[0]
    s.files[n1] = flip(s.files[n1], s.shard_pos(1)["payload"][0] + 3)
    c.sharded("shard-flipped-payload", "a payload byte of shard 1 flipped: DIGEST in shard 1",
              s, ("DIGEST", "PayloadDigest", s.shard_pos(1)["payload"][0], n1))
    c.sharded("shard-flipped-payload-no-verify", "the same, not verifying", s, None,
              verify=False)
    c.sharded("order-shard-1-fully-before-shard-2", "shard 1 flipped and shard 2 missing: "
              "shard 1 is checked to its end first", s,
              ("DIGEST", "PayloadDigest", s.shard_pos(1)["payload"][0], n1), drop=(s.names[1],))
    c.sharded("order-no-verify-then-missing", "the same, not verifying: shard 2 missing", s,
              ("SHARD", "ShardMissing", 0, s.names[1]), verify=False, drop=(s.names[1],))
    s = Sharded([two_tensors(), [T("c", "u8", (1,), b"\x01")]])
    n1 = s.names[0]
    p1 = s.shard_pos(1)
    s.files[n1] = flip(s.files[n1], p1["payload"][0] + 8)
    c.sharded("shard-gap-nonzero", "a nonzero gap byte in shard 1 (covered by no digest, "
              "outside the prefix): step 10", s,
              ("TYPE", "gap_nonzero", p1["payload"][0] + 8, n1))
    s = base2()
    n2 = s.names[1]
    s.files[n2] = s.files[n2] + b"\x00"
    s.shard_list[1]["length"] += 1
    c.sharded("shard-trailing", "a byte after shard 2's block, with the manifest's length "
              "counting it", s, ("TRAILING", "trailing", len(s.files[n2]) - 1, n2))
    s = Sharded([[T("flags", "bool", (3,), b"\x01\x00\x01")]])
    n1 = s.names[0]
    p1 = s.shard_pos(1)
    s.files[n1] = put(s.files[n1], p1["payload"][0] + 2, "B", 2)
    c.sharded("shard-bool-byte-digest", "a bool byte 02 in a shard: DIGEST first", s,
              ("DIGEST", "PayloadDigest", p1["payload"][0], n1))
    c.sharded("shard-bool-byte-no-verify", "the same, not verifying: step 11", s,
              ("TYPE", "bool_byte", p1["payload"][0] + 2, n1), verify=False)


# ---------------------------------------------------------------- signed models

def _seed(label: str) -> bytes:
    return sha(b"kiln reference signer " + label.encode())


SEED_A, SEED_B = _seed("A"), _seed("B")
KEY_A, KEY_B = E.public_key(SEED_A), E.public_key(SEED_B)
TARGET = "board-a"


def trust(key=KEY_A, target=None, newer_than=None, usable=True):
    return {"key": bytes(key).hex(), "target": target, "newer_than": newer_than,
            "usable": usable}


def signed_positions(metadata, tensors, key_len=32, sig_len=64, target=TARGET,
                     n_digests=None):
    """Byte positions in a signed record built by signed_bytes: counted from the encoding."""
    p = {"key": 16, "key_bytes": 20, "sig_len": 20 + key_len, "sig": 24 + key_len}
    pos = 24 + key_len + sig_len + md_len(metadata)
    p["release"] = pos
    p["target"] = pos + 8
    pos += 12 + len(target.encode())
    p["digests"] = pos
    pos += 4 + 32 * (len(tensors) if n_digests is None else n_digests)
    return _block_positions(p, pos, tensors)


def resign(buf: bytes, prefix_end: int, seed=SEED_A) -> bytes:
    """buf with a signature by `seed` over its bytes 0..56 and 120..prefix_end."""
    sig = E.sign(seed, buf[:56] + buf[120:prefix_end])
    return buf[:56] + sig + buf[120:]


SMD = {"license": "CC0-1.0"}


def signed_bytes(tensors, metadata=SMD, version=7, target=TARGET, seed=SEED_A, key=None,
                 sig=None, digests=None, block=None):
    """A signed record from parts, signed by `seed` (unless `sig` is given) over the message
    the generator counts itself (bytes before the payload region, without 56..120)."""
    tensors = [K._as_tensor(t) for t in tensors]
    key = E.public_key(seed) if key is None else key
    buf = M.assemble_signed(key, bytes(64) if sig is None else sig, metadata, version, target,
                            M.tensor_digests(tensors) if digests is None else digests,
                            K.encode_directory(tensors) if block is None else block)
    if sig is None:
        buf = resign(buf, signed_positions(metadata, tensors, target=target)["base"], seed)
    return buf


def small_tensors():
    return [T("w", "f32", (2,), F32_2), T("ids", "u8", (5,), b"\x01\x02\x03\x04\x05")]


def signed_model_cases(c: Cases):
    ta = trust()
    rich = rich_tensors()
    c.single("signed-rich", "a signed record of every tensor kind, read with the signer's key",
             signed_bytes(rich), None, trust=ta)
    ts = small_tensors()
    good = signed_bytes(ts)
    p = signed_positions(SMD, ts)
    c.single("signed-target-and-version", "the key, the target and running version 6: "
             "version 7 is newer", good, None, trust=trust(target=TARGET, newer_than=6))
    c.single("signed-no-key", "a signed record read without a key: a model file like any "
             "other (the signature is not checked)", good, None)
    c.single("signed-no-key-bad-signature", "a flipped signature byte, read without a key",
             flip(good, 56 + 10), None)
    c.single("signed-no-key-flipped-payload", "a flipped payload byte read without a key: "
             "DIGEST", flip(good, p["payload"][1]), ("DIGEST", "PayloadDigest", p["payload"][1]))
    c.single("signed-empty-model", "a signed record with no tensors and no metadata, empty "
             "target", signed_bytes([], {}, 1, ""), None, trust=ta)
    c.single("signed-version-max", "version 2^64-1, the reader runs 2^64-2",
             signed_bytes(ts, version=K.U64_MAX), None, trust=trust(newer_than=K.U64_MAX - 1))
    c.single("signed-target-not-asked", "another target, the reader names none",
             signed_bytes(ts, target="board-b"), None, trust=ta)

    # NotSigned
    c.single("not-signed-plain", "a plain record given to a reader with a key",
             M.write_model(SMD, ts, digests=False), ("SIGNATURE", "NotSigned", 8), trust=ta)
    dig = M.write_model(SMD, ts)
    c.single("not-signed-digests", "a digests record given to a reader with a key", dig,
             ("SIGNATURE", "NotSigned", 8), trust=ta)
    c.single("not-signed-shard", "a shard record given to a reader with a key",
             M.assemble("shard", {}, K.encode_directory(ts), M.tensor_digests(ts),
                        (sha(b"m"), 1, 1)), ("SIGNATURE", "NotSigned", 8), trust=ta)
    c.single("order-frame-before-not-signed", "a digests frame with profile 1, given to a "
             "reader with a key: the frame's own faults come before its hash (FRAME at 4)",
             put(dig, 4, "B", 1), ("FRAME", "frame_profile", 4), trust=ta)
    c.single("trusted-other-frame", "a frame of no record type, given to a reader with a key: "
             "read as a signed record, SCHEMA at 8", put(dig, 8, "Q", M.HASHES["digests"] ^ 1),
             ("SCHEMA", "schema_hash", 8), trust=ta)
    c.single("trusted-plain-directory", "a standalone directory block given to a reader "
             "with a key: no frame", K.encode_directory(ts), ("FRAME", "frame_magic", 0),
             trust=ta)
    c.single("trusted-short-file", "10 bytes, given to a reader with a key", good[:10],
             ("EOF", "frame_eof", 0), trust=ta)

    # SignatureKeyLength, SignatureLength
    for n in (31, 33, 0):
        c.single(f"signed-key-length-{n}", f"a {n}-byte key", signed_bytes(
            ts, key=KEY_A[:31] if n == 31 else (KEY_A + b"\x00")[:n], sig=bytes(64)),
            ("TYPE", "SignatureKeyLength", 16), trust=ta)
    c.single("signed-key-length-no-key", "a 33-byte key read without a key: the record's "
             "own rule (the key id is 32 bytes)", signed_bytes(ts, key=KEY_A + b"\x00",
                                                              sig=bytes(64)),
             ("TYPE", "SignatureKeyLength", 16))
    for n in (63, 65, 0):
        c.single(f"signed-sig-length-{n}", f"a {n}-byte signature",
                 signed_bytes(ts, sig=bytes(n)), ("TYPE", "SignatureLength", 52), trust=ta)
    c.single("signed-sig-length-no-key", "a 63-byte signature read without a key",
             signed_bytes(ts, sig=bytes(63)), ("TYPE", "SignatureLength", 52))
    c.single("order-key-length-before-sig-length", "a 31-byte key and a 63-byte signature",
             signed_bytes(ts, key=KEY_A[:31], sig=bytes(63)),
             ("TYPE", "SignatureKeyLength", 16), trust=ta)
    c.single("order-sig-length-before-key", "another signer's key and a 63-byte signature: "
             "the lengths first", signed_bytes(ts, seed=SEED_B, sig=bytes(63)),
             ("TYPE", "SignatureLength", 52), trust=ta)
    cut = signed_bytes(ts, key=KEY_A[:31], sig=bytes(64))
    c.single("order-signature-field-read-whole", "a 31-byte key and the file cut inside the "
             "signature: the field is read whole (EOF) before its rules", cut[:51 + 4 + 20],
             ("EOF", "length_past_end", 51), trust=ta)
    c.single("signed-key-eof", "the file cut inside the key", good[:30],
             ("EOF", "length_past_end", 16), trust=ta)
    c.single("signed-sig-eof", "the file cut inside the signature", good[:100],
             ("EOF", "length_past_end", 52), trust=ta)

    # SignatureKey
    other = signed_bytes(ts, seed=SEED_B)
    c.single("signed-other-key", "signed by another key", other,
             ("SIGNATURE", "SignatureKey", 20), trust=ta)
    c.single("signed-other-key-no-key", "the same read without a key", other, None)
    c.single("signed-other-key-trusted", "the same with that key trusted", other, None,
             trust=trust(KEY_B))
    c.single("order-key-before-eof", "another signer's record cut inside its digest table: "
             "the key is checked as it is read", other[:p["digests"] + 20],
             ("SIGNATURE", "SignatureKey", 20), trust=ta)
    c.single("order-key-before-release", "another key, another target and an old version",
             signed_bytes(ts, seed=SEED_B, version=1, target="board-b"),
             ("SIGNATURE", "SignatureKey", 20), trust=trust(target=TARGET, newer_than=6))

    # ReleaseTarget, ReleaseVersion
    for tag, tgt in (("other", "board-b"), ("empty", ""), ("longer", "board-a2"),
                     ("case", "Board-a")):
        c.single(f"release-target-{tag}", f"target {tgt!r}, the reader is {TARGET!r}",
                 signed_bytes(ts, target=tgt),
                 ("SIGNATURE", "ReleaseTarget", signed_positions(SMD, ts, target=tgt)["target"]),
                 trust=trust(target=TARGET))
    c.single("release-target-utf8", "the target holds the byte ff: the Frozen reading of "
             "`release` (UTF8) comes before its rules", put(good, p["target"] + 4 + 6, "B", 0xFF),
             ("UTF8", "str_utf8", p["target"] + 4 + 6), trust=trust(target=TARGET))
    c.single("release-version-equal", "version 7, the reader runs 7 (a replay)", good,
             ("SIGNATURE", "ReleaseVersion", p["release"]), trust=trust(newer_than=7))
    c.single("release-version-lower", "version 3, the reader runs 7 (a rollback)",
             signed_bytes(ts, version=3), ("SIGNATURE", "ReleaseVersion", p["release"]),
             trust=trust(newer_than=7))
    c.single("release-version-zero-running-zero", "version 0, the reader runs 0",
             signed_bytes(ts, version=0), ("SIGNATURE", "ReleaseVersion", p["release"]),
             trust=trust(newer_than=0))
    c.single("release-version-max-running-max", "version 2^64-1, the reader runs 2^64-1",
             signed_bytes(ts, version=K.U64_MAX), ("SIGNATURE", "ReleaseVersion", p["release"]),
             trust=trust(newer_than=K.U64_MAX))
    c.single("order-target-before-version", "another target and an old version: the target "
             "first (the table's order, though the version comes first in the bytes)",
             signed_bytes(ts, version=1, target="board-b"),
             ("SIGNATURE", "ReleaseTarget", signed_positions(SMD, ts, target="board-b")["target"]),
             trust=trust(target=TARGET, newer_than=6))
    c.single("order-release-before-digest-table", "an old version and a 33-byte digest table",
             signed_bytes(ts, version=1, digests=M.tensor_digests(ts) + b"\x00", sig=bytes(64)),
             ("SIGNATURE", "ReleaseVersion", p["release"]), trust=trust(newer_than=6))

    # SignatureInvalid (9s)
    inv = ("SIGNATURE", "SignatureInvalid", 56)
    c.single("signed-signature-flipped", "one signature bit flipped", flip(good, 56 + 63, 0x01),
             inv, trust=ta)
    c.single("signed-signature-zero", "a signature of 64 zero bytes",
             signed_bytes(ts, sig=bytes(64)), inv, trust=ta)
    sig = bytearray(good[56:120])
    s_plus_l = int.from_bytes(sig[32:], "little") + E.L
    sig[32:] = s_plus_l.to_bytes(32, "little")
    c.single("signed-signature-s-not-canonical", "the signature's S replaced by S + L (the "
             "same value mod L): not canonical", good[:56] + bytes(sig) + good[120:], inv,
             trust=ta)
    md2 = dict(SMD, license="CC0-1.1")
    c.single("signed-metadata-changed", "a metadata value changed after signing (same "
             "length)", signed_bytes(ts, md2, sig=good[56:120]), inv, trust=ta)
    c.single("signed-version-changed", "the release version raised after signing",
             put(good, p["release"], "Q", 8), inv, trust=ta)
    c.single("signed-target-changed", "the target changed after signing (same length), the "
             "reader names it", signed_bytes(ts, target="board-b", sig=good[56:120]), inv,
             trust=trust(target="board-b"))
    c.single("signed-digest-changed", "a digest entry changed after signing: 9s before 9d",
             flip(good, p["digests"] + 4 + 32 + 5), inv, trust=ta)
    c.single("signed-name-changed", "a tensor renamed `w` -> `v` in the name heap after "
             "signing", signed_bytes([T("v", "f32", (2,), F32_2)] + ts[1:], sig=good[56:120],
                                     digests=M.tensor_digests(ts)), inv, trust=ta)
    c.single("signed-shape-changed", "a dimension changed after signing (u8[5] -> [5, 1])",
             signed_bytes([ts[0], T("ids", "u8", (5, 1), ts[1].payload)], sig=good[56:120]),
             inv, trust=ta)
    c.single("signed-key-swapped", "the key field replaced by the trusted key of another "
             "signer: its signature does not verify", signed_bytes(ts, key=KEY_B,
                                                                  sig=good[56:120]),
             inv, trust=trust(KEY_B))
    c.single("order-9s-before-9d", "a bad signature and a flipped payload byte",
             flip(flip(good, 60), p["payload"][0]), inv, trust=ta)
    c.single("order-step-9-before-9s", "dtype 0 in a descriptor (step 9), so the signature "
             "does not verify either", put(good, p["desc"][1] + DESC.DTYPE, "H", 0),
             ("TYPE", "dtype_zero", p["desc"][1] + DESC.DTYPE), trust=ta)
    c.single("order-step-7-before-9s", "a nonzero padding byte before the payloads (step 7)",
             flip(good, p["base"] - 1), ("TYPE", "pad_nonzero", p["base"] - 1), trust=ta)
    c.single("order-3d-before-9s", "one digest for two tensors (step 3d), not signed over",
             signed_bytes(ts, digests=M.tensor_digests(ts)[:32], sig=bytes(64)),
             ("TYPE", "DigestTableCount", signed_positions(SMD, ts, n_digests=1)["digests"]),
             trust=ta)

    # after 9s: 9d, 10, 12 under a good signature
    c.single("signed-flipped-payload", "a flipped payload byte, the signature good: DIGEST "
             "(payloads are not signed, their digests are)", flip(good, p["payload"][1] + 4),
             ("DIGEST", "PayloadDigest", p["payload"][1]), trust=ta)
    gap = p["payload"][0] + 8
    c.single("signed-gap-nonzero", "a nonzero gap byte, the signature good: step 10",
             flip(good, gap), ("TYPE", "gap_nonzero", gap), trust=ta)
    c.single("signed-trailing", "a byte after the block, the signature good: TRAILING",
             good + b"\x00", ("TRAILING", "trailing", len(good)), trust=ta)
    c.single("signed-digest-table-length", "a 65-byte digest table",
             signed_bytes(ts, digests=M.tensor_digests(ts) + b"\x00", sig=bytes(64)),
             ("TYPE", "DigestTableLength", p["digests"]), trust=ta)

    # keys a reader refuses when it is given them
    empty = signed_bytes([], {}, 1, "")
    for i, k in enumerate(E.SMALL_ORDER_KEYS):
        c.single(f"trust-small-order-key-{i}", f"the trusted key {k.hex()[:16]}... is of small "
                 "order: refused when given", empty, None, trust=trust(k, usable=False))
    not_point = next(bytes([i]) + bytes(31) for i in range(2, 256)
                     if E.decode_point(bytes([i]) + bytes(31)) is None)
    c.single("trust-key-not-a-point", f"the trusted key {not_point.hex()[:8]}... encodes no "
             "point: refused when given", empty, None, trust=trust(not_point, usable=False))
    y3 = (E.P + 3).to_bytes(32, "little")
    assert E.decode_point((3).to_bytes(32, "little")) is not None and E.decode_point(y3) is None
    c.single("trust-key-not-canonical", "the trusted key holds y = p + 3: not an RFC 8032 "
             "encoding (decoding fails for y >= p), though y = 3 is a point of large order: "
             "refused when given", empty, None, trust=trust(y3, usable=False))


# ---------------------------------------------------------------- signed manifests

def signed_manifest_bytes(sm: Sharded, seed=SEED_A, version=7, target=TARGET, key=None,
                          sig=None, manifest=None):
    """The signed manifest of sm's manifest (or of `manifest`), assembled here from the
    unsigned one's parts and signed by `seed` over every byte but 56..120 (unless `sig`)."""
    man = sm.manifest() if manifest is None else manifest
    md_end = 16 + md_len(sm.metadata)
    key = E.public_key(seed) if key is None else key
    out = (b"KLN0" + bytes(4) + struct.pack("<Q", M.HASHES["signed_manifest"])
           + K.encode(M.SIGNATURE_FIELD_TYPE, {"key": key, "sig": bytes(64) if sig is None
                                               else sig})
           + man[16:md_end] + K.encode(M.RELEASE_TYPE, {"version": version, "target": target})
           + man[md_end:])
    if sig is None:
        out = out[:56] + E.sign(seed, out[:56] + out[120:]) + out[120:]
    return out


def signed_mpos(sm: Sharded, target=TARGET):
    """Positions in sm's signed manifest: the unsigned ones moved by the two fields."""
    p = sm.mpos()
    md_end = 16 + md_len(sm.metadata)
    shift = 104 + 12 + len(target.encode())

    def move(v):
        if isinstance(v, dict):
            return {k: move(x) for k, x in v.items()}
        if isinstance(v, list):
            return [move(x) for x in v]
        return v + shift if v >= md_end else v + 104
    q = move(p)
    q["release"] = md_end + 104
    q["target"] = q["release"] + 8
    return q


def signed_manifest_cases(c: Cases):
    ta = trust()
    s = base2()
    good = signed_manifest_bytes(s)
    c.sharded("signed-manifest", "a signed manifest and its two shards, read with the key, "
              "target and running version 6", s, None, manifest=good,
              trust=trust(target=TARGET, newer_than=6))
    c.sharded("signed-manifest-no-key", "the same read without a key: a manifest", s, None,
              manifest=good)
    r = rich_sharded()
    c.sharded("signed-manifest-rich", "three shards, every tensor kind", r, None,
              manifest=signed_manifest_bytes(r), trust=ta)
    c.sharded("not-signed-manifest", "an unsigned manifest given to a reader with a key", s,
              ("SIGNATURE", "NotSigned", 8, None), only_manifest=True, trust=ta)
    mp = signed_mpos(s)
    c.sharded("signed-manifest-other-key", "signed by another key", s,
              ("SIGNATURE", "SignatureKey", 20, None), manifest=signed_manifest_bytes(s, SEED_B),
              trust=ta, only_manifest=True)
    c.sharded("signed-manifest-release-target", "for another target", s,
              ("SIGNATURE", "ReleaseTarget", signed_mpos(s, "board-b")["target"], None),
              manifest=signed_manifest_bytes(s, target="board-b"), trust=trust(target=TARGET),
              only_manifest=True)
    c.sharded("signed-manifest-release-version", "version 7, the reader runs 7", s,
              ("SIGNATURE", "ReleaseVersion", mp["release"], None), manifest=good,
              trust=trust(newer_than=7), only_manifest=True)
    c.sharded("signed-manifest-key-length", "a 31-byte key", s,
              ("TYPE", "SignatureKeyLength", 16, None),
              manifest=signed_manifest_bytes(s, key=KEY_A[:31], sig=bytes(64)), trust=ta,
              only_manifest=True)
    c.sharded("signed-manifest-sig-length", "a 65-byte signature, read without a key", s,
              ("TYPE", "SignatureLength", 52, None),
              manifest=signed_manifest_bytes(s, sig=bytes(65)), only_manifest=True)
    c.sharded("signed-manifest-signature-flipped", "a signature bit flipped", s,
              ("SIGNATURE", "SignatureInvalid", 56, None), manifest=flip(good, 70), trust=ta,
              only_manifest=True)
    t = base2()
    t.shard_list[0]["digest"] = bytes(32)
    changed = signed_manifest_bytes(t, sig=good[56:120])
    c.sharded("signed-manifest-prefix-digest-changed", "shard 1's prefix digest changed "
              "after signing: the shard list is signed", t,
              ("SIGNATURE", "SignatureInvalid", 56, None), manifest=changed, trust=ta,
              only_manifest=True)
    c.sharded("signed-manifest-prefix-digest-changed-no-key", "the same without a key: "
              "shard 1's prefix does not match", t, ("SHARD", "ShardPrefixDigest", 0,
                                                      t.names[0]), manifest=changed)
    t = base2()
    t.metadata["license"] = "CC0-1.1"
    c.sharded("signed-manifest-metadata-changed", "the metadata changed after signing", t,
              ("SIGNATURE", "SignatureInvalid", 56, None),
              manifest=signed_manifest_bytes(t, sig=good[56:120]), trust=ta, only_manifest=True)
    t = base2()
    t.shard_list[1]["name"] = "../x"
    c.sharded("order-m2-before-signature", "a shard name with `/`, not signed over: M2 "
              "before the signature", t,
              ("PATH", "ShardName", signed_mpos(t)["shard"][1]["name"], None),
              manifest=signed_manifest_bytes(t, sig=good[56:120]), only_manifest=True,
              trust=ta)
    t = base2()
    t.shard_list = []
    c.sharded("signed-manifest-no-shards", "a signed manifest with no shards (M1)", t,
              ("TYPE", "ManifestNoShards", signed_mpos(t)["shards"], None),
              manifest=signed_manifest_bytes(t), only_manifest=True, trust=ta)
    c.sharded("order-key-before-frozen-eof", "another signer's manifest cut by one byte: "
              "the key is checked as it is read", s, ("SIGNATURE", "SignatureKey", 20, None),
              manifest=signed_manifest_bytes(s, SEED_B)[:-1], only_manifest=True, trust=ta)
    c.sharded("order-key-before-trailing", "another signer's manifest with a byte after it: "
              "the key is checked as it is read", s, ("SIGNATURE", "SignatureKey", 20, None),
              manifest=signed_manifest_bytes(s, SEED_B) + b"\x00", only_manifest=True,
              trust=ta)
    c.sharded("order-release-before-frozen-eof", "a manifest for another target cut by one "
              "byte: the target is checked as it is read", s,
              ("SIGNATURE", "ReleaseTarget", signed_mpos(s, "board-b")["target"], None),
              manifest=signed_manifest_bytes(s, target="board-b")[:-1], only_manifest=True,
              trust=trust(target=TARGET))
    c.sharded("signed-manifest-truncated-no-key", "the same read without a key: EOF", s,
              ("EOF", "length_past_end", mp["digests"], None),
              manifest=signed_manifest_bytes(s, SEED_B)[:-1], only_manifest=True)
    c.sharded("signed-manifest-trailing", "a byte after the signed manifest: TRAILING (the "
              "Frozen rules) before the signature", s,
              ("TRAILING", "trailing", len(good), None), manifest=good + b"\x00",
              only_manifest=True, trust=ta)
    t = base2()
    n1 = t.names[0]
    t.files[n1] = flip(t.files[n1], t.shard_pos(1)["payload"][0] + 1)
    c.sharded("signed-manifest-shard-flipped-payload", "a payload byte of shard 1 flipped "
              "under a good signature: DIGEST in shard 1", t,
              ("DIGEST", "PayloadDigest", t.shard_pos(1)["payload"][0], n1), manifest=good,
              trust=ta)
    t = base2()
    c.sharded("signed-manifest-shard-missing", "shard 2 missing", t,
              ("SHARD", "ShardMissing", 0, t.names[1]), manifest=good, drop=(t.names[1],),
              trust=ta)
    t = base2()
    t.files[t.names[1]] = t.shard_bytes([T("b", "u8", (3,), b"\x07\x08\x0a")], 2, 2)
    c.sharded("signed-manifest-shard-of-another-version", "shard 2 of another version "
              "(its own digest right)", t,
              ("SHARD", "ShardTensorDigest", t.shard_pos(2)["digests"] + 4, t.names[1]),
              manifest=good, trust=ta)
    # a signed record where a shard belongs
    t = base2()
    a1 = t.shards[0]
    t.files[t.names[0]] = signed_bytes(a1, {})
    t.shard_list[0]["length"] = len(t.files[t.names[0]])
    c.sharded("shard-is-signed-record", "shard 1 is a signed record (the manifest's length "
              "agrees): shards carry no signature, SCHEMA at 8", t,
              ("SCHEMA", "schema_hash", 8, t.names[0]))


# ---------------------------------------------------------------- delta updates

OLD, UPDATE, NEW = "old.kiln", "update.delta", "new.kiln"


def delta_old():
    return [T("a", "f32", (2,), F32_2), T("e", "u8", (0,), b""),
            T("b", "u8", (3,), b"\x07\x08\x09")]


def delta_new():
    """b kept (moved first), d new (the length of b), the empty tensor kept, f new."""
    return [T("b", "u8", (3,), b"\x07\x08\x09"), T("d", "u8", (3,), b"\x0a\x0b\x0c"),
            T("e", "u8", (0,), b""), T("f", "u8", (2,), b"\x01\x02")]


def delta_bytes(old: bytes, old_ts, new: bytes, new_ts, reuse=None, base=None, sent=None,
                new_md=None, new_end=None):
    """A delta assembled here from its parts: the head, NEW's prefix, the sent payloads
    (by default those of the tensors whose reuse entry is 0). OLD is a signed record with
    no metadata, NEW one with `new_md` (none by default), both with an empty target;
    new_end: where NEW's payload region starts, for a NEW of another kind."""
    if reuse is None:
        reuse = []
        keys = [(sha(t.payload), len(t.payload)) for t in old_ts]
        for t in new_ts:
            k = (sha(t.payload), len(t.payload))
            reuse.append(keys.index(k) + 1 if k in keys else 0)
    old_base = signed_positions({}, old_ts, target="")["base"]
    new_base = signed_positions(new_md or {}, new_ts, target="")["base"] if new_end is None \
        else new_end
    if base is None:
        base = sha(old[:old_base])
    if sent is None:
        sent = b"".join(t.payload for t, i in zip(new_ts, reuse) if i == 0)
    head = b"KLN0" + bytes(4) + struct.pack("<Q", D.DELTA_HASH)
    head += K.encode("list<u8>", base) + K.encode("list<u32>", reuse)
    return head + new[:new_base] + sent, reuse


def delta_sent_positions(n_reuse, new_ts, reuse, base_len=32):
    """(position of NEW's first byte in the delta, [position of each sent payload or None])."""
    at = 16 + 4 + base_len + 4 + 4 * n_reuse
    q = at + signed_positions({}, new_ts, target="")["base"]
    out = []
    for t, i in zip(new_ts, reuse):
        out.append(q if i == 0 else None)
        if i == 0:
            q += len(t.payload)
    return at, out


def delta_cases(c: Cases):
    old_ts, new_ts = delta_old(), delta_new()
    old = signed_bytes(old_ts, {}, 1, "")
    new = signed_bytes(new_ts, {}, 2, "")
    delta, reuse = delta_bytes(old, old_ts, new, new_ts)
    assert reuse == [3, 0, 2, 0], reuse
    assert delta == D.make_delta(old, new), "the reference's make_delta writes the same bytes"
    t1 = trust(newer_than=1)

    def add(name, note, dl, expect, result=None, base=old, tr=t1):
        files = {OLD: base, UPDATE: dl}
        if result is not None:
            files[NEW] = result
        c.add(name, note, files, UPDATE, expect, True, tr,
              {"base": OLD, "result": NEW if result is not None else None})

    add("delta-applies", "OLD v1 [a, e (empty), b] to NEW v2 [b, d, e, f]: reuse "
        "[3, 0, 2, 0], the payloads of d and f sent; the rebuilt NEW is byte for byte NEW "
        "and the device (key, running version 1) accepts it", delta, None, new)
    add("delta-applies-no-key", "the same, the rebuilt model read without a key", delta, None,
        new, tr=None)
    other_ts = [T("z", "u8", (2,), b"\xaa\xbb")]
    other = signed_bytes(other_ts, {}, 1, "")
    d2, r2 = delta_bytes(other, other_ts, new, new_ts)
    assert r2 == [0] * 4
    add("delta-all-sent", "OLD has none of NEW's payloads: every entry 0", d2, None, new,
        base=other)
    same = signed_bytes(old_ts, {"note": "v2"}, 2, "")
    d3, r3 = delta_bytes(old, old_ts, same, old_ts, new_md={"note": "v2"})
    assert r3 == [1, 2, 3] and d3 == D.make_delta(old, same)
    add("delta-all-reused", "NEW differs from OLD in its metadata and version only: no "
        "payload is sent", d3, None, same)

    at, sent_at = delta_sent_positions(4, new_ts, reuse)
    pos = D.delta_positions(delta)        # read back only to cross-check the counting
    assert pos["new"] == at and pos["reuse"] == 52
    ent = [56 + 4 * j for j in range(4)]
    # DeltaBaseLength, DeltaBase
    add("delta-base-length", "a 31-byte base", delta_bytes(old, old_ts, new, new_ts,
                                                           base=sha(old)[:31])[0],
        ("TYPE", "DeltaBaseLength", 16, UPDATE))
    add("delta-base-length-empty", "an empty base", delta_bytes(old, old_ts, new, new_ts,
                                                                base=b"")[0],
        ("TYPE", "DeltaBaseLength", 16, UPDATE))
    add("delta-base-other-model", "the delta applied to another model than its base", delta,
        ("TYPE", "DeltaBase", 20, UPDATE), base=other)
    add("delta-base-whole-file", "base is SHA-256 of OLD's whole file, not of its bytes "
        "before the payloads", delta_bytes(old, old_ts, new, new_ts, base=sha(old))[0],
        ("TYPE", "DeltaBase", 20, UPDATE))
    add("delta-base-eof", "the delta cut inside base: EOF at base's length word, as for any "
        "truncated Frozen list", delta[:40], ("EOF", "length_past_end", 16, UPDATE))
    add("delta-reuse-eof", "the delta cut inside the reuse list (one entry of four there): "
        "EOF at its count word", delta[:60], ("EOF", "count_past_end", 52, UPDATE))
    # DeltaReuseCount
    short = delta_bytes(old, old_ts, new, new_ts, reuse=reuse[:3])[0]
    add("delta-reuse-count-short", "three entries for four tensors", short,
        ("TYPE", "DeltaReuseCount", 52, UPDATE))
    add("delta-reuse-count-long", "five entries for four tensors",
        delta_bytes(old, old_ts, new, new_ts, reuse=reuse + [0])[0],
        ("TYPE", "DeltaReuseCount", 52, UPDATE))
    add("order-base-before-reuse-count", "three entries, applied to another model: DeltaBase",
        short, ("TYPE", "DeltaBase", 20, UPDATE), base=other)
    add("order-reuse-count-before-entries", "three entries, one naming no tensor",
        delta_bytes(old, old_ts, new, new_ts, reuse=[3, 9, 2])[0],
        ("TYPE", "DeltaReuseCount", 52, UPDATE))
    # DeltaReuse
    add("delta-reuse-no-tensor", "entry 1 is 4: OLD has three tensors",
        delta_bytes(old, old_ts, new, new_ts, reuse=[3, 4, 2, 0])[0],
        ("TYPE", "DeltaReuse", ent[1], UPDATE))
    add("delta-reuse-huge", "entry 3 is 2^32-1",
        delta_bytes(old, old_ts, new, new_ts, reuse=[3, 0, 2, 0xFFFFFFFF])[0],
        ("TYPE", "DeltaReuse", ent[3], UPDATE))
    add("delta-reuse-other-length", "entry 1 names OLD's a (8 bytes) for d (3 bytes)",
        delta_bytes(old, old_ts, new, new_ts, reuse=[3, 1, 2, 0])[0],
        ("TYPE", "DeltaReuse", ent[1], UPDATE))
    add("order-reuse-entry-by-entry", "entries 0 and 3 name tensors of other lengths: entry 0",
        delta_bytes(old, old_ts, new, new_ts, reuse=[1, 0, 2, 3])[0],
        ("TYPE", "DeltaReuse", ent[0], UPDATE))
    # faults of the rebuilt model
    np_ = signed_positions({}, new_ts, target="")
    wrong = delta_bytes(old, old_ts, new, new_ts, reuse=[3, 3, 2, 0])[0]
    rebuilt = bytearray(new)
    rebuilt[np_["payload"][1]:np_["payload"][1] + 3] = old_ts[2].payload
    add("delta-wrong-reuse-same-length", "entry 1 names OLD's b for d (same length, other "
        "bytes): the rebuilt model holds b's bytes there and d's digest catches it", wrong,
        ("DIGEST", "PayloadDigest", np_["payload"][1], NEW), bytes(rebuilt))
    add("delta-sent-payload-flipped", "a byte of a sent payload flipped in transit: DIGEST "
        "in the rebuilt model", flip(delta, sent_at[1] + 2),
        ("DIGEST", "PayloadDigest", np_["payload"][1], NEW), flip(new, np_["payload"][1] + 2))
    add("delta-new-prefix-tampered", "a digest in NEW's prefix changed in transit: the "
        "rebuilt model's signature does not verify", flip(delta, at + np_["digests"] + 4 + 33),
        ("SIGNATURE", "SignatureInvalid", 56, NEW), flip(new, np_["digests"] + 4 + 33))
    add("delta-rollback", "the device runs version 2: NEW's version 2 is not newer", delta,
        ("SIGNATURE", "ReleaseVersion", np_["release"], NEW), new, tr=trust(newer_than=2))
    add("delta-other-signer", "the device trusts another key", delta,
        ("SIGNATURE", "SignatureKey", 20, NEW), new, tr=trust(KEY_B))
    dnew = M.write_model({}, new_ts)
    dd = delta_bytes(old, old_ts, dnew, new_ts, new_end=positions("digests", {}, new_ts)["base"])[0]
    assert dd == D.make_delta(old, dnew)
    add("delta-new-not-signed", "NEW is a digests record: the delta applies, the device "
        "(with its key) finds the rebuilt model not signed", dd,
        ("SIGNATURE", "NotSigned", 8, NEW), dnew)
    add("delta-new-not-signed-no-key", "the same read without a key: a model file", dd, None,
        dnew, tr=None)
    # EOF, TRAILING, the frame
    add("delta-cut-in-last-payload", "the delta ends one byte early, inside the last sent "
        "payload (f's): EOF BlockTruncated at the delta's length", delta[:-1],
        ("EOF", "block_past_end", len(delta) - 1, UPDATE))
    add("delta-cut-in-first-payload", "the delta ends inside d's payload: EOF "
        "BlockTruncated at the delta's length", delta[:sent_at[1] + 1],
        ("EOF", "block_past_end", sent_at[1] + 1, UPDATE))
    assert sent_at[1] == at + np_["base"]
    cut = at + np_["desc"][2] + 50
    add("delta-cut-in-new-descriptors", "the delta ends inside NEW's third descriptor: EOF "
        "DirectoryTruncated at the delta's length", delta[:cut],
        ("EOF", "dir_past_end", cut, UPDATE))
    cut = at + np_["block"] + 30
    add("delta-cut-in-new-block-header", "the delta ends inside NEW's block header: EOF "
        "HeaderTruncated at the delta's length", delta[:cut],
        ("EOF", "dir_header_eof", cut, UPDATE))
    add("delta-new-block-version", "NEW's block header, as the delta carries it, has version "
        "3: FRAME at the version byte's offset in the delta, found while the delta is read",
        put(delta, at + np_["block"] + 4, "B", 3),
        ("FRAME", "dir_version", at + np_["block"] + 4, UPDATE))
    add("delta-trailing", "a byte after the last sent payload", delta + b"\x00",
        ("TRAILING", "trailing", len(delta), UPDATE))
    add("delta-frame-hash", "the delta's frame carries another hash", put(delta, 8, "Q", 1),
        ("SCHEMA", "schema_hash", 8, UPDATE))
    add("delta-frame-magic", "a delta without its frame magic", put(delta, 0, "B", 0),
        ("FRAME", "frame_magic", 0, UPDATE))
    add("delta-is-a-model", "NEW itself given as the delta: SCHEMA at 8", new,
        ("SCHEMA", "schema_hash", 8, UPDATE))


def build_cases():
    c = Cases()
    model_file_cases(c)
    shard_alone_cases(c)
    manifest_cases(c)
    shard_open_cases(c)
    signed_model_cases(c)
    signed_manifest_cases(c)
    delta_cases(c)
    return c.list


def _files(case):
    return {n: bytes.fromhex(h) if isinstance(h, str) else bytes(h)
            for n, h in case["files"].items()}


def _trust(case):
    """The case's Trust, None without one, or False for a key the reader refuses."""
    t = case.get("trust")
    if t is None:
        return None
    try:
        trust = M.Trust(bytes.fromhex(t["key"]), t["target"], t["newer_than"])
    except ValueError:
        return False
    return trust


def _verdict(case):
    """(code, rule, offset, file) or None, as the reference reader gives it."""
    files = _files(case)
    trust = _trust(case)
    if trust is False:
        return ("refused",)
    d = case.get("delta")
    if d is None:
        return M.check_open(files, case["open"], case["verify"], trust)
    rebuilt, fault, where = D.check_update(files[d["base"]], files[case["open"]], trust,
                                           case["verify"])
    if where == "delta":
        return fault + (case["open"],)
    if d["result"] is None or rebuilt != files[d["result"]]:
        return ("rebuilt bytes differ from the result file",)
    return None if fault is None else fault + (d["result"],)


def result(case):
    f = _verdict(case)
    if f is None or len(f) == 1:
        return None if f is None else {"problem": f[0]}
    return {"code": f[0], "rule": f[1], "offset": f[2], "file": f[3]}


def verify(cases) -> list[str]:
    problems = []
    names = [c["name"] for c in cases]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        problems.append(f"repeated case names {dup}")
    for c in cases:
        got = result(c)
        t = c.get("trust")
        if t is not None and not t["usable"]:
            if got != {"problem": "refused"}:
                problems.append(f"case {c['name']}: model_ref does not refuse the key")
            elif c["expect"] is not None:
                problems.append(f"case {c['name']}: a refused key opens nothing")
            continue
        if t is not None and _trust(c) is False:
            problems.append(f"case {c['name']}: model_ref refuses the key")
            continue
        if got != c["expect"]:
            problems.append(f"case {c['name']}: model_ref gives {got}, expected {c['expect']}")
    covered = {c["expect"]["rule"] for c in cases if c["expect"]}
    for rule in NEW_RULES:
        if rule not in covered:
            problems.append(f"no case for rule {rule}")
    return problems


def render(cases) -> str:
    out = []
    for c in cases:
        o = {"name": c["name"], "note": c["note"],
             "files": {n: b.hex() for n, b in c["files"].items()},
             "open": c["open"], "verify": c["verify"], "expect": c["expect"]}
        for k in ("trust", "delta"):
            if k in c:
                o[k] = c[k]
        out.append(o)
    return json.dumps(out, indent=1, ensure_ascii=True) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="gen_model_cases.py",
                                 description="Regenerate the model-file golden cases.")
    ap.add_argument("--out", default=str(DEFAULT_OUT),
                    help=f"output path (default {DEFAULT_OUT})")
    ap.add_argument("--check", action="store_true",
                    help="regenerate in memory and fail if the file differs")
    args = ap.parse_args(argv)
    out = Path(args.out)
    cases = build_cases()
    problems = verify(cases)
    if problems:
        for p in problems:
            print(f"gen_model_cases: refusing to write: {p}", file=sys.stderr)
        return 1
    text = render(cases)
    n_ref = sum(not c["trust"]["usable"] for c in cases if "trust" in c)
    n_acc = sum(c["expect"] is None for c in cases) - n_ref
    summary = (f"{len(cases)} cases ({n_acc} accept, {len(cases) - n_acc - n_ref} reject, "
               f"{n_ref} refused keys)")
    if args.check:
        try:
            current = out.read_text(encoding="utf-8")
        except OSError as e:
            print(f"gen_model_cases: cannot read {out}: {e}", file=sys.stderr)
            return 1
        if current != text:
            print(f"gen_model_cases: {out} differs from the regenerated cases; "
                  "run spec/reference/gen_model_cases.py", file=sys.stderr)
            return 1
        print(f"gen_model_cases: {out.name} up to date, {summary}")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    os.replace(tmp, out)
    print(f"gen_model_cases: wrote {summary} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
