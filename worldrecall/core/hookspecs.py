"""The whole extension API of worldrecall: register-callback hooks.

A plugin is any module (or object) with functions decorated by :data:`hookimpl` and named like the
specs below. Each hook is called once with a ``register`` callback; the plugin calls it with one or more
component objects. The host validates each object, rejects name collisions (naming both plugins) and
records which plugin registered it, so every score can say where it came from.

Hooks evolve additively only: new optional arguments, never removed ones.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

PROJECT = "worldrecall"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_loaders(register: Callable[..., None]) -> None:
    """Register dataset loaders: ``register(loader)`` with a :class:`worldrecall.core.components.Loader`.

    A loader turns a dataset root plus a folder of one model's generations into a stream of
    :class:`~worldrecall.core.data.Case` objects (or :class:`~worldrecall.core.data.CaseError` for a case
    that cannot be built). It never raises for a single bad case.

    .. versionadded:: 0.1
    """


@hookspec
def register_aligners(register: Callable[..., None]) -> None:
    """Register aligners: ``register(aligner)`` with a :class:`worldrecall.core.components.Aligner`.

    An aligner maps a case's annotations onto the generated video's own frame axis (MemoBench's V/D/R
    phases, Scene Memory F1's observation/revisit split) and returns an
    :class:`~worldrecall.core.data.Alignment`.

    .. versionadded:: 0.1
    """


@hookspec
def register_metrics(register: Callable[..., None]) -> None:
    """Register metrics: ``register(metric)`` with a :class:`worldrecall.core.components.Metric`.

    A metric has an expensive, cached ``measure`` stage (runs models, returns arrays) and a cheap, pure
    ``score`` stage (measurement + thresholds -> numbers). Its metadata (name, version, direction, range,
    required model roles, default thresholds) is all the core ever looks at.

    .. versionadded:: 0.1
    """


@hookspec
def register_aggregators(register: Callable[..., None]) -> None:
    """Register aggregators: ``register(aggregator)`` with a :class:`worldrecall.core.components.Aggregator`.

    An aggregator turns per-case score rows into tables (means, macro averages, bootstrap CIs,
    leaderboards). It is pure: rows in, tables out.

    .. versionadded:: 0.1
    """


@hookspec
def register_models(register: Callable[..., None]) -> None:
    """Register perception backends: ``register(spec)`` with a :class:`worldrecall.core.models.ModelSpec`.

    A spec names a backend (``dinov2_base``, ``dis_flow``, ``sidecar_depth`` …), the role it fills
    (``patch_embedder``, ``flow``, ``depth`` …), its kind (reference / classical / sidecar), the weights it
    needs and a factory. Models are built lazily, once per run, and only when a metric asks for them.

    .. versionadded:: 0.1
    """


@hookspec
def register_judges(register: Callable[..., None]) -> None:
    """Register VLM judges: ``register(spec)`` with a :class:`worldrecall.core.judges.JudgeSpec`.

    A judge answers a question list about a video with validated structured answers (Gemini is the
    reference judge). Judges are built lazily and read API keys from the environment only.

    .. versionadded:: 0.1
    """


@hookspec
def register_suites(register: Callable[..., None]) -> None:
    """Register built-in datasets: ``register(suite)`` with a :class:`worldrecall.core.components.Suite`.

    The config chooses one by its registered name (``suite.builder=synthetic``); config never names a
    callable, so a config file cannot run arbitrary code.

    .. versionadded:: 0.2
    """


@hookspec
def register_commands(register: Callable[..., None]) -> None:
    """Register CLI subcommands: ``register(command)`` with a :class:`worldrecall.core.components.Command`.

    Each becomes ``worldrecall <command.name> …``; ``configure`` adds its arguments and ``run`` gets the
    parsed arguments and the registry (models, roles, judges, metrics). Built-in names (``run``,
    ``aggregate``, ``plugins``) cannot be taken.

    .. versionadded:: 0.2
    """


@hookspec
def register_benchmarks(register: Callable[..., None]) -> None:
    """Declare benchmarks: ``register(benchmark)`` with a :class:`worldrecall.core.components.Benchmark`.

    The declaration names the benchmark's headline values, the one that ranks models, its camera gate (and the
    published protocol's own gate, if any) and the wording of its views. The engine builds every leaderboard —
    printed, HTML and MLflow, gated view first, statistical ties shared — from it, never from a benchmark's name.

    .. versionadded:: 0.3
    """


@hookspec
def register_sinks(register: Callable[..., None]) -> None:
    """Register outputs: ``register(sink)`` with a :class:`worldrecall.core.components.Sink` (a ``name`` and
    ``write(result, ctx) -> list[Path]``), e.g. a CSV exporter for another tool.

    Every job runs the registered sinks after the built-in files and before MLflow (which logs the files they
    return) and the console. A sink reads the frozen run result — ``result.rows``, ``result.tables``,
    ``result.results_dir``, ``result.config`` — and writes under ``result.results_dir``; one that raises is
    reported in one line, the other outputs are still written, and the exit code is 5.

    .. versionadded:: 0.4
    """
