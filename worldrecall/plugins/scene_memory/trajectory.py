"""Revisit structure of an estimated camera trajectory: pose distance, turnaround, revisit pairs, gates.

The official Scene-Memory-F1 split (spec B.4) is trajectory based: the observation leg ends at the pose
farthest from the start, and a rollout only counts when the camera both left and came back (the return
gate). The experimental variant's optional gate (B.5) and worldrecall's per-leg turning points (O-B3) and
absolute departure floor (errata 6) live here too, so every pose rule is in one place.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


def rotation_angles_deg(Ra: np.ndarray, Rb: np.ndarray) -> np.ndarray:
    """Geodesic angle (degrees) between every rotation of ``Ra`` [n,3,3] and every one of ``Rb`` [m,3,3] -> [n,m]."""
    # trace(Raᵀ Rb) as the release forms it (flattened rotations, one matrix product): arccos near 1
    # magnifies the last bit, and pair thresholds sit right there
    fa = np.asarray(Ra, dtype=np.float64).reshape(len(Ra), 9)
    fb = np.asarray(Rb, dtype=np.float64).reshape(len(Rb), 9)
    tr = fa @ fb.T
    return np.degrees(np.arccos(np.clip((tr - 1.0) * 0.5, -1.0, 1.0)))


def rotation_angle_deg(R: np.ndarray) -> float:
    """Angle (degrees) of one rotation matrix."""
    return float(np.degrees(np.arccos(np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0))))


def pose_distance_matrix(poses_c2w: np.ndarray, *, rotation_weight: float = 1.0,
                         degenerate_extent: float = 1e-6) -> tuple[np.ndarray, float]:
    """B.4 steps 1–2: d_ij = ‖t_i − t_j‖ / E + w·θ_ij / 180 with E = max_i ‖t_i − t_0‖.

    The translation term is dropped when E ≤ ``degenerate_extent`` (rotation-only trajectory). Returns
    (d [N,N], E).
    """
    d, _, _, extent = pose_distance_parts(poses_c2w, rotation_weight=rotation_weight,
                                          degenerate_extent=degenerate_extent)
    return d, extent


def pose_distance_parts(poses_c2w: np.ndarray, *, rotation_weight: float = 1.0, degenerate_extent: float = 1e-6
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(d, ‖t_i − t_j‖ / E (zeros when rotation-only), θ_ij in degrees, E): the release's
    ``pose_distance_matrix``, whose two parts a revisit pair reports entry by entry."""
    P = np.asarray(poses_c2w, dtype=np.float64)
    t, R = P[:, :3, 3], P[:, :3, :3]
    extent = float(np.linalg.norm(t - t[0], axis=1).max()) if len(P) else 0.0
    theta = rotation_angles_deg(R, R)
    np.fill_diagonal(theta, 0.0)
    d = float(rotation_weight) * (theta / 180.0)
    tn = np.zeros_like(theta)
    if extent > degenerate_extent:
        tn = np.linalg.norm(t[:, None, :] - t[None, :, :], axis=2) / extent
        d = tn + d
    return d, tn, theta, extent


@dataclass
class TurnaroundGate:
    """Facts of the official split and return gate (B.4), plus worldrecall's absolute floor (errata 6)."""

    n_rows: int
    k_star: int                      # first row of the revisit leg (argmax_j d_0j)
    extent: float                    # E, sidecar units
    degenerate: bool                 # rotation-only (E ≤ 1e-6)
    departure: float                 # D = d_0k*
    departed: bool                   # D ≥ factor·radius
    returned: bool                   # ≥ 1 revisit pair
    n_pairs: int
    gap_rows: int
    max_translation: float           # max ‖t_i − t_0‖ (= E), sidecar units
    max_rotation_deg: float          # max θ_0i
    gate_official: bool              # departed and returned
    floor_passed: bool               # absolute floor (always computed)
    gate: bool                       # gate_official and (floor_passed or floor off)
    split_ok: bool                   # both legs have ≥ 2 rows
    reason: str = ""
    pairs: list[tuple[int, int]] = field(default_factory=list)
    revisits: list[RevisitPair] = field(default_factory=list)  # the same pairs with their distances

    def to_json(self, *, with_pairs: bool = False) -> dict[str, Any]:
        """JSON-able facts (the pair list only on request: it can be long)."""
        d = asdict(self)
        d.pop("revisits")
        if not with_pairs:
            d.pop("pairs")
        return d


