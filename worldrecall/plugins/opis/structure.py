"""OPIS Structure: per-row values (A.11.1 static projective preservation, A.11.2 pose proportions and VLM
claims, errata 6/7) and the case aggregation (A.11.3: raw, coverage-adjusted, shrunk, coverage; O-A5).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from worldrecall.core.data import finite_float
from worldrecall.plugins.opis.records import ClaimRecord, PoseRecord, WindowGeometry
from worldrecall.plugins.opis.thresholds import OpisThresholds
from worldrecall.plugins.opis.visibility import convex_hull_area

#: Normalised categories routed to the human pose template (COCO-17, 10 limb edges).
HUMAN_CATEGORIES = frozenset({
    "person", "people", "human", "man", "men", "woman", "women", "boy", "girl", "child", "children", "kid",
    "baby", "toddler", "adult", "pedestrian", "player", "rider", "cyclist", "biker", "skier", "skateboarder",
    "surfer", "runner", "athlete", "dancer", "worker", "soldier", "police officer", "chef", "student",
})
#: Normalised categories routed to the animal pose template (AP-10K, 8 limb edges).
ANIMAL_CATEGORIES = frozenset({
    "dog", "puppy", "cat", "kitten", "horse", "pony", "cow", "cattle", "bull", "sheep", "lamb", "goat",
    "pig", "elephant", "bear", "deer", "zebra", "giraffe", "lion", "tiger", "leopard", "cheetah", "wolf",
    "fox", "rabbit", "monkey", "gorilla", "panda", "rhino", "rhinoceros", "hippo", "hippopotamus",
    "camel", "kangaroo", "squirrel", "raccoon", "otter", "bison", "buffalo", "antelope", "moose", "mouse",
    "rat", "polar bear", "skunk", "beaver", "donkey",
})


def normalise_category(category: str) -> str:
    """Lower-case, letters and spaces only, collapsed whitespace."""
    return " ".join(re.sub(r"[^a-z ]+", " ", (category or "").lower()).split())


def pose_route(category: str, kinematic_class: str) -> str:
    """``"human"``, ``"animal"`` (pose landmarks) or ``"vlm"`` (claims) for a dynamic object (A.11.2).

    Only articulated objects go to pose; the full normalised category, then its last word (and that word
    without a plural ``s``), is looked up in the human and animal lists.
    """
    if kinematic_class != "articulated":
        return "vlm"
    name = normalise_category(category)
    words = name.split()
    keys = [name] + ([words[-1], words[-1][:-1]] if words and words[-1].endswith("s") else words[-1:])
    for key in keys:
        if key in HUMAN_CATEGORIES:
            return "human"
        if key in ANIMAL_CATEGORIES:
            return "animal"
    return "vlm"


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
    reproj_err: np.ndarray,
    inlier: np.ndarray | None,
    reference_bbox: Sequence[float],
    observed_bbox: Sequence[float],
    th: OpisThresholds,
) -> dict[str, Any]:
    """Projective preservation of one static object in one scored frame (A.11.1).

    Instance correspondences: reference pixel in the reference bbox and current pixel in the observed bbox.
    residual = median reprojection error (px) over them under the background-fitted camera;
    eps = residual / diagonal(observed bbox); value g = exp(-eps / ``geometry_error_scale``).
    Returns ``{"value": g | None, "reason", "n_correspondences", "coverage", "inlier_ratio", "residual_px",
    "normalized_error"}``.
    """
    ref = np.asarray(ref_px, dtype=np.float64).reshape(-1, 2)
    cur = np.asarray(cur_px, dtype=np.float64).reshape(-1, 2)
    err = np.asarray(reproj_err, dtype=np.float64).reshape(-1)
    out: dict[str, Any] = {"value": None, "reason": None, "n_correspondences": 0, "coverage": 0.0,
                           "inlier_ratio": None, "residual_px": None, "normalized_error": None}
    if len(ref) == 0 or len(cur) != len(ref) or len(err) != len(ref):
        out["reason"] = "no_correspondences" if len(ref) == 0 else "correspondence_shape_mismatch"
        return out
    sel = inside_box(ref, reference_bbox) & inside_box(cur, observed_bbox)
    n = int(sel.sum())
    out["n_correspondences"] = n
    if n >= 3:
        x0, y0, x1, y1 = (float(v) for v in reference_bbox)
        out["coverage"] = min(1.0, convex_hull_area(ref[sel]) / max((x1 - x0) * (y1 - y0), 1e-6))
    need = 1 if th.ablation_no_structural_threshold else th.min_instance_correspondences
    if n < max(need, 1):
        out["reason"] = "insufficient_instance_correspondences"
        return out
    if inlier is not None and len(np.asarray(inlier).reshape(-1)) == len(ref):
        out["inlier_ratio"] = float(np.asarray(inlier, dtype=bool).reshape(-1)[sel].mean())
    if not np.isfinite(err[sel]).all():
        out["reason"] = "invalid_or_unknown_residual_units"
        return out
    residual = float(np.median(err[sel]))
    ox0, oy0, ox1, oy1 = (float(v) for v in observed_bbox)
    diagonal = math.hypot(ox1 - ox0, oy1 - oy0)
    if ox1 <= ox0 or oy1 <= oy0 or not math.isfinite(diagonal):
        out["reason"] = "invalid_observed_bbox"
        return out
    eps = residual / diagonal
    out.update(value=float(math.exp(-eps / th.geometry_error_scale)), reason="projective_consistency_measured",
               residual_px=residual, normalized_error=eps)
    return out


def static_value_from_geometry(geometry: WindowGeometry, reference_bbox: Sequence[float],
                               observed_bbox: Sequence[float], th: OpisThresholds) -> dict[str, Any]:
    """:func:`static_geometry_value` on a :class:`WindowGeometry`'s stored correspondences."""
    if geometry.ref_px is None or geometry.cur_px is None or geometry.reproj_err is None:
        return {"value": None, "reason": "no_correspondences", "n_correspondences": 0, "coverage": 0.0,
                "inlier_ratio": None, "residual_px": None, "normalized_error": None}
    return static_geometry_value(geometry.ref_px, geometry.cur_px, geometry.reproj_err, geometry.inlier,
                                 reference_bbox, observed_bbox, th)


