"""One Hydra job: run, write tables and artifacts, track in MLflow, print the leaderboard."""

from __future__ import annotations

import json
import logging
import os
import platform
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from worldrecall import __version__
from worldrecall.core.components import ConfigTypeError
from worldrecall.core.data import one_line
from worldrecall.core.tables import case_table
from worldrecall.engine.aggregate import aggregate_rows
from worldrecall.engine.blobs import write_if_changed
from worldrecall.engine.config import resolve_config
from worldrecall.engine.leaderboard_view import leaderboard_text, print_leaderboard
from worldrecall.engine.outputs import Outputs
from worldrecall.engine.pipe_table import pipe_table
from worldrecall.engine.runner import ResultsNotWritable, Runner, RunResult, build_result, load_rows
from worldrecall.engine.shards import (
    already_logged,
    finish_shard,
    mark_logged,
    partial_dir,
    partial_note,
    rows_digest,
)
from worldrecall.engine.sweep_summary import current_swept_keys, write_job_summary
from worldrecall.engine.track_runs import override_label
from worldrecall.engine.tracking import PARENT_ENV, Tracker, flatten, git_commit, redact_tree
from worldrecall.registry.host import PluginHost, load_plugins

log = logging.getLogger("worldrecall")
EXIT_BAD_CONFIG = 2           # the config names an unknown key, component or a wrong type
EXIT_NOT_WRITABLE = 4         # results could not be written (disk full …): rerun to resume
EXIT_CODES: list[int] = []   # filled per job; the CLI exits with the worst
PARENT_FILE = "mlflow_parent_run_id"


def register_resolvers() -> None:
    """``${wr_uid:}``: unique per invocation, so jobs started in the same second get distinct dirs."""
    if OmegaConf.has_resolver("wr_uid"):
        OmegaConf.clear_resolver("wr_uid")
    uid = f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
    OmegaConf.register_new_resolver("wr_uid", lambda: uid, use_cache=True)


def to_plain(cfg: DictConfig) -> dict[str, Any]:
    d = OmegaConf.to_container(cfg, resolve=True)
    d.pop("hydra", None)
    return d  # type: ignore[return-value]


def json_dump(obj: Any, path: Path) -> Path:
    """Write ``obj`` as indented JSON (meta files), creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str))
    return path


class PluginCollision(SystemExit):
    """Unresolved plugin name collisions: the run refuses to start (exit code 2), naming both plugins."""


def host_for(cfg: Mapping[str, Any]) -> PluginHost:
    """The registry for a config's plugin settings; unresolved name collisions stop the run here."""
    p = cfg["plugins"]
    host = load_plugins(allow=p["allow"], block=p["block"], override=p["override"])
    if host.collisions:
        for line in host.collisions:
            print(f"error: {line}", file=sys.stderr)
        raise PluginCollision(2)
    return host


def run_job(cfg: DictConfig, job_dir: Path | None = None, overrides: list[str] | None = None,
            sweep_dir: Path | None = None) -> int:
    """Run one Hydra job end to end; returns the exit code (0, or 3 past ``max_failure_rate``)."""
    from worldrecall.engine.hydra_files import redact_hydra_files

    redact_hydra_files(job_dir, sweep_dir)  # before anything else can fail: no secret stays on disk
    return run_plain(to_plain(cfg), job_dir=job_dir, overrides=overrides, sweep_dir=sweep_dir)


