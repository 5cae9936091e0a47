"""The run's last lines say how much the output root holds, by part, and how to trim it (engine/sinks/disk.py)."""

from __future__ import annotations

import os
import shlex
import sys
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
