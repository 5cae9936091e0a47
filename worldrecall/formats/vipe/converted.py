"""The converted per-video layout (Scene-Memory exporter, worldrecall's synthetic suite): ``poses_c2w.npy``,
``intrinsics.npy``, ``depth_metric.npy`` (memory mapped), ``depth_valid_mask.npz``, ``frame_indices.npy``,
``timestamps.npy`` and the worldrecall extras ``instance_masks.npz`` and ``instances.json``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from worldrecall.core.data import CaseFailure
from worldrecall.formats.arrays import load_npy
from worldrecall.formats.safe_json import read_json
from worldrecall.formats.vipe.cameras import ORTHONORMAL_TOL, intrinsics_to_k, real_numbers, same_rows
from worldrecall.formats.vipe.npz_keys import load_npz_key
from worldrecall.formats.vipe.record import Sidecar

__all__ = ["read_converted"]

_POSE_FILES = ("poses_c2w.npy", "poses.npy", "camera_poses.npy")
_POSE_NPZ_FILES = ("poses_c2w.npz", "poses.npz", "camera_poses.npz")
_POSE_NPZ_KEYS = ("poses_c2w", "poses", "data")


def read_converted(d: Path, *, need_depth: bool, need_instances: bool = True,
                   need_intrinsics: bool = True) -> Sidecar:
    """Read (not yet cross-check) a converted sidecar folder ``d``; see :func:`~worldrecall.formats.vipe.read_sidecar`."""
    pose_file, poses = _read_poses(d)
    n = int(poses.shape[0])
    poses64 = np.asarray(poses, dtype=np.float64)
    if not need_intrinsics and not any((d / f).is_file() for f in ("intrinsics.npy", "intrinsics.npz")):
        k_file, K = d / "intrinsics.npy", None  # a pose-only consumer may go on without them
    else:
        k_file, K = _read_intrinsics(d, n, pose_file)
    _check_w2c(d / "poses_w2c.npy", poses, poses64, pose_file)
    frame_indices = _read_frame_indices(d / "frame_indices.npy", n, pose_file)
    timestamps = _read_timestamps(d / "timestamps.npy", n, pose_file)
    depth, valid = _read_depth(d, n, pose_file) if need_depth else (None, None)
    inst_ids = instances = None
    if need_instances:
        inst_ids, instances = _read_instances(d, n, pose_file)
    sc = Sidecar(source=d, poses_c2w=poses64, intrinsics=K, depth=depth, valid=valid,
                 frame_indices=frame_indices, timestamps=timestamps, instance_ids=inst_ids,
                 instances=instances, layout="converted",
                 files={"poses": pose_file, "intrinsics": k_file, "depth": d / "depth_metric.npy",
                        "mask": d / "depth_valid_mask.npz", "frame_indices": d / "frame_indices.npy"})
    return sc


def _read_poses(d: Path) -> tuple[Path, np.ndarray]:
    """The camera-to-world poses [N,4,4] (floats) and the file they came from (.npy first, else .npz)."""
    pose_file = next((d / f for f in _POSE_FILES if (d / f).is_file()), None)
    if pose_file is not None:
        poses = load_npy(pose_file)
    else:
        pose_file = next((d / f for f in _POSE_NPZ_FILES if (d / f).is_file()), None)
        if pose_file is None:
            raise CaseFailure(f"{d / 'poses_c2w.npy'}: missing (no poses_c2w/poses/camera_poses .npy/.npz)")
        poses, _ = load_npz_key(pose_file, _POSE_NPZ_KEYS)
    if poses.ndim != 3 or poses.shape[1:] != (4, 4):
        raise CaseFailure(f"{pose_file}: poses of shape {list(poses.shape)}; expected [N,4,4]")
    if not np.issubdtype(poses.dtype, np.floating):
        raise CaseFailure(f"{pose_file}: poses of dtype {poses.dtype}; expected floats")
    return pose_file, poses


def _read_intrinsics(d: Path, n: int, pose_file: Path) -> tuple[Path, np.ndarray]:
    """Pixel intrinsics as [N,3,3] float64 (any layout :func:`intrinsics_to_k` accepts) and their file."""
    k_file = d / "intrinsics.npy"
    if k_file.is_file():
        k_raw = load_npy(k_file)
    elif (d / "intrinsics.npz").is_file():
        k_file = d / "intrinsics.npz"
        k_raw, _ = load_npz_key(k_file, ("intrinsics", "K", "data"))
    else:
        raise CaseFailure(f"{k_file}: missing")
    if not np.issubdtype(k_raw.dtype, np.number):
        raise CaseFailure(f"{k_file}: intrinsics of dtype {k_raw.dtype}; expected numbers")
    K = intrinsics_to_k(k_raw, n, k_file)
    same_rows(K, n, k_file, pose_file)
    return k_file, K


def _check_w2c(w2c_file: Path, poses: np.ndarray, poses64: np.ndarray, pose_file: Path) -> None:
    """An optional ``poses_w2c.npy`` must be the row-wise inverse of the camera-to-world poses."""
    if not w2c_file.is_file():
        return
    n = int(poses.shape[0])
    w2c = load_npy(w2c_file)
    real_numbers(w2c, w2c_file, "poses")
    if w2c.shape != poses.shape:
        raise CaseFailure(f"{w2c_file}: shape {list(w2c.shape)} but {pose_file.name} has {list(poses.shape)}")
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite rows are refused just below
        prod = poses64 @ np.asarray(w2c, dtype=np.float64)
    err = np.abs(prod - np.eye(4)).max(axis=(1, 2)) if n else np.zeros(0)
    bad = np.flatnonzero(~(err <= ORTHONORMAL_TOL))
    if bad.size:
        raise CaseFailure(f"{w2c_file}: row {int(bad[0])} is not the inverse of {pose_file.name} "
                          f"(|c2w·w2c − I| = {float(err[bad[0]]):.3g} > {ORTHONORMAL_TOL:g})")


def _read_frame_indices(fi_file: Path, n: int, pose_file: Path) -> np.ndarray:
    """The source-video frame of each row (int64); 0..N-1 when the file is absent."""
    if not fi_file.is_file():
        return np.arange(n, dtype=np.int64)
    fi = load_npy(fi_file)
    if fi.ndim != 1:
        raise CaseFailure(f"{fi_file}: shape {list(fi.shape)}; expected [N]")
    if not np.issubdtype(fi.dtype, np.integer):
        raise CaseFailure(f"{fi_file}: dtype {fi.dtype}; expected integers")
    same_rows(fi, n, fi_file, pose_file)
    return fi.astype(np.int64)


def _read_timestamps(ts_file: Path, n: int, pose_file: Path) -> np.ndarray | None:
    """Seconds per row (float64), or None when the file is absent."""
    if not ts_file.is_file():
        return None
    ts = load_npy(ts_file)
    if ts.ndim != 1:
        raise CaseFailure(f"{ts_file}: shape {list(ts.shape)}; expected [N]")
    same_rows(ts, n, ts_file, pose_file)
    real_numbers(ts, ts_file, "timestamps")
    return ts.astype(np.float64)


def _read_depth(d: Path, n: int, pose_file: Path) -> tuple[np.ndarray, np.ndarray | None]:
    """Metric depth [N,h,w] (memory mapped) and the stored valid mask (None: derived when validated)."""
    dep_file = d / "depth_metric.npy"
    if not dep_file.is_file():
        raise CaseFailure(f"{dep_file}: missing (the scene-memory metrics need metric depth)")
    depth = load_npy(dep_file, mmap=True)
    if depth.ndim != 3:
        raise CaseFailure(f"{dep_file}: shape {list(depth.shape)}; expected [N,h,w]")
    if not np.issubdtype(depth.dtype, np.floating):
        raise CaseFailure(f"{dep_file}: dtype {depth.dtype}; expected floats")
    same_rows(depth, n, dep_file, pose_file)
    mask_file = d / "depth_valid_mask.npz"
    if not mask_file.is_file():
        return depth, None  # derived row by row (finite & > 0) in validate_sidecar
    mask, _ = load_npz_key(mask_file, ("mask",))
    if mask.shape != depth.shape:
        raise CaseFailure(f"{mask_file}: mask of shape {list(mask.shape)} but "
                          f"{dep_file.name} has {list(depth.shape)}")
    if mask.dtype != bool and not np.issubdtype(mask.dtype, np.integer):  # text 'a' would read True
        raise CaseFailure(f"{mask_file}: mask of dtype {mask.dtype}; expected booleans")
    return depth, mask.astype(bool, copy=False)


def _read_instances(d: Path, n: int, pose_file: Path) -> tuple[np.ndarray | None, dict | None]:
    """The worldrecall extras: instance-id masks [N,H,W] and ``instances.json``, each None when absent."""
    inst_ids = None
    inst_file = d / "instance_masks.npz"
    if inst_file.is_file():
        inst_ids, _ = load_npz_key(inst_file, ("ids",))
        if inst_ids.ndim != 3:
            raise CaseFailure(f"{inst_file}: ids of shape {list(inst_ids.shape)}; expected [N,H,W]")
        if inst_ids.dtype not in (np.uint8, np.uint16):
            raise CaseFailure(f"{inst_file}: ids of dtype {inst_ids.dtype}; expected uint8 or uint16")
        same_rows(inst_ids, n, inst_file, pose_file)
    instances = None
    js_file = d / "instances.json"
    if js_file.is_file():
        instances = read_json(js_file)  # depth and integer size bounded; problems name the file
        if not isinstance(instances, dict):
            raise CaseFailure(f"{js_file}: expected a JSON object")
    return inst_ids, instances
