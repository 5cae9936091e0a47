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
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure, one_line
from worldrecall.formats.arrays import check_zip_members, load_npy, load_npz, npz_names
from worldrecall.formats.exr import MAX_EXR_BYTES, MAX_EXR_PIXELS, ExrLimitError, decode_exr, encode_exr
from worldrecall.formats.safe_json import read_json

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

ORTHONORMAL_TOL = 1e-3  # |RᵀR − I| and |c2w·w2c − I| bounds of the official exporter's validation
_POSE_FILES = ("poses_c2w.npy", "poses.npy", "camera_poses.npy")
_POSE_NPZ_FILES = ("poses_c2w.npz", "poses.npz", "camera_poses.npz")
_POSE_NPZ_KEYS = ("poses_c2w", "poses", "data")
_DEPTH_CHUNK = 64  # rows validated at a time, so a memory-mapped 60 s depth stack never loads at once


# ------------------------------------------------------------------------------------------------------
# the record
# ------------------------------------------------------------------------------------------------------
@dataclass
class Sidecar:
    """One video's camera sidecar, one row per frame ViPE kept (rows in increasing frame order).

    ``depth`` may be a read-only memory map (converted layout) or a :class:`RowStack` decoding frames on
    access (native ViPE zip); ``valid`` is the stored mask, or a :class:`RowStack` of ``finite & depth >
    0`` when none is stored, and ``None`` only when depth was not requested. Index rows (``depth[i]``)
    rather than materialising whole stacks.
    """

    source: Path
    poses_c2w: np.ndarray              # [N,4,4] float64, OpenCV camera axes (x right, y down, z forward)
    intrinsics: np.ndarray             # [N,3,3] float64, pixel K matching the depth maps
    depth: np.ndarray | RowStack | None   # [N,h,w] float32 metric depth (m)
    valid: np.ndarray | RowStack | None   # [N,h,w] bool
    frame_indices: np.ndarray          # [N] int64 source-video frame of each row
    timestamps: np.ndarray | None      # [N] float64 seconds
    instance_ids: np.ndarray | None    # [N,H,W] uint8/uint16, 0 = background (worldrecall extra)
    instances: dict | None             # instances.json content (worldrecall extra)
    layout: str = "converted"          # converted | vipe_native
    notes: list[str] = field(default_factory=list)  # non-fatal findings (e.g. a corrupt EXR read as NaN)
    files: dict[str, Path] = field(default_factory=dict, repr=False)  # role -> file read (for messages)

    def __len__(self) -> int:
        return int(self.poses_c2w.shape[0])

    @property
    def depth_size(self) -> tuple[int, int] | None:
        """(width, height) of the depth maps, or None without depth."""
        if self.depth is None:
            return None
        return int(self.depth.shape[2]), int(self.depth.shape[1])

    def row_for_frame(self, i: int) -> int:
        """The row holding video frame ``i``; CaseFailure naming the sidecar when ViPE has no row for it."""
        fi = self.frame_indices
        k = int(np.searchsorted(fi, int(i)))
        if k < len(fi) and int(fi[k]) == int(i):
            return k
        raise CaseFailure(f"{self.source}: no sidecar row for video frame {int(i)} "
                          f"(rows cover {len(fi)} frames in [{int(fi[0]) if len(fi) else '-'}, "
                          f"{int(fi[-1]) if len(fi) else '-'}])")

    def nearest_row(self, i: int) -> int:
        """The row whose frame index is closest to video frame ``i`` (ties go to the earlier row)."""
        fi = self.frame_indices
        k = int(np.searchsorted(fi, int(i)))
        if k <= 0:
            return 0
        if k >= len(fi):
            return len(fi) - 1
        return k - 1 if (int(i) - int(fi[k - 1])) <= (int(fi[k]) - int(i)) else k


