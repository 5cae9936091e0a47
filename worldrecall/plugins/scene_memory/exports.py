"""The ViPE depth exports as the released Scene-Memory-F1 code reads them (converted per-video layout).

The release (``memory_loop.scene_memory_for_rollout``, ``long_horizon_diagnostics.
_reconstruct_vipe_scene_clouds``) opens ``depth_metric.npy`` (memory mapped) and ``depth_valid_mask.npz``
(key ``mask``, else the first array) beside the poses, indexes them by pose row and skips rows past their
end; the official metric takes ``intrinsics.npy`` only when it is ``[N,3,3]``. A missing export is the
release's "not applicable" (:class:`MissingExport`); an unreadable one is reported with the file named.
Nothing is unpickled.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure, one_line

DEPTH_FILE = "depth_metric.npy"
MASK_FILE = "depth_valid_mask.npz"
INTRINSICS_FILE = "intrinsics.npy"
_ERRORS = (ValueError, OSError, EOFError, KeyError, IndexError, zipfile.BadZipFile)


class MissingExport(FileNotFoundError):
    """A depth export the metric needs is absent: the release reports the metric as not applicable."""


def is_native_layout(d: Path) -> bool:
    """A native ``vipe infer`` output folder (``pose/`` + ``intrinsics/``), which the release cannot read."""
    return (Path(d) / "pose").is_dir() and (Path(d) / "intrinsics").is_dir()


def read_depth_exports(d: Path) -> tuple[np.ndarray, np.ndarray]:
    """(depth [N,h,w] memory map, valid [M,h,w] bool) of a converted sidecar folder.

    :class:`MissingExport` when either file is absent; :class:`CaseFailure` naming the file when one
    cannot be read.
    """
    d = Path(d)
    dep, msk = d / DEPTH_FILE, d / MASK_FILE
    if not dep.is_file() or not msk.is_file():
        missing = ", ".join(p.name for p in (dep, msk) if not p.is_file())
        raise MissingExport(f"{d}: scene memory needs the ViPE depth exports ({missing} missing)")
    try:
        depth = np.load(dep, mmap_mode="r", allow_pickle=False)
    except _ERRORS as e:
        raise CaseFailure(f"{dep}: unreadable .npy ({type(e).__name__}: {one_line(e, 200)})") from None
    try:
        with np.load(msk, allow_pickle=False) as z:
            if not z.files:
                raise CaseFailure(f"{msk}: no arrays")
            valid = np.asarray(z["mask" if "mask" in z.files else z.files[0]], dtype=bool)
    except CaseFailure:
        raise
    except _ERRORS as e:
        raise CaseFailure(f"{msk}: unreadable .npz ({type(e).__name__}: {one_line(e, 200)})") from None
    if depth.ndim != 3 or valid.ndim != 3:
        raise CaseFailure(f"{dep if depth.ndim != 3 else msk}: shape "
                          f"{list(depth.shape if depth.ndim != 3 else valid.shape)}; expected [N,h,w]")
    if valid.shape[1:] != depth.shape[1:]:
        raise CaseFailure(f"{msk}: masks of size {list(valid.shape[1:])} but {dep.name} has {list(depth.shape[1:])}")
    return depth, valid


def read_release_intrinsics(d: Path) -> np.ndarray | None:
    """``intrinsics.npy`` as float64 when it is [N,3,3] (the official metric's only form), else None."""
    f = Path(d) / INTRINSICS_FILE
    if not f.is_file():
        return None
    try:
        a = np.load(f, allow_pickle=False)
    except _ERRORS:
        return None
    if a.ndim == 3 and a.shape[1:] == (3, 3) and np.issubdtype(a.dtype, np.number) and len(a):
        return np.asarray(a, dtype=np.float64)
    return None


def export_rows(d: Path) -> tuple[int, int]:
    """Row counts of ``depth_metric.npy`` and the mask array of ``depth_valid_mask.npz``, from their headers
    only (no data read). :class:`MissingExport` / :class:`CaseFailure` as :func:`read_depth_exports`."""
    d = Path(d)
    dep, msk = d / DEPTH_FILE, d / MASK_FILE
    if not dep.is_file() or not msk.is_file():
        missing = ", ".join(p.name for p in (dep, msk) if not p.is_file())
        raise MissingExport(f"{d}: scene memory needs the ViPE depth exports ({missing} missing)")
    try:
        n_dep = int(np.load(dep, mmap_mode="r", allow_pickle=False).shape[0])
    except _ERRORS as e:
        raise CaseFailure(f"{dep}: unreadable .npy ({type(e).__name__}: {one_line(e, 200)})") from None
    try:
        with zipfile.ZipFile(msk) as z:
            names = [n for n in z.namelist() if n.endswith(".npy")]
            if not names:
                raise CaseFailure(f"{msk}: no arrays")
            name = "mask.npy" if "mask.npy" in names else names[0]
            with z.open(name) as f:
                shape = _npy_shape(f)
    except CaseFailure:
        raise
    except _ERRORS as e:
        raise CaseFailure(f"{msk}: unreadable .npz ({type(e).__name__}: {one_line(e, 200)})") from None
    return n_dep, int(shape[0]) if shape else 0


def _npy_shape(f: Any) -> tuple[int, ...]:
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, _ = np.lib.format.read_array_header_1_0(f)
    else:
        shape, _, _ = np.lib.format.read_array_header_2_0(f)
    return tuple(int(x) for x in shape)
