#!/usr/bin/env python3
"""Write spec/examples/digits-mlp.onnx: the digits MLP of digits-mlp.kiln as an ONNX model.

The four f32 weights are read from digits-mlp.kiln with the reference codec
(spec/reference/kiln_ref.py) and stored as inline initializers (``raw_data``,
the same bytes as the Kiln payloads), under the Kiln tensors' names:

    x [N, 64] -> Gemm(fc1.weight, fc1.bias, transB=1) -> Relu
              -> Gemm(fc2.weight, fc2.bias, transB=1) -> logits [N, 10]

i.e. ``logits = fc2.weight @ relu(fc1.weight @ x + fc1.bias) + fc2.bias`` per
sample, with a dynamic batch dimension ``N``. Opset 17, IR version 8,
producer "kiln-examples"; the bytes depend only on the weights and on the
onnx package's serialization (protobuf is deterministic for this message:
no map fields), so two runs give identical files.

Usage:
    python3 make_digits_onnx.py            # write digits-mlp.onnx, print the check on samples.x
    python3 make_digits_onnx.py --check    # exit 0 iff the committed file is byte-identical
    python3 make_digits_onnx.py --out F    # write somewhere else

The printed accuracy is computed with onnx's reference evaluator
(``onnx.reference``) on the 32 stored samples, against their labels.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import kiln_ref  # noqa: E402

KILN = os.path.join(HERE, "digits-mlp.kiln")
OPSET = 17
IR_VERSION = 8
PRODUCER = "kiln-examples"
PRODUCER_VERSION = "1"
WEIGHTS = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")


def read_kiln(path: str) -> dict:
    """The tensors of the directory block at ``path``, by name (reference decoder)."""
    with open(path, "rb") as f:
        buf = f.read()
    tensors, end = kiln_ref.validate_directory(buf)
    if end != len(buf):
        raise SystemExit(f"{path}: {len(buf) - end} bytes after the directory block")
    return {t.name: t for t in tensors}


def build(tensors: dict) -> bytes:
    """The serialized ModelProto."""
    f32 = kiln_ref.DTYPE_CODES["f32"]
    inits = []
    for name in WEIGHTS:
        t = tensors[name]
        assert t.dtype == f32, (name, t.dtype)
        # raw_data is the Kiln payload itself (little-endian f32 in both formats).
        inits.append(helper.make_tensor(name, TensorProto.FLOAT, list(t.shape), t.payload, raw=True))
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["hidden.pre"], name="fc1", transB=1),
        helper.make_node("Relu", ["hidden.pre"], ["hidden"], name="relu"),
        helper.make_node("Gemm", ["hidden", "fc2.weight", "fc2.bias"], ["logits"], name="fc2", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "digits-mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name=PRODUCER,
        producer_version=PRODUCER_VERSION,
        doc_string="64 -> 32 (ReLU) -> 10 MLP on scikit-learn's 8x8 digits; weights from digits-mlp.kiln",
    )
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def evaluate(data: bytes, tensors: dict) -> tuple:
    """(correct, n, predictions) of the model on samples.x with onnx's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    sx, sy = tensors["samples.x"], tensors["samples.y"]
    x = np.frombuffer(sx.payload, "<f4").reshape(sx.shape)
    y = np.frombuffer(sy.payload, np.uint8)
    (logits,) = ReferenceEvaluator(onnx.load_from_string(data)).run(None, {"x": x})
    pred = logits.argmax(axis=1)
    return int((pred == y).sum()), len(y), pred.tolist()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(HERE, "digits-mlp.onnx"))
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 unless the output file already has these exact bytes")
    args = ap.parse_args(argv)

    tensors = read_kiln(KILN)
    data = build(tensors)
    correct, n, pred = evaluate(data, tensors)
    print(f"onnx {onnx.__version__}, numpy {np.__version__}")
    print(f"file: {len(data)} bytes; opset {OPSET}, IR version {IR_VERSION}")
    print(f"samples (onnx.reference): {correct}/{n} correct; predictions {pred}")
    if args.check:
        try:
            with open(args.out, "rb") as f:
                old = f.read()
        except OSError as e:
            print(f"check: cannot read {args.out}: {e}")
            return 1
        if old != data:
            print(f"check: {args.out} differs from a fresh build")
            return 1
        print(f"check: {args.out} is byte-identical to a fresh build")
        return 0
    with open(args.out, "wb") as f:
        f.write(data)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