def turnaround_gate(poses_c2w: np.ndarray, fps: float, *, rotation_weight: float = 1.0,
                    revisit_radius: float = 0.15, departure_factor: float = 3.0, excursion_factor: float = 3.0,
                    min_gap_s: float = 1.0, degenerate_extent: float = 1e-6, absolute_floor: bool = True,
                    floor_translation: float = 0.05, floor_rotation_deg: float = 10.0,
                    min_rows: int = 2) -> TurnaroundGate:
    """B.4 (``memory_pairing.find_revisit_pairs``): turnaround k*, departure, revisit pairs and the gate.

    fps is floored at 1e-6. Pairs: for each row j ≥ g (g = max(round(min_gap_s·fps), 1) rows), i* =
    argmin_{i ≤ j−g} d_ji; the pair (i*, j) counts when d_ji* ≤ radius and the excursion max_{i*<m<j} d_i*m ≥
    ``excursion_factor``·radius (an empty range gives 0, errata 3). Departed: d_0k* ≥
    ``departure_factor``·radius (a knob of its own in the release). The absolute floor (ours) additionally
    asks for a translation ≥ ``floor_translation`` or a rotation ≥ ``floor_rotation_deg`` away from the first
    pose, so pure jitter — which the scale-free official gate lets through — fails. Fewer than 2 poses
    raise ``ValueError`` (the release's pose distance does: an error, not a failed gate).
    """
    P = np.asarray(poses_c2w, dtype=np.float64)
    n = int(P.shape[0])
    if n < 2:
        raise ValueError(f"the turnaround split needs at least 2 poses, got {n}")
    d, tn, theta, extent = pose_distance_parts(P, rotation_weight=rotation_weight,
                                               degenerate_extent=degenerate_extent)
    d0 = d[0]
    k_star = int(np.argmax(d0))  # first maximum
    departure = float(d0[k_star])
    departed = departure >= float(departure_factor) * float(revisit_radius)
    found = revisit_pairs(P, d, extent, fps, revisit_radius=revisit_radius, excursion_factor=excursion_factor,
                          min_gap_s=min_gap_s, degenerate_extent=degenerate_extent, parts=(tn, theta))
    gap = max(round(float(min_gap_s) * max(float(fps), 1e-6)), 1)
    pairs = [(p.first_row, p.revisit_row) for p in found]
    returned = len(pairs) >= 1
    gate_official = bool(departed and returned)
    theta0 = rotation_angles_deg(P[:1, :3, :3], P[:, :3, :3])[0]
    max_rot = float(theta0.max())
    floor_ok = bool(extent >= floor_translation or max_rot >= floor_rotation_deg)
    gate = gate_official and (floor_ok or not absolute_floor)
    split_ok = k_star >= min_rows and n - k_star >= min_rows
    reason = "" if split_ok else (f"split at row {k_star} of {n} leaves a leg with fewer than {min_rows} rows")
    return TurnaroundGate(n, k_star, extent, extent <= degenerate_extent, departure, bool(departed), returned,
                          len(pairs), gap, extent, max_rot, gate_official, floor_ok, bool(gate), bool(split_ok),
                          reason, pairs, found)


@dataclass(frozen=True)
class RevisitPair:
    """Two rows the estimated trajectory places at the same viewpoint (``memory_pairing.RevisitPair``)."""

    first_row: int
    revisit_row: int
    pose_distance: float
    translation_distance: float   # ‖t_i − t_j‖ / E (0 when rotation-only)
    rotation_deg: float
    gap_s: float                  # (revisit − first) / max(fps, 1e-6)
    excursion: float

    def to_json(self) -> dict[str, Any]:
        """JSON-able fields."""
        return asdict(self)


