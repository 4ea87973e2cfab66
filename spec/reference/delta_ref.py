#!/usr/bin/env python3
"""Delta updates: an independent reference for spec/model-file.md, "Delta updates"
(Python 3.11; the model reader is model_ref's).

A delta carries a model NEW to a device that holds a model OLD (the base):

    frame   16 bytes, the hash of DELTA_TYPE
    base    list<u8>   SHA-256 of OLD's bytes before its payload region (32 bytes)
    reuse   list<u32>  per tensor of NEW, in descriptor order: 0 = sent in this delta,
                       i >= 1 = OLD's tensor i-1
    NEW's bytes from 0 to its payload region
    the payloads of NEW's tensors whose entry is 0, in descriptor order, back to back

Public API
    base_id(model) -> bytes                       the id a delta's `base` must hold
    make_delta(old, new) -> bytes                 what `kiln delta OLD NEW` writes
    apply_delta(old, delta) -> (bytes, None) | (None, (code, rule, offset))
        the device's rebuild of NEW, with the delta's own rules; offsets are in the delta
        (an early end: the delta's length).
        The rebuilt bytes are then checked as any model file (check_update).
    check_update(old, delta, trust=None) -> (rebuilt or None, fault or None, where)
        where is "delta" for a fault of the delta, "result" for one of the rebuilt NEW

Offsets (the spec's "Offsets of faults found while the delta is read"): a fault found
while the delta is read (its frame, `base`, `reuse`, and NEW's frame, fields and block
header and descriptors as the delta carries them) is at its offset in the delta; a delta
that ends early is EOF with the rule and offset a file that ends there gives: a Frozen
field's `*_eof` / `*_past_end` where kiln_ref reports it (a frame at 0, a list at its
length word), the block header's `dir_magic_eof` / `dir_header_eof` and the descriptors'
`dir_past_end` at the delta's length, and `block_past_end` (BlockTruncated) at the delta's
length when the cut is in the padding or a sent payload; bytes after the last
sent payload are TRAILING (rule `trailing`) at the first of them. Faults of the rebuilt
NEW are model_ref's, at offsets in the rebuilt model.

Choices where the spec's text is silent (the reference's, said here so they can be
compared): the delta's rules come in the order of its fields, DeltaBase when `base` is
read, then the `reuse` list's Frozen checks; DeltaReuseCount and DeltaReuse need NEW's
tensor count and byte lengths, so they come once NEW's frame, fields, block header
(directory steps 1 to 4) and descriptors (step 5) have been read from the delta. The
rest of NEW's block rules (padding, descriptors' own rules, heap) are checked in the
rebuilt model.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kiln_ref as K  # noqa: E402
import model_ref as M  # noqa: E402
from kiln_ref import HDR, KilnError  # noqa: E402

__all__ = ["DELTA_TYPE", "DELTA_HASH", "base_id", "make_delta", "apply_delta",
           "check_update", "delta_positions"]

DELTA_TYPE = "struct{base:list<u8>,reuse:list<u32>,}"
DELTA_HASH = K.schema_hash(DELTA_TYPE)
REBUILD_MAX = 1 << 30     # the payload region a rebuild holds in memory (ValueError above)
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

# the fields of each model record before its block, in order
_FIELDS = {
    "plain": ("dict<str,str>",),
    "digests": ("dict<str,str>", "list<u8>"),
    "shard": ("dict<str,str>", M.SHARD_FIELD_TYPE, "list<u8>"),
    "signed": (M.SIGNATURE_FIELD_TYPE, "dict<str,str>", M.RELEASE_TYPE, "list<u8>"),
}


def _round64(x: int) -> int:
    return (x + 63) & ~63


def _payloads(model: bytes):
    """[(byte_offset, byte_length)] and the payload region's start of a valid model file."""
    p = M.parse_model(model)
    start = p["block_pos"] + p["payload_base"]
    return [(d[K._OFF], d[K._LEN]) for d in p["descs"]], start


def base_id(model) -> bytes:
    """SHA-256 of a (valid) model file's bytes before its payload region."""
    model = bytes(model)
    return hashlib.sha256(model[:M.prefix_length(model)]).digest()


