"""One job, top-down: resolve the config once -> the plugins -> the run stages -> one frozen result -> the
sinks. Every function returns its exit code; nothing is kept in module state.

Exit codes: 0; 2 a config error (unknown key, component, wrong type, plugin collision); 3 past
``max_failure_rate``; 4 results not writable; 5 every result written but an output failed.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from worldrecall.core.components import ConfigTypeError
from worldrecall.engine.sinks import SinkContext, job_sinks, merge_sinks, shard_sinks, write_sinks
from worldrecall.engine.sinks.disk import DiskSink, EarlyUsage, start_usage
from worldrecall.engine.sinks.tracking.process import prefetch as prefetch_tracking
from worldrecall.engine.sinks.unchanged import OutputsCheck
from worldrecall.engine.stages.aggregate import aggregate_rows
from worldrecall.engine.stages.config import resolve_config
from worldrecall.engine.stages.name_checks import check_aggregator_paths, configured_aggregator_params
from worldrecall.engine.stages.result import RunResult, build_result
from worldrecall.engine.stages.row_digests import row_digests
from worldrecall.engine.stages.row_store import shards_on_disk
from worldrecall.engine.stages.runner import ResultsNotWritable, Runner, load_rows
from worldrecall.engine.stages.shards import finish_shard, partial_dir, partial_note, rows_digest
from worldrecall.registry.host import PluginHost, load_plugins

log = logging.getLogger("worldrecall")
EXIT_BAD_CONFIG = 2           # the config names an unknown key, component or a wrong type
EXIT_NOT_WRITABLE = 4         # results could not be written (disk full …): rerun to resume


class PluginCollision(ConfigTypeError):
    """Unresolved plugin name collisions: the run refuses to start (exit code 2), naming both plugins."""

    def __init__(self, lines: list[str]):
        super().__init__("; ".join(lines))
        self.lines = list(lines)


def host_for(cfg: Mapping[str, Any]) -> PluginHost:
    """The registry for a config's plugin settings; unresolved name collisions stop the run here."""
    p = cfg["plugins"]
    host = load_plugins(allow=p["allow"], block=p["block"], override=p["override"])
    if host.collisions:
        raise PluginCollision(host.collisions)
    return host


