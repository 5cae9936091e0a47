"""Cross-file checks of a read :class:`Sidecar` (both layouts): poses and intrinsics, frame order,
principal point against the depth size, and depth values against the stored or derived valid mask."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from worldrecall.core.data import CaseFailure
from worldrecall.formats.vipe.cameras import validate_intrinsics, validate_poses
from worldrecall.formats.vipe.record import RowStack, Sidecar

__all__ = ["validate_sidecar"]

_DEPTH_CHUNK = 64  # rows validated at a time, so a memory-mapped 60 s depth stack never loads at once


def validate_sidecar(sc: Sidecar, *, validate_depth: bool) -> None:
    """Refuse a sidecar whose files disagree; may fill ``sc.valid`` (converted layout without a mask)."""
    pose_file, k_file = sc.files["poses"], sc.files["intrinsics"]
    n = len(sc)
    if n == 0:
        raise CaseFailure(f"{pose_file}: no pose rows")
    validate_poses(sc.poses_c2w, pose_file)
    K = sc.intrinsics  # None only when read with need_intrinsics=False from a folder without them
    if K is not None:
        validate_intrinsics(K, k_file)

    fi = sc.frame_indices
    if (fi < 0).any():
        raise CaseFailure(f"{sc.files['frame_indices']}: negative frame index")
    if n > 1 and not (np.diff(fi) > 0).all():
        raise CaseFailure(f"{sc.files['frame_indices']}: frame indices are not strictly increasing")
    if sc.timestamps is not None and not np.isfinite(sc.timestamps).all():
        raise CaseFailure(f"{sc.source / 'timestamps.npy'}: non-finite timestamps")

    if sc.depth is None:
        return
    depth_file, mask_file = sc.files["depth"], sc.files["mask"]
    h, w = int(sc.depth.shape[1]), int(sc.depth.shape[2])
    if h == 0 or w == 0:
        raise CaseFailure(f"{depth_file}: empty depth maps of size {w}x{h}")
    # K must be the one of the depth maps: a principal point far from the depth image centre means the
    # intrinsics belong to another resolution (e.g. full video size with reduced depth).
    if K is not None:
        _check_principal_point(K, w, h, k_file)
    if not validate_depth and sc.valid is not None:
        return
    if isinstance(sc.valid, RowStack):
        # native zip: valid = finite & > 0 per decoded row, so only "is anything valid at all" can fail
        if not any(bool(np.asarray(sc.valid[r]).any()) for r in range(n)):
            raise CaseFailure(f"{depth_file}: no valid depth pixel in any of the {n} rows")
        return
    if sc.valid is None:
        # converted layout without a stored mask: derive it (a bool array, 1/4 of the depth's size)
        derived = np.zeros(sc.depth.shape, dtype=bool)
        for a, b in chunks(n, _DEPTH_CHUNK):
            dep = np.asarray(sc.depth[a:b])
            derived[a:b] = np.isfinite(dep) & (dep > 0)
        sc.valid = derived
        if not derived.any():
            raise CaseFailure(f"{depth_file}: no valid depth pixel in any of the {n} rows")
        return
    n_valid = 0
    for a, b in chunks(n, _DEPTH_CHUNK):
        dep = np.asarray(sc.depth[a:b])
        ok = np.isfinite(dep) & (dep > 0)
        m = np.asarray(sc.valid[a:b])
        bad = m & ~ok
        if bad.any():
            r = a + int(np.flatnonzero(bad.reshape(b - a, -1).any(axis=1))[0])
            v = dep[r - a][bad[r - a]][0]
            raise CaseFailure(f"{depth_file}: depth {float(v)} at row {r} where {mask_file.name} says valid")
        n_valid += int(m.sum())
    if n_valid == 0:
        raise CaseFailure(f"{mask_file}: no valid depth pixel in any of the {n} rows")


def _check_principal_point(K: np.ndarray, w: int, h: int, k_file: Path) -> None:
    """Refuse intrinsics whose principal point does not fit ``w``×``h`` depth maps."""
    cx, cy = K[:, 0, 2], K[:, 1, 2]
    rx, ry = 2.0 * cx / w, 2.0 * cy / h
    rbad = ~((rx >= 0.5) & (rx <= 1.5) & (ry >= 0.5) & (ry <= 1.5))
    if rbad.any():
        i = int(np.flatnonzero(rbad)[0])
        raise CaseFailure(f"{k_file}: principal point ({cx[i]:.4g}, {cy[i]:.4g}) of row {i} does not fit "
                          f"the {w}x{h} depth maps (intrinsics for another resolution?)")


def chunks(n: int, size: int) -> Iterator[tuple[int, int]]:
    """``[a, b)`` row ranges of at most ``size`` rows covering ``n`` rows."""
    for a in range(0, n, size):
        yield a, min(n, a + size)
