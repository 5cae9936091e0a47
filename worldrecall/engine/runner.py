"""The runner: load -> align -> measure (cached) -> score (pure) -> append rows, one case at a time.

A failure in one case becomes a row with a one-line reason; the run goes on. Rows are appended as they
finish, so a rerun of the same config resumes. Aggregation and tracking happen after all rows are
written, and ``max_failure_rate`` decides the exit code last.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from worldrecall.core.cache import MeasurementCache, ScoreCache, cache_key
from worldrecall.core.components import (
    Aggregator,
    Aligner,
    ConfigTypeError,
    Loader,
    LoadRequest,
    MeasureContext,
    Metric,
)
from worldrecall.core.data import (
    Alignment,
    Case,
    CaseError,
    CaseFailure,
    ScoreRow,
    one_line,
    load_digest_memo,
    save_digest_memo,
)
from worldrecall.core.judges import JudgeError, JudgeHub
from worldrecall.core.models import BackendUnavailable, ModelHub
from worldrecall.core.results import ResultStore, read_rows
from worldrecall.core.video import VideoError, VideoPool
from worldrecall.registry.host import PluginHost

log = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILURE_RATE = 0, 3


@dataclass
class BenchmarkPlan:
    """One benchmark's resolved pieces for this run."""

    name: str
    loader: Loader
    aligner_name: str
    aligner_params: dict[str, Any]
    metrics: dict[str, Metric]            # registered name -> instance
    skipped: dict[str, str]               # registered name -> reason (backend/judge unavailable)
    request: LoadRequest
    aggregators: list[str]


@dataclass
class RunResult:
    results_dir: Path
    rows: list[ScoreRow]
    tables: dict[str, Any]
    timing: dict[str, float]
    failure_rate: float
    n_cases: int
    n_failed_cases: int
    exit_code: int
    decode_counts: dict[str, int] = field(default_factory=dict)
    cache_stats: dict[str, int] = field(default_factory=dict)
    model_seconds: dict[str, float] = field(default_factory=dict)
    backends: dict[str, str] = field(default_factory=dict)


def import_string(target: str) -> Any:
    """``"pkg.module:attr"`` -> the attribute."""
    mod, _, attr = target.partition(":")
    obj = importlib.import_module(mod)
    return getattr(obj, attr) if attr else obj


def shard_of(case_id: str, count: int) -> int:
    """Deterministic shard of a case id (all models of one clip land in the same shard)."""
    return int(hashlib.sha256(case_id.encode()).hexdigest()[:8], 16) % max(count, 1)


def run_key(cfg: Mapping[str, Any]) -> str:
    """What decides the rows: benchmarks (metrics, params, thresholds, data), backends, suite, filters."""
    parts = {k: cfg.get(k) for k in ("benchmarks", "models", "suite", "only", "models_only")}
    parts["shard_count"] = cfg.get("shard", {}).get("count", 1)
    return cache_key(parts)[:16]