def run_plain(plain: Mapping[str, Any], job_dir: Path | None = None, overrides: list[str] | None = None,
              sweep_dir: Path | None = None, host: PluginHost | None = None) -> int:
    """Run a config (a plain dict; missing keys take the schema's defaults) and write its outputs; returns
    the exit code."""
    ctx_args = {"job_dir": job_dir, "overrides": tuple(overrides or ()), "sweep_dir": sweep_dir}
    try:
        cfg = resolve_config(plain)  # the only time: everything below reads this config or the result's
        host = host or host_for(cfg)
        for name, err in host.failures:
            print(f"warning: plugin {name!r} skipped: {err}", file=sys.stderr)
        # the MLflow process (its ~2 s import, on another core) starts as the job begins, or once a job that may
        # be unchanged found that it is not — unless the job will not log (a shard: its merge logs)
        tracks = cfg["shard"]["count"] <= 1
        # a plain job (not a shard, not a sweep's job) records its outputs' key and skips them when unchanged
        outputs = OutputsCheck(overrides or ()) if tracks and sweep_dir is None else None
        sinks = job_sinks(host) if tracks else []
        begin = [s.begin for s in sinks if hasattr(s, "begin")]  # what a sink starts once the rows are final

        def begin_sinks(result: Any) -> None:
            for start in begin:
                start(result, host)

        runner = Runner(cfg, host, outputs_due=(lambda: prefetch_tracking(cfg["tracking"])) if tracks else None,
                        outputs=outputs, before_aggregate=begin_sinks if begin else None)
        # a job that may turn out unchanged writes nothing but its timing and logs: the output root's size (its last
        # line) is measured beside its settling, its end measuring only the few parts it writes (sinks/disk.py)
        early = start_usage(cfg, own=(runner.results_dir, job_dir)) \
            if outputs is not None and outputs.has_record(runner.results_dir) else None
        result = runner.run()
    except ResultsNotWritable as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_NOT_WRITABLE
    except ConfigTypeError as e:  # a wrong key, type or name in the config: one line, no traceback
        for line in e.lines if isinstance(e, PluginCollision) else [str(e)]:
            print(f"error: {line}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    ctx = SinkContext(host, **ctx_args)
    try:
        if result.config["shard"]["count"] > 1:
            return shard_job(result, ctx)
        if result.unchanged is not None:
            return unchanged_job(result, ctx, early)
        return write_sinks(result, ctx, sinks)
    finally:
        if early is not None:
            early.discard()  # used, or the job wrote its outputs after all: measured whole at its end
        runner.save_digest_memo()  # again: the outputs' keys read code digests too


def unchanged_job(result: RunResult, ctx: SinkContext, early: EarlyUsage | None = None) -> int:
    """A job whose outputs would be written again unchanged: its timing, one line, and the disk line (``early``:
    the parts it never writes, measured as it began)."""
    from worldrecall.engine.sinks.files import TimingSink
    from worldrecall.engine.sinks.unchanged import unchanged_line

    code = write_sinks(result, ctx, [TimingSink()])
    print(unchanged_line(result, result.unchanged or {}))
    write_sinks(result, ctx, [DiskSink(early)])
    return code


def check_plain(plain: Mapping[str, Any], host: PluginHost | None = None) -> int:
    """``worldrecall check``: what a run of this config can score, printed per benchmark and metric, from the
    run's own plan and loaded cases (nothing aligned, measured or written to the results). Exit code 1 when a
    requested headline cannot run on any case, 2 for a config error, else 0."""
    from worldrecall.engine.stages.readiness import (
        EXIT_HEADLINE_BLOCKED,
        full_lines,
        headline_lines,
        readiness,
    )

    try:
        cfg = resolve_config(plain)
        host = host or host_for(cfg)
        for name, err in host.failures:
            print(f"warning: plugin {name!r} skipped: {err}", file=sys.stderr)
        runner = Runner(cfg, host)
        runner.hub.probe_only = True  # a backend that declares a probe is checked, not built: no weights loaded
        plans, items = runner.plan_and_load()
    except ConfigTypeError as e:
        for line in e.lines if isinstance(e, PluginCollision) else [str(e)]:
            print(f"error: {line}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    report = readiness(plans, items, host.benchmarks)
    print("what this run can score (from its plan and loaded cases; nothing aligned or measured):")
    for line in [*full_lines(report), "", *headline_lines(report)]:
        print(line)
    runner.save_digest_memo()
    return EXIT_HEADLINE_BLOCKED if any(b.blocked_headlines() for b in report) else 0


def shard_job(result: RunResult, ctx: SinkContext) -> int:
    """A shard's own outputs are partial (:mod:`worldrecall.engine.stages.shards`); a multirun's last shard
    merges every shard's rows."""
    index, count = result.config["shard"]["index"], result.config["shard"]["count"]
    pdir = partial_dir(result.results_dir, index, count)
    code = write_sinks(replace(result, results_dir=pdir, partial=True), ctx, shard_sinks(ctx.host))
    (pdir / "PARTIAL.md").write_text(partial_note(index, count, result.n_cases))
    print(f"\nshard {index + 1}/{count} done: {result.n_cases} case(s) written so far, {result.n_failed_cases} "
          f"failed; partial tables in {pdir}")
    if ctx.sweep_dir is not None and finish_shard(result.results_dir, ctx.sweep_dir, index, count):
        print(f"last of {count} shards: merging")
        merged = merge_job(result.results_dir, result.config, ctx.host, ctx.job_dir, list(ctx.overrides),
                           ctx.sweep_dir)
        return max(code, merged)
    if ctx.sweep_dir is None:
        print(f"merge the shards with: worldrecall aggregate shard.count={count} (same overrides)")
    return code


def aggregate_command(results_dir: Path, cfg: Mapping[str, Any]) -> int:
    """``worldrecall aggregate``: merge every shard under ``results_dir`` into the final outputs."""
    try:
        cfg = resolve_config(cfg)
        host = host_for(cfg)
        configured_aggregator_params(cfg, host.components["aggregator"])
        check_aggregator_paths(cfg, host)
    except ConfigTypeError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    return merge_job(Path(results_dir), cfg, host, None, ["aggregate"], None)


def merge_job(results_dir: Path, cfg: Mapping[str, Any], host: PluginHost, job_dir: Path | None,
              overrides: list[str], sweep_dir: Path | None) -> int:
    """The merged result of every shard's rows: tables, report, leaderboard, and (once per set of rows) MLflow.

    Called by ``worldrecall aggregate`` and by the last shard job of a multirun (then the run goes under the
    sweep's parent and the job's ``summary.json`` is the merged one the sweep summary reads).
    """
    digest = rows_digest(results_dir)
    rows = load_rows(results_dir)
    digests = row_digests(rows)
    part_keys: dict[str, dict[str, str]] = {}
    tables = aggregate_rows(host, rows, cfg, digests=digests, part_keys=part_keys)
    result = replace(build_result(Path(results_dir), rows, tables, cfg, host.plugins.values(), row_digests=digests),
                     table_parts=part_keys)
    count = cfg["shard"]["count"]
    name = f"merged · {count} shards" if sweep_dir is not None and count > 1 else None
    n_files = shards_on_disk(results_dir)
    ctx = SinkContext(host, job_dir, tuple(overrides), sweep_dir)
    return write_sinks(result, ctx, merge_sinks(n_files, name, digest, host))
