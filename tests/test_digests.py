"""Digests and per-part memos: a folder digest lists its files as ``sorted(rglob)`` would (one scandir per folder); cases.csv drawn per benchmark is the whole table."""

from __future__ import annotations

import hashlib
from pathlib import Path

from worldrecall.core import digests
from worldrecall.core.video import list_frame_files


def _reference_folder_digest(path: Path) -> str:
    """The straightforward definition: every file of ``rglob('*')``, sorted as paths, name then bytes."""
    h = hashlib.sha256()
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        h.update(str(p.relative_to(path)).encode())
        h.update(hashlib.sha256(p.read_bytes()).hexdigest().encode())
    return h.hexdigest()


def _tree(root: Path) -> None:
    # "a-c" sorts before "a/b" as a string but after it as path parts: the order must be the parts'
    for name in ["a-c", "a/b", "a/b2/x", ".hidden", "z", "a/.q", "deep/er/est/f.txt"]:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(name)
    (root / "dir_link").symlink_to(root / "a")     # a linked folder is not entered (rglob does not)
    (root / "file_link").symlink_to(root / "z")    # a linked file is a file


def test_folder_digest_equals_the_rglob_definition(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert digests.file_digest(tmp_path) == _reference_folder_digest(tmp_path)
    files = [rel for rel, _, _ in digests._tree_files(str(tmp_path))]
    assert files[:3] == [(".hidden",), ("a", ".q"), ("a", "b")] and ("a-c",) in files
    assert not any(rel[0] == "dir_link" for rel in files) and ("file_link",) in files


def test_folder_digest_follows_an_edit(tmp_path: Path) -> None:
    _tree(tmp_path)
    before = digests.file_digest(tmp_path)
    (tmp_path / "a" / "b").write_text("changed, longer")
    assert digests.file_digest(tmp_path) != before
    assert digests.file_digest(tmp_path) == _reference_folder_digest(tmp_path)


def test_frame_files_sorted_by_name_images_only(tmp_path: Path) -> None:
    for n in ["010.jpg", "002.PNG", "001.jpeg", "notes.txt", ".jpg", "003.jpg.bak"]:
        (tmp_path / n).write_bytes(b"x")
    (tmp_path / "sub.jpg").mkdir()  # a folder named like an image is not a frame
    assert [p.name for p in list_frame_files(tmp_path)] == ["001.jpeg", "002.PNG", "010.jpg"]


def test_case_csv_drawn_per_benchmark_is_the_whole_table(tmp_path: Path) -> None:
    """cases.csv from memoised per-benchmark lines equals ``case_table(rows).to_csv`` byte for byte: value
    columns that only one benchmark has, None values, failed rows, strata that differ, unsorted input."""
    import random

    from worldrecall.core.data import ScoreRow
    from worldrecall.core.tables import case_table
    from worldrecall.engine.sinks import case_csv as mod

    rng = random.Random(3)
    rows = []
    for bench in ("zeta", "alpha", "mid"):
        for model in ("m2", "m1"):
            for case in ("c1", "c0", "c10"):
                for metric in (f"{bench}.b", f"{bench}.a"):
                    ok = rng.random() > 0.2
                    values = {f"{bench}_v": rng.random(), "shared": None if rng.random() < 0.3 else rng.random() * 1e-6,
                              "big": 1e17 * rng.random()} if ok else {}
                    rows.append(ScoreRow(bench, model, case, metric, values, "ok" if ok else "failed",
                                         "" if ok else 'measure: "quoted", comma', {"split": "a,b" if ok else "c"},
                                         "1", {"flow": "dis_flow"}))
    rng.shuffle(rows)
    mod._LINES.clear()
    expected = case_table(rows).to_csv(index=False)
    assert mod.case_csv(rows) == expected
    assert mod.case_csv(rows) == expected  # from the memo
    rows[0].values = {"new_value": 0.5}  # a column no other row has, and a changed benchmark
    changed = [type(r).from_json(r.to_json()) for r in rows]
    assert mod.case_csv(changed) == case_table(changed).to_csv(index=False)
    assert mod.case_csv([]) == case_table([]).to_csv(index=False)
    # parts pandas would type by the whole column: integer strata next to missing ones ("3" alone, "3.0"
    # beside a NaN), a stratum with a line break, integer values: drawn per benchmark, still the whole table
    odd = [type(r).from_json(r.to_json()) for r in changed]
    for i, r in enumerate(odd):
        if r.benchmark == "mid" and r.metric == "mid.a":
            r.strata = {"split": "a,b", "level": 3}
        if r.benchmark == "zeta" and i % 5 == 0:
            r.strata = {"split": "two\nlines"}
        if r.benchmark == "alpha" and r.values:
            r.values = {**r.values, "alpha_v": 2}
    for r in odd:
        r.__dict__.pop("_content_digest", None)
    assert mod.case_csv(odd) == case_table(odd).to_csv(index=False)


def test_case_columns_of_an_unchanged_benchmark_come_from_the_memo(monkeypatch) -> None:
    """Rows grouped by benchmark (the runner's order): each benchmark's columns are its own first appearances,
    memoised by its rows; a changed benchmark (a new value column) is walked again, the others are not, and
    the columns are still ``case_table``'s, in its order. Rows whose benchmark comes back are walked whole."""
    from worldrecall.core.data import ScoreRow
    from worldrecall.core.tables import case_table
    from worldrecall.engine.sinks import case_csv as mod

    def rows(extra: bool) -> list[ScoreRow]:
        out = []
        for b in ("a", "m", "z"):
            for c in ("c0", "c1"):
                values = {f"{b}_v": 0.5, "shared": 0.25}
                if extra and b == "m" and c == "c1":
                    values = {"late": 1.5, **values}
                out.append(ScoreRow(b, "m0", c, f"{b}.x", values, strata={f"{b}_s": c, "split": "s"}))
        return out

    walked = []
    real = mod._own_columns
    monkeypatch.setattr(mod, "_own_columns", lambda rs: walked.append(sorted({r.benchmark for r in rs})) or real(rs))
    monkeypatch.setattr(mod, "_COLUMNS", {})
    for extra in (False, True):
        got = rows(extra)
        assert mod.case_columns(got) == list(case_table(got).columns)
        assert mod.case_csv(got) == case_table(got).to_csv(index=False)
    assert walked[:3] == [["a"], ["m"], ["z"]] and walked[3:] == [["m"]]
    back = rows(True)
    back = back[:2] + back[4:] + back[2:4]  # a's rows, z's, then m's, then a's again
    back.append(ScoreRow("a", "m1", "c9", "a.x", {"only_here": 0.1}, strata={"a_s": "c9"}))
    walked.clear()
    assert mod.case_columns(back) == list(case_table(back).columns) and walked == [["a", "m", "z"]]


def test_case_csv_redraws_only_the_metric_that_changed() -> None:
    """A re-score of one metric draws that metric's part again; every other part comes from the memo."""
    from worldrecall.core.data import ScoreRow
    from worldrecall.core.tables import case_table
    from worldrecall.engine.sinks import case_csv as mod

    def rows(x: float) -> list[ScoreRow]:
        return [ScoreRow("b", m, c, metric, {"v": x if metric == "b.changed" else 0.25}, strata={"s": c[-1]})
                for m in ("m0", "m1") for c in ("c0", "c1", "c2") for metric in ("b.changed", "b.same", "b.also")]

    mod._LINES.clear()
    assert mod.case_csv(rows(0.5)) == case_table(rows(0.5)).to_csv(index=False)
    drawn = []
    real = mod.case_table
    mod.case_table = lambda rs: drawn.append({r.metric for r in rs}) or real(rs)
    try:
        assert mod.case_csv(rows(0.75)) == case_table(rows(0.75)).to_csv(index=False)
    finally:
        mod.case_table = real
    assert drawn == [{"b.changed"}]


def test_case_csv_takes_an_unchanged_benchmark_whole() -> None:
    """A re-score of one benchmark's metric draws that benchmark's lines again; another benchmark whose rows
    did not change is taken whole from the memo, and the file is still the whole table's CSV."""
    from worldrecall.core.data import ScoreRow
    from worldrecall.core.tables import case_table
    from worldrecall.engine.sinks import case_csv as mod

    def rows(x: float) -> list[ScoreRow]:
        return [ScoreRow(b, m, c, f"{b}.{k}", {"v": x if b == "a" and k == "changed" else 0.25}, strata={"s": c})
                for b in ("a", "z") for m in ("m0", "m1") for c in ("c0", "c1") for k in ("changed", "same")]

    mod._BENCHMARKS.clear()
    assert mod.case_csv(rows(0.5)) == case_table(rows(0.5)).to_csv(index=False)
    drawn = []
    real = mod._draw_benchmark
    mod._draw_benchmark = lambda rs, *a: drawn.append({r.benchmark for r in rs}) or real(rs, *a)
    try:
        assert mod.case_csv(rows(0.75)) == case_table(rows(0.75)).to_csv(index=False)
    finally:
        mod._draw_benchmark = real
    assert drawn == [{"a"}]


def test_digest_memo_is_written_only_when_something_was_learnt(tmp_path: Path) -> None:
    memo = tmp_path / "file_digests.json"
    f = tmp_path / "input.bin"
    f.write_bytes(b"abc")
    digests.load_digest_memo(memo)
    digests.file_digest(f)
    digests.save_digest_memo(memo)
    first = memo.stat()
    digests.load_digest_memo(memo)  # the file this process wrote: nothing to read
    digests.file_digest(f)          # known: nothing learnt
    digests.save_digest_memo(memo)
    assert memo.stat().st_ino == first.st_ino and memo.stat().st_mtime_ns == first.st_mtime_ns
    f.write_bytes(b"abcd")          # an edit is learnt, and written
    digests.file_digest(f)
    digests.save_digest_memo(memo)
    assert memo.stat().st_ino != first.st_ino
    doc = __import__("json").loads(memo.read_text())
    assert hashlib.sha256(b"abcd").hexdigest() in {rec[4] for rec in doc["digests"]}
