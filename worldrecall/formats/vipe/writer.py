"""Writing a native ViPE output folder (tests, the synthetic suite, converters): the layout
:func:`~worldrecall.formats.vipe.read_sidecar` reads."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from worldrecall.formats.exr import encode_exr

__all__ = ["write_native_vipe"]


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
