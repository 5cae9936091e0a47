"""MemoBench VQA question banks: reading, validating, finding a case's bank, writing the official CSV.

A bank is ``{scene}-{video_id}-questions.csv`` with one row and the columns ``scene, video_id,
Start Questions, Evaluation on ground truth, Evaluation on failure, Revised Evaluation on failure,
Final questions``; every cell after ``video_id`` is a JSON list. Only ``Final questions`` is asked.
Bank scene names keep underscores (``Zen_Garden``) where clip folders drop them (``ZenGarden_010``), so
a case is matched by (scene without underscores, case-insensitive; integer video id), and also through
the ``folder`` column of ``failure-cases.csv`` when that file is present.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldrecall.core.data import CaseFailure
from worldrecall.formats.safe_json import parse_json

log = logging.getLogger(__name__)

from worldrecall.formats.memobench_vqa import (
    BANK_COLUMNS,
    DIMENSIONS,
    FAILURE_CASES,
    FAILURE_COLUMNS,  # noqa: F401  (re-exported: part of the bank API)
    POLARITIES,
)

_BANK_NAME = re.compile(r"^(.+)-(\d+)-questions\.csv$")
_CLIP_NAME = re.compile(r"^(.+?)_0*(\d+)$")


def bank_filename(scene: str, video_id: int | str) -> str:
    """``Zen_Garden``, 10 -> ``Zen_Garden-10-questions.csv``."""
    return f"{scene}-{int(video_id)}-questions.csv"


def normalise_scene(scene: str) -> str:
    """Scene names compared without underscores/spaces/hyphens and case: ``Zen_Garden`` == ``ZenGarden``."""
    return re.sub(r"[_\s-]", "", scene).lower()


def split_clip(clip: str) -> tuple[str, int] | None:
    """``ZenGarden_010`` -> (``ZenGarden``, 10); None when the name has no ``_<digits>`` suffix."""
    m = _CLIP_NAME.match(clip)
    return (m.group(1), int(m.group(2))) if m else None


def polarity_is_positive(polarity: Any) -> bool | None:
    """Case-insensitive polarity: True/False, or None when it is neither Positive nor Negative."""
    p = str(polarity or "").strip().lower()
    return True if p == "positive" else False if p == "negative" else None


@dataclass
class QuestionBank:
    """One clip's bank: its final questions (validated) and the raw cell text they came from."""

    path: Path
    scene: str
    video_id: int
    questions: list[dict[str, Any]]
    raw_final: str
    columns: dict[str, Any] = field(default_factory=dict)  # every JSON column, for audits

    @property
    def sha256(self) -> str:
        """Hash of the final question list as asked (keys the measurement cache)."""
        return hashlib.sha256(self.raw_final.encode()).hexdigest()

    def counts(self) -> dict[str, int]:
        """Questions per official dimension name."""
        out = {d: 0 for d in DIMENSIONS}
        for q in self.questions:
            out[q["Dimension"]] = out.get(q["Dimension"], 0) + 1
        return out


