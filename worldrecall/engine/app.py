"""One Hydra job: run, write tables and artifacts, track in MLflow, print the leaderboard."""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from worldrecall import __version__
from worldrecall.engine.runner import Runner, RunResult, aggregate_rows, json_dump, load_rows
from worldrecall.engine.tables import case_table
from worldrecall.engine.tracking import PARENT_ENV, Tracker, flatten, git_commit, redact_tree
from worldrecall.registry.host import PluginHost, load_plugins

log = logging.getLogger("worldrecall")
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


def host_for(cfg: Mapping[str, Any]) -> PluginHost:
    p = cfg.get("plugins") or {}
    return load_plugins(allow=p.get("allow"), block=p.get("block") or [])


def run_job(cfg: DictConfig, job_dir: Path | None = None, overrides: list[str] | None = None,
            sweep_dir: Path | None = None) -> int:
    """Run one Hydra job end to end; returns the exit code (0, or 3 past ``max_failure_rate``)."""
    return run_plain(to_plain(cfg), job_dir=job_dir, overrides=overrides, sweep_dir=sweep_dir)


def run_plain(plain: Mapping[str, Any], job_dir: Path | None = None, overrides: list[str] | None = None,
              sweep_dir: Path | None = None, host: PluginHost | None = None) -> int:
    """Run a resolved config (a plain dict): rows, tables, MLflow, leaderboard; returns the exit code."""
    host = host or host_for(plain)
    for name, err in host.failures:
        print(f"warning: plugin {name!r} skipped: {err}", file=sys.stderr)
    runner = Runner(plain, host)
    result = runner.run()
    out = write_outputs(result, plain, host, job_dir)
    uri_line = track(result, plain, host, out, overrides or [], sweep_dir)
    print_leaderboard(result, host)
    print(f"\nresults: {result.results_dir}")
    print(f"cases: {result.n_cases}  failed: {result.n_failed_cases}  failure rate: {result.failure_rate:.1%}"
          f" (max_failure_rate {plain.get('max_failure_rate')})")
    if uri_line:
        print(uri_line)
    EXIT_CODES.append(result.exit_code)
    return result.exit_code


def write_outputs(result: RunResult, plain: Mapping[str, Any], host: PluginHost, job_dir: Path | None) -> list[Path]:
    """Tables (CSV + Markdown), the per-case table, config, plugin manifest, timing and plots."""
    tdir = result.results_dir / "tables"
    tdir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    ct = case_table(result.rows)
    paths.append(tdir / "cases.csv")
    ct.to_csv(paths[-1], index=False)
    for name, df in result.tables.items():
        if hasattr(df, "to_csv"):
            p = tdir / f"{name}.csv"
            df.to_csv(p, index=False)
            paths.append(p)
            md = tdir / f"{name}.md"
            md.write_text(_markdown(df))
            paths.append(md)
    meta = result.results_dir / "meta"
    paths.append(json_dump(redact_tree(plain), meta / "resolved_config.json"))
    paths.append(json_dump(host.manifest(), meta / "plugin_manifest.json"))
    timing = {**{k: round(v, 4) for k, v in result.timing.items()},
              "model_forward_seconds": {k: round(v, 4) for k, v in result.model_seconds.items()},
              "decode_counts": result.decode_counts, "cache": result.cache_stats}
    paths.append(json_dump(timing, meta / "timing.json"))
    paths.extend(make_plots(result, result.results_dir / "plots"))
    if job_dir is not None:
        job_dir.mkdir(parents=True, exist_ok=True)
        (job_dir / "results_dir.txt").write_text(str(result.results_dir))
    return paths


def make_plots(result: RunResult, pdir: Path) -> list[Path]:
    """Heat-maps of every table a plugin knows how to draw (validity matrix), plus a primary-metric bar chart."""
    out: list[Path] = []
    for name, df in result.tables.items():
        if name.endswith("validity") and hasattr(df, "empty") and not df.empty:
            try:
                from worldrecall.plugins.synthetic.validity import plot_validity

                pdir.mkdir(parents=True, exist_ok=True)
                out.append(plot_validity(df, pdir / f"{name}.png"))
            except Exception as e:  # a plot must never cost the results
                log.warning("could not plot %s: %s", name, e)
    return out


def _markdown(df: Any) -> str:
    try:
        return df.to_markdown(index=False)
    except Exception:  # tabulate is optional
        return df.to_string(index=False)


