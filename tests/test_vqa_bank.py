"""MemoBench VQA question banks: all 45 real banks, matching cases to banks, bad banks, the CSV format."""

from __future__ import annotations

import collections
import csv
import json
import logging
from pathlib import Path

import pytest
from helpers.official_data import OFFICIAL_ROOT as OFFICIAL

from worldrecall.core.data import CaseFailure
from worldrecall.plugins.memobench.vqa.bank import (
    BANK_COLUMNS,
    BankIndex,
    bank_filename,
    normalise_scene,
    read_bank,
    read_failure_cases,
    split_clip,
    write_bank_csv,
)
from worldrecall.plugins.memobench.vqa.selection import select_consistent, select_reference_passes

BANKS = OFFICIAL / "data" / "vqa_questions"


def test_all_45_real_banks_load_with_the_published_counts():
    files = sorted(BANKS.glob("*-questions.csv"))
    assert len(files) == 45
    banks = [read_bank(p) for p in files]
    total = sum(len(b.questions) for b in banks)
    dims = collections.Counter(q["Dimension"] for b in banks for q in b.questions)
    pol = collections.Counter((q["Dimension"], q["Dimension Polarity"]) for b in banks for q in b.questions)
    # memobench spec §1.3: 860 final questions; IF 229, OB 240, CM 186, PA 205; mixed polarity per dimension
    assert total == 860
    assert dims == {
        "Instruction Following": 229,
        "Object and Background": 240,
        "Continuity of Memory": 186,
        "Physics Adherence": 205,
    }
    assert (
        pol[("Instruction Following", "Positive")] == 129
        and pol[("Instruction Following", "Negative")] == 100
    )
    assert (
        pol[("Object and Background", "Positive")] == 119
        and pol[("Object and Background", "Negative")] == 121
    )
    assert (
        pol[("Continuity of Memory", "Positive")] == 85 and pol[("Continuity of Memory", "Negative")] == 101
    )
    assert pol[("Physics Adherence", "Positive")] == 105 and pol[("Physics Adherence", "Negative")] == 100
    assert all(12 <= len(b.questions) <= 24 for b in banks)
    assert all(2 <= n <= 6 for b in banks for n in b.counts().values())
    assert all(len(b.columns["Start Questions"]) == 24 for b in banks)
    assert len({b.sha256 for b in banks}) == 45


def test_every_failure_case_finds_its_bank_by_folder_and_by_name():
    idx = BankIndex(BANKS)
    rows = read_failure_cases(BANKS / "failure-cases.csv")
    assert len(rows) == 45 and len(idx) == 45
    for r in rows:
        want = BANKS / bank_filename(r["scene"], r["video_id"])
        assert idx.find([r["folder"]]) == want
        # without failure-cases.csv: scene names compared without underscores, ids as integers
        scene, vid = split_clip(r["folder"])
        assert vid == int(r["video_id"]) and normalise_scene(scene) == normalise_scene(r["scene"])
    assert idx.find(["ZenGarden_010"]) == BANKS / "Zen_Garden-10-questions.csv"
    assert idx.find(["zengarden_10"]) == BANKS / "Zen_Garden-10-questions.csv"
    assert idx.find(["NYC_East_016"]) == BANKS / "NYC_East-16-questions.csv"
    assert idx.find(["JapaneseStreet_002"]) == BANKS / "Japanese_Street-2-questions.csv"
    assert idx.find(["ZenGarden_011"]) is None and idx.find(["001"]) is None
    assert idx.expected("ZenGarden_011") == "ZenGarden-11-questions.csv"


def test_matching_without_failure_cases_csv(tmp_path):
    q = [{"ID": 1, "Dimension": "Physics Adherence", "Dimension Polarity": "Positive", "Question": "q"}]
    write_bank_csv(tmp_path / "Zen_Garden-5-questions.csv", "Zen_Garden", 5, q, [], [], [], q)
    idx = BankIndex(tmp_path)
    assert idx.find(["nothing", "ZenGarden_005"]) == tmp_path / "Zen_Garden-5-questions.csv"
    assert BankIndex(tmp_path / "absent").find(["ZenGarden_005"]) is None


def test_builder_selection_reproduces_every_shipped_final_bank():
    # memobench spec §3.10: Final = (GT-Pass) ∩ (unhinted verdict == hinted verdict on the failure video)
    for p in sorted(BANKS.glob("*-questions.csv")):
        b = read_bank(p)
        c = b.columns
        kept = select_reference_passes(c["Start Questions"], c["Evaluation on ground truth"], "verdict")
        final = select_consistent(
            kept, c["Evaluation on failure"], c["Revised Evaluation on failure"], "verdict"
        )
        assert [q["ID"] for q in final] == [q["ID"] for q in b.questions], p.name
        assert final == [
            {k: q[k] for k in ("ID", "Dimension", "Dimension Polarity", "Question")} for q in b.questions
        ]


def _bank(tmp_path: Path, final, name="Havana-3-questions.csv") -> Path:
    p = tmp_path / name
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(BANK_COLUMNS)
        w.writerow(
            ["Havana", 3, "[]", "[]", "[]", "[]", final if isinstance(final, str) else json.dumps(final)]
        )
    return p


Q = {"ID": 1, "Dimension": "Continuity of Memory", "Dimension Polarity": "Positive", "Question": "Back?"}


@pytest.mark.parametrize(
    "final, message",
    [
        ("not json", "not valid JSON"),
        ([], "is empty"),
        ([{**Q, "Dimension": "Memory"}], "unknown Dimension 'Memory'"),
        ([{**Q, "Dimension Polarity": "Neutral"}], "polarity 'Neutral'"),
        ([Q, Q], "appears twice"),
        ([{**Q, "ID": "1"}], "non-integer ID"),
        ([{**Q, "Question": " "}], "no Question text"),
        ({"ID": 1}, "not a JSON list"),
    ],
)
def test_bad_banks_fail_the_case_naming_the_file(tmp_path, final, message):
    p = _bank(tmp_path, final)
    with pytest.raises(CaseFailure, match=message) as ei:
        read_bank(p)
    assert "Havana-3-questions.csv" in str(ei.value) and "\n" not in str(ei.value)


def test_two_rows_and_unreadable_files_fail(tmp_path):
    p = _bank(tmp_path, [Q])
    with open(p, "a", newline="") as f:
        csv.writer(f).writerow(["Havana", 4, "[]", "[]", "[]", "[]", "[]"])
    with pytest.raises(CaseFailure, match="exactly one row, found 2"):
        read_bank(p)
    with pytest.raises(CaseFailure, match="cannot be read"):
        read_bank(tmp_path / "missing-1-questions.csv")


def test_lowercase_polarity_is_accepted_with_a_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    b = read_bank(_bank(tmp_path, [{**Q, "Dimension Polarity": "positive"}]))
    assert b.questions[0]["Dimension Polarity"] == "positive"  # kept as written: parity mode needs it
    assert "polarity 'positive'" in caplog.text


def test_written_bank_round_trips_in_the_official_format(tmp_path):
    src = read_bank(BANKS / "Barnyard-1-questions.csv")
    c = src.columns
    out = write_bank_csv(
        tmp_path / "Barnyard-1-questions.csv",
        "Barnyard",
        1,
        c["Start Questions"],
        c["Evaluation on ground truth"],
        c["Evaluation on failure"],
        c["Revised Evaluation on failure"],
        src.questions,
    )
    back = read_bank(out)
    assert back.questions == src.questions and back.columns == src.columns
    with open(out, newline="") as f:
        assert next(csv.reader(f)) == BANK_COLUMNS
