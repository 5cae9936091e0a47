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
                         "(per case: tables/cases.csv)")
    return lines
