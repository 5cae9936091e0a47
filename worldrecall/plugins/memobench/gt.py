"""Ground-truth sources of the MemoBench release: frame counts, camera poses and reference frames.

Synthetic clip ``{Scene}_{NNN}`` (n = NNN without padding) under ``Synthetic_processed/{Scene}/{clip}/``:
``RGB{n}/*.jpg`` (frames), ``{n}/intrinsics.npy`` (one row per GT frame), ``{n}/poses.npy`` (c2w, OpenCV
axes; fallbacks ``poses.npy`` in the clip folder, then the raw UE5 track ``camera_full{n}.csv``).
Real clip ``NNN`` under ``Real_Raw/NNN/``: ``NNN.mp4``, ``FRAMES/*.jpg``, ``raw/NNN_mapanything.npz``
(``cam_c2w``; fallback ``mapanything/outputs/real/NNN_mapanything.npz`` at the data root).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from worldrecall.core.components import MissingInput
from worldrecall.core.data import Case, CaseFailure
from worldrecall.core.digests import content_memo
from worldrecall.core.text import read_text
from worldrecall.core.video import FrameIndexError, list_frame_files
from worldrecall.formats.arrays import load_npy, load_npz
from worldrecall.formats.vipe import intrinsics_to_k, validate_intrinsics, validate_poses

# UE5 left-handed elementary rotations and the y/z flip to OpenCV camera axes (official fallback converter)
_FLIP_YZ = np.diag([1.0, -1.0, -1.0, 1.0])


def _rx_lh(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[1, 0, 0], [0, c, s], [0, -s, c]], dtype=np.float64)


def _ry_lh(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, -s], [0, 1, 0], [s, 0, c]], dtype=np.float64)


def _rz_lh(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, s, 0], [-s, c, 0], [0, 0, 1]], dtype=np.float64)


def ue5_track_to_c2w(path: Path) -> np.ndarray:
    """``camera_full{n}.csv`` -> [G, 4, 4] c2w: R = Rz·Ry·Rx (left-handed, radians), then ``@ diag(1,-1,-1,1)``."""
    import pandas as pd

    df = pd.read_csv(io.StringIO(read_text(path)))  # BOM tolerated; not UTF-8 -> CaseFailure naming the line
    poses = np.zeros((len(df), 4, 4), dtype=np.float64)
    for i, (_, row) in enumerate(df.iterrows()):
        c2w = np.eye(4, dtype=np.float64)
        c2w[:3, :3] = _rz_lh(float(row["rot_z"])) @ _ry_lh(float(row["rot_y"])) @ _rx_lh(float(row["rot_x"]))
        c2w[:3, 3] = [float(row["loc_x"]), float(row["loc_y"]), float(row["loc_z"])]
        poses[i] = c2w @ _FLIP_YZ
    return poses


def count_images(folder: Path) -> int:
    """Number of .png/.jpg/.jpeg files in a frame folder (0 when it does not exist)."""
    folder = Path(folder)
    return len(list_frame_files(folder)) if folder.is_dir() else 0


def mp4_frame_count(path: Path) -> int:
    """The container's frame count (OpenCV ``CAP_PROP_FRAME_COUNT``), as the official Step 1 reads it."""
    return content_memo(path, "memobench.mp4_frame_count", lambda: _mp4_frame_count(path), persist=True)


def _mp4_frame_count(path: Path) -> int:
    import cv2

    cap = cv2.VideoCapture(str(path))
    try:
        return int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
    finally:
        cap.release()


def npy_rows(path: Path) -> int:
    """Rows of a ``.npy`` array, read from its header only."""
    def rows() -> int:
        arr = load_npy(path, mmap=True)  # a forged/truncated header -> CaseFailure naming the file
        if arr.ndim == 0:
            raise CaseFailure(f"{path}: a scalar, not one row per GT frame")
        return int(arr.shape[0])

    return content_memo(path, "memobench.npy_rows", rows, persist=True)  # errors are not memoised: raised again


def load_gt_poses(case: Case) -> np.ndarray:
    """The case's GT c2w poses [G, 4, 4] float64; CaseFailure naming the file when missing or malformed."""
    rel, kind = case.annotations.get("gt_poses"), case.annotations.get("gt_poses_kind")
    if not rel or case.data_root is None:
        raise CaseFailure(f"{case.case_id}: no GT pose file (poses.npy / camera_full*.csv / *_mapanything.npz)")
    path = Path(case.data_root) / rel
    try:
        # declared sizes checked before allocation; dtype kept, so validate_poses refuses complex/text values
        if kind == "npy":
            poses = load_npy(path)
        elif kind == "ue5_csv":
            poses = ue5_track_to_c2w(path)
        elif kind == "mapanything_npz":
            poses = load_npz(path, ("cam_c2w",))["cam_c2w"]
        else:
            raise CaseFailure(f"{path}: unknown GT pose kind {kind!r}")
    except CaseFailure:
        raise
    except Exception as e:  # missing key, truncated file, bad CSV: one-line reason for this case only
        raise CaseFailure(f"{path}: cannot read GT poses ({type(e).__name__}: {str(e).splitlines()[0][:120]})") from None
    # the same checks as for ViPE sidecars: shape, finite, orthonormal right-handed rotation, [0,0,0,1] row
    # (before, a non-rotation GT scored camera controllability 1.0 and NaN poses a NaN with status ok)
    return validate_poses(poses, f"{path} (GT poses)")


