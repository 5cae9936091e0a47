"""Built-in plugin entry point of the synthetic revisit suite (registered through the `worldrecall` group).

The suite itself is built by :func:`worldrecall.plugins.synthetic.build.ensure_suite` (the ``suite.builder``
in the config); the plugin contributes the validity-matrix aggregator.
"""

from __future__ import annotations

from collections.abc import Callable

from worldrecall.core.hookspecs import hookimpl


@hookimpl
def register_aggregators(register: Callable[..., None]) -> None:
    """Register ``synthetic.validity``: does each metric rank the oracle above the failure it targets?"""
    from worldrecall.plugins.synthetic.validity import ValidityMatrix

    register(ValidityMatrix())
