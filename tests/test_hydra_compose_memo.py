"""Hydra's defaults list and composition are reused across launches while only value overrides differ and no
config source changed (``hydra_entry.compose_memo``): every config equals Hydra's own composition."""

from __future__ import annotations

import os

import hydra._internal.config_loader_impl as impl
import pytest
from helpers.hydra_compose import compose_plain as _compose

from worldrecall.engine import hydra_entry
from worldrecall.engine.hydra_entry import CONF_DIR, compose_memo, parse_once
from worldrecall.engine.stages.config import store_schemas

BASE = ["suite.root=/tmp/suite", "output_root=/tmp/out"]
# value overrides, group choices, Hydra's own groups, additions and deletions, an experiment, then repeats
SETS = [[*BASE, "benchmarks.memobench.metrics.ors.thresholds.area_min=0.004"],
        [*BASE, "benchmarks.memobench.metrics.ors.thresholds.area_min=0.005", "workers=2"],
        [*BASE, "models=reference"], [*BASE, "models=reference", "shard.count=2", "shard.index=1"],
        [*BASE, "tracking=none"], [*BASE, "hydra/launcher=submitit_slurm"], [*BASE, "+extra.key=1"],
        [*BASE, "~benchmarks.opis"], [*BASE, "experiment=[smoke,quiet]"], [*BASE, "only=[opis]"],
        [*BASE, "benchmarks.memobench.metrics.ors.thresholds.area_min=0.006"]]


@pytest.fixture(autouse=True)
def _fresh_memo(monkeypatch):
    monkeypatch.setattr(hydra_entry, "_DEFAULTS", {})
    store_schemas()
    hydra_entry.register_resolvers()


def test_every_composition_is_hydras_own_and_value_overrides_compose_nothing(monkeypatch):
    plain = [_compose(CONF_DIR, o) for o in SETS]
    composed = []
    real = impl.ConfigLoaderImpl._load_single_config
    monkeypatch.setattr(impl.ConfigLoaderImpl, "_load_single_config",
                        lambda self, *a, **k: composed.append(1) or real(self, *a, **k))
    with parse_once(), compose_memo():
        first = [_compose(CONF_DIR, o) for o in SETS]
        n_first = len(composed)
        again = [_compose(CONF_DIR, o) for o in SETS]
        n_again = len(composed) - n_first
    assert first == plain and again == plain
    assert n_first > 0 and n_again == 0  # the second round composed no config file
    # the first round composed the default choices once: the ORS thresholds of the last set came from a copy
    assert plain[-1]["benchmarks"]["memobench"]["metrics"]["ors"]["thresholds"]["area_min"] == 0.006


def test_a_job_gets_its_own_copy():
    with parse_once(), compose_memo():
        a = _compose(CONF_DIR, [*BASE, "workers=3"])
        b = _compose(CONF_DIR, BASE)
    assert a["workers"] == 3 and b["workers"] == _compose(CONF_DIR, BASE)["workers"] != 3


def test_a_changed_or_added_config_file_composes_again(tmp_path):
    (tmp_path / "group").mkdir()
    (tmp_path / "cfg.yaml").write_text("defaults:\n  - group: a\n  - _self_\nx: 1\n")
    (tmp_path / "group" / "a.yaml").write_text("y: 1\n")
    with parse_once(), compose_memo():
        assert _compose(str(tmp_path), [], "cfg") == {"x": 1, "group": {"y": 1}}
        assert _compose(str(tmp_path), ["x=2"], "cfg") == {"x": 2, "group": {"y": 1}}
        st = (tmp_path / "group" / "a.yaml").stat()
        (tmp_path / "group" / "a.yaml").write_text("y: 7\n")  # same size: the mtime tells
        os.utime(tmp_path / "group" / "a.yaml", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        assert _compose(str(tmp_path), ["x=3"], "cfg") == {"x": 3, "group": {"y": 7}}
        (tmp_path / "group" / "b.yaml").write_text("y: 9\n")  # a new option, chosen by a group override
        assert _compose(str(tmp_path), ["group=b"], "cfg") == {"x": 1, "group": {"y": 9}}
        with pytest.raises(Exception) as inside:
            _compose(str(tmp_path), ["group=c"], "cfg")
    with pytest.raises(Exception) as outside:
        _compose(str(tmp_path), ["group=c"], "cfg")
    assert type(inside.value) is type(outside.value) and str(inside.value) == str(outside.value)


def test_a_node_registered_again_composes_again():
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="wr_memo_probe", node={"v": 1})
    try:
        with parse_once(), compose_memo():
            assert _compose(CONF_DIR, [], "wr_memo_probe") == {"v": 1}
            cs.store(name="wr_memo_probe", node={"v": 2})
            assert _compose(CONF_DIR, [], "wr_memo_probe") == {"v": 2}
    finally:
        cs.repo.pop("wr_memo_probe.yaml", None)
