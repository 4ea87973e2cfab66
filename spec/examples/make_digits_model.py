#!/usr/bin/env python3
"""Train the bundled example model and write spec/examples/digits-mlp.kiln.

A 64 -> 32 (ReLU) -> 10 MLP on scikit-learn's 8x8 handwritten digits
(the data ships inside the scikit-learn package; nothing is downloaded),
trained with plain NumPy minibatch SGD + momentum from a fixed seed.

The output is one standalone Kiln v2 tensor directory, written with the
reference codec's canonical encoder (spec/reference/kiln_ref.py):

    0 fc1.weight              f32  [32, 64]   row = output unit
    1 fc1.bias                f32  [32]
    2 fc2.weight              f32  [10, 32]
    3 fc2.bias                f32  [10]
    4 fc1.weight.mxfp4        e2m1 [32, 64]   quant scheme 1, axis 1, group 32,
                                              scale_index 5
    5 fc1.weight.mxfp4.scales e8m0 [32, 2]    scale = 2^(e - 127)
    6 samples.x               f32  [N, 64]    pixels / 16, the held-out images
    7 samples.y               u8   [N]        labels

Usage:
    python3 make_digits_model.py            # train, write, print accuracies
    python3 make_digits_model.py --check    # train, compare with the committed file
    python3 make_digits_model.py --out F    # write somewhere else

Accuracies are measured on the stored f32 weights (the bytes in the file),
evaluated in float64, so any other implementation that accumulates in f64
reproduces the predictions exactly.
"""

from __future__ import annotations

import argparse
import os
import sys

# One BLAS thread: the summation order (and so every bit of the weights)
# does not depend on how many cores the machine has.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import kiln_ref  # noqa: E402

SEED = 20240531
HIDDEN = 32
CLASSES = 10
TEST_FRACTION = 0.2
N_SAMPLES = 32          # held-out images stored in the file
EPOCHS = 60
BATCH = 32
LR = 0.05
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4
GROUP = 32              # MXFP4 block size along axis 1

# OCP MX E2M1 magnitudes for codes 0..7 (bit 3 is the sign).
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def load_split():
    digits = load_digits()
    x = digits.data.astype(np.float64) / 16.0          # 0..16 -> 0..1
    y = digits.target.astype(np.int64)
    rng = np.random.default_rng(SEED)
    order = rng.permutation(len(x))
    n_test = int(round(len(x) * TEST_FRACTION))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def train(x, y):
    rng = np.random.default_rng(SEED + 1)
    w1 = rng.normal(0.0, np.sqrt(2.0 / 64), size=(HIDDEN, 64))
    b1 = np.zeros(HIDDEN)
    w2 = rng.normal(0.0, np.sqrt(2.0 / HIDDEN), size=(CLASSES, HIDDEN))
    b2 = np.zeros(CLASSES)
    params = [w1, b1, w2, b2]
    velocity = [np.zeros_like(p) for p in params]
    onehot = np.eye(CLASSES)[y]
    for _ in range(EPOCHS):
        order = rng.permutation(len(x))
        for start in range(0, len(x), BATCH):
            idx = order[start:start + BATCH]
            xb, tb = x[idx], onehot[idx]
            h_pre = xb @ w1.T + b1
            h = np.maximum(h_pre, 0.0)
            logits = h @ w2.T + b2
            logits -= logits.max(axis=1, keepdims=True)
            p = np.exp(logits)
            p /= p.sum(axis=1, keepdims=True)
            d_logits = (p - tb) / len(idx)
            g_w2 = d_logits.T @ h + WEIGHT_DECAY * w2
            g_b2 = d_logits.sum(axis=0)
            d_h = (d_logits @ w2) * (h_pre > 0.0)
            g_w1 = d_h.T @ xb + WEIGHT_DECAY * w1
            g_b1 = d_h.sum(axis=0)
            for p_, v_, g_ in zip(params, velocity, (g_w1, g_b1, g_w2, g_b2)):
                v_ *= MOMENTUM
                v_ -= LR * g_
                p_ += v_
    return [p.astype(np.float32) for p in params]


def predict(x, w1, b1, w2, b2):
    """Forward pass in float64 from the given (stored) weights."""
    x = x.astype(np.float64)
    h = np.maximum(x @ w1.astype(np.float64).T + b1.astype(np.float64), 0.0)
    logits = h @ w2.astype(np.float64).T + b2.astype(np.float64)
    return logits.argmax(axis=1), logits


