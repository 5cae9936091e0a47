"""Facts read from input files and kept between runs under the file's content, the code that reads them and the
versions of the libraries it reads with (core.digests.code_memo): MemoBench's phase sheet (sheets.phase_sheet),
MIND's action.json (records.action_facts). Changed code, another library or an edited file reads it again; what
cannot be read is never kept."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest

from worldrecall.core import digests
from worldrecall.core.data import CaseFailure
from worldrecall.engine.cache import keys  # noqa: F401  (provides the code identity, as a run's process has it)
from worldrecall.plugins.memobench import sheets
from worldrecall.plugins.mind import records

SHEET = ("video_folder,exits,re-enter,frame_num,skip,prompt\n"
         "Kitchen_001,10,30,60,,a cup on a table\n"
         ",5,9,20,,a row that names no clip\n"
         "Kitchen_002,3,8,40,yes,marked skip\n"
         "Kitchen_003,12,7,40,,re-enter before the exit\n")


class Boom(Exception):
    pass


def _new_process(monkeypatch: pytest.MonkeyPatch, memo: Path) -> None:
    """What a new process has: nothing in memory, the memo file read."""
    monkeypatch.setattr(digests, "_FACTS", {})
    monkeypatch.setattr(digests, "_DIGESTS", {})
    digests.load_digest_memo(memo)


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == sheets.__name__]


def test_a_parsed_sheet_is_kept_between_runs_under_its_content_code_and_library_versions(tmp_path, monkeypatch,
                                                                                      caplog):
    sheet = tmp_path / "Synthetic_ExitReenter.csv"
    sheet.write_text(SHEET)
    old = time.time() - 60
    os.utime(sheet, (old, old))  # past the racy window: its digest is kept
    memo = tmp_path / "file_digests.json"
    _new_process(monkeypatch, memo)
    caplog.set_level(logging.WARNING)
    rows, skipped = sheets.phase_sheet(sheet, "synthetic", "strict")
    first = _said(caplog)
    assert len(first) == 1 and "no video_folder" in first[0]  # said once, as the parser says it
    direct = sheets.parse_synthetic_sheet(sheets.read_table(sheet), sheet.name, "strict")
    assert rows == direct and list(rows) == list(direct)  # the parser's rows, in its order
    assert skipped == ["Kitchen_002"] and "re-enter" in (rows["Kitchen_003"].error or "")
    digests.save_digest_memo(memo)

    # the next run: the sheet is not read (no pandas, no openpyxl), the same rows, the warning said again
    _new_process(monkeypatch, memo)

    def unread(path):
        raise Boom(f"read {path}")

    monkeypatch.setattr(sheets, "read_table", unread)
    caplog.clear()
    assert sheets.phase_sheet(sheet, "synthetic", "strict") == (rows, skipped)
    assert _said(caplog) == first
    with pytest.raises(Boom):  # the checks are part of what is kept
        sheets.phase_sheet(sheet, "synthetic", "official")

    # other code, or another pandas, reads the sheet again
    real_identity = digests._CODE_IDENTITY[0]
    monkeypatch.setattr(digests, "_CODE_IDENTITY", [lambda module: real_identity(module) + " edited"])
    with pytest.raises(Boom):
        sheets.phase_sheet(sheet, "synthetic", "strict")
    monkeypatch.setattr(digests, "_CODE_IDENTITY", [real_identity])
    real_version = digests._version
    monkeypatch.setattr(digests, "_version", lambda lib: "pandas==0.0.1" if lib == "pandas" else real_version(lib))
    with pytest.raises(Boom):
        sheets.phase_sheet(sheet, "synthetic", "strict")
    monkeypatch.setattr(digests, "_version", real_version)

    # an edited sheet is read again
    sheet.write_text(SHEET.replace("10,30", "11,30"))
    with pytest.raises(Boom):
        sheets.phase_sheet(sheet, "synthetic", "strict")


def test_an_unreadable_sheet_is_never_kept(tmp_path, monkeypatch):
    sheet = tmp_path / "Synthetic_ExitReenter.csv"
    sheet.write_text("exits,re-enter\n1,2\n")  # no video_folder column: the sheet as a whole is unreadable
    memo = tmp_path / "file_digests.json"
    _new_process(monkeypatch, memo)
    for _ in range(2):
        with pytest.raises(sheets.SheetError, match="video_folder"):
            sheets.phase_sheet(sheet, "synthetic", "strict")
    digests.save_digest_memo(memo)
    assert "phase_sheet" not in (memo.read_text() if memo.exists() else "")


def test_a_fact_kept_under_code_must_be_plain_json(tmp_path, monkeypatch):
    f = tmp_path / "f.txt"
    f.write_text("x")
    monkeypatch.setattr(digests, "_FACTS", {})
    with pytest.raises(TypeError, match="plain JSON"):
        digests.code_memo(f, "test.tuple", __name__, lambda: {"a": (1, 2)})
    with pytest.raises(TypeError, match="plain JSON"):
        digests.code_memo(f, "test.numpy", __name__, lambda: {"a": __import__("numpy").int64(3)})
    got = digests.code_memo(f, "test.nan", __name__, lambda: {"a": [float("nan"), 1, "x", None, True]})
    assert got["a"][1:] == [1, "x", None, True]  # NaN reads back from JSON: kept


def _action(path: Path, codes: list[tuple], mark: int = 1) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mark_time": mark, "total_time": len(codes), "data": [
        {"ws": c[0], "ad": c[1], "ud": c[2], "lr": c[3]} for c in codes]}))
    old = time.time() - 60
    os.utime(path, (old, old))
    return path


def test_an_action_json_is_read_once_for_every_model_and_not_at_all_by_the_next_run(tmp_path, monkeypatch):
    a = _action(tmp_path / "a" / "action.json", [(0, 0, 0, 0), (1, 0, 0, 2), (0, 2, 1, 0)])
    b = _action(tmp_path / "b" / "action.json", [(0, 0, 0, 0), (1, 0, 0, 2), (0, 2, 1, 0)])  # same bytes
    memo = tmp_path / "file_digests.json"
    _new_process(monkeypatch, memo)
    reads: list[Path] = []
    real = records.read_action_json

    def counted(path):
        reads.append(Path(path))
        return real(path)

    monkeypatch.setattr(records, "read_action_json", counted)
    got = records.action_facts(a)
    rec = real(a)
    assert got == {"mark_time": 1, "total_time": 3, "n_frames": 3,
                   "labels": records.frame_labels(rec, rec.mark_time, records.ACTION_MAX_FRAMES)}
    assert got["labels"] == ["forward+look_right", "right+look_up"]
    for _ in range(7):  # the other models' cases of the clip
        assert records.action_facts(a) == got
    assert records.action_facts(b) == got  # the same content elsewhere: nothing in it names its path
    assert reads == [a]
    assert records.action_facts(a, "binary") != got and reads == [a, a]  # the label scheme is part of it
    digests.save_digest_memo(memo)
    _new_process(monkeypatch, memo)
    assert records.action_facts(a) == got and reads == [a, a]


def test_an_action_json_that_cannot_be_read_or_labelled_says_so_every_time(tmp_path, monkeypatch):
    _new_process(monkeypatch, tmp_path / "file_digests.json")
    bad = tmp_path / "bad" / "action.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"mark_time": 5, "total_time": 3, "data": []}))
    for _ in range(2):
        with pytest.raises(CaseFailure, match="mark_time 5 is past total_time 3"):
            records.action_facts(bad)
    with pytest.raises(CaseFailure, match="missing"):
        records.action_facts(tmp_path / "none" / "action.json")
    odd = _action(tmp_path / "odd" / "action.json", [(0, 0, 0, 0), ("x", 0, 0, 0)], mark=0)
    assert records.action_facts(odd)["labels"] is None  # the loader reads the file for the line naming it
