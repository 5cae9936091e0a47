"""What registration checks in a metric's declared value metadata: nothing about a value is assumed.

As torchmetrics refuses a metric without ``higher_is_better``, the host refuses a metric whose primary or any
entry of ``values`` lacks a declared direction (True / False / None for a diagnostic) or range ((lo, hi) /
None for unbounded); :data:`worldrecall.core.components.UNDECLARED` marks a field nobody declared.
"""

from __future__ import annotations

from worldrecall.core.components import UNDECLARED, Metric, Value


def value_problems(meta: Value) -> list[str]:
    """What is missing or malformed in one value's declaration (empty when it is complete)."""
    out = []
    if meta.higher_is_better is UNDECLARED:
        out.append("no higher_is_better (True, False, or None for a diagnostic)")
    elif meta.higher_is_better not in (True, False, None):
        out.append(f"higher_is_better must be True, False or None, not {meta.higher_is_better!r}")
    rng = meta.range
    if rng is UNDECLARED:
        out.append("no range ((lo, hi), or None when unbounded)")
    elif rng is not None and not (isinstance(rng, tuple) and len(rng) == 2
                                  and all(isinstance(x, (int, float)) for x in rng) and rng[0] <= rng[1]):
        out.append(f"range must be (lo, hi) with lo <= hi, or None, not {rng!r}")
    return out


def metric_problems(metric: type[Metric]) -> list[str]:
    """Every gap in a metric's value declarations, one line each (what registration refuses)."""
    out = []
    if not metric.primary:
        out.append("declares no primary value")
    elif metric.primary not in metric.values:
        out.append(f"value {metric.primary!r} (its primary) is not declared in `values`")
    for name, meta in metric.values.items():
        if not isinstance(meta, Value):
            out.append(f"value {name!r}: metadata must be a Value, not {type(meta).__name__}")
            continue
        out += [f"value {name!r}: {p}" for p in value_problems(meta)]
    other = metric.other_values
    if other is not None:
        if not isinstance(other, Value) or value_problems(other):
            out.append("other_values must be a fully declared Value")
        elif other.higher_is_better is not None:
            out.append("other_values must be a diagnostic (higher_is_better=None): a catch-all is never ranked")
    return out
