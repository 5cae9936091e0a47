"""The shared Scene-Memory-F1 scoring kernel (spec B.7): retention, hallucination, precision and F1 of a
revisit cloud against the observation cloud, after optional voxel down-sampling and alignment.

Pure and cheap: every knob is an argument, so threshold sweeps re-score stored clouds without touching
depth or poses. ``float32=True`` reproduces the released code's *mixed* precision
(``long_horizon_diagnostics.score_point_cloud_memory``): float32 clouds, nearest-neighbour distances
(scipy's float64 distance rounded to float32), τ comparison and scene diagonal, and the trimmed ICP in
float64 on the full clouds exactly as released (:func:`~.icp.trimmed_icp_release`). The default computes
in float64 throughout with the faster de-duplicated ICP.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from worldrecall.plugins.scene_memory.icp import (
    ICPError,
    ICPResult,
    kd_tree,
    nn_distances,
    spatial_order,
    trimmed_icp,
    trimmed_icp_release,
)

if TYPE_CHECKING:  # scipy is imported where a kernel runs: a rerun that only re-scores never loads it
    from scipy.spatial import cKDTree

# ``alignment`` values with a meaning of their own; any other value (the release's runtime may hold
# none at all) falls back to centroid alignment when ``centroid_align``, else to none.
ALIGNMENTS = ("trimmed_icp", "none")


class NotApplicable(ValueError):
    """The kernel cannot score this pair (empty cloud, ICP impossible); official: metric not applicable."""


@dataclass
class KernelResult:
    """Everything the kernel decided for one observation/revisit pair (per-point flags on request)."""

    retention: float
    hallucination: float
    precision: float
    f1: float
    n_obs: int
    n_rev: int
    diagonal: float
    tau: float
    alignment: str                       # trimmed_icp | centroid | none
    icp: ICPResult | None = None
    icp_accepted: bool | None = None     # None when ICP was not asked for
    # per-point facts for artifacts (observation/revisit after filtering; revisit after alignment)
    obs: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)), repr=False)
    rev: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)), repr=False)
    retained: np.ndarray = field(default_factory=lambda: np.zeros(0, bool), repr=False)      # per obs point
    hallucinated: np.ndarray = field(default_factory=lambda: np.zeros(0, bool), repr=False)  # per rev point

    def values(self) -> dict[str, Any]:
        """The scalar results as a flat dict (None where a value does not apply)."""
        icp = self.icp
        return {
            "f1": self.f1, "retention": self.retention, "precision": self.precision,
            "hallucination": self.hallucination, "n_obs": float(self.n_obs), "n_rev": float(self.n_rev),
            "diagonal": self.diagonal, "tau": self.tau,
            "icp_accepted": None if self.icp_accepted is None else float(self.icp_accepted),
            "icp_iterations": None if icp is None else float(icp.iterations),
            "icp_translation": None if icp is None else icp.translation,
            "icp_rotation_deg": None if icp is None else icp.rotation_deg,
        }


def finite_rows(p: np.ndarray) -> np.ndarray:
    """Drop rows with a non-finite coordinate (B.7 step 1)."""
    p = np.asarray(p)
    return p[np.isfinite(p).all(axis=1)] if len(p) else p.reshape(0, 3)


def voxel_downsample(p: np.ndarray, voxel: float) -> np.ndarray:
    """Group points by floor(p / voxel) and replace each group by its mean (B.7 step 2); voxel ≤ 0 = off.

    Groups come out in lexicographic voxel order (deterministic).
    """
    if voxel <= 0 or len(p) == 0:
        return p
    keys = np.floor(p / p.dtype.type(voxel)).astype(np.int64)
    _, inv, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    inv = inv.ravel()
    out = np.empty((len(counts), 3), dtype=np.float64)
    for c in range(3):
        out[:, c] = np.bincount(inv, weights=p[:, c].astype(np.float64), minlength=len(counts))
    return (out / counts[:, None]).astype(p.dtype)


def score_point_clouds(observation: np.ndarray, revisit: np.ndarray, *, voxel_size: float = 0.0,
                       alignment: str = "trimmed_icp", centroid_align: bool = False,
                       distance_threshold: float | None = None, distance_threshold_ratio: float = 0.02,
                       strict: bool = True, float32: bool = False, icp_max_iterations: int = 20,
                       icp_trim: float = 0.8, icp_tolerance: float = 1e-5,
                       icp_max_translation_ratio: float = 0.10, icp_max_rotation_deg: float = 10.0,
                       keep_points: bool = False) -> KernelResult:
    """Score revisit cloud V against observation cloud O (both [n,3]); V is moved onto O.

    τ = ``distance_threshold`` when given, else max(ratio·D, 1e-6) with D the bbox diagonal of O ∪ V after
    alignment; τ ≥ 1e-8. Retention R = mean[d_O < τ], hallucination H = mean[d_V ≥ τ] (``strict``;
    otherwise ≤ / >), P = 1 − H, F1 = 2PR/(P+R) (0 when P+R ≤ 1e-8). Raises :class:`NotApplicable` for an
    empty cloud or an ICP that cannot run.
    """
    dt = np.float32 if float32 else np.float64
    O = finite_rows(np.asarray(observation, dtype=dt).reshape(-1, 3))
    V = finite_rows(np.asarray(revisit, dtype=dt).reshape(-1, 3))
    O = voxel_downsample(O, voxel_size)
    V = voxel_downsample(V, voxel_size)
    if len(O) == 0 or len(V) == 0:
        raise NotApplicable(f"empty point cloud (observation {len(O)} points, revisit {len(V)} points)")
    n_o, n_v = len(O), len(V)
    icp_kw = {"max_iterations": icp_max_iterations, "trim": icp_trim, "tolerance": icp_tolerance,
              "max_translation_ratio": icp_max_translation_ratio, "max_rotation_deg": icp_max_rotation_deg}
    icp_res, accepted, how, V = _release_alignment(O, V, dt, alignment, centroid_align, float32, icp_kw)
    # Repeated points (a static camera renders the same pixels again) only add kd-tree work: score the
    # distinct points, each counted with its multiplicity — the same numbers as the full clouds.
    Ou, inv_o, w_o, tree_o = observation_side(O)
    Vu, inv_v, w_v = unique_rows(V)
    # Queries in kd-tree leaf order hit the cache far better (about 2x faster).
    po = tree_o.indices
    pv = spatial_order(Vu)
    Vu, w_v = Vu[pv], w_v[pv]
    where = np.empty_like(pv)
    where[pv] = np.arange(len(pv))
    inv_v = where[inv_v]  # input row -> its row among the permuted distinct revisit points

    if alignment == "trimmed_icp" and not float32:
        try:
            icp_res = trimmed_icp(Vu, Ou, tree=tree_o, weights=None if len(Vu) == n_v else w_v,
                                  target_count=n_o, dtype=np.float64, **icp_kw)
        except ICPError as e:
            raise NotApplicable(str(e)) from None
        accepted = icp_res.accepted
        if accepted:
            Vu = Vu @ icp_res.R.T + icp_res.t
            how = "trimmed_icp"

    diag, tau = _threshold(Ou, Vu, dt, distance_threshold, distance_threshold_ratio)
    tau_c = dt(tau)

    # only "closer than τ or not" matters: distances beyond a hair above τ come back as inf (exact for
    # both threshold semantics, and much faster where clouds disagree)
    ub = tau * (1.0 + 1e-6) + 1e-12
    d_o = np.empty(len(Ou), dtype=dt)
    d_o[po] = nn_distances(kd_tree(Vu, leafsize=32), Vu, Ou[po], dt, ub)[0]  # observation -> revisit
    d_v, _ = nn_distances(tree_o, Ou, Vu, dt, ub)                              # revisit -> observation
    retained = d_o < tau_c if strict else d_o <= tau_c
    halluc = d_v >= tau_c if strict else d_v > tau_c
    R = _clamp01(float(w_o[retained].sum()) / n_o)
    H = _clamp01(float(w_v[halluc].sum()) / n_v)
    P = _clamp01(1.0 - H)
    F1 = _clamp01(2.0 * P * R / (P + R)) if P + R > 1e-8 else 0.0
    res = KernelResult(R, H, P, F1, n_o, n_v, diag, tau, how, icp_res, accepted)
    if keep_points:
        res.obs, res.retained = Ou[inv_o], retained[inv_o]
        res.rev, res.hallucinated = Vu[inv_v], halluc[inv_v]
    return res


# The observation side (distinct points, their kd-tree) of the last clouds scored: a clip's models share its
# observation leg, so consecutive cases score one observation cloud against different revisits.
_LAST_OBSERVATION: dict[str, Any] = {}


def observation_side(O: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, cKDTree]:
    """(distinct rows, row of each input point among them, counts, their kd-tree) of the observation cloud
    ``O``, reused while the same cloud (same dtype, shape and bytes) is scored again. Read-only: the tree is
    only queried, the arrays only read."""
    O = np.ascontiguousarray(O)
    key = hashlib.sha1(O.tobytes() + str((O.dtype, O.shape)).encode()).hexdigest()
    if _LAST_OBSERVATION.get("key") != key:
        Ou, inv_o, w_o = unique_rows(O)
        _LAST_OBSERVATION.clear()
        _LAST_OBSERVATION.update(key=key, side=(Ou, inv_o, w_o, kd_tree(Ou, leafsize=32)))
    return _LAST_OBSERVATION["side"]


def _release_alignment(O: np.ndarray, V: np.ndarray, dt: type, alignment: str, centroid_align: bool,
                       float32: bool, icp_kw: dict) -> tuple[Any, bool | None, str, np.ndarray]:
    """The alignments done before de-duplication: the released float32 ICP on the full clouds, or the
    released centroid shift; returns (ICP result, accepted, how, moved revisit cloud)."""
    icp_res, accepted, how = None, None, "none"
    if alignment == "trimmed_icp" and float32:
        # parity: the released ICP on the full clouds in input order (ties at the trim cut included)
        try:
            icp_res, V = trimmed_icp_release(V, O, **icp_kw)
        except ICPError as e:
            raise NotApplicable(str(e)) from None
        accepted = icp_res.accepted
        how = "trimmed_icp" if accepted else "none"
    elif alignment != "trimmed_icp" and centroid_align:
        # the release's shift: mean(O) − mean(V) in the clouds' own dtype, added to every revisit point
        V = (V + (np.mean(O, axis=0) - np.mean(V, axis=0))).astype(dt, copy=False)
        how = "centroid"
    return icp_res, accepted, how, V


def _threshold(Ou: np.ndarray, Vu: np.ndarray, dt: type, distance_threshold: float | None,
               ratio: float) -> tuple[float, float]:
    """(D, τ): D the bbox diagonal of O ∪ V (in the clouds' dtype), τ the given threshold or
    max(ratio·D, 1e-6), never below 1e-8."""
    both_lo = np.minimum(Ou.min(axis=0), Vu.min(axis=0))
    both_hi = np.maximum(Ou.max(axis=0), Vu.max(axis=0))
    diag = float(np.linalg.norm((both_hi - both_lo).astype(dt)))
    if distance_threshold is not None:
        tau = float(distance_threshold)
    else:
        tau = max(ratio * diag, 1e-6)
    return diag, max(tau, 1e-8)


def unique_rows(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows of ``p`` [n,3] (byte-wise), the row of each input point among them, and their counts."""
    p = np.ascontiguousarray(p)
    key = p.view(np.dtype((np.void, p.dtype.itemsize * 3))).ravel()
    _, first, inv, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    return p[first], inv.ravel(), counts.astype(np.int64)


def _clamp01(x: float) -> float:
    return 0.0 if not math.isfinite(x) else min(max(x, 0.0), 1.0)
