"""Tests for the model-file reference (model_ref.py) and its golden-case generator
(gen_model_cases.py): spec/model-file.md.

    python3 -m pytest spec/reference -q
    python3 -m unittest discover -s spec/reference
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPEC = HERE.parent
sys.path.insert(0, str(HERE))

import delta_ref as D  # noqa: E402
import ed25519_ref as E  # noqa: E402
import gen_model_cases as G  # noqa: E402
import kiln_ref as K  # noqa: E402
import model_ref as M  # noqa: E402
from gen_model_cases import F32_2, MD, T, flip, put, sha  # noqa: E402
from kiln_ref import DESC, HDR  # noqa: E402


def two():
    return [T("a", "f32", (2,), F32_2), T("b", "u8", (3,), b"\x07\x08\x09")]


MDLEN = len(K.encode("dict<str,str>", MD))
DIG_POS = 16 + MDLEN                 # the digests length word of a digests record with MD
SH = 20                              # the shard field of a shard record with no metadata


class SpecTables(unittest.TestCase):
    def test_type_texts_and_hashes_are_the_spec_table(self):
        text = (SPEC / "model-file.md").read_text(encoding="utf-8")
        rows = re.findall(r"^\| (plain|digests|shard|manifest|signed) \| (.*?) "
                          r"\| \*\*0x([0-9a-f]+)\*\* \|$", text, re.M)
        self.assertEqual([r[0] for r in rows], ["plain", "digests", "shard", "manifest", "signed"])
        for kind, cell, h in rows:
            self.assertEqual(M.HASHES[kind], int(h, 16))
            self.assertEqual(K.schema_hash(M.TYPES[kind]), int(h, 16))
            if kind not in ("manifest", "signed"):
                self.assertEqual(cell.strip("`"), M.TYPES[kind])
        block = re.search(r"### Manifests\n\n```\n(.*?)```", text, re.S).group(1)
        self.assertEqual("".join(block.split()), M.MANIFEST_TYPE)
        signed = text.split("## Signed models")[1].split("## Delta updates")[0]
        blocks = re.findall(r"```\n(.*?)```", signed, re.S)
        self.assertEqual("".join(blocks[0].split()), M.SIGNED_TYPE)
        # the signed manifest's text names the manifest's `shards` and `tensors` types
        sm = "".join(blocks[1].split())
        self.assertEqual(sm.replace("shards:...,tensors:...,", "shards:" + M.SHARD_LIST_TYPE
                                    + ",tensors:" + M.TENSOR_TABLE_TYPE + ","),
                         M.SIGNED_MANIFEST_TYPE)
        h = re.search(r"schema hash\s+\*\*0x([0-9a-f]+)\*\*", signed).group(1)
        self.assertEqual(K.schema_hash(M.SIGNED_MANIFEST_TYPE), int(h, 16))
        self.assertEqual(M.HASHES["signed_manifest"], int(h, 16))
        delta = text.split("## Delta updates")[1]
        self.assertIn(f"the hash of {D.DELTA_TYPE})", delta)

    def test_rule_steps_are_the_directory_table(self):
        text = (SPEC / "kiln-v2.md").read_text(encoding="utf-8")
        table = text.split("<!-- rule-table:directory:begin -->")[1].split(
            "<!-- rule-table:directory:end -->")[0]
        steps = {}
        for line in table.splitlines():
            m = re.match(r"\| `(\w+)` \| `\w+` \| (\w+) \|", line)
            if m:
                steps[m.group(1)] = m.group(2)
        # bool_byte is both a Frozen rule and a step-11 directory rule; the table's row wins
        self.assertEqual(steps, M.RULE_STEP)

    def test_new_rules_are_the_spec_tables(self):
        text = (SPEC / "model-file.md").read_text(encoding="utf-8")
        names = re.findall(r"\| `([A-Z]\w+)` \|", text)
        self.assertEqual(sorted(set(names)), sorted(G.NEW_RULES))

    def test_empty_digest(self):
        self.assertEqual(M.EMPTY_DIGEST.hex(),
                         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")


class RoundTrips(unittest.TestCase):
    def test_digests_record(self):
        ts = G.rich_tensors()
        buf = M.write_model(MD, ts)
        self.assertIsNone(M.check_model(buf))
        self.assertIsNone(M.check_file(buf))
        v = K.decode(M.DIGESTS_TYPE, buf, framed=True)
        self.assertEqual(v["metadata"], MD)
        self.assertEqual(v["digests"], b"".join(sha(t.payload) for t in ts))
        self.assertEqual(v["tensors"], ts)
        self.assertEqual(v["digests"][64:96], M.EMPTY_DIGEST)     # tensor 2 is empty
        self.assertEqual(buf[8:16], struct.pack("<Q", 0x869B39CE80B385EF))

    def test_plain_record(self):
        ts = G.rich_tensors()
        buf = M.write_model({}, ts, digests=False)
        self.assertIsNone(M.check_model(buf))
        v = K.decode(M.PLAIN_TYPE, buf, framed=True)
        self.assertEqual(v, {"metadata": {}, "tensors": ts})
        self.assertEqual(buf[16:20], bytes(4))
        self.assertEqual(buf[20:], K.encode_directory(ts))

    def test_example_model_file(self):
        buf = (SPEC / "examples" / "digits-mlp.model.kiln").read_bytes()
        # The bundled example carries digests; the small examples stay plain records.
        self.assertEqual(M.kind_of(buf), "digests")
        self.assertIsNone(M.check_model(buf, verify=True))
        small = (SPEC / "examples" / "small" / "f32-vector.model.kiln").read_bytes()
        self.assertEqual(M.kind_of(small), "plain")
        self.assertIsNone(M.check_model(small))
        self.assertIsNone(M.check_file(buf))
        # the payload region at a 4 KiB file offset (the padding key)
        p = M.parse_model(buf)
        self.assertEqual((p["block_pos"] + p["payload_base"]) % 4096, 0)
        self.assertIn("kiln.convert.pad", p["metadata"])
        plain = (SPEC / "examples" / "digits-mlp.kiln").read_bytes()
        self.assertIsNone(M.check_file(plain))
        self.assertEqual(buf[p["block_pos"]:], plain)

    def test_sharded(self):
        ts = G.rich_tensors()
        s2, s3 = [ts[5], ts[6]], [ts[7], ts[8], ts[9]]
        s2[0].scale_index = 1
        s3[0].scale_index, s3[0].outer_index = 1, 2
        shards = [ts[:5], s2, s3]
        names = [M.shard_file_name("m", k, 3) for k in (1, 2, 3)]
        self.assertEqual(names[0], "m-00001-of-00003.kiln")
        man, files = M.write_sharded(MD, shards, names)
        self.assertEqual(list(files), names)
        self.assertIsNone(M.check_manifest(man))
        self.assertIsNone(M.check_sharded(man, files))
        self.assertIsNone(M.check_open({"m.kiln": man, **files}, "m.kiln"))
        v = K.decode(M.MANIFEST_TYPE, man, framed=True)
        self.assertEqual(v["metadata"], MD)
        self.assertEqual(v["digests"], b"".join(sha(t.payload) for t in ts))
        self.assertEqual([e["name"] for e in v["tensors"]], [t.name for t in ts])
        self.assertEqual([e["shard"] for e in v["tensors"]], [1] * 5 + [2] * 2 + [3] * 3)
        self.assertEqual(v["tensors"][5]["quant"], {"scheme": 1, "axis": 0, "group_size": 32,
                                                    "scale": "mx.scale", "outer": ""})
        self.assertEqual(v["tensors"][7]["quant"]["outer"], "q2.outer")
        self.assertIsNone(v["tensors"][0]["quant"])
        self.assertEqual(v["tensors"][4]["layout"], "Q4_K")
        self.assertEqual(v["tensors"][3]["shape"], [])
        # the model id: SHA-256 from the tensors count word to the end
        m = M.parse_manifest(man)
        mid = hashlib.sha256(man[m["tensors_pos"]:]).digest()
        for k, name in enumerate(names, 1):
            sv = K.decode(M.SHARD_TYPE, files[name], framed=True)
            self.assertEqual(sv["shard"], {"model": mid, "index": k, "count": 3})
            self.assertEqual(sv["metadata"], {})
            self.assertEqual(sv["tensors"], shards[k - 1])
            self.assertEqual(sv["digests"], M.tensor_digests(shards[k - 1]))
            entry = v["shards"][k - 1]
            self.assertEqual(entry["name"], name)
            self.assertEqual(entry["length"], len(files[name]))
            # prefix: everything before the payload region
            pl = M.prefix_length(files[name])
            block = 16 + 4 + 44 + 4 + 32 * len(shards[k - 1])
            self.assertEqual(pl, block + G.block_layout(shards[k - 1])[0])
            self.assertEqual(entry["digest"], sha(files[name][:pl]))
            self.assertIsNone(M.check_model(files[name]))

    def test_shard_metadata_does_not_change_the_model_id(self):
        a, _ = M.write_sharded(MD, [two()], ["x.kiln"])
        b, _ = M.write_sharded(MD, [two()], ["x.kiln"], shard_metadata={"kiln.convert.pad": "  "})
        ma, mb = M.parse_manifest(a), M.parse_manifest(b)
        self.assertEqual(a[ma["tensors_pos"]:], b[mb["tensors_pos"]:])
        self.assertNotEqual(a, b)        # the shards' lengths and prefix digests differ


class DigestRules(unittest.TestCase):
    def setUp(self):
        self.ts = two()
        self.block = K.encode_directory(self.ts)
        self.dg = M.tensor_digests(self.ts)
        self.bp = DIG_POS + 4 + 64          # block start with two digests
        self.base = self.bp + ((64 + 256 + 2 + 63) & ~63)   # payload region

    def rec(self, block=None, digests=None):
        return M.assemble("digests", MD, self.block if block is None else block,
                          self.dg if digests is None else digests)

    def test_valid(self):
        self.assertIsNone(M.check_model(self.rec()))

    def test_table_length(self):
        self.assertEqual(M.check_model(self.rec(digests=self.dg[:33])),
                         ("TYPE", "DigestTableLength", DIG_POS))

    def test_table_count(self):
        self.assertEqual(M.check_model(self.rec(digests=self.dg[:32])),
                         ("TYPE", "DigestTableCount", DIG_POS))
        self.assertEqual(M.check_model(self.rec(digests=self.dg + self.dg[:32])),
                         ("TYPE", "DigestTableCount", DIG_POS))
        self.assertEqual(M.check_model(self.rec(digests=b"")),
                         ("TYPE", "DigestTableCount", DIG_POS))

    def test_table_count_without_verifying(self):
        self.assertEqual(M.check_model(self.rec(digests=self.dg[:32]), verify=False),
                         ("TYPE", "DigestTableCount", DIG_POS))

    def test_3d_after_step_3_before_step_4(self):
        bp = DIG_POS + 4 + 32
        bad4 = put(self.block, HDR.DIRECTORY_BYTES, "Q", 0)
        self.assertEqual(M.check_model(self.rec(bad4, self.dg[:32])),
                         ("TYPE", "DigestTableCount", DIG_POS))
        for field, fmt, v, rule, code in (
                (HDR.VERSION, "B", 1, "dir_version", "FRAME"),
                (HDR.FLAGS, "B", 0x07, "dir_flag_unknown", "FRAME"),
                (40, "B", 1, "dir_reserved", "FRAME"),
                (HDR.TENSOR_COUNT, "I", K.DEFAULT_CAP + 1, "dir_count_cap", "LIMIT"),
                (HDR.NAME_BYTES, "I", K.DEFAULT_CAP + 1, "dir_name_bytes_cap", "LIMIT"),
                (HDR.MAGIC, "B", 0, "dir_magic", "FRAME")):
            self.assertEqual(M.check_model(self.rec(put(self.block, field, fmt, v), self.dg[:32])),
                             (code, rule, bp + field), rule)
        # a block cut inside its header: steps 1 before 3d
        buf = M.assemble("digests", MD, self.block[:40], self.dg[:32])
        self.assertEqual(M.check_model(buf), ("EOF", "dir_header_eof", bp))
        buf = M.assemble("digests", MD, b"", self.dg[:32])
        self.assertEqual(M.check_model(buf), ("EOF", "dir_magic_eof", bp))

    def test_payload_digest(self):
        buf = flip(self.rec(), self.base + 64 + 1)        # tensor 1's second byte
        self.assertEqual(M.check_model(buf), ("DIGEST", "PayloadDigest", self.base + 64))
        self.assertIsNone(M.check_model(buf, verify=False))
        buf = self.rec(digests=self.dg[:32] + bytes(32))
        self.assertEqual(M.check_model(buf), ("DIGEST", "PayloadDigest", self.base + 64))

    def test_step_9_before_9d(self):
        bad = put(self.block, 64 + 128 + DESC.RANK, "B", 9)
        self.assertEqual(M.check_model(self.rec(bad, flip(self.dg, 0))),
                         ("TYPE", "rank", self.bp + 64 + 128 + DESC.RANK))

    def test_9d_before_steps_10_to_12(self):
        gap = flip(self.block, self.base - self.bp + 8)
        self.assertEqual(M.check_model(self.rec(gap, flip(self.dg, 40))),
                         ("DIGEST", "PayloadDigest", self.base + 64))
        self.assertEqual(M.check_model(self.rec(gap)), ("TYPE", "gap_nonzero", self.base + 8))
        buf = self.rec(digests=flip(self.dg, 0)) + b"\x00"
        self.assertEqual(M.check_model(buf), ("DIGEST", "PayloadDigest", self.base))
        self.assertEqual(M.check_model(buf, verify=False), ("TRAILING", "trailing", len(buf) - 1))

    def test_9d_stops_at_the_first_non_canonical_offset(self):
        three = [T(n, "f32", (2,), F32_2) for n in "abc"]
        dg = M.tensor_digests(three)
        bp = DIG_POS + 4 + 96
        base = bp + ((64 + 384 + 3 + 63) & ~63)
        moved = G.raw_block(three, [0, 64, 256], 264)      # tensor 2 not at 128
        buf = M.assemble("digests", MD, moved, dg[:64] + flip(dg[64:], 0))
        self.assertEqual(M.check_model(buf),
                         ("TYPE", "offset_not_canonical", bp + 64 + 256 + DESC.BYTE_OFFSET))
        buf = M.assemble("digests", MD, moved, dg[:32] + flip(dg[32:], 0))
        self.assertEqual(M.check_model(buf), ("DIGEST", "PayloadDigest", base + 64))
        # stored out of order: 9d hashes tensor 0 only if it is at 0
        swapped = G.raw_block(three, [64, 0, 128], 136)
        buf = M.assemble("digests", MD, swapped, flip(dg, 0))
        self.assertEqual(M.check_model(buf),
                         ("TYPE", "offset_not_canonical", bp + 64 + DESC.BYTE_OFFSET))

    def test_empty_tensor_digest(self):
        ts = [T("e", "u8", (0,), b""), T("a", "u8", (1,), b"\x01")]
        buf = M.write_model({}, ts)
        self.assertIsNone(M.check_model(buf))
        bad = M.assemble("digests", {}, K.encode_directory(ts), bytes(32) + sha(b"\x01"))
        base = 20 + 4 + 64 + ((64 + 256 + 2 + 63) & ~63)
        self.assertEqual(M.check_model(bad), ("DIGEST", "PayloadDigest", base))

    def test_plain_records_have_no_digest_steps(self):
        buf = M.write_model(MD, self.ts, digests=False)
        self.assertIsNone(M.check_model(flip(buf, len(buf) - 1)))

    def test_the_frame_decides_the_kind(self):
        rec = self.rec()
        # as a plain record the digests field is read as a directory block
        self.assertEqual(M.check_model(put(rec, 8, "Q", M.HASHES["plain"])),
                         ("FRAME", "dir_magic", DIG_POS))
        self.assertEqual(M.check_model(rec, kind="shard"), ("SCHEMA", "schema_hash", 8))
        self.assertEqual(M.check_model(put(rec, 8, "Q", 1)), ("SCHEMA", "schema_hash", 8))
        self.assertEqual(M.check_file(put(rec, 8, "Q", 1)), ("FRAME", "dir_magic", 0))
        self.assertEqual(M.check_model(rec[:15]), ("EOF", "frame_eof", 0))
        self.assertEqual(M.check_file(put(rec, 5, "B", 1)), ("FRAME", "frame_flags", 5))


class ShardRecordRules(unittest.TestCase):
    def setUp(self):
        self.t = [two()[0]]
        self.block = K.encode_directory(self.t)
        self.dg = M.tensor_digests(self.t)
        self.mid = sha(b"m")

    def rec(self, model=None, index=1, count=2, digests=None):
        return M.assemble("shard", {}, self.block, self.dg if digests is None else digests,
                          (self.mid if model is None else model, index, count))

    def test_valid(self):
        self.assertIsNone(M.check_model(self.rec()))
        self.assertIsNone(M.check_model(self.rec(index=2, count=2)))
        self.assertIsNone(M.check_model(self.rec(index=1, count=1)))

    def test_model_length(self):
        for n in (0, 31, 33, 64):
            self.assertEqual(M.check_model(self.rec(model=bytes(n))),
                             ("TYPE", "ShardModelLength", SH))

    def test_position(self):
        idx, cnt = SH + 36, SH + 40
        self.assertEqual(M.check_model(self.rec(count=0)), ("TYPE", "ShardPosition", cnt))
        self.assertEqual(M.check_model(self.rec(index=0, count=0)), ("TYPE", "ShardPosition", cnt))
        self.assertEqual(M.check_model(self.rec(index=0)), ("TYPE", "ShardPosition", idx))
        self.assertEqual(M.check_model(self.rec(index=3)), ("TYPE", "ShardPosition", idx))
        self.assertEqual(M.check_model(self.rec(index=0xFFFFFFFF, count=0xFFFFFFFF)), None)

    def test_shard_field_read_whole_before_its_rules(self):
        # a 31-byte model, then the file ends inside `count`: the Frozen EOF comes first
        buf = M.assemble("shard", {}, b"", b"", (bytes(31), 1, 2))[:SH + 4 + 31 + 4 + 2]
        self.assertEqual(M.check_model(buf), ("EOF", "value_eof", SH + 4 + 31 + 4))

    def test_position_before_digest_table(self):
        self.assertEqual(M.check_model(self.rec(index=0, digests=b"\x00")),
                         ("TYPE", "ShardPosition", SH + 36))

    def test_shard_digests(self):
        buf = flip(self.rec(), len(self.rec()) - 1)
        base = SH + 44 + 4 + 32 + ((64 + 128 + 1 + 63) & ~63)
        self.assertEqual(M.check_model(buf), ("DIGEST", "PayloadDigest", base))


class ManifestRules(unittest.TestCase):
    def s(self):
        return G.base2()

    def check(self, s, expect, manifest=None):
        man = s.manifest() if manifest is None else manifest
        self.assertEqual(M.check_manifest(man), expect)
        self.assertEqual(M.check_sharded(man, s.files), None if expect is None else expect + (None,))

    def test_valid(self):
        self.check(self.s(), None)

    def test_frozen_rules_first(self):
        s = self.s()
        man = s.manifest()
        self.check(s, ("SCHEMA", "schema_hash", 8), put(man, 8, "Q", M.HASHES["shard"]))
        self.check(s, ("TRAILING", "trailing", len(man)), man + b"\x00")
        s.shard_list = []
        man = s.manifest()
        self.check(s, ("TRAILING", "trailing", len(man)), man + b"\x00")
        self.check(s, ("TYPE", "ManifestNoShards", s.mpos()["shards"]))

    def test_names(self):
        for bad in ("", "a/b", "a\\b", "..", ".", "a\x00", "c:x", "/abs.kiln", "\x01",
                    "x\x1f", "x\x7f", "\t", "b" * 256, "é" * 128, "ok\u0085", "\u0080", "x\u009f"):
            s = self.s()
            s.shard_list[0]["name"] = bad
            self.check(s, ("PATH", "ShardName", s.mpos()["shard"][0]["name"]))
        for good in ("...", ".hidden", "a b.kiln", "é" * 127, "x" * 255, "ok\u00a0"):
            s = self.s()
            s.shard_list[0]["name"] = good
            self.assertIsNone(M.check_manifest(s.manifest()), good)

    def test_repeated_name_and_digest_length(self):
        s = self.s()
        s.shard_list[1]["name"] = s.shard_list[0]["name"]
        self.check(s, ("PATH", "ShardNameRepeated", s.mpos()["shard"][1]["name"]))
        s = self.s()
        s.shard_list[1]["digest"] += b"\x00"
        self.check(s, ("TYPE", "ShardDigestLength", s.mpos()["shard"][1]["digest"]))

    def entry_fault(self, edit, code, rule, field, entry=0, s=None):
        s = s or self.s()
        edit(s.entries)
        self.check(s, (code, rule, s.mpos()["entry"][entry][field]))

    def test_m3(self):
        E = self.entry_fault
        E(lambda e: e[0].update(name=""), "TYPE", "ManifestNameEmpty", "name")
        E(lambda e: e[1].update(name="a"), "TYPE", "ManifestNameRepeated", "name", 1)
        E(lambda e: e[0].update(shard=0), "TYPE", "ManifestShard", "shard")
        E(lambda e: e[1].update(shard=3), "TYPE", "ManifestShard", "shard", 1)
        E(lambda e: (e[0].update(shard=2), e[1].update(shard=1)), "TYPE", "ManifestShard",
          "shard", 1)
        for code in (0, 20, 4095, 32768, 65535):
            E(lambda e, c=code: e[0].update(dtype=c), "TYPE", "ManifestDtype", "dtype")
        E(lambda e: e[0].update(shape=[1] * 9), "TYPE", "ManifestRank", "shape")
        E(lambda e: e[0].update(shape=[1 << 63, 2]), "LIMIT", "ManifestCountOverflow", "shape")
        E(lambda e: e[0].update(layout="x"), "TYPE", "ManifestLayout", "layout")
        E(lambda e: e[0].update(block_size=1), "TYPE", "ManifestLayout", "layout")
        E(lambda e: e[0].update(dtype=5000), "TYPE", "ManifestLayout", "layout")
        E(lambda e: e[0].update(dtype=5000, layout="x"), "TYPE", "ManifestLayout", "layout")
        E(lambda e: e[0].update(dtype=5000, layout="x", block_size=3), "TYPE",
          "ManifestLength", "byte_length")
        E(lambda e: e[0].update(shape=[1 << 62]), "LIMIT", "ManifestSizeOverflow", "byte_length")
        E(lambda e: e[0].update(byte_length=0), "TYPE", "ManifestLength", "byte_length")
        E(lambda e: e[1].update(dtype=17, shape=[7]), "TYPE", "ManifestLength",
          "byte_length", 1)                       # u4[7] is 4 bytes, not 3
        # opaque: any shape, a multiple of block_size
        s = self.s()
        s.entries[0].update(dtype=5000, layout="x", block_size=4, shape=[1 << 40])
        self.assertIsNone(M.check_manifest(s.manifest()))
        s = self.s()
        s.entries[1].update(dtype=17, shape=[6])
        self.assertIsNone(M.check_manifest(s.manifest()))

    def test_m4(self):
        def q(entry, **kw):
            s = G.quant_sharded()
            if s.entries[entry]["quant"] is None:
                s.entries[entry]["quant"] = {"scheme": 1, "axis": 0, "group_size": 1,
                                             "scale": "", "outer": ""}
            s.entries[entry]["quant"].update(kw)
            return s

        ok = G.quant_sharded()
        self.assertIsNone(M.check_manifest(ok.manifest()))
        for entry, kw in ((1, {"scheme": 0}), (1, {"scheme": 3}), (1, {"scale": "zz"}),
                          (1, {"scale": "mx"}), (1, {"scale": "w"}), (1, {"outer": "mx.scale"}),
                          (3, {"outer": ""}), (3, {"outer": "q2"}), (3, {"outer": "q2.scale"}),
                          (3, {"outer": "w"}), (3, {"scale": "q2.outer", "outer": "q2.outer"}),
                          (0, {"scale": "mx.scale"})):
            s = q(entry, **kw)
            self.check(s, ("TYPE", "ManifestQuant", s.mpos()["entry"][entry]["quant"]))
        # the manifest does not check axis or group size (the shard's own rules do)
        self.assertIsNone(M.check_manifest(q(1, axis=9, group_size=0).manifest()))
        # scale and outer exchanged is still a legal manifest
        self.assertIsNone(M.check_manifest(q(3, scale="q2.outer", outer="q2.scale").manifest()))

    def test_m5_and_order(self):
        s = self.s()
        s.digests = s.digests[:63]
        self.check(s, ("TYPE", "ManifestDigestCount", s.mpos()["digests"]))
        s = self.s()
        s.digests = s.digests[:32]
        s.entries[1].update(byte_length=1)
        self.check(s, ("TYPE", "ManifestLength", s.mpos()["entry"][1]["byte_length"]))
        s = self.s()
        s.entries[0]["name"] = ""
        s.shard_list[1]["digest"] = b""
        self.check(s, ("TYPE", "ShardDigestLength", s.mpos()["shard"][1]["digest"]))


class ShardOpening(unittest.TestCase):
    def test_missing(self):
        s = G.base2()
        n1, n2 = s.names
        self.assertEqual(M.check_sharded(s.manifest(), {n1: s.files[n1]}),
                         ("SHARD", "ShardMissing", 0, n2))
        self.assertEqual(M.check_sharded(s.manifest(), {n1: s.files[n1], n2: None}),
                         ("SHARD", "ShardMissing", 0, n2))
        self.assertEqual(M.check_sharded(s.manifest(), {}), ("SHARD", "ShardMissing", 0, n1))

    def test_length(self):
        s = G.base2()
        n2 = s.names[1]
        data = s.files[n2]
        for cut in (data[:-1], data + b"\x00", b"", data[:10]):
            s.files[n2] = cut
            self.assertEqual(M.check_sharded(s.manifest(), s.files),
                             ("SHARD", "ShardLength", min(len(cut), len(data)), n2))

    def test_own_checks(self):
        s = G.base2()
        n1 = s.names[0]
        s.files[n1] = put(s.files[n1], 8, "Q", M.HASHES["manifest"])
        self.assertEqual(M.check_sharded(s.manifest(), s.files), ("SCHEMA", "schema_hash", 8, n1))
        s = G.base2()
        p = s.shard_pos(1)
        s.files[n1] = put(s.files[n1], p["desc"][0] + DESC.DTYPE, "H", 20)
        self.assertEqual(M.check_sharded(s.manifest(), s.files),
                         ("TYPE", "dtype_reserved", p["desc"][0] + DESC.DTYPE, n1))

    def test_model_index_count(self):
        s = G.twins()
        a, b = s.names
        s.files[a], s.files[b] = s.files[b], s.files[a]
        self.assertEqual(M.check_sharded(s.manifest(), s.files),
                         ("SHARD", "ShardIndex", s.shard_pos(1)["index"], a))
        other = G.twins()
        other.metadata = {"x": "y"}           # the manifest's metadata is not in the model id
        self.assertEqual(other.mid, G.twins().mid)
        s = G.base2()
        o = G.Sharded([[T("a", "f32", (2,), F32_2)], [T("b", "u8", (3,), b"\x07\x08\x00")]])
        s.files[s.names[1]] = o.files[o.names[1]]
        self.assertEqual(M.check_sharded(s.manifest(), s.files),
                         ("SHARD", "ShardModel", 24, s.names[1]))
        s = G.base2()
        s.files[s.names[1]] = s.shard_bytes(s.shards[1], 2, 5)
        self.assertEqual(M.check_sharded(s.manifest(), s.files),
                         ("SHARD", "ShardCount", 60, s.names[1]))

    def test_tensors(self):
        s = G.base2()
        n = s.names[0]
        s.files[n] = s.shard_bytes([], 1, 2)
        s.reseal(n)
        self.assertEqual(M.check_sharded(s.manifest(), s.files),
                         ("SHARD", "ShardTensorCount", 64 + 4 + HDR.TENSOR_COUNT, n))
        for t in (T("a", "f32", (2,), F32_2, layout=None), T("a", "i32", (2,), F32_2),
                  T("a", "f32", (1, 2), F32_2), T("a", "u8", (8,), F32_2),
                  T(None, "f32", (2,), F32_2)):
            s = G.base2()
            s.files[n] = s.shard_bytes([t], 1, 2)
            s.reseal(n)
            got = M.check_sharded(s.manifest(), s.files)
            if t.dtype == 2 and t.shape == (2,) and t.name == "a":
                self.assertIsNone(got)
            else:
                self.assertEqual(got, ("SHARD", "ShardTensor", 68 + 32 + 64, n), t)
        s = G.base2()
        s.files[n] = s.shard_bytes([T("a", "f32", (2,), bytes(8))], 1, 2)
        self.assertEqual(M.check_sharded(s.manifest(), s.files),
                         ("SHARD", "ShardTensorDigest", 68, n))

    def test_quant_compared_by_name(self):
        s = G.quant_sharded()
        n = s.names[1]
        mx, scale = s.shards[1]
        for kw in ({"group_size": 16}, {"quant_axis": 1}, {"quant_scheme": 2, "outer_index": 1},
                   {"quant_scheme": 0, "quant_axis": None, "group_size": 0, "scale_index": None},
                   {"scale_index": 0}, {"scale_index": 7}):
            t = T("mx", "e2m1", (32,), mx.payload, **{**dict(
                quant_scheme=1, quant_axis=0, group_size=32, scale_index=1), **kw})
            s = G.quant_sharded()
            s.files[n] = s.shard_bytes([t, scale], 2, 3,
                                       block=K.encode_directory([t, scale], validate=False))
            self.assertEqual(M.check_sharded(s.manifest(), s.files),
                             ("SHARD", "ShardTensor", s.shard_pos(2)["desc"][0], n), kw)

    def test_scheme_0_fields_are_the_shards_own_rule(self):
        # a scheme-0 descriptor with a stray axis matches its entry (the manifest holds no
        # axis for scheme 0); the shard's own step 11 reports it
        s = G.base2()
        n = s.names[0]
        p = s.shard_pos(1)
        s.files[n] = put(s.files[n], p["desc"][0] + DESC.QUANT_AXIS, "H", 0)
        self.assertEqual(M.check_sharded(s.manifest(), s.files),
                         ("SHARD", "ShardPrefixDigest", 0, n))
        s.shard_list[0]["digest"] = sha(s.files[n][:p["base"]])
        self.assertEqual(M.check_sharded(s.manifest(), s.files),
                         ("TYPE", "quant_none_axis", p["desc"][0] + DESC.QUANT_AXIS, n))

    def test_prefix_and_late_steps(self):
        s = G.Sharded([two()], shard_metadata={"k": "a"})
        n = s.names[0]
        s.files[n] = M.assemble("shard", {"k": "b"}, K.encode_directory(s.shards[0]),
                                M.tensor_digests(s.shards[0]), (s.mid, 1, 1))
        self.assertEqual(M.check_sharded(s.manifest(), s.files), ("SHARD", "ShardPrefixDigest", 0, n))
        s = G.Sharded([two()])
        p = s.shard_pos(1)
        s.files[n] = flip(s.files[n], p["payload"][1] + 2)
        self.assertEqual(M.check_sharded(s.manifest(), s.files),
                         ("DIGEST", "PayloadDigest", p["payload"][1], n))
        self.assertIsNone(M.check_sharded(s.manifest(), s.files, verify=False))
        s = G.Sharded([two()])
        s.files[n] = flip(s.files[n], p["payload"][0] + 9)
        self.assertEqual(M.check_sharded(s.manifest(), s.files),
                         ("TYPE", "gap_nonzero", p["payload"][0] + 9, n))

    def test_shard_order(self):
        s = G.base2()
        n1, n2 = s.names
        s.files[n2] = b""
        s.files[n1] = flip(s.files[n1], len(s.files[n1]) - 1)
        self.assertEqual(M.check_sharded(s.manifest(), s.files)[3], n1)
        self.assertEqual(M.check_sharded(s.manifest(), s.files, verify=False),
                         ("SHARD", "ShardLength", 0, n2))

    def test_bad_names_are_never_looked_up(self):
        class Folder(dict):
            def get(self, name, default=None):
                raise AssertionError(f"opened {name!r}")

            def __getitem__(self, name):
                raise AssertionError(f"opened {name!r}")

        for bad in ("../x.kiln", "/etc/passwd", "a\\b", "a\x00b", "c:x", ".."):
            s = G.base2()
            s.shard_list[0]["name"] = bad
            self.assertEqual(M.check_sharded(s.manifest(), Folder()),
                             ("PATH", "ShardName", s.mpos()["shard"][0]["name"], None))

    def test_tensor_in_two_shards(self):
        s = G.Sharded([[T("a", "f32", (2,), F32_2)], [T("a", "f32", (2,), F32_2)]])
        self.assertEqual(M.check_sharded(s.manifest(), s.files),
                         ("TYPE", "ManifestNameRepeated", s.mpos()["entry"][1]["name"], None))

    def test_check_open(self):
        s = G.base2()
        folder = s.folder()
        self.assertIsNone(M.check_open(folder, G.MANIFEST))
        for name in s.names:
            self.assertIsNone(M.check_open(folder, name))
        folder = s.folder(drop=(s.names[0],))
        self.assertEqual(M.check_open(folder, G.MANIFEST), ("SHARD", "ShardMissing", 0, s.names[0]))
        man = s.manifest() + b"\x00"
        self.assertEqual(M.check_open({G.MANIFEST: man}, G.MANIFEST),
                         ("TRAILING", "trailing", len(man) - 1, G.MANIFEST))


class SignedModels(unittest.TestCase):
    def setUp(self):
        self.seed = G.SEED_A
        self.key = E.public_key(self.seed)
        self.ts = two()
        self.buf = M.sign_model(MD, self.ts, self.seed, 5, "dev")

    def test_layout(self):
        buf = self.buf
        self.assertEqual(M.kind_of(buf), "signed")
        self.assertEqual(buf[8:16], struct.pack("<Q", 0xFF2E2E81872D5BFD))
        v = K.decode(M.SIGNED_TYPE, buf, framed=True)
        self.assertEqual(v["signature"]["key"], self.key)
        self.assertEqual(buf[16:20], struct.pack("<I", 32))
        self.assertEqual(buf[52:56], struct.pack("<I", 64))
        self.assertEqual(v["signature"]["sig"], buf[56:120])
        self.assertEqual(v["release"], {"version": 5, "target": "dev"})
        self.assertEqual(v["digests"], M.tensor_digests(self.ts))
        self.assertEqual(v["tensors"], self.ts)
        end = M.prefix_length(buf)
        self.assertEqual(end, len(buf) - 64 - 3)     # tensor b's payload at 64
        self.assertTrue(E.verify(self.key, buf[56:120], buf[:56] + buf[120:end]))
        self.assertEqual(M.sign_model(MD, self.ts, self.seed, 5, "dev"), buf)   # deterministic

    def test_readers(self):
        t = M.Trust(self.key, "dev", 4)
        self.assertIsNone(M.check_model(self.buf))
        self.assertIsNone(M.check_file(self.buf))
        self.assertIsNone(M.check_model(self.buf, trust=t))
        self.assertIsNone(M.check_file(self.buf, trust=t))
        bad = flip(self.buf, 57)
        self.assertIsNone(M.check_model(bad))
        self.assertEqual(M.check_model(bad, trust=t), ("SIGNATURE", "SignatureInvalid", 56))
        self.assertEqual(M.check_model(self.buf, trust=M.Trust(self.key, newer_than=5)),
                         ("SIGNATURE", "ReleaseVersion", 120 + len(K.encode("dict<str,str>", MD))))
        plain = M.write_model(MD, self.ts)
        self.assertEqual(M.check_model(plain, trust=t), ("SIGNATURE", "NotSigned", 8))
        self.assertEqual(M.check_model(put(plain, 4, "B", 1), trust=t),
                         ("FRAME", "frame_profile", 4))

    def test_payloads_are_not_signed(self):
        t = M.Trust(self.key)
        end = M.prefix_length(self.buf)
        self.assertEqual(M.check_model(flip(self.buf, end), trust=t),
                         ("DIGEST", "PayloadDigest", end))
        self.assertEqual(M.check_model(flip(self.buf, end - 1), trust=t),
                         ("TYPE", "pad_nonzero", end - 1))

    def test_refused_keys(self):
        # two of libsodium's list of small-order encodings (order 8)
        for k in ("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
                  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"):
            self.assertIn(bytes.fromhex(k), E.SMALL_ORDER_KEYS)
        for k in E.SMALL_ORDER_KEYS:
            with self.assertRaises(ValueError):
                M.Trust(k)
        with self.assertRaises(ValueError):
            M.Trust(self.key[:31])
        M.Trust(self.key)
        self.assertFalse(E.small_order(self.key))

    def test_signed_manifest(self):
        man, files = M.write_sharded(MD, [two()[:1], two()[1:]], ["x1.kiln", "x2.kiln"])
        sm = M.sign_manifest(man, self.seed, 2, "dev")
        self.assertEqual(M.kind_of(sm), "signed_manifest")
        v = K.decode(M.SIGNED_MANIFEST_TYPE, sm, framed=True)
        self.assertEqual(v["signature"]["key"], self.key)
        self.assertTrue(E.verify(self.key, sm[56:120], sm[:56] + sm[120:]))
        pu, ps = M.parse_manifest(man), M.parse_manifest(sm)
        self.assertEqual(man[pu["tensors_pos"]:], sm[ps["tensors_pos"]:])    # the model id
        t = M.Trust(self.key, "dev", 1)
        self.assertIsNone(M.check_sharded(sm, files))
        self.assertIsNone(M.check_sharded(sm, files, trust=t))
        self.assertEqual(M.check_sharded(man, files, trust=t), ("SIGNATURE", "NotSigned", 8, None))
        self.assertIsNone(M.check_open({"m.kiln": sm, **files}, "m.kiln", trust=t))
        self.assertEqual(M.check_sharded(flip(sm, 100), files, trust=t),
                         ("SIGNATURE", "SignatureInvalid", 56, None))


class DeltaUpdates(unittest.TestCase):
    def test_make_and_apply(self):
        seed = G.SEED_A
        old = M.sign_model({}, G.delta_old(), seed, 1)
        new = M.sign_model({}, G.delta_new(), seed, 2)
        d = D.make_delta(old, new)
        self.assertEqual(d[8:16], struct.pack("<Q", K.schema_hash(D.DELTA_TYPE)))
        self.assertEqual(d[16:52], struct.pack("<I", 32) + D.base_id(old))
        self.assertEqual(D.delta_positions(d)["entry"], [56, 60, 64, 68])
        self.assertEqual(struct.unpack_from("<4I", d, 56), (3, 0, 2, 0))
        self.assertEqual(D.apply_delta(old, d), (new, None))
        self.assertEqual(len(d), 72 + M.prefix_length(new) + 3 + 2)
        rebuilt, fault, where = D.check_update(old, d, M.Trust(E.public_key(seed), newer_than=1))
        self.assertEqual((rebuilt, fault, where), (new, None, None))
        self.assertEqual(D.apply_delta(new, d), (None, ("TYPE", "DeltaBase", 20)))
        # a delta to a model with nothing in common sends everything
        d2 = D.make_delta(M.write_model({}, []), new)
        self.assertEqual(D.apply_delta(M.write_model({}, []), d2), (new, None))

    def test_early_end_is_at_the_deltas_length(self):
        old = M.sign_model({}, G.delta_old(), G.SEED_A, 1)
        new = M.sign_model({}, G.delta_new(), G.SEED_A, 2)
        d = D.make_delta(old, new)
        at = D.delta_positions(d)["new"]
        block = at + M.parse_model(new)["block_pos"]
        # Frozen fields where a truncated Frozen value is reported (the frame at 0, a list
        # at its length word); the block's parts at the delta's length.
        for n, rule, want in ((10, "frame_eof", 0), (40, "length_past_end", 16), (60, "count_past_end", 52),
                              (block + 2, "dir_magic_eof", block + 2),
                              (block + 30, "dir_header_eof", block + 30), (block + 100, "dir_past_end", block + 100),
                              (at + M.prefix_length(new), "block_past_end", at + M.prefix_length(new)),
                              (len(d) - 1, "block_past_end", len(d) - 1)):
            self.assertEqual(D.apply_delta(old, d[:n]), (None, ("EOF", rule, want)), n)
        bad = bytearray(d)
        bad[block + 5] |= 0x80
        self.assertEqual(D.apply_delta(old, bytes(bad)),
                         (None, ("FRAME", "dir_flag_unknown", block + 5)))


class GeneratorTests(unittest.TestCase):
    def run_main(self, *args):
        r = subprocess.run([sys.executable, str(HERE / "gen_model_cases.py"), *args],
                           capture_output=True, text=True)
        return r.returncode, r.stdout, r.stderr

    def test_committed_file_is_current(self):
        rc, out, err = self.run_main("--check")
        self.assertEqual(rc, 0, err)

    def test_cases_replay_and_cover_every_rule(self):
        cases = json.loads((SPEC / "model-cases.json").read_text(encoding="utf-8"))
        self.assertEqual(G.verify(cases), [])
        rules = {c["expect"]["rule"] for c in cases if c["expect"]}
        self.assertLessEqual(set(G.NEW_RULES), rules)
        for c in cases:
            self.assertLessEqual({"name", "note", "files", "open", "verify", "expect"}, set(c))
            self.assertLessEqual(set(c), {"name", "note", "files", "open", "verify", "expect",
                                          "trust", "delta"})
            self.assertIn(c["open"], c["files"])
            if c["expect"]:
                self.assertEqual(set(c["expect"]), {"code", "rule", "offset", "file"})
                if c["expect"]["rule"] != "ShardMissing":
                    self.assertIn(c["expect"]["file"], c["files"])
            if "trust" in c:
                self.assertEqual(set(c["trust"]), {"key", "target", "newer_than", "usable"})
                self.assertTrue(c["verify"])
            if "delta" in c:
                self.assertEqual(set(c["delta"]), {"base", "result"})
                self.assertIn(c["delta"]["base"], c["files"])
                self.assertEqual(c["delta"]["result"] is None,
                                 c["expect"] is not None and c["expect"]["file"] == c["open"])
        names = {c["name"] for c in cases}
        for want in ("digests-flipped-payload", "shard-missing", "shard-cut-by-one-byte",
                     "shards-swapped", "shard-of-another-model", "shard-name-slash",
                     "shard-name-backslash", "shard-name-dotdot", "shard-name-nul",
                     "shard-name-colon", "shard-name-absolute", "manifest-name-in-two-shards",
                     "order-digest-before-gap", "order-misplaced-before-mismatch",
                     "order-3d-before-step-4", "sharded-rich", "signed-rich",
                     "signed-manifest", "delta-applies", "delta-wrong-reuse-same-length"):
            self.assertIn(want, names)
        kinds = {(M.kind_of(bytes.fromhex(c["files"][c["open"]])), "trust" in c)
                 for c in cases if c["expect"] is None}
        for want in (("signed", True), ("signed", False), ("signed_manifest", True),
                     ("signed_manifest", False)):
            self.assertIn(want, kinds)

    def test_size(self):
        # a signed file or a delta case carries a few whole files (128 bytes a descriptor)
        self.assertLess((SPEC / "model-cases.json").stat().st_size, 650_000)

    def test_deterministic_and_check_detects_changes(self):
        with tempfile.TemporaryDirectory() as d:
            a = Path(d) / "a.json"
            self.assertEqual(self.run_main("--out", str(a))[0], 0)
            self.assertEqual(self.run_main("--out", str(a), "--check")[0], 0)
            self.assertEqual(a.read_bytes(), (SPEC / "model-cases.json").read_bytes())
            a.write_text(a.read_text().replace('"verify": true', '"verify": false', 1))
            self.assertEqual(self.run_main("--out", str(a), "--check")[0], 1)

    def test_refuses_wrong_expectation(self):
        cases = G.build_cases()
        cases[0]["expect"] = {"code": "TYPE", "rule": "x", "offset": 0, "file": G.SINGLE}
        self.assertTrue(any(cases[0]["name"] in p for p in G.verify(cases)))
        cases = [c for c in G.build_cases() if c["expect"] is None or
                 c["expect"]["rule"] != "ShardPrefixDigest"]
        self.assertIn("no case for rule ShardPrefixDigest", G.verify(cases))


if __name__ == "__main__":
    unittest.main()
