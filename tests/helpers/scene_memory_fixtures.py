"""Tiny analytic memory-loop rollouts: exact depth of a box room seen along a known camera loop.

Used by the tests, the speed benchmark and the docs to build converted ViPE sidecars whose correct Scene
Memory F1 is known by construction (same room on both legs -> F1 = 1; an object that appears only on the
revisit leg -> hallucination). Cameras follow OpenCV axes (x right, y down, z forward).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOM = ((-2.0, 2.0), (-1.5, 1.0), (-2.0, 4.0))  # x, y (down), z bounds of the room, metres


def yaw(deg: float) -> np.ndarray:
    """Rotation about the camera's y (down) axis by ``deg`` degrees (positive = pan right)."""
    a = np.radians(deg)
    return np.array([[np.cos(a), 0.0, np.sin(a)], [0.0, 1.0, 0.0], [-np.sin(a), 0.0, np.cos(a)]])


def pose(R: np.ndarray | None = None, t: Sequence[float] = (0.0, 0.0, 0.0)) -> np.ndarray:
    """4x4 camera-to-world from a rotation and a translation."""
    P = np.eye(4)
    if R is not None:
        P[:3, :3] = R
    P[:3, 3] = t
    return P


def loop_poses(kind: str, frames_per_action: int = 4, *, step_m: float = 0.25, step_deg: float = 30.0,
               jitter: tuple[float, float] = (0.01, 1.0), seed: int = 0) -> np.ndarray:
    """Camera-to-world poses of a named loop: dolly (push ×4, pull ×4), yaw180 (pan right ×6, left ×6),
    double_yaw (yaw180 twice), static (no motion) or jitter (≈1 cm / 1° noise around the start)."""
    k = frames_per_action
    if kind == "dolly":
        z = [i * step_m / k for i in range(4 * k + 1)]
        z += z[-2::-1]
        return np.stack([pose(None, (0.0, 0.0, zz)) for zz in z])
    if kind in ("yaw180", "double_yaw"):
        a = [i * step_deg / k for i in range(6 * k + 1)]
        a += a[-2::-1]
        if kind == "double_yaw":
            a += a[1:]
        return np.stack([pose(yaw(aa)) for aa in a])
    n = 8 * k + 1
    if kind == "static":
        return np.stack([pose() for _ in range(n)])
    if kind == "jitter":
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(n):
            ax = rng.normal(size=3)
            ax /= np.linalg.norm(ax)
            ang = np.radians(jitter[1]) * rng.uniform(-1, 1)
            Kx = np.array([[0, -ax[2], ax[1]], [ax[2], 0, -ax[0]], [-ax[1], ax[0], 0]])
            R = np.eye(3) + np.sin(ang) * Kx + (1 - np.cos(ang)) * Kx @ Kx
            out.append(pose(R, rng.uniform(-1, 1, 3) * jitter[0]))
        return np.stack(out)
    raise ValueError(f"unknown loop kind {kind!r}")


def intrinsics(w: int = 16, h: int = 12, fov_deg: float = 70.0) -> np.ndarray:
    """Pinhole K for a ``w``×``h`` depth map with horizontal field of view ``fov_deg``."""
    f = (w / 2) / np.tan(np.radians(fov_deg) / 2)
    return np.array([[f, 0.0, w / 2], [0.0, f, h / 2], [0.0, 0.0, 1.0]])


