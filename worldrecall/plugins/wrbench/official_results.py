"""The published 23-model WRBench table as official rows beside a run's own models.

``data/wrbench_23model_results_v0.1.2.csv`` is the release's ``src/wrbench/data/results/
wrbench_23model_results.csv`` byte for byte (10,342 bytes; sha256 below): the **frozen paper table** of release
tag v0.1.2 (Natural-25 ``paper_main_20260608``, Hugging Face ``paper-main-20260608-repro-v1``). The release's
rolling 26-model track later corrected 2,073 per-video D5/D6 scores (``rolling-main-20260713-v3``); those
corrections are not in this table, and every imported row says so in its label.

Reproducible without the videos (tests/test_wrbench_official.py): ``Avg`` (mean of CamAlign common-yaw, D2-D6),
``gate_applicable_rate = D5_n / n_outputs``, ``low_n_flag``, every benchmark-total weighted mean and n of the
JSON's ``aggregate_checks`` and the contract's D1 reporting score, and the CSV's 12-significant-digit cells.
Not reproducible without the per-video scores (published on Hugging Face, not in the repository): any
per-model mean itself. CamAlign common-yaw comes from ``d1_camalign_v2_lite`` (2026-06-10), a scorer the
repository does not ship (its ``camera_intent`` v1 is what :mod:`.d1` reproduces); the repository README's
CamAlign column for local models (e.g. Hydra 0.999) disagrees with this CSV (0.854661).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from worldrecall.core.data import CaseFailure, finite_float
from worldrecall.core.text import read_text

PAPER_TABLE = Path(__file__).with_name("data") / "wrbench_23model_results_v0.1.2.csv"
PAPER_TABLE_SHA256 = "4767e225ae9ad8524466606139680886696069dc2bab7412444c2632790e784b"
PAPER_LABEL = "{display_name} (WRBench paper, frozen v0.1.2)"
FROZEN_NOTE = ("frozen paper table (release v0.1.2, 23 models); the rolling 26-model track later corrected "
               "per-video D5/D6 scores, not included")
INT_COLUMNS = ("n_outputs", "D1_CamPrec_n", "D1_CamAlign_common_yaw_n", "D1_CamAlign_static_hold_n", "D2_n", "D3_n",
               "D4_n", "D5_n", "D6_n")
FLOAT_COLUMNS = ("D1_CamPrec", "D1_CamAlign_common_yaw", "D1_CamAlign_static_hold", "D2", "D3", "D4", "D5", "D6",
                 "gate_applicable_rate", "Avg")


def read_paper_table(path: Path | str | None = None) -> list[dict[str, Any]]:
    """The table's rows with typed cells (``NA`` -> None, ``true``/``false`` -> bool); a malformed file or cell
    fails naming the file, the row and the column."""
    path = Path(path) if path else PAPER_TABLE
    rows = []
    try:
        raws = list(csv.DictReader(io.StringIO(read_text(path), newline="")))
    except csv.Error as e:   # a NUL byte, an unterminated quote at the end: the file, not one row
        raise CaseFailure(f"{path}: not a readable CSV ({e})") from None
    for i, raw in enumerate(raws, start=2):
        row: dict[str, Any] = dict(raw)
        try:
            for c in ("model_id", "display_name", "viewpoint_condition_type"):
                if not isinstance(raw.get(c), str) or not raw[c]:
                    raise ValueError(f"{c}: missing")
            for c in INT_COLUMNS:
                row[c] = int(raw[c])
            for c in FLOAT_COLUMNS:
                row[c] = None if raw[c] == "NA" else finite_float(raw[c])
                if raw[c] != "NA" and row[c] is None:
                    raise ValueError(f"{c}: {raw[c]!r} is not a number")
            if raw["low_n_flag"] not in ("true", "false"):
                raise ValueError(f"low_n_flag: {raw['low_n_flag']!r}")
            row["low_n_flag"] = raw["low_n_flag"] == "true"
        except (KeyError, ValueError, TypeError) as e:
            raise CaseFailure(f"{path}: line {i}: {e}") from None
        rows.append(row)
    return rows


def official_rows(path: Path | str | None = None, label: str = PAPER_LABEL) -> list[dict[str, Any]]:
    """The paper's rows in the run table's layout: ``model`` = the label, ``source`` = the frozen-table note."""
    out = []
    for r in read_paper_table(path):
        out.append({**{c: r[c] for c in (*INT_COLUMNS, *FLOAT_COLUMNS, "low_n_flag", "viewpoint_condition_type")},
                    "model": label.format(display_name=r["display_name"], model_id=r["model_id"]),
                    "model_id": r["model_id"], "source": FROZEN_NOTE, "variant": "all"})
    return out