class RowStack:
    """A read-only ``[N, h, w]`` stack whose rows are produced on access (decoded EXR, derived mask).

    Long native ViPE outputs hold thousands of full-resolution depth frames; consumers read a few rows,
    so nothing is decoded up front. Supports ``stack[i]``, ``stack[a:b]``, ``len``, ``shape``, ``dtype``
    and ``np.asarray(stack)`` (decodes everything).
    """

    ndim = 3

    def __init__(self, n: int, hw: tuple[int, int], dtype: np.dtype | type, fetch: Callable[[int], np.ndarray]):
        self.shape = (int(n), int(hw[0]), int(hw[1]))
        self.dtype = np.dtype(dtype)
        self._fetch = fetch

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> np.ndarray:
        rest: tuple = ()
        if isinstance(key, tuple):
            key, rest = key[0], key[1:]
        if isinstance(key, slice):
            out = np.stack([self._row(i) for i in range(*key.indices(self.shape[0]))]) \
                if len(range(*key.indices(self.shape[0]))) else np.zeros((0, *self.shape[1:]), self.dtype)
        elif isinstance(key, (int, np.integer)):
            i = int(key) + (self.shape[0] if int(key) < 0 else 0)
            if not 0 <= i < self.shape[0]:
                raise IndexError(f"row {int(key)} out of range for {self.shape[0]} rows")
            out = self._row(i)
        else:
            out = np.stack([self._row(int(i)) for i in np.asarray(key).ravel()])
        return out[(slice(None), *rest)] if rest and out.ndim == 3 else (out[rest] if rest else out)

    def _row(self, i: int) -> np.ndarray:
        return np.asarray(self._fetch(i), dtype=self.dtype)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self[0: self.shape[0]]
        return a if dtype is None else a.astype(dtype)


# ------------------------------------------------------------------------------------------------------
# discovery
# ------------------------------------------------------------------------------------------------------
def find_sidecar_dir(video_path: Path) -> Path | None:
    """``<video_dir>/annotations_vipe/<stem>_vipe_ann/`` or else ``<video_dir>/<stem>_vipe_ann/``; None if neither."""
    video_path = Path(video_path)
    stem = video_path.name if video_path.is_dir() else video_path.stem
    for cand in (video_path.parent / "annotations_vipe" / f"{stem}_vipe_ann",
                 video_path.parent / f"{stem}_vipe_ann"):
        if cand.is_dir():
            return cand
    return None


def _is_native(path: Path) -> bool:
    return (path / "pose").is_dir() and (path / "intrinsics").is_dir()


# ------------------------------------------------------------------------------------------------------
# entry point
# ------------------------------------------------------------------------------------------------------
def read_sidecar(path: Path, *, need_depth: bool = True, name: str | None = None,
                 validate_depth: bool = True, need_instances: bool = True,
                 max_pixels: int = MAX_EXR_PIXELS) -> Sidecar:
    """Read and validate a sidecar folder (converted layout or native ViPE output).

    ``name`` picks one video of a native ViPE output folder holding several (default: the only one).
    ``need_depth=False`` skips depth/mask (pose-only consumers); ``validate_depth=False`` skips the
    per-pixel NaN/mask scan of a memory-mapped depth stack; ``need_instances=False`` skips the
    full-resolution instance masks (large for long videos). ``max_pixels`` caps a native EXR depth frame
    (the run's ``video.max_pixels``; a larger data window fails the case before it is decoded).
    """
    path = Path(path)
    if not path.exists():
        raise CaseFailure(f"{path}: sidecar folder does not exist")
    if not path.is_dir():
        raise CaseFailure(f"{path}: sidecar is not a folder")
    if _is_native(path):
        sc = _read_native(path, need_depth=need_depth, name=name, max_pixels=max_pixels)
    else:
        sc = _read_converted(path, need_depth=need_depth, need_instances=need_instances)
    _validate(sc, validate_depth=validate_depth)
    return sc


# ------------------------------------------------------------------------------------------------------
# small safe readers
# ------------------------------------------------------------------------------------------------------
def _load_npy(path: Path, *, mmap: bool = False) -> np.ndarray:
    # header checked first: object arrays, forged shapes and arrays past MAX_ARRAY_BYTES never allocate
    return load_npy(path, mmap=mmap)