def run_plain(plain: Mapping[str, Any], job_dir: Path | None = None, overrides: list[str] | None = None,
              sweep_dir: Path | None = None, host: PluginHost | None = None) -> int:
    """Run a resolved config (a plain dict): rows, tables, MLflow, leaderboard; returns the exit code."""
    plain = resolve_config(plain)
    host = host or host_for(plain)
    for name, err in host.failures:
        print(f"warning: plugin {name!r} skipped: {err}", file=sys.stderr)
    try:
        result = Runner(plain, host).run()
    except ResultsNotWritable as e:
        print(f"error: {e}", file=sys.stderr)
        EXIT_CODES.append(EXIT_NOT_WRITABLE)
        return EXIT_NOT_WRITABLE
    except ConfigTypeError as e:  # a wrong key, type or name in the config: one line, no traceback
        print(f"error: {e}", file=sys.stderr)
        EXIT_CODES.append(EXIT_BAD_CONFIG)
        return EXIT_BAD_CONFIG
    if plain["shard"]["count"] > 1:
        return _end_shard_job(result, plain, host, job_dir, overrides or [], sweep_dir)
    outputs = Outputs()
    out = write_outputs(result, plain, host, job_dir, overrides or [], sweep_dir, outputs=outputs)
    uri_line = outputs.run("mlflow", track, result, plain, host, out, overrides or [], sweep_dir, default="")
    if sweep_dir is None:
        outputs.run("console", print_leaderboard, result, host)
    else:  # a sweep job: its leaderboard is a file; the sweep prints one summary across jobs at the end
        print(f"\n[{override_label(overrides or [])}] leaderboard: {result.results_dir / 'tables' / 'leaderboard.txt'}")
    print(f"\nresults: {result.results_dir}")
    print(f"cases: {result.n_cases}  failed: {result.n_failed_cases}  failure rate: {result.failure_rate:.1%}"
          f" (max_failure_rate {plain['max_failure_rate']})")
    if uri_line:
        print(uri_line)
    code = outputs.exit_code(result.exit_code)
    EXIT_CODES.append(code)
    return code


def _end_shard_job(result: RunResult, plain: Mapping[str, Any], host: PluginHost, job_dir: Path | None,
                   overrides: list[str], sweep_dir: Path | None) -> int:
    """A shard's own outputs are partial (:mod:`worldrecall.engine.shards`); the multirun's last shard merges."""
    index, count = plain["shard"]["index"], plain["shard"]["count"]
    pdir = partial_dir(result.results_dir, index, count)
    write_outputs(replace(result, results_dir=pdir), plain, host, job_dir, overrides, sweep_dir, partial=True)
    (pdir / "PARTIAL.md").write_text(partial_note(index, count, result.n_cases))
    print(f"\nshard {index + 1}/{count} done: {result.n_cases} case(s) written so far, {result.n_failed_cases} "
          f"failed; partial tables in {pdir}")
    EXIT_CODES.append(result.exit_code)
    if sweep_dir is not None and finish_shard(result.results_dir, sweep_dir, index, count):
        print(f"last of {count} shards: merging")
        code = merge_shards(result.results_dir, plain, host, job_dir, overrides, sweep_dir)
        EXIT_CODES.append(code)
        return code
    if sweep_dir is None:
        print(f"merge the shards with: worldrecall aggregate shard.count={count} (same overrides)")
    return result.exit_code


