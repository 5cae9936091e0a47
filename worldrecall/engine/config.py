"""Structured-config schemas (Hydra ConfigStore): wrong types are rejected with a clear message.

The YAML tree in ``worldrecall/conf`` supplies values; these dataclasses supply types. Metric params and
thresholds are typed by each metric's own defaults (see ``components.merge_typed``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore


@dataclass
class ShardSchema:
    count: int = 1
    index: int = 0


@dataclass
class PluginsSchema:
    allow: Optional[List[str]] = None
    block: List[str] = field(default_factory=list)


@dataclass
class TrackingSchema:
    enabled: bool = True
    tracking_uri: Optional[str] = None
    experiment: str = "worldrecall"
    run_name: Optional[str] = None
    tags: Dict[str, str] = field(default_factory=dict)


@dataclass
class SuiteSchema:
    builder: Optional[str] = None
    root: Optional[str] = None
    params: Dict[str, Any] = field(default_factory=dict)
    aggregators: List[str] = field(default_factory=list)  # e.g. the synthetic suite's validity matrix
    aggregator_params: Dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchmarkSchema:
    enabled: bool = True
    loader: str = "???"
    loader_options: Dict[str, Any] = field(default_factory=dict)
    aligner: Optional[str] = None
    aligner_params: Dict[str, Any] = field(default_factory=dict)
    data_root: Optional[str] = None
    generations: Any = None
    metrics: Dict[str, Any] = field(default_factory=dict)
    aggregators: List[str] = field(default_factory=list)


@dataclass
class WorldrecallSchema:
    output_root: str = "worldrecall_out"
    cache_dir: str = "worldrecall_out/cache"
    device: str = "cpu"
    batch_size: int = 8
    workers: int = 0
    progress: bool = True
    artifacts: bool = True
    max_failure_rate: float = 0.5
    only: Optional[List[str]] = None
    models_only: Optional[List[str]] = None
    plugins: PluginsSchema = field(default_factory=PluginsSchema)
    shard: ShardSchema = field(default_factory=ShardSchema)
    suite: SuiteSchema = field(default_factory=SuiteSchema)
    models: Dict[str, Any] = field(default_factory=dict)
    judge_options: Dict[str, Any] = field(default_factory=dict)
    tracking: TrackingSchema = field(default_factory=TrackingSchema)
    # Any (not BenchmarkSchema): OmegaConf cannot create typed dict entries from command-line overrides;
    # each node is checked by validate_benchmark() when the run is planned.
    benchmarks: Dict[str, Any] = field(default_factory=dict)
    aggregators: List[str] = field(default_factory=list)
    aggregator_params: Dict[str, Any] = field(default_factory=dict)


def store_schemas() -> None:
    cs = ConfigStore.instance()
    cs.store(name="worldrecall_schema", node=WorldrecallSchema)


def validate_benchmark(name: str, node: Any) -> dict[str, Any]:
    """Check one ``benchmarks.<name>`` node against :class:`BenchmarkSchema` (unknown keys, types, required)."""
    from dataclasses import fields

    from worldrecall.core.components import ConfigTypeError, coerce_like

    if not isinstance(node, dict):
        raise ConfigTypeError(f"benchmarks.{name}: expected a mapping, got {node!r}")
    defaults = BenchmarkSchema()
    out: dict[str, Any] = {}
    known = {f.name for f in fields(BenchmarkSchema)}
    for key in node:
        if key not in known:
            raise ConfigTypeError(f"benchmarks.{name}.{key}: unknown key (known: {', '.join(sorted(known))})")
    for f in fields(BenchmarkSchema):
        default = getattr(defaults, f.name)
        value = node.get(f.name, default)
        if f.name == "loader" and (not value or value == "???"):
            raise ConfigTypeError(f"benchmarks.{name}.loader: required (name of a registered loader)")
        out[f.name] = value if f.name == "generations" else coerce_like(default, value, f"benchmarks.{name}.{f.name}")
    return out
