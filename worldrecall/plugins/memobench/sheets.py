"""MemoBench phase sheets (exit / re-enter frames per clip) and the optional real-clip availability list.

Sheets come as ``.xlsx`` (the release) or ``.csv`` (same columns; read as UTF-8, a BOM tolerated). Rows
whose ``skip`` column (header matched case-insensitively) equals "yes" case-insensitively — without
stripping whitespace — are dropped, as the official loaders do; boundary values are parsed with
``int(float(x))``. Where the official code silently drops, clamps or overwrites a row, here nothing
disappears: each problem becomes the clip's error (:attr:`PhaseRow.error`, a per-case error) or a warning
on its row (:attr:`PhaseRow.warnings`):

* a boundary cell that is not a number (or empty)          -> error (official: row dropped)
* ``re-enter <= exits`` or a negative boundary              -> error (official: clamped);
  ``checks="official"``: a warning and the official clamp
* two rows for one clip with different values               -> error (official: the later row wins);
  ``checks="official"``: the later row wins with a warning; identical duplicates are a warning either way
* a clip id that is not a number (real sheet)               -> error on a case named by the raw cell
* a boundary cell holding a boolean (``TRUE``/``FALSE``)       -> error (official: read as 1/0 silently);
  ``checks="official"``: the official 1/0 with a warning
* a CSV row with more cells than the header                -> error for the clip it names (official: the
  whole sheet is unreadable)
* a row that breaks the parser in any other way             -> error for that clip only
* an ``.xlsx`` cell right of the header (no column)         -> a warning on the clip its row names (ignored,
  as it is by pandas, which names it ``Unnamed: n``)

An ``.xlsx`` is read from the cells it holds (:func:`read_xlsx`), within the header's columns and the rows
with a value there: pandas fills every row up to the widest one, so a 5 KB file with one cell at
``XFD1048576`` would become 17 billion cells and lose every clip of the sheet. Past :data:`SHEET_MAX_CELLS`
cells with values the sheet is refused (a sheet-level error naming the file and the limit). An ``.xls`` is
sized from its cell records before pandas reads it (:func:`check_xls_size`).
"""

from __future__ import annotations

import io
import logging
import struct
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure, one_line
from worldrecall.core.digests import code_memo, content_memo
from worldrecall.core.text import read_text

log = logging.getLogger(__name__)

SYNTHETIC_SHEET = "Synthetic_ExitReenter"
REAL_SHEET = "Real_ExitReenter"
CHECKS = ("strict", "official")
# the release's sheets hold a few hundred rows of six columns; a million cells is ~100 MB in pandas
SHEET_MAX_CELLS = 1_000_000
SHEET_MAX_XML_BYTES = 256 * 2**20  # inflated size of all xlsx members together (a zip bomb stops here)


class SheetError(Exception):
    """A sheet that exists but cannot be read at all (message names the file)."""


@dataclass(frozen=True)
class PhaseRow:
    """One clip's GT phase boundaries as annotated, plus what else the sheet says about it."""

    clip_id: str
    h_gt: int
    r_gt: int
    prompt: str | None = None          # the sheet's prompt cell as the official Step 1 reads it
    frame_num: int | None = None
    error: str | None = None           # the row cannot be used: the clip's cases fail with this line
    warnings: tuple[str, ...] = ()     # one-line notes copied onto the clip's rows


def find_sheet(folder: Path, stem: str, prefer: str = "auto") -> Path | None:
    """The sheet ``folder/stem.xlsx`` or ``folder/stem.csv`` (``prefer``: auto = xlsx first, or xlsx/csv)."""
    order = {"auto": ("xlsx", "csv"), "xlsx": ("xlsx",), "csv": ("csv",)}.get(prefer)
    if order is None:
        raise ValueError(f"sheet_format must be auto, xlsx or csv, got {prefer!r}")
    for ext in order:
        p = Path(folder) / f"{stem}.{ext}"
        if p.is_file():
            return p
    return None


def read_table(path: Path) -> Any:
    """Read an xlsx/xls/csv sheet into a DataFrame; unreadable files raise :class:`SheetError`.

    CSVs are decoded as UTF-8 with an optional BOM; other bytes raise :class:`SheetError` naming the line.
    Parsed once per file state (path, size, mtime) in a process: each call gets its own copy.
    """
    path = Path(path)
    try:
        return content_memo(path, "memobench.sheet", lambda: _read_table(path)).copy()
    except OSError:  # gone or unreadable: the reader says so in its own words
        return _read_table(path)


