"""Byte sizes in the config (`video.max_bytes=512M`, `inputs.max_array_bytes=8G`), the array cap as a setting,
metric nodes that declare `enabled`, and misspelled sizes and keys: exit 2, one line, a did-you-mean."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers.toy_plugin import make_dataset, toy_cli_overrides

from worldrecall.core import limits
from worldrecall.core.components import ConfigTypeError
from worldrecall.core.data import CaseFailure
from worldrecall.engine.cli import compose, main
from worldrecall.engine.stages.config import ResolvedConfig, resolve_config, validate_benchmark
from worldrecall.engine.stages.sizes import parse_size
from worldrecall.formats import arrays


@pytest.fixture(autouse=True)
def default_array_cap():
    """A test that resolves a config with another array cap leaves the process's default behind it."""
    yield
    limits.set_max_array_bytes(limits.DEFAULT_MAX_ARRAY_BYTES)


@pytest.mark.parametrize(("text", "nbytes"), [
    ("512M", 512 * 1024 * 1024), ("2G", 2 * 1024 ** 3), ("1.5GiB", 1610612736), ("512m", 536870912),
    ("512 MB", 536870912), ("1kib", 1024), ("1.5K", 1536), ("0.5T", 549755813888), ("7", 7), ("7B", 7),
    (".5G", 536870912), ("1.0000001K", 1024), (4096, 4096)])
def test_byte_sizes_are_binary(text, nbytes):
    assert parse_size(text, "video.max_bytes") == nbytes


@pytest.mark.parametrize(("text", "line"), [
    ("512Q", ("video.max_bytes: unknown size unit 'Q' in '512Q'; known units: K, M, G, T (binary, an optional i "
              "and B, any case: 512M, 2G, 1.5GiB) or none (bytes)")),
    ("2GIG", ("video.max_bytes: unknown size unit 'GIG' in '2GIG'; known units: K, M, G, T (binary, an optional i "
              "and B, any case: 512M, 2G, 1.5GiB) or none (bytes); did you mean '2Gi'?")),
    ("1e9", ("video.max_bytes: '1e9' is not a byte size; known units: K, M, G, T (binary, an optional i and B, any "
             "case: 512M, 2G, 1.5GiB) or none (bytes)")),
    ("-1G", ("video.max_bytes: '-1G' is not a byte size; known units: K, M, G, T (binary, an optional i and B, any "
             "case: 512M, 2G, 1.5GiB) or none (bytes)")),
    (1.5e9, "video.max_bytes: expected a byte size such as 512M, 2G or 1.5GiB, got 1500000000.0"),
    (True, "video.max_bytes: expected a byte size such as 512M, 2G or 1.5GiB, got True"),
    ("9" * 20 + "T", f"video.max_bytes: '{'9' * 20}T' is past the largest size (2^63 bytes)")])
def test_a_bad_size_is_one_line(text, line):
    with pytest.raises(ValueError) as e:
        parse_size(text, "video.max_bytes")
    assert str(e.value) == line


def test_resolved_sizes_are_ints_and_set_the_array_cap(tmp_path):
    cfg = resolve_config({"video": {"max_bytes": "512M"}, "inputs": {"max_array_bytes": "1K"}})
    assert cfg["video"]["max_bytes"] == 536870912 and cfg["inputs"]["max_array_bytes"] == 1024
    assert resolve_config({})["video"]["max_bytes"] == 2 << 30 and limits.max_array_bytes() == 4 << 30
    # Hydra's composition is resolved already but leaves sizes as typed: made ints in place
    composed = ResolvedConfig(resolve_config({}), video={"max_bytes": "2G", "max_pixels": 1, "max_frames": 1},
                              inputs={"max_array_bytes": "1K"})
    assert resolve_config(composed) is composed and composed["video"]["max_bytes"] == 2147483648
    # the array cap is the setting: a 2048-byte array is past 1K, read in this process or a forked worker
    p = tmp_path / "poses_c2w.npy"
    np.save(p, np.zeros(256))
    with pytest.raises(CaseFailure) as e:
        arrays.load_npy(p)
    assert str(e.value) == (f"{p}: array of shape [256] float64 is 2048 bytes, past the limit of 1024 bytes per "
                            "array (inputs.max_array_bytes)")
    resolve_config({"inputs": {"max_array_bytes": "4K"}})
    assert arrays.load_npy(p).shape == (256,)
    with pytest.raises(ConfigTypeError, match=r"^inputs.max_array_bytes: unknown size unit 'Q' in '8Q'"):
        resolve_config({"inputs": {"max_array_bytes": "8Q"}})


