"""Native ViPE output (``vipe infer VIDEO -o OUT``): ``pose/<name>.npz``, ``intrinsics/<name>.npz`` and
``depth/<name>.zip`` of half-float EXR frames; rows are the intersection of the three index sets, as the
official exporter does, and depth frames are decoded when a row is indexed."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure, one_line
from worldrecall.formats.arrays import check_zip_members, load_npz
from worldrecall.formats.exr import MAX_EXR_BYTES, MAX_EXR_PIXELS, ExrLimitError, decode_exr
from worldrecall.formats.vipe.cameras import intrinsics_to_k, real_numbers
from worldrecall.formats.vipe.record import RowStack, Sidecar

__all__ = ["is_native", "read_native"]


def is_native(path: Path) -> bool:
    """True when ``path`` holds ViPE's own ``pose/`` and ``intrinsics/`` folders."""
    return (path / "pose").is_dir() and (path / "intrinsics").is_dir()


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
    arrs = load_npz(f)
    if "data" not in arrs:
        raise CaseFailure(f"{f}: no 'data' array (found: {', '.join(arrs) or 'none'})")
    data = arrs["data"]
    real_numbers(data, f, "'data'")  # text or complex would be cast (or half-dropped) silently below
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


def read_native(d: Path, *, need_depth: bool, name: str | None, max_pixels: int = MAX_EXR_PIXELS) -> Sidecar:
    """Read (not yet cross-check) the native ViPE output ``d`` for video ``name``."""
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
