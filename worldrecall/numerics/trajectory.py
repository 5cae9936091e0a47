"""Camera trajectories compared the way trajectory benchmarks compare them: a similarity alignment
(Umeyama, with scale) of one trajectory's camera centres onto another's, then the relative pose error (RPE)
between the two step by step.

Poses are camera-to-world rigid transforms ``[n, 4, 4]`` (a ``[n, 3, 4]`` stack is accepted and completed).
Everything is float64 numpy; nothing here reads files or knows a benchmark. MIND's action accuracy
(``metrics/action.py`` and ``utils/vipe_utils.py`` of the release) is the first user; the conventions below are
the ones it uses:

* :func:`umeyama_sim3` finds ``(s, R, t)`` with ``Y ≈ s R X + t`` in the least-squares sense (Umeyama 1991):
  centred cross-covariance ``Σ = Ycᵀ Xc / N``, its SVD ``U D Vᵀ``, a reflection fix ``S = diag(1, 1, -1)``
  when ``det U · det V < 0``, ``R = U S Vᵀ``, ``s = tr(D S) / (var X + 1e-12)`` with ``var X`` the mean
  squared distance of ``X`` from its centroid, ``t = μY − s R μX``. The ``1e-12`` keeps a camera that never
  moves (``var X = 0``) finite: its scale comes out 0 and every aligned centre sits on ``μY``.
* :func:`apply_sim3` moves poses by it: centres ``s R c + t``, orientations ``R · R_pose`` (scale never
  touches a rotation).
* :func:`relative_pose_error`: for each ``i`` in ``0 … n − δ − 1`` the reference step
  ``ΔQ = Q_i⁻¹ Q_{i+δ}``, the estimated step ``ΔP = P_i⁻¹ P_{i+δ}`` and their disagreement ``E = ΔQ⁻¹ ΔP``;
  the translation error is ``‖t(E)‖`` and the rotation error the angle of ``R(E)`` in degrees
  (:func:`rotation_angle_deg`). The inverse of a pose is taken as ``[Rᵀ | −Rᵀ t]`` (a rigid inverse), and
  the two stacks are first cut to the shorter one's length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VAR_EPS = 1e-12  # added to var(X) in the Umeyama scale, as the MIND release does


@dataclass(frozen=True)
class Sim3:
    """A similarity transform ``x -> scale · rotation · x + translation``."""

    scale: float
    rotation: np.ndarray  # [3, 3]
    translation: np.ndarray  # [3]


def as_c2w(poses: np.ndarray) -> np.ndarray:
    """``[n, 4, 4]`` float64 copies of ``[n, 4, 4]`` or ``[n, 3, 4]`` poses (bottom row ``0 0 0 1``)."""
    p = np.asarray(poses, dtype=np.float64)
    if p.ndim != 3 or p.shape[1:] not in ((4, 4), (3, 4)):
        raise ValueError(f"poses: expected [n, 4, 4] or [n, 3, 4], got shape {p.shape}")
    out = np.tile(np.eye(4), (len(p), 1, 1))
    out[:, :3, :] = p[:, :3, :]
    return out


def umeyama_sim3(x: np.ndarray, y: np.ndarray) -> Sim3:
    """The least-squares similarity ``(s, R, t)`` with ``y ≈ s R x + t`` for point sets ``x``, ``y`` of shape [n, 3]."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 2 or x.shape[1] != 3 or len(x) == 0:
        raise ValueError(f"umeyama_sim3: expected two [n, 3] point sets of one shape, got {x.shape} and {y.shape}")
    n = len(x)
    mu_x, mu_y = x.mean(axis=0), y.mean(axis=0)
    xc, yc = x - mu_x, y - mu_y
    var_x = float((xc * xc).sum()) / n
    cov = (yc.T @ xc) / n
    u, d, vt = np.linalg.svd(cov)
    fix = np.eye(3)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        fix[2, 2] = -1.0
    rot = u @ fix @ vt
    scale = float(np.trace(np.diag(d) @ fix) / (var_x + VAR_EPS))
    return Sim3(scale, rot, mu_y - scale * (rot @ mu_x))


def apply_sim3(poses: np.ndarray, sim: Sim3) -> np.ndarray:
    """c2w poses moved by ``sim``: centres ``s R c + t``, orientations ``R · R_pose`` ([n, 4, 4])."""
    out = as_c2w(poses)
    out[:, :3, :3] = np.einsum("ij,njk->nik", sim.rotation, out[:, :3, :3])
    out[:, :3, 3] = sim.scale * (out[:, :3, 3] @ sim.rotation.T) + sim.translation[None, :]
    return out


def rigid_inverse(pose: np.ndarray) -> np.ndarray:
    """``[Rᵀ | −Rᵀ t]`` of one 4x4 pose (exact only for a rotation ``R``, as every pose here is)."""
    r, t = pose[:3, :3], pose[:3, 3]
    out = np.eye(4)
    out[:3, :3] = r.T
    out[:3, 3] = -r.T @ t
    return out


def rotation_angle_deg(rot: np.ndarray) -> float:
    """The angle of a 3x3 rotation in degrees: ``arccos(clip((trace − 1) / 2, −1, 1))``."""
    return float(np.degrees(np.arccos(float(np.clip((np.trace(rot) - 1.0) / 2.0, -1.0, 1.0)))))


def relative_pose_error(reference: np.ndarray, estimate: np.ndarray, delta: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(translation errors, rotation errors in degrees), one per step ``i -> i + delta`` of the shorter stack.

    A stack of ``n`` poses gives ``max(n - delta, 0)`` steps."""
    if int(delta) < 1:
        raise ValueError(f"relative_pose_error: delta must be >= 1, got {delta}")
    delta = int(delta)
    ref, est = as_c2w(reference), as_c2w(estimate)
    n = min(len(ref), len(est))
    m = max(n - delta, 0)
    trans = np.zeros(m, dtype=np.float64)
    rot = np.zeros(m, dtype=np.float64)
    for i in range(m):
        step_ref = rigid_inverse(ref[i]) @ ref[i + delta]
        step_est = rigid_inverse(est[i]) @ est[i + delta]
        err = rigid_inverse(step_ref) @ step_est
        trans[i] = float(np.linalg.norm(err[:3, 3]))
        rot[i] = rotation_angle_deg(err[:3, :3])
    return trans, rot
