"""Camera checks shared by both sidecar layouts and by benchmark ground truth: poses (orthonormal,
right-handed, bottom row [0,0,0,1]), pinhole intrinsics (and their [N,4] / [3,3] spellings), and the
small dtype / row-count checks every reader uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure

__all__ = ["ORTHONORMAL_TOL", "intrinsics_to_k", "real_numbers", "same_rows", "validate_intrinsics",
           "validate_poses"]

ORTHONORMAL_TOL = 1e-3  # |RᵀR − I| and |c2w·w2c − I| bounds of the official exporter's validation


def intrinsics_to_k(arr: np.ndarray, n: int | None, where: Path | str) -> np.ndarray:
    """Accept [N,3,3], [3,3], [N,>=4] (fx,fy,cx,cy,…) or [>=4]; return [N,3,3] float64 (N=n when broadcast).

    Text, boolean or complex values are refused (a cast would drop the imaginary part silently)."""
    real_numbers(arr, where, "intrinsics")
    a = np.asarray(arr, dtype=np.float64)
    if a.ndim == 3 and a.shape[1:] == (3, 3):
        return a.copy()
    if a.ndim == 2 and a.shape == (3, 3):
        return np.repeat(a[None], 1 if n is None else n, axis=0)
    if a.ndim == 2 and a.shape[1] >= 4:
        return _k_from_vec(a[:, :4])
    if a.ndim == 1 and a.shape[0] >= 4:
        return np.repeat(_k_from_vec(a[None, :4]), 1 if n is None else n, axis=0)
    raise CaseFailure(f"{where}: intrinsics of shape {list(a.shape)}; expected [N,3,3], [3,3], [N,>=4] or [>=4]")


def _k_from_vec(v: np.ndarray) -> np.ndarray:
    k = np.zeros((v.shape[0], 3, 3), dtype=np.float64)
    k[:, 0, 0], k[:, 1, 1], k[:, 0, 2], k[:, 1, 2] = v[:, 0], v[:, 1], v[:, 2], v[:, 3]
    k[:, 2, 2] = 1.0
    return k


def real_numbers(arr: np.ndarray, f: Path | str, what: str) -> None:
    """Refuse text, object, boolean or complex arrays where real numbers are expected."""
    dt = np.asarray(arr).dtype
    if not np.issubdtype(dt, np.number) or np.issubdtype(dt, np.complexfloating):
        raise CaseFailure(f"{f}: {what} of dtype {dt}; expected real numbers")


def same_rows(arr: np.ndarray, n: int, f: Path, ref: Path) -> None:
    """Refuse ``arr`` unless it has ``n`` rows, as the reference file ``ref`` does."""
    if int(arr.shape[0]) != n:
        raise CaseFailure(f"{f}: {int(arr.shape[0])} rows but {ref.name} has {n}")


def validate_poses(poses: Any, where: Path | str) -> np.ndarray:
    """Check camera-to-world poses: shape [N>0,4,4], finite, orthonormal right-handed rotations, bottom row
    [0,0,0,1]. Returns them as float64; any problem -> one-line :class:`CaseFailure` naming ``where``.

    Used for ViPE sidecars and for benchmark GT poses alike (the same rule on both sides of a comparison).
    """
    P = np.asarray(poses)
    if P.ndim != 3 or P.shape[1:] != (4, 4):
        raise CaseFailure(f"{where}: poses of shape {list(P.shape)}; expected [N,4,4]")
    if P.shape[0] == 0:
        raise CaseFailure(f"{where}: no pose rows")
    if not np.issubdtype(P.dtype, np.number) or np.issubdtype(P.dtype, np.complexfloating):
        raise CaseFailure(f"{where}: poses of dtype {P.dtype}; expected real numbers")
    P = P.astype(np.float64)
    fin = np.isfinite(P).all(axis=(1, 2))
    if not fin.all():
        raise CaseFailure(f"{where}: non-finite pose at row {int(np.flatnonzero(~fin)[0])}")
    R = P[:, :3, :3]
    err = np.abs(np.einsum("nji,njk->nik", R, R) - np.eye(3)).max(axis=(1, 2))
    bad = np.flatnonzero(err > ORTHONORMAL_TOL)
    if bad.size:
        raise CaseFailure(f"{where}: rotation of row {int(bad[0])} is not orthonormal "
                          f"(|RᵀR − I| = {float(err[bad[0]]):.3g} > {ORTHONORMAL_TOL:g})")
    det = np.linalg.det(R)
    bad = np.flatnonzero(det < 0)
    if bad.size:
        raise CaseFailure(f"{where}: rotation of row {int(bad[0])} is a reflection (det = {float(det[bad[0]]):.3g})")
    last = np.abs(P[:, 3, :] - np.array([0.0, 0.0, 0.0, 1.0])).max(axis=1)
    bad = np.flatnonzero(last > ORTHONORMAL_TOL)
    if bad.size:
        raise CaseFailure(f"{where}: row {int(bad[0])} has bottom row {P[bad[0], 3].tolist()}, not [0,0,0,1]")
    return P


def validate_intrinsics(K: Any, where: Path | str) -> np.ndarray:
    """Check pinhole intrinsics [N>0,3,3]: finite, fx > 0, fy > 0, last row [0,0,1] (so K is invertible).
    Returns them as float64; any problem -> one-line :class:`CaseFailure` naming ``where``.

    Accepts what :func:`intrinsics_to_k` returns; call that first for [N,4] / [3,3] layouts.
    """
    K = np.asarray(K)
    if K.ndim != 3 or K.shape[1:] != (3, 3) or K.shape[0] == 0:
        raise CaseFailure(f"{where}: intrinsics of shape {list(K.shape)}; expected [N>0,3,3]")
    if not np.issubdtype(K.dtype, np.number) or np.issubdtype(K.dtype, np.complexfloating):
        raise CaseFailure(f"{where}: intrinsics of dtype {K.dtype}; expected real numbers")
    K = K.astype(np.float64)
    fin = np.isfinite(K).all(axis=(1, 2))
    if not fin.all():
        i = int(np.flatnonzero(~fin)[0])
        raise CaseFailure(f"{where}: row {i} has non-finite intrinsics")
    fx, fy = K[:, 0, 0], K[:, 1, 1]
    kbad = ~((fx > 0) & (fy > 0))
    if kbad.any():
        i = int(np.flatnonzero(kbad)[0])
        raise CaseFailure(f"{where}: row {i} has invalid focal lengths/values (fx={fx[i]:.4g}, fy={fy[i]:.4g})")
    # a zero/odd last row makes K singular (no back-projection): the pinhole model needs [0, 0, 1]
    lbad = np.abs(K[:, 2, :] - np.array([0.0, 0.0, 1.0])).max(axis=1) > 1e-9
    if lbad.any():
        i = int(np.flatnonzero(lbad)[0])
        raise CaseFailure(f"{where}: row {i} has last row {K[i, 2].tolist()}, not [0,0,1] (singular/non-pinhole)")
    return K
