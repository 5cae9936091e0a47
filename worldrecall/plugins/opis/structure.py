"""OPIS Structure: per-row values (A.11.1 static projective preservation, A.11.2 pose proportions and VLM
claims, errata 6/7) and the case aggregation (A.11.3: raw, coverage-adjusted, shrunk, coverage; O-A5).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from worldrecall.core.data import finite_float
from worldrecall.plugins.opis.records import ClaimRecord, PoseRecord, WindowGeometry
from worldrecall.plugins.opis.thresholds import OpisThresholds
from worldrecall.plugins.opis.visibility import convex_hull_area

#: The release's pose routing (``v2_semantic_aliases``): exact normalised category names only.
HUMAN_CATEGORIES = frozenset({
    "person", "man", "woman", "boy", "girl", "child", "student", "pedestrian", "customer", "soldier",
    "musician", "baseball player", "motorcyclist", "astronaut", "spectator", "tennis player", "skier",
    "cyclist", "police officer", "vendor", "standing man", "sitting woman", "male character",
    "female character",
})
ANIMAL_CATEGORIES = frozenset({
    "dog", "cat", "cow", "horse", "sheep", "goat", "elephant", "hippo", "hippopotamus", "bear", "beaver",
    "wildebeest", "golden retriever", "skunk", "deer", "zebra", "giraffe", "lion", "tiger", "pig", "rabbit",
    "monkey", "fox", "wolf", "rhinoceros", "buffalo", "camel", "panda",
})
HUMAN_ALIASES = frozenset({
    "woman vendor", "older man with glasses", "man in green shirt", "woman with gray hair", "woman in shawl",
    "cowboy", "rider", "umpire", "catcher", "baby",
})
ANIMAL_ALIASES = frozenset({"bull", "black bear", "white cat"})
#: Reason of an articulated object whose category has no pose template (the release's code).
UNSUPPORTED_REASON = "unsupported_articulated_category"


def normalise_category(category: str) -> str:
    """The release's category key: lower case, ``_`` and ``-`` as spaces, whitespace collapsed and trimmed."""
    text = (category or "").lower().replace("_", " ").replace("-", " ")
    return " ".join(text.split())


def pose_profile(category: str) -> str:
    """``"human"``, ``"animal"`` or ``"unsupported"``: the exact normalised name in the release's lists,
    then its aliases (no partial or last-word matching: "young woman" is unsupported)."""
    key = normalise_category(category)
    if key in HUMAN_CATEGORIES or key in HUMAN_ALIASES:
        return "human"
    if key in ANIMAL_CATEGORIES or key in ANIMAL_ALIASES:
        return "animal"
    return "unsupported"


def pose_route(category: str, kinematic_class: str) -> str:
    """Route of a dynamic object (A.11.2): articulated objects take the pose route with their profile
    (``"human"``, ``"animal"`` or ``"unsupported"``, which has no landmarks and relies on the VLM
    fallback); every other kinematic class goes to the VLM claims (``"vlm"``)."""
    if kinematic_class != "articulated":
        return "vlm"
    return pose_profile(category)


# ----------------------------------------------------------------------------------------------------------
# A.11.1 static track