def make_delta(old, new) -> bytes:
    """The delta from OLD to NEW (both valid model files, their digests right): a NEW tensor
    reuses the first OLD tensor (in OLD's order) with its digest and byte_length."""
    old, new = bytes(old), bytes(new)
    for name, buf in (("OLD", old), ("NEW", new)):
        if M.check_model(buf, verify=True) is not None:
            raise ValueError(f"{name} is not a valid model file: {M.check_model(buf)}")
    old_t, old_start = _payloads(old)
    new_t, new_start = _payloads(new)
    old_keys = [(hashlib.sha256(old[old_start + o:old_start + o + n]).digest(), n)
                for o, n in old_t]
    reuse, sent = [], bytearray()
    for o, n in new_t:
        payload = new[new_start + o:new_start + o + n]
        key = (hashlib.sha256(payload).digest(), n)
        i = old_keys.index(key) + 1 if key in old_keys else 0
        reuse.append(i)
        if i == 0:
            sent += payload
    head = b"KLN0" + bytes(4) + _U64.pack(DELTA_HASH)
    head += K.encode("list<u8>", base_id(old)) + K.encode("list<u32>", reuse)
    return head + new[:new_start] + bytes(sent)


def delta_positions(delta):
    """Offsets in a delta whose head is well formed: "base", "reuse" (the count word),
    "entry" (per reuse entry), "new" (NEW's first byte)."""
    delta = bytes(delta)
    n = _U32.unpack_from(delta, 16)[0]
    reuse = 20 + n
    count = _U32.unpack_from(delta, reuse)[0]
    return {"base": 16, "reuse": reuse, "entry": [reuse + 4 + 4 * j for j in range(count)],
            "new": reuse + 4 + 4 * count}


def _block_head(view: bytes, pos: int):
    """Directory steps 1 to 5 of spec/kiln-v2.md for the block at view[pos:] (the header
    and the descriptors, which a delta carries; the payloads it may not): (code, rule,
    offset in view) or None. Truncations are at len(view), where the bytes run out."""
    avail = len(view) - pos
    if avail < 4:
        return "EOF", "dir_magic_eof", len(view)
    if view[pos:pos + 4] != K.DIR_MAGIC:
        return "FRAME", "dir_magic", pos
    if avail < K.HEADER_SIZE:
        return "EOF", "dir_header_eof", len(view)
    if view[pos + HDR.VERSION] != K.DIR_VERSION:
        return "FRAME", "dir_version", pos + HDR.VERSION
    flags = view[pos + HDR.FLAGS]
    if flags & ~(K.FLAG_NAMES | K.FLAG_LE):
        return "FRAME", "dir_flag_unknown", pos + HDR.FLAGS
    if not flags & K.FLAG_LE:
        return "FRAME", "dir_le_clear", pos + HDR.FLAGS
    for off in [6, 7] + list(range(HDR.RESERVED1, K.HEADER_SIZE)):
        if view[pos + off]:
            return "FRAME", "dir_reserved", pos + off
    count = _U32.unpack_from(view, pos + HDR.TENSOR_COUNT)[0]
    name_bytes = _U32.unpack_from(view, pos + HDR.NAME_BYTES)[0]
    if count > M.CAP:
        return "LIMIT", "dir_count_cap", pos + HDR.TENSOR_COUNT
    if name_bytes > M.CAP:
        return "LIMIT", "dir_name_bytes_cap", pos + HDR.NAME_BYTES
    directory_bytes = _U64.unpack_from(view, pos + HDR.DIRECTORY_BYTES)[0]
    if directory_bytes != K.DESC_SIZE * count + name_bytes:
        return "TYPE", "dir_bytes_mismatch", pos + HDR.DIRECTORY_BYTES
    if K.HEADER_SIZE + directory_bytes > avail:
        return "EOF", "dir_past_end", len(view)
    return None


