"""A case's alignment is stored once per shard (``alignments-shard-*.jsonl``), rows carry ``alignment_ref``, and
every reader restores it: a row reads back exactly as it was computed (engine/stages/row_store.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from worldrecall.core.data import ScoreRow
from worldrecall.engine.stages.row_digests import row_digests
from worldrecall.engine.stages.row_store import ResultStore, read_row_dicts, read_rows, row_line, rows_files

ALIGN = {"phases": {"V": [0, 19], "D": [19, 58], "R": [58, 71]}, "info": {"h": 19, "r": 58, "notes": "x" * 500}}


def _rows(case: str, alignment: dict, value: float = 1.0) -> list[ScoreRow]:
    return [ScoreRow("b", "m", case, f"b.metric{i}", {"v": value + i}, info={"alignment": alignment, "k": i})
            for i in range(4)]


def test_a_cases_alignment_is_written_once_and_every_reader_restores_it(tmp_path):
    store = ResultStore(tmp_path)
    written = [*_rows("c0", ALIGN), *_rows("c1", {**ALIGN, "info": {"h": 20}}),
               ScoreRow("b", "m", "c2", "b.metric0", {"v": 0.0})]  # a row without an alignment
    kept = [store.append(r) for r in written]
    store.close()
    parts = rows_files(tmp_path)  # one file per metric of benchmark "b"
    assert len(parts) == 4
    lines = [json.loads(x) for part in parts for x in part.read_text().splitlines()]
    assert all("alignment" not in d["info"] for d in lines)
    assert sum("alignment_ref" in d["info"] for d in lines) == 8
    stored = [json.loads(x) for x in store.alignments_path.read_text().splitlines()]
    assert len(stored) == 2 and stored[0]["alignment"] == ALIGN  # once per distinct alignment
    assert sum(p.stat().st_size for p in parts) + store.alignments_path.stat().st_size < \
        sum(len(row_line(r)) + 1 for r in written) * 0.7
    # the rows as computed, as kept by the store, as read back, and as a plugin author's test reads them
    assert row_digests(kept) == row_digests(written) == row_digests(read_rows(parts))
    again = ResultStore(tmp_path)
    assert row_digests(again.done.values()) == row_digests(written)
    dicts = read_row_dicts(tmp_path)
    assert {(d["case_id"], d["metric"]): d["info"].get("alignment") for d in dicts} == \
        {(r.case_id, r.metric): r.info.get("alignment") for r in written} and len(dicts) == len(written)
    assert all("alignment_ref" not in d["info"] for d in dicts)


def test_a_superseded_rows_alignment_goes_with_it_when_the_file_is_compacted(tmp_path):
    store = ResultStore(tmp_path)
    for r in _rows("c0", ALIGN):
        store.append(r)
    store.close()
    store = ResultStore(tmp_path)
    new = {**ALIGN, "info": {"h": 21}}
    for r in _rows("c0", new, value=2.0):  # the case again under another alignment: every row superseded
        store.append(r)
    store.close()
    stored = [json.loads(x) for x in store.alignments_path.read_text().splitlines()]
    assert [d["alignment"] for d in stored] == [new]
    parts = rows_files(tmp_path)  # one per metric, one line each: the superseded rows are gone
    assert [len(p.read_text().splitlines()) for p in parts] == [1, 1, 1, 1]
    assert {r.info["alignment"]["info"]["h"] for r in read_rows(parts)} == {21}


def test_a_rows_file_written_before_each_row_carried_its_alignment_reads_as_it_did(tmp_path):
    old = _rows("c0", ALIGN)
    path = tmp_path / "rows-shard-0000-of-0001.jsonl"
    path.write_text("".join(row_line(r) + "\n" for r in old))
    assert row_digests(read_rows([path])) == row_digests(old)
    store = ResultStore(tmp_path)  # and a run resuming it appends in the new form beside the old lines
    assert row_digests(store.done.values()) == row_digests(old)
    store.append(_rows("c1", ALIGN)[0])
    store.close()
    rows = read_rows(rows_files(tmp_path))
    assert len(rows) == 5 and all(r.info["alignment"] == ALIGN for r in rows)


def test_a_rows_digest_hashes_its_alignment_once_per_object_and_follows_its_content():
    """A case's rows share one alignment object: :func:`row_digests` hashes it once; the digests equal those of
    rows holding equal copies, each row's alone, and change with the alignment's content."""
    import copy

    from worldrecall.engine.stages.row_digests import row_digest

    shared = _rows("c0", copy.deepcopy(ALIGN))
    copies = [ScoreRow(r.benchmark, r.model, r.case_id, r.metric, dict(r.values),
                       info={**r.info, "alignment": copy.deepcopy(ALIGN)}) for r in shared]
    assert row_digests(shared) == row_digests(copies) == {r.row_key: row_digest(r) for r in copies}
    moved = _rows("c0", {**ALIGN, "phases": {**ALIGN["phases"], "R": [59, 71]}})
    assert all(row_digests(moved)[k] != d for k, d in row_digests(shared).items())
    bare = [ScoreRow(r.benchmark, r.model, r.case_id, r.metric, dict(r.values), info={"k": r.info["k"]})
            for r in shared]
    assert all(row_digests(bare)[k] != d for k, d in row_digests(shared).items())


def test_row_digests_kept_by_line_are_the_digests_and_are_read_back(tmp_path, monkeypatch):
    """A row's digest kept under the sha256 of its line (``cache/row_digests.json``) equals the digest of the row
    itself; the next store over the same file digests no row again, nor writes the file; another line, another
    code, or a row whose alignment its folder lost is digested again."""
    from worldrecall.engine.stages import row_digests as rd

    store = ResultStore(tmp_path / "res")
    written = [*_rows("c0", ALIGN), *_rows("c1", {**ALIGN, "info": {"h": 20}}),
               ScoreRow("b", "m", "c2", "b.metric0", {"v": float("nan")}, status="failed", reason="x")]
    for r in written:
        store.append(r)
    store.close()
    memo_path = tmp_path / "cache" / "row_digests.json"
    plain = row_digests(written)

    store = ResultStore(tmp_path / "res")
    rows = sorted(store.done.values(), key=lambda r: r.row_key)
    known = rd.LineDigests(memo_path, "code-1")
    assert row_digests(rows, store.lines_of(rows), known) == plain
    known.save()
    assert len(json.loads(memo_path.read_text())["digests"]) == len(written)

    calls = []
    real = rd.row_digest
    monkeypatch.setattr(rd, "row_digest", lambda r, a=None: calls.append(r.row_key) or real(r, a))
    stamp = memo_path.stat().st_mtime_ns
    store = ResultStore(tmp_path / "res")
    rows = sorted(store.done.values(), key=lambda r: r.row_key)
    known = rd.LineDigests(memo_path, "code-1")
    assert row_digests(rows, store.lines_of(rows), known) == plain and calls == []
    known.save()
    assert memo_path.stat().st_mtime_ns == stamp  # nothing new: not written

    # other code: nothing read; a line that is not the one digested: its own digest
    assert row_digests(rows, store.lines_of(rows), rd.LineDigests(memo_path, "code-2")) == plain
    assert len(calls) == len(written)
    calls.clear()
    lines = store.lines_of(rows)
    first = rows[0]
    lines[first.row_key] = lines[first.row_key].replace('"v": 1.0', '"v": 1.5')
    got = row_digests(rows, lines, rd.LineDigests(memo_path, "code-1"))
    assert got == plain and calls == [first.row_key]  # the row itself is digested, under the line it has

    # rows not held by the store as they are (another object, a lost alignment) are never looked up by line
    calls.clear()
    lost = ScoreRow(**{**rows[1].to_json(), "info": {"alignment_ref": "0" * 32}})
    assert store.lines_of([lost]) == {}
    got = row_digests([lost], {lost.row_key: store.lines_of(rows)[lost.row_key]}, rd.LineDigests(memo_path, "code-1"))
    assert got == {lost.row_key: real(lost)} and calls == [lost.row_key]
