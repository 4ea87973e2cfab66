#!/usr/bin/env python3
"""Kiln model files: an independent reference for spec/model-file.md (Python 3.11,
standard library only).

Written from the text of spec/model-file.md, spec/kiln-v2.md and the rulings in
the project's model decisions, not from the Rust code. The Frozen codec, the
schema hash and the directory checker are kiln_ref's.

Six record kinds:
    plain     struct{metadata:dict<str,str>,tensors:tensors,}
    digests   struct{metadata:dict<str,str>,digests:list<u8>,tensors:tensors,}
    shard     struct{metadata:dict<str,str>,shard:struct{...},digests:list<u8>,tensors:tensors,}
    signed    struct{signature:struct{key,sig},metadata,release:struct{version,target},...}
    manifest  see MANIFEST_TYPE
    signed_manifest  the manifest with `signature` first and `release` after the metadata

A reader given a key (a Trust: the public key, optionally a target and a running version)
accepts only signed records and signed manifests, checking the key and release rules as
their fields are read and the Ed25519 signature after step 9 (a model file) or after M5
(a manifest); spec/model-file.md, "Signed models". Ed25519 is ed25519_ref's.

Public API
    write_model(metadata, tensors, digests=True) -> bytes        plain or digests record
    sign_model(metadata, tensors, seed, version, target) -> bytes a signed record
    sign_manifest(manifest, seed, version, target) -> bytes      the signed manifest of a manifest
    assemble_signed(key, sig, metadata, version, target, digests, block)  raw signed record
    signed_message(buf, prefix_end=None)     the bytes a signature covers
    Trust(key, target=None, newer_than=None) a reader's key (ValueError: a key it refuses)
    write_sharded(metadata, tensors_by_shard, names) -> (manifest bytes, {name: shard bytes})
    assemble(kind, metadata, block, digests=None, shard=None)    raw record builder (tests)
    check_model(buf, verify=True, kind=None, trust=None) -> None | (code, rule, offset)
    check_manifest(buf, trust=None)            -> None | (code, rule, offset)
    check_sharded(manifest, files, verify=True, trust=None) -> None | (code, rule, offset, file)
        file is None for a fault in the manifest, else the shard's name
    check_file(buf, verify=True, trust=None)   -> None | (code, rule, offset)
        a reader given no type: model file, manifest (alone) or plain directory; given a
        key: a signed record (or a manifest, signed) and nothing else
    check_open(files, name, verify=True, trust=None) -> None | (code, rule, offset, file)
        a reader given the file `name` of a folder `files`; a manifest opens its shards
    A reader given a key always verifies the payload digests (step 9d).

Rules are the Rust `Rule` names of spec/model-file.md for the rules that page adds, and
kiln_ref's snake_case rule ids for Frozen and directory rules. Offsets are absolute in
the file the fault is in.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ed25519_ref as E  # noqa: E402
import kiln_ref as K  # noqa: E402
from kiln_ref import HDR, DESC, KilnError, Tensor  # noqa: E402

__all__ = [
    "PLAIN_TYPE", "DIGESTS_TYPE", "SHARD_TYPE", "MANIFEST_TYPE", "SIGNED_TYPE",
    "SIGNED_MANIFEST_TYPE", "TYPES", "HASHES", "MODEL_KINDS", "MANIFEST_KINDS",
    "EMPTY_DIGEST", "RULE_STEP", "SIG_POS", "SIG_END", "Trust",
    "write_model", "write_sharded", "assemble", "tensor_digests", "manifest_entries",
    "encode_manifest", "model_id", "prefix_length", "shard_file_name",
    "sign_model", "sign_manifest", "assemble_signed", "signed_message",
    "check_model", "check_manifest", "check_sharded", "check_file", "check_open",
    "parse_manifest", "parse_model", "kind_of",
]

PLAIN_TYPE = "struct{metadata:dict<str,str>,tensors:tensors,}"
DIGESTS_TYPE = "struct{metadata:dict<str,str>,digests:list<u8>,tensors:tensors,}"
SHARD_FIELD_TYPE = "struct{model:list<u8>,index:u32,count:u32,}"
SHARD_TYPE = ("struct{metadata:dict<str,str>,shard:" + SHARD_FIELD_TYPE
              + ",digests:list<u8>,tensors:tensors,}")
SHARD_LIST_TYPE = "list<struct{name:str,length:u64,digest:list<u8>,}>"
QUANT_TYPE = "opt<struct{scheme:u16,axis:u16,group_size:u32,scale:str,outer:str,}>"
TENSOR_TABLE_TYPE = ("list<struct{name:str,shard:u32,dtype:u16,shape:list<u64>,byte_length:u64,"
                     "layout:str,block_size:u32,quant:" + QUANT_TYPE + ",}>")
MANIFEST_TYPE = ("struct{metadata:dict<str,str>,shards:" + SHARD_LIST_TYPE
                 + ",tensors:" + TENSOR_TABLE_TYPE + ",digests:list<u8>,}")
SIGNATURE_FIELD_TYPE = "struct{key:list<u8>,sig:list<u8>,}"
RELEASE_TYPE = "struct{version:u64,target:str,}"
SIGNED_TYPE = ("struct{signature:" + SIGNATURE_FIELD_TYPE + ",metadata:dict<str,str>,release:"
               + RELEASE_TYPE + ",digests:list<u8>,tensors:tensors,}")
SIGNED_MANIFEST_TYPE = ("struct{signature:" + SIGNATURE_FIELD_TYPE
                        + ",metadata:dict<str,str>,release:" + RELEASE_TYPE + ",shards:"
                        + SHARD_LIST_TYPE + ",tensors:" + TENSOR_TABLE_TYPE
                        + ",digests:list<u8>,}")

TYPES = {"plain": PLAIN_TYPE, "digests": DIGESTS_TYPE, "shard": SHARD_TYPE,
         "manifest": MANIFEST_TYPE, "signed": SIGNED_TYPE,
         "signed_manifest": SIGNED_MANIFEST_TYPE}
# the values the spec prints; the module checks them against kiln_ref's hash
HASHES = {"plain": 0x8386294C73ADBC61, "digests": 0x869B39CE80B385EF,
          "shard": 0xE55F985E5FA143AD, "manifest": 0x11465A365375FE1B,
          "signed": 0xFF2E2E81872D5BFD, "signed_manifest": 0x37C227B5DF4940B9}
for _k, _t in TYPES.items():
    assert K.schema_hash(_t) == HASHES[_k], f"schema hash of the {_k} record"
MODEL_KINDS = ("plain", "digests", "shard", "signed")
MANIFEST_KINDS = ("manifest", "signed_manifest")
# the signature field of a signed record or manifest, right after the frame: the key's
# length word at 16, the key at 20..52, the signature's length word at 52, the signature
# at SIG_POS..SIG_END (when the key is 32 bytes)
KEY_LEN, SIG_LEN = 32, 64
SIG_POS, SIG_END = 56, 120
_KIND_BY_HASH = {h: k for k, h in HASHES.items()}

EMPTY_DIGEST = hashlib.sha256(b"").digest()
assert EMPTY_DIGEST.hex().startswith("e3b0c442") and EMPTY_DIGEST.hex().endswith("b855")

CAP = K.DEFAULT_CAP
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

# The step of every directory rule of kiln_ref (spec/kiln-v2.md section 14.1), for
# placing the steps this page adds: 3d after step 3, 9d after step 9.
RULE_STEP = {
    "dir_magic_eof": "1", "dir_magic": "1", "dir_header_eof": "1",
    "dir_version": "2", "dir_flag_unknown": "2", "dir_le_clear": "2", "dir_reserved": "2",
    "dir_count_cap": "3", "dir_name_bytes_cap": "3",
    "dir_size_overflow": "4", "dir_bytes_mismatch": "4",
    "dir_past_end": "5",
    "payload_end_overflow": "6", "block_past_end": "6",
    "pad_nonzero": "7",
    "desc_reserved": "8a", "name_flag_empty": "8b",
    "name_without_flag": "8c", "name_off_unnamed": "8c", "name_missing": "8c",
    "name_placement": "8c", "name_past_heap": "8c", "name_utf8": "8c",
    "name_duplicate": "8c", "layout_off_absent": "8c", "layout_placement": "8c",
    "layout_past_heap": "8c", "layout_utf8": "8c",
    "heap_length": "8d",
    "range_overflow": "9", "range_past_payload": "9", "dtype_zero": "9",
    "dtype_reserved": "9", "dtype_range": "9", "rank": "9", "shape_tail": "9",
    "shape_overflow": "9", "opaque_no_layout": "9", "opaque_block_size": "9",
    "opaque_block_multiple": "9", "layout_non_opaque": "9", "block_size_non_opaque": "9",
    "byte_size_overflow": "9", "length_mismatch": "9", "overlap": "9",
    "offset_not_canonical": "10", "gap_nonzero": "10", "payload_bytes_not_canonical": "10",
    "bool_byte": "11", "high_nibble": "11", "quant_scheme": "11", "quant_none_axis": "11",
    "quant_none_group": "11", "quant_none_scale": "11", "quant_none_outer": "11",
    "quant_rank": "11", "quant_axis": "11", "quant_group": "11",
    "quant_scale_index": "11", "quant_scale_chain": "11", "quant_scale_count": "11",
    "quant_outer_index": "11", "quant_outer_chain": "11", "quant_outer_dtype": "11",
    "quant_outer_count": "11",
    "trailing": "12",
}
_BEFORE_3D = frozenset(r for r, s in RULE_STEP.items() if s in ("1", "2", "3"))
_AFTER_9D = frozenset(r for r, s in RULE_STEP.items() if s in ("10", "11", "12"))


def _fault(e: KilnError):
    return (e.code, e.rule, e.offset)


def _round64(x: int) -> int:
    return (x + 63) & ~63


class Trust:
    """What a reader that requires a signature is given: the Ed25519 public key it trusts,
    and optionally the target it is (ReleaseTarget) and the version it runs (a model must
    carry a higher one: ReleaseVersion). A key that is not 32 bytes encoding a point, or
    one of small order (it would verify forged signatures), is refused when it is given:
    ValueError."""

    def __init__(self, key, target: str | None = None, newer_than: int | None = None):
        key = bytes(key)
        if len(key) != KEY_LEN or not E.usable_key(key):
            raise ValueError(f"not a usable Ed25519 public key: {key.hex()}")
        if newer_than is not None and not 0 <= newer_than <= K.U64_MAX:
            raise ValueError("a version is a u64")
        self.key = key
        self.target = target
        self.newer_than = newer_than

    def __repr__(self):
        return f"Trust({self.key.hex()}, target={self.target!r}, newer_than={self.newer_than})"


# --------------------------------------------------------------------------
# writing


def _tensor(x) -> Tensor:
    return K._as_tensor(x)


def tensor_digests(tensors) -> bytes:
    """The digest table of a list of tensors: SHA-256 of each payload, in order."""
    return b"".join(hashlib.sha256(bytes(_tensor(t).payload)).digest() for t in tensors)


def assemble(kind: str, metadata: dict, block: bytes, digests: bytes | None = None,
             shard: tuple | None = None, frame_hash: int | None = None) -> bytes:
    """A record of `kind` from raw parts, without any check (tests build faults with it).
    shard = (model bytes, index, count); frame_hash overrides the frame's hash."""
    out = bytearray(b"KLN0" + bytes(4))
    out += _U64.pack(HASHES[kind] if frame_hash is None else frame_hash)
    out += K.encode("dict<str,str>", metadata)
    if kind == "shard":
        model, index, count = shard
        out += K.encode(SHARD_FIELD_TYPE, {"model": bytes(model), "index": index, "count": count})
    if kind in ("digests", "shard"):
        out += K.encode("list<u8>", bytes(digests))
    elif digests is not None:
        raise ValueError("a plain record has no digests")
    out += block
    return bytes(out)