def inside_box(points: np.ndarray, bbox: Sequence[float]) -> np.ndarray:
    """Points inside ``[x0, y0, x1, y1]``, bounds inclusive."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    x0, y0, x1, y1 = (float(v) for v in bbox)
    return (p[:, 0] >= x0) & (p[:, 0] <= x1) & (p[:, 1] >= y0) & (p[:, 1] <= y1)


def static_geometry_value(
    ref_px: np.ndarray,
    cur_px: np.ndarray,
    reproj_err: np.ndarray | None,
    inlier: np.ndarray | None,
    reference_bbox: Sequence[float],
    observed_bbox: Sequence[float],
    th: OpisThresholds,
    *,
    error_space: str = "source_pixels",
) -> dict[str, Any]:
    """Projective preservation of one static object in one scored frame (A.11.1), as the release computes it.

    Instance correspondences: reference pixel in the reference bbox and current pixel in the observed bbox
    (bounds inclusive). coverage = hull area of their reference pixels / reference bbox area (>= 3 of them,
    capped at 1). With fewer than ``min_instance_correspondences`` the row has no value (reason
    ``insufficient_instance_correspondences``, residual not computed). Otherwise the inlier ratio over them
    is reported and residual = median reprojection error (px) over them — unknown when the errors are
    missing, in another ``error_space`` than source pixels, of another length, or not all finite;
    eps = residual / diagonal(observed bbox) (unknown for an empty box). With an unknown eps the row has no
    value and, as in the release (``V3FrameResult.reprojection_error_px`` stays null), no residual and no
    normalised error either (both None, reason ``invalid_or_unknown_residual_units``); else value
    g = exp(-eps / ``geometry_error_scale``).
    Returns ``{"value", "reason", "n_correspondences", "coverage", "inlier_ratio", "residual_px",
    "normalized_error"}``.
    """
    ref = np.asarray(ref_px, dtype=np.float64).reshape(-1, 2)
    cur = np.asarray(cur_px, dtype=np.float64).reshape(-1, 2)
    out: dict[str, Any] = {"value": None, "reason": "insufficient_instance_correspondences", "n_correspondences": 0,
                           "coverage": 0.0, "inlier_ratio": None, "residual_px": None, "normalized_error": None}
    if len(ref) == 0 or len(cur) != len(ref):
        return out
    sel = inside_box(ref, reference_bbox) & inside_box(cur, observed_bbox)
    n = int(sel.sum())
    out["n_correspondences"] = n
    if n >= 3:
        x0, y0, x1, y1 = (float(v) for v in reference_bbox)
        out["coverage"] = min(1.0, convex_hull_area(ref[sel]) / max((x1 - x0) * (y1 - y0), 1e-6))
    need = 1 if th.ablation_no_structural_threshold else th.min_instance_correspondences
    if n < max(need, 1):
        return out
    if inlier is not None and len(np.asarray(inlier).reshape(-1)) == len(ref):
        out["inlier_ratio"] = float(np.asarray(inlier, dtype=bool).reshape(-1)[sel].mean())
    residual = math.inf
    err = None if reproj_err is None else np.asarray(reproj_err, dtype=np.float64).reshape(-1)
    if err is not None and error_space == "source_pixels" and err.shape == sel.shape and np.isfinite(err[sel]).all():
        residual = float(np.median(err[sel]))
    ox0, oy0, ox1, oy1 = (float(v) for v in observed_bbox)
    diagonal = math.hypot(ox1 - ox0, oy1 - oy0)
    eps = residual / diagonal if ox1 > ox0 and oy1 > oy0 and math.isfinite(diagonal) else math.inf
    if not math.isfinite(eps):
        out["reason"] = "invalid_or_unknown_residual_units"  # residual and normalised error stay None
        return out
    out.update(residual_px=residual, normalized_error=eps, value=float(math.exp(-eps / th.geometry_error_scale)),
               reason="projective_consistency_measured")
    return out


def static_value_from_geometry(geometry: WindowGeometry, reference_bbox: Sequence[float],
                               observed_bbox: Sequence[float], th: OpisThresholds) -> dict[str, Any]:
    """:func:`static_geometry_value` on a :class:`WindowGeometry`'s stored correspondences and residuals."""
    ref = np.zeros((0, 2)) if geometry.ref_px is None else geometry.ref_px
    cur = np.zeros((0, 2)) if geometry.cur_px is None else geometry.cur_px
    return static_geometry_value(ref, cur, geometry.reproj_err, geometry.inlier, reference_bbox, observed_bbox, th,
                                 error_space=geometry.error_space)


# ----------------------------------------------------------------------------------------------------------
# A.11.2 dynamic track


