"""The ``ranking`` aggregator: every declared benchmark's ranked views, gated first, ties shared.

For each :class:`~worldrecall.core.components.Benchmark` declaration it builds two views of the headline
values: over the cases whose camera gate passed (``gated``) and over all cases (``all``, the published
protocol's number, unchanged). Models are ranked by the declared ``rank_by`` value in its declared direction.
In the gated view the headline columns are conditional means (passed cases only), but the *ranking* counts a
case whose camera failed the gate at the worst end of the value's declared range (0 for ORS, OPIS and F1, as
Scene Memory F1's own gate-zeroed mean does): a conditional mean over a model's few passing cases is a
selection of its easiest ones, and ranking by it would let a model climb by failing the gate. Cases where the
gate is not applicable count in neither way.
The models after the current leader whose difference from it has a paired 95 % bootstrap CI containing 0
share the leader's rank (``1=``) — up to the first that does not, so a rank never contradicts the means' order
— and so on down (competition ranking: after a three-way ``1=`` comes ``4``). A model
with no gated case is marked ``✗`` and listed last in the gated view; a model whose ranking value is not
applicable on any case gets ``–``. The gate pass rate is shown as a diagnostic, never used to order.
A gate that was not measured (its rows skipped or failed: no pose source, an unreliable pose, nothing to test) is
never a failed gate: a model none of whose cases has a measured gate is labelled ``not measured`` in the gated view
(not ✗), has no pass rate (not 0), and is ranked in the all-cases view with ``(gate not measured)`` after its
rank; when no model's gate was measured there is no gated view and the note says why.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import GATE_NOT_MEASURED, VIEW_COLUMNS, Aggregator, split_ref
from worldrecall.core.data import ScoreRow, finite_float
from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)
from worldrecall.core.tables import backend_signature
from worldrecall.plugins.stats.hierarchy import bootstrap_macro, macro_mean

NEVER_GATED, NOT_APPLICABLE = "✗", "–"
NOT_MEASURED_MARK = f" ({GATE_NOT_MEASURED})"  # after an all-cases rank: this model's camera gate never measured
LEGEND = ("rank 1= : shares first place (the paired 95% bootstrap CI of its difference from the leader contains "
          "0), and so on down; [a, b] = 95% bootstrap CI; ↑ higher is better, ↓ lower is better, · diagnostic "
          "(never ranked)")


def _digits(unit: str) -> int:
    return 3 if unit in ("0–1", "fraction", "") else 2


def _widen_digits(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A column whose smallest mean would print as 0 at its digits (MIND's LCM MSE, ~1e-4) gets the decimals for
    two significant digits of it, the same for every model of the view. Only means within 1e-5 of the column's
    largest count: one far below the rest (an RPE of exactly matching poses, ~1e-8) is 0 at the column's scale
    (a ranked column counting failed gates at 1 still widens for an MSE of 5e-5)."""
    values: dict[str, list[float]] = {}
    for c in cells:
        v = c["mean"]
        if isinstance(v, float) and math.isfinite(v) and v != 0.0:
            values.setdefault(c["column"], []).append(abs(v))
    small = {col: min(x for x in vs if x >= max(vs) * 1e-5) for col, vs in values.items()}
    for c in cells:
        v = small.get(c["column"])
        if v is not None and round(v, int(c["digits"])) == 0:
            c["digits"] = max(int(c["digits"]), 1 - math.floor(math.log10(v)))
    return cells


def _direction(meta: Mapping[str, Any] | None) -> str:
    hib = (meta or {}).get("higher_is_better")
    return "·" if hib is None else ("↑" if hib else "↓")


def _unit(meta: Mapping[str, Any] | None) -> str:
    meta = meta or {}
    if meta.get("unit"):
        return str(meta["unit"])
    rng = meta.get("range")
    return f"{rng[0]:g}–{rng[1]:g}" if rng else ""