class Runner:
    """Runs every enabled benchmark of a resolved config (a plain dict)."""

    def __init__(self, cfg: Mapping[str, Any], host: PluginHost):
        self.cfg = cfg
        self.host = host
        self.output_root = Path(cfg.get("output_root", "worldrecall_out"))
        cache_root = Path(cfg.get("cache_dir") or self.output_root / "cache")
        self.cache = MeasurementCache(cache_root / "measurements")
        self.scores = ScoreCache(cache_root / "scores")
        self.alignments = ScoreCache(cache_root / "alignments")  # same pure-function memo, own counters
        self.artifacts_dir = cache_root / "artifacts"
        self.pool = VideoPool(facts_dir=cache_root / "video_facts")
        self.digest_memo = cache_root / "file_digests.json"
        self.timing: dict[str, float] = defaultdict(float)
        models_cfg = dict(cfg.get("models") or {})
        options = models_cfg.pop("options", {}) or {}
        backend_set = models_cfg.pop("set", "") or ""
        self.hub = ModelHub(host.models, models_cfg, options, device=cfg.get("device", "cpu"),
                            roles=host.roles, backend_set=backend_set)
        self.judges = JudgeHub(host.judges, cfg.get("judge_options") or {})
        shard = cfg.get("shard") or {}
        self.shard_count, self.shard_index = int(shard.get("count", 1)), int(shard.get("index", 0))
        if not 0 <= self.shard_index < self.shard_count:
            raise ConfigTypeError(f"shard.index={self.shard_index} must be in [0, shard.count={self.shard_count})")
        self.results_dir = self.output_root / "results" / run_key(cfg)

    # -- planning -------------------------------------------------------------------------------
    def build_suite(self) -> None:
        suite = self.cfg.get("suite") or {}
        if suite.get("builder"):
            t0 = time.perf_counter()
            import_string(suite["builder"])(suite["root"], **(suite.get("params") or {}))
            self.timing["suite_build"] += time.perf_counter() - t0

    def plan(self) -> list[BenchmarkPlan]:
        only = self.cfg.get("only")
        plans = []
        for name, b in (self.cfg.get("benchmarks") or {}).items():
            if not b or not b.get("enabled", True) or (only is not None and name not in only):
                continue
            plans.append(self._plan_one(name, b))
        return plans

    def _plan_one(self, name: str, b: Mapping[str, Any]) -> BenchmarkPlan:
        from worldrecall.engine.config import validate_benchmark

        b = validate_benchmark(name, dict(b))
        loader = _instance(self.host.get("loader", b["loader"]))
        metrics: dict[str, Metric] = {}
        skipped: dict[str, str] = {}
        for short, mcfg in (b.get("metrics") or {}).items():
            mcfg = dict(mcfg or {})
            if not mcfg.pop("enabled", True):
                continue
            full = f"{name}.{short}"
            cls = self.host.get("metric", full)
            unknown = set(mcfg) - {"params", "thresholds"}
            if unknown:
                raise ConfigTypeError(f"benchmarks.{name}.metrics.{short}: unknown keys {sorted(unknown)}")
            metrics[full] = cls(mcfg.get("params"), mcfg.get("thresholds"))
            reason = self._availability(metrics[full])
            if reason:
                skipped[full] = reason
        gens = _resolve_generations(b.get("generations"), self.cfg.get("models_only"))
        request = LoadRequest(data_root=Path(b["data_root"]) if b.get("data_root") else Path("."),
                              generations=gens, options=dict(b.get("loader_options") or {}), pool=self.pool)
        return BenchmarkPlan(name=name, loader=loader, aligner_name=b.get("aligner") or "",
                             aligner_params=dict(b.get("aligner_params") or {}), metrics=metrics,
                             skipped=skipped, request=request, aggregators=list(b.get("aggregators") or []))

    def _availability(self, metric: Metric) -> str:
        """'' when every backend/judge the metric needs can be built, else why not (the metric is skipped)."""
        for role in metric.models:
            try:
                self.hub.get(role)
            except BackendUnavailable as e:
                return f"{metric.name} skipped: {e}"
        for judge in _judge_names(metric):
            try:
                self.judges.get(judge)
            except (JudgeError, BackendUnavailable) as e:
                return f"{metric.name} skipped: {e}"
        return ""

    # -- running --------------------------------------------------------------------------------
    def run(self) -> RunResult:
        t_start = time.perf_counter()
        self.build_suite()
        plans = self.plan()
        store = ResultStore(self.results_dir, self.shard_index, self.shard_count)
        load_digest_memo(self.digest_memo)
        for msg in sorted({m for p in plans for m in p.skipped.values()}):
            log.warning(msg)
        for plan in plans:
            self._run_benchmark(plan, store)
        save_digest_memo(self.digest_memo)
        rows = store.all_rows()
        t0 = time.perf_counter()
        tables = self.aggregate(rows, plans)
        self.timing["aggregate"] += time.perf_counter() - t0
        self.timing["total"] = time.perf_counter() - t_start
        return self._result(rows, tables, plans)

    def _run_benchmark(self, plan: BenchmarkPlan, store: ResultStore) -> None:
        t0 = time.perf_counter()
        items = self._load(plan)
        self.timing["load"] += time.perf_counter() - t0
        # one group per clip: all models of a clip go to the same worker, so a shared reference is decoded once
        groups: dict[str, list[Case | CaseError]] = {}
        for it in items:
            groups.setdefault(it.case_id, []).append(it)
        todo = [g for g in groups.values() if any(not store.is_final((plan.name, it.model, it.case_id, m))
                                                   for it in g for m in plan.metrics)]
        progress = _progress(len(items), f"{plan.name}", enabled=bool(self.cfg.get("progress", True)))
        progress.update(len(items) - sum(len(g) for g in todo))
        workers = min(self.workers(), len(todo))
        t0 = time.perf_counter()
        for group in todo:  # hash inputs here, once: forked workers' memos die with them
            for it in group:
                if isinstance(it, Case):
                    try:
                        it.fingerprint()
                    except (OSError, VideoError):
                        pass  # the case fails later, in its own row, with the reason
        self.timing["fingerprint"] += time.perf_counter() - t0
        if workers <= 1:
            for group in todo:
                for item in group:
                    for row in self._case_rows(plan, item, store.is_final):
                        store.append(row)
                    progress.update(1)
        else:
            self._run_parallel(plan, todo, store, workers, progress)
        progress.close()

    def workers(self) -> int:
        """``workers`` config; 0 = auto: one process per core for CPU runs on classical/sidecar backends only
        (forking after a reference model or CUDA is initialised is unsafe, so those run in one process)."""
        n = int(self.cfg.get("workers", 1) or 0)
        if n > 0:
            return n
        if not str(self.cfg.get("device", "cpu")).startswith("cpu"):
            return 1
        kinds = {self.hub.specs[name].kind for name in self.hub.selection.values() if name in self.hub.specs}
        return 1 if "reference" in kinds else max(1, min(os.cpu_count() or 1, 8))

    def _run_parallel(self, plan: BenchmarkPlan, groups: list[list[Case | CaseError]], store: ResultStore,
                      workers: int, progress: Any) -> None:
        """Case groups in forked worker processes; the parent alone appends rows (in completion order)."""
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        global _FORK_STATE
        _FORK_STATE = (self, plan, groups, store.is_final)
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # for a torch first imported inside a worker
        try:
            with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as ex:
                futures = {ex.submit(_run_group_in_worker, i): i for i in range(len(groups))}
                for fut in as_completed(futures):
                    rows, stats = fut.result()
                    for row in rows:
                        store.append(row)
                    self._merge_stats(stats)
                    progress.update(len(groups[futures[fut]]))
        finally:
            _FORK_STATE = None

    def _worker_stats(self) -> dict[str, Any]:
        return {"timing": dict(self.timing), "decodes": dict(self.pool.decode_counts),
                "cache": (self.cache.hits, self.cache.misses, self.cache.corrupt, self.scores.hits),
                "model_seconds": dict(self.hub.forward_seconds)}

    def _merge_stats(self, stats: Mapping[str, Any]) -> None:
        for k, v in stats["timing"].items():
            self.timing[k] += v
        for k, v in stats["decodes"].items():
            self.pool.decode_counts[k] = self.pool.decode_counts.get(k, 0) + v
        h, m, c, sh = stats["cache"]
        self.scores.hits += sh
        self.cache.hits += h
        self.cache.misses += m
        self.cache.corrupt += c
        for k, v in stats["model_seconds"].items():
            self.hub.forward_seconds[k] = self.hub.forward_seconds.get(k, 0.0) + v

    def _load(self, plan: BenchmarkPlan) -> list[Case | CaseError]:
        items: list[Case | CaseError] = []
        seen: set[tuple[str, str]] = set()
        try:
            stream = list(plan.loader.load(plan.request))
        except Exception as e:  # a loader bug must not lose the other benchmarks
            log.error("loader %s failed: %s", plan.loader.name, e)
            return [CaseError(plan.name, "*", "*", "load", f"loader {plan.loader.name} failed: {type(e).__name__}: {e}")]
        for it in stream:
            if shard_of(it.case_id, self.shard_count) != self.shard_index:
                continue
            key = (it.model, it.case_id)
            if key in seen:
                items.append(CaseError(plan.name, it.case_id, it.model, "load",
                                       f"duplicate case id {it.case_id!r} for model {it.model!r}; later copy ignored",
                                       dict(getattr(it, "strata", {}) or {})))
                continue
            seen.add(key)
            items.append(it)
        # case-major order: all models of a clip in a row, so a shared reference video is decoded once
        return sorted(items, key=lambda c: (c.case_id, c.model, isinstance(c, CaseError)))

    def _case_rows(self, plan: BenchmarkPlan, item: Case | CaseError, is_final: Any) -> list[ScoreRow]:
        """The rows of one case (every metric not already final), in metric order."""
        out: list[ScoreRow] = []
        if isinstance(item, CaseError):
            for name, metric in plan.metrics.items():
                if not is_final((plan.name, item.model, item.case_id, name)):
                    out.append(ScoreRow(plan.name, item.model, item.case_id, name, {}, "failed",
                                        f"{item.stage}: {item.reason}", item.strata, metric.version))
            return out
        case = item
        alignments: dict[str, Alignment | CaseFailure] = {}
        for name, metric in plan.metrics.items():
            key = (plan.name, case.model, case.case_id, name)
            if is_final(key):
                continue
            base = ScoreRow(plan.name, case.model, case.case_id, name, {}, strata=dict(case.strata),
                            metric_version=metric.version,
                            backend=self.hub.backend_names(metric.models + metric.optional_models))
            if name in plan.skipped:
                base.status, base.reason = "skipped", plan.skipped[name]
                out.append(base)
                continue
            aligner_name = getattr(metric, "aligner", None) or plan.aligner_name
            aligner_params = _aligner_params(plan, aligner_name)
            if aligner_name not in alignments:
                alignments[aligner_name] = self._align(aligner_name, case, aligner_params)
            alignment = alignments[aligner_name]
            if isinstance(alignment, CaseFailure):
                base.status, base.reason = "failed", f"align: {alignment}"
                out.append(base)
                continue
            out.append(self._measure_and_score(metric, case, alignment, base))
        return out

    def _align(self, name: str, case: Case, params: Mapping[str, Any]) -> Alignment | CaseFailure:
        t0 = time.perf_counter()
        try:
            if not name:
                return Alignment()
            aligner: Aligner = _instance(self.host.get("aligner", name))
            merged = {**getattr(aligner, "defaults", {}), **params}
            # an alignment is a pure function of the case's inputs and the params: memoise it like a score
            key = cache_key({"aligner": name, "case": case.fingerprint(), "params": merged})
            memo = self.alignments.get(name, key)
            if memo is not None:
                return Alignment.from_json(memo)
            alignment = aligner.align(case, merged)
            self.alignments.put(name, key, json.loads(json.dumps(alignment.to_json(), default=_json_default)))
            return alignment
        except (CaseFailure, VideoError) as e:
            return CaseFailure(one_line(e))
        except Exception as e:
            return CaseFailure(f"{type(e).__name__}: {one_line(e)}")
        finally:
            self.timing["align"] += time.perf_counter() - t0

    def _measure_and_score(self, metric: Metric, case: Case, alignment: Alignment, row: ScoreRow) -> ScoreRow:
        stage = "measure"
        try:
            t0 = time.perf_counter()
            key = cache_key({
                "metric": metric.name, "version": metric.version, "case": case.fingerprint(),
                "alignment": alignment.to_json(), "params": metric.params,
                "models": self.hub.identities(metric.models),
                "optional_models": {r: self.hub.selection.get(r) or "" for r in metric.optional_models},
                "extra": metric.cache_params(case, alignment),
            })
            score_key = cache_key({"measurement": key, "version": metric.version, "thresholds": metric.thresholds,
                                   "artifacts": bool(self.cfg.get("artifacts", True))})
            memo = self.scores.get(metric.name, score_key)
            if memo is not None:  # pure score of the same inputs: reuse (no measurement load at all)
                row.values = memo["values"]
                row.info = {"alignment": alignment.to_json(), "cache_hit": True, "score_cache_hit": True}
                if memo.get("artifacts"):
                    row.info["artifacts"] = memo["artifacts"]
                self.timing["measure"] += time.perf_counter() - t0
                return row
            ctx = MeasureContext(models=self.hub, judges=self.judges, artifacts_dir=self.artifacts_dir,
                                 device=str(self.cfg.get("device", "cpu")),
                                 batch_size=int(self.cfg.get("batch_size", 8)))
            measurement, hit = self.cache.get_or_compute(metric.name, key, lambda: metric.measure(case, alignment, ctx))
            self.timing["measure"] += time.perf_counter() - t0
            stage = "score"
            t0 = time.perf_counter()
            values = metric.score(measurement, metric.thresholds)
            row.values = {k: _num(v) for k, v in values.items()}
            row.info = {"alignment": alignment.to_json(), "cache_hit": hit}
            self.timing["score"] += time.perf_counter() - t0
            paths: list[Path] = []
            if self.cfg.get("artifacts", True):
                t0 = time.perf_counter()
                # content-addressed like the score itself, so a re-scored sweep job reuses them
                out = self.artifacts_dir / metric.name / score_key[:2] / score_key
                paths = list(metric.artifacts(measurement, metric.thresholds, out))
                if paths:
                    row.info["artifacts"] = [str(p) for p in paths]
                self.timing["artifacts"] += time.perf_counter() - t0
            self.scores.put(metric.name, score_key, {"values": row.values, "artifacts": [str(p) for p in paths]})
        except BackendUnavailable as e:
            row.status, row.reason = "skipped", f"{metric.name} skipped: {one_line(e)}"
        except (CaseFailure, VideoError, JudgeError) as e:
            row.status, row.reason = "failed", f"{stage}: {one_line(e)}"
        except Exception as e:  # a bug in one metric must not end the run; the reason says where
            log.debug("metric %s failed on %s", metric.name, case.key, exc_info=True)
            row.status, row.reason = "failed", f"{stage}: {metric.name} raised {type(e).__name__}: {one_line(e)}"
        return row

    # -- aggregation ----------------------------------------------------------------------------
    def aggregate(self, rows: list[ScoreRow], plans: Iterable[BenchmarkPlan]) -> dict[str, Any]:
        return aggregate_rows(self.host, rows, self.cfg, plans)

    def _result(self, rows: list[ScoreRow], tables: dict[str, Any], plans: list[BenchmarkPlan]) -> RunResult:
        case_status: dict[tuple[str, str, str], bool] = {}
        for r in rows:
            k = (r.benchmark, r.model, r.case_id)
            case_status[k] = case_status.get(k, False) or r.status == "failed"
        n = len(case_status)
        n_failed = sum(case_status.values())
        rate = n_failed / n if n else 0.0
        limit = float(self.cfg.get("max_failure_rate", 1.0))
        backends = {r: self.hub.selection.get(r, "") for p in plans for m in p.metrics.values() for r in m.models}
        return RunResult(self.results_dir, rows, tables, dict(self.timing), rate, n, n_failed,
                         EXIT_FAILURE_RATE if rate > limit else EXIT_OK, dict(self.pool.decode_counts),
                         {"hits": self.cache.hits, "misses": self.cache.misses, "corrupt": self.cache.corrupt,
                          "score_hits": self.scores.hits},
                         dict(self.hub.forward_seconds), backends)


