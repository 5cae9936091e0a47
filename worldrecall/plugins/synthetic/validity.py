"""The validity matrix: does each metric rank the oracle above the counterfactual it is meant to catch?

:data:`EXPECTED_CATCHES` says, per metric, which value of its score dict to compare and which
counterfactuals it must catch. :class:`ValidityMatrix` counts, per (metric, value, counterfactual), on how
many cases the oracle scores strictly better than the counterfactual; a targeted failure "holds" when
the oracle wins on every case. :func:`plot_validity` draws the table as a heat-map.

To extend the table add an entry ``"<benchmark>.<metric>": {"value": <key or [keys]>, "catches": [...]}``;
a second rule on the same metric goes into an ``"also"`` list of further ``{"value", "catches"}`` dicts;
``"reference_at_least": x`` restricts a rule to cases where the oracle's own value is at least ``x``.
Each value's direction comes from its metric's declared metadata (``value_meta``), never from its name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import Aggregator
from worldrecall.core.data import ScoreRow, finite_float
from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)
from worldrecall.core.tables import backend_signature

REFERENCE = "oracle"

EXPECTED_CATCHES: dict[str, dict] = {
    "memobench.camera_controllability": {
        "value": "score", "catches": ["frozen_camera", "wrong_trajectory"],
        "note": "rotation-only ATE: on dolly programs the true camera does not rotate, so a frozen camera "
                "ties with the oracle (both 1.0) — not caught there by construction",
    },
    "memobench.ors": {"value": "score", "catches": ["forgetful"]},
    "memobench.pixel_fidelity": {
        "value": ["R_PSNR", "R_SSIM", "R_LPIPS"],
        "catches": ["state_reset", "teleport"],
    },
    "memobench.obj_identity": {
        "value": "score", "catches": ["appearance_drift"],
        "note": "official rule keeps the top 40 % most similar patches vs frame 0; a drift confined to a small "
                "target falls in the discarded 60 %, so the oracle wins only where the target is large in R",
    },
    # every camera gate must fail the frozen camera where the oracle passes (gate neutrality: validity_gates)
    "memobench.camera_gate": {"value": "passed", "catches": ["frozen_camera"], "reference_at_least": 1.0},
    "opis.camera_gate": {"value": "passed", "catches": ["frozen_camera"], "reference_at_least": 1.0},
    "scene_memory.camera_gate": {"value": "passed", "catches": ["frozen_camera"], "reference_at_least": 1.0},
    "wrbench.camera_gate": {"value": "passed", "catches": ["frozen_camera"], "reference_at_least": 1.0},
    # WRBench: requested trajectory vs the pose role; D5/D6 under the sidecar judge test the gate and the
    # scoring (the answers are the scene truth: docs/wrbench.md), D3/D4 ask about the visible phase, which every
    # counterfactual renders truly (nothing to catch there)
    "wrbench.camprec": {"value": "score", "catches": ["frozen_camera", "wrong_trajectory"]},
    "wrbench.camalign": {
        "value": "raw_score", "catches": ["frozen_camera"],
        "note": "raw_score: under the release's table rule (status ok only) a frozen camera's weak-motion row "
                "leaves the CamAlign mean instead of scoring 0",
    },
    "wrbench.probes": {
        "value": "d5", "catches": ["forgetful", "teleport"],
        "also": [{"value": "d6", "catches": ["forgetful", "state_reset", "appearance_drift"]}],
    },
    "scene_memory.memory_scene_f1": {
        "value": "f1",
        "catches": ["hallucinated_background"],
        "also": [{"value": "gate", "catches": ["frozen_camera"], "reference_at_least": 1.0}],
    },
    # the rest of the memory_loop suite, on the same revisit pairs (half-life is reported, not ranked)
    "scene_memory.memory_revisit_fidelity": {
        "value": "fidelity", "catches": ["hallucinated_background"],
        "also": [{"value": "fidelity", "catches": ["appearance_drift"],
                  "note": "a whole-frame score: the drift recolours only the target, a few % of the pixels, "
                          "which the classical colour-histogram embedder and SSIM barely see (the paper's "
                          "DINOv2 under models=reference)"}],
    },
    "scene_memory.memory_rendering_recovery": {
        "value": "recovery", "catches": ["hallucinated_background", "appearance_drift"],
        "note": "spatial means of L*, a*, b* and a whole-frame Gram: a hallucinated background in the room's "
                "palette, or a drift of the small target, moves them little; the oracle's own target motion "
                "moves them too",
    },
    "scene_memory.memory_geometric_closure": {
        "value": "closure", "catches": ["hallucinated_background"],
        "note": "SIFT matches land mostly on the unchanged room; a pair the hallucination leaves with fewer "
                "than 12 matches is skipped rather than scored low",
    },
    "memobench.vqa": {"value": "ContinuityOfMemory", "catches": ["forgetful", "state_reset"]},
    # MIND (synthetic layout: plugins/synthetic/mind_layout.py): the GT continuation is the oracle's own video
    # re-encoded, so every frame-wise value compares a counterfactual with the true continuation frame for frame;
    # what each value cannot see is in docs/validity.md ("MIND on the synthetic suite")
    "mind.lcm": {
        "value": ["mse", "psnr", "ssim"],
        "catches": ["forgetful", "state_reset", "teleport", "hallucinated_background", "appearance_drift",
                    "wrong_trajectory", "frozen_camera"],
    },
    # whole-frame patch tokens: a camera elsewhere changes most patches (target-only failures are reported)
    "mind.dino": {"value": "mse", "catches": ["wrong_trajectory", "frozen_camera"]},
    # a model against itself on pan/tilt palindromes: moved props break it; it rewards a reset target
    "mind.mirror": {"value": ["mse", "psnr", "ssim"], "catches": ["hallucinated_background"]},
    # no-reference quality: every counterfactual is rendered equally sharp, nothing to catch (reported only)
    "mind.visual_quality": {"value": ["imaging", "aesthetic"], "catches": []},
    "mind.action": {
        "value": "rpe_rot_mean_deg", "catches": ["wrong_trajectory"],
        "also": [{"value": "rpe_rot_mean_deg", "catches": ["frozen_camera"],
                  "note": "per-step RPE after a Sim(3) fit: a frozen camera's error is the GT's own step, so on a "
                          "dolly (no rotation) it ties with the oracle — the action gate fails it there"}],
    },
    "mind.action_gate": {"value": "passed", "catches": ["frozen_camera"], "reference_at_least": 1.0},
    # OPIS: the target is a dynamic object (it moves/changes while unseen), so the published metric cannot
    # see a vanished target in Presence (A.14; the O-A3 variant thresholds.dynamic_projection_presence=true
    # does) nor a teleported one in static Structure; frozen_camera is not a failure OPIS measures
    "opis.opis": {
        "value": "structure_static_coverage_adjusted", "catches": ["hallucinated_background"],
        "also": [{
            "value": "identity", "catches": ["appearance_drift"],
            "note": "identity averages matched windows only: where the drift pushes the target's similarity "
                    "below the 0.35 acceptance it is unmatched (a dynamic object: no visibility evidence) and "
                    "drops out of Identity instead of lowering it",
        }],
    },
}

# value keys whose smaller numbers are better (anything ending in "LPIPS" counts too)

GATE_COLUMNS = ["benchmark", "gate", "model", "camera", "n_cases", "n_passed", "n_not_applicable",
                "n_same_as_oracle", "expected", "holds"]
EXPECTED_GATE = {"true": "passes exactly the oracle's cases", "frozen": "fails every case",
                 "wrong": "fails where its path does not follow the reference (reported)"}

COLUMNS = [
    "metric",
    "value",
    "counterfactual",
    "backend",
    "n_cases",
    "n_oracle_better",
    "fraction",
    "targeted",
    "holds",
    "direction",
    "note",
]


@dataclass(frozen=True)
class Expectation:
    """One rule of the table: ``metric``'s ``value`` must rank the oracle above each of ``catches``.

    ``reference_at_least``: only cases where the oracle's own value reaches this count (for gates).
    """

    metric: str
    value: str
    catches: tuple[str, ...]
    reference_at_least: float | None = None
    note: str = ""  # why a targeted failure is known not to be caught on every case


def expectations(table: Mapping[str, Mapping[str, Any]] = EXPECTED_CATCHES) -> list[Expectation]:
    """Flatten the table (lists of values, ``also`` rules) into one :class:`Expectation` per value."""
    out: list[Expectation] = []
    for metric, rule in table.items():
        for r in [rule, *rule.get("also", [])]:
            values = [r["value"]] if isinstance(r["value"], str) else list(r["value"])
            out += [
                Expectation(metric, v, tuple(r.get("catches", [])), r.get("reference_at_least"), r.get("note", ""))
                for v in values
            ]
    return out


@dataclass(frozen=True)
class _Joined:
    """Every rule on one (metric, value, oracle subset): a counterfactual appears once in the matrix, targeted
    when any rule catches it, with that rule's note."""

    metric: str
    value: str
    catches: tuple[str, ...]
    reference_at_least: float | None
    notes: Mapping[str, str]


