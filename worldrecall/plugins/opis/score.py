"""OPIS case scoring: the single entry point from measurement records to every value (A.6 -> A.12).

``score_case(inventory, windows, thresholds)`` is pure (no model, no I/O): visibility, association, row
states, strict frame Presence, Identity, Structure aggregations and the composites. ``row_table`` gives the
per-(window, object) rows for artifacts. Both accept the plain-JSON thresholds mapping of the metric
(``thresholds.DEFAULT_THRESHOLDS`` plus overrides).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from worldrecall.core.data import CaseFailure
from worldrecall.plugins.opis.camera_motion import summarize_camera_motion
from worldrecall.plugins.opis.composite import composite_scores
from worldrecall.plugins.opis.identity import identity_diagnostics, identity_score
from worldrecall.plugins.opis.inventory import apply_unlabeled_geometry, check_observation_dims
from worldrecall.plugins.opis.presence import presence_diagnostics, strict_presence
from worldrecall.plugins.opis.records import Inventory, Window
from worldrecall.plugins.opis.release_outputs import release_values
from worldrecall.plugins.opis.rows import Row, WindowExtras, build_rows
from worldrecall.plugins.opis.structure import StructureRow, aggregate_structure
from worldrecall.plugins.opis.thresholds import OpisThresholds, resolve


def _check_case(inventory: Inventory, windows: Sequence[Window]) -> None:
    """Refuse inputs no score can be computed from (one-line CaseFailure)."""
    if not windows:
        raise CaseFailure(f"opis case {inventory.scene_id}: no sampled windows to score")
    ids = [w.window_id for w in windows]
    if len(set(ids)) != len(ids):
        raise CaseFailure(f"opis case {inventory.scene_id}: duplicate window_id in the observations")
    oids = [o.object_id for o in inventory.objects]
    if len(set(oids)) != len(oids):
        raise CaseFailure(f"opis case {inventory.scene_id}: duplicate object_id in the inventory")
    for w in windows:
        seen = [o.observed_id for o in w.observations]
        if len(set(seen)) != len(seen):
            raise CaseFailure(f"opis window {w.window_id}: duplicate observed_id")
        if len(w.frame_size) != 2 or min(w.frame_size) <= 0:
            raise CaseFailure(f"opis window {w.window_id}: frame_size {list(w.frame_size)} is not a positive [W, H]")
    check_observation_dims(inventory, windows)


def structure_rows(rows: Sequence[Row], th: OpisThresholds) -> list[StructureRow]:
    """The rows that are structure candidates (static-geometry candidates and dynamic-track objects)."""
    return [
        StructureRow(r.object_id, r.structure, r.presence_eligible, r.structure_candidate, r.state == "scored")
        for r in rows
        if r.geometry_candidate or r.structure_candidate
    ]


def score_rows(rows: Sequence[Row], extras: Sequence[WindowExtras], th: OpisThresholds) -> dict[str, Any]:
    """Every case value from already-built rows (A.9–A.12); see :func:`score_case`."""
    p, p_status, n_p = strict_presence(rows, extras)
    i, i_status = identity_score(rows, use_min=th.ablation_min_instead_of_mean)
    cand = structure_rows(rows, th)
    st = aggregate_structure(cand, th) if cand else aggregate_structure([], th)
    st_static = aggregate_structure([r for r in cand if not r.dynamic], th)
    st_dynamic = aggregate_structure([r for r in cand if r.dynamic], th)

    variant = th.effective_structure_in_composite
    s_headline = st["raw"] if th.ablation_no_coverage_multiplier else st["coverage_adjusted"]
    s_in = {"coverage": st["coverage_adjusted"], "shrunk": st["shrunk"], "raw": st["raw"]}[variant]
    s_mode = "structure"
    if not th.structure_enabled:
        # O-A4: structure off -> PI-only; the released code silently uses the raw static-geometry mean
        s_headline = None
        s_in = st_static["raw"] if th.official_parity else None
        s_mode = "static_geometry_raw" if s_in is not None else "pi_only"
    elif s_in is None:
        s_mode = "pi_only"
    comp = composite_scores(p, i, s_in, th)

    out: dict[str, Any] = {
        "opis": comp["opis"],
        "presence": p,
        "identity": i,
        "structure": s_headline,
        "structure_raw": st["raw"],
        "structure_coverage_adjusted": st["coverage_adjusted"],
        "structure_shrunk": st["shrunk"],
        "structure_coverage": st["coverage"],
        "structure_in_composite": s_in,
        "structure_static_raw": st_static["raw"],
        "structure_static_coverage_adjusted": st_static["coverage_adjusted"],
        "structure_dynamic_raw": st_dynamic["raw"],
        "structure_dynamic_coverage_adjusted": st_dynamic["coverage_adjusted"],
        "structure_candidate_objects": float(st["n_candidate_objects"]),
        "structure_candidate_rows": float(st["n_candidate_rows"]),
        "structure_valid_rows": float(st["n_valid_rows"]),
        "opis_arithmetic": comp["opis_arithmetic"],
        "opis_geometric": comp["opis_geometric"],
        "core2d": comp["core2d"],
        "pi_only": comp["pi_only"],
        "n_windows": float(len(extras)),
        "n_presence_windows": float(n_p),
        "n_rows": float(len(rows)),
        "n_objects": float(len({r.object_id for r in rows})),
        "presence_status": p_status,
        "identity_status": i_status,
        "structure_mode": s_mode,
        "structure_variant": variant if s_mode == "structure" else s_mode,
        "composite_form": comp["composite_form"],
        "scoring_mode": "official_parity" if th.official_parity else "default",
    }
    out.update({k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                for k, v in presence_diagnostics(rows, extras).items()})
    out.update({k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                for k, v in identity_diagnostics(rows, use_min=th.ablation_min_instead_of_mean).items()})
    # the release's own names and conventions (diagnostics; our headline keys above are unchanged)
    out.update({k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                for k, v in release_values(rows, extras, th).items()})
    states: dict[str, int] = {}
    for r in rows:
        states[r.state] = states.get(r.state, 0) + 1
    for state, n in sorted(states.items()):
        out[f"rows_{state}"] = float(n)
    for k, v in out.items():
        if isinstance(v, float) and not math.isfinite(v):
            raise CaseFailure(f"opis score: {k} is not finite ({v})")
    return out


def case_rows(inventory: Inventory, windows: Sequence[Window],
              thresholds: Mapping[str, Any] | OpisThresholds | None = None) -> tuple[list[Row], list[WindowExtras]]:
    """The checked case's (window, object) rows and per-window extras: what :func:`score_case` and
    :func:`row_table` both start from (pure; neither changes them, so one build may serve both)."""
    th = resolve(thresholds)
    _check_case(inventory, windows)
    return build_rows(apply_unlabeled_geometry(inventory, th.allow_unlabeled_geometry), windows, th)


def score_case(inventory: Inventory, windows: Sequence[Window],
               thresholds: Mapping[str, Any] | OpisThresholds | None = None, *,
               built: tuple[list[Row], list[WindowExtras]] | None = None) -> dict[str, float | None | str]:
    """Score one case from its measurement records.

    Returns the headline ``opis`` (x100; arithmetic 0.2/0.4/0.4 of P, I and coverage-adjusted S by default,
    geometric of P, I, shrunk S in official parity), ``presence``, ``identity``, ``structure`` (headline:
    coverage-adjusted; raw under ``ablation_no_coverage_multiplier``; None when undefined), ``structure_raw``,
    ``structure_coverage_adjusted``, ``structure_shrunk``, ``structure_coverage``, ``opis_arithmetic``,
    ``opis_geometric``, ``core2d``, ``pi_only`` (0/1), ``n_windows`` and diagnostics (presence F1/recall/
    precision, identity unambiguous/set/ambiguity/swap, row-state counts, status strings).

    Raises :class:`CaseFailure` (one line) for inputs no score can come from: no windows, duplicate ids,
    bad frame sizes, embedding dimensions that differ from the inventory's. ``built``: the rows
    :func:`case_rows` gave for the same inputs and thresholds (skips building them again).
    """
    th = resolve(thresholds)
    rows, extras = built if built is not None else case_rows(inventory, windows, th)
    out = score_rows(rows, extras, th)
    # A.5 step 9 (diagnostic, never a gate): the release's summary over every sampled frame
    motion = summarize_camera_motion([w.geometry for w in windows])
    out.update(motion_valid=None if motion["motion_valid"] is None else float(motion["motion_valid"]),
               motion_moving_frame_fraction=motion["moving_frame_fraction"],
               motion_coverage=motion["coverage"], motion_status=motion["reason"])
    return out


def row_table(inventory: Inventory, windows: Sequence[Window],
              thresholds: Mapping[str, Any] | OpisThresholds | None = None, *,
              built: tuple[list[Row], list[WindowExtras]] | None = None) -> list[dict[str, Any]]:
    """The per-(window, object) rows as flat JSON-able dicts (diagnostics kept as a nested dict);
    ``built`` as in :func:`score_case`."""
    rows, extras = built if built is not None else case_rows(inventory, windows, thresholds)
    by_window = {e.window_id: e for e in extras}
    out = []
    for r in rows:
        d = r.to_json()
        e = by_window[r.window_id]
        d.update(extras_attributable=e.attributable, window_extras=e.unmatched_count,
                 window_candidate_extras=e.candidate_count)
        out.append(d)
    return out