def test_a_misspelled_benchmark_key_names_the_close_one():
    with pytest.raises(ConfigTypeError) as e:
        validate_benchmark("toy", {"loader": "toy", "enabeld": False})
    assert str(e.value).endswith("; did you mean 'enabled'?")


def test_every_shipped_metric_node_declares_enabled():
    cfg = compose(["benchmarks.memobench.metrics.ors.enabled=false"])   # no `+`
    for bench, node in cfg["benchmarks"].items():
        for short, metric in node["metrics"].items():
            assert "enabled" in metric, f"benchmarks.{bench}.metrics.{short}"
    assert cfg["benchmarks"]["memobench"]["metrics"]["ors"]["enabled"] is False
    assert cfg["benchmarks"]["scene_memory"]["metrics"]["scene_f1"]["enabled"] is False   # experimental: off


def _run(tmp_path: Path, *overrides: str) -> int:
    return main(["run", f"output_root={tmp_path / 'out'}", "tracking=none", "progress=false", *overrides])


def test_cli_sizes_reach_the_video_budget(tmp_path, toy_host, capsys):
    ds = make_dataset(tmp_path, {"m": [0]})          # one 8-frame 48x32 video: 36864 decoded bytes
    over = toy_cli_overrides(ds, None, "workers=1", max_side=None)
    assert _run(tmp_path, *over, "video.max_bytes=16K") == 3   # its one case fails: over the budget
    rows = "".join(p.read_text() for p in (tmp_path / "out" / "results").rglob("*.jsonl"))
    assert "needs 0.0 MiB, over the per-worker frame budget of 0.0 MiB (video.max_bytes=16384)" in rows
    assert _run(tmp_path, *over, "video.max_bytes=512M") == 0
    capsys.readouterr()
    assert _run(tmp_path, *over, "video.max_bytes=512Q") == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert err == [("error: video.max_bytes: unknown size unit 'Q' in '512Q'; known units: K, M, G, T (binary, an "
                    "optional i and B, any case: 512M, 2G, 1.5GiB) or none (bytes)")]


@pytest.mark.parametrize(("override", "line"), [
    ("+benchmarks.memobench.metrics.ors.enabeld=false",
     ("error: benchmarks.memobench.metrics.ors: unknown key 'enabeld'; known: enabled, params, thresholds; "
      "did you mean 'enabled'?")),
    ("inputs.max_array_bytes=2GIG",
     ("error: inputs.max_array_bytes: unknown size unit 'GIG' in '2GIG'; known units: K, M, G, T (binary, an "
      "optional i and B, any case: 512M, 2G, 1.5GiB) or none (bytes); did you mean '2Gi'?")),
    # switched off as typed (no `+`): the run goes on to the next check, here a misspelled benchmark
    ("benchmarks.memobench.metrics.ors.enabled=false only=[memobnech]",
     "error: only: unknown benchmark 'memobnech'; known: memobench, mind, opis, scene_memory"),
])
def test_cli_misspelled_sizes_and_keys_are_exit_2(tmp_path, capsys, override, line):
    from worldrecall.registry import host as host_mod

    host_mod._HOST = None
    try:
        assert _run(tmp_path, *override.split()) == 2
    finally:
        host_mod._HOST = None
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith(line), err
    assert not (tmp_path / "out" / "results").exists()
