"""Per-video camera sidecars (ViPE output): poses, intrinsics, metric depth, valid masks, instance masks.

Two on-disk layouts are read by one entry point, :func:`read_sidecar`, which dispatches on what it finds:

* the **converted per-video layout** (what the Scene-Memory exporter and worldrecall's synthetic suite
  write): ``poses_c2w.npy`` [N,4,4], ``intrinsics.npy`` [N,3,3], ``depth_metric.npy`` [N,h,w] (memory
  mapped), ``depth_valid_mask.npz`` (key ``mask``), ``frame_indices.npy``, ``timestamps.npy`` and the
  worldrecall extras ``instance_masks.npz`` (key ``ids``) and ``instances.json``;
* the **native ViPE output** (``vipe infer VIDEO -o OUT``): ``pose/<name>.npz`` (``data`` + ``inds``),
  ``intrinsics/<name>.npz`` (``data`` [N,4] fx,fy,cx,cy + ``inds``) and ``depth/<name>.zip`` holding one
  single-channel half-float EXR per frame (``{idx:05d}.exr``, channel ``Z``). Rows are the intersection
  of the three index sets, as the official exporter does. Depth (and the derived valid mask) is a
  :class:`RowStack` that decodes a frame when it is indexed, so long rollouts are never held in memory.

Every problem becomes a :class:`~worldrecall.core.data.CaseFailure` whose one-line message starts with
the offending file. Nothing is ever unpickled (``np.load(..., allow_pickle=False)`` everywhere).

ViPE's depth frames are EXR files, decoded by :mod:`worldrecall.formats.exr` (OpenCV wheels lack OpenEXR).

The package holds one job per module: :mod:`.record` (the record and the lazy row stack), :mod:`.reader`
(discovery and the entry point), :mod:`.converted` and :mod:`.native` (the two layouts), :mod:`.cameras`
(pose / intrinsics checks shared with benchmark ground truth), :mod:`.validation` (cross-file checks),
:mod:`.writer` (native output writer), :mod:`.points` (point-cloud files). Import from here.
"""

from __future__ import annotations

from worldrecall.formats.exr import decode_exr as decode_exr  # re-exported: callers import the EXR codec here
from worldrecall.formats.exr import encode_exr as encode_exr
from worldrecall.formats.vipe.cameras import (
    ORTHONORMAL_TOL,
    intrinsics_to_k,
    validate_intrinsics,
    validate_poses,
)
from worldrecall.formats.vipe.points import read_points_file
from worldrecall.formats.vipe.reader import find_sidecar_dir, read_sidecar
from worldrecall.formats.vipe.record import RowStack, Sidecar
from worldrecall.formats.vipe.writer import write_native_vipe

__all__ = [
    "ORTHONORMAL_TOL",
    "RowStack",
    "Sidecar",
    "find_sidecar_dir",
    "intrinsics_to_k",
    "read_points_file",
    "read_sidecar",
    "validate_intrinsics",
    "validate_poses",
    "write_native_vipe",
]