def _load_npz_key(path: Path, keys: tuple[str, ...]) -> tuple[np.ndarray, str]:
    for k in keys:  # the first present key only: each member's header is checked before it is inflated
        got = load_npz(path, (k,))
        if k in got:
            return got[k], k
    found = ", ".join(npz_names(path)) or "none"
    raise CaseFailure(f"{path}: none of the keys {', '.join(keys)} (found: {found})")


def _npz_arrays(path: Path) -> dict[str, np.ndarray]:
    return load_npz(path)



def intrinsics_to_k(arr: np.ndarray, n: int | None, where: Path | str) -> np.ndarray:
    """Accept [N,3,3], [3,3], [N,>=4] (fx,fy,cx,cy,…) or [>=4]; return [N,3,3] float64 (N=n when broadcast).

    Text, boolean or complex values are refused (a cast would drop the imaginary part silently)."""
    _real_numbers(arr, where, "intrinsics")
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


# ------------------------------------------------------------------------------------------------------
# converted per-video layout
# ------------------------------------------------------------------------------------------------------
def _read_converted(d: Path, *, need_depth: bool, need_instances: bool = True) -> Sidecar:
    pose_file = next((d / f for f in _POSE_FILES if (d / f).is_file()), None)
    if pose_file is not None:
        poses = _load_npy(pose_file)
    else:
        pose_file = next((d / f for f in _POSE_NPZ_FILES if (d / f).is_file()), None)
        if pose_file is None:
            raise CaseFailure(f"{d / 'poses_c2w.npy'}: missing (no poses_c2w/poses/camera_poses .npy/.npz)")
        poses, _ = _load_npz_key(pose_file, _POSE_NPZ_KEYS)
    if poses.ndim != 3 or poses.shape[1:] != (4, 4):
        raise CaseFailure(f"{pose_file}: poses of shape {list(poses.shape)}; expected [N,4,4]")
    if not np.issubdtype(poses.dtype, np.floating):
        raise CaseFailure(f"{pose_file}: poses of dtype {poses.dtype}; expected floats")
    n = int(poses.shape[0])
    poses64 = np.asarray(poses, dtype=np.float64)

    k_file = d / "intrinsics.npy"
    if k_file.is_file():
        k_raw = _load_npy(k_file)
    elif (d / "intrinsics.npz").is_file():
        k_file = d / "intrinsics.npz"
        k_raw, _ = _load_npz_key(k_file, ("intrinsics", "K", "data"))
    else:
        raise CaseFailure(f"{k_file}: missing")
    if not np.issubdtype(k_raw.dtype, np.number):
        raise CaseFailure(f"{k_file}: intrinsics of dtype {k_raw.dtype}; expected numbers")
    K = intrinsics_to_k(k_raw, n, k_file)
    _same_rows(K, n, k_file, pose_file)

    w2c_file = d / "poses_w2c.npy"
    if w2c_file.is_file():
        w2c = _load_npy(w2c_file)
        _real_numbers(w2c, w2c_file, "poses")
        if w2c.shape != poses.shape:
            raise CaseFailure(f"{w2c_file}: shape {list(w2c.shape)} but {pose_file.name} has {list(poses.shape)}")
        with np.errstate(invalid="ignore", over="ignore"):  # non-finite rows are refused just below
            prod = poses64 @ np.asarray(w2c, dtype=np.float64)
        err = np.abs(prod - np.eye(4)).max(axis=(1, 2)) if n else np.zeros(0)
        bad = np.flatnonzero(~(err <= ORTHONORMAL_TOL))
        if bad.size:
            raise CaseFailure(f"{w2c_file}: row {int(bad[0])} is not the inverse of {pose_file.name} "
                              f"(|c2w·w2c − I| = {float(err[bad[0]]):.3g} > {ORTHONORMAL_TOL:g})")

    fi_file = d / "frame_indices.npy"
    if fi_file.is_file():
        fi = _load_npy(fi_file)
        if fi.ndim != 1:
            raise CaseFailure(f"{fi_file}: shape {list(fi.shape)}; expected [N]")
        if not np.issubdtype(fi.dtype, np.integer):
            raise CaseFailure(f"{fi_file}: dtype {fi.dtype}; expected integers")
        _same_rows(fi, n, fi_file, pose_file)
        frame_indices = fi.astype(np.int64)
    else:
        frame_indices = np.arange(n, dtype=np.int64)

    ts_file = d / "timestamps.npy"
    timestamps = None
    if ts_file.is_file():
        ts = _load_npy(ts_file)
        if ts.ndim != 1:
            raise CaseFailure(f"{ts_file}: shape {list(ts.shape)}; expected [N]")
        _same_rows(ts, n, ts_file, pose_file)
        _real_numbers(ts, ts_file, "timestamps")
        timestamps = ts.astype(np.float64)

    depth = valid = None
    if need_depth:
        dep_file = d / "depth_metric.npy"
        if not dep_file.is_file():
            raise CaseFailure(f"{dep_file}: missing (the scene-memory metrics need metric depth)")
        depth = _load_npy(dep_file, mmap=True)
        if depth.ndim != 3:
            raise CaseFailure(f"{dep_file}: shape {list(depth.shape)}; expected [N,h,w]")
        if not np.issubdtype(depth.dtype, np.floating):
            raise CaseFailure(f"{dep_file}: dtype {depth.dtype}; expected floats")
        _same_rows(depth, n, dep_file, pose_file)
        mask_file = d / "depth_valid_mask.npz"
        if mask_file.is_file():
            mask, _ = _load_npz_key(mask_file, ("mask",))
            if mask.shape != depth.shape:
                raise CaseFailure(f"{mask_file}: mask of shape {list(mask.shape)} but "
                                  f"{dep_file.name} has {list(depth.shape)}")
            if mask.dtype != bool and not np.issubdtype(mask.dtype, np.integer):  # text 'a' would read True
                raise CaseFailure(f"{mask_file}: mask of dtype {mask.dtype}; expected booleans")
            valid = mask.astype(bool, copy=False)
        else:
            valid = None  # derived row by row (finite & > 0) in _validate

    inst_ids = None
    inst_file = d / "instance_masks.npz"
    if need_instances and inst_file.is_file():
        inst_ids, _ = _load_npz_key(inst_file, ("ids",))
        if inst_ids.ndim != 3:
            raise CaseFailure(f"{inst_file}: ids of shape {list(inst_ids.shape)}; expected [N,H,W]")
        if inst_ids.dtype not in (np.uint8, np.uint16):
            raise CaseFailure(f"{inst_file}: ids of dtype {inst_ids.dtype}; expected uint8 or uint16")
        _same_rows(inst_ids, n, inst_file, pose_file)
    instances = None
    js_file = d / "instances.json"
    if need_instances and js_file.is_file():
        instances = read_json(js_file)  # depth and integer size bounded; problems name the file
        if not isinstance(instances, dict):
            raise CaseFailure(f"{js_file}: expected a JSON object")

    sc = Sidecar(source=d, poses_c2w=poses64, intrinsics=K, depth=depth, valid=valid,
                 frame_indices=frame_indices, timestamps=timestamps, instance_ids=inst_ids,
                 instances=instances, layout="converted",
                 files={"poses": pose_file, "intrinsics": k_file, "depth": d / "depth_metric.npy",
                        "mask": d / "depth_valid_mask.npz", "frame_indices": d / "frame_indices.npy"})
    return sc


