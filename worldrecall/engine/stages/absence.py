"""Values that came out null on every scored row: said once after evaluating, so none is missing silently.

What a run can know beforehand (a metric skipped, an optional role without a backend) is said before
evaluating (:mod:`worldrecall.engine.stages.plan`); this catches what only the data decides — e.g. a value of
dynamic objects on a suite that has none. Diagnostics (``higher_is_better=None``) are not listed: their
null is part of what they report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from worldrecall.core.data import ScoreRow
from worldrecall.core.paths import file_safe


def all_null_values(rows: Iterable[ScoreRow], metrics: Mapping[str, Any], announced: Iterable[str] = ()) -> list[str]:
    """One line per metric whose ranked values are null on every ok row (metrics in ``announced`` left out)."""
    done = set(announced)
    ok: dict[tuple[str, str], list[ScoreRow]] = {}
    for r in rows:
        if r.status == "ok" and r.metric not in done:
            ok.setdefault((r.benchmark, r.metric), []).append(r)
    lines = []
    for (bench, metric), rs in sorted(ok.items()):
        cls = metrics.get(metric)
        names = sorted({k for r in rs for k in r.values})
        null = [k for k in names if all(r.values.get(k) is None for r in rs)
                and cls is not None and cls.value_meta(k).higher_is_better is not None]
        if null:
            lines.append(f"{metric}: {', '.join(null)} null on every one of the {len(rs)} scored {bench} rows "
                         f"(per case: tables/cases/{bench}/{file_safe(metric)}.csv)")
    return lines


def unmeasured_headlines(rows: Iterable[ScoreRow], benchmarks: Mapping[str, Any]) -> str:
    """One block naming each benchmark headline that has no value on any case of this run, with what it needs
    (the verdict of its first scored row, else the reason of its first non-ok row: the missing weights, judge, key, sidecar or file and the fix); ``""``
    when every headline has a value somewhere. Said once, at the end of the run."""
    by: dict[tuple[str, str], list[ScoreRow]] = {}
    for r in rows:
        by.setdefault((r.benchmark, r.metric), []).append(r)
    lines = []
    for bench in sorted({b for b, _ in by}):
        decl = benchmarks.get(bench)
        if decl is None:
            continue
        labels = getattr(decl, "labels", {}) or {}
        missing: dict[str, list[tuple[str, str]]] = {}  # metric -> (value, label) of its headlines without a value
        for ref in decl.headline:
            metric, value = ref.split(":", 1)
            rs = by.get((bench, metric), [])
            if not any(r.status == "ok" and r.values.get(value) is not None for r in rs):
                missing.setdefault(metric, []).append((value, labels.get(ref, value)))
        for metric, pairs in missing.items():
            rs, names = by.get((bench, metric), []), [label for _, label in pairs]
            # scored rows with the value null say why themselves (their verdict, the part naming the value); a
            # skipped row of another kind of case (a mirror video beside the clips) would name the wrong cause
            verdicts = [str(r.info["verdict"]) for r in rs if r.status == "ok" and (r.info or {}).get("verdict")]
            parts = [s.strip() for v in verdicts for s in v.split(";")]
            why = next((s for s in parts if any(s.startswith(v) for v, _ in pairs)), verdicts[0] if verdicts else "")
            why = why or next((r.reason for r in rs if r.status != "ok" and r.reason), "")
            why = why or ("no case ran it" if not rs else f"null on every case (per case: tables/cases/{bench}/{file_safe(metric)}.csv)")
            lines.append(f"  {bench} {', '.join(names)}: {why}")
    if not lines:
        return ""
    return ("headline values with no value on any case (what each needs; everything else was scored):\n"
            + "\n".join(lines))