def _joined(rules: list[Expectation]) -> list[_Joined]:
    groups: dict[tuple[str, str, float | None], dict[str, str]] = {}
    for e in rules:
        notes = groups.setdefault((e.metric, e.value, e.reference_at_least), {})
        for cf in e.catches:
            notes.setdefault(cf, e.note)
    return [_Joined(m, v, tuple(notes), ref, notes) for (m, v, ref), notes in groups.items()]


def lower_is_better(metric: str, value: str, value_meta: Mapping[str, Mapping[str, Any]],
                    extra: set[str] | frozenset[str] = frozenset()) -> bool:
    """Direction as the metric declares it (``value_meta`` from the engine); ``extra`` forces lower-is-better."""
    declared = (value_meta.get(metric) or {}).get(value) or {}
    return value in extra or declared.get("higher_is_better") is False


def undefined_from_manifest(path: Path | str) -> dict[str, set[str]]:
    """Counterfactual -> case ids where the suite manifest marks it as not defined (skipped in the matrix)."""
    manifest = json.loads(Path(path).read_text())
    out: dict[str, set[str]] = {}
    for case in manifest.get("cases", []):
        # a layout whose loader names the case otherwise (MIND: "<perspective>/<test type>/<case>") lists its ids
        ids = {case["case_id"], *((case.get("mind") or {}).get("case_ids") or [])}
        for cf, info in case.get("counterfactuals", {}).items():
            if not info.get("defined", True):
                out.setdefault(cf, set()).update(ids)
    return out




