"""The docs tell the truth about the code: every hook (read from the hookspecs themselves), every config key
(read from the schema), and every registered metric's declared metadata."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from worldrecall.core import hookspecs
from worldrecall.core.components import Metric, Value
from worldrecall.engine.config import WorldrecallSchema
from worldrecall.registry.host import load_plugins

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


def _metrics() -> list[type[Metric]]:
    return sorted(load_plugins(fresh=True).metrics.values(), key=lambda m: m.name)


@pytest.mark.parametrize("metric", _metrics(), ids=lambda m: m.name)
def test_every_metric_declares_its_metadata(metric):
    assert re.fullmatch(r"[a-z_]+\.[a-z0-9_]+", metric.name) and metric.name.startswith(metric.benchmark + ".")
    assert metric.description, f"{metric.name}: no description"
    assert metric.primary, f"{metric.name}: no primary value"
    meta = metric.value_meta(metric.primary)
    assert isinstance(meta, Value) and meta.higher_is_better is not None, f"{metric.name}: primary has no direction"
    for name, v in metric.values.items():
        assert isinstance(v, Value), (metric.name, name)
        if v.range is not None:
            assert v.range[0] < v.range[1], (metric.name, name)
