"""The docs tell the truth about the code: every hook (read from the hookspecs themselves), every config key
(read from the schema), and every registered metric's declared metadata."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import sys
from pathlib import Path

import pytest

from worldrecall.core import hookspecs
from worldrecall.core.components import Metric, Value
from worldrecall.engine.stages.config import WorldrecallSchema
from worldrecall.registry.host import load_plugins
from worldrecall.registry.metadata import metric_problems

ROOT = Path(__file__).resolve().parents[1]


def _hooks() -> dict[str, inspect.Signature]:
    return {n: inspect.signature(f) for n, f in vars(hookspecs).items()
            if callable(f) and hasattr(f, "worldrecall_spec")}


def test_every_hook_is_documented_with_its_signature():
    doc = (ROOT / "docs" / "plugins.md").read_text()
    hooks = _hooks()
    assert "register_metrics" in hooks and "register_commands" in hooks
    for name, sig in hooks.items():
        args = ", ".join(sig.parameters)
        assert re.search(rf"^##+ `{name}\({re.escape(args)}\)`", doc, re.MULTILINE), f"docs/plugins.md: no `{name}({args})`"
        assert inspect.getdoc(getattr(hookspecs, name)), f"{name} has no docstring"


def _keys(schema: type, prefix: str = "") -> list[str]:
    out = []
    for f in dataclasses.fields(schema):
        key = f"{prefix}{f.name}"
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            out += _keys(type(default), key + ".")
        else:
            out.append(key)
    return out


def test_every_config_key_is_documented():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    keys = _keys(WorldrecallSchema)
    assert "max_failure_rate" in keys and "video.max_pixels" in keys
    missing = [k for k in keys if f"`{k}`" not in doc]
    assert not missing, f"docs/configuration.md lacks {missing}"


EXAMPLE = ROOT / "examples" / "metric-plugin"


def _example_metric() -> type[Metric]:
    """The example plugin's metric, imported from its source tree (it is a separate distribution)."""
    sys.path.insert(0, str(EXAMPLE))
    try:
        from worldrecall_colour_shift.metric import ColourShift
    finally:
        sys.path.remove(str(EXAMPLE))
    return ColourShift


def _metrics() -> list[type[Metric]]:
    return [*sorted(load_plugins(fresh=True).metrics.values(), key=lambda m: m.name), _example_metric()]


@pytest.mark.parametrize("metric", _metrics(), ids=lambda m: m.name)
def test_every_metric_declares_its_metadata(metric):
    assert re.fullmatch(r"[a-z_]+\.[a-z0-9_]+", metric.name) and metric.name.startswith(metric.benchmark + ".")
    assert metric.description, f"{metric.name}: no description"
    assert metric.primary, f"{metric.name}: no primary value"
    assert metric_problems(metric) == [], f"{metric.name}: {metric_problems(metric)}"
    meta = metric.value_meta(metric.primary)
    assert isinstance(meta, Value) and meta.higher_is_better is not None, f"{metric.name}: primary has no direction"


def test_the_declared_check_fails_on_an_undeclared_value():
    class Half(Metric):
        name, benchmark, description, primary = "toy.half", "toy", "half declared", "score"
        values = {"score": Value(higher_is_better=True, range=(0.0, 1.0)), "shift": Value(unit="px")}

    assert metric_problems(Half) == [
        "value 'shift': no higher_is_better (True, False, or None for a diagnostic)",
        "value 'shift': no range ((lo, hi), or None when unbounded)"]
    no_primary = type("NoPrimary", (Half,), {"values": {"shift": Value(higher_is_better=None, range=None)}})
    assert metric_problems(no_primary) == ["value 'score' (its primary) is not declared in `values`"]


def test_example_metric_declares_shift_as_lower_is_better():
    colour = _example_metric()
    assert colour.value_meta("shift").higher_is_better is False  # a distance: ranked the right way round
    assert colour.value_meta("score").higher_is_better is True
    assert colour.undeclared(["score", "shift"]) == []


def test_example_plugin_imports_only_the_public_package():
    for path in (EXAMPLE / "worldrecall_colour_shift").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            mods = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            bad = [m for m in mods if m.startswith("worldrecall.")]
            assert not bad, f"{path.relative_to(ROOT)}: imports {bad}; use `from worldrecall import …`"
