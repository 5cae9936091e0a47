"""The WRBench main table: per-video values -> per-model columns, the derived columns, totals and formatting.

Per model (``build_wrbench_vnext_main_table.build_table`` and the frozen paper table's column policy):

* ``D1_CamPrec``: mean over the model's non-``uncontrolled`` rows whose D1 status is ``ok`` (a row that is not
  ok leaves the mean but counts as eligible); no value for prompt-only (API prompt-camera) models, whose
  non-``uncontrolled`` rows still count as eligible (the release's ``build_table``);
* ``D1_CamAlign_common_yaw``: yaw rows; ``D1_CamAlign_static_hold``: static rows of prompt-only models; which
  CamAlign rows count is :func:`worldrecall.plugins.wrbench.d1.camalign_counts`' switch;
* ``D2``, ``D3``, ``D4``: every row (the contract allows no null); ``D5``, ``D6``: the non-null gate-masked
  values; ``reobservation_support``: the share of rows whose shared gate is applicable;
* rows of excluded (model, camera) pairs (the contract's Hunyuan GameCraft static-hold rows) leave every
  column before aggregation, as in the frozen table (``n_outputs`` 400);
* derived: ``gate_applicable_rate = D5_n / n_outputs``, ``low_n_flag = D5_n < 10 or rate < 0.10``,
  ``Avg`` = mean of CamAlign common-yaw, D2, D3, D4, D5, D6 (the frozen table's Avg; its CamPrec is not in it).

The published CSV writes metric cells with 12 significant digits (``%.12g``), the ``Avg`` cell unrounded
(Python's shortest ``repr``), and ``NA`` for a missing value; the release's Markdown table three decimals.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import mean
from typing import Any

METRIC_COLUMNS = ("D1_CamPrec", "D1_CamAlign_common_yaw", "D1_CamAlign_static_hold", "D2", "D3", "D4", "D5", "D6")
AVG_COLUMNS = ("D1_CamAlign_common_yaw", "D2", "D3", "D4", "D5", "D6")
LOW_N_MIN = 10
LOW_RATE_MIN = 0.10
PROMPT_ONLY = "prompt-only"


def excluded(record: Mapping[str, Any], exclusions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a per-video record matches one of the (model, camera) exclusions."""
    return any(str(record.get("model")) == str(e.get("model")) and str(record.get("camera")) == str(e.get("camera"))
               for e in exclusions)


def model_columns(records: Sequence[Mapping[str, Any]], viewpoint_condition: str) -> dict[str, Any]:
    """One model's columns from its per-video records.

    A record holds ``camera`` and the per-video values ``camprec`` / ``camprec_eligible`` (bool),
    ``camalign`` (the value that counts, or None), ``d2`` … ``d6`` and ``gate`` (bool or None)."""
    prompt_only = viewpoint_condition == PROMPT_ONLY
    out: dict[str, Any] = {"n_outputs": len(records), "viewpoint_condition_type": viewpoint_condition}

    def put(col: str, vals: Iterable[Any], eligible: int | None = None) -> None:
        xs = [float(v) for v in vals if v is not None]
        out[col] = mean(xs) if xs else None
        out[f"{col}_n"] = len(xs)
        if eligible is not None:
            out[f"{col}_eligible"] = eligible

    # eligible as the release's table builder counts it: every non-uncontrolled row, prompt-only models included
    # (their rows have no target, missing_target_pose, so their n stays 0)
    d1 = [r for r in records if r.get("camera") != "uncontrolled" and r.get("camprec_eligible", True)]
    put("D1_CamPrec", [] if prompt_only else [r.get("camprec") for r in d1], len(d1))
    put("D1_CamAlign_common_yaw", [r.get("camalign") for r in records if r.get("camera") in ("yaw_LR", "yaw_RL")])
    put("D1_CamAlign_static_hold",
        [r.get("camalign") for r in records if prompt_only and r.get("camera") == "static"])
    for col, key in (("D2", "d2"), ("D3", "d3"), ("D4", "d4"), ("D5", "d5"), ("D6", "d6")):
        put(col, [r.get(key) for r in records], len(records) if col in ("D2", "D3", "D4") else None)
    gates = [bool(r["gate"]) for r in records if r.get("gate") is not None]
    out["reobservation_support"] = sum(gates) / len(gates) if gates else None
    out["reobservation_support_n"] = len(gates)
    return {**out, **derived(out)}


def derived(row: Mapping[str, Any]) -> dict[str, Any]:
    """``gate_applicable_rate``, ``low_n_flag`` and ``Avg`` of a model row, as the frozen table computes them."""
    n, d5n = int(row.get("n_outputs") or 0), int(row.get("D5_n") or 0)
    rate = d5n / n if n else None
    vals = [float(row[c]) for c in AVG_COLUMNS if row.get(c) is not None]
    return {"gate_applicable_rate": rate,
            "low_n_flag": bool(d5n < LOW_N_MIN or (rate is not None and rate < LOW_RATE_MIN)),
            "Avg": sum(vals) / len(vals) if vals else None}


def weighted_totals(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = METRIC_COLUMNS
                    ) -> dict[str, dict[str, float]]:
    """Per column, the mean of the model means weighted by their ``_n`` (= the mean over all counted videos)
    and the total n, summed in row order (the frozen JSON's ``aggregate_checks``)."""
    out = {}
    for c in columns:
        pairs = [(float(r[c]), int(r[f"{c}_n"])) for r in rows if r.get(c) is not None and int(r.get(f"{c}_n") or 0)]
        n = sum(k for _, k in pairs)
        if n:
            out[c] = {"weighted_mean": sum(v * k for v, k in pairs) / n, "n": n}
    return out


UNROUNDED_COLUMNS = frozenset({"Avg"})


def csv_cell(value: Any, column: str = "") -> str:
    """A cell as the published CSV writes it: ``NA`` for a missing value, ``true``/``false``, floats with 12
    significant digits except in ``Avg``, which the published file writes unrounded (``repr``)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "NA"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if column in UNROUNDED_COLUMNS else format(value, ".12g")
    return str(value)


def md_cell(value: Any) -> str:
    """A cell as the release's Markdown table writes it: three decimals, ``NA`` when missing."""
    return "NA" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
