"""Reading user-supplied text files (metadata, sheets, manifests) the same way everywhere.

Spreadsheet programs save CSVs with a UTF-8 byte-order mark, and some save Latin-1. A BOM read as plain
UTF-8 becomes part of the first column name (``"\\ufeffscene"``), so every row silently misses that column.
Here text is decoded as ``utf-8-sig`` (BOM dropped), and bytes that are not UTF-8 raise one
:class:`~worldrecall.core.data.CaseFailure` line naming the file, the line and the byte.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from worldrecall.core.data import CaseFailure


def read_text(path: Path | str) -> str:
    """The file decoded as UTF-8 (a leading BOM removed); not UTF-8 -> :class:`CaseFailure` naming file and line."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise CaseFailure(f"{p}: cannot be read ({type(e).__name__}: {e.strerror or e})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise CaseFailure(
            f"{p}: line {line}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
            "save the file as UTF-8"
        ) from None


def read_csv_rows(path: Path | str) -> list[dict[str, str]]:
    """``csv.DictReader`` rows of a UTF-8 (BOM-tolerant) CSV file.

    Raises :class:`CaseFailure` naming the file for undecodable bytes or malformed CSV.
    """
    text = read_text(path)
    try:
        return list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise CaseFailure(f"{path}: not a valid CSV file ({e})") from None  # csv.Error names the line


def read_csv_numbered(path: Path | str) -> list[tuple[int, dict[str, str]]]:
    """Like :func:`read_csv_rows`, each row paired with the file line it ends on (for one-line messages)."""
    text = read_text(path)
    out: list[tuple[int, dict[str, str]]] = []
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        for row in reader:
            out.append((reader.line_num, row))
    except csv.Error as e:
        raise CaseFailure(f"{path}: not a valid CSV file ({e})") from None
    return out


# JSON read from user files is untrusted: a 100,000-deep array exhausts the C parser's recursion guard
# (RecursionError), a 5,000-digit integer hits Python's digit limit (ValueError) and a 4,000-digit one
# parses but overflows every float/int64 it meets later. Bounds generous for any real annotation file.
JSON_MAX_DEPTH = 64
JSON_MAX_INT_DIGITS = 20   # past int64/uint64 range: never a frame index, id or count


def _bounded_int(s: str) -> int:
    digits = len(s.lstrip("-"))
    if digits > JSON_MAX_INT_DIGITS:
        raise ValueError(f"integer of {digits} digits (more than {JSON_MAX_INT_DIGITS}; "
                         "not a frame index, id or count)")
    return int(s)


def json_depth(value: Any) -> int:
    """Nesting depth of parsed JSON (a scalar is 0), computed without recursion."""
    depth, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            children = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        depth = max(depth, d)
        if depth > JSON_MAX_DEPTH:
            return depth
        stack.extend((c, d + 1) for c in children)
    return depth


def parse_json(text: str, where: Path | str) -> Any:
    """``text`` parsed as JSON, bounded in nesting depth and integer size; any problem -> :class:`CaseFailure`
    naming ``where`` (a file, or ``file: column``) in one line."""
    try:
        value = json.loads(text, parse_int=_bounded_int)
    except RecursionError:
        raise CaseFailure(f"{where}: JSON nested too deeply (limit {JSON_MAX_DEPTH} levels)") from None
    except json.JSONDecodeError as e:
        raise CaseFailure(f"{where}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except (ValueError, TypeError) as e:
        raise CaseFailure(f"{where}: not valid JSON ({' '.join(str(e).split())[:200]})") from None
    if json_depth(value) > JSON_MAX_DEPTH:
        raise CaseFailure(f"{where}: JSON nested too deeply (limit {JSON_MAX_DEPTH} levels)")
    return value


def read_json(path: Path | str) -> Any:
    """A user-supplied JSON file (UTF-8, BOM tolerated), bounded as :func:`parse_json`; every problem ->
    :class:`CaseFailure` naming the file."""
    return parse_json(read_text(path), path)


__all__ = ["JSON_MAX_DEPTH", "JSON_MAX_INT_DIGITS", "json_depth", "parse_json", "read_csv_numbered",
           "read_csv_rows", "read_json", "read_text"]
