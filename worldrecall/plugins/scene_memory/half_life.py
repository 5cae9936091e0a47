"""Memory half-life: the decay of revisit fidelity against the pair's time gap (``memory_pairing.
fit_exponential_half_life``).

f(gap) = a·exp(−gap/τ) + b. With b fixed the model is linear in log space, so b is swept: 41 offsets over
[0, max(min f − 1e-6, 0)], then 41 more over ±1/40 of that range around the best; each offset's fit is a
least-squares line through (gap, log(f − b)), kept when f − b > 1e-9 everywhere, the slope is negative and
τ ≤ 10 × the gap span; the best R² wins (first on ties). Refused (``HalfLifeRefused``) with fewer than
``min_points`` finite points, a single gap, a fidelity range below 0.02, no variance, no admissible fit,
or R² below ``min_r_squared``. Half-life = τ·ln 2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


class HalfLifeRefused(ValueError):
    """The fit is refused (the release's ValueError): the metric is not applicable."""


def fit_half_life(gaps_s: Sequence[float], values: Sequence[float], *, min_points: int = 5,
                  min_r_squared: float = 0.3, min_value_range: float = 0.02,
                  max_tau_gap_multiple: float = 10.0) -> dict[str, Any]:
    """The fit: amplitude, offset, tau_s, half_life_s, r_squared, n_points."""
    g = np.asarray(gaps_s, dtype=np.float64)
    f = np.asarray(values, dtype=np.float64)
    if g.shape != f.shape:
        raise HalfLifeRefused("gaps and values must have the same shape")
    ok = np.isfinite(g) & np.isfinite(f)
    g, f = g[ok], f[ok]
    if len(g) < int(min_points):
        raise HalfLifeRefused(f"half-life fitting needs at least {min_points} pairs, got {len(g)}")
    span = float(np.ptp(g))
    if span <= 0.0:
        raise HalfLifeRefused("half-life fitting needs revisit pairs at more than one time gap")
    if float(np.ptp(f)) < float(min_value_range):
        raise HalfLifeRefused("revisit fidelity is effectively flat across time gaps, so no decay is measurable")
    total = float(np.sum((f - float(np.mean(f))) ** 2))
    if total <= 1e-12:
        raise HalfLifeRefused("revisit fidelity has no variance to fit")

    def at(offset: float) -> dict[str, Any] | None:
        r = f - offset
        if float(np.min(r)) <= 1e-9:
            return None
        slope, intercept = np.polyfit(g, np.log(r), 1)
        if slope >= 0.0:
            return None
        tau = -1.0 / float(slope)
        if tau > float(max_tau_gap_multiple) * span:
            return None
        amp = float(np.exp(intercept))
        resid = float(np.sum((f - (amp * np.exp(-g / tau) + offset)) ** 2))
        return {"amplitude": amp, "offset": float(offset), "tau_s": tau, "half_life_s": tau * math.log(2.0),
                "r_squared": 1.0 - resid / total, "n_points": len(g)}

    ceiling = max(float(np.min(f)) - 1e-6, 0.0)
    best: dict[str, Any] | None = None
    for off in np.linspace(0.0, ceiling, num=41):
        c = at(float(off))
        if c is not None and (best is None or c["r_squared"] > best["r_squared"]):
            best = c
    if best is not None:
        w = ceiling / 40.0
        for off in np.linspace(max(best["offset"] - w, 0.0), min(best["offset"] + w, ceiling), num=41):
            c = at(float(off))
            if c is not None and c["r_squared"] > best["r_squared"]:
                best = c
    if best is None:
        raise HalfLifeRefused("no decaying exponential fits the revisit pairs")
    if best["r_squared"] < float(min_r_squared):
        raise HalfLifeRefused(f"half-life fit is unreliable: R^2 {best['r_squared']:.3f} below {min_r_squared}")
    return best