def phase_sheet(path: Path, split: str, checks: str) -> tuple[dict[str, PhaseRow], list[str]]:
    """A phase sheet's rows by clip (:func:`parse_synthetic_sheet`, or :func:`parse_real_sheet` for ``split``
    "real") and the clips it marks skip (:func:`skipped_clips`); what the parsing logs is logged again on every
    call. Kept between runs under the file's content, this module's code and the readers' versions
    (:func:`~worldrecall.core.digests.code_memo`): a rerun neither reads the sheet nor imports pandas or openpyxl.
    A sheet that cannot be read raises :class:`SheetError` every time (never kept)."""
    path = Path(path)
    parse = parse_real_sheet if split == "real" else parse_synthetic_sheet

    def read() -> dict[str, Any]:
        said: list[str] = []
        with _HeldWarnings(said):
            table = read_table(path)
            rows = parse(table, path.name, checks)
            skipped = skipped_clips(table)
        return {"rows": [{**asdict(r), "warnings": list(r.warnings)} for r in rows.values()],
                "skipped": skipped, "said": said}

    try:
        # the messages name the sheet by its file name: part of what is kept
        fact = code_memo(path, f"memobench.phase_sheet.{split}.{checks}.{path.name}", __name__, read,
                         libraries=("pandas", "openpyxl", "xlrd"))
    except OSError:  # gone or unreadable: the reader says so in its own words
        fact = read()
    for line in fact["said"]:
        log.warning("%s", line)
    rows = [PhaseRow(**{**r, "warnings": tuple(r["warnings"])}) for r in fact["rows"]]
    return {r.clip_id: r for r in rows}, list(fact["skipped"])


class _HeldWarnings:
    """Collects what this module logs at WARNING and above into a list instead of logging it."""

    def __init__(self, into: list[str]) -> None:
        self.into = into
        self.handler = logging.Handler(logging.WARNING)
        self.handler.emit = lambda record: into.append(record.getMessage())  # type: ignore[method-assign]

    def __enter__(self) -> None:
        self.propagate, log.propagate = log.propagate, False
        log.addHandler(self.handler)

    def __exit__(self, *exc: object) -> None:
        log.removeHandler(self.handler)
        log.propagate = self.propagate


def _read_table(path: Path) -> Any:
    import pandas as pd

    if path.suffix.lower() == ".csv":
        try:
            text = read_text(path)
        except CaseFailure as e:
            raise SheetError(str(e)) from None
    try:
        if path.suffix.lower() == ".csv":
            try:
                return pd.read_csv(io.StringIO(text))
            except pd.errors.ParserError:  # a row with surplus cells: that row fails its clip, not the sheet
                return _read_csv_skipping_long_rows(text)
        if path.suffix.lower() == ".xlsx":
            return read_xlsx(path)
        if path.suffix.lower() == ".xls":
            check_xls_size(path)
        return pd.read_excel(path)
    except SheetError:
        raise
    except Exception as e:  # openpyxl/xlrd/csv errors are many; all mean "this sheet is unreadable"
        raise SheetError(f"{path}: cannot be read ({type(e).__name__}: {str(e).splitlines()[0][:160]})") from None