# ----------------------------------------------------------------------------------------------------------
# A.11.2 dynamic track


def pose_value(reference_lengths: Sequence[float], current_lengths: Sequence[float], th: OpisThresholds,
               *, template_edges: int | None = None) -> dict[str, Any]:
    """Pose-landmark proportion score of one object in one window (A.11.2).

    Shared edges S = edges with a valid (finite, > 0) length on both sides. coverage = |S| / denominator,
    denominator = the template's edge count (default) or the number of valid reference edges (official
    parity, errata 6). Needs |S| >= ``pose_min_edges`` and coverage >= ``pose_min_coverage``.
    rho_e = log(cur / ref); s = median(rho); value = mean_e exp(-|rho_e - s| / ``pose_residual_scale``).
    """
    ref = np.asarray(reference_lengths, dtype=np.float64).reshape(-1)
    cur = np.asarray(current_lengths, dtype=np.float64).reshape(-1)
    if ref.shape != cur.shape:
        return {"value": None, "reason": "edge_count_mismatch", "coverage": None, "n_shared": 0}
    ref_ok = np.isfinite(ref) & (ref > 0)
    shared = ref_ok & np.isfinite(cur) & (cur > 0)
    n_shared = int(shared.sum())
    denom = int(ref_ok.sum()) if th.official_parity else int(template_edges if template_edges else len(ref))
    coverage = n_shared / denom if denom else 0.0
    min_edges = 1 if th.ablation_no_structural_threshold else th.pose_min_edges
    min_cov = 0.0 if th.ablation_no_structural_threshold else th.pose_min_coverage
    out: dict[str, Any] = {"value": None, "reason": None, "coverage": coverage, "n_shared": n_shared}
    if n_shared < max(min_edges, 1) or coverage < min_cov:
        out["reason"] = "insufficient_pose_edges"
        return out
    rho = np.log(cur[shared] / ref[shared])
    s = float(np.median(rho))
    out.update(value=float(np.mean(np.exp(-np.abs(rho - s) / th.pose_residual_scale))),
               reason="pose_proportions_measured", scale=s)
    return out