def write_model(metadata: dict, tensors, digests: bool = True) -> bytes:
    """A digests record (digests=True) or a plain record of the tensors, in their order."""
    tensors = [_tensor(t) for t in tensors]
    block = K.encode_directory(tensors)
    if digests:
        return assemble("digests", metadata, block, tensor_digests(tensors))
    return assemble("plain", metadata, block)


def _quant_entry(t: Tensor, shard_tensors: list[Tensor]):
    if t.quant_scheme == 0:
        return None

    def name_at(i):
        if i is None:
            return ""
        return shard_tensors[i].name

    return {"scheme": t.quant_scheme, "axis": t.quant_axis, "group_size": t.group_size,
            "scale": name_at(t.scale_index), "outer": name_at(t.outer_index)}


def manifest_entries(tensors_by_shard) -> list[dict]:
    """The manifest's tensor table for shards given as lists of tensors."""
    out = []
    for k, shard in enumerate(tensors_by_shard, 1):
        shard = [_tensor(t) for t in shard]
        for t in shard:
            if not isinstance(t.name, str):
                raise ValueError("every tensor of a sharded model needs a str name")
            out.append({
                "name": t.name, "shard": k, "dtype": t.dtype, "shape": list(t.shape),
                "byte_length": len(t.payload),
                "layout": "" if t.layout is None else t.layout, "block_size": t.block_size,
                "quant": _quant_entry(t, shard)})
    return out