def read_xlsx(path: Path, max_cells: int = SHEET_MAX_CELLS) -> Any:
    """The first worksheet of an ``.xlsx`` as ``pd.read_excel(path)`` reads it, built from the cells it holds.

    pandas pads every row to the widest one and keeps every row up to the last with a value, so one stray
    cell at ``XFD1048576`` in a 5 KB file would become 17 billion cells. Here only the header's columns are
    read, and only rows with a value in them (each keeps its sheet row number as index - 2, the row
    numbering of the messages): the values the parsers read are pd.read_excel's (pandas' own cell
    conversion and column parser). Cells right of the header are no column of the sheet: each is reported
    (``df.attrs["stray_cells"]``: sheet row -> cell names; a warning on the clip that row names) and ignored.
    A sheet that holds more than ``max_cells`` cells in those rows and columns, or whose members inflate past
    :data:`SHEET_MAX_XML_BYTES`, is refused (:class:`SheetError` naming the file and the limit).
    """
    import zipfile

    from openpyxl import load_workbook
    from pandas.io.parsers import TextParser

    with zipfile.ZipFile(path) as zf:
        total = sum(i.file_size for i in zf.infolist())
    if total > SHEET_MAX_XML_BYTES:
        raise SheetError(f"{path}: members inflate to {total} bytes, past the limit of {SHEET_MAX_XML_BYTES} "
                         "bytes for a phase sheet")
    wb = load_workbook(path, read_only=True, data_only=True)
    try:
        if not wb.worksheets:
            raise SheetError(f"{path}: no worksheet")
        rows = _xlsx_rows(wb, wb.worksheets[0])  # the sheet pd.read_excel reads
    finally:
        wb.close()
    header = rows.pop(1, {})
    width = max((c for c, v in header.items() if v != ""), default=0)
    kept, stray = [], {}
    for r, cells in rows.items():
        if far := sorted(c for c, v in cells.items() if c > width and v != ""):
            stray[r] = ", ".join(f"{_column_letters(c)}{r}" for c in far[:3]) + (" …" if len(far) > 3 else "")
        if any(v != "" for c, v in cells.items() if c <= width):
            kept.append(r)
            if (len(kept) + 1) * width > max_cells:  # the header is a row of cells too
                raise SheetError(f"{path}: sheet holds {len(kept) + 1} rows (or more) of {width} columns, past the "
                                 f"limit of {max_cells} cells (sheets.SHEET_MAX_CELLS)")
    data = [[header.get(c, "") for c in range(1, width + 1)]]
    data += [[rows[r].get(c, "") for c in range(1, width + 1)] for r in kept]
    try:
        df = TextParser(data, header=0, skip_blank_lines=False).read() if width else _empty_frame()
    except Exception as e:  # noqa: BLE001 - pd.read_excel would have raised the same: the sheet is unreadable
        raise SheetError(f"{path}: cannot be read ({type(e).__name__}: {one_line(e, 160)})") from None
    if width:
        df.index = [r - 2 for r in kept]
    df.attrs["stray_cells"] = stray
    if unnamed := [cells for r, cells in stray.items() if r not in kept]:
        log.warning("%s: %d row(s) with cells right of the header's %d column(s) in rows naming no clip ignored "
                    "(first: %s)", path.name, len(unnamed), width, unnamed[0])
    return df


def check_xls_size(path: Path, max_cells: int = SHEET_MAX_CELLS) -> None:
    """Refuse an ``.xls`` whose first worksheet spans more than ``max_cells`` cells as xlrd materialises them
    (rows x columns of its cell records), or whose file is larger than :data:`SHEET_MAX_XML_BYTES`, before
    pandas reads it; :class:`SheetError` naming the file and the limit."""
    from worldrecall.formats.xls import xls_extent

    size = path.stat().st_size
    if size > SHEET_MAX_XML_BYTES:
        raise SheetError(f"{path}: {size} bytes, past the limit of {SHEET_MAX_XML_BYTES} bytes for a sheet")
    try:
        rows, cols = xls_extent(path.read_bytes())
    except (ValueError, struct.error) as e:
        raise SheetError(f"{path}: not a readable .xls ({one_line(e, 160)})") from None
    if rows * cols > max_cells:
        raise SheetError(f"{path}: sheet spans {rows} rows x {cols} columns, past the limit of {max_cells} cells "
                         "(sheets.SHEET_MAX_CELLS); remove the stray cells or save it as .csv")


def _empty_frame() -> Any:
    """An empty DataFrame: what pd.read_excel gives for a sheet without a header (the parsers refuse it)."""
    import pandas as pd

    return pd.DataFrame()


def _xlsx_rows(wb: Any, ws: Any) -> dict[int, dict[int, Any]]:
    """{sheet row: {column: value}} of the cells a worksheet holds, converted as pandas converts them.

    openpyxl's read-only rows fill every missing row and pad each row to its last cell; its sheet parser
    gives the cells as they are stored. Rows come as openpyxl yields them: a row numbered at or before the
    previous one is dropped, as there."""
    from openpyxl.worksheet._reader import WorkSheetParser

    out: dict[int, dict[int, Any]] = {}
    last = 0
    with ws._get_source() as src:
        parser = WorkSheetParser(src, ws._shared_strings, data_only=True, epoch=wb.epoch,
                                 date_formats=wb._date_formats, timedelta_formats=wb._timedelta_formats)
        for r, cells in parser.parse():
            if r <= last:
                continue
            last = r
            values = {int(c["column"]): _excel_value(c["value"], c["data_type"]) for c in cells}
            if any(v != "" for v in values.values()):
                out[r] = values
    return out


