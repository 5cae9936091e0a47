"""OPIS Identity (A.10) and its diagnostics (unambiguous identity, set identity, ambiguity and swap rates).

Row value i = max(0, cos(reference embedding, observed embedding)) on matched rows only; per object the
mean over its matched windows; I_case = mean over objects with >= 1 matched window. Missing objects never
enter I (Presence penalises them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

from worldrecall.plugins.opis.rows import Row


def identity_rows(rows: Sequence[Row]) -> list[Row]:
    """Matched rows (presence == 1) with a finite identity value."""
    return [r for r in rows if r.presence == 1.0 and r.identity is not None]


def _per_object(rows: Sequence[Row], reduce: Callable[[list[float]], float]) -> float | None:
    by_obj: dict[str, list[float]] = {}
    for r in rows:
        by_obj.setdefault(r.object_id, []).append(float(r.identity))
    vals = [reduce(v) for v in by_obj.values() if v]
    return sum(vals) / len(vals) if vals else None


def _mean(v: list[float]) -> float:
    return sum(v) / len(v)


def identity_score(rows: Sequence[Row], *, use_min: bool = False) -> tuple[float, str]:
    """``(I_case, status)``: mean over objects of their mean (or min) identity; 0 with status
    ``no_evidence_zero_fallback`` (the release's label) if none."""
    v = _per_object(identity_rows(rows), min if use_min else _mean)
    return (0.0, "no_evidence_zero_fallback") if v is None else (float(v), "observed")


def swap_rate(rows: Sequence[Row]) -> float | None:
    """Fraction of consecutive windows (per tracker ``track_id``) where the attached reference identity
    changes; members of one ``ambiguity_group`` count as one identity. None without transitions."""
    by_track: dict[str, list[tuple[int, str]]] = {}
    for r in identity_rows(rows):
        if not r.observed_id or not r.track_id:
            continue
        ident = f"group:{r.ambiguity_group}" if r.ambiguity_group else r.object_id
        by_track.setdefault(str(r.track_id), []).append((r.window_ordinal, ident))
    transitions = swaps = 0
    for seq in by_track.values():
        seq.sort(key=lambda t: t[0])
        for (_, a), (_, b) in pairwise(seq):
            transitions += 1
            swaps += a != b
    return swaps / transitions if transitions else None


def identity_diagnostics(rows: Sequence[Row], *, use_min: bool = False) -> dict[str, Any]:
    """Identity over unambiguous rows, set identity per ambiguity group (mean over the group's rows in a
    window, then over windows, then over groups), ambiguity rate among identity rows, swap rate."""
    reduce = min if use_min else _mean
    idr = identity_rows(rows)
    unamb = [r for r in idr if not r.ambiguous]
    per_group_window: dict[tuple[str, str], list[float]] = {}
    for r in idr:
        if r.ambiguity_group:
            per_group_window.setdefault((r.ambiguity_group, r.window_id), []).append(float(r.identity))
    per_group: dict[str, list[float]] = {}
    for (g, _), v in per_group_window.items():
        per_group.setdefault(g, []).append(_mean(v))
    groups = [_mean(v) for v in per_group.values()]
    return {
        "identity_unambiguous": _per_object(unamb, reduce),
        "identity_set": (sum(groups) / len(groups)) if groups else None,
        "identity_ambiguity_rate": (sum(r.ambiguous for r in idr) / len(idr)) if idr else None,
        "identity_swap_rate": swap_rate(rows),
        "identity_rows": len(idr),
        "identity_objects": len({r.object_id for r in idr}),
    }
