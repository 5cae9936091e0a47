"""Point-cloud files (``.npy``, ``.npz`` or whitespace XYZ text) read as ``[N,3]`` float64."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from worldrecall.core.data import CaseFailure, one_line
from worldrecall.formats.arrays import load_npy
from worldrecall.formats.vipe.npz_keys import load_npz_key

__all__ = ["read_points_file"]


def read_points_file(path: Path, keys: tuple[str, ...] = ("points", "point_cloud", "pobs", "prev",
                                                          "observation", "revisit")) -> np.ndarray:
    """A point cloud from .npy, .npz (first present key of ``keys``) or whitespace text XYZ → [N,3] float64."""
    path = Path(path)
    if not path.is_file():
        raise CaseFailure(f"{path}: missing point-cloud file")
    suf = path.suffix.lower()
    if suf == ".npy":
        pts = load_npy(path)
    elif suf == ".npz":
        pts, _ = load_npz_key(path, keys)
    else:
        try:
            pts = np.loadtxt(path, dtype=np.float64, ndmin=2)
        except (OSError, ValueError) as e:
            raise CaseFailure(f"{path}: unreadable text point cloud ({one_line(e, 200)})") from None
    pts = np.asarray(pts)
    if pts.ndim != 2 or pts.shape[1] < 3 or not np.issubdtype(pts.dtype, np.number):
        raise CaseFailure(f"{path}: point cloud of shape {list(pts.shape)} dtype {pts.dtype}; expected [N,>=3] numbers")
    return pts[:, :3].astype(np.float64)
