"""Small linear algebra that rounds the same on every CPU.

``a @ b`` and ``np.linalg`` go through BLAS/LAPACK, which picks its kernel per CPU (SSE, AVX2, AVX-512;
with or without fused multiply-add; its own blocking), so the same product can differ in the last bit
between two machines of one kind. In a renderer that last bit moves a pixel across a rounding edge, and
the suite (and every figure measured on it) stops being the same suite. These helpers spell the sums out
as separate elementwise multiplies and adds in a fixed order: each is one IEEE-rounded operation, whatever
vector width numpy runs it at, so the result is bit-identical everywhere. Meant for small inner
dimensions (3 or 4); not a general replacement for BLAS.
"""

from __future__ import annotations

import math

import numpy as np


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for ``a`` of shape (..., K) and ``b`` of shape (K, M) or (K,), summed k = 0, 1, ... in order.

    The dtype is numpy's promotion of the two, as for ``@``."""
    a = np.asarray(a)
    b = np.asarray(b)
    k = a.shape[-1]
    if b.shape[0] != k or b.ndim not in (1, 2):
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not chain")
    dtype = np.result_type(a, b)
    a = a.astype(dtype, copy=False)
    b = b.astype(dtype, copy=False)
    if b.ndim == 1:
        out = a[..., 0] * b[0]
        for i in range(1, k):
            out = out + a[..., i] * b[i]
        return out
    out = a[..., 0, None] * b[0]
    for i in range(1, k):
        out = out + a[..., i, None] * b[i]
    return out


def norm(v: np.ndarray | list[float] | tuple[float, ...]) -> float:
    """Euclidean length of a vector (any shape, flattened), squares summed in index order."""
    s = 0.0
    for x in np.asarray(v, np.float64).ravel().tolist():
        s += x * x
    return math.sqrt(s)


def rigid_inverse(c2w: np.ndarray) -> np.ndarray:
    """The inverse of rigid 4x4 transform(s) (..., 4, 4): [R^T | -R^T t] — no LU factorisation involved."""
    m = np.asarray(c2w, np.float64)
    rt = np.swapaxes(m[..., :3, :3], -1, -2)
    out = np.zeros(m.shape, np.float64)
    out[..., :3, :3] = rt
    out[..., :3, 3] = -matvec(rt, m[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out


def matvec(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``m @ v`` for matrices (..., N, K) and vectors (..., K), broadcasting over the leading axes."""
    m = np.asarray(m)
    v = np.asarray(v)
    dtype = np.result_type(m, v)
    m = m.astype(dtype, copy=False)
    v = v.astype(dtype, copy=False)
    out = m[..., 0] * v[..., 0, None]
    for i in range(1, m.shape[-1]):
        out = out + m[..., i] * v[..., i, None]
    return out
