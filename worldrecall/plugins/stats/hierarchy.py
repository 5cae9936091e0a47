"""Hierarchical macro averaging: case -> subcategory -> domain -> overall, and its bootstrap.

Levels are strata keys from fine to coarse (default ``subcategory`` then ``domain``); a row without a level
key falls into one shared group at that level, so a flat dataset reduces to the plain mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)


def _level_keys(df: pd.DataFrame, levels: Sequence[str]) -> list[np.ndarray]:
    keys = []
    for lvl in levels:
        col = f"strata.{lvl}"
        keys.append(df[col].fillna("").astype(str).to_numpy() if col in df else np.full(len(df), "", dtype=object))
    return keys


def macro_mean(values: np.ndarray, keys: list[np.ndarray], case_ids: Sequence[str] | None = None) -> float:
    """Mean of means up the hierarchy, NaNs skipped at every level.

    ``case_ids`` (one per value): a case id given twice is refused (``ValueError`` naming it), as the
    release's ``aggregate_hierarchy`` does — repeated observations of a case must be averaged within the
    case first, or they would silently weigh it more.
    """
    if case_ids is not None:
        check_unique_cases(case_ids)
    ok = ~np.isnan(values)
    values = values[ok]
    keys = [k[ok] for k in keys]
    if values.size == 0:
        return float("nan")
    if not keys:
        return float(values.mean())
    # group by the full path (fine..coarse); average cases, then collapse one level at a time
    paths = list(zip(*keys))
    groups: dict[tuple, list[float]] = {}
    for p, v in zip(paths, values):
        groups.setdefault(p, []).append(v)
    level = {p: float(np.mean(v)) for p, v in groups.items()}
    for depth in range(1, len(keys) + 1):
        parent: dict[tuple, list[float]] = {}
        for p, v in level.items():
            parent.setdefault(p[depth:], []).append(v)
        level = {p: float(np.mean(v)) for p, v in parent.items()}
    return float(next(iter(level.values())))


def check_unique_cases(case_ids: Sequence[str]) -> None:
    """Refuse a case id listed twice (one line naming it)."""
    seen: set[str] = set()
    for c in case_ids:
        if str(c) in seen:
            raise ValueError(f"duplicate case_id {str(c)!r}: aggregate repeated observations within each case first")
        seen.add(str(c))


def bootstrap_macro(values: np.ndarray, keys: list[np.ndarray], replicates: int, seed: int,
                    level: float = 0.95) -> tuple[float, float]:
    """Percentile CI of :func:`macro_mean` under a case bootstrap stratified by the finest level.

    Pure, so memoised on its inputs: the jobs of a sweep re-aggregate mostly unchanged groups."""
    values = np.asarray(values, dtype=float)
    key = (values.tobytes(), tuple(tuple(map(str, k)) for k in keys), int(replicates), int(seed), float(level))
    return _bootstrap_macro_memo(key)


@lru_cache(maxsize=4096)
def _bootstrap_macro_memo(key: tuple) -> tuple[float, float]:
    raw, keys_t, replicates, seed, level = key
    values = np.frombuffer(raw, dtype=float)
    keys = [np.asarray(k, dtype=object) for k in keys_t]
    return _bootstrap_macro(values, keys, replicates, seed, level)


def _bootstrap_macro(values: np.ndarray, keys: list[np.ndarray], replicates: int, seed: int,
                     level: float) -> tuple[float, float]:
    ok = ~np.isnan(values)
    values = values[ok]
    keys = [k[ok] for k in keys]
    if values.size < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    paths = list(zip(*keys)) if keys else [()] * len(values)
    strata: dict[tuple, list[int]] = {}
    for i, p in enumerate(paths):
        strata.setdefault(p, []).append(i)
    # per finest stratum: B resampled means (vectorised), then collapse the hierarchy per replicate
    stratum_means = {}
    for p, idx in strata.items():
        v = values[np.asarray(idx)]
        draw = rng.integers(0, len(v), size=(replicates, len(v)))
        stratum_means[p] = v[draw].mean(axis=1)
    level_means = stratum_means
    for depth in range(1, len(keys) + 1):
        parent: dict[tuple, list[np.ndarray]] = {}
        for p, m in level_means.items():
            parent.setdefault(p[depth:], []).append(m)
        level_means = {p: np.mean(np.stack(ms), axis=0) for p, ms in parent.items()}
    overall = next(iter(level_means.values()))
    alpha = (1.0 - level) / 2
    lo, hi = np.quantile(overall, [alpha, 1 - alpha])
    return float(lo), float(hi)
