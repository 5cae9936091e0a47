"""Plugin host: discovery through entry points, isolation of broken plugins, strict mode, allowlist, collisions."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from worldrecall.core.components import Metric, Value
from worldrecall.core.hookspecs import hookimpl
from worldrecall.registry import host as host_mod
from worldrecall.registry.host import PluginError, PluginHost, load_plugins
from worldrecall.registry.metadata import value_problems

ROOT = Path(__file__).resolve().parents[1]


class _EP:
    """Stand-in for an importlib.metadata entry point (name, value, load, dist)."""

    def __init__(self, name, loader):
        self.name, self.value, self._loader, self.dist = name, f"fake.{name}", loader, None

    def load(self):
        return self._loader()


def _metric(name):
    return type("M", (Metric,), {"name": name, "benchmark": name.split(".")[0], "primary": "x",
                                 "values": {"x": Value(higher_is_better=True, range=(0.0, 1.0))}})


def _plugin(*metric_names):
    mod = types.ModuleType("p_" + "_".join(metric_names).replace(".", "_"))

    @hookimpl
    def register_metrics(register):
        for n in metric_names:
            register(_metric(n))

    mod.register_metrics = register_metrics
    return mod


def _broken():
    raise ImportError("No module named 'torch_nonexistent'")


def _patch_eps(monkeypatch, eps):
    monkeypatch.setattr(host_mod.md, "entry_points", lambda group: eps if group == "worldrecall" else [])


def test_builtin_plugins_come_through_entry_points():
    host = load_plugins(fresh=True)
    names = set(host.plugins)
    assert {"stats", "models", "memobench", "scene_memory", "synthetic", "judges"} <= names
    assert all(p.distribution == "worldrecall" for p in host.plugins.values())
    assert {"mean", "macro", "bootstrap", "paired"} <= set(host.components["aggregator"])
    assert host.owner[("aggregator", "mean")] == "stats"


def test_broken_plugin_is_reported_and_skipped(monkeypatch):
    _patch_eps(monkeypatch, [_EP("good", lambda: _plugin("a.x")), _EP("broken", _broken)])
    h = PluginHost(strict=False)
    h.load_entry_points()
    assert "a.x" in h.metrics
    assert h.failures == [("broken", "import failed: ImportError: No module named 'torch_nonexistent'")]
    assert h.plugins["broken"].to_json()["error"].startswith("import failed")


def test_strict_mode_env_makes_it_an_error(monkeypatch):
    monkeypatch.delenv("WORLDRECALL_PLUGINS", raising=False)  # conftest pins the built-ins; these are fakes
    _patch_eps(monkeypatch, [_EP("broken", _broken)])
    monkeypatch.setenv("WORLDRECALL_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="broken.*torch_nonexistent"):
        load_plugins(fresh=True)


def test_allowlist_config_and_env(monkeypatch):
    monkeypatch.delenv("WORLDRECALL_PLUGINS", raising=False)
    _patch_eps(monkeypatch, [_EP("one", lambda: _plugin("one.m")), _EP("two", lambda: _plugin("two.m"))])
    assert set(load_plugins(allow=["two"], fresh=True).plugins) == {"two"}
    monkeypatch.setenv("WORLDRECALL_PLUGINS", "one")
    assert set(load_plugins(allow=["two"], fresh=True).plugins) == {"one"}  # env wins over config
    monkeypatch.setenv("WORLDRECALL_PLUGINS", "")
    assert load_plugins(fresh=True).plugins == {}  # empty = none
    monkeypatch.delenv("WORLDRECALL_PLUGINS")
    monkeypatch.setenv("WORLDRECALL_DISABLE_PLUGINS", "one")
    assert set(load_plugins(fresh=True).plugins) == {"two"}


def test_name_collision_names_both_plugins(monkeypatch):
    # two third-party plugins: neither wins by load order; both are named (built-in rules: test_registry_collisions)
    _patch_eps(monkeypatch, [_EP("alpha", lambda: _plugin("x.same")), _EP("beta", lambda: _plugin("x.same"))])
    h = PluginHost(strict=False)
    h.load_entry_points()
    (name, msg), = h.failures
    assert name == "beta" and "'alpha'" in msg and "'beta'" in msg and "x.same" in msg and "neither" in msg
    assert ("metric", "x.same") not in h.owner and h.collisions == [msg]
    with pytest.raises(PluginError, match="alpha.*beta"):
        PluginHost(strict=True).load_entry_points()


def test_misspelled_hook_is_rejected():
    mod = types.ModuleType("typo")

    @hookimpl
    def register_metric(register):  # missing "s"
        pass

    mod.register_metric = register_metric
    h = PluginHost(strict=False)
    h.add_plugin(mod)
    assert "registration failed" in h.failures[0][1]


def test_cli_plugins_json_keeps_working_with_a_broken_plugin(monkeypatch, capsys):
    from worldrecall.engine.cli import main

    monkeypatch.delenv("WORLDRECALL_PLUGINS", raising=False)
    real = list(host_mod.md.entry_points(group="worldrecall"))
    _patch_eps(monkeypatch, real + [_EP("broken", _broken)])
    host_mod._HOST = None
    assert main(["plugins", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by = {p["name"]: p for p in out}
    assert "import failed" in by["broken"]["error"]
    assert by["stats"]["version"] == "0.1.0" and "register_aggregators" in by["stats"]["hooks"]
    assert "mean" in by["stats"]["components"]["aggregator"]
    host_mod._HOST = None




def _two_impl_plugin(calls: list[str]) -> types.ModuleType:
    """One plugin, two implementations of ``register_metrics`` (the second through ``specname=``)."""
    mod = types.ModuleType("twice")

    @hookimpl
    def register_metrics(register):
        calls.append("first")
        register(_metric("twice.first"))

    @hookimpl(specname="register_metrics")
    def more_metrics(register):
        calls.append("second")
        register(_metric("twice.second"))

    mod.register_metrics, mod.more_metrics = register_metrics, more_metrics
    return mod


def test_a_second_specname_implementation_registers_too():
    calls: list[str] = []
    h = PluginHost(strict=True)
    h.add_plugin(_two_impl_plugin(calls))
    h.add_plugin(_plugin("later.m"))  # a later plugin's call must not run the first plugin's hooks again
    assert sorted(calls) == ["first", "second"]
    assert h.owner[("metric", "twice.first")] == h.owner[("metric", "twice.second")] == "twice"
    assert sorted(h.plugins["twice"].components["metric"]) == ["twice.first", "twice.second"]
    assert h.owner[("metric", "later.m")] == "p_later_m"


def test_a_raising_hook_is_reported_and_the_plugins_other_hooks_still_register():
    mod = types.ModuleType("half")

    @hookimpl
    def register_metrics(register):
        register(_metric("half.m"))
        raise RuntimeError("boom")

    @hookimpl
    def register_aggregators(register):
        from worldrecall.core.components import Aggregator
        register(type("A", (Aggregator,), {"name": "half_agg"}))

    mod.register_metrics, mod.register_aggregators = register_metrics, register_aggregators
    h = PluginHost(strict=False)
    h.add_plugin(mod)
    assert h.failures == [("half", "register_metrics raised RuntimeError: boom")]
    assert "half.m" not in h.metrics  # staged components of a hook that raised are discarded
    assert h.owner[("aggregator", "half_agg")] == "half"


def test_trace_env_prints_pluggys_trace_of_each_hook_call(monkeypatch, capsys):
    monkeypatch.setenv("WORLDRECALL_TRACE_PLUGINS", "1")
    h = PluginHost(strict=True)
    h.add_plugin(_plugin("traced.m"))
    err = capsys.readouterr().err
    assert "register_metrics [hook]" in err and "<register for plugin 'p_traced_m'>" in err
    assert "finish register_metrics" in err
    monkeypatch.setenv("WORLDRECALL_TRACE_PLUGINS", "0")
    PluginHost(strict=True).add_plugin(_plugin("quiet.m"))
    assert capsys.readouterr().err == ""


def test_a_metric_with_an_undeclared_value_is_refused_with_plugin_metric_and_value():
    mod = types.ModuleType("vague")

    class Vague(Metric):
        name, benchmark, primary = "vague.m", "vague", "score"
        values = {"score": Value(higher_is_better=True, range=(0.0, 1.0)), "shift": Value(range=None)}

    @hookimpl
    def register_metrics(register):
        register(Vague)
        register(_metric("vague.fine"))

    mod.register_metrics = register_metrics
    h = PluginHost(strict=False)
    h.add_plugin(mod)
    assert h.failures == [("vague", ("metric 'vague.m' of plugin 'vague' refused: value 'shift': no "
                                     "higher_is_better (True, False, or None for a diagnostic)"))]
    assert "vague.m" not in h.metrics and "vague.fine" in h.metrics  # only the vague metric is refused
    with pytest.raises(PluginError, match="plugin 'vague'.*'vague.m'.*value 'shift'"):
        PluginHost(strict=True).add_plugin(mod)


def test_value_metadata_is_keyword_only_and_has_no_silent_default():
    with pytest.raises(TypeError):
        Value(True, (0.0, 1.0))  # positional: which field is which is not readable
    assert value_problems(Value(higher_is_better=None, range=None)) == []  # a declared, unbounded diagnostic
    assert value_problems(Value()) and not Value().higher_is_better and not Value().range