def pose_value(reference_lengths: Sequence[float], current_lengths: Sequence[float], th: OpisThresholds,
               *, template_edges: int | None = None, edge_names: Sequence[str] | None = None) -> dict[str, Any]:
    """Pose-landmark proportion score of one object in one window (A.11.2).

    Shared edges S = edges with a valid (finite, > 0) length on both sides. coverage = |S| / denominator,
    denominator = the template's edge count (default) or the number of valid reference edges (official
    parity, errata 6; 0.0 when there is none, as released). Needs |S| >= ``pose_min_edges`` and coverage
    >= ``pose_min_coverage``. rho_e = log(cur / ref); s = median(rho); value = mean_e exp(-|rho_e - s| /
    ``pose_residual_scale``). Also returns the per-edge residuals ``edge_log_errors`` (keyed by edge name)
    and ``family_scores`` ``{"landmark_proportions": value}``, with the release's reason codes
    (``scored`` / ``insufficient_landmark_evidence``). Reference and current edge lists of different length
    are a skeleton mismatch: ``ValueError`` (the release raises).
    """
    ref = np.asarray(reference_lengths, dtype=np.float64).reshape(-1)
    cur = np.asarray(current_lengths, dtype=np.float64).reshape(-1)
    if ref.shape != cur.shape:
        raise ValueError(f"pose skeletons must match: {ref.size} reference edges, {cur.size} current edges")
    names = list(edge_names) if edge_names is not None and len(edge_names) == ref.size else [f"e{i}" for i in range(ref.size)]
    ref_ok = np.isfinite(ref) & (ref > 0)
    shared = ref_ok & np.isfinite(cur) & (cur > 0)
    n_shared = int(shared.sum())
    denom = int(ref_ok.sum()) if th.official_parity else int(template_edges if template_edges else len(ref))
    coverage = n_shared / denom if denom else 0.0
    min_edges = 1 if th.ablation_no_structural_threshold else th.pose_min_edges
    min_cov = 0.0 if th.ablation_no_structural_threshold else th.pose_min_coverage
    out: dict[str, Any] = {"value": None, "reason": "insufficient_landmark_evidence", "coverage": coverage,
                           "n_shared": n_shared, "n_reference_eligible": int(ref_ok.sum()),
                           "n_template_edges": int(template_edges if template_edges else len(ref)),
                           "edge_log_errors": {}, "family_scores": {}}
    if n_shared < max(min_edges, 1) or coverage < min_cov:
        return out
    rho = np.log(cur[shared] / ref[shared])
    s = float(np.median(rho))
    residuals = np.abs(rho - s)
    value = float(np.mean(np.exp(-residuals / th.pose_residual_scale)))
    shared_names = [n for n, ok in zip(names, shared) if ok]
    out.update(value=value, reason="scored", scale=s, family_scores={"landmark_proportions": value},
               edge_log_errors={n: float(r) for n, r in zip(shared_names, residuals)})
    return out


def claims_value(claims: Iterable[dict[str, Any]], judgments: Iterable[dict[str, Any]],
                 th: OpisThresholds) -> dict[str, Any]:
    """VLM localized-claim score of one object in one window (A.11.2).

    Eligible claims: reference confidence >= ``vlm_claim_confidence_min``. A claim is evaluable when its
    judgment (missing -> unknown) is not ``unknown``, ``visible`` and has confidence >=
    ``vlm_judgment_confidence_min``: supported -> 1, contradicted -> 0. Family score = mean of its evaluable
    claims; value = mean over families with >= 1 evaluable claim (None if none); coverage = evaluable /
    eligible claims (None without eligible claims, as released). Reason codes are the release's
    (``scored`` / ``no_evaluable_structure_evidence``); ``family_scores`` holds each family's mean.
    """
    cmin = 0.0 if th.ablation_no_structural_threshold else th.vlm_claim_confidence_min
    jmin = 0.0 if th.ablation_no_structural_threshold else th.vlm_judgment_confidence_min
    by_fact = {str(j.get("fact_id")): j for j in judgments}
    families: dict[str, list[float]] = {}
    eligible = evaluable = 0
    for c in claims:
        conf = finite_float(c.get("confidence"))
        if conf is None or conf < cmin:
            continue
        eligible += 1
        j = by_fact.get(str(c.get("fact_id")))
        if j is None:
            continue
        status = str(j.get("status", "unknown")).lower()
        jconf = finite_float(j.get("confidence"))
        if status not in ("supported", "contradicted") or not j.get("visible") or jconf is None or jconf < jmin:
            continue
        evaluable += 1
        families.setdefault(str(c.get("family", "")), []).append(1.0 if status == "supported" else 0.0)
    family_scores = {k: float(np.mean(v)) for k, v in sorted(families.items())}
    value = float(np.mean(list(family_scores.values()))) if family_scores else None
    return {"value": value, "reason": "scored" if value is not None else "no_evaluable_structure_evidence",
            "coverage": (evaluable / eligible) if eligible else None, "n_eligible": eligible, "n_evaluable": evaluable,
            "family_scores": family_scores}




