"""The config schema: every top-level key's type AND its one default (docs/configuration.md documents each).

Hydra composes ``conf/config.yaml`` on top of this schema (wrong types are rejected with the key's name);
plain-dict configs (tests, the Python API) get the very same defaults through :func:`resolve_config`, so
no code path keeps a fallback of its own. Metric params and thresholds are typed by each metric's own
defaults (``components.merge_typed``), benchmark nodes by :class:`BenchmarkSchema`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ShardSchema:
    count: int = 1
    index: int = 0


@dataclass
class PluginsSchema:
    allow: list[str] | None = None   # plugin names to load (None = all installed); env WORLDRECALL_PLUGINS wins
    block: list[str] = field(default_factory=list)
    override: dict[str, str] = field(default_factory=dict)  # component name -> plugin allowed to replace it


@dataclass
class VideoSchema:
    max_pixels: int = 40_000_000   # per frame; a larger frame is a per-case error, checked before decoding
    max_frames: int = 100_000      # per video; a longer (declared) video is a per-case error
    # decoded frames one process (each worker) holds; a video that alone exceeds it is a per-case error.
    # A byte size (SIZE_KEYS): bytes, or text such as 512M / 2G / 1.5GiB, an int once resolved
    max_bytes: Any = 2 << 30


@dataclass
class InputsSchema:
    # an array read from an input file (.npy, .npz member) larger than this in memory fails its case, checked
    # from the header before allocation (formats.arrays); a byte size like video.max_bytes
    max_array_bytes: Any = 4 << 30


@dataclass
class ReportSchema:
    enabled: bool = True                       # write the static HTML report (results/<key>/report/index.html)
    thumb_side: int = 96                       # longest side of frame thumbnails, px
    image_side: int = 360                      # longest side of full-size figures, px
    frames_per_phase: int = 2                  # reference/generated frames shown per V/D/R phase
    max_cases_per_model: int | None = None  # cap the per-case panels (None = every case)
    # pictures inline in index.html (one file to mail, every picture again in each job's page) instead of
    # report/assets/ beside it: hard links to the output root's blob store, each picture stored once
    self_contained: bool = False


@dataclass
class CacheSchema:
    # use: read and write the store; refresh: compute everything again and overwrite what is stored (entries this
    # run writes are read back within it); off: read nothing, write nothing under cache_dir. Not in any key: it
    # decides whether a stored result is used, never what a result is.
    mode: str = "use"


@dataclass
class TrackingSchema:
    enabled: bool = True
    tracking_uri: str | None = None
    experiment: str = "worldrecall"
    run_name: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    prefetch: bool = True  # start the MLflow process (its import) as the job begins, not at logging


@dataclass
class SuiteSchema:
    builder: str | None = None   # a registered suite name (e.g. synthetic)
    root: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    aggregators: list[str] = field(default_factory=list)  # e.g. the synthetic suite's validity matrix
    aggregator_params: dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchmarkSchema:
    enabled: bool = True
    loader: str = "???"
    loader_options: dict[str, Any] = field(default_factory=dict)
    aligner: str | None = None
    aligner_params: dict[str, Any] = field(default_factory=dict)
    data_root: str | None = None
    generations: Any = None
    metrics: dict[str, Any] = field(default_factory=dict)
    aggregators: list[str] = field(default_factory=list)


@dataclass
class WorldrecallSchema:
    output_root: str = "${oc.env:WORLDRECALL_OUTPUT,worldrecall_out}"
    cache_dir: str = "${output_root}/cache"
    cache: CacheSchema = field(default_factory=CacheSchema)
    device: str = "cpu"
    devices: list[int] | None = None  # local GPUs: one worker per index, each seeing only its own (see runner)
    batch_size: int = 8
    workers: int = 0
    progress: bool = True
    view: str = "compact"          # the printed leaderboard: compact (fits 120 columns) or full (every view)
    verbose: bool = False          # show third-party libraries' INFO logs (MLflow, alembic, matplotlib …)
    artifacts: bool = True
    max_failure_rate: float = 0.5
    only: list[str] | None = None
    models_only: list[str] | None = None
    allow_empty: bool = False      # a run that selects no case is an error (exit 2) unless this is true
    # registered metrics to switch on by name (``colour_shift`` or ``memobench.colour_shift``) without
    # knowing the config tree: each joins its own benchmark's node (see engine.plan.enable_metrics)
    metrics: list[str] = field(default_factory=list)
    plugins: PluginsSchema = field(default_factory=PluginsSchema)
    shard: ShardSchema = field(default_factory=ShardSchema)
    suite: SuiteSchema = field(default_factory=SuiteSchema)
    models: dict[str, Any] = field(default_factory=dict)
    judge_options: dict[str, Any] = field(default_factory=dict)
    video: VideoSchema = field(default_factory=VideoSchema)
    inputs: InputsSchema = field(default_factory=InputsSchema)
    report: ReportSchema = field(default_factory=ReportSchema)
    tracking: TrackingSchema = field(default_factory=TrackingSchema)
    # Any (not BenchmarkSchema): OmegaConf cannot create typed dict entries from command-line overrides;
    # each node is checked by validate_benchmark() when the run is planned.
    benchmarks: dict[str, Any] = field(default_factory=dict)
    aggregators: list[str] = field(default_factory=lambda: ["mean", "macro", "bootstrap", "paired", "ranking"])
    aggregator_params: dict[str, Any] = field(default_factory=dict)


# keys holding a byte size (bytes, or 512M / 2G / 1.5GiB: engine/stages/sizes.py), as (node, key)
SIZE_KEYS = (("video", "max_bytes"), ("inputs", "max_array_bytes"))
# top-level keys that take one of a few words
CHOICES = {"view": ("compact", "full")}
# keys inside a node that take one of a few words, as (node, key)
NODE_CHOICES = {("cache", "mode"): ("use", "refresh", "off")}


class ResolvedConfig(dict):
    """A config :func:`resolve_config` returned: complete, typed and resolved, so it is never resolved again."""


def resolve_config(cfg: Mapping[str, Any]) -> ResolvedConfig:
    """A plain config with every missing key set to the schema's default, types checked, interpolations resolved.

    A :class:`ResolvedConfig` comes back as it is (a job resolves its config once; the stages and sinks
    that also accept a partial dict — tests, the Python API — do not resolve it again), except that its byte
    sizes are made integers in place (Hydra's composition leaves ``video.max_bytes=512M`` as typed). The
    array cap (``inputs.max_array_bytes``) is applied to this process (and the workers it forks).
    """
    if isinstance(cfg, ResolvedConfig):
        return _with_sizes(cfg)
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from worldrecall.core.components import ConfigTypeError

    try:
        merged = OmegaConf.merge(OmegaConf.structured(WorldrecallSchema), OmegaConf.create(dict(cfg)))
        resolved = ResolvedConfig(OmegaConf.to_container(merged, resolve=True))  # type: ignore[arg-type]
    except OmegaConfBaseException as e:
        raise ConfigTypeError(" ".join(str(e).split())) from None
    return _with_sizes(resolved)


def _with_sizes(cfg: ResolvedConfig) -> ResolvedConfig:
    """``cfg`` with every byte size of :data:`SIZE_KEYS` an int (in place); a bad one is a
    :class:`ConfigTypeError` naming the key, with a did-you-mean for a unit close to a known one."""
    from worldrecall.core.components import ConfigTypeError
    from worldrecall.core.limits import set_max_array_bytes
    from worldrecall.engine.stages.sizes import parse_size

    for key, words in CHOICES.items():  # here: a Hydra job's composed config comes in resolved, past the merge
        if key in cfg and cfg[key] not in words:
            raise ConfigTypeError(f"{key}={cfg[key]!r}: expected one of {', '.join(words)}")
    for (node, key), words in NODE_CHOICES.items():
        section = cfg.get(node)
        if isinstance(section, dict) and key in section and section[key] not in words:
            from worldrecall.registry.names import did_you_mean

            hint = did_you_mean(str(section[key]), words)
            raise ConfigTypeError(f"{node}.{key}={section[key]!r}: expected one of {', '.join(words)}"
                                  + (f"; {hint}" if hint else ""))
    for node, key in SIZE_KEYS:
        section = cfg.get(node)
        if isinstance(section, dict) and key in section and (type(section[key]) is not int):  # bool is no size
            try:
                section[key] = parse_size(section[key], f"{node}.{key}")
            except ValueError as e:
                raise ConfigTypeError(str(e)) from None
    inputs = cfg.get("inputs")
    if isinstance(inputs, dict) and type(inputs.get("max_array_bytes")) is int:
        set_max_array_bytes(inputs["max_array_bytes"])
    return cfg


def store_schemas() -> None:
    """Register the schema with Hydra's config store, once per process (each ``launch`` asks)."""
    # imported here, its only use: the MLflow process reads this module (through the sinks) and needs no Hydra
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    if "worldrecall_schema.yaml" not in cs.repo:
        cs.store(name="worldrecall_schema", node=WorldrecallSchema)


def validate_benchmark(name: str, node: Any) -> dict[str, Any]:
    """Check one ``benchmarks.<name>`` node against :class:`BenchmarkSchema` (unknown keys, types, required)."""
    from dataclasses import fields

    from worldrecall.core.components import ConfigTypeError, coerce_like
    from worldrecall.registry.names import did_you_mean

    if not isinstance(node, dict):
        raise ConfigTypeError(f"benchmarks.{name}: expected a mapping, got {node!r}")
    defaults = BenchmarkSchema()
    out: dict[str, Any] = {}
    known = {f.name for f in fields(BenchmarkSchema)}
    for key in node:
        if key not in known:
            hint = did_you_mean(str(key), known)
            raise ConfigTypeError(f"benchmarks.{name}.{key}: unknown key (known: {', '.join(sorted(known))})"
                                  + (f"; {hint}" if hint else ""))
    for f in fields(BenchmarkSchema):
        default = getattr(defaults, f.name)
        value = node.get(f.name, default)
        if f.name == "loader" and (not value or value == "???"):
            raise ConfigTypeError(f"benchmarks.{name}.loader: required (name of a registered loader)")
        out[f.name] = value if f.name == "generations" else coerce_like(default, value, f"benchmarks.{name}.{f.name}")
    return out