def _manifest_tail(entries, digests: bytes) -> bytes:
    return K.encode(TENSOR_TABLE_TYPE, entries) + K.encode("list<u8>", digests)


def model_id(entries, digests: bytes) -> bytes:
    """SHA-256 over the manifest from its tensors count word to its end."""
    return hashlib.sha256(_manifest_tail(entries, digests)).digest()


def encode_manifest(metadata: dict, shards: list[dict], entries: list[dict], digests: bytes,
                    frame_hash: int | None = None) -> bytes:
    """shards: [{"name", "length", "digest"}]; entries: manifest_entries(...)."""
    out = bytearray(b"KLN0" + bytes(4))
    out += _U64.pack(HASHES["manifest"] if frame_hash is None else frame_hash)
    out += K.encode("dict<str,str>", metadata)
    out += K.encode(SHARD_LIST_TYPE, shards)
    out += _manifest_tail(entries, digests)
    return bytes(out)


def prefix_length(buf: bytes) -> int:
    """Length of a well-formed record's bytes before its payload region."""
    p = parse_model(buf)
    return p["block_pos"] + p["payload_base"]


def shard_file_name(stem: str, index: int, count: int) -> str:
    return f"{stem}-{index:05d}-of-{count:05d}.kiln"


def write_sharded(metadata: dict, tensors_by_shard, names, shard_metadata=None):
    """A manifest and its shards. tensors_by_shard: one list of tensors per shard
    (a quantized tensor's scale_index / outer_index are indexes inside its shard);
    names: the shard file names. Returns (manifest bytes, {name: shard bytes})."""
    shards = [[_tensor(t) for t in s] for s in tensors_by_shard]
    names = list(names)
    if len(names) != len(shards):
        raise ValueError("one name per shard")
    entries = manifest_entries(shards)
    digests = b"".join(tensor_digests(s) for s in shards)
    mid = model_id(entries, digests)
    files = {}
    shard_list = []
    for k, (name, tensors) in enumerate(zip(names, shards), 1):
        block = K.encode_directory(tensors)
        data = assemble("shard", dict(shard_metadata or {}), block, tensor_digests(tensors),
                        (mid, k, len(shards)))
        files[name] = data
        shard_list.append({"name": name, "length": len(data),
                           "digest": hashlib.sha256(data[:prefix_length(data)]).digest()})
    return encode_manifest(metadata, shard_list, entries, digests), files


