"""A pytest plugin for plugin authors: run your plugin on a tiny synthetic suite, as ``worldrecall run`` does.

Installed with worldrecall (the ``pytest11`` entry point ``worldrecall.testing``), so a plugin's own test
suite gets the :func:`worldrecall_run` fixture without any import; ``-p worldrecall.testing`` loads it
explicitly where the package is not installed, ``-p no:worldrecall.testing`` switches it off.

Example (in the plugin's tests)::

    import my_plugin

    def test_my_metric(worldrecall_run):
        run = worldrecall_run(plugins=[my_plugin], metrics=["my_metric"])
        run.assert_ok()                                   # exit code 0 and every row ok, else why not
        rows = run.rows_for("memobench.my_metric")         # the per-case rows, one per (model, case)
        assert {r["model"] for r in rows} == {"oracle", "appearance_drift"}
        assert run.tables["cases"]["value.score"].between(0, 1).all()

The run goes through the command line's own entry point (``worldrecall.engine.cli.main(["run", ...])``) with
the built-in synthetic suite built small in ``tmp_path`` (1 case per benchmark at 96x72, 24/20 frames,
seconds), tracking and the HTML report off and light bootstraps; only the named metrics run (the benchmark's
configured metrics are dropped) so the rows are the plugin's. Extra Hydra overrides are passed through
unchanged, and ``suite=None`` runs on data of your own (``+benchmarks.<name>.data_root=…``).

The module imports nothing heavy at import time: pytest loads it in every session of an environment that
has worldrecall installed.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PluginLoadError", "PluginRun", "WorldrecallRunner", "worldrecall_run"]

# the built-in synthetic suite at its smallest useful size (the smoke experiment's, one case per benchmark)
TINY_SUITE = {"n_cases": 1, "width": 96, "height": 72, "gt_frames": 24, "gen_frames": 20}
# the synthetic suite's reference model and one targeted failure: a metric's direction shows on two models
DEFAULT_MODELS = ("oracle", "appearance_drift")
# fast, quiet and self-contained: no MLflow store, no report, no progress bars, light bootstraps
QUIET = ("tracking=none", "report.enabled=false", "progress=false",
         "aggregator_params.bootstrap.replicates=50", "aggregator_params.paired.replicates=50")


class PluginLoadError(AssertionError):
    """A plugin handed to :func:`worldrecall_run` failed to import or register (the registry's message)."""


@dataclass(frozen=True)
class PluginRun:
    """What one ``worldrecall run`` left behind: exit code, results folder, tables, per-case rows, output.

    ``tables`` maps each table to a DataFrame (``mean``, ``status``, ``ranking`` …: ``tables/<name>.csv``, or the
    files of a table written per benchmark, ``tables/<name>/<benchmark>.csv``, concatenated), and ``cases`` to
    the per-case table of every benchmark (the run writes it per metric: ``cases/<benchmark>/<metric>.csv``;
    ``cases.<benchmark>``: one benchmark's);
    ``rows`` are the per-case score rows (``rows-shard-*.jsonl``: benchmark, model, case_id, metric, status,
    reason, values, info …) by file (a shard's rows, one file per metric) and place, each with its case's alignment in
    ``info["alignment"]`` (the rows file stores it once per shard, in ``alignments-shard-*.jsonl``; restored here
    as ``worldrecall.engine.stages.row_store.read_row_dicts`` does). ``results_dir`` is None when the run stopped before
    writing results (a config error: exit code 2, the reason on ``stderr``).
    """

    exit_code: int
    results_dir: Path | None
    tables: dict[str, pd.DataFrame] = field(repr=False)
    rows: list[dict[str, Any]] = field(repr=False)
    stdout: str = field(repr=False)
    stderr: str = field(repr=False)
    overrides: tuple[str, ...] = field(repr=False)

    def rows_for(self, metric: str) -> list[dict[str, Any]]:
        """The rows of one metric (its full name, ``<benchmark>.<metric>``)."""
        return [r for r in self.rows if r.get("metric") == metric]

    @property
    def failures(self) -> list[str]:
        """One line per failed row (``status`` failed; skipped rows are not failures): metric, model, case, reason."""
        return [f"{r.get('metric')} {r.get('model')}/{r.get('case_id')}: {r.get('status')}: {r.get('reason')}"
                for r in self.rows if r.get("status") == "failed"]

    def assert_ok(self) -> None:
        """Fail (AssertionError) unless the run exited 0 and every row scored; the message says why."""
        problems = self.failures
        if self.exit_code == 0 and not problems:
            return
        tail = "\n".join(self.stderr.strip().splitlines()[-15:])
        lines = [f"worldrecall run exited {self.exit_code} ({len(problems)} failed row(s))", *problems[:20]]
        if tail:
            lines += ["stderr (last lines):", tail]
        raise AssertionError("\n".join(lines))


class WorldrecallRunner:
    """The :func:`worldrecall_run` fixture's value: call it to run; every call gets its own output folder.

    Calls in one test share the measurement cache and the synthetic suite (built once per test).
    """

    def __init__(self, base: Path):
        self.base = Path(base)
        self.calls = 0

    def __call__(self, *overrides: str, plugins: Sequence[object] = (), metrics: Sequence[str] = (),
                 only_metrics: bool = True, models: Sequence[str] | None = DEFAULT_MODELS,
                 suite: str | None = "synthetic", n_cases: int = 1) -> PluginRun:
        """Run ``worldrecall run`` and collect what it wrote.

        ``plugins``: plugin modules/objects to register besides the installed ones (a plugin that is not
        installed, e.g. one under development); a registration failure raises :class:`PluginLoadError`.
        ``metrics``: registered metrics to switch on by name (``metrics=[…]``); with ``only_metrics`` their
        benchmarks run only these (the configured metrics are dropped) and ``only=`` is set to those
        benchmarks. ``models``: ``models_only`` (None: every model of the suite). ``suite``: ``"synthetic"``
        (tiny, ``n_cases`` cases per benchmark) or None (``suite=none``: bring data through ``overrides``).
        ``overrides``: further Hydra overrides, applied last.
        """
        from worldrecall.engine.cli import main  # the command line's own entry point, nothing deeper
        from worldrecall.registry import host as registry

        self.calls += 1
        out = self.base / f"run-{self.calls}"
        previous = registry._HOST  # the process-wide registry cache: restored after the run
        try:
            host = registry.load_plugins(extra=list(plugins), fresh=True)
            _raise_plugin_failures(host, plugins)
            args = [f"output_root={out}", f"cache_dir={self.base / 'cache'}", *QUIET]
            args += _suite_args(suite, n_cases)
            if models is not None:
                args.append(f"models_only=[{','.join(models)}]")
            if metrics:
                args.append(f"metrics=[{','.join(metrics)}]")
                if only_metrics:
                    args += _only_these_metrics(host, metrics)
            args += list(overrides)
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                code = int(main(["run", *args]) or 0)
        finally:
            registry._HOST = previous
        return _collect(code, out, stdout.getvalue(), stderr.getvalue(), tuple(args))


def _raise_plugin_failures(host: Any, plugins: Sequence[object]) -> None:
    """A plugin under test that failed to register is a test failure, not a run without it."""
    names = {getattr(p, "__name__", type(p).__name__) for p in plugins}
    bad = [f"plugin {name!r}: {msg}" for name, msg in host.failures if name in names]
    if bad:
        raise PluginLoadError("\n".join(bad))


def _suite_args(suite: str | None, n_cases: int) -> list[str]:
    if suite is None:
        return ["suite=none"]
    args = [f"suite={suite}"]
    if suite == "synthetic":
        args += [f"suite.params.{k}={v}" for k, v in {**TINY_SUITE, "n_cases": int(n_cases)}.items()]
    return args


def _builtin_benchmarks() -> set[str]:
    """Benchmarks with a config group of their own (their configured metrics can be dropped)."""
    group = resources.files("worldrecall") / "conf" / "benchmark"
    return {Path(p.name).stem for p in group.iterdir() if p.name.endswith(".yaml")}


def _only_these_metrics(host: Any, metrics: Sequence[str]) -> list[str]:
    """Overrides that leave the named metrics' benchmarks with only those metrics (and run only them)."""
    benches: list[str] = []
    for name in metrics:
        hits = [m for m in host.metrics if m == name or m.split(".", 1)[-1] == name]
        if len(hits) == 1:  # unknown or ambiguous names are left to the run's own config error
            bench = host.metrics[hits[0]].benchmark
            if bench not in benches:
                benches.append(bench)
    if not benches:
        return []
    builtin = _builtin_benchmarks()
    args = [a for b in benches if b in builtin
            for a in (f"~benchmarks.{b}.metrics", f"+benchmarks.{b}.metrics={{}}")]
    return [*args, f"only=[{','.join(benches)}]"]


def _collect(code: int, out: Path, stdout: str, stderr: str, args: tuple[str, ...]) -> PluginRun:
    found = sorted(p for p in (out / "results").glob("*") if p.is_dir()) if (out / "results").is_dir() else []
    results_dir = found[-1] if found else None
    tables: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    if results_dir is not None:
        from worldrecall.core.tables import read_tables
        from worldrecall.engine.stages.row_store import read_row_dicts

        # tables written one file per metric or benchmark (cases/<benchmark>/<metric>.csv, ranking/<benchmark>.csv)
        # come back whole
        tables = read_tables(results_dir / "tables")
        rows = read_row_dicts(results_dir)  # each row with its case's alignment, stored once per shard
    return PluginRun(code, results_dir, tables, rows, stdout, stderr, args)


@pytest.fixture
def worldrecall_run(tmp_path: Path) -> Iterator[Callable[..., PluginRun]]:
    """Run ``worldrecall run`` with your plugin on a tiny synthetic suite in ``tmp_path``; see :class:`WorldrecallRunner`.

    Returns a callable: ``worldrecall_run(*overrides, plugins=[...], metrics=[...], models=..., suite=...,
    n_cases=1) -> PluginRun`` (exit code, results folder, tables as DataFrames, per-case rows, stdout/stderr).
    """
    yield WorldrecallRunner(tmp_path / "worldrecall")
