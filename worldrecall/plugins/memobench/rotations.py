"""Rotation geometry for the camera metrics (degrees throughout)."""

from __future__ import annotations

import numpy as np


def geodesic_deg(r1: np.ndarray, r2: np.ndarray) -> float:
    """Angle of ``r1ᵀ r2``: ``degrees(arccos(clip((tr(r1ᵀ r2) - 1) / 2, -1, 1)))``."""
    trace = float(np.clip((np.trace(r1.T @ r2) - 1.0) / 2.0, -1.0, 1.0))
    return float(np.degrees(np.arccos(trace)))


def relative_rotations(rots: np.ndarray) -> list[np.ndarray]:
    """Consecutive relative rotations ``R_iᵀ R_{i+1}`` of a sequence of c2w rotations."""
    return [rots[i].T @ rots[i + 1] for i in range(len(rots) - 1)]


def forward_angles_deg(rots: np.ndarray) -> np.ndarray:
    """Angle between each frame's viewing direction and frame 0's (OpenCV: camera +z = third column of c2w)."""
    fwd = np.asarray(rots, dtype=np.float64)[:, :, 2]
    fwd = fwd / np.maximum(np.linalg.norm(fwd, axis=1, keepdims=True), 1e-12)
    return np.degrees(np.arccos(np.clip(fwd @ fwd[0], -1.0, 1.0)))
