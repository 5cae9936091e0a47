"""The per-case table is written one file per metric (``tables/cases/<benchmark>/<metric>.csv``), each kept in
the blob store under the key of the rows it shows: a job whose rows of a metric were shown before links that
file, a job whose rows changed writes it again, never an old one; the submission's per-case rows likewise
(``submission/cases/<benchmark>/<metric>.jsonl``). The aggregated tables of an aggregator that declares
``by_benchmark`` (``mean``, ``ranking`` …) are written one file per benchmark in a folder named for the table
(``tables/ranking/memobench.csv``). Both read back whole (``read_tables``)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

from worldrecall.core.data import ScoreRow
from worldrecall.core.tables import case_table, read_tables
from worldrecall.engine.cache.blobs import BlobStore
from worldrecall.engine.sinks.files import case_parts


def _rows(score: float) -> list[ScoreRow]:
    return [ScoreRow("alpha", "m1", "c1", "alpha.x", {"score": score}, strata={"split": "a"}),
            ScoreRow("alpha", "m2", "c1", "alpha.x", {"score": 0.25}, strata={"split": "a"}),
            ScoreRow("alpha", "m1", "c1", "alpha.z", {"tau": 2.0}, strata={"split": "a"}),
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
    (tdir / "cases.alpha.csv").write_text("a benchmark's whole table of an earlier version\n")
    return {str(p.relative_to(tdir / "cases")): p for p in case_parts(result, tdir)}


def test_each_metric_has_its_own_case_table_with_its_own_columns(tmp_path):
    rows = _rows(0.5)
    got = _write(tmp_path, "one", rows)
    assert sorted(got) == ["alpha/alpha.x.csv", "alpha/alpha.z.csv", "beta/beta.y.csv"]
    tdir = tmp_path / "results" / "one" / "tables"
    assert not (tdir / "cases.csv").exists() and not (tdir / "cases.alpha.csv").exists()  # no stale whole table
    assert got["alpha/alpha.x.csv"].read_text() == case_table(rows[:2]).to_csv(index=False)
    beta = got["beta/beta.y.csv"].read_text().splitlines()
    assert beta[0] == "benchmark,model,case_id,metric,status,reason,backend,metric_version,value.dist,value.n"
    assert beta[2] == "beta,m1,c2,beta.y,failed,measure: boom,-,,,"  # alpha's strata and values are not here
    # read back whole: every row once, in the table's order (benchmark, model, case, metric), each cell as written
    whole = read_tables(tdir)
    assert [tuple(r) for r in whole["cases"][["benchmark", "model", "case_id", "metric"]].values] == [
        r.row_key for r in sorted(rows, key=lambda r: r.row_key)]
    assert whole["cases"]["value.tau"].tolist()[1] == 2.0 and whole["cases"]["value.score"].tolist()[2] == 0.25
    assert len(whole["cases.alpha"]) == 3 and len(whole["cases.beta"]) == 2


def test_a_metric_whose_rows_did_not_change_is_linked_and_a_changed_one_written_again(tmp_path):
    first = _write(tmp_path, "one", _rows(0.5))
    second = _write(tmp_path, "two", _rows(0.75))  # a re-score of alpha.x: alpha.z's and beta's rows are the same
    assert os.path.samefile(first["beta/beta.y.csv"], second["beta/beta.y.csv"])  # one file on disk, linked
    assert os.path.samefile(first["alpha/alpha.z.csv"], second["alpha/alpha.z.csv"])  # same benchmark, other metric
    assert not os.path.samefile(first["alpha/alpha.x.csv"], second["alpha/alpha.x.csv"])
    assert "0.75" in second["alpha/alpha.x.csv"].read_text() and "0.75" not in first["alpha/alpha.x.csv"].read_text()
    assert first["alpha/alpha.x.csv"].read_text() == case_table(_rows(0.5)[:2]).to_csv(index=False)  # kept as it was
    # the same rows again (a rerun in a new folder): every file is the one written before
    third = _write(tmp_path, "three", _rows(0.5))
    assert all(os.path.samefile(first[n], third[n]) for n in first)


def test_a_removed_blob_is_written_again_not_missed(tmp_path):
    first = _write(tmp_path, "one", _rows(0.5))
    for blob in (tmp_path / "blobs").rglob("*.csv"):
        blob.unlink()
    second = _write(tmp_path, "two", _rows(0.5))
    assert second["beta/beta.y.csv"].read_text() == first["beta/beta.y.csv"].read_text()


def test_an_output_edited_in_place_never_comes_back_through_its_blob(tmp_path):
    """A per-case table is a hard link to its blob: editing it in place edits the blob. The next job with the same
    rows renders it again (the blob is no longer as its entry recorded it) and puts the rendered bytes back in the
    blob store, a same-size edit included; the job after links the repaired blob."""
    first = _write(tmp_path, "one", _rows(0.5))
    want = first["beta/beta.y.csv"].read_text()
    for edit in (want + "# a note\n", want.replace("3", "4")):  # longer, then the same size
        assert len(edit) != len(want) or edit != want
        time.sleep(0.05)  # a later edit than the write, on a file system whose clock ticks coarsely too
        with open(first["beta/beta.y.csv"], "w") as f:  # in place: the same inode as the blob
            f.write(edit)
        again = _write(tmp_path, "two" if edit.endswith("\n# a note\n") else "three", _rows(0.5))
        assert again["beta/beta.y.csv"].read_text() == want
        blob = next(p for p in (tmp_path / "blobs").rglob("*.csv") if os.path.samefile(p, again["beta/beta.y.csv"]))
        assert blob.read_text() == want
    last = _write(tmp_path, "four", _rows(0.5))
    assert last["beta/beta.y.csv"].read_text() == want and os.path.samefile(last["beta/beta.y.csv"], blob)


def test_a_shared_output_edited_in_place_keeping_its_size_is_not_written_again_as_edited(tmp_path):
    """``write_shared`` places a blob only when it holds the very bytes (not only as many): a table edited in place
    (the same size) edited its blob; the next job that writes the table's bytes gets them, and the blob is put
    back. A figure kept for a later job (``plots._linked``) is linked only while its blob is as written."""
    from worldrecall.engine.cache.blobs import written_state, write_shared
    from worldrecall.engine.sinks.plots import _linked

    blobs = BlobStore(tmp_path / "blobs")
    text = "model,mean\nx,0.5\n"
    a = write_shared(tmp_path / "one" / "mean.csv", text, blobs)
    time.sleep(0.05)
    with open(a, "w") as f:  # in place, the same size: the blob it is a link to now says 0.6
        f.write(text.replace("0.5", "0.6"))
    b = write_shared(tmp_path / "two" / "mean.csv", text, blobs)
    assert b.read_text() == text and not os.path.samefile(a, b)
    blob = blobs.path_for(hashlib.sha256(text.encode()).hexdigest(), ".csv")
    assert blob.read_text() == text and os.path.samefile(blob, b)  # the blob holds its bytes again
    c = write_shared(tmp_path / "three" / "mean.csv", text, blobs)
    assert os.path.samefile(c, blob)

    class Store:
        def __init__(self, doc):
            self.doc = doc

        def get_json(self, kind, key):
            return self.doc

    digest = hashlib.sha256(text.encode()).hexdigest()
    pdir = tmp_path / "plots"
    assert _linked(Store({"files": [["m.csv", digest, written_state(blob)]]}), "k", pdir, blobs) == [pdir / "m.csv"]
    assert _linked(Store({"files": [["m.csv", digest]]}), "k", pdir, blobs) is None  # no state kept: drawn again
    time.sleep(0.05)
    state = written_state(blob)
    with open(blob, "a") as f:
        f.write("edited\n")
    assert _linked(Store({"files": [["n.csv", digest, state]]}), "k", pdir, blobs) is None


def test_a_metric_gone_from_the_rows_leaves_no_part_behind(tmp_path):
    result = _result(tmp_path, "one", _rows(0.5))
    tdir = result.results_dir / "tables"
    tdir.mkdir(parents=True)
    case_parts(result, tdir)
    result.rows = [r for r in result.rows if r.metric != "alpha.z"]  # the same folder, written again without it
    assert sorted(str(p.relative_to(tdir)) for p in case_parts(result, tdir)) == [
        "cases/alpha/alpha.x.csv", "cases/beta/beta.y.csv"]
    assert sorted(str(p.relative_to(tdir)) for p in tdir.rglob("*.csv")) == [
        "cases/alpha/alpha.x.csv", "cases/beta/beta.y.csv"]


def test_the_submission_cases_are_split_and_shared_the_same_way(tmp_path):
    from worldrecall.engine.sinks.submission import case_files

    def write(folder: str, score: float) -> dict[str, Path]:
        result = _result(tmp_path, folder, _rows(score))
        out = result.results_dir / "submission"
        out.mkdir(parents=True)
        (out / "cases.alpha.jsonl").write_text("{}\n")  # a benchmark's whole file, from an earlier version
        return {str(p.relative_to(out)): p for p in case_files(result, out)}

    first, second = write("one", 0.5), write("two", 0.75)
    assert sorted(first) == ["cases/alpha/alpha.x.jsonl", "cases/alpha/alpha.z.jsonl", "cases/beta/beta.y.jsonl"]
    assert not (tmp_path / "results" / "one" / "submission" / "cases.alpha.jsonl").exists()
    assert os.path.samefile(first["cases/beta/beta.y.jsonl"], second["cases/beta/beta.y.jsonl"])
    assert os.path.samefile(first["cases/alpha/alpha.z.jsonl"], second["cases/alpha/alpha.z.jsonl"])
    lines = [json.loads(x) for x in second["cases/alpha/alpha.x.jsonl"].read_text().splitlines()]
    assert [(d["model"], d["values"]["score"]) for d in lines] == [("m1", 0.75), ("m2", 0.25)]


def test_an_output_written_before_with_the_same_bytes_is_that_file_again(tmp_path):
    """Tables, Markdown and submission documents go through ``write_shared``: the same bytes a job wrote before
    are one file on disk (a hard link to its blob), other bytes a new file, and the earlier one keeps its own."""
    from worldrecall.engine.cache.blobs import write_shared

    blobs = BlobStore(tmp_path / "blobs")
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
    a = write_shared(tmp_path / "one" / "mean.csv", "model,mean\nx,0.5\n", blobs)
    b = write_shared(tmp_path / "two" / "mean.csv", "model,mean\nx,0.5\n", blobs)
    assert os.path.samefile(a, b)
    c = write_shared(tmp_path / "two" / "mean.csv", "model,mean\nx,0.75\n", blobs)  # a re-score in that folder
    assert c.read_text() == "model,mean\nx,0.75\n" and a.read_text() == "model,mean\nx,0.5\n"
    assert not os.path.samefile(a, c)


def _tables_job(root: Path, folder: str, score: float, empty: bool = False
                ) -> tuple[SimpleNamespace, dict[str, Path]]:
    """One job's aggregated tables as the run writes them: ``mean`` and ``status`` (MeanAggregator declares
    ``by_benchmark``), and a table of a benchmark's own aggregator (one file)."""
    import pandas as pd

    from worldrecall.engine.sinks.files import table_files
    from worldrecall.plugins.stats.aggregators import MeanAggregator

    rows = _rows(score)
    parts = [MeanAggregator().aggregate([r for r in rows if r.benchmark == b], {}) for b in ("alpha", "beta")]
    tables = {name: pd.concat([p[name] for p in parts], ignore_index=True) for name in ("mean", "status")}
    tables["beta.extra"] = pd.DataFrame({"model": ["m1"], "x": [1.5]})
    if empty:  # every case of the job failed: its by-benchmark tables have no rows
        tables = {name: df.iloc[0:0] for name, df in tables.items()}
    result = _result(root, folder, rows)
    result.tables, result.config["aggregators"] = tables, ["mean"]
    ctx = SimpleNamespace(host=SimpleNamespace(components={"aggregator": {"mean": MeanAggregator}}))
    tdir = result.results_dir / "tables"
    tdir.mkdir(parents=True, exist_ok=True)
    (tdir / "mean.csv").write_text("the whole table of an earlier version\n")
    paths = table_files(result, ctx, tdir, ".csv", lambda df: df.to_csv(index=False), BlobStore(root / "blobs"))
    return result, {str(p.relative_to(tdir)): p for p in paths}


