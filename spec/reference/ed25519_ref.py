#!/usr/bin/env python3
"""Ed25519 for the model-file reference (spec/model-file.md, "Signed models").

Signing and verifying are the `cryptography` package's (OpenSSL's pure Ed25519, RFC 8032:
cofactorless, S must be below the group order); the key checks a reader makes when it is
given a key (an encoding of a point, not of small order) are computed here from RFC 8032's
definitions, in plain integers, so they depend on no library's notion of a "weak" key.

    public_key(seed)         -> 32-byte public key of a 32-byte private seed
    sign(seed, message)      -> 64-byte signature (deterministic)
    verify(key, sig, message) -> bool
    decode_point(key)        -> (x, y) or None (RFC 8032 section 5.1.3)
    small_order(key)         -> bool: the point's order divides 8
    usable_key(key)          -> bool: a point that is not of small order
    SMALL_ORDER_KEYS         the canonical encodings of the eight points of small order
    L                        the group order
"""

from __future__ import annotations

__all__ = ["public_key", "sign", "verify", "decode_point", "small_order", "usable_key",
           "SMALL_ORDER_KEYS", "L", "P"]

P = 2 ** 255 - 19
L = 2 ** 252 + 27742317777372353535851937790883648493
D = (-121665 * pow(121666, P - 2, P)) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)


def _crypto():
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
        from cryptography.hazmat.primitives import serialization
    except ImportError as e:     # scripts/setup.sh python installs it
        raise SystemExit("the model reference needs the `cryptography` package for Ed25519 "
                         "(pip install cryptography; scripts/setup.sh python)") from e
    return ed25519, serialization


def _private(seed: bytes):
    ed25519, _ser = _crypto()
    if len(seed) != 32:
        raise ValueError("an Ed25519 seed is 32 bytes")
    return ed25519.Ed25519PrivateKey.from_private_bytes(bytes(seed))


def public_key(seed: bytes) -> bytes:
    _ed, ser = _crypto()
    return _private(seed).public_key().public_bytes(ser.Encoding.Raw, ser.PublicFormat.Raw)


def sign(seed: bytes, message: bytes) -> bytes:
    return _private(seed).sign(bytes(message))


def verify(key: bytes, sig: bytes, message: bytes) -> bool:
    ed25519, _ser = _crypto()
    from cryptography.exceptions import InvalidSignature
    if len(key) != 32 or len(sig) != 64:
        return False
    try:
        ed25519.Ed25519PublicKey.from_public_bytes(bytes(key)).verify(bytes(sig), bytes(message))
    except (InvalidSignature, ValueError):
        return False
    return True


# ---------------------------------------------------------------- points (RFC 8032 5.1)

def decode_point(key: bytes):
    """(x, y) of a 32-byte encoding, or None when it encodes no point (y >= p, no square
    root, or x = 0 with the sign bit set)."""
    if len(key) != 32:
        return None
    n = int.from_bytes(key, "little")
    sign_bit = n >> 255
    y = n & ((1 << 255) - 1)
    if y >= P:
        return None
    u = (y * y - 1) % P
    v = (D * y * y + 1) % P
    x = (u * pow(v, 3, P) * pow(u * pow(v, 7, P), (P - 5) // 8, P)) % P
    if (v * x * x - u) % P != 0:
        if (v * x * x + u) % P != 0:
            return None
        x = (x * SQRT_M1) % P
    if x == 0 and sign_bit:
        return None
    if x & 1 != sign_bit:
        x = P - x
    return (x, y)


def _add(a, b):
    (x1, y1), (x2, y2) = a, b
    t = D * x1 * x2 * y1 * y2 % P
    x3 = (x1 * y2 + x2 * y1) * pow(1 + t, P - 2, P) % P
    y3 = (y1 * y2 + x1 * x2) * pow(1 - t, P - 2, P) % P
    return (x3, y3)


def _encode(pt) -> bytes:
    x, y = pt
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


def small_order(key: bytes) -> bool:
    """The point `key` encodes has an order dividing 8 ([8]A is the neutral element)."""
    pt = decode_point(key)
    if pt is None:
        return False
    for _ in range(3):
        pt = _add(pt, pt)
    return pt == (0, 1)


def usable_key(key: bytes) -> bool:
    """A key a reader accepts when it is given: 32 bytes encoding a point not of small order."""
    return decode_point(key) is not None and not small_order(key)


def _small_order_keys():
    """The eight points of order dividing 8: the neutral element (0, 1), (0, -1) of order 2,
    the two of order 4 (y = 0), and the four of order 8: those that double to y = 0, i.e.
    (a = -1) with x^2 = -y^2, so on the curve d*y^4 + 2*y^2 - 1 = 0."""
    out = {_encode((0, 1)), _encode((0, P - 1)), _encode((SQRT_M1, 0)), _encode((P - SQRT_M1, 0))}
    r = _sqrt(1 + D)
    inv_d = pow(D, P - 2, P)
    for y2 in ((-1 + r) * inv_d % P, (-1 - r) * inv_d % P):
        y = _sqrt(y2)
        x = None if y is None else _sqrt(-y2)
        if x is None:
            continue
        for yy in (y, P - y):
            for xx in (x, P - x):
                out.add(_encode((xx, yy)))
    keys = tuple(sorted(out))
    assert all(small_order(k) for k in keys)
    return keys


def _sqrt(a):
    a %= P
    x = pow(a, (P + 3) // 8, P)
    if (x * x - a) % P != 0:
        x = x * SQRT_M1 % P
    if (x * x - a) % P != 0:
        return None
    return x


SMALL_ORDER_KEYS = _small_order_keys()
assert len(SMALL_ORDER_KEYS) == 8, len(SMALL_ORDER_KEYS)
