#!/usr/bin/env python3
"""The corpus's generated files (corpus.json entries with `generated`), made from real weights.

    python3 scripts/corpus/generate.py KIND SOURCE OUT

KIND:
  int8-qdq         onnxruntime.quantization.quantize_static (QDQ, int8 weights and activations),
                   calibrated on 4 seeded inputs; SOURCE: an ONNX model with one float input.
  int8-dynamic     onnxruntime.quantization.quantize_dynamic (uint8 weights).
  gguf-quantized   a GGUF written by gguf-py's GGUFWriter: SOURCE's largest float initializers or
                   Constant values (taken with onnx.numpy_helper) as F32, Q8_0 and Q4_0 (gguf.quants).
  external-2gib    (SOURCE unused) an ONNX model whose external data file holds more than 2 GiB:
                   a real f32 [64, 64] weight, a u8 [2 GiB + 4 KiB] table of zeros (a sparse hole:
                   reads as zeros, costs no disk), then a real f32 [64] bias past the 2 GiB mark.
                   Y = X @ W + B; Z = Gather(table, idx).
Each is deterministic for the pinned onnx/onnxruntime/gguf versions (scripts/setup.sh).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, List, Optional, Tuple

import numpy as np


def _float_input(model: Any) -> Tuple[str, List[int]]:
    inits = {i.name for i in model.graph.initializer}
    ins = [i for i in model.graph.input if i.name not in inits]
    if len(ins) != 1:
        raise SystemExit(f"expected one graph input, found {[i.name for i in ins]}")
    dims = [d.dim_value if d.dim_value > 0 else 0 for d in ins[0].type.tensor_type.shape.dim]
    return ins[0].name, dims


def _constants_to_initializers(model: Any) -> None:
    """The quantizer quantizes initializers only: Paddle2ONNX's Constant-node weights become
    initializers first (same names), so that the int8 model's weights are int8."""
    keep = []
    for n in model.graph.node:
        value = [a.t for a in n.attribute if a.name == "value"] if n.op_type == "Constant" else []
        if value:
            t = value[0]
            t.name = n.output[0]
            model.graph.initializer.append(t)
        else:
            keep.append(n)
    del model.graph.node[:]
    model.graph.node.extend(keep)


def int8(src: Path, out: Path, static: bool) -> None:
    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's advice, once per tensor
    import onnx
    from onnxruntime import quantization as q

    model = onnx.load(str(src))
    name, dims = _float_input(model)
    # Symbolic dims of the OCR classifier: batch 1, height 48, width 192 (what RapidOCR feeds it).
    fill = [1, 3, 48, 192]
    shape = [d if d else fill[i] for i, d in enumerate(dims)]
    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / "pre.onnx"
        # Fixed opset 13+ and shapes inferred: what quantize_static wants of its input.
        model = onnx.version_converter.convert_version(model, 13) if model.opset_import[0].version < 13 else model
        _constants_to_initializers(model)
        onnx.save(model, str(pre))
        part = out.with_name(out.name + ".part")
        if static:

            class Reader(q.CalibrationDataReader):
                def __init__(self) -> None:
                    rng = np.random.default_rng(0)
                    self.items = iter([{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

                def get_next(self) -> Optional[dict]:
                    return next(self.items, None)

            q.quantize_static(str(pre), str(part), Reader(), quant_format=q.QuantFormat.QDQ,
                              activation_type=q.QuantType.QInt8, weight_type=q.QuantType.QInt8, per_channel=False)
        else:
            q.quantize_dynamic(str(pre), str(part), weight_type=q.QuantType.QUInt8)
        os.replace(part, out)


def _real_weights(src: Path, count: int) -> List[Tuple[str, np.ndarray]]:
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(src))
    found = [(i.name, numpy_helper.to_array(i)) for i in model.graph.initializer]
    for n in model.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    found.append((n.output[0], numpy_helper.to_array(a.t)))
    found = [(k, v) for k, v in found if v.dtype == np.float32 and v.size % 32 == 0]
    found.sort(key=lambda kv: (-kv[1].size, kv[0]))
    return found[:count]


def gguf_quantized(src: Path, out: Path) -> None:
    import gguf
    from gguf import quants

    part = out.with_name(out.name + ".part")
    w = gguf.GGUFWriter(str(part), "kiln-corpus")
    w.add_name("ppocr-cls weights, quantized")
    w.add_description(f"real weights from {src.name}, as F32, Q8_0 and Q4_0")
    for i, (name, arr) in enumerate(_real_weights(src, 6)):
        rows = arr.reshape(-1, 32) if arr.shape[-1] % 32 else arr.reshape(-1, arr.shape[-1])
        kind = [gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.F32][i % 3]
        if kind == gguf.GGMLQuantizationType.F32:
            w.add_tensor(f"{name}.f32", np.ascontiguousarray(rows))
        else:
            data = quants.quantize(np.ascontiguousarray(rows), kind)
            w.add_tensor(f"{name}.{kind.name.lower()}", data, raw_shape=data.shape, raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(part, out)


def external_2gib(out: Path) -> None:
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper

    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    table_len = (1 << 31) + 4096
    data_name = out.name + ".data"
    w_off, table_off = 0, 64 * 64 * 4
    b_off = table_off + table_len
    # Aligned like onnx.external_data_helper's own writer (4 KiB) so that onnxruntime may map it.
    b_off = (b_off + 4095) // 4096 * 4096

    def ext(name: str, ty: int, dims: List[int], off: int, length: int) -> Any:
        t = onnx.TensorProto(name=name, data_type=ty, dims=dims)
        t.data_location = TP.EXTERNAL
        for k, v in (("location", data_name), ("offset", str(off)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        return t

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"]),
         helper.make_node("Gather", ["table", "idx"], ["z"], axis=0)],
        "external_2gib",
        [helper.make_tensor_value_info("x", TP.FLOAT, [1, 64]), helper.make_tensor_value_info("idx", TP.INT64, [4])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [1, 64]), helper.make_tensor_value_info("z", TP.UINT8, [4])],
        [ext("w", TP.FLOAT, [64, 64], w_off, w.nbytes), ext("table", TP.UINT8, [table_len], table_off, table_len),
         ext("b", TP.FLOAT, [64], b_off, b.nbytes)])
    model = helper.make_model(graph, producer_name="kiln corpus generate.py", opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    data = out.with_name(data_name)
    with open(data, "wb") as f:
        f.write(w.tobytes())
        f.truncate(b_off)  # the table: a hole of zeros
        f.seek(b_off)
        f.write(b.tobytes())
    onnx.save(model, str(out))
    onnx.checker.check_model(str(out))  # by path: the checker opens the external data beside it


def make(kind: str, src: Optional[Path], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    if kind in ("int8-qdq", "int8-dynamic"):
        assert src is not None
        int8(src, out, static=kind == "int8-qdq")
    elif kind == "gguf-quantized":
        assert src is not None
        gguf_quantized(src, out)
    elif kind == "external-2gib":
        external_2gib(out)
    else:
        raise SystemExit(f"generate: unknown kind {kind!r}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    make(sys.argv[1], Path(sys.argv[2]) if sys.argv[2] != "-" else None, Path(sys.argv[3]))