_FORK_STATE: Any = None  # (runner, plan, groups, is_final) inherited by forked workers


def _run_group_in_worker(i: int) -> tuple[list[ScoreRow], dict[str, Any]]:
    """Runs in a forked worker: score one clip group; returns its rows and this call's counters."""
    runner, plan, groups, is_final = _FORK_STATE
    if "torch" in sys.modules:  # one intra-op thread per worker: the workers already fill the cores
        sys.modules["torch"].set_num_threads(1)
    runner.timing.clear()
    runner.pool.decode_counts.clear()
    runner.cache.hits = runner.cache.misses = runner.cache.corrupt = runner.scores.hits = 0
    runner.hub.forward_seconds.clear()
    rows = [row for item in groups[i] for row in runner._case_rows(plan, item, is_final)]
    return rows, runner._worker_stats()


def aggregate_rows(host: PluginHost, rows: list[ScoreRow], cfg: Mapping[str, Any],
                   plans: Iterable[BenchmarkPlan] | None = None) -> dict[str, Any]:
    """Run the global aggregators and each benchmark's own aggregators over the rows."""
    tables: dict[str, Any] = {}
    suite = cfg.get("suite") or {}
    params = {**(cfg.get("aggregator_params") or {}), **(suite.get("aggregator_params") or {})}
    # every aggregator may restrict itself to each metric's primary value (e.g. bootstrap CIs)
    primary = {name: getattr(cls, "primary", "") for name, cls in host.metrics.items()}
    names = list(cfg.get("aggregators") or []) + list(suite.get("aggregators") or [])
    per_bench = {p.name: p.aggregators for p in plans} if plans is not None else {
        n: list((b or {}).get("aggregators") or []) for n, b in (cfg.get("benchmarks") or {}).items()}
    for name in names:
        agg: Aggregator = _instance(host.get("aggregator", name))
        for tname, df in agg.aggregate(rows, _agg_params(agg, params.get(name, {}), primary)).items():
            tables[tname] = df
    for bench, anames in per_bench.items():
        brow = [r for r in rows if r.benchmark == bench]
        for name in anames:
            agg = _instance(host.get("aggregator", name))
            for tname, df in agg.aggregate(brow, _agg_params(agg, params.get(name, {}), primary)).items():
                tables[f"{bench}.{tname}" if not tname.startswith(bench) else tname] = df
    return tables


