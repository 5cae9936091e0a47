"""The per-video sidecar folder a real pipeline would provide (ViPE output converted to worldrecall's layout).

Files (one row per video frame): ``poses_c2w.npy`` [N,4,4] float32 (OpenCV axes), ``poses_w2c.npy``,
``intrinsics.npy`` [N,3,3] float32 for the *depth* resolution, ``depth_metric.npy`` [N,h,w] float32 metres,
``depth_valid_mask.npz`` (key ``mask``), ``frame_indices.npy`` [N] int32, ``timestamps.npy`` [N] float64,
``camera_model.json``, ``provenance.json``, ``quality_report.json``, plus worldrecall's extras
``instance_masks.npz`` (key ``ids``, [N,H,W] uint8 at video resolution, 0 = background) and
``instances.json`` (``{"instances": {"<id>": "<phrase>"}, "target": <id>}``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from worldrecall.numerics import exact
from worldrecall.plugins.synthetic.files import SuiteFiles

SIDECAR_FILES = (
    "poses_c2w.npy",
    "poses_w2c.npy",
    "intrinsics.npy",
    "depth_metric.npy",
    "depth_valid_mask.npz",
    "frame_indices.npy",
    "timestamps.npy",
    "camera_model.json",
    "provenance.json",
    "quality_report.json",
    "instance_masks.npz",
    "instances.json",
)


def write_sidecars(
    files: SuiteFiles,
    rel_dir: str,
    *,
    c2w: np.ndarray,
    K_depth: np.ndarray,
    depth: np.ndarray,
    ids: np.ndarray,
    instances: dict[int, str],
    target_id: int,
    fps: float,
    video_size: tuple[int, int],
    provenance: dict[str, Any],
) -> list[str]:
    """Write one video's sidecar folder ``rel_dir``; returns the relative paths written."""
    n = len(c2w)
    if not (len(depth) == len(ids) == n):
        raise ValueError(f"{rel_dir}: {n} poses, {len(depth)} depth maps, {len(ids)} masks")
    c2w32 = np.asarray(c2w, np.float32)
    w2c32 = exact.rigid_inverse(c2w).astype(np.float32)
    depth = np.asarray(depth, np.float32)
    valid = np.isfinite(depth) & (depth > 0)
    depth = np.where(valid, depth, 0.0).astype(np.float32)  # invalid pixels are stored as 0 (ViPE convention)
    K = np.repeat(np.asarray(K_depth, np.float32)[None], n, axis=0)
    idx = np.arange(n, dtype=np.int32)
    rot = c2w32[:, :3, :3].astype(np.float64)
    ortho = float(np.abs(np.einsum("nij,nkj->nik", rot, rot) - np.eye(3)).max())
    inv_err = float(
        np.abs(
            np.einsum("nij,njk->nik", c2w32.astype(np.float64), w2c32.astype(np.float64)) - np.eye(4)
        ).max()
    )
    h, w = depth.shape[1:]
    out = [
        files.npy(f"{rel_dir}/poses_c2w.npy", c2w32),
        files.npy(f"{rel_dir}/poses_w2c.npy", w2c32),
        files.npy(f"{rel_dir}/intrinsics.npy", K),
        files.npy(f"{rel_dir}/depth_metric.npy", depth),
        files.npz(f"{rel_dir}/depth_valid_mask.npz", mask=valid),
        files.npy(f"{rel_dir}/frame_indices.npy", idx),
        files.npy(f"{rel_dir}/timestamps.npy", idx.astype(np.float64) / float(fps)),
        files.json(
            f"{rel_dir}/camera_model.json",
            {
                "camera_type": "PINHOLE",
                "depth_width": int(w),
                "depth_height": int(h),
                "video_width": int(video_size[0]),
                "video_height": int(video_size[1]),
            },
        ),
        files.json(
            f"{rel_dir}/provenance.json",
            {
                "source": "worldrecall synthetic revisit suite",
                "layout": "converted ViPE sidecar",
                "depth": "exact z-depth from open3d raycasting (metres)",
                "poses": "exact c2w, OpenCV camera axes",
                **provenance,
            },
        ),
        files.json(
            f"{rel_dir}/quality_report.json",
            {
                "status": "passed",
                "rows": n,
                "fps": fps,
                "checks": {
                    "counts_equal": True,
                    "max_abs_c2w_w2c_minus_identity": inv_err,
                    "max_rotation_orthonormality_error": ortho,
                    "nonempty_depth": bool(valid.any()),
                },
            },
        ),
        files.npz(f"{rel_dir}/instance_masks.npz", ids=np.asarray(ids, np.uint8)),
        files.json(
            f"{rel_dir}/instances.json",
            {"instances": {str(k): v for k, v in sorted(instances.items())}, "target": int(target_id)},
        ),
    ]
    return out
