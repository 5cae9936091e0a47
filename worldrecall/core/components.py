"""Base classes for what plugins register: loaders, aligners, metrics, aggregators.

The core only ever reads the class-level metadata declared here; it never special-cases a benchmark.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

T = TypeVar("T")

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from worldrecall.core.data import Alignment, Case, CaseError, ScoreRow
    from worldrecall.core.judges import JudgeHub
    from worldrecall.core.models import ModelHub
    from worldrecall.core.video import VideoPool


@dataclass
class LoadRequest:
    """What a loader is asked to load: a dataset root, one generations folder per model, options."""

    data_root: Path
    generations: dict[str, Path]  # model name -> folder (or file) of that model's outputs
    options: dict[str, Any] = field(default_factory=dict)
    pool: VideoPool | None = None


class PathParam(str):
    """A param's default naming a file or folder (``"x": PathParam("")``): its content joins the cache key."""


class Loader:
    """Turns a dataset on disk into :class:`Case` records. Never raises for one bad case."""

    name: ClassVar[str]
    benchmark: ClassVar[str]
    description: ClassVar[str] = ""
    # True: every file it reads lies under the request's data root, its generation folders or a path an option
    # names, and nothing else (time, the environment) changes what it yields; a later job of the same process
    # then takes copies of its cases while no file there changed. False (the default): it runs every job
    reads_request_paths_only: ClassVar[bool] = False

    def load(self, request: LoadRequest) -> Iterator[Case | CaseError]:
        """Yield one Case (or CaseError) per (case id, model)."""
        raise NotImplementedError


class Aligner:
    """Maps annotations onto the generated video's frame axis.

    ``min_frames`` is the shortest generated video the alignment is defined for; the engine fails a shorter
    case with a one-line reason before any metric sees it — unless the aligner's params set
    ``official_parity: true``, where the case is aligned and scored as the official code would and every
    row carries a warning saying why the number is not to be trusted. ``align`` may add one-line
    ``info["warnings"]``; the engine copies them onto the case's rows.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Any]] = {}
    min_frames: ClassVar[int] = 1
    imports: ClassVar[tuple[str, ...]] = ()  # modules ``align`` imports when first called (see Metric.imports)
    path_params: ClassVar[tuple[str, ...]] = ()  # params naming files or folders: their contents join the cache key

    def align(self, case: Case, params: Mapping[str, Any]) -> Alignment:
        """Return the case's Alignment; raise CaseFailure with a one-line reason on bad input."""
        raise NotImplementedError


@dataclass
class MeasureContext:
    """Everything a metric's measure stage may use besides the case: models, judges, scratch dirs."""

    models: ModelHub
    judges: JudgeHub | None = None
    artifacts_dir: Path | None = None  # per-case artifacts (PLY, PNG) go below here
    device: str = "cpu"
    batch_size: int = 8
    # why this measurement must not be kept (a judge that left questions unanswered, a partial answer the
    # metric still scores): the engine scores it for this run, stores neither it nor its score, puts each reason
    # on the row's warnings and measures again on the next run
    not_kept: list[str] = field(default_factory=list)


class _Undeclared:
    """The default of a :class:`Value` field nobody declared (registration refuses such a value)."""

    def __repr__(self) -> str:
        return "<undeclared>"

    def __bool__(self) -> bool:  # never mistaken for a declared range or direction
        return False


UNDECLARED: Any = _Undeclared()


@dataclass(frozen=True, kw_only=True)
class Value:
    """Metadata of one value a metric emits: direction, range, unit and meaning, always by keyword.

    ``higher_is_better`` (True / False, or None for a diagnostic — a count, a rate — that is never ranked) and
    ``range`` (``(lo, hi)``, or None when unbounded) have no default: like torchmetrics' ``higher_is_better``,
    they must be declared, and the plugin host refuses a metric whose value leaves either out
    (:mod:`worldrecall.registry.metadata`).
    """

    higher_is_better: bool | None = UNDECLARED
    range: tuple[float, float] | None = UNDECLARED
    unit: str = ""
    description: str = ""


