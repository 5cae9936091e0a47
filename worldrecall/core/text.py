"""Reading user-supplied text files (metadata, sheets, manifests) the same way everywhere.

Spreadsheet programs save CSVs with a UTF-8 byte-order mark, and some save Latin-1. A BOM read as plain
UTF-8 becomes part of the first column name (``"\\ufeffscene"``), so every row silently misses that column.
Here text is decoded as ``utf-8-sig`` (BOM dropped), and bytes that are not UTF-8 raise one
:class:`~worldrecall.core.data.CaseFailure` line naming the file, the line and the byte.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

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


__all__ = ["read_csv_numbered", "read_csv_rows", "read_text"]