def _real_numbers(arr: np.ndarray, f: Path | str, what: str) -> None:
    """Refuse text, object, boolean or complex arrays where real numbers are expected."""
    dt = np.asarray(arr).dtype
    if not np.issubdtype(dt, np.number) or np.issubdtype(dt, np.complexfloating):
        raise CaseFailure(f"{f}: {what} of dtype {dt}; expected real numbers")


def _same_rows(arr: np.ndarray, n: int, f: Path, ref: Path) -> None:
    if int(arr.shape[0]) != n:
        raise CaseFailure(f"{f}: {int(arr.shape[0])} rows but {ref.name} has {n}")


# ------------------------------------------------------------------------------------------------------
# native ViPE output
# ------------------------------------------------------------------------------------------------------
def _native_name(d: Path, name: str | None) -> str:
    if name is not None:
        return name
    names = sorted(p.stem for p in (d / "pose").glob("*.npz"))
    if not names:
        raise CaseFailure(f"{d / 'pose'}: no <name>.npz pose file")
    if len(names) > 1:
        raise CaseFailure(f"{d / 'pose'}: {len(names)} videos ({', '.join(names[:4])}…); name one explicitly")
    return names[0]


def _native_series(f: Path) -> tuple[np.ndarray, np.ndarray]:
    if not f.is_file():
        raise CaseFailure(f"{f}: missing")
    arrs = _npz_arrays(f)
    if "data" not in arrs:
        raise CaseFailure(f"{f}: no 'data' array (found: {', '.join(arrs) or 'none'})")
    data = arrs["data"]
    _real_numbers(data, f, "'data'")  # text or complex would be cast (or half-dropped) silently below
    inds = arrs.get("inds")
    if inds is None:
        inds = np.arange(data.shape[0] if data.ndim else 0)
    if inds.ndim != 1 or not np.issubdtype(inds.dtype, np.integer):
        raise CaseFailure(f"{f}: 'inds' of shape {list(inds.shape)} dtype {inds.dtype}; expected [N] integers")
    if data.ndim < 1 or data.shape[0] != inds.shape[0]:
        raise CaseFailure(f"{f}: 'data' has {data.shape[0] if data.ndim else 0} rows but 'inds' has {inds.shape[0]}")
    if len(np.unique(inds)) != len(inds):
        raise CaseFailure(f"{f}: duplicate frame indices in 'inds'")
    return data, inds.astype(np.int64)