class UndeclaredValue(KeyError):
    """A metric was asked about (or emitted) a value it does not declare."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0])


@dataclass(frozen=True)
class Benchmark:
    """What a benchmark declares about its verdict; the engine builds every view (printed, HTML, MLflow) from it.

    Values are named ``"<metric>:<value>"``. ``headline``: the values the benchmark reports as its result, in
    order; ``rank_by``: the one that ranks models (default: the first headline); ``gate``: the camera gate's
    0/1 value (None = not applicable) — the gated view keeps only cases where it is 1; ``protocol_gate``: the
    published protocol's own gate where it has one (reported beside the camera gate, never replacing it);
    ``levels``: strata averaged as a hierarchy (fine to coarse, e.g. subcategory then domain; empty = plain
    mean over cases); ``titles``/``notes``: the wording of its views (``{"gated": …, "all": …}``) and what its
    headline cannot see, printed under its views.
    """

    name: str
    headline: tuple[str, ...]
    rank_by: str = ""
    gate: str = ""
    protocol_gate: str = ""
    levels: tuple[str, ...] = ()
    titles: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)  # "<metric>:<value>" -> column label
    description: str = ""

    def __post_init__(self) -> None:
        refs = [*self.headline, *([self.rank_by] if self.rank_by else []), *([self.gate] if self.gate else []),
                *([self.protocol_gate] if self.protocol_gate else [])]
        bad = [r for r in refs if not isinstance(r, str) or r.count(":") != 1 or not all(r.split(":"))]
        if not self.headline or bad:
            raise ValueError(f"benchmark {self.name!r}: values are named '<metric>:<value>' and a headline is "
                             f"required (got headline={list(self.headline)!r}{', bad: ' + repr(bad) if bad else ''})")
        if self.rank_by and self.rank_by not in self.headline:
            raise ValueError(f"benchmark {self.name!r}: rank_by {self.rank_by!r} is not one of its headline values")

    @property
    def ranking(self) -> str:
        """The value that ranks models."""
        return self.rank_by or self.headline[0]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "headline": list(self.headline), "rank_by": self.ranking, "gate": self.gate or None,
                "protocol_gate": self.protocol_gate or None, "levels": list(self.levels), "titles": dict(self.titles),
                "notes": list(self.notes), "labels": dict(self.labels),
                "description": self.description}


def split_ref(ref: str) -> tuple[str, str]:
    """``"memobench.ors:score"`` -> ``("memobench.ors", "score")``."""
    metric, _, value = ref.partition(":")
    return metric, value


@dataclass(frozen=True)
class MissingInput:
    """An input a metric needs that a case lacks (:meth:`Metric.missing_inputs`): the engine skips the metric
    on that case with :meth:`line` as the reason; ``worldrecall check`` lists them before a run."""

    what: str  # e.g. "intrinsics.npy (GT camera intrinsics)"
    path: str = ""  # where it was looked for
    fix: str = ""  # how to produce or provide it: a command, a config key, a format in the docs
    kind: str = "file"  # file | sidecar | weights | judge | key | setting

    def line(self) -> str:
        return " ".join(f"missing {self.what}{f' ({self.path})' if self.path else ''}"
                        f"{f': {self.fix}' if self.fix else ''}".split())


class Metric:
    """A memory metric with an expensive cached ``measure`` and a cheap pure ``score``.

    Subclasses declare metadata as class attributes and implement both stages. ``params`` change what is
    measured (part of the cache key); ``thresholds`` only change scoring (sweeping them runs no model).
    """

    name: ClassVar[str]                      # globally unique, "<benchmark>.<metric>"
    benchmark: ClassVar[str]
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ""
    primary: ClassVar[str] = ""              # the main value in the score dict
    aligner: ClassVar[str | None] = None     # the aligner this metric needs when not the benchmark's own
    values: ClassVar[dict[str, Value]] = {}  # every value the metric emits (the primary too) -> its metadata
    other_values: ClassVar[Value | None] = None  # a declared diagnostic for every other emitted key (or None)
    models: ClassVar[tuple[str, ...]] = ()   # model roles the measure stage needs
    optional_models: ClassVar[tuple[str, ...]] = ()  # roles used when configured (e.g. LPIPS), else skipped
    judges: ClassVar[tuple[str, ...]] = ()   # judge names the measure stage needs
    params: ClassVar[dict[str, Any]] = {}    # measurement parameters (defaults)
    path_params: ClassVar[tuple[str, ...]] = ()  # params naming files or folders: their contents join the cache key
    thresholds: ClassVar[dict[str, Any]] = {}  # scoring parameters (defaults)
    # modules ``measure`` imports when first called (a heavy library it alone needs, e.g. torch): the engine
    # imports them before it forks workers, so the workers share one import instead of each paying its own
    imports: ClassVar[tuple[str, ...]] = ()

    def __init__(self, params: Mapping[str, Any] | None = None, thresholds: Mapping[str, Any] | None = None):
        self.params = merge_typed(type(self).params, params or {}, f"{self.name}.params")
        self.thresholds = merge_typed(type(self).thresholds, thresholds or {}, f"{self.name}.thresholds")

    @classmethod
    def value_meta(cls, value: str) -> Value:
        """Metadata of one emitted value: its entry in ``values``, else ``other_values`` (a diagnostic).

        Nothing is assumed: a value the metric does not declare raises :class:`UndeclaredValue`.
        """
        if value in cls.values:
            return cls.values[value]
        if cls.other_values is not None:
            return cls.other_values
        raise UndeclaredValue(f"metric {cls.name!r} does not declare value {value!r} (declare it in `values`)")

    @classmethod
    def undeclared(cls, emitted: Iterable[str]) -> list[str]:
        """The emitted value names this metric declares no metadata for (as :meth:`value_meta` sees it)."""
        out = []
        for v in emitted:
            try:
                cls.value_meta(v)
            except UndeclaredValue:
                out.append(v)
        return out

    def needs_models(self, case: Case) -> bool:
        """Whether measuring this case runs the ``models`` roles (False e.g. for a case that ships precomputed
        observations); the engine's backend preflight only looks at cases that need them."""
        return True

    def missing_inputs(self, case: Case) -> list[MissingInput]:
        """Inputs this metric reads that ``case`` lacks (cheap existence checks; default none): each skips it
        on that case, so a missing GT pose file costs the pose metrics only."""
        return []

    def optional_roles(self) -> dict[str, str]:
        """Optional roles this instance would use (given its params) -> the values that stay null without one."""
        return {role: f"the values that use the {role} role" for role in self.optional_models}

    def judge_names(self) -> tuple[str, ...]:
        """The judges the measure stage will ask (default: the class's ``judges``; a metric whose judge is a
        param overrides this)."""
        return tuple(self.judges)

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Run models over the case and return a measurement: numpy arrays and JSON-able values."""
        raise NotImplementedError

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """Pure: measurement + thresholds -> named values (``primary`` among them)."""
        raise NotImplementedError

    def verdict(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> str | None:
        """Optional one line saying what the score means for this case (a gate: what was tested and what
        failed, or why it is not applicable); the engine puts it on the row (``info["verdict"]``)."""
        return None

    def row_info(self, measurement: Mapping[str, Any]) -> dict[str, Any]:
        """Facts for the row's ``info`` beside its values (``assumed``: name -> {value, source, set}, said once by
        the console; a pose estimate's ``pose_quality``). Default: ``measurement["row_info"]``."""
        return dict(measurement.get("row_info") or {}) if isinstance(measurement, Mapping) else {}

    def cache_params(self, case: Case, alignment: Alignment) -> dict[str, Any]:
        """Extra inputs that change the measurement beyond the case fingerprint and alignment."""
        return {}

    def artifacts(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any], out_dir: Path) -> list[Path]:
        """Optional per-case files (PLY, PNG …) written under ``out_dir`` after scoring; logged to MLflow."""
        return []