def _pose_evidence(pose: PoseRecord | None, route: str, th: OpisThresholds) -> dict[str, Any]:
    """The pose route's result for one row (the release's ``score_pose_pair`` on the stored records)."""
    empty = {"value": None, "coverage": 0.0, "n_shared": 0, "edge_log_errors": {}, "family_scores": {}}
    if route == "unsupported" and pose is None:
        # the release stores an empty reference record for these, so every matched row has a measurement
        return {**empty, "reason": UNSUPPORTED_REASON, "measured": True}
    if pose is None:
        return {**empty, "reason": "missing_pose_measurement", "measured": False}
    if pose.current_template is not None and pose.current_template != pose.template:
        raise ValueError(f"pose profiles must match: reference {pose.template!r}, current {pose.current_template!r}")
    if pose.current_edge_names is not None and list(pose.current_edge_names) != list(pose.edge_names):
        raise ValueError(f"pose skeletons must match for object {pose.object_id}")
    p = pose_value(pose.reference_lengths, pose.current_lengths, th,
                   template_edges=len(pose.edge_names) or None, edge_names=pose.edge_names)
    # as released: without a value, a side the producer measured no landmarks on names its own reason
    if p["value"] is None and pose.reference_reason:
        p["reason"] = pose.reference_reason
    elif p["value"] is None and pose.current_reason:
        p["reason"] = pose.current_reason
    return {**p, "measured": True}


def dynamic_structure_value(
    *,
    category: str,
    kinematic_class: str,
    pose: PoseRecord | None,
    claims: ClaimRecord | None,
    th: OpisThresholds,
) -> dict[str, Any]:
    """Structure evidence of one matched, unambiguous dynamic object in one window (A.11.2 routing).

    Articulated objects (or any object with a stored pose record) take the pose route with the release's
    profile (:func:`pose_profile`); an ``unsupported`` profile has no landmarks, as in the release, so its
    value can only come from the fallback. If the pose route gives no value and ``vlm_fallback`` is on, the
    VLM claims are used (backend ``vlm_fallback``, ``fallback_attempted`` true whatever they give) — in parity
    mode only when a pose measurement exists for the row (errata 7; an unsupported profile always has one).
    Everything else uses the claims (backend ``vlm``). The pose route's backend is ``pose`` and its coverage
    a number (0.0 without evidence) even when it gives no value.
    Returns ``{"value", "backend", "reason", "coverage", "fallback_attempted", "fallback_used",
    "family_scores", ...}``.
    """
    route = pose.template if pose is not None else pose_route(category, kinematic_class)
    if route in ("human", "animal", "unsupported"):
        p = _pose_evidence(pose, route, th)
        result: dict[str, Any] = {"value": p["value"], "backend": "pose", "reason": p["reason"],
                                  "coverage": p["coverage"], "fallback_attempted": False, "fallback_used": False,
                                  "profile": route, "family_scores": p["family_scores"],
                                  "edge_log_errors": p["edge_log_errors"]}
        if p["value"] is not None:
            return result
        if not th.vlm_fallback or (th.official_parity and not p["measured"]):
            return result
        c = claims_value(claims.claims, claims.judgments, th) if claims is not None else \
            {"value": None, "reason": "no_evaluable_structure_evidence", "coverage": None, "family_scores": {}}
        return {"value": c["value"], "backend": "vlm_fallback", "reason": c["reason"], "coverage": c["coverage"],
                "fallback_attempted": True, "fallback_used": c["value"] is not None, "fallback_reason": p["reason"],
                "pose_coverage": p["coverage"], "profile": route, "family_scores": c["family_scores"]}
    if claims is None:
        return {"value": None, "backend": "vlm", "reason": "no_evaluable_structure_evidence", "coverage": None,
                "fallback_attempted": False, "fallback_used": False, "family_scores": {}}
    c = claims_value(claims.claims, claims.judgments, th)
    return {"value": c["value"], "backend": "vlm", "reason": c["reason"], "coverage": c["coverage"],
            "fallback_attempted": False, "fallback_used": False, "family_scores": c["family_scores"]}