def _excel_value(value: Any, data_type: str) -> Any:
    """A cell's value as pandas' openpyxl reader converts it (empty "", error NaN, whole numbers int)."""
    if value is None:
        return ""
    if data_type == "e":
        return np.nan
    if data_type == "n":
        whole = int(value)
        return whole if whole == value else float(value)
    return value


def _column_letters(col: int) -> str:
    """Spreadsheet column name of a 1-based column number (16384 -> XFD)."""
    out = ""
    while col > 0:
        col, rem = divmod(col - 1, 26)
        out = chr(65 + rem) + out
    return out


def _read_csv_skipping_long_rows(text: str) -> Any:
    """The CSV without its rows that hold more cells than the header; those rows (file line, cells) are kept in
    ``df.attrs["long_rows"]`` so that the parsers fail the clip each one names."""
    import csv

    import pandas as pd

    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, [])
    long_rows = [(reader.line_num, row) for row in reader if len(row) > len(header)]
    df = pd.read_csv(io.StringIO(text), engine="python", on_bad_lines="skip")
    df.attrs["long_rows"] = long_rows
    return df


def _long_rows(df: Any, id_col: str, source: str) -> list[tuple[str, str]]:
    """(raw clip id, error) for each row with surplus cells (see :func:`_read_csv_skipping_long_rows`)."""
    cols = [str(c) for c in df.columns]
    k = cols.index(id_col) if id_col in cols else 0
    out = []
    for line, row in df.attrs.get("long_rows", []):
        raw = row[k].strip() if k < len(row) else ""
        out.append((raw[:200], f"{source} line {line}: {len(row)} cells for {len(cols)} columns"))
    return out


def _int(x: Any) -> int:
    return int(float(x))


def _booleans(row: Any, cols: tuple[str, ...]) -> list[str]:
    """The ``cols`` of a row that hold a boolean (an xlsx TRUE/FALSE cell; ``int(float(True))`` is 1)."""
    return [c for c in cols if c in row and isinstance(row[c], (bool, np.bool_))]


def _boolean_cells(row: Any, cols: tuple[str, ...], where: str, checks: str) -> tuple[str | None, tuple[str, ...]]:
    """(error, warnings) for boolean boundary cells: an error under strict checks, the official 1/0 with a
    warning under ``checks="official"``."""
    hits = _booleans(row, cols)
    if not hits:
        return None, ()
    cells = ", ".join(f"{c} {row[c]!r}" for c in hits)
    if checks == "official":
        note = f"{where}: {cells} is a boolean, read as {int(bool(row[hits[0]]))} as the official loader does"
        return None, (note,)
    return (f"{where}: {cells} is a boolean, not a frame number (set loader_options.phase_row_checks=official "
            "to read it as 1/0)"), ()


def _check_bounds(row: PhaseRow, where: str, checks: str) -> PhaseRow:
    """``exits``/``re-enter`` sanity: negative or r <= h is an error (strict) or a warning (official)."""
    problem = None
    if row.h_gt < 0 or row.r_gt < 0:
        problem = f"{where}: negative phase boundary (exits {row.h_gt}, re-enter {row.r_gt})"
    elif row.r_gt <= row.h_gt:
        problem = f"{where}: re-enter {row.r_gt} is not after exits {row.h_gt}"
    if problem is None:
        return row
    if checks == "official":
        return replace(row, warnings=(*row.warnings, problem + " (scored with the official clamp)"))
    return replace(row, error=problem + " (set loader_options.phase_row_checks=official to score it clamped)")


def _add(out: dict[str, PhaseRow], row: PhaseRow, where: str, checks: str) -> None:
    """Insert a row; a second row for the same clip is a warning (same values) or an error (different)."""
    prev = out.get(row.clip_id)
    if prev is None:
        out[row.clip_id] = row
        return
    same = (prev.h_gt, prev.r_gt, prev.error) == (row.h_gt, row.r_gt, row.error)
    if same:
        note = f"{where}: duplicate row for clip {row.clip_id} (same exits/re-enter)"
        out[row.clip_id] = replace(row, warnings=(*prev.warnings, *row.warnings, note))
    elif checks == "official":
        note = (f"{where}: second row for clip {row.clip_id} (exits {row.h_gt}, re-enter {row.r_gt}) "
                f"replaces (exits {prev.h_gt}, re-enter {prev.r_gt}) as in the official loader")
        out[row.clip_id] = replace(row, warnings=(*prev.warnings, *row.warnings, note))
    else:
        out[row.clip_id] = replace(prev, error=(
            f"{where}: conflicting rows for clip {row.clip_id}: (exits {prev.h_gt}, re-enter {prev.r_gt}) vs "
            f"(exits {row.h_gt}, re-enter {row.r_gt}); keep one (phase_row_checks=official: the later wins)"))