def track(result: RunResult, plain: Mapping[str, Any], host: PluginHost, paths: list[Path],
          overrides: list[str], sweep_dir: Path | None) -> str:
    """Log the job as a child run (under the sweep's or a new parent run); returns the `mlflow ui` line."""
    tcfg = plain.get("tracking") or {}
    if not tcfg.get("enabled", True):
        return ""
    try:
        tracker = Tracker(tcfg, Path(plain.get("output_root", "worldrecall_out")))
    except ImportError:
        print("warning: MLflow is not installed (pip install 'worldrecall[tracking]'); nothing tracked", file=sys.stderr)
        return ""
    tags = provenance_tags(result, plain, host, overrides)
    parent = os.environ.get(PARENT_ENV) or _parent_from_file(sweep_dir)
    own_parent = parent is None
    if own_parent:
        parent = tracker.start_run(tcfg.get("run_name") or "worldrecall", tags=tags)
    child = tracker.start_run(" ".join(overrides) or "job", parent_id=parent, tags=tags)
    try:
        tracker.log_params(child, flatten({k: v for k, v in plain.items() if k != "suite"} | {"suite": plain.get("suite")}))
        tracker.log_metrics(child, run_metrics(result))
        tracker.log_artifacts(child, [p for p in paths if p.suffix in (".csv", ".md")], "tables")
        tracker.log_artifacts(child, [p for p in paths if p.suffix == ".json"], "meta")
        tracker.log_artifacts(child, [p for p in paths if p.suffix == ".png"], "plots")
        staged = _stage_case_artifacts(result)
        if staged is not None:  # one upload of cases/<benchmark>/<model>/<case>/<metric>/<file>
            tracker.log_artifacts(child, [staged], "cases")
            shutil.rmtree(staged.parent, ignore_errors=True)
        tracker.end_run(child, "FINISHED")
    except Exception:
        tracker.end_run(child, "FAILED")
        raise
    finally:
        if own_parent:
            tracker.set_tags(parent, {"worldrecall.child": child})
            tracker.end_run(parent, "FINISHED")
    return tracker.ui_command()


def _stage_case_artifacts(result: RunResult) -> Path | None:
    """Hard-link every row's artifacts into one temporary tree (cheap), so MLflow gets one call, not hundreds."""
    import tempfile

    rows = [r for r in result.rows if r.info.get("artifacts")]
    if not rows:
        return None
    root = Path(tempfile.mkdtemp(prefix="wr-art-", dir=result.results_dir)) / "cases"
    for r in rows:
        d = root / r.benchmark / r.model / _safe(r.case_id) / _safe(r.metric)
        d.mkdir(parents=True, exist_ok=True)
        for a in r.info["artifacts"]:
            src = Path(a)
            if src.exists():
                try:
                    os.link(src, d / src.name)
                except OSError:
                    shutil.copy2(src, d / src.name)
    return root


def _safe(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)


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


def run_metrics(result: RunResult) -> dict[str, float]:
    """Aggregates as MLflow metrics: mean per benchmark × model × metric value, CIs, failure counts, timing."""
    m: dict[str, float] = {"run/failure_rate": result.failure_rate, "run/n_cases": result.n_cases,
                           "run/n_failed_cases": result.n_failed_cases}
    m.update({f"time/{k}": v for k, v in result.timing.items()})
    mean = result.tables.get("mean")
    if mean is not None and len(mean):
        for r in mean.itertuples(index=False):
            m[f"{r.benchmark}/{r.model}/{_short(r.metric, r.benchmark)}/{r.value_name}"] = r.mean
    boot = result.tables.get("bootstrap")
    if boot is not None and len(boot):
        for r in boot.itertuples(index=False):
            k = f"{r.benchmark}/{r.model}/{_short(r.metric, r.benchmark)}/{r.value_name}"
            m[k + "/ci_low"], m[k + "/ci_high"] = r.ci_low, r.ci_high
    return m


def _short(metric: str, benchmark: str) -> str:
    return metric[len(benchmark) + 1:] if metric.startswith(benchmark + ".") else metric


def print_leaderboard(result: RunResult, host: PluginHost) -> None:
    """Primary value of each metric, mean over cases, one table per benchmark (models as rows)."""
    mean = result.tables.get("mean")
    if mean is None or not len(mean):
        print("no scores")
        return
    prim = {name: getattr(cls, "primary", "") for name, cls in host.metrics.items()}
    df = mean[[prim.get(m) == v for m, v in zip(mean["metric"], mean["value_name"])]]
    for bench, g in df.groupby("benchmark"):
        table = g.assign(col=[_short(m, bench) for m in g["metric"]]).pivot_table(
            index="model", columns="col", values="mean", aggfunc="first", dropna=False)  # keep NaN (= n/a) rows
        print(f"\n== {bench} (mean of each metric's primary value) ==")
        print(table.round(4).to_string())
        if table.isna().to_numpy().any():
            print("NaN = not applicable on every case (e.g. Scene Memory F1 when the camera never left and returned)")


def aggregate_command(results_dir: Path, cfg: Mapping[str, Any]) -> int:
    """Merge every shard under ``results_dir`` into the final tables and one MLflow run."""
    from worldrecall.engine.runner import RunResult

    host = host_for(cfg)
    rows = load_rows(results_dir)
    tables = aggregate_rows(host, rows, cfg)
    cases: dict[tuple[str, str, str], bool] = {}
    for r in rows:
        k = (r.benchmark, r.model, r.case_id)
        cases[k] = cases.get(k, False) or r.status == "failed"
    n, nf = len(cases), sum(cases.values())
    rate = nf / n if n else 0.0
    result = RunResult(Path(results_dir), rows, tables, {}, rate, n, nf,
                       3 if rate > float(cfg.get("max_failure_rate", 1.0)) else 0)
    paths = write_outputs(result, cfg, host, None)
    line = track(result, cfg, host, paths, ["aggregate"], None)
    print_leaderboard(result, host)
    print(f"\nmerged {len(list(Path(results_dir).glob('rows-shard-*.jsonl')))} shard file(s), {n} cases, {nf} failed")
    if line:
        print(line)
    return result.exit_code