def read_bank(path: Path | str) -> QuestionBank:
    """Read and validate a bank file; any problem raises :class:`CaseFailure` naming the file."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise CaseFailure(f"{path}: cannot be read as a question bank ({type(e).__name__}: {e})") from None
    if len(rows) != 1:
        raise CaseFailure(f"{path}: a question bank has exactly one row, found {len(rows)}")
    row = rows[0]
    if None in row:  # csv.DictReader files surplus cells under the key None
        raise CaseFailure(f"{path}: the row has {len(row) - 1 + len(row[None])} cells for {len(row) - 1} columns")
    short = [k for k, v in row.items() if v is None]
    if short:
        raise CaseFailure(f"{path}: the row has no cell for column {short[0]!r} (fewer cells than columns)")
    if "Final questions" not in row:
        raise CaseFailure(f"{path}: no 'Final questions' column (columns: {', '.join(map(str, row))})"[:400])
    columns: dict[str, Any] = {}
    for col in BANK_COLUMNS[2:]:
        if row.get(col) is None:
            continue
        # bounded depth and integer size: a 100,000-deep list or a 5,000-digit ID is refused, not a crash
        columns[col] = parse_json(row[col], f"{path}: column {col!r}") if row[col].strip() else []
    video_id = _video_id(row.get("video_id"), path)
    questions = validate_questions(columns["Final questions"], path)
    return QuestionBank(
        path=path,
        scene=str(row.get("scene", "")),
        video_id=video_id,
        questions=questions,
        raw_final=row["Final questions"],
        columns=columns,
    )


def _video_id(cell: Any, path: Path) -> int:
    """The ``video_id`` cell as ``int(float(cell))`` (as before); empty, text, NaN or inf -> CaseFailure."""
    try:
        return int(float(cell or ""))
    except (ValueError, OverflowError, TypeError):
        raise CaseFailure(f"{path}: video_id {str(cell)[:60]!r} is not a number") from None


def validate_questions(items: Any, path: Path | str) -> list[dict[str, Any]]:
    """Each question needs an integer ID (unique), a known Dimension, a Positive/Negative polarity (any
    case; non-canonical case is warned about; an absent field is warned about and left to the scorer) and a
    Question text."""
    name = Path(path).name
    if not isinstance(items, list):
        raise CaseFailure(f"{name}: 'Final questions' is not a JSON list")
    if not items:
        raise CaseFailure(f"{name}: 'Final questions' is empty (nothing to ask)")
    seen: set[int] = set()
    out = []
    for i, q in enumerate(items):
        if not isinstance(q, dict):
            raise CaseFailure(f"{name}: question #{i + 1} is not a JSON object")
        qid = q.get("ID")
        if isinstance(qid, bool) or not isinstance(qid, int):
            raise CaseFailure(f"{name}: question #{i + 1} has a non-integer ID {str(qid)[:80]!r}")
        if qid in seen:
            raise CaseFailure(f"{name}: question ID {qid} appears twice")
        seen.add(qid)
        if not isinstance(q.get("Dimension"), str) or q["Dimension"] not in DIMENSIONS:
            raise CaseFailure(
                f"{name}: question ID {qid} has unknown Dimension {str(q.get('Dimension'))[:80]!r} "
                f"(expected one of {', '.join(DIMENSIONS)})"
            )
        pol = q.get("Dimension Polarity")
        if "Dimension Polarity" in q and not isinstance(pol, str):
            raise CaseFailure(f"{name}: question ID {qid} has polarity {str(pol)[:80]!r} (expected Positive or "
                              "Negative)")
        if "Dimension Polarity" not in q:
            # kept: the official scorer reads a missing field as Positive (official_parity); the default
            # scorer fails the case before asking the judge (VQAMetric.measure)
            log.warning("%s: question ID %s has no 'Dimension Polarity'", name, qid)
        elif polarity_is_positive(pol) is None:
            raise CaseFailure(
                f"{name}: question ID {qid} has polarity {pol!r} (expected Positive or Negative)"
            )
        elif pol not in POLARITIES:
            log.warning(
                "%s: question ID %s has polarity %r; read case-insensitively (the official scorer treats "
                "anything but exact 'Positive' as Negative)",
                name,
                qid,
                pol,
            )
        if not isinstance(q.get("Question"), str) or not q["Question"].strip():
            raise CaseFailure(f"{name}: question ID {qid} has no Question text")
        out.append(dict(q))
    return out


def read_failure_cases(path: Path | str) -> list[dict[str, str]]:
    """Rows of ``failure-cases.csv`` (scene, video_id, hint, folder, Finished, prompt)."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


class BankIndex:
    """The banks of one folder, findable by clip name (``ZenGarden_010``) or (scene, id)."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        self.by_key: dict[tuple[str, int], Path] = {}
        self.by_folder: dict[str, Path] = {}
        if not self.root.is_dir():
            return
        for p in sorted(self.root.glob("*-questions.csv")):
            m = _BANK_NAME.match(p.name)
            if m:
                self.by_key.setdefault((normalise_scene(m.group(1)), int(m.group(2))), p)
        fc = self.root / FAILURE_CASES
        if fc.is_file():
            try:
                for row in read_failure_cases(fc):
                    p = self.root / bank_filename(row["scene"], row["video_id"])
                    if row.get("folder") and p.is_file():
                        self.by_folder[row["folder"].strip().lower()] = p
            except (OSError, KeyError, ValueError, csv.Error) as e:  # a broken index file must not hide banks
                log.warning("%s: ignored (%s); banks are matched by file name only", fc, e)

    def __len__(self) -> int:
        return len(self.by_key)

    def find(self, clips: Iterable[str]) -> Path | None:
        """The bank of the first clip name that has one (folder column first, then scene+id)."""
        clips = [c for c in clips if c]
        for c in clips:
            p = self.by_folder.get(c.strip().lower())
            if p is not None:
                return p
        for c in clips:
            sc = split_clip(c)
            if sc is not None:
                p = self.by_key.get((normalise_scene(sc[0]), sc[1]))
                if p is not None:
                    return p
        return None

    def expected(self, clip: str) -> str:
        """The bank file a clip would need, for error messages."""
        sc = split_clip(clip)
        return bank_filename(*sc) if sc else f"<scene>-<id>-questions.csv for {clip!r}"


def write_bank_csv(
    path: Path | str,
    scene: str,
    video_id: int,
    start: Sequence[Mapping[str, Any]],
    gt_eval: Sequence[Mapping[str, Any]],
    failure_eval: Sequence[Mapping[str, Any]],
    hinted_eval: Sequence[Mapping[str, Any]],
    final: Sequence[Mapping[str, Any]],
) -> Path:
    """Write one bank in the official format (JSON-list cells, one row)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cells = [
        json.dumps(list(x), ensure_ascii=False) for x in (start, gt_eval, failure_eval, hinted_eval, final)
    ]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(BANK_COLUMNS)
        w.writerow([scene, int(video_id), *cells])
    return path
