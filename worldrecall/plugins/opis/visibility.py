"""OPIS visibility classification per (window, inventory object) (A.6, errata 2; O-A3 variant).

Decides, before and after association, whether an inventory object should be visible in a window: from
its reference query points projected with the background-fitted camera (static-track objects) or from a
matched detection. Only ``presence_eligible`` objects count for Presence; an unmatched object with no
visibility evidence is an evaluator failure, never "missing".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from worldrecall.plugins.opis.records import ObjectProjection
from worldrecall.plugins.opis.thresholds import OpisThresholds

#: Step-1 outcomes that are final even when a detection was matched, and that remove the object from
#: the association candidates of the window.
FINAL_STATES = frozenset({"outside_view", "occluded", "too_small"})
#: Row states that say "legitimately not visible" (used by extras attributability and soft presence).
KNOWN_INVISIBLE = frozenset({"outside_view", "occluded"})


@dataclass(frozen=True)
class Visibility:
    """Outcome of the visibility tests for one object in one window."""

    state: str              # expected_visible | outside_view | occluded | too_small | unreliable_camera_pose
                            # | evaluator_failure | insufficient_baseline
    presence_eligible: bool
    geometry_eligible: bool
    reason: str
    diagnostics: dict[str, Any] = field(default_factory=dict)
    # the release's decision confidence: 1 for a direct observation, the camera confidence (clipped to
    # [0, 1]) for a projection-based state, 0 for a failure
    confidence: float = 0.0


def _fail(reason: str, state: str = "evaluator_failure", **diag: Any) -> Visibility:
    return Visibility(state, False, False, reason, dict(diag), 0.0)


def _unit(v: float) -> float:
    return min(1.0, max(0.0, float(v)))


def convex_hull_area(points: np.ndarray) -> float:
    """Area (px^2) of the convex hull of 2-D points; 0 for fewer than 3 points or collinear points.

    Andrew's monotone chain followed by the shoelace formula. The chain runs on Python floats with the
    cross product written out: the same IEEE double operations as on numpy scalars, without their
    per-call overhead (this runs for every object of every window).
    """
    pts = np.unique(np.asarray(points, dtype=np.float64).reshape(-1, 2), axis=0)  # sorted by x, then y
    if len(pts) < 3:
        return 0.0
    xy = pts.tolist()

    def chain(seq: list[list[float]]) -> list[list[float]]:
        out: list[list[float]] = []
        for p in seq:
            px, py = p
            # pop while cross(out[-2], out[-1], p) <= 0 (not a left turn)
            while len(out) >= 2:
                (ox, oy), (ax, ay) = out[-2], out[-1]
                if (ax - ox) * (py - oy) - (ay - oy) * (px - ox) <= 0:
                    out.pop()
                else:
                    break
            out.append(p)
        return out

    lower, upper = chain(xy), chain(xy[::-1])
    hull = np.array(lower[:-1] + upper[:-1], dtype=np.float64)
    if len(hull) < 3:
        return 0.0
    x, y = hull[:, 0], hull[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2.0)


def clipped_box_area(bbox: Sequence[float], frame_size: tuple[int, int] | None) -> float:
    """Area of ``[x0, y0, x1, y1]`` after clipping to ``[0, W] x [0, H]`` (no clipping without a size)."""
    x0, y0, x1, y1 = (float(v) for v in bbox)
    if frame_size is not None:
        w, h = frame_size
        x0, x1 = min(max(x0, 0.0), w), min(max(x1, 0.0), w)
        y0, y1 = min(max(y0, 0.0), h), min(max(y1, 0.0), h)
    return max(0.0, x1 - x0) * max(0.0, y1 - y0)


def projected_visibility(
    projection: ObjectProjection,
    camera_confidence: float | None,
    frame_size: tuple[int, int] | None,
    th: OpisThresholds,
) -> Visibility:
    """A.6 step 1 (a–g) on one object's projected reference queries.

    Valid depth of a query point (errata 2): inside the frame, current depth finite and > 0, the
    measure side's ``depth_valid`` flag, and — when depth confidences were measured — confidence
    >= ``depth_confidence_min``.
    """
    if projection.reference_source != "input_only":
        return _fail("reference_projection_not_input_only", reference_source=projection.reference_source)
    if projection.camera_confidence is not None:
        camera_confidence = projection.camera_confidence
    conf = None if camera_confidence is None else float(camera_confidence)
    if conf is None or not np.isfinite(conf) or conf < th.camera_confidence_min:
        return _fail("unreliable_camera_pose", "unreliable_camera_pose", camera_confidence=conf)
    if frame_size is None or min(frame_size) <= 0:
        return _fail("missing_frame_bounds")
    px = np.asarray(projection.projected_px, dtype=np.float64).reshape(-1, 2)
    depth = np.asarray(projection.projected_depth, dtype=np.float64).reshape(-1)
    n = len(depth)
    if n < th.min_projection_queries or px.shape[0] != n:
        return _fail("insufficient_projection_queries", n_queries=n)
    if not (np.isfinite(px).all() and np.isfinite(depth).all()):
        return _fail("invalid_projection_values")
    w, h = frame_size
    inside = (depth > 0) & (px[:, 0] >= 0) & (px[:, 0] < w) & (px[:, 1] >= 0) & (px[:, 1] < h)
    inside_fraction = float(inside.mean())
    diag: dict[str, Any] = {"projected_inside_fraction": inside_fraction, "camera_confidence": conf}
    if inside_fraction < th.visible_fraction_min:
        return Visibility("outside_view", False, False, "projected_outside_view", diag, _unit(conf))
    area = convex_hull_area(px[inside])
    diag["projected_area_px"] = area
    if area < th.min_observable_area_px:
        return Visibility("too_small", False, False, "projected_instance_too_small", diag, _unit(conf))
    cur = np.asarray(projection.current_depth, dtype=np.float64).reshape(-1)
    dvalid = np.asarray(projection.depth_valid, dtype=bool).reshape(-1)
    if cur.shape != depth.shape or dvalid.shape != depth.shape:
        return _fail("invalid_depth_query_shape", **diag)
    valid = inside & dvalid & np.isfinite(cur) & (cur > 0)
    if projection.depth_confidence is not None:
        dconf = np.asarray(projection.depth_confidence, dtype=np.float64).reshape(-1)
        if dconf.shape != depth.shape:
            return _fail("invalid_depth_query_shape", **diag)
        valid &= np.isfinite(dconf) & (dconf >= th.depth_confidence_min)
    depth_coverage = float(valid.sum() / inside.sum())
    diag["depth_coverage"] = depth_coverage
    if depth_coverage < th.depth_coverage_min:
        return _fail("insufficient_depth_evidence", **diag)
    # occluded: something in front of the reference surface by more than the tolerance
    occluded = valid & (cur < depth * (1.0 - th.occlusion_tolerance))
    occluded_fraction = float(occluded.sum() / valid.sum())
    visible_fraction = float((valid & ~occluded).sum() / n)  # over ALL queries
    diag.update(occluded_fraction=occluded_fraction, visible_fraction=visible_fraction)
    if occluded_fraction >= th.occluded_fraction_min and visible_fraction < th.visible_fraction_min:
        return Visibility("occluded", False, False, "depth_occluded", diag, _unit(conf))
    if visible_fraction < th.visible_fraction_min:
        return _fail("insufficient_unoccluded_queries", **diag)
    if projection.insufficient_baseline:
        return Visibility("insufficient_baseline", True, False, "insufficient_baseline", diag, _unit(conf))
    return Visibility("expected_visible", True, True, "projected_expected_visible", diag, _unit(conf))


def classify_visibility(
    *,
    projection: ObjectProjection | None,
    camera_confidence: float | None,
    frame_size: tuple[int, int] | None,
    observed_bbox: Sequence[float] | None,
    geometry_required: bool,
    frame_scored: bool,
    th: OpisThresholds,
    dynamic: bool = False,
    projected: Visibility | None = None,
) -> Visibility:
    """A.6 for one object in one window; ``observed_bbox`` is the matched detection's box (None: unmatched).

    ``geometry_required``: the object is a static-geometry candidate (only then is projection evidence
    used, since a static reference projection does not predict an independently moving object).
    ``dynamic`` + ``th.dynamic_projection_presence`` (O-A3 flagged variant): an unmatched dynamic object
    with projection evidence is judged by it for Presence only (never geometry eligible).
    ``projected``: :func:`projected_visibility` of these inputs when the caller has it already (a window
    asks before and after association; the test is pure); else computed here when it is needed.
    """
    if projection is None or not geometry_required:
        projected = None
    else:
        if projected is None:
            projected = projected_visibility(projection, camera_confidence, frame_size, th)
        if projected.state in FINAL_STATES:
            return projected
    if observed_bbox is not None:
        box = np.asarray(observed_bbox, dtype=np.float64).reshape(-1)
        if box.shape != (4,) or not np.isfinite(box).all():
            return _fail("invalid_observed_bbox")
        area = clipped_box_area(box, frame_size)
        if area < th.min_observable_area_px:
            return Visibility("too_small", False, False, "observed_instance_too_small", {"observed_area_px": area}, 1.0)
        geometry_ok = geometry_required and frame_scored
        if projected is not None and not projected.geometry_eligible:
            geometry_ok = False
        return Visibility(
            "expected_visible", True, geometry_ok, "direct_observation",
            {"observed_area_px": area, "projection_state": None if projected is None else projected.state}, 1.0,
        )
    if projected is not None:
        return projected
    if dynamic and th.dynamic_projection_presence and projection is not None:
        v = projected_visibility(projection, camera_confidence, frame_size, th)
        return Visibility(v.state, v.presence_eligible, False, v.reason + "_dynamic_projection", v.diagnostics,
                          v.confidence)
    return _fail("missing_instance_visibility_evidence")