# --------------------------------------------------------------------------
# signed records and manifests


def _signature_field(key: bytes, sig: bytes) -> bytes:
    return K.encode(SIGNATURE_FIELD_TYPE, {"key": bytes(key), "sig": bytes(sig)})


def _release_field(version: int, target: str) -> bytes:
    return K.encode(RELEASE_TYPE, {"version": version, "target": target})


def assemble_signed(key: bytes, sig: bytes, metadata: dict, version: int, target: str,
                    digests: bytes, block: bytes, frame_hash: int | None = None) -> bytes:
    """A signed record from raw parts, without any check and without signing (tests)."""
    out = bytearray(b"KLN0" + bytes(4))
    out += _U64.pack(HASHES["signed"] if frame_hash is None else frame_hash)
    out += _signature_field(key, sig)
    out += K.encode("dict<str,str>", metadata)
    out += _release_field(version, target)
    out += K.encode("list<u8>", bytes(digests))
    out += block
    return bytes(out)


def signed_message(buf, prefix_end: int | None = None) -> bytes:
    """The signed message: bytes 0..56 and 120..prefix_end (the payload region's start of a
    signed record; the end of a signed manifest when prefix_end is None)."""
    buf = bytes(buf)
    end = len(buf) if prefix_end is None else prefix_end
    return buf[:SIG_POS] + buf[SIG_END:end]


def put_signature(buf, sig: bytes) -> bytes:
    """buf with its 64 signature bytes replaced."""
    if len(sig) != SIG_LEN:
        raise ValueError("a signature is 64 bytes")
    return bytes(buf[:SIG_POS]) + bytes(sig) + bytes(buf[SIG_END:])


def sign_model(metadata: dict, tensors, seed: bytes, version: int, target: str = "") -> bytes:
    """A signed record of the tensors (in their order), signed with the private key of the
    32-byte seed (Ed25519 is deterministic: the same inputs give the same bytes)."""
    tensors = [_tensor(t) for t in tensors]
    block = K.encode_directory(tensors)
    buf = assemble_signed(E.public_key(seed), bytes(SIG_LEN), metadata, version, target,
                          tensor_digests(tensors), block)
    end = prefix_length(buf)
    return put_signature(buf, E.sign(seed, signed_message(buf, end)))


def sign_manifest(manifest, seed: bytes, version: int, target: str = "") -> bytes:
    """The signed manifest of a (valid, unsigned) manifest: the same fields with `signature`
    first and `release` after the metadata, signed over every byte but the signature."""
    manifest = bytes(manifest)
    if kind_of(manifest) != "manifest" or check_manifest(manifest) is not None:
        raise ValueError("not a valid manifest")
    m = parse_manifest(manifest)
    out = bytearray(b"KLN0" + bytes(4)) + _U64.pack(HASHES["signed_manifest"])
    out += _signature_field(E.public_key(seed), bytes(SIG_LEN))
    out += manifest[16:m["shards_pos"]]
    out += _release_field(version, target)
    out += manifest[m["shards_pos"]:]
    return put_signature(out, E.sign(seed, signed_message(out)))


def _read_signature(buf, pos: int, cx, p: dict, trust):
    """The signature field at pos and its rules: (fault or None, position after it)."""
    sg, end = K._dec(K.parse_type(SIGNATURE_FIELD_TYPE), pos, cx)
    key_pos, sig_len_pos = pos, pos + 4 + len(sg["key"])
    p["key"], p["sig"] = sg["key"], sg["sig"]
    if len(sg["key"]) != KEY_LEN:
        return ("TYPE", "SignatureKeyLength", key_pos), end
    if len(sg["sig"]) != SIG_LEN:
        return ("TYPE", "SignatureLength", sig_len_pos), end
    if trust is not None and sg["key"] != trust.key:
        return ("SIGNATURE", "SignatureKey", key_pos + 4), end
    return None, end


def _read_release(buf, pos: int, cx, p: dict, trust):
    """The release field at pos and its rules (target, then version)."""
    rl, end = K._dec(K.parse_type(RELEASE_TYPE), pos, cx)
    p["release"] = rl
    if trust is not None and trust.target is not None and rl["target"] != trust.target:
        return ("SIGNATURE", "ReleaseTarget", pos + 8), end
    if trust is not None and trust.newer_than is not None and rl["version"] <= trust.newer_than:
        return ("SIGNATURE", "ReleaseVersion", pos), end
    return None, end


def _signature_verifies(p: dict, message: bytes) -> bool:
    return E.verify(p["key"], p["sig"], message)


# --------------------------------------------------------------------------
# reading a model record


def kind_of(buf) -> str | None:
    """The record kind a reader given no type sees: bytes 0..4 `KLN0` and bytes 8..16
    one of the six hashes (spec: "Telling a model file from a plain directory")."""
    if len(buf) >= 16 and bytes(buf[0:4]) == b"KLN0":
        return _KIND_BY_HASH.get(_U64.unpack_from(buf, 8)[0])
    return None