def write_outputs(result: RunResult, plain: Mapping[str, Any], host: PluginHost, job_dir: Path | None,
                  overrides: list[str] | None = None, sweep_dir: Path | None = None,
                  partial: bool = False, outputs: Outputs | None = None) -> list[Path]:
    """Tables (CSV + Markdown), the per-case table, config, plugin manifest, timing, plots, the HTML report and
    the submission bundle; plots, report and bundle each isolated (``outputs`` keeps those that failed)."""
    outputs = outputs or Outputs()
    t0 = time.perf_counter()
    tdir = result.results_dir / "tables"
    tdir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    # never rewritten in place (atomic, and only when changed): a file logged to MLflow earlier is a hard link
    paths.append(write_if_changed(tdir / "cases.csv", case_table(result.rows).to_csv(index=False)))
    for name, df in result.tables.items():
        if hasattr(df, "to_csv"):
            paths.append(write_if_changed(tdir / f"{name}.csv", df.to_csv(index=False)))
            paths.append(write_if_changed(tdir / f"{name}.md", _markdown(df)))
    paths.append(write_if_changed(tdir / "leaderboard.txt", leaderboard_text(result, host)))
    meta = result.results_dir / "meta"
    paths.append(json_dump(redact_tree(plain), meta / "resolved_config.json"))
    paths.append(json_dump(host.manifest(), meta / "plugin_manifest.json"))
    t1 = time.perf_counter()
    paths.extend(outputs.run("plots", make_plots, result, result.results_dir / "plots", host, default=[]))
    t2 = time.perf_counter()
    report = outputs.run("report", _write_report, result, plain, host, paths)
    if report is not None:
        paths.append(report)
    t3 = time.perf_counter()
    from worldrecall.engine.submission import write_submission
    from worldrecall.engine.track_runs import config_hash

    paths.extend(outputs.run("submission", write_submission, result, plain, host, config_hash(plain), git_commit(),
                             default=[]))
    out_s = {"outputs.tables": t1 - t0, "outputs.plots": t2 - t1, "outputs.report": t3 - t2,
             "outputs.submission": time.perf_counter() - t3}
    timing = {**{k: round(v, 4) for k, v in {**result.timing, **out_s}.items()},
              "model_forward_seconds": {k: round(v, 4) for k, v in result.model_seconds.items()},
              "decode_counts": result.decode_counts, "cache": result.cache_stats}
    paths.append(json_dump(timing, meta / "timing.json"))
    if job_dir is not None:
        job_dir.mkdir(parents=True, exist_ok=True)
        (job_dir / "results_dir.txt").write_text(str(result.results_dir))
        if sweep_dir is not None:  # what the sweep summary reads at on_multirun_end
            write_job_summary(job_dir, result, host, overrides or [], current_swept_keys(sweep_dir), partial=partial)
    return paths


def make_plots(result: RunResult, pdir: Path, host: PluginHost | None = None) -> list[Path]:
    """Each aggregator draws its own tables (``Aggregator.plots``); the engine names no plugin."""
    out: list[Path] = []
    aggs = (getattr(host, "components", {}) or {}).get("aggregator", {}) if host is not None else {}
    for name, agg in aggs.items():
        inst = agg() if isinstance(agg, type) else agg
        try:
            out.extend(Path(p) for p in inst.plots(result.tables, pdir))
        except Exception as e:  # noqa: BLE001  (a plot must never cost the results)
            log.warning("aggregator %s could not plot: %s", name, one_line(e))
    return out


def _write_report(result: RunResult, plain: Mapping[str, Any], host: PluginHost, paths: list[Path]) -> Path | None:
    """The self-contained HTML report (never fatal: the tables are already written)."""
    if not plain["report"]["enabled"]:
        return None
    from worldrecall.engine.report.html import write_report

    return write_report(result, host, [p for p in paths if p.suffix == ".png"], plain)


def _markdown(df: Any) -> str:
    """A real Markdown pipe table (MLflow's artifact viewer and GitHub render it as a table)."""
    return pipe_table(df)


def track(result: RunResult, plain: Mapping[str, Any], host: PluginHost, paths: list[Path],
          overrides: list[str], sweep_dir: Path | None, run_name: str | None = None) -> str:
    """Log the job to MLflow (layout: :mod:`worldrecall.engine.track_runs`); returns the `mlflow ui` line."""
    from worldrecall.engine.track_runs import log_job, override_label

    tcfg = plain["tracking"]
    if not tcfg["enabled"]:
        return ""
    try:
        tracker = Tracker(tcfg, Path(plain["output_root"]))
    except ImportError:
        print("warning: MLflow is not installed (pip install 'worldrecall[tracking]'); nothing tracked", file=sys.stderr)
        return ""
    parent = os.environ.get(PARENT_ENV) or _parent_from_file(sweep_dir)
    swept = set(current_swept_keys(sweep_dir)) if parent else set()
    varying = [o for o in overrides if o.partition("=")[0].lstrip("+~") in swept]  # names say what a job varies
    benches = ",".join(sorted({r.benchmark for r in result.rows})) or "no benchmark"
    name = run_name or ((override_label(varying) or "job") if parent else (tcfg["run_name"] or f"worldrecall · {benches}"))
    params = flatten(dict(plain))
    t0 = time.perf_counter()
    run_id, reused = log_job(tracker, result, plain, host, paths, varying, parent, name,
                             provenance_tags(result, plain, host, overrides), params)
    # not logged itself (it is measured after logging); benchmarks/pipeline.py reads it
    json_dump({"mlflow_s": round(time.perf_counter() - t0 + tracker.setup_s + tracker.import_s, 4),
               "setup_s": round(tracker.setup_s, 4),
               "import_s": round(tracker.import_s, 4), "run_id": run_id, "reused": reused},
              result.results_dir / "meta" / "tracking.json")
    note = (f"MLflow: same config and same numbers as run {run_id}; nothing logged again (that run is reused)\n"
            if reused else "")
    benchmarks = sorted({r.benchmark for r in result.rows})
    return note + tracker.ui_command(run_id if parent is None else None, benchmarks)


