"""Config files are parsed once per process while unchanged (``hydra_entry.parse_once``): the composed
config is Hydra's own, an edited file is parsed again, and a file Hydra would refuse is still Hydra's error."""

from __future__ import annotations

import os

import pytest
import yaml
from helpers.hydra_compose import compose_plain as _compose

from worldrecall.engine import hydra_entry
from worldrecall.engine.hydra_entry import CONF_DIR, parse_once
from worldrecall.engine.stages.config import store_schemas

OVERRIDES = ["suite.params.n_cases=3", "benchmarks.memobench.metrics.ors.thresholds.area_min=0.004",
             "models=reference", "only=[opis]", "shard.count=2", "shard.index=1"]


def test_the_composed_config_is_hydras_own_and_the_second_launch_parses_nothing(monkeypatch):
    store_schemas()
    hydra_entry.register_resolvers()
    plain = _compose(CONF_DIR, OVERRIDES)
    with parse_once():
        first = _compose(CONF_DIR, OVERRIDES)
    parsed = []
    real = yaml.load
    monkeypatch.setattr(yaml, "load", lambda *a, **k: parsed.append(1) or real(*a, **k))
    with parse_once():
        second = _compose(CONF_DIR, OVERRIDES)
    assert first == plain and second == plain
    assert parsed == []  # every file unchanged: none parsed again


def test_an_edited_config_file_is_parsed_again(tmp_path):
    p = tmp_path / "cfg.yaml"
    p.write_text("a: 1\nb: [x, y]\n")
    with parse_once():
        assert _compose(str(tmp_path), [], "cfg") == {"a": 1, "b": ["x", "y"]}
        assert _compose(str(tmp_path), [], "cfg") == {"a": 1, "b": ["x", "y"]}  # from the memo
        p.write_text("a: 22\nb: [x]\n")  # another size
        assert _compose(str(tmp_path), [], "cfg")["a"] == 22
        st = p.stat()
        p.write_text("a: 33\nb: [x]\n")  # the same size: the mtime tells
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        assert _compose(str(tmp_path), [], "cfg")["a"] == 33
        cfg = _compose(str(tmp_path), ["a=5"], "cfg")  # an override changes the job's copy only
        assert cfg["a"] == 5 and _compose(str(tmp_path), [], "cfg")["a"] == 33


def test_a_file_hydra_refuses_is_still_hydras_error(tmp_path):
    (tmp_path / "bad.yaml").write_text("a: [unclosed\n")
    with parse_once(), pytest.raises(Exception) as inside:
        _compose(str(tmp_path), [], "bad")
    with pytest.raises(Exception) as outside:
        _compose(str(tmp_path), [], "bad")
    assert type(inside.value) is type(outside.value) and str(inside.value) == str(outside.value)