def _read_native(d: Path, *, need_depth: bool, name: str | None, max_pixels: int = MAX_EXR_PIXELS) -> Sidecar:
    nm = _native_name(d, name)
    pose_file = d / "pose" / f"{nm}.npz"
    k_file = d / "intrinsics" / f"{nm}.npz"
    poses, p_inds = _native_series(pose_file)
    if poses.ndim != 3 or poses.shape[1:] != (4, 4):
        raise CaseFailure(f"{pose_file}: poses of shape {list(poses.shape)}; expected [N,4,4]")
    kdat, k_inds = _native_series(k_file)
    if kdat.ndim != 2 or kdat.shape[1] < 4:
        raise CaseFailure(f"{k_file}: intrinsics of shape {list(kdat.shape)}; expected [N,>=4] (fx,fy,cx,cy)")

    cam_file = d / "intrinsics" / f"{nm}_camera.txt"
    if cam_file.is_file():  # "idx: PINHOLE" per frame; K from (fx, fy, cx, cy) is only right for pinhole
        kinds = {ln.split(":", 1)[1].strip().upper() for ln in cam_file.read_text(errors="replace").splitlines()
                 if ":" in ln}
        other = sorted(kinds - {"PINHOLE"})
        if other:
            raise CaseFailure(f"{cam_file}: camera model {other[0]} is not supported (pinhole only)")

    keep = np.intersect1d(p_inds, k_inds)
    zip_file = d / "depth" / f"{nm}.zip"
    members: dict[int, str] = {}
    if zip_file.is_file():
        try:
            with zipfile.ZipFile(zip_file) as zf:
                # Deflate64/encrypted members and frames inflating past the EXR cap are refused here, at
                # open, not when a row is read
                check_zip_members(zf, zip_file, max_member_bytes=MAX_EXR_BYTES,
                                  limit_name="formats.exr.MAX_EXR_BYTES")
                for info in zf.infolist():
                    stem = Path(info.filename).name
                    if stem.endswith(".exr") and stem[:-4].isdigit():
                        members[int(stem[:-4])] = info.filename
        except (zipfile.BadZipFile, OSError) as e:
            raise CaseFailure(f"{zip_file}: unreadable zip ({one_line(e, 200)})") from None
        if not members:
            raise CaseFailure(f"{zip_file}: no {{idx:05d}}.exr depth frames")
        keep = np.intersect1d(keep, np.fromiter(members, dtype=np.int64))
    elif need_depth:
        other = sorted(p.name for p in (d / "depth").glob(f"{nm}*")) if (d / "depth").is_dir() else []
        if other:
            raise CaseFailure(f"{d / 'depth' / other[0]}: unsupported ViPE depth storage "
                              f"(expected depth/{nm}.zip of EXR frames)")
        raise CaseFailure(f"{zip_file}: missing (pose-only ViPE pipelines give no depth)")
    if keep.size == 0:
        raise CaseFailure(f"{pose_file}: pose, intrinsics and depth share no frame index")

    pose_rows = np.searchsorted(np.sort(p_inds), keep)
    p_order = np.argsort(p_inds, kind="stable")
    k_order = np.argsort(k_inds, kind="stable")
    poses64 = np.asarray(poses, dtype=np.float64)[p_order][pose_rows]
    K = intrinsics_to_k(np.asarray(kdat)[k_order][np.searchsorted(np.sort(k_inds), keep)], None, k_file)

    depth = valid = None
    notes: list[str] = []
    if need_depth:
        names = [members[int(i)] for i in keep]
        depth = _exr_stack(zip_file, names, notes, max_pixels)
        valid = _derived_valid(depth)
    sc = Sidecar(source=d, poses_c2w=poses64, intrinsics=K, depth=depth, valid=valid,
                 frame_indices=keep.astype(np.int64), timestamps=None, instance_ids=None, instances=None,
                 layout="vipe_native", notes=notes,
                 files={"poses": pose_file, "intrinsics": k_file, "depth": zip_file, "mask": zip_file,
                        "frame_indices": pose_file})
    return sc


