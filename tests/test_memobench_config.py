"""The MemoBench benchmark config matches the code, and the plugin registers through the entry point."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

import worldrecall
from worldrecall.plugins.memobench import plugin
from worldrecall.plugins.memobench.loader import MemoBenchLoader
from worldrecall.registry.host import PluginHost

CONF = Path(worldrecall.__file__).parent / "conf" / "benchmark" / "memobench.yaml"


@pytest.fixture(scope="module")
def conf() -> dict:
    return OmegaConf.to_container(OmegaConf.load(CONF), resolve=False)


def _same(a, b) -> bool:
    """Equal values of equal types (so a YAML ``10`` cannot stand in for a ``10.0`` default)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_yaml_metric_defaults_equal_class_defaults(conf):
    # "vqa" belongs to the memobench_vqa plugin (its own test checks that block)
    assert set(conf["metrics"]) - {"vqa"} == {cls.name.split(".", 1)[1] for cls in plugin.METRICS}
    for cls in plugin.METRICS:
        entry = conf["metrics"][cls.name.split(".", 1)[1]]
        assert _same(entry["params"], cls.params), cls.name
        assert _same(entry["thresholds"], cls.thresholds), cls.name


def test_yaml_benchmark_keys(conf):
    assert conf["enabled"] is True and conf["loader"] == "memobench" and conf["aligner"] == "memobench.phases"
    assert conf["data_root"] == "${suite.root}/memobench/data"
    assert conf["generations"] == "${suite.root}/memobench/output"
    assert _same(conf["loader_options"], MemoBenchLoader.defaults)
    assert conf["aggregators"] == ["memobench.leaderboard"]


def test_plugin_registers_everything():
    host = PluginHost(strict=True)
    host.add_plugin(plugin)
    assert host.get("loader", "memobench").benchmark == "memobench"
    assert host.get("aligner", "memobench.phases")
    assert host.get("aggregator", "memobench.leaderboard")
    for cls in plugin.METRICS:
        m = host.get("metric", cls.name)
        assert m.benchmark == "memobench" and m.primary and m.version
        assert m().params == cls.params   # instantiable with defaults


def test_primary_and_range_metadata():
    for cls in plugin.METRICS:
        assert cls.primary, cls.name
        meta = cls.value_meta(cls.primary)
        assert meta.higher_is_better is not None, cls.name
        if meta.range is not None:
            lo, hi = meta.range
            assert lo < hi
