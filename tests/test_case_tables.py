"""The per-case table is written one file per benchmark (``tables/cases.<benchmark>.csv``), each kept in the
blob store under the key of the rows it shows: a job whose rows of a benchmark were shown before links that
file, a job whose rows changed writes it again, never an old one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

from worldrecall.core.data import ScoreRow
from worldrecall.core.tables import case_table
from worldrecall.engine.sinks.files import case_parts


def _rows(score: float) -> list[ScoreRow]:
    return [ScoreRow("alpha", "m1", "c1", "alpha.x", {"score": score}, strata={"split": "a"}),
            ScoreRow("alpha", "m2", "c1", "alpha.x", {"score": 0.25}, strata={"split": "a"}),
            ScoreRow("beta", "m1", "c1", "beta.y", {"dist": 3, "n": 2}),
            ScoreRow("beta", "m1", "c2", "beta.y", {}, status="failed", reason="measure: boom")]


def _result(root: Path, folder: str, rows: list[ScoreRow]) -> SimpleNamespace:
    return SimpleNamespace(config={"output_root": str(root), "cache_dir": str(root / "cache"),
                                   "cache": {"mode": "use"}},
                           rows=rows, row_digests={}, results_dir=root / "results" / folder)


def _write(root: Path, folder: str, rows: list[ScoreRow]) -> dict[str, Path]:
    result = _result(root, folder, rows)
    tdir = result.results_dir / "tables"
    tdir.mkdir(parents=True)
    (tdir / "cases.csv").write_text("the whole table of an earlier version\n")
    return {p.name: p for p in case_parts(result, tdir)}


def test_each_benchmark_has_its_own_case_table_with_its_own_columns(tmp_path):
    rows = _rows(0.5)
    got = _write(tmp_path, "one", rows)
    assert sorted(got) == ["cases.alpha.csv", "cases.beta.csv"]
    assert not (tmp_path / "results" / "one" / "tables" / "cases.csv").exists()  # no stale whole table
    assert got["cases.alpha.csv"].read_text() == case_table(rows[:2]).to_csv(index=False)
    beta = got["cases.beta.csv"].read_text().splitlines()
    assert beta[0] == "benchmark,model,case_id,metric,status,reason,backend,metric_version,value.dist,value.n"
    assert beta[2] == "beta,m1,c2,beta.y,failed,measure: boom,-,,,"  # alpha's strata and values are not here


def test_a_benchmark_whose_rows_did_not_change_is_linked_and_a_changed_one_written_again(tmp_path):
    first = _write(tmp_path, "one", _rows(0.5))
    second = _write(tmp_path, "two", _rows(0.75))  # a re-score of alpha's metric: beta's rows are the same
    assert os.path.samefile(first["cases.beta.csv"], second["cases.beta.csv"])  # one file on disk, linked
    assert not os.path.samefile(first["cases.alpha.csv"], second["cases.alpha.csv"])
    assert "0.75" in second["cases.alpha.csv"].read_text() and "0.75" not in first["cases.alpha.csv"].read_text()
    assert first["cases.alpha.csv"].read_text() == case_table(_rows(0.5)[:2]).to_csv(index=False)  # kept as it was
    # the same rows again (a rerun in a new folder): every file is the one written before
    third = _write(tmp_path, "three", _rows(0.5))
    assert all(os.path.samefile(first[n], third[n]) for n in first)


def test_a_removed_blob_is_written_again_not_missed(tmp_path):
    first = _write(tmp_path, "one", _rows(0.5))
    for blob in (tmp_path / "blobs").rglob("*.csv"):
        blob.unlink()
    second = _write(tmp_path, "two", _rows(0.5))
    assert second["cases.beta.csv"].read_text() == first["cases.beta.csv"].read_text()


def test_the_submission_cases_are_split_and_shared_the_same_way(tmp_path):
    from worldrecall.engine.sinks.submission import case_files

    def write(folder: str, score: float) -> dict[str, Path]:
        result = _result(tmp_path, folder, _rows(score))
        out = result.results_dir / "submission"
        out.mkdir(parents=True)
        return {p.name: p for p in case_files(result, out)}

    first, second = write("one", 0.5), write("two", 0.75)
    assert sorted(first) == ["cases.alpha.jsonl", "cases.beta.jsonl"]
    assert os.path.samefile(first["cases.beta.jsonl"], second["cases.beta.jsonl"])
    lines = [json.loads(x) for x in second["cases.alpha.jsonl"].read_text().splitlines()]
    assert [(d["model"], d["values"]["score"]) for d in lines] == [("m1", 0.75), ("m2", 0.25)]


def test_an_output_written_before_with_the_same_bytes_is_that_file_again(tmp_path):
    """Tables, Markdown and submission documents go through ``write_shared``: the same bytes a job wrote before
    are one file on disk (a hard link to its blob), other bytes a new file, and the earlier one keeps its own."""
    from worldrecall.engine.cache.blobs import BlobStore, write_shared

    blobs = BlobStore(tmp_path / "blobs")
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
    a = write_shared(tmp_path / "one" / "mean.csv", "model,mean\nx,0.5\n", blobs)
    b = write_shared(tmp_path / "two" / "mean.csv", "model,mean\nx,0.5\n", blobs)
    assert os.path.samefile(a, b)
    c = write_shared(tmp_path / "two" / "mean.csv", "model,mean\nx,0.75\n", blobs)  # a re-score in that folder
    assert c.read_text() == "model,mean\nx,0.75\n" and a.read_text() == "model,mean\nx,0.5\n"
    assert not os.path.samefile(a, c)