def _agg_params(agg: Aggregator, given: Mapping[str, Any], primary: dict[str, str]) -> dict[str, Any]:
    """Defaults + config; aggregators that choose values (``values`` default) also get each metric's primary."""
    extra = {"primary_values": primary} if "values" in agg.defaults else {}
    return {**agg.defaults, **extra, **given}


def load_rows(results_dir: Path) -> list[ScoreRow]:
    return read_rows(Path(results_dir).glob("rows-shard-*.jsonl"))


def _resolve_generations(gens: Any, only: Iterable[str] | None) -> dict[str, Path]:
    """A folder with one sub-folder per model, or an explicit mapping model -> path."""
    out: dict[str, Path] = {}
    if gens is None:
        return out
    if isinstance(gens, Mapping):
        out = {str(k): Path(v) for k, v in gens.items()}
    else:
        root = Path(gens)
        if root.is_dir():
            out = {p.name: p for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".")}
    if only:
        out = {k: v for k, v in out.items() if k in set(only)}
    return out


def _aligner_params(plan: BenchmarkPlan, aligner_name: str) -> dict[str, Any]:
    """Flat ``aligner_params`` keys go to the benchmark's aligner; ``{<aligner name>: {...}}`` entries to others."""
    nested = plan.aligner_params.get(aligner_name)
    if isinstance(nested, Mapping):
        return dict(nested)
    if aligner_name != plan.aligner_name:
        return {}
    return {k: v for k, v in plan.aligner_params.items() if not isinstance(v, Mapping) or "." not in k}


def _instance(obj: Any) -> Any:
    return obj() if isinstance(obj, type) else obj


def _judge_names(metric: Metric) -> tuple[str, ...]:
    judge = metric.params.get("judge") if isinstance(metric.params, Mapping) else None
    return (judge,) if judge else tuple(metric.judges)


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _num(v: Any) -> float | None:
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None



def _safe_name(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)


class _NoProgress:
    def update(self, n: int) -> None: ...
    def close(self) -> None: ...


def _progress(total: int, desc: str, enabled: bool) -> Any:
    if not enabled:
        return _NoProgress()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="case", leave=True, dynamic_ncols=True)


def json_dump(obj: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str))
    return path