def _bad_cells(row: Any, cols: tuple[str, ...]) -> str | None:
    """The first of ``cols`` that is missing or not a number, described for a message; None when all parse."""
    for col in cols:
        if col not in row:
            return f"no {col!r} column"
        try:
            _int(row[col])
        except (ValueError, TypeError, OverflowError):
            return f"{col} {row[col]!r} is not a number"
    return None


def _require(df: Any, cols: tuple[str, ...], source: str) -> None:
    """A sheet without one of its required columns is unreadable as a whole (:class:`SheetError`)."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise SheetError(f"{source}: no {', '.join(repr(c) for c in missing)} column "
                         f"(columns: {', '.join(map(str, df.columns))})")


def parse_synthetic_sheet(df: Any, source: str = SYNTHETIC_SHEET, checks: str = "strict") -> dict[str, PhaseRow]:
    """``video_folder, exits, re-enter, frame_num, skip, prompt`` rows -> {clip id: PhaseRow}.

    ``source`` names the sheet in messages (row numbers count the header as row 1); ``checks``: strict |
    official (see the module docstring). Rows marked ``skip`` are dropped as declared. A missing
    ``video_folder`` / ``exits`` / ``re-enter`` column raises :class:`SheetError`.
    """
    if checks not in CHECKS:
        raise ValueError(f"phase_row_checks must be one of {CHECKS}, got {checks!r}")
    _require(df, ("video_folder", "exits", "re-enter"), source)
    skip_cols = [c for c in df.columns if str(c).lower() == "skip"]
    if skip_cols:
        df = df[df[skip_cols[0]].astype(str).str.lower() != "yes"]
    out: dict[str, PhaseRow] = {}
    for clip, error in _long_rows(df, "video_folder", source):
        if clip:
            _add(out, PhaseRow(clip, -1, -1, error=error), error, checks)
    for i, row in df.iterrows():
        where = f"{source} row {_row_number(i)}"
        if "video_folder" not in row or str(row["video_folder"]).strip() in ("", "nan"):
            log.warning("%s: no video_folder; row ignored (it names no clip)", where)
            continue
        clip = str(row["video_folder"]).strip()
        try:
            _synthetic_row(out, row, clip, where, checks)
        except Exception as e:  # noqa: BLE001 - one odd row fails its clip, never the sheet
            _add(out, PhaseRow(clip, -1, -1, error=f"{where}: unreadable row ({type(e).__name__}: "
                                                   f"{one_line(e, 200)})"), where, checks)
        _stray_note(out, clip, df, i, where)
    return out


def _stray_note(out: dict[str, PhaseRow], clip: str, df: Any, i: Any, where: str) -> None:
    """A warning on ``clip``'s row for the cells its sheet row holds right of the header (see :func:`read_xlsx`)."""
    cells = df.attrs.get("stray_cells", {}).get(_row_number(i))
    if cells and clip in out:
        note = f"{where}: cell(s) {cells} lie right of the sheet's header, in no column; ignored"
        out[clip] = replace(out[clip], warnings=(*out[clip].warnings, note))


def _row_number(i: Any) -> Any:
    """The sheet row of DataFrame index ``i`` (header = row 1)."""
    try:
        return int(i) + 2
    except (TypeError, ValueError):
        return i


def _synthetic_row(out: dict[str, PhaseRow], row: Any, clip: str, where: str, checks: str) -> None:
    """One synthetic sheet row into ``out`` (see :func:`parse_synthetic_sheet`)."""
    bad = _bad_cells(row, ("exits", "re-enter"))
    if bad:
        _add(out, PhaseRow(clip, -1, -1, error=f"{where}: {bad}"), where, checks)
        return
    booled, warnings = _boolean_cells(row, ("exits", "re-enter"), where, checks)
    if booled:
        _add(out, PhaseRow(clip, -1, -1, error=booled), where, checks)
        return
    frame_num = None
    if "frame_num" in row and str(row["frame_num"]).strip() not in ("", "nan"):
        try:
            frame_num = _int(row["frame_num"])
        except (ValueError, TypeError, OverflowError):
            warnings = (*warnings, f"{where}: frame_num {row['frame_num']!r} is not a number (ignored)")
    # str() of an empty cell is "nan": the official Step 1 then scores the prompt "nan"
    prompt = str(row.get("prompt", "")).strip()
    pr = PhaseRow(clip, _int(row["exits"]), _int(row["re-enter"]), prompt=prompt, frame_num=frame_num,
                  warnings=warnings)
    _add(out, _check_bounds(pr, where, checks), where, checks)


