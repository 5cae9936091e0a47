"""OPIS composite scores (A.12; O-A1, O-A4): arithmetic headline, geometric diagnostic, Core-2D, PI-only.

All inputs are in [0, 1]; outputs are x100. When Structure is undefined (no structure candidates, or the
structure stage disabled) the weights become (0.2, 0.8) on (P, I) and the case is marked PI-only.
"""

from __future__ import annotations

import math
from typing import Any

from worldrecall.plugins.opis.thresholds import OpisThresholds


def _unit(name: str, v: float) -> float:
    if not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise ValueError(f"opis composite: {name} = {v!r} is not finite in [0, 1]")
    return float(v)


def arithmetic_composite(p: float, i: float, s: float | None, th: OpisThresholds) -> float:
    """100 x (w_P P + w_I I + w_S S); PI-only 100 x (0.2 P + 0.8 I) when ``s`` is None."""
    p, i = _unit("presence", p), _unit("identity", i)
    if s is None:
        return 100.0 * (th.pi_only_weight_presence * p + th.pi_only_weight_identity * i)
    s = _unit("structure", s)
    return 100.0 * (th.weight_presence * p + th.weight_identity * i + th.weight_structure * s)


def geometric_composite(p: float, i: float, s: float | None, th: OpisThresholds) -> float:
    """100 x P^w_P I^w_I S^w_S (released code); PI-only 100 x P^0.2 I^0.8 when ``s`` is None."""
    p, i = _unit("presence", p), _unit("identity", i)
    if s is None:
        return 100.0 * p ** th.pi_only_weight_presence * i ** th.pi_only_weight_identity
    s = _unit("structure", s)
    return 100.0 * p ** th.weight_presence * i ** th.weight_identity * s ** th.weight_structure


def core2d(p: float, i: float) -> float:
    """Core-2D = 100 x sqrt(P x I)."""
    return 100.0 * math.sqrt(_unit("presence", p) * _unit("identity", i))


def composite_scores(p: float | None, i: float | None, s: float | None, th: OpisThresholds, *,
                     presence_f1: float | None = None) -> dict[str, Any]:
    """Both forms, Core-2D, the headline ``opis`` (form per ``th.effective_composite``) and the PI-only flag.

    As the release's score tracks do: a missing presence falls back to ``presence_f1`` (then 0), a missing
    identity counts 0.
    """
    if p is None:
        p = presence_f1 if presence_f1 is not None else 0.0
    if i is None:
        i = 0.0
    arith = arithmetic_composite(p, i, s, th)
    geo = geometric_composite(p, i, s, th)
    form = th.effective_composite
    return {
        "opis": arith if form == "arithmetic" else geo,
        "opis_arithmetic": arith,
        "opis_geometric": geo,
        "core2d": core2d(p, i),
        "pi_only": 1.0 if s is None else 0.0,
        "composite_form": form,
    }
