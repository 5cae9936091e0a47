"""Name collisions are decided by rule, not by load order: a third-party plugin never silently replaces a
built-in component. Entry points load in name order, so both orders are tested (``aaa_collide`` before the
built-in ``memobench`` and ``zzz_collide`` after it)."""

from __future__ import annotations

import types

import pytest

from worldrecall import Metric, Value, hookimpl
from worldrecall.plugins.memobench import plugin as memobench_plugin
from worldrecall.plugins.memobench.ors import ORS
from worldrecall.registry.host import PluginError, PluginHost, PluginInfo


class FakeORS(Metric):
    """Scores every case 1.0 under the built-in ORS's name: exactly what must never happen silently."""

    name = "memobench.ors"
    benchmark = "memobench"
    primary = "ORS"
    values = {"ORS": Value(higher_is_better=True, range=(0.0, 1.0), description="always 1")}

    def score(self, measurement, thresholds):
        return {"ORS": 1.0}


def _third_party(name: str) -> types.ModuleType:
    mod = types.ModuleType(name)

    @hookimpl
    def register_metrics(register):
        """Registers a metric under a built-in's name."""
        register(FakeORS)

    mod.register_metrics = register_metrics
    return mod


def _host(order: list[str], override: dict[str, str] | None = None, strict: bool = False) -> PluginHost:
    host = PluginHost(strict=strict, override=override)
    for name in order:
        if name == "memobench":
            host.add_plugin(memobench_plugin, PluginInfo("memobench", distribution="worldrecall", version="0.1.0"))
        else:
            host.add_plugin(_third_party(name), PluginInfo(name, distribution="evil-metrics", version="1.0"))
    return host


@pytest.mark.parametrize("order", [["aaa_collide", "memobench"], ["memobench", "zzz_collide"]],
                         ids=["third-party-first", "built-in-first"])
def test_a_third_party_plugin_cannot_replace_a_built_in(order):
    host = _host(order)
    intruder = next(n for n in order if n != "memobench")
    assert host.metric("memobench.ors") is ORS  # the built-in keeps its name in both orders
    assert host.owner[("metric", "memobench.ors")] == "memobench"
    assert host.collisions == [
        f"metric name collision: 'memobench.ors' is registered by built-in plugin 'memobench' and by plugin "
        f"{intruder!r}; the built-in is kept (to replace it on purpose set "
        f"plugins.override={{memobench.ors: {intruder}}})"]
    assert (intruder, host.collisions[0]) in host.failures  # reported against the intruder, not the built-in
    assert "memobench.ors" not in host.plugins[intruder].components.get("metric", [])


@pytest.mark.parametrize("order", [["aaa_collide", "memobench"], ["memobench", "zzz_collide"]])
def test_an_explicit_override_replaces_the_built_in_and_is_logged(order, caplog):
    intruder = next(n for n in order if n != "memobench")
    host = _host(order, override={"memobench.ors": intruder})
    assert host.metric("memobench.ors") is FakeORS and host.collisions == []
    assert f"plugin {intruder!r} overrides plugin 'memobench' (plugins.override)" in caplog.text.replace('"', "'")


def test_two_third_party_plugins_on_one_name_both_lose_it():
    host = _host(["aaa_collide", "bbb_collide"])
    with pytest.raises(KeyError, match="unknown metric 'memobench.ors'; known: none"):
        host.metric("memobench.ors")
    assert "neither is used" in host.collisions[0] and "'aaa_collide'" in host.collisions[0]


def test_strict_mode_makes_a_collision_an_exception():
    with pytest.raises(PluginError, match="metric name collision: 'memobench.ors'"):
        _host(["memobench", "zzz_collide"], strict=True)


def test_the_engine_refuses_to_run_with_an_unresolved_collision(monkeypatch, capsys):
    from worldrecall.engine import job as app

    host = _host(["aaa_collide", "memobench"])
    monkeypatch.setattr(app, "load_plugins", lambda **kw: host)
    with pytest.raises(app.PluginCollision, match="metric name collision: 'memobench.ors'"):
        app.host_for({"plugins": {"allow": None, "block": [], "override": {}}})
    # on the job's path: one line per collision, exit code 2, nothing run
    assert app.run_plain({"plugins": {"allow": None, "block": [], "override": {}}}) == 2
    assert "error: metric name collision: 'memobench.ors'" in capsys.readouterr().err


def test_typed_lookup_names_the_known_components():
    host = _host(["memobench"])
    with pytest.raises(KeyError, match=r"unknown metric 'memobench.orz'; known: .*memobench\.ors"):
        host.metric("memobench.orz")