def skipped_clips(df: Any) -> list[str]:
    """Clip ids (``video_folder``) of the rows a synthetic sheet marks ``skip`` = yes (official rule)."""
    skip_cols = [c for c in df.columns if str(c).lower() == "skip"]
    if not skip_cols or "video_folder" not in df.columns:
        return []
    marked = df[df[skip_cols[0]].astype(str).str.lower() == "yes"]
    return [str(v).strip() for v in marked["video_folder"]]


def parse_real_sheet(df: Any, source: str = REAL_SHEET, checks: str = "strict") -> dict[str, PhaseRow]:
    """``id, exit, reenter`` rows -> {zero-padded id: PhaseRow} (no prompt column in the real sheet); a missing
    column raises :class:`SheetError`."""
    if checks not in CHECKS:
        raise ValueError(f"phase_row_checks must be one of {CHECKS}, got {checks!r}")
    _require(df, ("id", "exit", "reenter"), source)
    out: dict[str, PhaseRow] = {}
    for raw, error in _long_rows(df, "id", source):
        try:
            clip = str(_int(raw)).zfill(3)
        except (ValueError, TypeError, OverflowError):
            clip = raw
        if clip:
            _add(out, PhaseRow(clip, -1, -1, error=error), error, checks)
    for i, row in df.iterrows():
        where = f"{source} row {_row_number(i)}"
        if "id" not in row or str(row["id"]).strip() in ("", "nan"):
            log.warning("%s: no id; row ignored (it names no clip)", where)
            continue
        raw = str(row["id"]).strip()
        try:
            _real_row(out, row, where, checks)
        except Exception as e:  # noqa: BLE001 - one odd row fails its clip, never the sheet
            _add(out, PhaseRow(raw[:120], -1, -1, error=f"{where}: unreadable row ({type(e).__name__}: "
                                                       f"{one_line(e, 200)})"), where, checks)
            continue
        try:
            clip = str(_int(row["id"])).zfill(3)
        except (ValueError, TypeError, OverflowError):
            clip = raw
        _stray_note(out, clip, df, i, where)
    return out


def _real_row(out: dict[str, PhaseRow], row: Any, where: str, checks: str) -> None:
    """One real sheet row into ``out`` (see :func:`parse_real_sheet`)."""
    try:
        clip = str(_int(row["id"])).zfill(3)
    except (ValueError, TypeError, OverflowError):
        raw = str(row["id"]).strip()
        _add(out, PhaseRow(raw, -1, -1, error=f"{where}: id {raw!r} is not a number"), where, checks)
        return
    bad = _bad_cells(row, ("exit", "reenter"))
    if bad:
        _add(out, PhaseRow(clip, -1, -1, error=f"{where}: {bad}"), where, checks)
        return
    booled, warnings = _boolean_cells(row, ("id", "exit", "reenter"), where, checks)
    if booled:
        _add(out, PhaseRow(clip, -1, -1, error=booled), where, checks)
        return
    pr = PhaseRow(clip, _int(row["exit"]), _int(row["reenter"]), prompt=None, warnings=warnings)
    _add(out, _check_bounds(pr, where, checks), where, checks)


def parse_real_selection(df: Any) -> set[str]:
    """``ID, Availability`` -> ids whose Availability is "yes" (stripped, case-insensitive)."""
    keep = df[df["Availability"].astype(str).str.strip().str.lower() == "yes"]
    ids: set[str] = set()
    for v in keep["ID"]:
        try:
            ids.add(str(_int(v)).zfill(3))
        except (ValueError, TypeError, OverflowError):  # "inf" or 1e400 name no clip either
            continue
    return ids


def find_real_selection(data_root: Path) -> Path | None:
    """The optional availability filter ``Real_Selected.{xls,xlsx,csv}`` at the data root."""
    for ext in ("xls", "xlsx", "csv"):
        p = Path(data_root) / f"Real_Selected.{ext}"
        if p.is_file():
            return p
    return None