def _descriptors(buf, block_pos):
    count = _U32.unpack_from(buf, block_pos + HDR.TENSOR_COUNT)[0]
    return [K._DESCR.unpack_from(buf, block_pos + 64 + 128 * i) for i in range(count)]


def _early(buf: bytes, kind: str, trust: Trust | None = None):
    """Frame, fields, the digest, shard, key and release rules and block steps 1 to 9
    (with 3d), then step 9s when a key is given. Returns (fault or None, parsed): parsed
    holds the positions found so far and "late", a directory fault of steps 10 to 11 left
    for after step 9d."""
    p: dict[str, Any] = {"kind": kind}
    cx = K._Cx(buf, CAP, CAP, True)
    try:
        pos = K._check_frame(buf, K.parse_type(TYPES[kind]))
        if kind == "signed":
            f, pos = _read_signature(buf, pos, cx, p, trust)
            if f is not None:
                return f, p
        md, pos = K._dec(K.parse_type("dict<str,str>"), pos, cx)
        p["metadata"] = md
        if kind == "signed":
            f, pos = _read_release(buf, pos, cx, p, trust)
            if f is not None:
                return f, p
        if kind == "shard":
            spos = pos
            sh, pos = K._dec(K.parse_type(SHARD_FIELD_TYPE), pos, cx)
            p["model_pos"] = spos + 4
            p["index_pos"] = spos + 4 + len(sh["model"])
            p["count_pos"] = p["index_pos"] + 4
            p["shard"] = sh
            if len(sh["model"]) != 32:
                return ("TYPE", "ShardModelLength", spos), p
            if sh["count"] == 0:
                return ("TYPE", "ShardPosition", p["count_pos"]), p
            if sh["index"] == 0 or sh["index"] > sh["count"]:
                return ("TYPE", "ShardPosition", p["index_pos"]), p
        if kind in ("digests", "shard", "signed"):
            dpos = pos
            dig, pos = K._dec(K.parse_type("list<u8>"), pos, cx)
            p["digests_pos"] = dpos
            p["digests"] = dig
            if len(dig) % 32:
                return ("TYPE", "DigestTableLength", dpos), p
    except KilnError as e:
        return _fault(e), p
    p["block_pos"] = pos
    dir_fault = None
    try:
        _tensors, end = K._directory(K._Cx(buf, CAP, CAP, False), pos)
        p["end"] = end
    except KilnError as e:
        dir_fault = e
    if dir_fault is not None and dir_fault.rule in _BEFORE_3D:
        return _fault(dir_fault), p
    # step 3d (steps 1 to 3 passed: the header is in the buffer)
    count = _U32.unpack_from(buf, pos + HDR.TENSOR_COUNT)[0]
    if "digests" in p and len(p["digests"]) != 32 * count:
        return ("TYPE", "DigestTableCount", p["digests_pos"]), p
    if dir_fault is not None and dir_fault.rule not in _AFTER_9D:
        return _fault(dir_fault), p
    # steps 1 to 9 passed
    p["late"] = dir_fault
    name_bytes = _U32.unpack_from(buf, pos + HDR.NAME_BYTES)[0]
    p["payload_base"] = _round64(64 + 128 * count + name_bytes)
    p["descs"] = descs = _descriptors(buf, pos)
    heap = pos + 64 + 128 * count
    named = bool(buf[pos + HDR.FLAGS] & 1)
    p["names"] = [buf[heap + d[K._NOFF]:heap + d[K._NOFF] + d[K._NLEN]].decode("utf-8")
                  if named else None for d in descs]
    p["layouts"] = [buf[heap + d[K._LOFF]:heap + d[K._LOFF] + d[K._LLEN]].decode("utf-8")
                    if d[K._LLEN] else None for d in descs]
    # step 9s
    if kind == "signed" and trust is not None:
        if not _signature_verifies(p, signed_message(buf, pos + p["payload_base"])):
            return ("SIGNATURE", "SignatureInvalid", SIG_POS), p
    return None, p


def _late(buf: bytes, p: dict, verify: bool):
    """Steps 9d (when verifying and the record has digests), 10, 11 and TRAILING."""
    if verify and "digests" in p:
        base = p["block_pos"] + p["payload_base"]
        dig = p["digests"]
        running = 0
        for i, d in enumerate(p["descs"]):
            off, length = d[K._OFF], d[K._LEN]
            if off != _round64(running):
                break          # step 10 reports this tensor
            h = hashlib.sha256(buf[base + off:base + off + length]).digest()
            if h != dig[32 * i:32 * i + 32]:
                return ("DIGEST", "PayloadDigest", base + off)
            running = off + length
    if p["late"] is not None:
        return _fault(p["late"])
    if p["end"] != len(buf):
        return ("TRAILING", "trailing", p["end"])
    return None


def _not_signed(fault, buf, unsigned_kinds):
    """A reader that requires a signature: a frame of an unsigned record is NotSigned in
    place of the frame's SCHEMA fault (the frame's earlier faults come first)."""
    if fault == ("SCHEMA", "schema_hash", 8) and kind_of(buf) in unsigned_kinds:
        return ("SIGNATURE", "NotSigned", 8)
    return fault