def render_depth(c2w: np.ndarray, K: np.ndarray, w: int, h: int, *, room=ROOM,
                 boxes: Sequence[tuple[Sequence[float], Sequence[float]]] = ()) -> np.ndarray:
    """Exact z-depth [h,w] float32 of the inside of ``room`` plus solid axis-aligned ``boxes`` (lo, hi)."""
    v, u = np.mgrid[0:h, 0:w].astype(np.float64)
    d_cam = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u)], axis=-1)
    d = d_cam @ c2w[:3, :3].T  # world direction, scaled so the camera z component is 1
    o = c2w[:3, 3]
    s = np.full((h, w), np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        for a, (lo, hi) in enumerate(room):  # exit distance from inside the room
            sa = np.where(d[..., a] > 0, (hi - o[a]) / d[..., a], np.where(d[..., a] < 0, (lo - o[a]) / d[..., a], np.inf))
            s = np.minimum(s, sa)
        for lo, hi in boxes:  # slab test, entry distance
            t0 = (np.asarray(lo) - o) / d
            t1 = (np.asarray(hi) - o) / d
            tmin = np.nanmax(np.minimum(t0, t1), axis=-1)
            tmax = np.nanmin(np.maximum(t0, t1), axis=-1)
            hit = (tmax >= tmin) & (tmin > 0)
            s = np.where(hit & (tmin < s), tmin, s)
    return s.astype(np.float32)


def write_converted_sidecar(out: Path, poses_c2w: np.ndarray, K: np.ndarray, depth: np.ndarray, *,
                            fps: float = 16.0, frame_indices: np.ndarray | None = None,
                            mask: np.ndarray | None = None) -> Path:
    """Write the converted per-video sidecar layout (B.2) for the given rows."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    n = len(poses_c2w)
    fi = np.arange(n, dtype=np.int32) if frame_indices is None else np.asarray(frame_indices, dtype=np.int32)
    np.save(out / "poses_c2w.npy", np.asarray(poses_c2w, dtype=np.float32))
    np.save(out / "poses_w2c.npy", np.linalg.inv(poses_c2w).astype(np.float32))
    np.save(out / "intrinsics.npy", np.repeat(np.asarray(K, np.float32)[None], n, axis=0))
    np.save(out / "depth_metric.npy", np.asarray(depth, dtype=np.float32))
    valid = np.isfinite(depth) & (depth > 0) if mask is None else mask
    np.savez_compressed(out / "depth_valid_mask.npz", mask=np.asarray(valid, dtype=bool))
    np.save(out / "frame_indices.npy", fi)
    np.save(out / "timestamps.npy", fi.astype(np.float64) / fps)
    (out / "camera_model.json").write_text(json.dumps({"model": "pinhole"}))
    return out


def room_rollout(out: Path, kind: str, *, w: int = 16, h: int = 12, frames_per_action: int = 4,
                 fps: float = 16.0, revisit_boxes: Sequence = (), **loop_kw) -> tuple[Path, np.ndarray]:
    """A converted sidecar of the box room along loop ``kind``; ``revisit_boxes`` appear only after the
    farthest pose (a hallucinating model). Returns (sidecar dir, poses)."""
    P = loop_poses(kind, frames_per_action, **loop_kw)
    K = intrinsics(w, h)
    far = int(np.argmax(np.linalg.norm(P[:, :3, 3] - P[0, :3, 3], axis=1))) if kind == "dolly" else len(P) // 2
    depth = np.stack([render_depth(P[i], K, w, h, boxes=revisit_boxes if i >= far else ()) for i in range(len(P))])
    return write_converted_sidecar(out, P, K, depth, fps=fps), P


def room_cloud(n: int = 3000, seed: int = 0) -> np.ndarray:
    """Surface samples of a room corner (floor, back wall, side wall) and a ball: what depth maps give,
    with every translation direction constrained, so ICP has a unique answer."""
    rng = np.random.default_rng(seed)
    k = n // 4
    u = rng.random((n, 2))
    floor = np.c_[u[:k, 0] * 4, np.zeros(k), u[:k, 1] * 3]
    wall = np.c_[u[k:2 * k, 0] * 4, -u[k:2 * k, 1] * 2, np.full(k, 3.0)]
    side = np.c_[np.zeros(k), -u[2 * k:3 * k, 0] * 2, u[2 * k:3 * k, 1] * 3]
    ball = rng.normal(size=(n - 3 * k, 3))
    ball = ball / np.linalg.norm(ball, axis=1, keepdims=True) * 0.5 + np.array([2.5, -0.5, 1.5])
    return np.concatenate([floor, wall, side, ball])


def textured_frames(n: int, seed: int = 0, *, drift: int = 0) -> np.ndarray:
    """``n`` copies of one blurred random RGB image (96×128); ``drift`` adds ``drift·i`` grey levels to frame
    i (clipped), so revisit frames differ from their first frames."""
    import cv2

    rng = np.random.default_rng(seed)
    base = cv2.GaussianBlur(rng.integers(0, 255, (96, 128, 3), dtype=np.uint8), (5, 5), 1.0)
    return np.stack([np.clip(base.astype(int) + drift * i, 0, 255).astype(np.uint8) for i in range(n)])


def memory_loop_case(tmp_path: Path, kind: str, *, fps: float = 4.0, drift: int = 0):
    """A memory-loop rollout of the box room along ``kind`` (4 frames per action, video at ``fps``) loaded
    through the real loader and split by the real turnaround aligner: (case, alignment, sidecar dir)."""
    from worldrecall.core.components import LoadRequest
    from worldrecall.core.video import VideoPool
    from worldrecall.formats.mp4 import write_video
    from worldrecall.plugins.scene_memory.aligners import TurnaroundAligner
    from worldrecall.plugins.scene_memory.loader import SceneMemoryLoader

    root = tmp_path / "scene_memory" / "m"
    sidecar, P = room_rollout(root / "annotations_vipe" / "c_vipe_ann", kind, frames_per_action=4, fps=fps)
    write_video(root / "c.mp4", textured_frames(len(P), drift=drift), fps=fps)
    (case,) = SceneMemoryLoader().load(LoadRequest(tmp_path / "scene_memory", {"m": root}, {}, VideoPool()))
    return case, TurnaroundAligner().align(case, {}), sidecar