# ----------------------------------------------------------------------------------------------------------
# A.11.3 aggregation


@dataclass(frozen=True)
class StructureRow:
    """What the aggregation needs of one (window, object) row on a structure track.

    ``scored`` (row state ``scored``) and ``geometry_eligible``: a static value counts only on a row that
    is both, as in the release (``aggregate_structure_quality`` reads ``visible_surface_geometry`` only
    there); records that carry a value on another row keep it out of every aggregate. Dynamic values count
    whatever the state.
    """

    object_id: str
    value: float | None
    presence_eligible: bool
    dynamic: bool
    scored: bool = True
    geometry_eligible: bool = True

    @property
    def counted_value(self) -> float | None:
        """The value the aggregation counts (None for a static value on an unscored / ineligible row)."""
        return self.value if self.dynamic or (self.scored and self.geometry_eligible) else None


def aggregate_structure(rows: Sequence[StructureRow], th: OpisThresholds) -> dict[str, Any]:
    """Raw, coverage-adjusted, shrunk structure and coverage over an object's candidate windows (A.11.3).

    Per object k: v_k valid values (a static one only on a scored, geometry-eligible row, as released),
    n_k = |v_k|, N_k = candidate windows — every window (``all_windows``,
    released code) or only presence-eligible ones (``eligible``, O-A5 default). m_k = mean(v_k) (min with
    ``ablation_min_instead_of_mean``).

    * raw      = mean_k m_k over objects with n_k > 0
    * coverage = mean_k (n_k m_k / N_k) over objects with N_k > 0 (missing evidence counts 0)
    * shrunk   = mean_k (n_k m_k + a b) / (n_k + a) over all candidate objects (prior mean b, strength a)
    * coverage_ratio = sum n_k / sum N_k
    Each is None when its set of objects is empty.
    """
    values: dict[str, list[float]] = {}
    n_all: dict[str, int] = {}
    n_eligible: dict[str, int] = {}
    for r in rows:
        n_all[r.object_id] = n_all.get(r.object_id, 0) + 1
        n_eligible[r.object_id] = n_eligible.get(r.object_id, 0) + int(r.presence_eligible)
        values.setdefault(r.object_id, [])
        v = r.counted_value
        if v is not None:
            if not math.isfinite(v) or not 0.0 <= v <= 1.0:
                raise ValueError(f"structure value {v!r} of {r.object_id} not finite in [0, 1]")
            values[r.object_id].append(float(v))
    denominators = n_all if th.effective_coverage_denominator == "all_windows" else n_eligible
    reduce = min if th.ablation_min_instead_of_mean else (lambda v: sum(v) / len(v))
    m = {k: float(reduce(v)) for k, v in values.items() if v}
    raw = _mean(list(m.values()))
    cov_terms = [len(values[k]) * m.get(k, 0.0) / denominators[k] for k in values if denominators[k] > 0]
    coverage_adjusted = _mean([min(1.0, t) for t in cov_terms])
    a, b = th.shrink_prior_strength, th.shrink_prior_mean
    shrunk = _mean([(len(values[k]) * m.get(k, 0.0) + a * b) / (len(values[k]) + a) for k in values])
    total_valid = sum(len(v) for v in values.values())
    total_den = sum(denominators.values())
    return {
        "raw": raw,
        "coverage_adjusted": coverage_adjusted,
        "shrunk": shrunk,
        "coverage": (total_valid / total_den) if total_den else None,
        "n_candidate_objects": len(values),
        "n_candidate_rows": sum(denominators.values()),
        "n_valid_rows": total_valid,
        "n_prior_only_objects": sum(1 for v in values.values() if not v),
    }


def _mean(v: Sequence[float]) -> float | None:
    return float(sum(v) / len(v)) if v else None
