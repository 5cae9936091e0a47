"""Aggregator tables as JSON for the store: a frame is cached only when it reads back exactly (values, dtypes,
the CSV the tables sink writes), so a table the format cannot carry is simply computed every time."""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from worldrecall.core.lazy import pandas as pd  # imported on first use (core/lazy.py)


def _cell(v: Any) -> Any:
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):  # numpy scalars -> Python
        v = v.item()
    if v is pd.NA or v is pd.NaT:
        return None
    return v


def _encode(df: pd.DataFrame) -> dict[str, Any] | None:
    """A frame as plain JSON, or None when it is not one this format carries (index, attrs, column names)."""
    if not isinstance(df, pd.DataFrame) or df.attrs or not isinstance(df.index, pd.RangeIndex):
        return None
    if df.index.start != 0 or df.index.step != 1 or not all(isinstance(c, str) for c in df.columns):
        return None
    if df.columns.has_duplicates or not isinstance(df.columns.name, (str, type(None))):
        return None
    return {"columns": list(df.columns), "columns_name": df.columns.name, "dtypes": [str(t) for t in df.dtypes],
            "data": [[_cell(v) for v in df[c].tolist()] for c in df.columns]}


def _decode(doc: Mapping[str, Any]) -> pd.DataFrame:
    if not doc["columns"]:
        df = pd.DataFrame()
    else:  # the names are unique (:func:`_encode`): the dict keeps their order
        df = pd.DataFrame({c: _column(vals, t) for c, t, vals in zip(doc["columns"], doc["dtypes"], doc["data"])})
    df.columns.name = doc.get("columns_name")  # e.g. an unstacked table's "status"
    return df


_DTYPES: dict[str, Any] = {}  # a dtype's name -> pandas' dtype object (looking the name up is a third of a column)


def _column(vals: list[Any], dtype: str) -> Any:
    """One stored column as ``pd.Series(vals, dtype=dtype)`` holds it, without a Series per column (a re-score
    decodes ~3,000 columns of the benchmarks it did not change): numbers as numpy arrays when every cell is a
    plain number of the column's kind, strings through the extension array the Series would build; anything
    else through the Series itself."""
    if dtype == "float64" and all(type(v) is float or type(v) is int for v in vals):
        return np.array(vals, dtype=np.float64)
    if dtype == "int64" and all(type(v) is int for v in vals):
        return np.array(vals, dtype=np.int64)
    kind = _DTYPES.get(dtype)
    if kind is None:
        kind = _DTYPES[dtype] = pd.api.types.pandas_dtype(dtype)
    if dtype == "str" and isinstance(kind, pd.api.extensions.ExtensionDtype):  # pandas 3's strings
        return pd.array(vals, dtype=kind)
    return pd.Series(vals, dtype=kind)


def _same(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if list(a.columns) != list(b.columns) or [str(t) for t in a.dtypes] != [str(t) for t in b.dtypes]:
        return False
    if a.to_csv(index=False) != b.to_csv(index=False):
        return False
    try:
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    except AssertionError:
        return False
    for c in a.columns:  # object columns: the same Python types cell by cell (1 vs 1.0 vs True)
        if a[c].dtype == object and [type(_cell(v)) for v in a[c]] != [type(v) for v in b[c]]:
            return False
    return True


_PLAIN_DTYPES = {"int64", "float64", "bool", "object", "str"}  # "str": pandas 3's default strings


def _plain(df: pd.DataFrame) -> bool:
    """Only dtypes whose cells JSON writes as they are (no categories, dates, extension types)."""
    return all(str(t) in _PLAIN_DTYPES for t in df.dtypes)


def _plain_same(a: pd.DataFrame, b: pd.DataFrame, text: str) -> bool:
    """:func:`_same` for a frame of plain dtypes: the read-back frame writes the same JSON (every cell and
    dtype), and its object cells have the same Python types (a tuple is not a list, 1 is not 1.0)."""
    back = _encode(b)
    if back is None or json.dumps(back, sort_keys=True, allow_nan=True) != text:
        return False
    if list(a.columns) != list(b.columns) or [str(t) for t in a.dtypes] != [str(t) for t in b.dtypes]:
        return False
    return all(a[c].dtype != object or [type(_cell(v)) for v in a[c]] == [type(v) for v in b[c]] for c in a.columns)




def encode_tables(tables: dict[str, Any]) -> dict[str, Any] | None:
    """Every table as JSON, or None when one does not read back exactly."""
    enc: dict[str, Any] = {}
    for name, df in tables.items():
        doc = _encode(df)
        if doc is None:
            return None
        try:
            text = json.dumps(doc, sort_keys=True, allow_nan=True)
            back = _decode(json.loads(text))
        except (TypeError, ValueError):
            return None
        if not (_plain_same(df, back, text) if _plain(df) else _same(df, back)):
            return None
        enc[name] = json.loads(text)
    return enc


PACKED = "zlib+json"  # a stored document's "format": its tables' JSON, deflated (a table is never a string)


def pack_tables(enc: dict[str, Any]) -> dict[str, Any]:
    """:func:`encode_tables`' JSON as the store keeps it: deflated and base64 text (a by-benchmark table set is a
    few hundred KB of JSON, 5-10 times that of its deflated form; every re-score and sweep job stores new ones)."""
    text = json.dumps(enc, sort_keys=True, allow_nan=True, separators=(",", ":"))
    return {"format": PACKED, "data": base64.b64encode(zlib.compress(text.encode("utf-8"), 6)).decode("ascii")}


def decode_tables(doc: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """The tables of a document: packed as the store keeps them (:func:`pack_tables`), or plain (what
    :func:`encode_tables` returns). Entries stored plain by an earlier version are never looked up: the stored
    form is part of their key."""
    if doc.get("format") == PACKED:
        doc = json.loads(zlib.decompress(base64.b64decode(doc["data"])))
    return {name: _decode(t) for name, t in doc.items()}