def revisit_pairs(poses_c2w: np.ndarray, d: np.ndarray, extent: float, fps: float, *,
                  revisit_radius: float = 0.15, excursion_factor: float = 3.0, min_gap_s: float = 1.0,
                  degenerate_extent: float = 1e-6,
                  parts: tuple[np.ndarray, np.ndarray] | None = None) -> list[RevisitPair]:
    """Every revisit pair of a trajectory with pose distances ``d`` (``find_revisit_pairs``).

    For each row j ≥ g (g = max(round(min_gap_s · max(fps, 1e-6)), 1)), i* = argmin_{i ≤ j−g} d_ji; the
    pair counts when d_ji* ≤ radius and max_{i*<m<j} d_i*m ≥ excursion_factor·radius (0 when empty).
    ``parts``: the (normalised translation, rotation) matrices of :func:`pose_distance_parts`, whose
    [j, i] entries the pair reports, as released; recomputed when not given.
    """
    if parts is None:
        _, tn_all, theta_all, _ = pose_distance_parts(poses_c2w, degenerate_extent=degenerate_extent)
    else:
        tn_all, theta_all = parts
    P = np.asarray(poses_c2w, dtype=np.float64)
    n = len(P)
    rate = max(float(fps), 1e-6)
    gap = max(round(float(min_gap_s) * rate), 1)
    need = float(excursion_factor) * float(revisit_radius)
    out: list[RevisitPair] = []
    for j in range(gap, n):
        cand = d[j, : j - gap + 1]
        if cand.size == 0:
            continue
        i = int(np.argmin(cand))
        if float(cand[i]) > revisit_radius:
            continue
        between = d[i, i + 1: j]
        exc = float(between.max()) if between.size else 0.0
        if exc < need:
            continue
        out.append(RevisitPair(i, j, float(cand[i]), float(tn_all[j, i]), float(theta_all[j, i]),
                               (j - i) / rate, exc))
    return out


def select_diverse_pairs(pairs: list[RevisitPair], max_pairs: int) -> list[RevisitPair]:
    """At most ``max_pairs`` pairs spread over the time gaps (``memory_pairing.select_diverse_pairs``).

    Pairs sorted by gap (stable); with more than ``max_pairs``, gaps are bucketed into ``max_pairs`` equal
    bins over [shortest, longest] (span ≥ 1e-8), the smallest pose distance wins a bin (first on ties),
    and the shortest and longest gaps take the first and last bins. Result sorted by gap.
    """
    ordered = sorted(pairs, key=lambda p: p.gap_s)
    if max_pairs <= 0 or len(ordered) <= max_pairs:
        return ordered
    lo, hi = ordered[0].gap_s, ordered[-1].gap_s
    span = max(hi - lo, 1e-8)
    buckets: dict[int, RevisitPair] = {}
    for p in ordered:
        k = min(int((p.gap_s - lo) / span * max_pairs), max_pairs - 1)
        if k not in buckets or p.pose_distance < buckets[k].pose_distance:
            buckets[k] = p
    buckets[0] = ordered[0]
    buckets[max_pairs - 1] = ordered[-1]
    return sorted(buckets.values(), key=lambda p: p.gap_s)


def turning_points(poses_c2w: np.ndarray, fps: float, *, rotation_weight: float = 1.0,
                   degenerate_extent: float = 1e-6, smoothing_s: float = 0.5,
                   prominence: float = 0.5) -> list[int]:
    """O-B3 [ours]: turning rows of a multi-loop program.

    d_0j is smoothed with a moving median of ``smoothing_s`` seconds (odd window, edge-replicated); local
    maxima with prominence ≥ ``prominence``·max are turning points, in row order.
    """
    from scipy.ndimage import median_filter

    P = np.asarray(poses_c2w, dtype=np.float64)
    if len(P) < 3:
        return []
    d, _ = pose_distance_matrix(P[:], rotation_weight=rotation_weight, degenerate_extent=degenerate_extent)
    d0 = d[0]
    win = max(1, round(smoothing_s * fps))
    win += 1 - win % 2
    sm = median_filter(d0, size=win, mode="nearest") if win > 1 else d0
    top = float(sm.max())
    if top <= 0:
        return []
    return prominent_peaks(sm, prominence * top)