class Aggregator:
    """Pure reduction of score rows into tables.

    ``tables`` declares what each output table is, so the engine finds them by kind, never by name:
    ``summary`` (one mean per benchmark x model x metric x value: columns benchmark, model, metric, value,
    mean, n), ``intervals`` (the same keys with estimate, ci_low, ci_high), ``leaderboard``, ``validity``,
    ``status``, ``view`` (a ranked view of a benchmark, rendered by the engine as it is: columns
    :data:`VIEW_COLUMNS`), ``view_columns`` (extra labelled cells an aggregator adds to a benchmark's views,
    keyed by benchmark, variant and model), or any other word for tables the engine only writes out. ``uses_primary_values``: the engine
    passes ``primary_values`` (metric name -> its primary value) in the params; ``uses_value_meta``: it
    passes ``value_meta`` (metric -> value -> direction, range, unit, description, as the metrics declare).
    ``by_benchmark``: the tables of all rows are the per-benchmark tables concatenated; ``by_metric``: those of
    one benchmark are the per-metric tables concatenated and sorted (see the attributes).
    Outputs are cached by the engine on (rows, params, the aggregator's source): ``aggregate`` must be pure.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Any]] = {}
    path_params: ClassVar[tuple[str, ...]] = ()  # params naming files or folders: their contents join the cache key
    tables: ClassVar[dict[str, str]] = {}
    uses_primary_values: ClassVar[bool] = False
    uses_value_meta: ClassVar[bool] = False
    uses_benchmarks: ClassVar[bool] = False  # the engine passes ``benchmarks``: name -> Benchmark.to_json()
    # True: every table is the concatenation, in benchmark-name order, of the tables of each benchmark's rows
    # alone; the engine may then aggregate (and cache) each benchmark separately, e.g. in a sweep's re-score job
    by_benchmark: ClassVar[bool] = False
    # {table: sort columns}: every table of one benchmark's rows is the concatenation of the tables of each
    # metric's rows alone, stably sorted by these columns (the order the whole would come out in); the engine
    # may then aggregate (and cache) each metric separately: a re-score of one metric aggregates that metric
    by_metric: ClassVar[Mapping[str, Sequence[str]] | None] = None
    # the tables ``plots`` reads: declared, the engine keeps the figures under those tables' content and this
    # class's identity, and a job whose tables they are (a re-score of another metric, a sweep's job) links
    # them instead of drawing them again; None: drawn by every job
    plots_from: ClassVar[Sequence[str] | None] = None

    def aggregate(self, rows: list[ScoreRow], params: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
        """Return named tables."""
        raise NotImplementedError

    def plots(self, tables: Mapping[str, pd.DataFrame], out_dir: Path) -> list[Path]:
        """Optional figures of this aggregator's own tables (PNG …), written under ``out_dir``."""
        return []


