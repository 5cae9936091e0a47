"""Built-in plugin entry point of the synthetic revisit suite (registered through the `worldrecall` group).

The plugin contributes the suite itself (``suite.builder=synthetic``, built by
:func:`worldrecall.plugins.synthetic.build.ensure_suite`) and the validity-matrix aggregator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from worldrecall.core.components import Suite
from worldrecall.core.hookspecs import hookimpl


class SyntheticSuite(Suite):
    """The built-in synthetic revisit suite: rendered scenes, counterfactual models, every protocol's layout."""

    name = "synthetic"
    description = "open3d-raycast revisit scenes with exact depth/poses/masks and eight counterfactual models"

    def build(self, root: Path, params: Mapping[str, Any], progress: bool = False) -> None:
        from worldrecall.plugins.synthetic.build import ensure_suite

        ensure_suite(root, **dict(params), progress=progress)

    def models(self, params: Mapping[str, Any]) -> list[str]:
        """The oracle and its counterfactuals (the same for every parameter set)."""
        from worldrecall.plugins.synthetic.counterfactuals import MODELS

        return list(MODELS)


@hookimpl
def register_suites(register: Callable[..., None]) -> None:
    """Register the ``synthetic`` suite (the default run's data)."""
    register(SyntheticSuite())


@hookimpl
def register_aggregators(register: Callable[..., None]) -> None:
    """Register ``synthetic.validity``: does each metric rank the oracle above the failure it targets?"""
    from worldrecall.plugins.synthetic.validity import ValidityMatrix

    register(ValidityMatrix())
