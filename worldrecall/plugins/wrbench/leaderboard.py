"""``wrbench.table``: the paper's main table from a run's rows (all cases and camera-gated) beside the frozen
23-model paper table.

Each (model, video) becomes one per-video record of :func:`worldrecall.plugins.wrbench.table.model_columns`:
the CamPrec score (eligible when the metric ran on it: ok or failed), the CamAlign score as counted, D2, D3-D6
and the shared gate. ``exclusions`` (default: the contract's Hunyuan GameCraft static-hold rows) leave the
table before aggregation, ``excluded_models`` (default: the contract's ``hunyuanworld_voyager``) the whole table.
The ``gated`` variant keeps only videos whose ``wrbench.camera_gate`` passed.
``official_results``: ``paper`` (the bundled frozen table), a path to the release's CSV, or "" for none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any, ClassVar

from worldrecall.core.components import Aggregator, PathParam, merge_typed
from worldrecall.core.data import ScoreRow
from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)
from worldrecall.plugins.wrbench import contract, table
from worldrecall.plugins.wrbench.official_results import official_rows

COLUMNS = ["variant", "model", "source", "viewpoint_condition_type", "n_outputs",
           *[x for c in table.METRIC_COLUMNS for x in (c, f"{c}_n")], "reobservation_support", "gate_applicable_rate",
           "low_n_flag", "Avg"]
VALUE_OF = {"wrbench.camprec": ("camprec", "score"), "wrbench.camalign": ("camalign", "score"),
            "wrbench.visual_integrity": ("d2", "score")}


def per_video(rows: list[ScoreRow]) -> dict[str, dict[str, dict[str, Any]]]:
    """model -> case -> the per-video record (camera, condition, values, gate, camera-gate pass)."""
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        if r.benchmark != "wrbench":
            continue
        rec = out[r.model].setdefault(r.case_id, {"model": r.model, "camera": r.strata.get("camera"),
                                                  "condition": r.strata.get("viewpoint_condition", ""),
                                                  "camprec_eligible": False})
        v = r.values if r.status == "ok" else {}
        if r.metric in VALUE_OF:
            key, val = VALUE_OF[r.metric]
            rec[key] = v.get(val)
            if r.metric == "wrbench.camprec" and r.status in ("ok", "failed"):
                rec["camprec_eligible"] = True
        elif r.metric == "wrbench.probes":
            for k in ("d3", "d4", "d5", "d6"):
                rec[k] = v.get(k)
            g = v.get("reobservation_support")
            rec["gate"] = None if g is None else bool(g)
        elif r.metric == "wrbench.camera_gate":
            rec["camera_gate"] = v.get("passed")
    return out


class WRBenchTable(Aggregator):
    """The WRBench main table (CSV layout of the published results) per variant, official rows appended."""

    name: ClassVar[str] = "wrbench.table"
    description: ClassVar[str] = "WRBench main table (all / camera-gated) with the frozen 23-model paper table"
    defaults: ClassVar[dict[str, Any]] = {
        "exclusions": [dict(e) for e in contract.D1_REPORTING_EXCLUSIONS],
        "excluded_models": list(contract.EXCLUDED_MAIN_TABLE_MODELS),   # the contract's main-table exclusions
        "official_results": PathParam("paper"),   # paper (bundled frozen v0.1.2 table) | a CSV path | "" (none)
        "variants": ["all", "gated"],
    }
    tables: ClassVar[dict[str, str]] = {"wrbench_table": "leaderboard"}

    def aggregate(self, rows: list[ScoreRow], params: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
        """``wrbench_table``: one row per (variant, model); the paper's models under variant ``all``."""
        p = merge_typed(self.defaults, dict(params or {}), f"{self.name}.params")
        out = []
        videos = per_video(rows)
        for variant in p["variants"]:
            for model in sorted(m for m in videos if m not in p["excluded_models"]):
                recs = [r for r in videos[model].values() if not table.excluded(r, p["exclusions"])]
                if variant == "gated":
                    recs = [r for r in recs if r.get("camera_gate") == 1.0]
                elif variant != "all":
                    raise ValueError(f"{self.name}.params.variants: expected 'all' / 'gated', got {variant!r}")
                conditions = sorted({r["condition"] for r in recs if r.get("condition")})
                cond = conditions[0] if len(conditions) == 1 else ", ".join(conditions) or "model-inferred"
                cols = table.model_columns(recs, cond)
                out.append({**cols, "variant": variant, "model": model, "source": "this run"})
        if p["official_results"]:
            path = None if p["official_results"] == "paper" else p["official_results"]
            out.extend(official_rows(path))
        return {"wrbench_table": pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in out], columns=COLUMNS)}
