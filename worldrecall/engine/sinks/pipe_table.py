"""Markdown pipe tables without a dependency: MLflow's artifact viewer and GitHub render them as tables."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd


def _cell(v: Any, digits: int) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.{digits}g}" if abs(v) >= 1e6 or (v != 0 and abs(v) < 1e-4) else f"{round(v, digits):g}"
    # a pipe or a newline inside a cell would end it: escape the one, flatten the other
    return " ".join(str(v).split()).replace("|", "\\|")


def pipe_table(df: pd.DataFrame, digits: int = 4) -> str:
    """``df`` as a GitHub-flavoured Markdown pipe table (numbers right-aligned, NaN as an empty cell)."""
    cols = [str(c) for c in df.columns]
    if not cols:
        return ""
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    lines = ["| " + " | ".join(_cell(c, digits) for c in cols) + " |",
             "|" + "|".join("---:" if n else ":---" for n in numeric) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v, digits) for v in row) + " |")
    return "\n".join(lines) + "\n"
