"""MemoBench's rounding rules, in one place.

The official pipeline rounds in two different ways, and parity depends on using the right one:

* inside the metric functions, raw per-clip values go through Python's built-in ``round(x, 4)``
  (or 3 for the camera diagnostics) — :func:`round_py`;
* the 0–100 normalisation (``*_pct``, 1 decimal) and the composite columns (2 decimals) are pandas
  ``Series.round``, i.e. numpy's round: scale by 10**d, round half to even, scale back —
  :func:`round_np`. The two disagree on some inputs (``round(0.075, 2) == 0.07`` but
  ``np.round(0.075, 2) == 0.08``), so each call site uses the one the official code uses.

Both round half to even (never half up); ``None`` and NaN pass through as ``None``.
"""

from __future__ import annotations

import math

import numpy as np

# (lo, hi) of each raw value normalised to 0-100 by the official Step 1 (`_RAW_NORM`)
NORM_RANGES: dict[str, tuple[float, float]] = {
    "TemporalScore": (0, 1),
    "AestheticScore": (0, 10),
    "ImageQuality": (0, 1),
    "GeoConsistencyMean": (0, 1),
    "GeoConsistencyMin": (0, 1),
    "ImageRewardScore": (0, 1),
    "GTRevisitSim": (0, 1),
    "ObjIdentityMean": (0, 1),
    "ObjIdentityMin": (0, 1),
    "CameraControllability": (0, 1),
}


def _missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def round_py(x: float | None, ndigits: int = 4) -> float | None:
    """Python's ``round`` (correctly rounded decimal, half to even) as a float; None/NaN -> None."""
    if _missing(x):
        return None
    return float(round(float(x), ndigits))


def round_np(x: float | None, ndigits: int) -> float | None:
    """pandas/numpy ``round``: ``rint(x * 10**d) / 10**d`` in float64; None/NaN -> None."""
    if _missing(x):
        return None
    return float(np.round(np.float64(x), ndigits))


def pct(raw: float | None, lo: float = 0, hi: float = 1) -> float | None:
    """Official 0-100 normalisation: ``round(clip((raw - lo) / (hi - lo) * 100, 0, 100), 1)``.

    Same operation order as the official pandas expression, so float results agree to the last bit.
    """
    if _missing(raw):
        return None
    v = (float(raw) - lo) / (hi - lo) * 100
    return round_np(min(max(v, 0.0), 100.0), 1)


def pct_of(name: str, raw: float | None) -> float | None:
    """:func:`pct` with the official range of the named raw value (see :data:`NORM_RANGES`)."""
    lo, hi = NORM_RANGES[name]
    return pct(raw, lo, hi)


def complement(alpha: float) -> float:
    """``1 - alpha`` without float noise, so alpha = 0.7 gives exactly the official literal 0.3."""
    return round(1.0 - float(alpha), 12)


def mix(mean_pct: float | None, min_pct: float | None, alpha: float) -> float | None:
    """Official mean/min composite ``round(alpha*mean_pct + (1-alpha)*min_pct, 2)`` (pandas round).

    A missing mean or min gives None (this module's NaN): the official pandas expression adds the two
    columns element-wise, so a clip whose min is NaN gets NaN. (Only when the whole min *column* is absent
    does the official code fall back to the mean; per clip that never happens here.)
    """
    if _missing(mean_pct) or _missing(min_pct):
        return None
    return round_np(alpha * mean_pct + complement(alpha) * min_pct, 2)


def mix_raw(mean: float | None, minimum: float | None, alpha: float) -> float | None:
    """Unrounded counterpart of :func:`mix` on the 0-100 scale, from unrounded 0-1 values (clipped).

    Missing mean or min -> None, as in :func:`mix`.
    """
    if _missing(mean) or _missing(minimum):
        return None
    m = min(max(float(mean) * 100, 0.0), 100.0)
    w = min(max(float(minimum) * 100, 0.0), 100.0)
    return alpha * m + complement(alpha) * w