def _exr_stack(zip_file: Path, names: list[str], notes: list[str], max_pixels: int = MAX_EXR_PIXELS) -> RowStack:
    """Depth frames of a ViPE zip, decoded on access; a corrupt frame reads as all-NaN (as ViPE's reader)."""
    def read(i: int) -> np.ndarray | None:
        try:
            with zipfile.ZipFile(zip_file) as zf:
                return decode_exr(zf.read(names[i]), channel="Z", max_pixels=max_pixels)
        except CaseFailure as e:
            if "unsupported" in str(e) or isinstance(e, ExrLimitError):
                raise CaseFailure(f"{zip_file}/{names[i]}: {e}") from None
            note = f"{zip_file.name}/{names[i]}: corrupt EXR read as all-NaN ({e})"
        except (zipfile.BadZipFile, OSError, KeyError) as e:
            note = f"{zip_file.name}/{names[i]}: unreadable ({one_line(e, 200)}), read as all-NaN"
        if note not in notes:
            notes.append(note)
        return None

    hw = None
    for i in range(len(names)):  # frame size from the first readable frame
        first = read(i)
        if first is not None:
            hw = first.shape
            break
    if hw is None:
        raise CaseFailure(f"{zip_file}: every depth frame is unreadable")

    def fetch(i: int) -> np.ndarray:
        z = read(i)
        if z is None:
            return np.full(hw, np.nan, np.float32)
        if z.shape != hw:
            raise CaseFailure(f"{zip_file}/{names[i]}: depth frame of size {z.shape[1]}x{z.shape[0]}, "
                              f"others are {hw[1]}x{hw[0]}")
        return z

    return RowStack(len(names), hw, np.float32, fetch)


def _derived_valid(depth: Any) -> RowStack:
    """Valid-pixel rows ``finite & depth > 0`` computed from the depth rows on access."""
    def fetch(i: int) -> np.ndarray:
        z = np.asarray(depth[i])
        return np.isfinite(z) & (z > 0)
    return RowStack(depth.shape[0], depth.shape[1:], bool, fetch)


# ------------------------------------------------------------------------------------------------------
# validation (shared by both layouts)
# ------------------------------------------------------------------------------------------------------
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