def test_a_table_declared_by_benchmark_is_written_one_file_per_benchmark_and_read_back_whole(tmp_path):
    import pandas as pd

    from worldrecall.core.tables import read_tables

    result, got = _tables_job(tmp_path, "one", 0.5)
    assert sorted(got) == ["beta.extra.csv", "mean/alpha.csv", "mean/beta.csv", "status/alpha.csv",
                           "status/beta.csv"]
    tdir = result.results_dir / "tables"
    assert not (tdir / "mean.csv").exists()  # no stale whole table beside its parts
    assert set(pd.read_csv(got["mean/beta.csv"])["benchmark"]) == {"beta"}
    back = read_tables(tdir)
    for name in ("mean", "status"):  # the parts, in benchmark order, are the table the run held
        assert back[name].to_csv(index=False) == result.tables[name].to_csv(index=False)
        pd.testing.assert_frame_equal(back[name], result.tables[name], check_names=False)
    assert back["beta.extra"].to_dict("list") == {"model": ["m1"], "x": [1.5]}


def test_a_re_score_of_one_benchmark_links_the_other_benchmarks_table_parts(tmp_path):
    _, first = _tables_job(tmp_path, "one", 0.5)
    _, second = _tables_job(tmp_path, "two", 0.75)  # alpha's metric re-scored: beta's parts are the same bytes
    assert os.path.samefile(first["mean/beta.csv"], second["mean/beta.csv"])
    assert not os.path.samefile(first["mean/alpha.csv"], second["mean/alpha.csv"])
    assert "alpha,m1,alpha.x,score,-,0.5,1" in first["mean/alpha.csv"].read_text()  # kept as it was
    assert "alpha,m1,alpha.x,score,-,0.75,1" in second["mean/alpha.csv"].read_text()