def _read_new_prefix(delta: bytes, at: int):
    """NEW's frame, fields, block header and descriptors from delta[at:]: (fault or None,
    {"end": NEW's payload region start (relative), "descs": [(offset, length)],
    "payload_bytes"}). Offsets of a fault are in the delta."""
    view = delta[at:]
    cx = K._Cx(view, M.CAP, M.CAP, False)
    kind = M.kind_of(view)
    try:
        pos = K._check_frame(view, K.parse_type(M.TYPES[kind if kind in _FIELDS else "signed"]))
        for t in _FIELDS[kind]:
            _v, pos = K._dec(K.parse_type(t), pos, cx)
    except KilnError as e:
        return (e.code, e.rule, at + e.offset), None
    fault = _block_head(view, pos)
    if fault is not None:
        return (fault[0], fault[1], at + fault[2]), None
    count = _U32.unpack_from(view, pos + HDR.TENSOR_COUNT)[0]
    name_bytes = _U32.unpack_from(view, pos + HDR.NAME_BYTES)[0]
    payload_bytes = _U64.unpack_from(view, pos + HDR.PAYLOAD_BYTES)[0]
    base = _round64(64 + 128 * count + name_bytes)
    descs = []
    for i in range(count):
        d = K._DESCR.unpack_from(view, pos + 64 + 128 * i)
        descs.append((d[K._OFF], d[K._LEN]))
    # the padding up to the payload region (a whole prefix): a delta that ends in it ends
    # before its first payload, where NEW's block runs out
    if len(view) - pos < base:
        return ("EOF", "block_past_end", len(delta)), None
    return None, {"end": pos + base, "descs": descs, "payload_bytes": payload_bytes}


def apply_delta(old, delta):
    """Rebuild NEW from OLD (the device's model, valid) and the delta, checking the delta's
    own rules. Returns (NEW's bytes, None) or (None, (code, rule, offset in the delta))."""
    old, delta = bytes(old), bytes(delta)
    cx = K._Cx(delta, M.CAP, M.CAP, True)
    try:
        pos = K._check_frame(delta, K.parse_type(DELTA_TYPE))
        base, pos = K._dec(K.parse_type("list<u8>"), pos, cx)
        if len(base) != 32:
            return None, ("TYPE", "DeltaBaseLength", 16)
        if base != base_id(old):
            return None, ("TYPE", "DeltaBase", 20)
        reuse_pos = pos
        reuse, pos = K._dec(K.parse_type("list<u32>"), pos, cx)
    except KilnError as e:
        return None, (e.code, e.rule, e.offset)
    fault, new = _read_new_prefix(delta, pos)
    if fault is not None:
        return None, fault
    descs = new["descs"]
    if len(reuse) != len(descs):
        return None, ("TYPE", "DeltaReuseCount", reuse_pos)
    old_t, old_start = _payloads(old)
    for j, i in enumerate(reuse):
        if i and (i > len(old_t) or old_t[i - 1][1] != descs[j][1]):
            return None, ("TYPE", "DeltaReuse", reuse_pos + 4 + 4 * j)
    prefix = delta[pos:pos + new["end"]]
    if new["payload_bytes"] > REBUILD_MAX:
        raise ValueError("the reference rebuilds payload regions of up to 1 GiB")
    region = bytearray(new["payload_bytes"])
    q = pos + new["end"]
    for (off, n), i in zip(descs, reuse):
        if i == 0:
            if q + n > len(delta):
                return None, ("EOF", "block_past_end", len(delta))
            chunk = delta[q:q + n]
            q += n
        else:
            o, _n = old_t[i - 1]
            chunk = old[old_start + o:old_start + o + n]
        if off + n <= len(region):
            region[off:off + n] = chunk
    if q != len(delta):
        return None, ("TRAILING", "trailing", q)
    return prefix + bytes(region), None


def check_update(old, delta, trust=None, verify: bool = True):
    """A device's whole update: the rebuild, then the rebuilt bytes checked as any model
    file (as a signed one when a trust is given). Returns (rebuilt or None, fault or None,
    where): where is "delta" or "result"."""
    rebuilt, fault = apply_delta(old, delta)
    if fault is not None:
        return None, fault, "delta"
    f = M.check_model(rebuilt, verify, trust=trust) if trust is not None \
        else M.check_model(rebuilt, verify)
    return rebuilt, f, None if f is None else "result"
