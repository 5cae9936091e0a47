"""Values the released V3 evaluator reports, under its own names and conventions (diagnostics, never ranked).

:func:`release_values` turns our rows into the release's case summary keys: the strict/known Presence F1
variants and statuses, per-instance recall, unambiguous identity counts, identity evidence coverage, the
``v3_*`` geometry averages over scored static rows, the dynamic / all-candidate structure quality
(shrunk, raw, coverage-adjusted, coverage, counts) with all-window denominators, the score mode and its
effective weights, and ``track_metrics`` (the same per evaluation track; with more than one track and any
unassigned detection, extras are not attributable to a track — ``fp_attributable=False`` — as in the
release). Conventions follow the release: an undefined known-evidence F1 is 0.0, an identity without
evidence has status ``no_evidence_zero_fallback``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from worldrecall.plugins.opis.composite import geometric_composite
from worldrecall.plugins.opis.identity import identity_rows
from worldrecall.plugins.opis.presence import frame_scores, presence_diagnostics
from worldrecall.plugins.opis.rows import Row, WindowExtras
from worldrecall.plugins.opis.structure import StructureRow, aggregate_structure
from worldrecall.plugins.opis.thresholds import OpisThresholds

PRESENCE_POLICY = "strict_frame_presence_v1"
NO_EVIDENCE = "no_evidence_zero_fallback"


def _mean(v: Sequence[float]) -> float | None:
    return float(sum(v) / len(v)) if v else None


def _ratio(a: float, b: float) -> float | None:
    return float(a / b) if b else None


def _macro(rows: Sequence[Row], value) -> float | None:
    """Per object the mean of its finite values, then the mean over objects (the release's ``mean``)."""
    by: dict[str, list[float]] = {}
    for r in rows:
        v = value(r)
        if v is not None and math.isfinite(v):
            by.setdefault(r.object_id, []).append(float(v))
    return _mean([_mean(v) for v in by.values()])


def _unattributable(extras: Sequence[WindowExtras]) -> list[WindowExtras]:
    """Extras of a track whose unassigned detections cannot be attributed to it: none counts, none is known."""
    return [replace(e, attributable=False, unmatched_count=0, candidate_count=0) for e in extras]


def core_values(rows: Sequence[Row], extras: Sequence[WindowExtras], *, fp_attributable: bool = True) -> dict[str, Any]:
    """The release's ``aggregate_core_2d`` keys we did not already report, from rows and window extras."""
    ex = list(extras) if fp_attributable else _unattributable(extras)
    soft = presence_diagnostics(rows, ex)
    f = frame_scores(rows, ex)
    strict_macro = _mean([v for _, v in f])
    all_known = bool(ex) and all(e.attributable for e in ex)
    tp, fn, fp = soft["presence_tp"], soft["presence_fn"], soft["presence_fp"]
    um, ue = soft["presence_unverified_missing"], soft["presence_unverified_extra"]
    f1 = _ratio(2 * tp, 2 * tp + fp + fn + um + ue)
    strict_f1 = f1 if all_known else None
    has_evidence = any(r.presence is not None for r in rows)
    status = NO_EVIDENCE if not has_evidence else "partial_fp_evidence" if strict_f1 is None else "complete_fp_evidence"
    known = _ratio(2 * tp, 2 * tp + fp + fn)
    idr = identity_rows(rows)
    unamb = [r for r in idr if not r.ambiguous]
    identity = _macro(idr, lambda r: r.identity)
    presence_score = strict_macro if strict_macro is not None else 0.0
    identity_score = identity if identity is not None else 0.0
    return {
        "presence_score": presence_score,
        "presence_f1_strict": strict_f1,
        "presence_strict_frame_macro": strict_macro,
        "presence_score_known_evidence": known if known is not None else 0.0,
        "presence_score_policy": PRESENCE_POLICY,
        "presence_score_status": status,
        "presence_false_positive": fp if fp_attributable else None,
        "presence_recall_instance_macro": _macro([r for r in rows if r.presence is not None], lambda r: r.presence),
        "identity_score": identity_score,
        "identity_score_status": "observed" if identity is not None else NO_EVIDENCE,
        "identity_unambiguous_rows": len(unamb),
        "identity_unambiguous_instances": len({r.object_id for r in unamb}),
        "identity_evidence_coverage": _ratio(len(idr), sum(r.presence == 1.0 for r in rows)),
        "core_2d_score": 100.0 * math.sqrt(min(1.0, max(0.0, presence_score)) * min(1.0, max(0.0, identity_score))),
    }


def geometry_values(rows: Sequence[Row]) -> dict[str, Any]:
    """The release's ``v3_*`` projective-geometry averages over scored static rows (per object, then macro)."""
    scored = [r for r in rows if r.state == "scored" and r.structure_kind == "static"]

    def g(key: str):
        return lambda r: (r.diagnostics.get("geometry") or {}).get(key)

    candidates = [r for r in rows if r.geometry_candidate]
    return {
        "v3_reference_projective_score": _macro(scored, lambda r: r.structure),
        "v3_correspondence_coverage": _macro(scored, g("coverage")),
        "v3_inlier_ratio": _macro(scored, g("inlier_ratio")),
        "v3_mean_reprojection_error_px": _macro(scored, g("residual_px")),
        "v3_normalized_reprojection_error": _macro(scored, g("normalized_error")),
        "v3_geometry_coverage": _ratio(len(scored), len(candidates)),
        "v3_geometry_candidate_rows": float(len(candidates)),
    }


def structure_values(rows: Sequence[Row], th: OpisThresholds) -> dict[str, Any]:
    """The release's ``aggregate_structure_quality``: dynamic-only and all-candidate quality, all windows."""
    every = replace(th, official_parity=False, coverage_denominator="all_windows")
    dyn = [StructureRow(r.object_id, r.structure, r.presence_eligible, True, r.state == "scored") for r in rows if r.structure_candidate]
    cand = [StructureRow(r.object_id, r.structure, r.presence_eligible, r.structure_candidate, r.state == "scored")
            for r in rows if r.geometry_candidate or r.structure_candidate]
    d, q = aggregate_structure(dyn, every), aggregate_structure(cand, every)
    return {
        "v3_input_structure_score": d["shrunk"],
        "v3_input_structure_score_raw": d["raw"],
        "v3_input_structure_score_coverage_adjusted": d["coverage_adjusted"],
        "v3_structure_coverage": d["coverage"],
        "v3_structure_candidate_rows": float(d["n_candidate_rows"]),
        "v3_structure_valid_rows": float(d["n_valid_rows"]),
        "v3_structure_prior_only_instances": float(d["n_prior_only_objects"]),
        "v3_structural_quality_score": q["shrunk"],
        "v3_structural_quality_score_raw": q["raw"],
        "v3_structural_quality_score_coverage_adjusted": q["coverage_adjusted"],
        "v3_structural_quality_coverage": q["coverage"],
        "v3_quality_prior_only_instances": float(q["n_prior_only_objects"]),
    }


def score_track(presence: float | None, identity: float | None, third: float | None, third_name: str,
                th: OpisThresholds, *, presence_f1: float | None = None) -> dict[str, Any]:
    """The release's ``aggregate_score_tracks``: geometric composite, its mode and effective weights.

    A missing presence falls back to ``presence_f1``, then 0; a missing identity is 0; no third
    component gives the (0.2, 0.8, 0) fallback.
    """
    p = presence if presence is not None else (presence_f1 if presence_f1 is not None else 0.0)
    i = identity if identity is not None else 0.0
    score = geometric_composite(p, i, third, th)
    if third is None:
        weights = {"presence": th.pi_only_weight_presence, "identity": th.pi_only_weight_identity, third_name: 0.0}
        mode = "presence_identity_fallback"
    else:
        weights = {"presence": th.weight_presence, "identity": th.weight_identity, third_name: th.weight_structure}
        mode = f"presence_identity_{third_name}"
    return {"full_igm_score": score, "full_igm_score_mode": mode, "effective_score_weights": weights}


def release_values(rows: Sequence[Row], extras: Sequence[WindowExtras], th: OpisThresholds) -> dict[str, Any]:
    """Every release-named value of one case, ``track_metrics`` included (nested per evaluation track)."""
    out: dict[str, Any] = {}
    core = core_values(rows, extras)
    out.update(core)
    out.update(geometry_values(rows))
    structure_on = th.structure_enabled
    if structure_on:
        out.update(structure_values(rows, th))
    third_name = "structural_quality" if structure_on else "geometry"
    third = out.get("v3_structural_quality_score") if structure_on else out["v3_reference_projective_score"]
    out.update(score_track(core["presence_score"], core["identity_score"], third, third_name, th))
    tracks = sorted({r.evaluation_track for r in rows})
    fp_ok = not (len(tracks) > 1 and any(e.candidate_count > 0 for e in extras))
    per_track: dict[str, Any] = {}
    for t in tracks:
        tr = [r for r in rows if r.evaluation_track == t]
        m = core_values(tr, extras, fp_attributable=fp_ok)
        if structure_on:
            m.update(structure_values(tr, th))
        t3 = m.get("v3_structural_quality_score") if structure_on else geometry_values(tr)["v3_reference_projective_score"]
        m.update(score_track(m["presence_score"], m["identity_score"], t3, third_name, th))
        per_track[t] = m
    out["track_metrics"] = per_track
    out["track_false_positive_policy"] = (None if fp_ok else
                                          "unassigned_extras_not_attributable_to_individual_tracks")
    return out