def test_a_part_written_before_for_a_benchmark_no_longer_in_the_table_is_removed(tmp_path):
    _, first = _tables_job(tmp_path, "one", 0.5)
    stale = first["mean/alpha.csv"].with_name("gamma.csv")
    stale.write_text("benchmark,model\ngamma,m1\n")  # a benchmark an earlier run of this folder had
    _tables_job(tmp_path, "one", 0.5)
    assert not stale.exists() and sorted(p.name for p in (tmp_path / "results/one/tables/mean").iterdir()) == \
        ["alpha.csv", "beta.csv"]


def test_an_empty_table_is_read_back_empty_not_as_the_parts_an_earlier_run_wrote(tmp_path):
    from worldrecall.core.tables import read_tables

    _tables_job(tmp_path, "one", 0.5)
    result, got = _tables_job(tmp_path, "one", 0.5, empty=True)  # the same folder, rerun with nothing to show
    assert "mean.csv" in got and not list((result.results_dir / "tables" / "mean").glob("*.csv"))
    assert read_tables(result.results_dir / "tables")["mean"].empty


def _parts_job(root: Path, folder: str, tables: dict, part_keys: dict, calls: list) -> dict[str, Path]:
    """``table_files`` as the tables sink calls it (a renderer named), counting what it renders."""
    from worldrecall.engine.sinks.files import _csv, _renderer, table_files
    from worldrecall.plugins.stats.aggregators import MeanAggregator

    result = _result(root, folder, [])
    result.tables, result.table_parts, result.config["aggregators"] = tables, part_keys, ["mean"]
    ctx = SimpleNamespace(host=SimpleNamespace(components={"aggregator": {"mean": MeanAggregator}}))
    tdir = result.results_dir / "tables"
    tdir.mkdir(parents=True, exist_ok=True)

    def render(df):
        calls.append(sorted(set(df["benchmark"])))
        return _csv(df)

    paths = table_files(result, ctx, tdir, ".csv", render, BlobStore(root / "blobs"),
                        _renderer("csv", "worldrecall.engine.sinks.files"))
    return {str(p.relative_to(tdir)): p for p in paths}


