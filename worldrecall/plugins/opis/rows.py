"""OPIS row states: one row per (window, inventory object), plus per-window extras (A.8, errata 4 and 5).

:func:`build_rows` runs, per window: pre-match visibility (A.6) -> association of the remaining candidates
(A.7) -> final visibility -> row state, presence, identity and structure value -> extras attributability.
Presence must be read from ``Row.presence`` (None = not evaluable), never from the state label
(errata 4: in parity mode a matched static object whose geometry fails is ``evaluator_failure`` with
presence 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from worldrecall.core.data import CaseFailure
from worldrecall.plugins.opis.association import assign, associate, raw_cosine, similarity_matrix
from worldrecall.plugins.opis.records import Inventory, InventoryObject, Window
from worldrecall.plugins.opis.structure import dynamic_structure_value, static_value_from_geometry
from worldrecall.plugins.opis.thresholds import OpisThresholds
from worldrecall.plugins.opis.visibility import (
    FINAL_STATES,
    KNOWN_INVISIBLE,
    Visibility,
    classify_visibility,
    projected_visibility,
)


@dataclass
class Row:
    """One (window, inventory object) row; ``presence``/``identity``/``structure`` None = no value."""

    window_id: str
    window_ordinal: int
    frame_index: int | None
    object_id: str
    observed_id: str | None
    state: str          # not_observable | evaluator_failure | generation_failure | identity_only |
                        # dynamic_identity | scored | geometry_unavailable (default) / evaluator_failure (parity)
    presence: float | None
    identity: float | None
    structure: float | None
    structure_kind: str | None          # "static" | "dynamic" | None
    evaluation_track: str
    geometry_candidate: bool
    structure_candidate: bool
    presence_eligible: bool
    visibility_state: str
    reason: str
    match_score: float | None = None
    margin: float | None = None
    ambiguous: bool = False
    ambiguity_group: str | None = None
    track_id: str | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    visibility_confidence: float = 0.0  # the visibility decision's confidence (see visibility.Visibility)

    def to_json(self) -> dict[str, Any]:
        """JSON-able dict (for the artifacts' row table)."""
        return asdict(self)


@dataclass
class WindowExtras:
    """Extras bookkeeping of one window (A.8)."""

    window_id: str
    window_ordinal: int
    attributable: bool             # every row presence-evaluable or known outside_view/occluded
    unmatched_count: int           # confirmed extras (0 when not attributable)
    candidate_count: int           # unassigned detections whatever the attributability
    absorbed: list[str] = field(default_factory=list)  # default mode: detections of removed objects (errata 5)


def _geometry_candidate(obj: InventoryObject) -> bool:
    return obj.static_track


def build_window_rows(inventory: Inventory, window: Window, ordinal: int, th: OpisThresholds) -> tuple[list[Row], WindowExtras]:
    """Rows of one window and its extras record."""
    geo = window.geometry
    projections = geo.projections if geo is not None else {}
    cam_conf = geo.camera_confidence if geo is not None else None
    scored = bool(geo is not None and geo.scored)
    objects = inventory.objects

    # the projected test of a static candidate is pure, and asked before and after association: run it once
    projected = {o.object_id: projected_visibility(projections[o.object_id], cam_conf, window.frame_size, th)
                 for o in objects if _geometry_candidate(o) and projections.get(o.object_id) is not None}
    # A.6 before association: objects known to be invisible leave the candidate set
    pre = {
        o.object_id: classify_visibility(
            projection=projections.get(o.object_id), camera_confidence=cam_conf, frame_size=window.frame_size,
            observed_bbox=None, geometry_required=_geometry_candidate(o), frame_scored=scored, th=th,
            projected=projected.get(o.object_id),
        )
        for o in objects
    }
    candidates = [o for o in objects if pre[o.object_id].state not in FINAL_STATES]
    removed = [o for o in objects if pre[o.object_id].state in FINAL_STATES]
    match = associate(candidates, window.observations, th)
    obs_by_id = {o.observed_id: o for o in window.observations}
    unmatched, absorbed = _absorb_removed_detections(removed, list(match.unmatched_observations), obs_by_id, th)
    rows = [_object_row(o, window, ordinal, match, obs_by_id, th, projected.get(o.object_id)) for o in objects]

    attributable = bool(rows) and all(r.presence is not None or r.visibility_state in KNOWN_INVISIBLE for r in rows)
    extras = WindowExtras(
        window_id=window.window_id, window_ordinal=ordinal, attributable=attributable,
        unmatched_count=len(unmatched) if attributable else 0, candidate_count=len(unmatched), absorbed=absorbed,
    )
    return rows, extras


def _absorb_removed_detections(removed: list[InventoryObject], unmatched: list[str], obs_by_id: dict[str, Any],
                               th: OpisThresholds) -> tuple[list[str], list[str]]:
    """The extra (unmatched) observations, and those attributed to objects removed before association.

    Errata 5: in the released code a removed object's own detection becomes an unassigned (extra)
    observation. Default mode attributes such detections to the removed objects instead.
    """
    absorbed: list[str] = []
    if not th.official_parity and removed and unmatched:
        left = [obs_by_id[i] for i in unmatched]
        sim = similarity_matrix(removed, left, th)
        taken = assign(sim, th.acceptance)
        absorbed = sorted(left[j].observed_id for j in taken.values())
        unmatched = [i for i in unmatched if i not in set(absorbed)]
    return unmatched, absorbed


def _object_row(o: InventoryObject, window: Window, ordinal: int, match: Any, obs_by_id: dict[str, Any],
                th: OpisThresholds, projected: Visibility | None = None) -> Row:
    """One inventory object's row: final visibility (A.6), then presence, identity and structure
    (``projected``: the object's projected test, when the window ran it already)."""
    geo = window.geometry
    projections = geo.projections if geo is not None else {}
    cam_conf = geo.camera_confidence if geo is not None else None
    scored = bool(geo is not None and geo.scored)
    required = _geometry_candidate(o)
    observed = obs_by_id.get(match.pairs.get(o.object_id)) if o.object_id in match.pairs else None
    vis = classify_visibility(
        projection=projections.get(o.object_id), camera_confidence=cam_conf, frame_size=window.frame_size,
        observed_bbox=None if observed is None else observed.bbox, geometry_required=required,
        frame_scored=scored, th=th, dynamic=o.dynamic_track, projected=projected,
    )
    row = Row(
        window_id=window.window_id, window_ordinal=ordinal, frame_index=window.frame_index,
        object_id=o.object_id, observed_id=None if observed is None else observed.observed_id,
        state="evaluator_failure", presence=None, identity=None, structure=None, structure_kind=None,
        evaluation_track=o.evaluation_track, geometry_candidate=required,
        structure_candidate=o.dynamic_track, presence_eligible=vis.presence_eligible,
        visibility_state=vis.state, reason=vis.reason,
        match_score=match.scores.get((o.object_id, observed.observed_id)) if observed is not None else None,
        margin=match.margins.get(o.object_id), ambiguous=o.object_id in match.ambiguous,
        ambiguity_group=o.ambiguity_group, track_id=None if observed is None else observed.track_id,
        diagnostics=dict(vis.diagnostics), visibility_confidence=vis.confidence,
    )
    if not vis.presence_eligible:
        row.state = "evaluator_failure" if vis.state in ("evaluator_failure", "unreliable_camera_pose") else "not_observable"
        return row
    if observed is None:
        row.state, row.presence, row.identity, row.reason = "generation_failure", 0.0, 0.0, "expected_visible_missing"
        return row
    cos = raw_cosine(o.embedding, observed.embedding)
    row.presence, row.identity = 1.0, (None if cos is None else max(0.0, cos))
    if not required:
        row.state = "dynamic_identity" if o.dynamic_track else "identity_only"
        if o.dynamic_track and th.structure_enabled:
            _dynamic_structure(row, o, window, th)
        return row
    _static_structure(row, o, observed, vis.geometry_eligible, window, th)
    return row


def _dynamic_structure(row: Row, o: InventoryObject, window: Window, th: OpisThresholds) -> None:
    """A dynamic object's structure value from its pose / claims (the row keeps its visibility reason;
    the structure route's reason lives in its evidence)."""
    if row.ambiguous:
        row.diagnostics["structure_evidence"] = {"reason": "ambiguous_association"}
        return
    try:
        ev = dynamic_structure_value(
            category=o.category, kinematic_class=o.kinematic_class,
            pose=window.pose.get(o.object_id), claims=window.claims.get(o.object_id), th=th,
        )
    except ValueError as e:
        raise CaseFailure(f"opis window {window.window_id} object {o.object_id}: {e}") from None
    row.structure = ev["value"]
    row.structure_kind = "dynamic" if ev["value"] is not None else None
    row.diagnostics["structure_evidence"] = ev


def _static_structure(row: Row, o: InventoryObject, observed: Any, geometry_eligible: bool, window: Window,
                      th: OpisThresholds) -> None:
    """A matched static object's structure value from the window's geometry, or why it has none."""
    geo = window.geometry
    no_geometry_state = "evaluator_failure" if th.official_parity else "geometry_unavailable"
    if not geometry_eligible or geo is None or not geo.scored:
        row.state, row.reason = no_geometry_state, "geometry_unavailable_for_visible_instance"
        return
    if not th.official_parity and o.object_id not in geo.projections:
        # A.14: an object without reference queries (empty eroded support) gets no static geometry.
        # The released code still scores it from the instance correspondences when it is matched.
        row.state, row.reason = no_geometry_state, "no_reference_queries"
        return
    g = static_value_from_geometry(geo, o.bbox, observed.bbox, th)
    row.diagnostics["geometry"] = g
    if g["value"] is None:
        row.state, row.reason = no_geometry_state, g["reason"]
        return
    row.state, row.structure, row.structure_kind, row.reason = "scored", g["value"], "static", g["reason"]


def build_rows(inventory: Inventory, windows: Sequence[Window], th: OpisThresholds) -> tuple[list[Row], list[WindowExtras]]:
    """Rows of every window (window order, then inventory order) and one extras record per window."""
    rows: list[Row] = []
    extras: list[WindowExtras] = []
    for i, w in enumerate(windows):
        r, e = build_window_rows(inventory, w, i, th)
        rows.extend(r)
        extras.append(e)
    return rows, extras
