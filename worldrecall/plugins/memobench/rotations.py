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
