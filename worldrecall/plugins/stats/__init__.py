"""Built-in aggregators plugin: mean, hierarchical macro average, stratified bootstrap CI, paired difference, and
the ranked views of every declared benchmark."""

from __future__ import annotations

from collections.abc import Callable

from worldrecall.core.hookspecs import hookimpl
from worldrecall.plugins.stats.aggregators import (
    BootstrapAggregator,
    MacroAggregator,
    MeanAggregator,
    PairedAggregator,
)
from worldrecall.plugins.stats.ranking import RankingAggregator


@hookimpl
def register_aggregators(register: Callable[..., None]) -> None:
    """Register the generic aggregators every benchmark can use."""
    for agg in (MeanAggregator(), MacroAggregator(), BootstrapAggregator(), PairedAggregator(), RankingAggregator()):
        register(agg)