class ValidityMatrix(Aggregator):
    """Oracle-vs-counterfactual win rates per metric value; targeted failures must be caught on every case."""

    name: ClassVar[str] = "synthetic.validity"
    description: ClassVar[str] = (
        "per (metric, value, counterfactual): cases where the oracle scores strictly "
        "better; 'holds' when a targeted failure is caught on every case"
    )
    path_params: ClassVar[tuple[str, ...]] = ("manifest",)  # the suite manifest it reads is part of its key
    defaults: ClassVar[dict[str, Any]] = {
        "reference": REFERENCE,
        "lower_is_better": [],  # value keys to treat as lower-is-better beyond what the metrics declare
        "tolerance": 0.0,  # the oracle must win by more than this
        "catches": None,  # a table like EXPECTED_CATCHES to use instead of the built-in one
        "manifest": None,  # suite manifest.json: skip (case, counterfactual) pairs marked undefined
        "undefined": {},  # or give them directly: counterfactual -> [case ids]
    }
    tables: ClassVar[dict[str, str]] = {"validity": "validity", "validity_gates": "validity_gates"}
    uses_value_meta: ClassVar[bool] = True  # each value's direction, as its metric declares it
    uses_benchmarks: ClassVar[bool] = True  # each benchmark's declared camera gate (gate neutrality rows)

    plots_from = ("validity",)

    def plots(self, tables: Mapping[str, pd.DataFrame], out_dir: Path) -> list[Path]:
        """The validity heat-map (``validity.png``) when the run has a validity table."""
        df = tables.get("validity")
        if df is None or df.empty:
            return []
        out = Path(out_dir) / "validity.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(_validity_png(df.to_csv(index=False)))  # a sweep's jobs mostly share one table
        return [out]

    def aggregate(self, rows: list[ScoreRow], params: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
        """Return ``{"validity": DataFrame}`` with one row per (metric, value, counterfactual, backend)."""
        p = {**self.defaults, **dict(params)}
        ref = str(p["reference"])
        lower_extra = set(p.get("lower_is_better") or [])
        tol = float(p.get("tolerance") or 0.0)
        rules = expectations(p["catches"] or EXPECTED_CATCHES)
        skip: dict[str, set[str]] = {k: set(v) for k, v in (p.get("undefined") or {}).items()}
        if p.get("manifest"):
            for k, v in undefined_from_manifest(p["manifest"]).items():
                skip.setdefault(k, set()).update(v)

        # (metric, value, backend) -> model -> case -> number
        table: dict[tuple[str, str, str], dict[str, dict[str, float]]] = {}
        wanted = {(e.metric, e.value) for e in rules}
        for r in rows:
            if r.status != "ok":
                continue
            for value, v in r.values.items():
                if (r.metric, value) not in wanted:
                    continue
                x = finite_float(v)
                if x is None:
                    continue
                key = (r.metric, value, backend_signature(r.backend))
                table.setdefault(key, {}).setdefault(r.model, {})[r.case_id] = x

        recs = []
        for e in _joined(rules):
            for (metric, value, backend), by_model in sorted(table.items()):
                if (metric, value) != (e.metric, e.value) or ref not in by_model:
                    continue
                lower = lower_is_better(metric, value, p.get("value_meta") or {}, lower_extra)
                oracle = by_model[ref]
                if e.reference_at_least is not None:
                    oracle = {c: x for c, x in oracle.items() if x >= e.reference_at_least}
                for cf in sorted(m for m in by_model if m != ref):
                    cases = [c for c in oracle if c in by_model[cf] and c not in skip.get(cf, set())]
                    if not cases:
                        continue
                    diffs = np.array([oracle[c] - by_model[cf][c] for c in cases])
                    better = int(np.sum((-diffs if lower else diffs) > tol))
                    frac = better / len(cases)
                    targeted = cf in e.catches
                    recs.append(
                        {
                            "metric": metric,
                            "value": value,
                            "counterfactual": cf,
                            "backend": backend,
                            "n_cases": len(cases),
                            "n_oracle_better": better,
                            "fraction": frac,
                            "targeted": targeted,
                            "holds": (frac == 1.0) if targeted else None,
                            "direction": "lower" if lower else "higher",
                            "note": e.notes.get(cf, "") if targeted else "",
                        }
                    )
        return {"validity": pd.DataFrame.from_records(recs, columns=COLUMNS),
                "validity_gates": gate_neutrality(rows, p.get("benchmarks") or {}, ref, skip)}


def gate_neutrality(rows: list[ScoreRow], benchmarks: Mapping[str, Mapping[str, Any]], ref: str,
                    skip: Mapping[str, set[str]]) -> pd.DataFrame:
    """Per declared camera gate and model: passes, and on how many cases it decides as for the oracle.

    The oracle must pass every case, the frozen camera fail every case, and every counterfactual whose camera
    is the true one (it breaks something else) pass exactly where the oracle passes — a gate that reacts to
    anything but the camera would show here. A case whose gate the oracle leaves *not measured* (nothing for the
    gate to test there: a reference that does not move, a mirror-test video without a GT camera) is outside the
    gate's domain and is counted for no model; ``n_not_applicable`` counts a model's not-measured rows on the
    cases the oracle's gate did judge."""
    from worldrecall.plugins.synthetic.counterfactuals import COUNTERFACTUALS

    recs = []
    for name, decl in sorted(benchmarks.items()):
        if not decl.get("gate"):
            continue
        metric, value = str(decl["gate"]).split(":", 1)
        by_model: dict[str, dict[str, float | None]] = {}
        for r in rows:
            # a gate with nothing to test is a skipped row (camera gate not measured): not applicable here
            if r.benchmark == name and r.metric == metric and r.status in ("ok", "skipped"):
                by_model.setdefault(r.model, {})[r.case_id] = finite_float(r.values.get(value))
        oracle = by_model.get(ref)
        if oracle is None:
            continue
        unjudged = {c for c, v in oracle.items() if v is None}
        for model in sorted(by_model, key=lambda m: (m != ref, m)):
            cf = COUNTERFACTUALS.get(model)
            camera = "true" if model == ref else (cf.camera_kind if cf is not None else "?")
            cases = {c: v for c, v in by_model[model].items()
                     if c not in skip.get(model, set()) and c not in unjudged}
            n_pass = sum(1 for v in cases.values() if v == 1.0)
            same = sum(1 for c, v in cases.items() if c in oracle and (v == 1.0) == (oracle[c] == 1.0))
            n = len(cases)
            if model == ref:
                expected, holds = "passes every case", n_pass == n
            elif camera == "frozen":
                expected, holds = EXPECTED_GATE["frozen"], n_pass == 0
            elif camera == "true":
                expected, holds = EXPECTED_GATE["true"], same == n
            else:
                expected, holds = EXPECTED_GATE.get(camera, ""), None
            recs.append({"benchmark": name, "gate": decl["gate"], "model": model, "camera": camera, "n_cases": n,
                         "n_passed": n_pass, "n_not_applicable": sum(1 for v in cases.values() if v is None),
                         "n_same_as_oracle": same, "expected": expected, "holds": holds})
    return pd.DataFrame.from_records(recs, columns=GATE_COLUMNS)


@lru_cache(maxsize=8)
def _validity_png(table_csv: str) -> bytes:
    """The heat-map's PNG bytes for a validity table (memoised on the table's content)."""
    import io
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        p = plot_validity(pd.read_csv(io.StringIO(table_csv), keep_default_na=True), Path(tmp) / "v.png")
        return p.read_bytes()


def heatmap_cells(df: pd.DataFrame) -> tuple[list[str], list[str], list[Any]]:
    """The heat-map's row labels, columns (counterfactuals, the suite's order) and cells of a validity table.

    A row is one metric value: the metric's short name where no other metric of the table has it (three
    benchmarks have a ``camera_gate``), the backend only where one metric value was scored by several."""
    from worldrecall.plugins.synthetic.counterfactuals import MODELS
    from worldrecall.plugins.synthetic.heatmap import Cell

    short = {m: m.split(".", 1)[-1] for m in df["metric"].unique()}
    shared = {n for n in short.values() if list(short.values()).count(n) > 1}
    multi = df.groupby(["metric", "value"])["backend"].transform("nunique") > 1
    labels = [f"{m if short[m] in shared else short[m]}:{v}" + (f" [{b}]" if many else "")
              for m, v, b, many in zip(df["metric"], df["value"], df["backend"], multi)]
    rows = list(dict.fromkeys(labels))
    known = [m for m in MODELS if m in set(df["counterfactual"])]
    cols = known + sorted(set(df["counterfactual"]) - set(known))
    cells = []
    for label, r in zip(labels, df.itertuples()):
        outline = ("solid" if r.holds is True or r.holds == 1.0 else "dashed") if bool(r.targeted) else ""
        frac = None if pd.isna(r.fraction) else float(r.fraction)
        cells.append(Cell(rows.index(label), cols.index(r.counterfactual), frac,
                          f"{r.fraction:.2f}\n{r.n_oracle_better}/{r.n_cases}", outline))
    return rows, cols, cells


def plot_validity(df: pd.DataFrame, path: Path | str) -> Path:
    """Heat-map PNG: metric value x counterfactual, colour = fraction of cases the oracle wins,
    targeted cells outlined (solid when the expectation holds, dashed when it does not)."""
    import textwrap

    from worldrecall.plugins.synthetic.heatmap import draw_heatmap, draw_note

    path = Path(path)
    title = "Does each metric rank the oracle above the counterfactual?"
    legend = ("cell: fraction, oracle-better/cases · solid outline: targeted failure, caught on every case · dashed "
              "outline: targeted, not always caught · grey: not applicable (no comparable cases)")
    if df.empty:
        return draw_note(path, "no validity rows")
    rows, cols, cells = heatmap_cells(df)
    width_chars = max(60, int((104 * len(cols)) / 6.6))  # ~6.6 px per character of the 12 px legend font
    return draw_heatmap(path, rows, cols, cells, title=title,
                        xlabel="counterfactual model (the failure it commits)",
                        legend=textwrap.wrap(legend, width_chars), ylabel="metric:value",
                        bar_label="fraction of cases the oracle scores better")