def claims_value(claims: Iterable[dict[str, Any]], judgments: Iterable[dict[str, Any]],
                 th: OpisThresholds) -> dict[str, Any]:
    """VLM localized-claim score of one object in one window (A.11.2).

    Eligible claims: reference confidence >= ``vlm_claim_confidence_min``. A claim is evaluable when its
    judgment (missing -> unknown) is not ``unknown``, ``visible`` and has confidence >=
    ``vlm_judgment_confidence_min``: supported -> 1, contradicted -> 0. Family score = mean of its evaluable
    claims; value = mean over families with >= 1 evaluable claim (None if none); coverage = evaluable /
    eligible claims.
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
    value = float(np.mean([np.mean(v) for v in families.values()])) if families else None
    return {"value": value, "reason": "claims_measured" if value is not None else "no_evaluable_claims",
            "coverage": (evaluable / eligible) if eligible else None, "n_eligible": eligible, "n_evaluable": evaluable}




def dynamic_structure_value(
    *,
    category: str,
    kinematic_class: str,
    pose: PoseRecord | None,
    claims: ClaimRecord | None,
    th: OpisThresholds,
) -> dict[str, Any]:
    """Structure evidence of one matched, unambiguous dynamic object in one window (A.11.2 routing).

    Pose-routed objects (articulated humans/animals, or any object with a stored pose record) use pose
    proportions; if that gives no value and ``vlm_fallback`` is on, the VLM claims are used — in parity mode
    only when a pose measurement was stored for the row (errata 7). Everything else uses the claims.
    Returns ``{"value", "backend" ("pose"|"vlm"|"vlm_fallback"|None), "reason", "coverage",
    "fallback_attempted"}``.
    """
    route = pose.template if pose is not None else pose_route(category, kinematic_class)
    if route in ("human", "animal"):
        result: dict[str, Any] = {"value": None, "backend": None, "reason": "no_pose_measurement",
                                  "coverage": None, "fallback_attempted": False}
        if pose is not None:
            p = pose_value(pose.reference_lengths, pose.current_lengths, th,
                           template_edges=len(pose.edge_names) or None)
            if p["value"] is not None:
                return {"value": p["value"], "backend": "pose", "reason": p["reason"],
                        "coverage": p["coverage"], "fallback_attempted": False}
            result.update(reason=p["reason"], coverage=p["coverage"])
        may_fallback = th.vlm_fallback and (pose is not None or not th.official_parity)
        if may_fallback:
            result["fallback_attempted"] = True
            if claims is not None:
                c = claims_value(claims.claims, claims.judgments, th)
                if c["value"] is not None:
                    return {"value": c["value"], "backend": "vlm_fallback", "reason": c["reason"],
                            "coverage": c["coverage"], "fallback_attempted": True}
                result["reason"] = c["reason"]
            else:
                result["reason"] = result["reason"] + "+no_claims"
        return result
    if claims is None:
        return {"value": None, "backend": None, "reason": "no_claims", "coverage": None, "fallback_attempted": False}
    c = claims_value(claims.claims, claims.judgments, th)
    return {"value": c["value"], "backend": "vlm" if c["value"] is not None else None, "reason": c["reason"],
            "coverage": c["coverage"], "fallback_attempted": False}


# ----------------------------------------------------------------------------------------------------------
# A.11.3 aggregation


@dataclass(frozen=True)
class StructureRow:
    """What the aggregation needs of one (window, object) row on a structure track."""

    object_id: str
    value: float | None
    presence_eligible: bool
    dynamic: bool


def aggregate_structure(rows: Sequence[StructureRow], th: OpisThresholds) -> dict[str, Any]:
    """Raw, coverage-adjusted, shrunk structure and coverage over an object's candidate windows (A.11.3).

    Per object k: v_k valid values, n_k = |v_k|, N_k = candidate windows — every window (``all_windows``,
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
        if r.value is not None:
            if not math.isfinite(r.value) or not 0.0 <= r.value <= 1.0:
                raise ValueError(f"structure value {r.value!r} of {r.object_id} not finite in [0, 1]")
            values[r.object_id].append(float(r.value))
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