def test_a_benchmarks_table_part_keyed_by_the_aggregation_is_rendered_once(tmp_path):
    """The aggregation keys each benchmark's part of a ``by_benchmark`` table (``part_keys``); the tables sink keeps
    a part's file under that key and the whole table's dtypes: a job that re-scored alpha renders alpha's file only,
    the same bytes as rendering every part; one where alpha's part changed a shared column's dtype (ints that are
    floats once alpha has a missing value) renders beta's again, as it now reads."""
    import pandas as pd

    from worldrecall.engine.stages.aggregate import aggregate_rows
    from worldrecall.registry.host import load_plugins

    host = load_plugins(fresh=True)
    cfg = {"output_root": str(tmp_path), "cache_dir": str(tmp_path / "cache"), "cache": {"mode": "use"},
           "aggregators": ["mean"], "suite": {}, "aggregator_params": {}, "benchmarks": {}}
    keys: dict = {}
    tables = aggregate_rows(host, _rows(0.5), cfg, {}, part_keys=keys)
    assert set(keys["mean"]) == {"alpha", "beta"} and all(len(k) == 64 for k in keys["mean"].values())
    again: dict = {}
    aggregate_rows(host, _rows(0.75), cfg, {}, part_keys=again)
    assert again["mean"]["beta"] == keys["mean"]["beta"] and again["mean"]["alpha"] != keys["mean"]["alpha"]

    calls: list = []
    first = _parts_job(tmp_path, "one", tables, keys, calls)
    assert calls.count(["alpha"]) == 2 and calls.count(["beta"]) == 2  # mean and status, each part once
    calls.clear()
    tables2 = aggregate_rows(host, _rows(0.75), cfg, {})
    second = _parts_job(tmp_path, "two", tables2, again, calls)
    assert ["beta"] not in calls and calls.count(["alpha"]) == 2
    for name, path in second.items():  # what rendering every part writes
        part = name.split("/")[1][: -len(".csv")]
        whole = tables2[name.split("/")[0]]
        assert path.read_text() == whole[whole["benchmark"] == part].reset_index(drop=True).to_csv(index=False)
    assert os.path.samefile(first["mean/beta.csv"], second["mean/beta.csv"])

    # alpha's part now has a missing count: the concatenated column is float, and beta's "2" reads "2.0"
    ints = {"alpha": pd.DataFrame({"benchmark": ["alpha"], "n": [1]}), "beta": pd.DataFrame({"benchmark": ["beta"],
                                                                                               "n": [2]})}
    kk = {"mean": {"alpha": "a" * 64, "beta": "b" * 64}}
    calls.clear()
    got = _parts_job(tmp_path, "three", {"mean": pd.concat(list(ints.values()), ignore_index=True)}, kk, calls)
    assert got["mean/beta.csv"].read_text() == "benchmark,n\nbeta,2\n"
    gap = pd.DataFrame({"benchmark": ["alpha", "alpha"], "n": [1, None]})
    got = _parts_job(tmp_path, "four", {"mean": pd.concat([gap, ints["beta"]], ignore_index=True)},
                     {"mean": {"alpha": "c" * 64, "beta": "b" * 64}}, calls)
    assert got["mean/beta.csv"].read_text() == "benchmark,n\nbeta,2.0\n"


def test_a_table_part_holding_another_benchmarks_rows_is_not_keyed(tmp_path):
    """A ``by_benchmark`` aggregator whose table for alpha holds a row naming beta: the file cut for beta is not
    beta's part alone, so that table gets no part keys (rendered as it reads, every time)."""
    import pandas as pd

    from worldrecall.engine.stages import aggregate as agg_mod

    assert agg_mod._of_benchmark(pd.DataFrame({"benchmark": ["alpha"]}), "alpha")
    assert not agg_mod._of_benchmark(pd.DataFrame({"benchmark": ["alpha", "beta"]}), "alpha")
    assert not agg_mod._of_benchmark(pd.DataFrame({"model": ["m"]}), "alpha")
    assert agg_mod._of_benchmark(pd.DataFrame({"benchmark": []}), "alpha")  # an empty part cuts no file