# One line per cell of a ranked view: which view (benchmark, variant "gated"/"all", its order, title, note),
# which model (its row position, rank, rank label "1" / "1=" tie / "✗" never gated, cases), which column (label, unit, direction
# "↑" / "↓" / "·", digits) and the number (mean with its CI). ``n_gate_measured``: the model's cases whose camera gate
# gave a verdict (passed or failed; empty where the benchmark has no gate) — the denominator of "gate passed", so a
# case the gate cannot judge (a mirror video, an unreliable pose) never reads as a failed one.
GATE_NOT_MEASURED = "gate not measured"  # a view's label for a camera gate that gave no verdict (never a failed gate)
VIEW_COLUMNS = ["benchmark", "variant", "order", "title", "note", "model", "position", "rank", "rank_label", "n_cases",
                "column", "metric", "unit", "direction", "digits", "mean", "ci_low", "ci_high", "backend",
                "n_gate_measured"]
VIEW_CELL_COLUMNS = ["benchmark", "variant", "model", "column", "metric", "unit", "direction", "digits", "mean",
                     "ci_low", "ci_high"]


class Suite:
    """A built-in dataset the engine can build before a run (``suite.builder=<name>``), e.g. the synthetic suite.

    ``build`` must be idempotent and content-addressed by its params: a second call with the same params
    finds the suite on disk and returns at once.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""

    def build(self, root: Path, params: Mapping[str, Any], progress: bool = False) -> None:
        """Make sure the suite for ``params`` exists under ``root`` (``progress``: show a progress bar)."""
        raise NotImplementedError

    def models(self, params: Mapping[str, Any]) -> list[str] | None:
        """The model names the suite for ``params`` generates, known before building (None: not declared).

        Lets ``models_only`` typos fail before the build rather than after it."""
        return None


class Registry(Protocol):
    """What a plugin command may look up: the components every plugin registered (the engine's host)."""

    @property
    def models(self) -> Mapping[str, Any]: ...
    @property
    def roles(self) -> Mapping[str, Any]: ...
    @property
    def judges(self) -> Mapping[str, Any]: ...
    @property
    def metrics(self) -> Mapping[str, Any]: ...


class Sink:
    """An output of a run, registered through ``register_sinks``: ``write`` gets the frozen run result
    (``rows``, ``tables``, ``results_dir``, ``config`` …) and a context (``host``, ``written``: the files the
    sinks before it wrote), and returns the files it wrote."""

    name: ClassVar[str]
    description: ClassVar[str] = ""

    def write(self, result: Any, ctx: Any) -> list[Path]:
        """Write this output of ``result``; return the files written."""
        raise NotImplementedError


class Command:
    """A ``worldrecall <name>`` subcommand contributed by a plugin (``worldrecall models``, ``vqa-bank`` …)."""

    name: ClassVar[str]
    help: ClassVar[str] = ""

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add this command's arguments to its (sub)parser."""

    def run(self, args: argparse.Namespace, registry: Registry) -> int:
        """Run the command; return the process exit code."""
        raise NotImplementedError


def batched(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """``items`` in consecutive chunks of at most ``size`` (>= 1): how metrics and backends batch frames."""
    size = max(1, int(size))
    return [items[i:i + size] for i in range(0, len(items), size)]


class ConfigTypeError(ValueError):
    """A config value of the wrong type; the message names the key, the value and the expected type."""


def merge_typed(defaults: Mapping[str, Any], overrides: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Merge ``overrides`` into ``defaults``, rejecting unknown keys and values of the wrong type."""
    out = dict(defaults)
    for k, v in dict(overrides).items():
        if k not in defaults:
            raise ConfigTypeError(f"{where}.{k}: unknown key (known: {', '.join(sorted(defaults)) or 'none'})")
        out[k] = coerce_like(defaults[k], v, f"{where}.{k}")
    return out


def coerce_like(default: Any, value: Any, where: str) -> Any:
    """Check ``value`` against the type of ``default`` (ints are accepted for floats)."""
    if default is None or value is None:
        return value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigTypeError(f"{where}: expected a boolean, got {value!r}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigTypeError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigTypeError(f"{where}: expected an integer, got {value!r}")
        return value
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigTypeError(f"{where}: expected a string, got {value!r}")
        return value
    if isinstance(default, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            raise ConfigTypeError(f"{where}: expected a list, got {value!r}")
        return list(value)
    if isinstance(default, dict):
        if not isinstance(value, Mapping):
            raise ConfigTypeError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    return value
