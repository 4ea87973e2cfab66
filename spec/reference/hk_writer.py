#!/usr/bin/env python3
"""An HK (.hk, magic HKNT, version 1.0) writer: Python 3.11, standard library only.

Written from the HK format text, for test inputs of the Rust HK
reader (the kiln-hk crate) and of `kiln convert`. It writes what the format's
writer writes: the 128-byte header, metadata directly after it, the TOC,
zero padding to `alignment`, then each tensor's data, scales and residual,
each at its own aligned offset. Appendix records are appended afterwards
with append_record(), which never moves existing bytes.

API
    w = HkWriter(alignment=128)
    w.add_metadata(key, value, tag=None)   # str->string, bool->bool, int->int64,
                                           # float->float64, bytes->bytes,
                                           # dict/list->json (or pass tag=)
    w.add_tensor(name, storage, shape, data, scales=None, residual=None,
                 block_size=32, tile_layout=0, sparsity=0, sparsity_ratio=0.0)
    w.add_null_ref(name, shape)
    w.add_shared_ref(name, target)         # copies target's offsets (tied weights)
    blob = w.to_bytes()
    blob = append_record(blob, entry_type, name, target, data, form="full")

CLI
    hk_writer.py sample OUT.hk    one file covering every storage-type family,
                                  shared/null refs, all metadata types and a
                                  two-record appendix (one full, one legacy link)
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys

MAGIC = b"HKNT"
HEADER = struct.Struct("<4sHHIHHQQQQQQQQQH38s")
assert HEADER.size == 128
RECORD = struct.Struct("<BBHIQ32s4fHHIQ")
assert RECORD.size == 80

FLAG_LITTLE_ENDIAN = 1 << 0
FLAG_HAS_APPENDIX = 1 << 1
FLAG_TILE_ALIGNED = 1 << 4
FLAG_FLEXIBLE_ALIGNMENT = 1 << 5
FLAG_UNIVERSAL_PAGE_ALIGNED = 1 << 8

STORAGE = {
    "f32": 0x00, "f16": 0x01, "bf16": 0x02, "fp8_e4m3": 0x03, "fp8_e5m2": 0x04,
    "int8": 0x05, "int32": 0x06, "int64": 0x07, "uint8": 0x08, "bool": 0x09,
    "int16": 0x0A, "uint16": 0x0B, "uint32": 0x0C, "uint64": 0x0D, "f64": 0x0E,
    "dq4": 0x10, "dq8": 0x11, "dq6": 0x12, "dq12": 0x13, "dqt": 0x14,
    "q4_0": 0x15, "q8_0": 0x16, "q4_1": 0x17, "q5_0": 0x18, "q5_1": 0x19, "q8_1": 0x1A,
    "sparse_f16": 0x20, "sparse_dq8": 0x21, "sparse_2_4": 0x22, "sparse_dq4_2_4": 0x23,
    "null_ref": 0x30, "shared_ref": 0x31, "lora_ref": 0x32,
    "q2_k": 0x40, "q3_k": 0x41, "q4_k": 0x42, "q5_k": 0x43, "q6_k": 0x44, "q8_k": 0x45,
    "iq1_s": 0x50, "iq1_m": 0x51, "iq2_xxs": 0x52, "iq2_xs": 0x53, "iq3_xxs": 0x54,
    "iq4_nl": 0x55, "iq4_xs": 0x56, "iq2_s": 0x57, "iq3_s": 0x58,
    "tq1_0": 0x60, "tq2_0": 0x61, "mxfp4": 0x62, "nvfp4": 0x63,
}
TAG = {"string": 1, "int64": 2, "float64": 3, "bool": 4, "json": 5, "bytes": 6}
ENTRY = {"lora_adapter": 1, "delta_patch": 2, "new_layer": 3, "code_eval": 4,
         "kv_cache_sink": 5, "topology_head": 6}


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class HkWriter:
    def __init__(self, alignment: int = 128, split_index: int = 0, split_count: int = 1,
                 version_minor: int = 0):
        self.alignment = alignment
        self.split_index = split_index
        self.split_count = split_count
        self.version_minor = version_minor
        self.meta: list[tuple[bytes, int, bytes]] = []
        self.tensors: list[dict] = []

    # metadata --------------------------------------------------------------
    def add_metadata(self, key: str, value, tag: str | None = None) -> None:
        if tag is None:
            if isinstance(value, bool):
                tag = "bool"
            elif isinstance(value, int):
                tag = "int64"
            elif isinstance(value, float):
                tag = "float64"
            elif isinstance(value, str):
                tag = "string"
            elif isinstance(value, (bytes, bytearray)):
                tag = "bytes"
            else:
                tag = "json"
        if tag == "bool":
            raw = bytes([1 if value else 0])
        elif tag == "int64":
            raw = struct.pack("<q", value)
        elif tag == "float64":
            raw = struct.pack("<d", value)
        elif tag == "string":
            raw = value.encode("utf-8")
        elif tag == "json":
            raw = (value if isinstance(value, str) else json.dumps(value, sort_keys=True)).encode("utf-8")
        elif tag == "bytes":
            raw = bytes(value)
        else:
            raise ValueError(f"unknown metadata tag {tag!r}")
        self.meta.append((key.encode("utf-8"), TAG[tag], raw))

    # tensors ---------------------------------------------------------------
    def add_tensor(self, name: str, storage: str | int, shape, data: bytes = b"",
                   scales: bytes | None = None, residual: bytes | None = None,
                   block_size: int = 32, tile_layout: int = 0, sparsity: int = 0,
                   sparsity_ratio: float = 0.0) -> None:
        st = STORAGE[storage] if isinstance(storage, str) else storage
        self.tensors.append(dict(name=name.encode("utf-8"), storage=st, shape=tuple(shape),
                                 data=bytes(data), scales=scales, residual=residual,
                                 block_size=block_size, tile_layout=tile_layout,
                                 sparsity=sparsity, sparsity_ratio=sparsity_ratio, ref=None))

    def add_null_ref(self, name: str, shape) -> None:
        self.add_tensor(name, "null_ref", shape)
        self.tensors[-1]["ref"] = "null"

    def add_shared_ref(self, name: str, target: str) -> None:
        tgt = next(t for t in self.tensors if t["name"] == target.encode("utf-8"))
        self.add_tensor(name, "shared_ref", tgt["shape"], block_size=tgt["block_size"])
        self.tensors[-1]["ref"] = tgt

    # output ----------------------------------------------------------------
    def _toc_entry(self, t, spans) -> bytes:
        (doff, dsz), (roff, rsz), (soff, ssz) = spans
        out = struct.pack("<H", len(t["name"])) + t["name"]
        out += struct.pack("<BBBB", t["storage"], t["tile_layout"], t["sparsity"], len(t["shape"]))
        out += b"".join(struct.pack("<Q", d) for d in t["shape"])
        out += struct.pack("<6Q", doff, dsz, roff, rsz, soff, ssz)
        out += struct.pack("<Hf", t["block_size"], t["sparsity_ratio"])
        return out

    def to_bytes(self) -> bytes:
        meta = b"".join(struct.pack("<H", len(k)) + k + struct.pack("<BI", tag, len(v)) + v
                        for k, tag, v in self.meta)
        # The TOC's size does not depend on the offsets, so lay it out once with zeros.
        zero = ((0, 0), (0, 0), (0, 0))
        toc_size = sum(len(self._toc_entry(t, zero)) for t in self.tensors)
        meta_off = 128
        toc_off = meta_off + len(meta)
        data_off = _align(toc_off + toc_size, self.alignment)
        pos = data_off
        payload = bytearray()
        spans_of = {}
        for i, t in enumerate(self.tensors):
            if t["ref"] == "null":
                spans_of[i] = zero
                continue
            if isinstance(t["ref"], dict):
                spans_of[i] = spans_of[self.tensors.index(t["ref"])]
                continue
            spans = []
            for part in (t["data"], t["residual"], t["scales"]):
                if part is None:
                    spans.append((0, 0))
                    continue
                start = _align(pos, self.alignment)
                payload += bytes(start - pos) + part
                pos = start + len(part)
                spans.append((start, len(part)))
            d, r, s = spans
            spans_of[i] = (d, r, s)
        toc = b"".join(self._toc_entry(t, spans_of[i]) for i, t in enumerate(self.tensors))
        assert len(toc) == toc_size
        flags = FLAG_LITTLE_ENDIAN
        flags |= FLAG_TILE_ALIGNED if self.alignment % 128 == 0 else FLAG_FLEXIBLE_ALIGNMENT
        if self.alignment >= 4096:
            flags |= FLAG_UNIVERSAL_PAGE_ALIGNED
        header = HEADER.pack(MAGIC, 1, self.version_minor, flags, self.alignment, self.split_index,
                             len(self.tensors), len(self.meta), meta_off, len(meta),
                             toc_off, toc_size, data_off, 0, 0, self.split_count, bytes(38))
        out = bytearray(header) + meta + toc
        out += bytes(data_off - len(out))
        out += payload
        return bytes(out)


def _records(blob: bytes):
    """(name, target, data) of each appendix record already in blob."""
    (_, _, _, _, _, _, _, _, _, _, _, _, _, app, _, _, _) = HEADER.unpack_from(blob, 0)
    pos = app
    while app and pos < len(blob):
        (_, _, nlen, _, _, _, _, _, _, _, tlen, _, _, dsz) = RECORD.unpack_from(blob, pos)
        p = pos + 80
        name, target, data = blob[p:p + nlen], blob[p + nlen:p + nlen + tlen], blob[p + nlen + tlen:p + nlen + tlen + dsz]
        yield name, target, data
        pos = _align(p + nlen + tlen + dsz, 8)


def append_record(blob: bytes, entry_type: str | int, name: str, target: str, data: bytes,
                  generation: int = 0, timestamp: int = 0, metrics=(0.0, 0.0, 0.0, 0.0),
                  flags: int = 1, form: str = "full") -> bytes:
    """Appends one record. form: "full" (SHA-256 of name||target||data of the
    previous record), "payload" (older form: SHA-256 of its data) or "zero"."""
    prev = list(_records(blob))
    parent = bytes(32)
    if prev and form != "zero":
        n, t, d = prev[-1]
        parent = hashlib.sha256((n + t + d) if form == "full" else d).digest()
    out = bytearray(blob)
    out += bytes(_align(len(out), 8) - len(out))
    start = len(out)
    nb, tb = name.encode("utf-8"), target.encode("utf-8")
    et = ENTRY[entry_type] if isinstance(entry_type, str) else entry_type
    out += RECORD.pack(et, flags, len(nb), generation, timestamp, parent, *metrics,
                       len(tb), 0, 0, len(data))
    out += nb + tb + data
    out += bytes(_align(len(out), 8) - len(out))
    if not prev:
        struct.pack_into("<Q", out, 0x48, start)
        (flags_now,) = struct.unpack_from("<I", out, 0x08)
        struct.pack_into("<I", out, 0x08, flags_now | FLAG_HAS_APPENDIX)
    return bytes(out)


# Block sizes in bytes per block (elements per block) of the GGUF-compatible types.
GGML_BLOCKS = {
    "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "q8_0": (32, 34),
    "q8_1": (32, 36), "q2_k": (256, 84), "q3_k": (256, 110), "q4_k": (256, 144),
    "q5_k": (256, 176), "q6_k": (256, 210), "q8_k": (256, 292), "iq2_xxs": (256, 66),
    "iq2_xs": (256, 74), "iq3_xxs": (256, 98), "iq1_s": (256, 50), "iq4_nl": (32, 18),
    "iq3_s": (256, 110), "iq2_s": (256, 82), "iq4_xs": (256, 136), "iq1_m": (256, 56),
    "tq1_0": (256, 54), "tq2_0": (256, 66), "mxfp4": (32, 17), "nvfp4": (64, 36),
}


def _pattern(n: int, seed: int) -> bytes:
    return bytes((i * 31 + seed * 17 + 7) & 0xFF for i in range(n))


def sample() -> bytes:
    """One file with every storage-type family."""
    w = HkWriter(alignment=128)
    w.add_metadata("general.architecture", "mlp")
    w.add_metadata("general.name", "hk sample ✓")
    w.add_metadata("mlp.block_count", 2)
    w.add_metadata("mlp.eps", 1e-5)
    w.add_metadata("mlp.tied", True)
    w.add_metadata("tokenizer.config", {"bos": 1, "eos": 2})
    w.add_metadata("tokenizer.blob", b"\x00\x01\xfe\xff")
    w.add_tensor("embed.weight", "f32", (4, 8), struct.pack("<32f", *[i / 8 for i in range(32)]))
    w.add_tensor("norm.weight", "f16", (8,), struct.pack("<8e", *[1.0 + i / 4 for i in range(8)]))
    w.add_tensor("norm.bias", "bf16", (8,), bytes(16))
    w.add_tensor("fp8.a", "fp8_e4m3", (4,), bytes([0x38, 0x3C, 0x7E, 0x80]))
    w.add_tensor("fp8.b", "fp8_e5m2", (4,), bytes([0x3C, 0x7B, 0x7C, 0x01]))
    for name, st, fmt in (("i8", "int8", "b"), ("i16", "int16", "h"), ("i32", "int32", "i"),
                          ("i64", "int64", "q"), ("u8", "uint8", "B"), ("u16", "uint16", "H"),
                          ("u32", "uint32", "I"), ("u64", "uint64", "Q"), ("f64", "f64", "d")):
        vals = [1, 2, 3] if fmt in "BHIQ" else ([-1, 0, 1] if fmt != "d" else [-1.5, 0.0, 2.5])
        w.add_tensor(f"dense.{name}", st, (3,), struct.pack(f"<3{fmt}", *vals))
    w.add_tensor("dense.bool", "bool", (3,), bytes([1, 0, 1]))
    for st, (elems, nbytes) in GGML_BLOCKS.items():
        blocks = 2
        w.add_tensor(f"blk.{st}", st, (2, elems * blocks // 2), _pattern(nbytes * blocks, STORAGE[st]))
    w.add_tensor("dq.dq4", "dq4", (64,), _pattern(32, 1), scales=_pattern(8, 2), residual=_pattern(5, 3))
    w.add_tensor("dq.dq8", "dq8", (32,), _pattern(32, 4), scales=_pattern(4, 5))
    w.add_tensor("dq.dq6", "dq6", (32,), _pattern(24, 6), scales=_pattern(4, 7))
    w.add_tensor("dq.dq12", "dq12", (32,), _pattern(48, 8))
    w.add_tensor("dq.dqt", "dqt", (40,), _pattern(10, 9))
    w.add_tensor("sparse.f16", "sparse_f16", (16,), _pattern(20, 10), sparsity=1, sparsity_ratio=0.5)
    w.add_tensor("sparse.dq8", "sparse_dq8", (16,), _pattern(12, 11), sparsity=2)
    w.add_tensor("sparse.2_4", "sparse_2_4", (16,), _pattern(18, 12), sparsity=3, sparsity_ratio=0.5)
    w.add_tensor("sparse.dq4_2_4", "sparse_dq4_2_4", (32,), _pattern(12, 13), sparsity=3)
    w.add_tensor("lora.a", "lora_ref", (2, 2), _pattern(16, 14))
    w.add_null_ref("pruned.weight", (4, 8))
    w.add_shared_ref("lm_head.weight", "embed.weight")
    w.add_tensor("tiled.weight", "f32", (2, 2), struct.pack("<4f", 1, 2, 3, 4), tile_layout=2)
    blob = w.to_bytes()
    blob = append_record(blob, "lora_adapter", "adapter-1", "embed.weight", b"delta-1", generation=1,
                         timestamp=1_700_000_000, metrics=(0.5, 0.9, 1.0, 0.0))
    blob = append_record(blob, "delta_patch", "patch-2", "norm.weight", b"delta-two!", generation=2)
    blob = append_record(blob, "code_eval", "eval-3", "", b"ok", generation=3, form="payload")
    return blob


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "sample":
        with open(argv[1], "wb") as f:
            f.write(sample())
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