def check_model(buf, verify: bool = True, kind: str | None = None,
                trust: Trust | None = None):
    """First fault of a model file (plain, digests, shard or signed record) or None.
    kind None: the kind its frame names; a frame naming none of the four is
    checked as a plain record (so it fails in the frame: EOF, FRAME or SCHEMA).
    With a trust the record must be a signed one (kind is then "signed"): a plain,
    digests or shard frame is NotSigned, any other frame fails as for a signed record;
    the digests are always verified."""
    buf = bytes(buf)
    if trust is not None:
        if kind not in (None, "signed"):
            raise ValueError("a reader with a key reads signed records")
        fault, p = _early(buf, "signed", trust)
        if fault is not None:
            return _not_signed(fault, buf, ("plain", "digests", "shard"))
        return _late(buf, p, True)
    if kind is None:
        kind = kind_of(buf)
        if kind not in MODEL_KINDS:
            kind = "plain"
    if kind not in MODEL_KINDS:
        raise ValueError(f"not a model kind: {kind!r}")
    fault, p = _early(buf, kind)
    if fault is not None:
        return fault
    return _late(buf, p, verify)


def parse_model(buf) -> dict:
    """Positions and values of a valid model record (ValueError otherwise)."""
    buf = bytes(buf)
    fault = check_model(buf, verify=False)
    if fault is not None:
        raise ValueError(f"not a valid model file: {fault}")
    _f, p = _early(buf, kind_of(buf))
    return p


# --------------------------------------------------------------------------
# manifests


class _Reader:
    """Reads a manifest that passed the Frozen checks, keeping offsets."""

    def __init__(self, buf, pos):
        self.buf = buf
        self.pos = pos

    def u(self, st):
        v = st.unpack_from(self.buf, self.pos)[0]
        self.pos += st.size
        return v

    def run(self):
        n = self.u(_U32)
        raw = self.buf[self.pos:self.pos + n]
        self.pos += n
        return raw

    def str(self):
        return self.run().decode("utf-8")


_NAME_FORBIDDEN = frozenset("/\\:") | {chr(c) for c in range(0x20)} | {chr(c) for c in range(0x7F, 0xA0)}


def _plain_file_name(raw: bytes) -> bool:
    """M2: control characters are Unicode's Cc (C0, DEL and the C1 range U+0080 to U+009F)."""
    if not 1 <= len(raw) <= 255:
        return False
    if any(ch in _NAME_FORBIDDEN for ch in raw.decode("utf-8")):
        return False
    return raw not in (b".", b"..")


def parse_manifest(buf) -> dict:
    """Values and offsets of a manifest or signed manifest that passed the Frozen checks."""
    buf = bytes(buf)
    signed = kind_of(buf) == "signed_manifest"
    cx = K._Cx(buf, CAP, CAP, True)
    r = _Reader(buf, 16)
    m: dict[str, Any] = {"kind": "signed_manifest" if signed else "manifest"}
    if signed:
        sg, r.pos = K._dec(K.parse_type(SIGNATURE_FIELD_TYPE), r.pos, cx)
        m["key"], m["sig"] = sg["key"], sg["sig"]
    md, r.pos = K._dec(K.parse_type("dict<str,str>"), r.pos, cx)
    m["metadata"] = md
    if signed:
        m["release_pos"] = r.pos
        m["release"], r.pos = K._dec(K.parse_type(RELEASE_TYPE), r.pos, cx)
    m.update({"shards_pos": r.pos, "shards": [], "entries": []})
    for _ in range(r.u(_U32)):
        s = {"name_pos": r.pos}
        s["raw_name"] = r.run()
        s["name"] = s["raw_name"].decode("utf-8")
        s["length_pos"] = r.pos
        s["length"] = r.u(_U64)
        s["digest_pos"] = r.pos
        s["digest"] = r.run()
        m["shards"].append(s)
    m["tensors_pos"] = r.pos
    for _ in range(r.u(_U32)):
        e: dict[str, Any] = {"name_pos": r.pos}
        e["raw_name"] = r.run()
        e["name"] = e["raw_name"].decode("utf-8")
        e["shard_pos"] = r.pos
        e["shard"] = r.u(_U32)
        e["dtype_pos"] = r.pos
        e["dtype"] = r.u(_U16)
        e["shape_pos"] = r.pos
        e["shape"] = tuple(r.u(_U64) for _ in range(r.u(_U32)))
        e["byte_length_pos"] = r.pos
        e["byte_length"] = r.u(_U64)
        e["layout_pos"] = r.pos
        e["layout"] = r.str()
        e["block_size_pos"] = r.pos
        e["block_size"] = r.u(_U32)
        e["quant_pos"] = r.pos
        tag = buf[r.pos]
        r.pos += 1
        if tag:
            e["quant"] = {"scheme": r.u(_U16), "axis": r.u(_U16), "group_size": r.u(_U32),
                          "scale": r.str(), "outer": r.str()}
        else:
            e["quant"] = None
        m["entries"].append(e)
    m["digests_pos"] = r.pos
    m["digests"] = r.run()
    assert r.pos == len(buf)
    return m