def prominent_peaks(x: np.ndarray, min_prominence: float) -> list[int]:
    """``scipy.signal.find_peaks(x, prominence=min_prominence)[0]`` as a list, without importing
    scipy.signal (~0.4 s in every worker for one call): only comparisons and one subtraction, so the
    same peaks exactly.

    Peaks are local maxima (a plateau counts once, at its middle ``(left + right) // 2``; the ends never
    count); a peak's prominence is its height above the higher of the lowest points on each side before
    a strictly higher sample (or the end).
    """
    v = [float(a) for a in np.asarray(x, dtype=np.float64).reshape(-1)]
    n, out, i = len(v), [], 1
    while i < n - 1:
        if v[i - 1] < v[i]:
            ahead = i + 1
            while ahead < n - 1 and v[ahead] == v[i]:
                ahead += 1
            if v[ahead] < v[i]:
                peak = (i + ahead - 1) // 2
                if min_prominence <= v[peak] - max(_side_min(v, peak, -1), _side_min(v, peak, 1)):
                    out.append(peak)
                i = ahead
        i += 1
    return out


def _side_min(v: list[float], peak: int, step: int) -> float:
    """Lowest sample from ``peak`` towards one end, stopping before the first one above the peak."""
    low, i = v[peak], peak
    while 0 <= i < len(v) and v[i] <= v[peak]:
        low = min(low, v[i])
        i += step
    return low


@dataclass
class ReturnGate:
    """The experimental variant's optional return gate (B.5; ``memory.compute_revisit_return_gate``)."""

    departed: bool
    returned: bool
    gate: bool
    max_translation: float
    max_rotation_deg: float
    return_row: int
    return_ratio: float
    return_rotation_deg: float
    return_translation: float = 0.0
    tail_start: int = 1

    def to_json(self) -> dict[str, Any]:
        """JSON-able facts."""
        return asdict(self)


def experimental_return_gate(poses_c2w: np.ndarray, *, departure_translation: float = 0.10,
                             departure_rotation_deg: float = 45.0, return_window: float = 0.15,
                             return_ratio: float = 0.12, return_rotation_deg: float = 8.0,
                             max_return_translation: float | None = None) -> ReturnGate:
    """B.5 gate as released: anchor = row 0; departed if max ‖t − t₀‖ ≥ 0.10 or max angle ≥ 45°; the
    return row minimises (t/max(t_max, 1e-8))/0.12 + θ/8° over the tail and passes if its ratio ≤ 0.12,
    θ ≤ 8° and (optional absolute cap) t ≤ ``max_return_translation``.

    Tail: the last max(1, ⌈N·clamp(return_window, 0, 1)⌉) rows, never row 0 (start ≥ 1). Needs ≥ 3
    finite [4,4] poses, else ``ValueError`` (the release raises: an error, not a failed gate).
    """
    P = np.asarray(poses_c2w, dtype=np.float64)
    if P.ndim != 3 or P.shape[1:] != (4, 4) or len(P) < 3:
        raise ValueError(f"the return gate needs at least three [4,4] camera poses, got {list(P.shape)}")
    if not np.isfinite(P).all():
        raise ValueError("the return gate's camera poses contain non-finite values")
    n = len(P)
    trans = np.linalg.norm(P[:, :3, 3] - P[0, :3, 3], axis=1)
    rot = rotation_angles_deg(P[:1, :3, :3], P[:, :3, :3])[0]
    t_max, r_max = float(trans.max()), float(rot.max())
    departed = t_max >= float(departure_translation) or r_max >= float(departure_rotation_deg)
    frac = min(max(float(return_window), 0.0), 1.0)
    start = max(1, n - max(1, math.ceil(n * frac)))
    ratio = trans / max(t_max, 1e-8)
    cost = ratio / max(float(return_ratio), 1e-8) + rot / max(float(return_rotation_deg), 1e-8)
    k = start + int(np.argmin(cost[start:]))
    returned = bool(ratio[k] <= float(return_ratio) and rot[k] <= float(return_rotation_deg))
    if max_return_translation is not None:
        returned = returned and bool(trans[k] <= float(max_return_translation))
    return ReturnGate(bool(departed), returned, bool(departed and returned), t_max, r_max, k,
                      float(ratio[k]), float(rot[k]), float(trans[k]), int(start))
