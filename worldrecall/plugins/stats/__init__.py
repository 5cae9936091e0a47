"""Built-in aggregators plugin: mean, hierarchical macro average, stratified bootstrap CI, paired difference."""

from __future__ import annotations

from collections.abc import Callable

from worldrecall.core.hookspecs import hookimpl
from worldrecall.plugins.stats.aggregators import (
    BootstrapAggregator,
    MacroAggregator,
    MeanAggregator,
    PairedAggregator,
)


@hookimpl
def register_aggregators(register: Callable[..., None]) -> None:
    """Register the four generic aggregators every benchmark can use."""
    for agg in (MeanAggregator(), MacroAggregator(), BootstrapAggregator(), PairedAggregator()):
        register(agg)