def missing_gt_poses(case: Case) -> list[MissingInput]:
    """The GT pose file the pose metrics read, when the release lacks it for this clip (else ``[]``)."""
    if case.annotations.get("gt_poses"):
        return []
    root = Path(case.data_root) if case.data_root is not None else Path(".")
    clip = case.annotations.get("clip_id", case.case_id)
    if case.annotations.get("split") == "real":
        return [MissingInput("GT camera poses (MapAnything cam_c2w)", str(root / f"Real_Raw/{clip}/raw/{clip}_mapanything.npz"),
                             "copy raw/<id>_mapanything.npz from the MemoBench release (or "
                             "mapanything/outputs/real/<id>_mapanything.npz under the data root)")]
    n = case.annotations.get("clip_number", "<n>")
    scene = case.annotations.get("scene", "<Scene>")
    return [MissingInput("GT camera poses", str(root / f"Synthetic_processed/{scene}/{clip}/{n}/poses.npy"),
                         f"copy <n>/poses.npy (or camera_full{n}.csv) from the MemoBench release")]


def missing_ors_frame_count(case: Case) -> list[MissingInput]:
    """The file ORS counts the GT frames of (synthetic: intrinsics rows; real: FRAMES/ files), when absent."""
    if case.annotations.get("G_ors") is not None:
        return []
    root = Path(case.data_root) if case.data_root is not None else Path(".")
    clip = case.annotations.get("clip_id", case.case_id)
    fix = ("ORS takes the GT frame count from it (official compute_ors.py); or set "
           "benchmarks.memobench.metrics.ors.params.r_source=alignment")
    if case.annotations.get("split") == "real":
        return [MissingInput("GT frames folder", str(root / f"Real_Raw/{clip}/FRAMES"),
                             "extract the GT video's frames as FRAMES/frame_0001.jpg …; " + fix)]
    n = case.annotations.get("clip_number", "<n>")
    scene = case.annotations.get("scene", "<Scene>")
    return [MissingInput("GT intrinsics", str(root / f"Synthetic_processed/{scene}/{clip}/{n}/intrinsics.npy"),
                         "copy it from the MemoBench release; " + fix)]


def load_gt_intrinsics(path: Path) -> np.ndarray:
    """GT intrinsics (``[G,4]`` fx,fy,cx,cy rows, ``[3,3]`` or ``[G,3,3]``) as validated ``[G,3,3]`` K matrices.

    Non-finite values, non-positive focal lengths or a singular K -> :class:`CaseFailure` naming the file.
    """
    try:
        if Path(path).suffix == ".npz":
            arr = load_npz(path, ("intrinsic",))["intrinsic"]
        else:
            arr = load_npy(path)
    except CaseFailure:
        raise
    except Exception as e:  # truncated file, missing key, pickled object: one line for this case only
        raise CaseFailure(f"{path}: cannot read GT intrinsics ({type(e).__name__}: {str(e).splitlines()[0][:120]})") \
            from None
    if not np.issubdtype(np.asarray(arr).dtype, np.number):
        raise CaseFailure(f"{path} (GT intrinsics): dtype {arr.dtype}; expected numbers")
    return validate_intrinsics(intrinsics_to_k(arr, None, path), f"{path} (GT intrinsics)")


def read_gt_frames(case: Case, indices: Sequence[int], size: tuple[int, int] | None = None) -> list[np.ndarray]:
    """GT frames (uint8 RGB) at ``indices``, native or stretched to ``size`` = (width, height) on read.

    Only the asked frames are read (a frame folder file by file, a video in one streaming pass) and only
    the resized copy is kept when ``size`` is given (:meth:`~worldrecall.core.video.Video.frames_at`: a
    1080p GT compared at 832x480 is held at 832x480; pixels equal resizing the native frame). An index
    outside [0, G_decoded) fails the case.
    """
    ref = case.reference
    if ref is None:
        raise CaseFailure(f"{case.case_id}: no GT reference video/frames")
    try:
        return ref.frames_at([int(i) for i in indices], size)
    except FrameIndexError as e:
        what = "decodable frames" if e.decodable else "frames"
        raise CaseFailure(f"{ref.path}: GT frame {e.index} out of range ({e.count} {what})") from None