def _parent_from_file(sweep_dir: Path | None) -> str | None:
    if sweep_dir is None:
        return None
    p = Path(sweep_dir) / PARENT_FILE
    return p.read_text().strip() if p.exists() else None


def provenance_tags(result: RunResult, plain: Mapping[str, Any], host: PluginHost, overrides: list[str]) -> dict[str, str]:
    import hashlib

    manifest_hash = hashlib.sha256(json.dumps(
        sorted({(r.benchmark, r.model, r.case_id) for r in result.rows}), default=str).encode()).hexdigest()[:16]
    tags = {
        "worldrecall.version": __version__,
        "worldrecall.git_commit": git_commit(),
        "worldrecall.input_manifest_hash": manifest_hash,
        "worldrecall.results_dir": str(result.results_dir),
        "worldrecall.overrides": " ".join(overrides),
        "worldrecall.backends": ",".join(f"{k}={v}" for k, v in sorted(result.backends.items()) if v),
        "worldrecall.python": platform.python_version(),
    }
    for p in host.plugins.values():
        tags[f"plugin.{p.name}"] = p.version or "?"
    return tags


def aggregate_command(results_dir: Path, cfg: Mapping[str, Any]) -> int:
    """Merge every shard under ``results_dir`` into the final tables and one MLflow run."""
    cfg = resolve_config(cfg)
    return merge_shards(Path(results_dir), cfg, host_for(cfg), None, ["aggregate"], None)


def merge_shards(results_dir: Path, cfg: Mapping[str, Any], host: PluginHost, job_dir: Path | None,
                 overrides: list[str], sweep_dir: Path | None) -> int:
    """The merged result of every shard's rows: tables, report, leaderboard, and (once per set of rows) MLflow.

    Called by ``worldrecall aggregate`` and by the last shard job of a multirun (then the run goes under the
    sweep's parent and the job's ``summary.json`` is the merged one the sweep summary reads).
    """
    digest = rows_digest(results_dir)
    rows = load_rows(results_dir)
    result = build_result(Path(results_dir), rows, aggregate_rows(host, rows, cfg), cfg)
    n, nf = result.n_cases, result.n_failed_cases
    paths = write_outputs(result, cfg, host, job_dir, overrides, sweep_dir)
    line = ""
    if already_logged(results_dir, digest):
        print("MLflow: these merged rows are already logged (by the last shard or an earlier aggregate)")
    else:
        count = cfg["shard"]["count"]
        line = track(result, cfg, host, paths, overrides, sweep_dir,
                     run_name=f"merged · {count} shards" if sweep_dir is not None and count > 1 else None)
        if line:  # logged (tracking on and MLflow installed)
            mark_logged(results_dir, digest)
    print_leaderboard(result, host)
    print(f"\nmerged {len(list(Path(results_dir).glob('rows-shard-*.jsonl')))} shard file(s), {n} cases, {nf} failed")
    print(f"results: {results_dir}")
    if line:
        print(line)
    return result.exit_code