def quantize_mxfp4(w):
    """OCP MXFP4 along axis 1 in blocks of GROUP: (packed nibbles, e8m0 bytes, dequantized)."""
    rows, cols = w.shape
    assert cols % GROUP == 0
    w = w.astype(np.float64)
    blocks = w.reshape(rows, cols // GROUP, GROUP)
    amax = np.abs(blocks).max(axis=2)
    # Shared exponent: floor(log2(max|x|)) - 2, so max|x| / 2^e lies in [4, 8);
    # values above 6 (the largest E2M1 magnitude) saturate to 6, as OCP MX does.
    exp = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 2, 0)
    exp = np.clip(exp, -127, 127).astype(np.int64)
    scale_bytes = (exp + 127).astype(np.uint8)
    scaled = blocks / np.exp2(exp)[:, :, None]
    mag = np.minimum(np.abs(scaled), 6.0)
    # Round to the nearest E2M1 magnitude; an exact tie goes to the even code.
    dist = np.abs(mag[..., None] - E2M1_VALUES)
    best = dist.min(axis=-1, keepdims=True)
    ties = dist == best
    codes_all = np.arange(8)
    # Prefer an even code among tied candidates, else the smallest.
    pref = np.where(ties, np.where(codes_all % 2 == 0, codes_all, codes_all + 8), 99)
    code = pref.argmin(axis=-1).astype(np.uint8)
    sign = ((scaled < 0) & (code != 0)).astype(np.uint8)
    nibbles = (code | (sign << 3)).reshape(rows, cols)
    flat = nibbles.reshape(-1)
    packed = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)   # low nibble first
    deq = (np.where(sign == 1, -1.0, 1.0) * E2M1_VALUES[code]) * np.exp2(exp)[:, :, None]
    return packed.tobytes(), scale_bytes.reshape(rows, cols // GROUP), deq.reshape(rows, cols)


def dequantize_mxfp4(packed: bytes, scales: np.ndarray, rows: int, cols: int):
    """Decode from the stored bytes alone (what a reader does)."""
    b = np.frombuffer(packed, dtype=np.uint8)
    nib = np.empty(b.size * 2, dtype=np.uint8)
    nib[0::2] = b & 0x0F
    nib[1::2] = b >> 4
    val = E2M1_VALUES[nib & 7] * np.where(nib & 8, -1.0, 1.0)
    val = val.reshape(rows, cols // GROUP, GROUP)
    s = np.exp2(scales.astype(np.float64) - 127.0)
    return (val * s[:, :, None]).reshape(rows, cols)


def le_f32(a) -> bytes:
    return np.ascontiguousarray(a, dtype="<f4").tobytes()


def build():
    xtr, ytr, xte, yte = load_split()
    w1, b1, w2, b2 = train(xtr, ytr)
    packed, scales, deq_q = quantize_mxfp4(w1)
    deq = dequantize_mxfp4(packed, scales, *w1.shape)
    assert np.array_equal(deq, deq_q), "packing round trip"

    sx = xte[:N_SAMPLES].astype(np.float32)
    sy = yte[:N_SAMPLES].astype(np.uint8)
    tensors = [
        kiln_ref.Tensor("f32", w1.shape, le_f32(w1), name="fc1.weight"),
        kiln_ref.Tensor("f32", b1.shape, le_f32(b1), name="fc1.bias"),
        kiln_ref.Tensor("f32", w2.shape, le_f32(w2), name="fc2.weight"),
        kiln_ref.Tensor("f32", b2.shape, le_f32(b2), name="fc2.bias"),
        kiln_ref.Tensor("e2m1", w1.shape, packed, name="fc1.weight.mxfp4",
                        quant_scheme=1, quant_axis=1, group_size=GROUP, scale_index=5),
        kiln_ref.Tensor("e8m0", scales.shape, scales.tobytes(), name="fc1.weight.mxfp4.scales"),
        kiln_ref.Tensor("f32", sx.shape, le_f32(sx), name="samples.x"),
        kiln_ref.Tensor("u8", sy.shape, sy.tobytes(), name="samples.y"),
    ]
    block = kiln_ref.encode_directory(tensors)

    # Everything below is measured on the stored values.
    sx64 = sx.astype(np.float64)
    report = {}
    for label, x, y in (("samples", sx64, sy.astype(np.int64)), ("held-out", xte.astype(np.float32), yte)):
        pf, lf = predict(x, w1, b1, w2, b2)
        pq, lq = predict(x, deq, b1, w2, b2)
        margin = min(top2_margin(lf), top2_margin(lq))
        report[label] = dict(
            n=len(y), f32=int((pf == y).sum()), mxfp4=int((pq == y).sum()),
            agree=int((pf == pq).sum()), margin=margin,
        )
    err = np.abs(deq - w1.astype(np.float64))
    report["max_abs_err"] = float(err.max())
    report["max_abs_w"] = float(np.abs(w1).max())
    report["train_f32"] = int((predict(xtr, w1, b1, w2, b2)[0] == ytr).sum())
    report["n_train"] = len(ytr)
    report["sample_preds_f32"] = predict(sx64, w1, b1, w2, b2)[0].tolist()
    report["sample_preds_mxfp4"] = predict(sx64, deq, b1, w2, b2)[0].tolist()
    return block, report


def top2_margin(logits) -> float:
    s = np.sort(logits, axis=1)
    return float((s[:, -1] - s[:, -2]).min())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(HERE, "digits-mlp.kiln"))
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 unless the output file already has these exact bytes")
    args = ap.parse_args(argv)

    block, r = build()
    print(f"numpy {np.__version__}, scikit-learn {__import__('sklearn').__version__}")
    print(f"file: {len(block)} bytes")
    print(f"train accuracy (f32): {r['train_f32']}/{r['n_train']} = {r['train_f32'] / r['n_train']:.4f}")
    for label in ("samples", "held-out"):
        s = r[label]
        n = s["n"]
        print(f"{label:>8} (n={n}): f32 {s['f32']}/{n} = {s['f32'] / n:.4f}, "
              f"mxfp4 {s['mxfp4']}/{n} = {s['mxfp4'] / n:.4f}, "
              f"f32/mxfp4 agree {s['agree']}/{n}, smallest top-2 logit margin {s['margin']:.3g}")
    print(f"mxfp4 max |w - deq(w)| = {r['max_abs_err']:.5f} (max |w| = {r['max_abs_w']:.4f})")
    print(f"sample predictions f32:   {r['sample_preds_f32']}")
    print(f"sample predictions mxfp4: {r['sample_preds_mxfp4']}")

    if args.check:
        try:
            with open(args.out, "rb") as f:
                old = f.read()
        except OSError as e:
            print(f"check: cannot read {args.out}: {e}")
            return 1
        if old != block:
            print(f"check: {args.out} differs from a fresh build")
            return 1
        print(f"check: {args.out} is byte-identical to a fresh build")
        return 0
    with open(args.out, "wb") as f:
        f.write(block)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