def _validate(sc: Sidecar, *, validate_depth: bool) -> None:
    pose_file, k_file = sc.files["poses"], sc.files["intrinsics"]
    n = len(sc)
    if n == 0:
        raise CaseFailure(f"{pose_file}: no pose rows")
    validate_poses(sc.poses_c2w, pose_file)
    validate_intrinsics(sc.intrinsics, k_file)
    K = sc.intrinsics
    cx, cy = K[:, 0, 2], K[:, 1, 2]

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
    rx, ry = 2.0 * cx / w, 2.0 * cy / h
    rbad = ~((rx >= 0.5) & (rx <= 1.5) & (ry >= 0.5) & (ry <= 1.5))
    if rbad.any():
        i = int(np.flatnonzero(rbad)[0])
        raise CaseFailure(f"{k_file}: principal point ({cx[i]:.4g}, {cy[i]:.4g}) of row {i} does not fit "
                          f"the {w}x{h} depth maps (intrinsics for another resolution?)")
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
        for a, b in _chunks(n, _DEPTH_CHUNK):
            dep = np.asarray(sc.depth[a:b])
            derived[a:b] = np.isfinite(dep) & (dep > 0)
        sc.valid = derived
        if not derived.any():
            raise CaseFailure(f"{depth_file}: no valid depth pixel in any of the {n} rows")
        return
    n_valid = 0
    for a, b in _chunks(n, _DEPTH_CHUNK):
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


def _chunks(n: int, size: int) -> Iterator[tuple[int, int]]:
    for a in range(0, n, size):
        yield a, min(n, a + size)


def write_native_vipe(out: Path, name: str, poses_c2w: np.ndarray, intrinsics_vec: np.ndarray,
                      depth: np.ndarray, *, inds: np.ndarray | None = None,
                      depth_inds: np.ndarray | None = None, compression: str = "zip") -> Path:
    """Write a native ViPE output folder (pose/intrinsics npz, depth zip of EXR): the layout ``read_sidecar`` reads."""
    out = Path(out)
    n = len(poses_c2w)
    inds = np.arange(n, dtype=np.int64) if inds is None else np.asarray(inds, dtype=np.int64)
    depth_inds = inds if depth_inds is None else np.asarray(depth_inds, dtype=np.int64)
    for sub in ("pose", "intrinsics", "depth"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    np.savez(out / "pose" / f"{name}.npz", data=np.asarray(poses_c2w, np.float32), inds=inds)
    np.savez(out / "intrinsics" / f"{name}.npz", data=np.asarray(intrinsics_vec, np.float32), inds=inds)
    with zipfile.ZipFile(out / "depth" / f"{name}.zip", "w") as zf:
        for k, idx in enumerate(depth_inds):
            zf.writestr(f"{int(idx):05d}.exr", encode_exr(depth[k], compression=compression))
    return out


def read_points_file(path: Path, keys: tuple[str, ...] = ("points", "point_cloud", "pobs", "prev",
                                                          "observation", "revisit")) -> np.ndarray:
    """A point cloud from .npy, .npz (first present key of ``keys``) or whitespace text XYZ → [N,3] float64."""
    path = Path(path)
    if not path.is_file():
        raise CaseFailure(f"{path}: missing point-cloud file")
    suf = path.suffix.lower()
    if suf == ".npy":
        pts = _load_npy(path)
    elif suf == ".npz":
        pts, _ = _load_npz_key(path, keys)
    else:
        try:
            pts = np.loadtxt(path, dtype=np.float64, ndmin=2)
        except (OSError, ValueError) as e:
            raise CaseFailure(f"{path}: unreadable text point cloud ({one_line(e, 200)})") from None
    pts = np.asarray(pts)
    if pts.ndim != 2 or pts.shape[1] < 3 or not np.issubdtype(pts.dtype, np.number):
        raise CaseFailure(f"{path}: point cloud of shape {list(pts.shape)} dtype {pts.dtype}; expected [N,>=3] numbers")
    return pts[:, :3].astype(np.float64)