def _entry_width_fault(e):
    """M3 rules after the name and shard rules, for one entry: (rule, code, offset) or None."""
    dtype = e["dtype"]
    opaque = K.OPAQUE_MIN <= dtype <= K.OPAQUE_MAX
    if dtype not in K.DTYPES and not opaque:
        return ("TYPE", "ManifestDtype", e["dtype_pos"])
    if len(e["shape"]) > 8:
        return ("TYPE", "ManifestRank", e["shape_pos"])
    n = 1
    for s in e["shape"]:
        n *= s
    if n > K.U64_MAX:
        return ("LIMIT", "ManifestCountOverflow", e["shape_pos"])
    has_layout = e["layout"] != ""
    if opaque:
        if not has_layout or e["block_size"] == 0:
            return ("TYPE", "ManifestLayout", e["layout_pos"])
        if e["byte_length"] % e["block_size"]:
            return ("TYPE", "ManifestLength", e["byte_length_pos"])
        return None
    if has_layout or e["block_size"] != 0:
        return ("TYPE", "ManifestLayout", e["layout_pos"])
    width = K.DTYPES[dtype][1]
    if width == 0:
        expect = (n + 1) // 2
    else:
        expect = n * width
        if expect > K.U64_MAX:
            return ("LIMIT", "ManifestSizeOverflow", e["byte_length_pos"])
    if e["byte_length"] != expect:
        return ("TYPE", "ManifestLength", e["byte_length_pos"])
    return None


def _manifest_frozen(buf, kind: str, trust):
    """The Frozen reading of a manifest (kind "manifest") or signed manifest, with the key
    and release rules where their fields are read: None or the first fault."""
    p: dict[str, Any] = {}
    cx = K._Cx(buf, CAP, CAP, False)
    try:
        pos = K._check_frame(buf, K.parse_type(TYPES[kind]))
        if kind == "signed_manifest":
            f, pos = _read_signature(buf, pos, K._Cx(buf, CAP, CAP, True), p, trust)
            if f is not None:
                return f
        _v, pos = K._dec(K.parse_type("dict<str,str>"), pos, cx)
        if kind == "signed_manifest":
            f, pos = _read_release(buf, pos, K._Cx(buf, CAP, CAP, True), p, trust)
            if f is not None:
                return f
        for t in (SHARD_LIST_TYPE, TENSOR_TABLE_TYPE, "list<u8>"):
            _v, pos = K._dec(K.parse_type(t), pos, cx)
    except KilnError as e:
        return _fault(e)
    if pos != len(buf):
        return ("TRAILING", "trailing", pos)
    return None


def _manifest(buf, trust: Trust | None = None):
    """(fault or None, parsed manifest or None). With a trust: a signed manifest only
    (an unsigned manifest's frame is NotSigned), its signature checked after M5."""
    if trust is not None:
        kind = "signed_manifest"
    else:
        kind = "signed_manifest" if kind_of(buf) == "signed_manifest" else "manifest"
    f = _manifest_frozen(buf, kind, trust)
    if f is not None:
        if trust is not None:
            f = _not_signed(f, buf, ("manifest",))
        return f, None
    m = parse_manifest(buf)
    shards, entries = m["shards"], m["entries"]
    # M1
    if not shards:
        return ("TYPE", "ManifestNoShards", m["shards_pos"]), m
    # M2
    seen = set()
    for s in shards:
        if not _plain_file_name(s["raw_name"]):
            return ("PATH", "ShardName", s["name_pos"]), m
        if s["raw_name"] in seen:
            return ("PATH", "ShardNameRepeated", s["name_pos"]), m
        seen.add(s["raw_name"])
        if len(s["digest"]) != 32:
            return ("TYPE", "ShardDigestLength", s["digest_pos"]), m
    # M3
    seen = set()
    prev = 0
    for e in entries:
        if not e["raw_name"]:
            return ("TYPE", "ManifestNameEmpty", e["name_pos"]), m
        if e["raw_name"] in seen:
            return ("TYPE", "ManifestNameRepeated", e["name_pos"]), m
        seen.add(e["raw_name"])
        if e["shard"] == 0 or e["shard"] > len(shards) or e["shard"] < prev:
            return ("TYPE", "ManifestShard", e["shard_pos"]), m
        prev = e["shard"]
        f = _entry_width_fault(e)
        if f is not None:
            return f, m
    # M4
    by_name = {e["raw_name"]: e for e in entries}

    def names_other(name, e, *exclude):
        o = by_name.get(name.encode("utf-8"))
        return o is not None and o is not e and o["shard"] == e["shard"] and \
            all(o is not x for x in exclude)

    for e in entries:
        q = e["quant"]
        if q is None:
            continue
        bad = q["scheme"] not in (1, 2) or not names_other(q["scale"], e)
        if not bad and q["scheme"] == 2:
            bad = not names_other(q["outer"], e, by_name[q["scale"].encode("utf-8")])
        if not bad and q["scheme"] == 1:
            bad = q["outer"] != ""
        if bad:
            return ("TYPE", "ManifestQuant", e["quant_pos"]), m
    # M5
    if len(m["digests"]) != 32 * len(entries):
        return ("TYPE", "ManifestDigestCount", m["digests_pos"]), m
    # the signature, over every byte but its own
    if trust is not None and not _signature_verifies(m, signed_message(buf)):
        return ("SIGNATURE", "SignatureInvalid", SIG_POS), m
    return None, m