def tie_ranks(order: list[str], tied_with: Any) -> dict[str, tuple[int, bool]]:
    """model -> (rank, shares it) for models listed best first: each leader shares its rank with the models
    after it that ``tied_with(leader, model)`` cannot tell apart from it, up to the first one it can (so ranks
    never contradict the order of the means); competition ranking."""
    out: dict[str, tuple[int, bool]] = {}
    remaining = list(order)
    while remaining:
        leader, rest = remaining[0], remaining[1:]
        group = [leader]
        for m in rest:
            if not tied_with(leader, m):
                break
            group.append(m)
        rank = len(out) + 1
        for m in group:
            out[m] = (rank, len(group) > 1)
        remaining = [m for m in remaining if m not in group]
    return out


class RankingAggregator(Aggregator):
    """Ranked views (gated, all) of every declared benchmark's headline values, with statistical ties."""

    name: ClassVar[str] = "ranking"
    description: ClassVar[str] = ("per declared benchmark: headline values over gated and all cases, ranked by the "
                                  "declared value; ties where the paired bootstrap CI of the difference contains 0")
    defaults: ClassVar[dict[str, Any]] = {"replicates": 2000, "seed": 0, "level": 0.95}
    tables: ClassVar[dict[str, str]] = {"ranking": "view"}
    uses_value_meta: ClassVar[bool] = True
    uses_benchmarks: ClassVar[bool] = True
    by_benchmark: ClassVar[bool] = True  # views per declared benchmark; order from the declarations, not the rows

    def aggregate(self, rows: list[ScoreRow], params: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
        p = {**self.defaults, **dict(params)}
        meta = p.get("value_meta") or {}
        recs: list[dict[str, Any]] = []
        for order, (name, decl) in enumerate(sorted((p.get("benchmarks") or {}).items())):
            mine = [r for r in rows if r.benchmark == name]
            if mine:
                recs += _benchmark_views(mine, decl, meta, p, 2 * order)
        return {"ranking": pd.DataFrame.from_records(recs, columns=VIEW_COLUMNS)}


def _case_values(rows: list[ScoreRow], refs: list[str], gate_metric: str | None = None
                 ) -> tuple[dict, dict, dict, Counter]:
    """(ref -> model -> case -> value, case -> strata, ref -> backend signature, reasons ``gate_metric`` gave no
    verdict: n/a verdicts of its ok rows, reasons of its skipped or failed rows)."""
    want = {split_ref(r): r for r in refs}
    vals: dict[str, dict[str, dict[str, float]]] = {r: {} for r in refs}
    strata: dict[str, dict[str, str]] = {}
    backends: dict[str, set[str]] = {r: set() for r in refs}
    na = Counter()
    for row in rows:
        strata.setdefault(row.case_id, dict(row.strata))
        if row.status != "ok":
            if gate_metric and row.metric == gate_metric and row.reason:
                na[_why_not(row)] += 1  # why the gate gave no verdict here (not measured, never failed)
            continue
        for value, v in row.values.items():
            ref = want.get((row.metric, value))
            if ref is None:
                continue
            x = finite_float(v)
            if x is None:
                if (row.info or {}).get("verdict"):
                    na[str(row.info["verdict"])] += 1
                continue
            vals[ref].setdefault(row.model, {})[row.case_id] = x
            backends[ref].add(backend_signature(row.backend))
    return vals, strata, {r: ",".join(sorted(b)) for r, b in backends.items()}, na


def _benchmark_views(rows: list[ScoreRow], decl: Mapping[str, Any], meta: Mapping[str, Any],
                     p: Mapping[str, Any], order: int) -> list[dict[str, Any]]:
    """One declared benchmark's view cells: the camera-gated view (when its gate ran) then all cases."""
    views = _Views(rows, decl, meta, p)
    out: list[dict[str, Any]] = []
    for k, variant in enumerate(views.variants):
        out += views.cells(variant, order + k)
    return out


class _Views:
    """Per-case values of one benchmark's declared refs, and the statistics its ranked views are made of."""

    def __init__(self, rows: list[ScoreRow], decl: Mapping[str, Any], meta: Mapping[str, Any],
                 p: Mapping[str, Any]):
        self.decl, self.meta, self.p = decl, meta, p
        self.name = decl["name"]
        self.headline = list(decl["headline"])
        self.rank_by, gate, protocol = decl["rank_by"], decl.get("gate"), decl.get("protocol_gate")
        self.gate, self.protocol = gate, protocol
        self.levels = list(decl.get("levels") or [])
        self.labels = dict(decl.get("labels") or {})
        refs = list(dict.fromkeys([*self.headline, *([gate] if gate else []), *([protocol] if protocol else [])]))
        self.vals, self.strata, self.backends, self.gate_na = _case_values(rows, refs,
                                                                           split_ref(gate)[0] if gate else None)
        models = self.models = sorted({r.model for r in rows})
        self.cases = {m: sorted({r.case_id for r in rows if r.model == m}) for m in models}
        self.passed = ({m: {c for c, x in self.vals.get(gate, {}).get(m, {}).items() if x == 1.0} for m in models}
                       if gate else {})
        rank_meta = self.rank_meta = (meta.get(split_ref(self.rank_by)[0]) or {}).get(split_ref(self.rank_by)[1], {})
        hib = self.hib = rank_meta.get("higher_is_better")
        rng = rank_meta.get("range")
        self.worst = None if hib is None or not rng else float(rng[0] if hib else rng[1])
        self.ran = {r.metric for r in rows}  # metrics with rows: a gate that did not run has no view and no pass rate
        # models whose gate has rows but no case with a verdict: "not measured", never a failed gate
        self.unmeasured = ({m for m in models if not self.vals.get(gate, {}).get(m)}
                           if gate and split_ref(gate)[0] in self.ran else set())
        self.gate_ran = bool(gate) and split_ref(gate)[0] in self.ran and len(self.unmeasured) < len(models)
        self.variants = (["gated"] if self.gate_ran else []) + ["all"]  # no gate rows (not run): no gated view

    def keys(self, case_ids: list[str]) -> list[np.ndarray]:
        return [np.asarray([self.strata.get(c, {}).get(lv, "") for c in case_ids], dtype=object)
                for lv in self.levels]

    def stat(self, ref: str, model: str, case_ids: list[str], variant: str) -> tuple[float, float, float]:
        """Macro mean of ``ref`` over ``case_ids`` with its bootstrap CI (seeded per view, model and ref)."""
        p = self.p
        by_case = self.vals.get(ref, {}).get(model, {})
        use = [c for c in case_ids if c in by_case]
        v = np.asarray([by_case[c] for c in use], dtype=float)
        if not len(v):
            return math.nan, math.nan, math.nan
        seed = zlib.crc32(f"{p['seed']}|{self.name}|{variant}|{model}|{ref}".encode())
        lo, hi = bootstrap_macro(v, self.keys(use), int(p["replicates"]), seed, float(p["level"]))
        return macro_mean(v, self.keys(use)), lo, hi

    def tied(self, variant: str, pool: dict[str, list[str]], ref: str):
        """The tie test of two models on ``ref``: a paired bootstrap CI of their difference containing 0."""
        p, by = self.p, self.vals.get(ref, {})

        def test(a: str, b: str) -> bool:
            shared = [c for c in pool[a] if c in set(pool[b]) and c in by.get(a, {}) and c in by.get(b, {})]
            if len(shared) >= 2:
                d = np.asarray([by[a][c] - by[b][c] for c in shared], dtype=float)
                if np.all(d == 0):
                    return True
                seed = zlib.crc32(f"{p['seed']}|{self.name}|{variant}|{a}|{b}".encode())
                lo, hi = bootstrap_macro(d, self.keys(shared), int(p["replicates"]), seed, float(p["level"]))
                return bool(lo <= 0.0 <= hi) if not (math.isnan(lo) or math.isnan(hi)) else False
            # fewer than 2 shared cases: no pairing; tied when the two models' own CIs overlap
            ma, la, ha = self.stat(ref, a, pool[a], variant)
            mb, lb, hb = self.stat(ref, b, pool[b], variant)
            if any(math.isnan(x) for x in (la, ha, lb, hb)):
                return ma == mb
            return not (ha < lb or hb < la)
        return test

    def rank_key(self, variant: str, pool: dict[str, list[str]]) -> tuple[str, dict[str, list[str]]]:
        """The ref (and case pool) a view ranks by; the gated view ranks a failed gate at the worst value."""
        rank_by, models, worst = self.rank_by, self.models, self.worst
        key_ref = rank_by
        if variant == "gated" and worst is not None:
            key_ref = f"{rank_by}|gate-zeroed"  # passed: the value; failed gate: the worst value; n/a: left out
            g = self.vals.get(self.gate, {})
            self.vals[key_ref] = {m: {c: (x if g.get(m, {}).get(c) == 1.0 else worst)
                                      for c, x in self.vals.get(rank_by, {}).get(m, {}).items() if c in g.get(m, {})}
                                  | {c: worst for c, y in g.get(m, {}).items() if y == 0.0}
                                  for m in models}
        key_pool = {m: self.cases[m] for m in models} if key_ref != rank_by else pool
        return key_ref, key_pool

    def cells(self, variant: str, order: int) -> list[dict[str, Any]]:
        """Every cell of one view: per model, its rank, the ranked value, the headline and the gate rates."""
        decl, name, models, passed = self.decl, self.name, self.models, self.passed
        gate, gate_ran = self.gate, self.gate_ran
        pool = {m: sorted(passed[m]) if variant == "gated" else self.cases[m] for m in models}
        key_ref, key_pool = self.rank_key(variant, pool)
        means = {m: self.stat(key_ref, m, key_pool[m], variant)[0] for m in models}
        if variant == "gated":
            means = {m: (x if passed.get(m) else math.nan) for m, x in means.items()}
        ranked = [m for m in models if not math.isnan(means[m])]
        if self.hib is not None:
            hib = self.hib
            ranked.sort(key=lambda m: (-means[m] if hib else means[m], m))
            ranks = tie_ranks(ranked, self.tied(variant, key_pool, key_ref))
        else:
            ranks = {}
        title = (decl.get("titles") or {}).get(variant) or (
            f"{name} · camera-gated view (only cases whose camera executed the reference motion)"
            if variant == "gated" else f"{name} · all cases (the published protocol's number)")
        note = _note(decl, variant, gate if gate_ran else None, self.gate_na, passed, models)
        if gate and not gate_ran:
            why = (f"not measured ({self.gate_na.most_common(1)[0][0]})" if split_ref(gate)[0] in self.ran
                   and self.gate_na else "did not run" if split_ref(gate)[0] not in self.ran else "not measured")
            note = f"no camera-gated view: {split_ref(gate)[0]} {why} · " + note
        elif gate and self.unmeasured:
            note = (f"{GATE_NOT_MEASURED} = no case of that model has a measured camera gate "
                    f"({self.gate_na.most_common(1)[0][0] if self.gate_na else 'no verdict'}): not failed · " + note)
        position = {m: i for i, m in enumerate(ranked + sorted(set(models) - set(ranked)))}
        out: list[dict[str, Any]] = []
        for m in models:
            if m in ranks:
                rank, shared = ranks[m]
                label = f"{rank}=" if shared else str(rank)
            else:
                rank, label = math.nan, (NEVER_GATED if variant == "gated" and not passed.get(m) else NOT_APPLICABLE)
                if variant == "gated" and m in self.unmeasured:
                    label = GATE_NOT_MEASURED
            if variant == "all" and m in self.unmeasured:
                label += NOT_MEASURED_MARK
            base = {"benchmark": name, "variant": variant, "order": order, "title": title, "note": note,
                    "model": m, "position": position[m], "rank": float(rank), "rank_label": label,
                    "n_cases": len(pool[m]), "backend": self.backends.get(self.rank_by, ""),
                    "n_gate_measured": self.gate_measured(m)}
            out += self.model_cells(base, m, variant, pool, key_ref, key_pool)
        return _widen_digits(out)

    def gate_measured(self, m: str) -> float:
        """The model's cases with a camera-gate verdict (passed or failed); NaN where the benchmark has no gate."""
        if not self.gate or not self.gate_ran:
            return math.nan
        by = self.vals.get(self.gate, {}).get(m, {})
        return float(sum(1 for c in self.cases[m] if c in by))

    def model_cells(self, base: dict[str, Any], m: str, variant: str, pool: dict[str, list[str]], key_ref: str,
                    key_pool: dict[str, list[str]]) -> list[dict[str, Any]]:
        """One model's cells in one view (``base`` holds what they share: rank, title, note …)."""
        meta, labels, rank_by, cases = self.meta, self.labels, self.rank_by, self.cases
        gate, protocol = self.gate, self.protocol
        out: list[dict[str, Any]] = []
        if key_ref != rank_by:
            metric, value = split_ref(rank_by)
            unit = _unit(self.rank_meta)
            mean, lo, hi = self.stat(key_ref, m, key_pool[m], variant)
            out.append({**base, "column": f"{labels.get(rank_by, value)} ranked (failed gate = {self.worst:g})",
                        "metric": metric, "unit": unit, "direction": _direction(self.rank_meta),
                        "digits": _digits(unit), "mean": mean, "ci_low": lo, "ci_high": hi})
        for ref in self.headline:
            metric, value = split_ref(ref)
            vm = (meta.get(metric) or {}).get(value)
            unit = _unit(vm)
            mean, lo, hi = self.stat(ref, m, pool[m], variant)
            out.append({**base, "column": labels.get(ref, f"{metric.split('.', 1)[-1]}:{value}"), "metric": metric,
                        "unit": unit, "direction": _direction(vm), "digits": _digits(unit),
                        "mean": mean, "ci_low": lo, "ci_high": hi})
        for ref, what in ((gate, "camera gate"), (protocol, "protocol gate")):
            if not ref or split_ref(ref)[0] not in self.ran:
                continue  # a gate that did not run has no pass rate (not 0)
            if ref == gate and m in self.unmeasured:
                continue  # nor a camera gate that was never measured for this model
            by = self.vals.get(ref, {}).get(m, {})
            judged = [c for c in cases[m] if c in by]  # a case the gate gave no verdict on is no failure
            rate = sum(1 for c in judged if by[c] == 1.0) / len(judged) if judged else math.nan
            out.append({**base, "column": labels.get(ref, f"{what} passed"), "metric": split_ref(ref)[0],
                        "unit": "fraction", "direction": "·", "digits": 2, "mean": rate,
                        "ci_low": math.nan, "ci_high": math.nan})
        if self.gate_ran and protocol and self.vals.get(protocol):
            g, q = self.vals.get(gate, {}).get(m, {}), self.vals.get(protocol, {}).get(m, {})
            differ = sum(1 for c in cases[m] if c in g and c in q and (g[c] == 1.0) != (q[c] == 1.0))
            out.append({**base, "column": "gates disagree", "metric": split_ref(protocol)[0], "unit": "cases",
                        "direction": "·", "digits": 0, "mean": float(differ), "ci_low": math.nan,
                        "ci_high": math.nan})
        return out


def _why_not(row: ScoreRow) -> str:
    """A skipped or failed gate row's reason without the metric's own name in front."""
    reason = str(row.reason)
    for prefix in (f"{row.metric} skipped: ", "score: ", "measure: "):
        reason = reason.removeprefix(prefix)
    return reason


def _note(decl: Mapping[str, Any], variant: str, gate: str | None, gate_na: Counter,
          passed: Mapping[str, set[str]], models: list[str]) -> str:
    parts = []
    if variant == "gated":
        if not any(passed.get(m) for m in models):
            reason = gate_na.most_common(1)[0][0] if gate_na else "no case passed the camera gate"
            parts.append(f"gated view empty — {reason}")
        parts.append(f"{NEVER_GATED} = no case of that model passed the camera gate: not ranked, listed last; "
                     "columns are means over passed cases, the rank counts a failed gate at the value's worst")
    elif gate:
        parts.append("every case, whether or not its camera executed the reference motion (a model that does not "
                     "move the camera can look better here)")
    parts += list(decl.get("notes") or [])
    parts.append(f"{NOT_APPLICABLE} = not applicable on every case; " + LEGEND)
    return " · ".join(parts)
