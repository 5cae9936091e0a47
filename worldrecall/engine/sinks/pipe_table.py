"""Markdown pipe tables without a dependency: MLflow's artifact viewer and GitHub render them as tables."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)


def _cell(v: Any, digits: int) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.{digits}g}" if abs(v) >= 1e6 or (v != 0 and abs(v) < 1e-4) else f"{round(v, digits):g}"
    # a pipe or a newline inside a cell would end it: escape the one, flatten the other
    return " ".join(str(v).split()).replace("|", "\\|")


def pipe_table(df: pd.DataFrame, digits: int = 4) -> str:
    """``df`` as a GitHub-flavoured Markdown pipe table (numbers right-aligned, NaN as an empty cell)."""
    if not len(df.columns):
        return ""
    return "\n".join([*pipe_head(df, digits), *pipe_rows(df, digits)]) + "\n"


def pipe_head(df: pd.DataFrame, digits: int = 4) -> list[str]:
    """The table's header and alignment lines (the alignment follows each column's dtype)."""
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    return ["| " + " | ".join(_cell(str(c), digits) for c in df.columns) + " |",
            "|" + "|".join("---:" if n else ":---" for n in numeric) + "|"]


def pipe_rows(df: pd.DataFrame, digits: int = 4) -> list[str]:
    """One line per row; a cell's text depends on its value alone (a row's line is the same in any table
    whose column has the same dtype)."""
    if not len(df.columns):
        return ["|  |"] * len(df)
    # column by column: a column's values come out as the Python objects a row-wise walk yields, and a float or
    # int column skips the per-cell type tests (a re-score renders ~100,000 cells)
    columns = [_column_cells(df.iloc[:, i], digits) for i in range(len(df.columns))]
    return ["| " + " | ".join(cells) + " |" for cells in zip(*columns)]


def _column_cells(col: pd.Series, digits: int) -> list[str]:
    """:func:`_cell` of each value of ``col``, as iterating the column gives it (a numpy float or int column
    gives Python numbers, as ``tolist`` does, and skips the per-cell type tests; an extension column may give
    numpy scalars, whose rounding differs: those go through :func:`_cell` one by one)."""
    dtype = col.dtype
    if isinstance(dtype, np.dtype) and dtype == np.float64:  # Python floats: NaN, or a number
        return ["" if v != v else f"{v:.{digits}g}" if abs(v) >= 1e6 or (v != 0 and abs(v) < 1e-4)
                else f"{round(v, digits):g}" for v in col.tolist()]
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":  # Python ints: no space, no pipe
        return [str(v) for v in col.tolist()]
    return [_cell(v, digits) for v in col]