def check_manifest(buf, trust: Trust | None = None):
    """First fault of a manifest or signed manifest (the Frozen rules with the key and
    release rules, then M1 to M5, then the signature when a key is given) or None."""
    return _manifest(bytes(buf), trust)[0]


# --------------------------------------------------------------------------
# a manifest and its shards


def _desc_matches(d, p, j, e) -> bool:
    """Descriptor j of a shard (steps 1 to 9 passed) against manifest entry e."""
    names, count = p["names"], len(p["descs"])
    rank = d[K._RANK]
    if names[j] != e["name"] or d[K._DTYPE] != e["dtype"]:
        return False
    if tuple(d[K._SHAPE:K._SHAPE + rank]) != e["shape"] or d[K._LEN] != e["byte_length"]:
        return False
    if (p["layouts"][j] or "") != e["layout"] or d[K._BLOCK] != e["block_size"]:
        return False
    scheme, axis, group = d[K._SCHEME], d[K._AXIS], d[K._GROUP]
    scale, outer = d[K._SCALE], d[K._OUTER]
    q = e["quant"]
    if q is None:
        return scheme == 0
    scale_name = names[scale] if scale < count else None
    outer_name = "" if outer == K.NONE32 else (names[outer] if outer < count else None)
    return (scheme == q["scheme"] and axis == q["axis"] and group == q["group_size"]
            and scale_name == q["scale"] and outer_name == q["outer"])


def _check_shard(data, k, m, mid, entries, verify):
    s = m["shards"][k - 1]
    # 1, 2
    if data is None:
        return ("SHARD", "ShardMissing", 0)
    data = bytes(data)
    if len(data) != s["length"]:
        return ("SHARD", "ShardLength", min(len(data), s["length"]))
    # 3
    fault, p = _early(data, "shard")
    if fault is not None:
        return fault
    # 4
    sh = p["shard"]
    if sh["model"] != mid:
        return ("SHARD", "ShardModel", p["model_pos"])
    if sh["index"] != k:
        return ("SHARD", "ShardIndex", p["index_pos"])
    if sh["count"] != len(m["shards"]):
        return ("SHARD", "ShardCount", p["count_pos"])
    # 5
    descs = p["descs"]
    block = p["block_pos"]
    if len(descs) != len(entries):
        return ("SHARD", "ShardTensorCount", block + HDR.TENSOR_COUNT)
    for j, (d, e) in enumerate(zip(descs, entries)):
        if not _desc_matches(d, p, j, e):
            return ("SHARD", "ShardTensor", block + 64 + 128 * j)
        if p["digests"][32 * j:32 * j + 32] != e["digest"]:
            return ("SHARD", "ShardTensorDigest", p["digests_pos"] + 4 + 32 * j)
    # 6
    if hashlib.sha256(data[:block + p["payload_base"]]).digest() != s["digest"]:
        return ("SHARD", "ShardPrefixDigest", 0)
    # 7
    return _late(data, p, verify)


def check_sharded(manifest, files, verify: bool = True, trust: Trust | None = None):
    """First fault of a sharded model, in shard order, or None.
    files: shard name -> bytes (a name absent or mapped to None is a missing file).
    Returns (code, rule, offset, file): file is None for a fault in the manifest.
    With a trust the manifest must be a signed one that the trust accepts."""
    manifest = bytes(manifest)
    if trust is not None:
        verify = True
    fault, m = _manifest(manifest, trust)
    if fault is not None:
        return fault + (None,)
    mid = hashlib.sha256(manifest[m["tensors_pos"]:]).digest()
    digests = m["digests"]
    for i, e in enumerate(m["entries"]):
        e["digest"] = digests[32 * i:32 * i + 32]
    for k, s in enumerate(m["shards"], 1):
        entries = [e for e in m["entries"] if e["shard"] == k]
        f = _check_shard(files.get(s["name"]), k, m, mid, entries, verify)
        if f is not None:
            return f + (s["name"],)
    return None


def check_file(buf, verify: bool = True, trust: Trust | None = None):
    """A reader given no type: a model file by its frame, a manifest (checked alone),
    or else a standalone directory block. Given a key: a manifest by its frame (signed
    or not), anything else as a signed record."""
    buf = bytes(buf)
    kind = kind_of(buf)
    if kind in MANIFEST_KINDS:
        return check_manifest(buf, trust)
    if trust is not None:
        return check_model(buf, trust=trust)
    if kind in MODEL_KINDS:
        return check_model(buf, verify, kind)
    e = K.validate("tensors", buf)
    return None if e is None else _fault(e)


def check_open(files: dict, name: str, verify: bool = True, trust: Trust | None = None):
    """A reader given the file `name` of a folder holding `files` (name -> bytes).
    A manifest (signed or not) opens its shards from the folder. Returns None or
    (code, rule, offset, file) with file the name of the file the fault is in."""
    buf = bytes(files[name])
    if kind_of(buf) in MANIFEST_KINDS:
        f = check_sharded(buf, files, verify, trust)
        if f is None:
            return None
        return f[:3] + (name if f[3] is None else f[3],)
    f = check_file(buf, verify, trust)
    return None if f is None else f + (name,)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        folder = Path(path).resolve().parent
        data = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
        print(path, check_open(data, Path(path).name) or "accept")
