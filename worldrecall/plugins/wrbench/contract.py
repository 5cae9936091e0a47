"""The release's D1-D6 metric contract (``latest_d1_d6_metric_contract.json``, schema v3) as data and checks.

Each dimension names its source field, the status field that must read ``ok`` for the row to count, whether a
null is allowed (only D5/D6, only when the re-observation gate says not applicable) and the fields that must
never stand in for the score (D2's legacy ``d2_dinov2_temporal_consistency``). :func:`require_value` applies
those rules to one record exactly as the release's ``require_metric_value`` does: a status that is not ``ok``
drops the row (None), a missing field or a forbidden fallback raises, a null where none is allowed raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = "wrbench_latest_d1_d6_metrics_v3"
GATE_FIELD = "runtime_v2_evidence_shared_oov_applicable"
LEGACY_GATE_FIELD = "runtime_v2_shared_oov_gate_applicable"  # read when the evidence field is absent
EXCLUDED_MAIN_TABLE_MODELS = ("hunyuanworld_voyager",)
# rows dropped from the D1-CamPrec reporting denominator (the contract's reporting_exclusions)
D1_REPORTING_EXCLUSIONS = ({"model": "hunyuan_game_craft", "camera": "static",
                            "reason": "unsupported_static_hold_upstream_gamecraft"},)


class ContractError(ValueError):
    """A record that breaks the contract (missing field, forbidden fallback, forbidden null, non-numeric)."""


@dataclass(frozen=True)
class DimensionSpec:
    """One contract entry: where its per-video value comes from and what may be null."""

    dimension: str
    column: str
    score_field: str
    status_field: str | None = None
    status_ok: str | None = None
    allow_null: bool = False
    forbidden_fallbacks: tuple[str, ...] = field(default_factory=tuple)


DIMENSIONS: tuple[DimensionSpec, ...] = (
    DimensionSpec("D1", "D1_camera_pose", "d1_camera_accuracy", "d1_status", "ok"),
    DimensionSpec("D1-CamAlign", "D1_camalign", "d1_camalign_score", "d1_camalign_status", "ok"),
    DimensionSpec("D2", "D2_visual_integrity", "d2_selected_visual_integrity_score",
                  forbidden_fallbacks=("d2_dinov2_temporal_consistency",)),
    DimensionSpec("D3", "D3_spatial_in", "vlm_spatial_fidelity"),
    DimensionSpec("D4", "D4_state_in", "vlm_state_fidelity"),
    DimensionSpec("D5", "D5_spatial_oov", "vlm_spatial_reasoning", allow_null=True),
    DimensionSpec("D6", "D6_state_oov", "vlm_state_reasoning", allow_null=True),
)
BY_DIMENSION = {d.dimension: d for d in DIMENSIONS}


def require_value(row: Mapping[str, Any], spec: DimensionSpec, context: str) -> float | None:
    """The contract's value of ``row`` for ``spec``: a float, or None when the row does not count.

    Order of checks as the release: forbidden fallback present -> error; status field missing -> error,
    status not ``ok`` -> None; score field missing -> error; null -> None if allowed else error;
    not a finite number -> error."""
    bad = [f for f in spec.forbidden_fallbacks if f in row]
    if bad:
        raise ContractError(f"{context}: forbidden fallback field(s) present for {spec.dimension}: {bad}")
    if spec.status_field:
        if spec.status_field not in row:
            raise ContractError(f"{context}: missing required status field {spec.status_field}")
        if str(row.get(spec.status_field)) != str(spec.status_ok):
            return None
    if spec.score_field not in row:
        raise ContractError(f"{context}: missing required metric field {spec.score_field}")
    value = row.get(spec.score_field)
    if value is None or value == "":
        if spec.allow_null:
            return None
        raise ContractError(f"{context}: metric field {spec.score_field} must be non-null")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ContractError(f"{context}: metric field {spec.score_field} is not numeric: {value!r}") from None
    if not math.isfinite(x):
        raise ContractError(f"{context}: metric field {spec.score_field} is not finite: {value!r}")
    return x


def gate_applicable(row: Mapping[str, Any]) -> bool | None:
    """The shared re-observation gate of a runtime record: the evidence field, else the legacy one; a null or
    empty value is unknown (None) and does not enter the support rate."""
    for name in (GATE_FIELD, LEGACY_GATE_FIELD):
        if name in row:
            v = row.get(name)
            return None if v is None or v == "" else bool(v)
    return None
