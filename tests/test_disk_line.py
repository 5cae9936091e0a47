"""The run's last lines say how much the output root holds, by part, and how to trim it (engine/sinks/disk.py)."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_config

from worldrecall.engine.cache_cli import parse
from worldrecall.engine.job import run_plain
from worldrecall.engine.sinks.disk import disk_lines, usage
from worldrecall.registry.host import load_plugins


def test_a_run_ends_with_the_output_roots_size_by_part_and_a_prune_command_that_parses(tmp_path, capsys):
    host = load_plugins(extra=[toy_plugin], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    cfg = toy_config(tmp_path, ds)
    for _ in range(2):  # the first run, and the unchanged rerun that writes nothing
        assert run_plain(cfg, host=host) == 0
        last = capsys.readouterr().out.strip().splitlines()[-2:]
        out = tmp_path / "out"
        assert last[0].startswith(f"disk: {out} holds ") and "cache " in last[0] and "results " in last[0]
        command = last[1].split(": ", 1)[1].split(" (or")[0]
        argv = shlex.split(command)
        assert argv[:3] == ["worldrecall", "cache", "prune"]
        ns, overrides, _ = parse(argv[2:])  # the command as `worldrecall cache` reads it
        assert ns.older_than == "7d" and overrides == [f"output_root={out}"]


def test_a_hard_linked_file_is_counted_once_in_the_first_part_that_holds_it(tmp_path):
    root = tmp_path / "root"
    (root / "cache" / "artifacts").mkdir(parents=True)
    (root / "blobs").mkdir()
    (root / "results").mkdir()
    big = root / "cache" / "artifacts" / "a.png"
    big.write_bytes(os.urandom(1 << 20))
    os.link(big, root / "blobs" / "a.png")
    os.link(big, root / "results" / "a.png")
    (root / "results" / "rows.jsonl").write_bytes(b"x" * (256 << 10))
    (root / "mlflow.db").write_bytes(b"y" * (128 << 10))
    got = usage(root)
    assert got["cache/artifacts"] >= 1 << 20
    assert got.get("blobs", 0) < 1 << 16  # the folder itself, not the file counted again
    assert (256 << 10) <= got["results"] < (256 << 10) + (1 << 16)
    assert got["mlflow"] >= 128 << 10
    line = disk_lines(root, sizes=got)[0]
    assert line.startswith(f"disk: {root} holds ") and "(artifacts 1.1 MB)" in line and "MLflow 0.1 MB" in line


def _root_with_links(tmp_path: Path, pruned_to_mlflow: bool = False) -> Path:
    """An output root with every kind of link a run leaves (and one a pruned blob store leaves)."""
    root = tmp_path / "root"
    for d in ("cache/artifacts", "cache/scores", "blobs", "results/r1/tables", "results/r2/tables",
              "results/r1/report/assets", "mlartifacts/1/x", "hydra/2026-12-06/10-00-00/.hydra"):
        (root / d).mkdir(parents=True, exist_ok=True)
    art = root / "cache" / "artifacts" / "a.png"  # a per-case file, logged (a blob), shown in the report
    art.write_bytes(os.urandom(300 << 10))
    for link in ("blobs/a.png", "results/r1/report/assets/a.png", "mlartifacts/1/x/a.png"):
        os.link(art, root / link)
    table = root / "blobs" / "t.csv"  # a table shared by two results folders through the blob store
    table.write_bytes(b"t" * (70 << 10))
    for r in ("r1", "r2"):
        os.link(table, root / "results" / r / "tables" / "t.csv")
    pruned = root / "results" / "r1" / "tables" / "p.csv"  # its blob pruned: linked between results only
    pruned.write_bytes(b"p" * (90 << 10))
    os.link(pruned, root / "results" / "r2" / "tables" / "p.csv")
    if pruned_to_mlflow:  # its blob pruned, logged to MLflow: du counts it under results, the early split under MLflow
        m = root / "results" / "r2" / "tables" / "m.csv"
        m.write_bytes(b"m" * (50 << 10))
        os.link(m, root / "mlartifacts" / "1" / "x" / "m.csv")
    (root / "cache" / "scores" / "s.json").write_bytes(b"s" * 5000)
    (root / "cache" / "file_digests.json").write_bytes(b"d" * (20 << 10))
    (root / "results" / "r1" / "rows.jsonl").write_bytes(b"r" * (40 << 10))
    (root / "mlflow.db").write_bytes(b"y" * (128 << 10))
    (root / "hydra" / "2026-12-06" / "10-00-00" / ".hydra" / "config.yaml").write_bytes(b"c" * 3000)
    return root


def test_the_size_measured_early_and_finished_at_the_end_is_what_du_counts_at_the_end(tmp_path):
    from worldrecall.engine.sinks.disk import EarlyUsage

    root = _root_with_links(tmp_path)
    early = EarlyUsage(root)  # as an unchanged job begins
    (root / "results" / "r1" / "meta").mkdir()
    (root / "results" / "r1" / "meta" / "timing.json").write_bytes(b"t" * 9000)  # what it writes meanwhile
    assert usage(root, early=early) == usage(root)
    root2 = _root_with_links(tmp_path / "b", pruned_to_mlflow=True)
    whole, split = usage(root2), usage(root2, early=EarlyUsage(root2))
    assert sum(split.values()) == sum(whole.values())
    assert {k: v for k, v in split.items() if k not in ("results", "mlflow")} == \
        {k: v for k, v in whole.items() if k not in ("results", "mlflow")}


def test_the_end_walks_only_the_jobs_own_folders_and_what_is_still_written(tmp_path):
    """Given the job's own folders (its results folder, its Hydra folder), every other results folder and Hydra
    folder is in the early ``du``: the end walks what the job writes, not every earlier job's files; what it
    writes meanwhile (new files, links to blobs and to an earlier folder's file) is counted as a whole count
    at the end counts it, for a job that may be unchanged and for one whose MLflow process still logs."""
    from worldrecall.engine.sinks.disk import EarlyUsage, _unwritten, _written_out

    for settled in (_unwritten, _written_out):
        root = _root_with_links(tmp_path / settled.__name__)
        for i in range(3, 8):  # earlier jobs' folders
            (root / "results" / f"r{i}").mkdir()
            (root / "results" / f"r{i}" / "rows.jsonl").write_bytes(b"e" * (10 << 10))
        (root / "hydra" / "2026-12-06" / "09-00-00").mkdir()
        own = (root / "results" / "r1", root / "hydra" / "2026-12-06" / "10-00-00")
        since = None
        if settled is _written_out:  # MLflow logs the job's new runs: runs older than the job are measured early
            time.sleep(1.2)
            since = time.time()
            (root / "mlartifacts" / "2").mkdir()  # a run the job's MLflow process made
        early = EarlyUsage(root, settled=settled, own=own, since=since)
        assert root / "results" / "r2" in early.paths and root / "hydra" / "2026-12-06" / "09-00-00" in early.paths
        assert set(early.late) >= set(own) and not any(p.is_relative_to(root / "results" / "r2") for p in early.late)
        assert root / "mlartifacts" not in early.late
        assert root / ("mlartifacts/1" if settled is _written_out else "mlartifacts") in early.paths
        if settled is _written_out:
            assert root / "mlartifacts" / "2" in early.late
            os.link(root / "blobs" / "t.csv", root / "mlartifacts" / "2" / "t.csv")  # logged from a blob
            (root / "mlartifacts" / "3").mkdir()  # another run made after the early du began
            (root / "mlartifacts" / "3" / "m.json").write_bytes(b"j" * 6000)
        (root / "results" / "r1" / "meta").mkdir()
        (root / "results" / "r1" / "meta" / "outputs.json").write_bytes(b"o" * 7000)
        os.link(root / "blobs" / "t.csv", root / "results" / "r1" / "t2.csv")  # a link to a measured blob
        os.link(root / "results" / "r3" / "rows.jsonl", root / "results" / "r1" / "r3.jsonl")  # to an early folder
        (root / "hydra" / "2026-12-06" / "10-00-00" / "job.log").write_bytes(b"l" * 3000)
        read = []
        sizes = early.sizes
        early.sizes = lambda parts: read.append(sizes(parts)) or read[-1]  # type: ignore[method-assign]
        assert usage(root, early=early) == usage(root)
        assert read and read[0] is not None  # the early measure was used, not a whole count


def test_a_folder_that_appears_beside_the_jobs_own_is_measured_whole(tmp_path):
    """Another job's results folder written meanwhile is not in the early ``du``'s list: the early measure is
    not used (a whole count instead), so the line still counts it."""
    from worldrecall.engine.sinks.disk import EarlyUsage, _parts

    root = _root_with_links(tmp_path)
    own = (root / "results" / "r1",)
    unused = EarlyUsage(root, own=own)
    (root / "results" / "r9").mkdir()
    (root / "results" / "r9" / "rows.jsonl").write_bytes(b"n" * (60 << 10))
    assert unused.sizes(_parts(root, root / "cache")) is None
    early = EarlyUsage(root, own=own)
    (root / "results" / "r10").mkdir()
    (root / "results" / "r10" / "rows.jsonl").write_bytes(b"m" * (30 << 10))
    assert usage(root, early=early) == usage(root)
    assert usage(root, early=EarlyUsage(root, own=own)) == usage(root)  # nothing appeared: used, the same


def test_an_early_measure_of_another_set_of_parts_is_not_used(tmp_path):
    from worldrecall.engine.sinks.disk import EarlyUsage

    root = _root_with_links(tmp_path)
    early = EarlyUsage(root)
    (root / "cache" / "judge_answers").mkdir()  # a kind that appeared meanwhile: measure all again
    (root / "cache" / "judge_answers" / "a.json").write_bytes(b"j" * (30 << 10))
    assert usage(root, early=early) == usage(root)  # measured whole: the early parts are not the parts now
    assert early.sizes([]) is None  # and read once
    assert usage(root, early=EarlyUsage(root)) == usage(root)


def test_an_unchanged_rerun_prints_the_size_a_whole_count_gives_after_it(tmp_path, capsys, monkeypatch):
    from worldrecall.engine.sinks import disk

    used = []
    real = disk.EarlyUsage.sizes

    def spy(self, parts):
        got = real(self, parts)
        used.append(got is not None)
        return got

    monkeypatch.setattr(disk.EarlyUsage, "sizes", spy)
    host = load_plugins(extra=[toy_plugin], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    cfg = toy_config(tmp_path, ds)
    assert run_plain(cfg, host=host) == 0
    assert used == []  # a first run: no record, measured whole at its end
    capsys.readouterr()
    assert run_plain(cfg, host=host) == 0
    printed = capsys.readouterr().out
    assert "outputs unchanged" in printed and used == [True]
    assert printed.strip().splitlines()[-2] == disk_lines(tmp_path / "out")[0]


def test_a_job_that_logs_to_mlflow_measures_while_mlflow_logs_and_prints_what_a_whole_count_gives(tmp_path, capsys,
                                                                                                  monkeypatch):
    import pytest

    pytest.importorskip("mlflow")
    from worldrecall.engine.sinks import disk

    started = []
    real = disk.start_usage

    def spy(cfg, settled=disk._unwritten, own=(), since=None):
        started.append(settled.__name__)
        return real(cfg, settled, own, since)

    whole = []
    real_lines = disk.disk_lines

    def lines(output_root, cache_dir=None, sizes=None, early=None):
        got = real_lines(output_root, cache_dir, sizes, early)
        whole.append((early is not None, got[0], real_lines(output_root, cache_dir)[0]))  # du of all, now
        return got

    monkeypatch.setattr(disk, "start_usage", spy)
    monkeypatch.setattr(disk, "disk_lines", lines)
    host = load_plugins(extra=[toy_plugin], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    cfg = toy_config(tmp_path, ds, tracking={"enabled": True})
    assert run_plain(cfg, host=host) == 0
    printed = capsys.readouterr().out
    assert started == ["_written_out"]  # while MLflow logged the job's files
    assert (tmp_path / "out" / "mlflow.db").exists() and "MLflow " in printed
    ((used, line, at_the_end),) = whole
    assert used and line == at_the_end and line in printed
