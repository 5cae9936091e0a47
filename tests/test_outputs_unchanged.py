"""A rerun with nothing changed rewrites no output and says so; any change that shapes an output (a row, an
aggregator's params, a report setting, a deleted table) writes the outputs again (engine/sinks/unchanged.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_config

from worldrecall.engine.job import run_plain
from worldrecall.engine.sinks.unchanged import RECORD
from worldrecall.registry.host import load_plugins

# rewritten by every job (not outputs): this job's seconds and the log `worldrecall cache explain` reads
NOT_OUTPUTS = {"meta/timing.json", "meta/cache_log.json.gz"}


@pytest.fixture()
def host():
    return load_plugins(extra=[toy_plugin], fresh=True)


def _files(out: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under the output root but the cache and the rows: (mtime_ns, inode, bytes)."""
    got = {}
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out)
        if not p.is_file() or rel.parts[0] == "cache" or p.name.startswith("rows-shard-"):
            continue
        st = p.stat()
        got[str(rel)] = (st.st_mtime_ns, st.st_ino, p.read_bytes())
    return got


def _outputs(files: dict) -> dict:
    return {k: v for k, v in files.items() if not any(k.endswith(n) for n in NOT_OUTPUTS)}


def test_an_unchanged_rerun_leaves_every_output_untouched_and_says_so(tmp_path, host, capsys):
    ds = make_dataset(tmp_path, {"good": [0, 1, 2], "bad": [40, 60, 50]})
    cfg = toy_config(tmp_path, ds, report={"enabled": True})
    assert run_plain(cfg, host=host) == 0
    first = capsys.readouterr().out
    assert "outputs unchanged" not in first
    out = tmp_path / "out"
    before = _files(out)
    (results,) = (out / "results").iterdir()
    rec = json.loads((results / RECORD).read_text())
    listed = {f["path"] for f in rec["files"]}
    assert {"tables/mean/toy.csv", "tables/leaderboard.txt", "submission/aggregate.json", "report/index.html"} <= listed
    assert run_plain(cfg, host=host) == 0
    said = capsys.readouterr().out
    assert said.count("outputs unchanged: ") == 1 and str(results) in said
    after = _files(out)
    assert _outputs(after) == _outputs(before)  # same files, same inodes, same bytes, same mtimes
    assert after["results/" + results.name + "/meta/timing.json"] != before["results/" + results.name +
                                                                             "/meta/timing.json"]


@pytest.mark.parametrize("change", ["aggregator_params", "report", "deleted_table", "edited_table", "rows"])
def test_a_change_that_shapes_an_output_writes_the_outputs_again(tmp_path, host, capsys, change):
    ds = make_dataset(tmp_path, {"good": [0, 1, 2], "bad": [40, 60, 50]})
    cfg = toy_config(tmp_path, ds)
    assert run_plain(cfg, host=host) == 0
    (results,) = (tmp_path / "out" / "results").iterdir()
    mean = results / "tables" / "mean" / "toy.csv"
    if change == "aggregator_params":
        cfg["aggregator_params"]["bootstrap"]["replicates"] = 100
    elif change == "report":
        cfg["report"] = {"enabled": False}
    elif change == "deleted_table":
        mean.unlink()
    elif change == "edited_table":
        mean.write_text(mean.read_text() + "\n")
    elif change == "rows":  # the same config over a generation whose content changed: other rows
        make_dataset(tmp_path, {"good": [0, 1, 2], "bad": [40, 60, 90]})
    capsys.readouterr()
    assert run_plain(cfg, host=host) == 0
    assert "outputs unchanged" not in capsys.readouterr().out
    assert [p.name for p in (tmp_path / "out" / "results").iterdir()] == [results.name]
    if change in ("deleted_table", "edited_table"):
        assert mean.read_text().count("\n\n") == 0 and mean.stat().st_size > 0  # written again, as computed
    rec = json.loads((results / RECORD).read_text())
    assert {"path": "tables/mean/toy.csv", "size": mean.stat().st_size, "mtime_ns": mean.stat().st_mtime_ns} in \
        rec["files"]
    assert run_plain(cfg, host=host) == 0
    assert "outputs unchanged" in capsys.readouterr().out  # and then the new outputs stand


def test_a_job_whose_output_failed_records_nothing_so_the_next_writes_again(tmp_path, host, capsys, monkeypatch):
    from worldrecall.engine.sinks.submission import SubmissionSink

    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    cfg = toy_config(tmp_path, ds)
    real = SubmissionSink.write

    def broken(self, result, ctx):
        raise OSError("disk full")

    monkeypatch.setattr(SubmissionSink, "write", broken)
    assert run_plain(cfg, host=host) == 5
    (results,) = (tmp_path / "out" / "results").iterdir()
    assert not (results / RECORD).exists()
    monkeypatch.setattr(SubmissionSink, "write", real)
    capsys.readouterr()
    assert run_plain(cfg, host=host) == 0
    assert "outputs unchanged" not in capsys.readouterr().out
    assert (results / "submission" / "aggregate.json").exists() and (results / RECORD).exists()
