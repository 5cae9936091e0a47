"""The runner, top-down: build the suite -> plan -> per-case pipeline in an executor -> aggregate -> result.

Each stage is its own module (``plan``, ``pipeline``, ``executor``, ``aggregate``); this one only wires them
for one resolved config. Rows are appended as cases finish (by this process alone), so a rerun of the same
config resumes; aggregation happens after all rows are written, and ``max_failure_rate`` decides the exit
code last (see :func:`worldrecall.engine.stages.aggregate.outcome`).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldrecall.core.components import ConfigTypeError
from worldrecall.core.data import Case, CaseError, ScoreRow
from worldrecall.core.digests import load_digest_memo, save_digest_memo
from worldrecall.core.judges import JudgeHub
from worldrecall.core.models import ModelHub
from worldrecall.core.video import VideoError, VideoPool
from worldrecall.engine.stages import load_memo
from worldrecall.engine.stages.absence import all_null_values
from worldrecall.engine.stages.aggregate import aggregate_rows
from worldrecall.engine.stages.config import ResolvedConfig, resolve_config
from worldrecall.engine.stages.executor import make_executor
from worldrecall.engine.stages.later import run_later
from worldrecall.engine.stages.name_checks import check_names, check_selection
from worldrecall.engine.stages.pipeline import CasePipeline
from worldrecall.engine.stages.plan import (
    BenchmarkPlan,
    enable_metrics,
    load_cases,
    plan_benchmarks,
    preflight,
    run_key,
)
from worldrecall.engine.stages.progress import progress_bar
from worldrecall.engine.stages.result import RunResult, build_result
from worldrecall.engine.stages.row_memo import remember
from worldrecall.engine.stages.row_store import ResultStore, as_written, read_rows
from worldrecall.registry.host import PluginHost

log = logging.getLogger(__name__)


class ResultsNotWritable(RuntimeError):
    """Rows cannot be appended (disk full, read-only folder): the run stops with this one-line message."""


class Runner:
    """Runs every enabled benchmark of a config (a plain dict; missing keys take the schema's defaults)."""

    def __init__(self, cfg: Mapping[str, Any], host: PluginHost, foresee: bool = True,
                 defer_cache_writes: bool = False):
        """``foresee``: a later job of this process may re-score these results, so a job that measures builds
        the rows that job would take from the score memo (:meth:`_foresee`) and its loads are kept
        (``load_memo``); False where the process ends after this job (``worldrecall run`` without ``-m``). ``defer_cache_writes``: the caller writes the
        job's outputs next (:func:`~worldrecall.engine.sinks.base.write_sinks`), which writes the new aggregate
        cache entries after them (``stages/later.py``)."""
        self.foresee, self.defer_cache_writes = foresee, defer_cache_writes
        cfg = resolve_config(cfg)  # a no-op for the job's config, which is resolved already
        self.results_dir = Path(cfg["output_root"]) / "results" / run_key(cfg)  # the config as written
        self.cfg = cfg = ResolvedConfig(enable_metrics(cfg, host))  # metrics=[name, …] joins each to its benchmark
        self.host = host
        cache_root = Path(cfg["cache_dir"])
        models_cfg = dict(cfg["models"])
        options = models_cfg.pop("options", None) or {}
        backend_set = models_cfg.pop("set", None) or ""
        self.hub = ModelHub(host.models, models_cfg, options, device=cfg["device"], roles=host.roles,
                            backend_set=backend_set)
        self.judges = JudgeHub(host.judges, cfg["judge_options"], cache_dir=cache_root / "judge_answers")
        self.pool = VideoPool(cfg["video"]["max_bytes"], facts_dir=cache_root / "video_facts",
                              max_pixels=cfg["video"]["max_pixels"],
                              max_frames=cfg["video"]["max_frames"])
        # what an earlier job of this process left to write (a Runner run without the job's outputs, which
        # write it): written before this job reads its caches (its score memo then trusts files again)
        run_later()
        self.pipeline = CasePipeline(host, self.hub, self.judges, self.pool, cache_root,
                                     artifacts=cfg["artifacts"], device=cfg["device"], batch_size=cfg["batch_size"])
        self.digest_memo = cache_root / "file_digests.json"
        self.shard_count, self.shard_index = cfg["shard"]["count"], cfg["shard"]["index"]
        self.timing = self.pipeline.counters.timing

    def run(self) -> RunResult:
        started_at, t_start = time.time(), time.perf_counter()
        check_names(self.cfg, self.host)  # a typo ends the run here, before the suite is built
        self.build_suite()
        load_digest_memo(self.digest_memo)  # before loading: loaders read file facts through it
        plans = plan_benchmarks(self.cfg, self.host, self.hub, self.judges, self.pool)
        items = self.load(plans)
        check_selection(self.cfg, sum(map(len, items.values())), {it.model for v in items.values() for it in v},
                        {m for p in plans for m in p.models})
        # said once, before evaluating: metrics skipped, values no backend can give (LPIPS without one …)
        absent = [m for p in plans for k, m in p.absent.items() if k not in p.skipped]
        for msg in sorted({*(m for p in plans for m in p.skipped.values()), *absent}):
            log.warning(msg)
        store = ResultStore(self.results_dir, self.shard_index, self.shard_count)
        try:
            jobs = [self.prepare(plan, store, items[plan.name]) for plan in plans]
            # when every row left needs a score only (a sweep's re-score job), this process scores them: forking
            # workers costs more than the scoring. Decided for the whole job, so no worker of this job is forked
            # after this process ran a metric's score; scoring here runs as a worker would (one thread for torch,
            # OpenCV and OpenMP: the same numbers, and no library thread pool alive at a later job's fork)
            here = all(j.scores_only for j in jobs)
            for job in jobs:
                self.execute(job, here)
        finally:
            try:
                store.close()
            except OSError:
                pass  # the write error itself is what the run reports
        save_digest_memo(self.digest_memo)
        for its in items.values():  # their fingerprints, for a later job's copies of these cases
            load_memo.learn(its)
        rows = store.all_rows()
        for msg in all_null_values(rows, self.host.metrics, [k for p in plans for k in p.absent]):
            log.warning(msg)
        t0 = time.perf_counter()
        keys: dict[str, str] = {}
        tables = aggregate_rows(self.host, rows, self.cfg, {p.name: p.aggregators for p in plans}, keys=keys,
                                defer_writes=self.defer_cache_writes)
        self.timing["aggregate"] += time.perf_counter() - t0
        self.timing["total"] = time.perf_counter() - t_start
        backends = {r: self.hub.selection.get(r, "") for p in plans for m in p.metrics.values() for r in m.models}
        return build_result(self.results_dir, rows, tables, self.cfg, self.host.plugins.values(), self.pipeline.totals(),
                            backends, started_at, table_keys=keys)

    def build_suite(self) -> None:
        """Build the configured suite (a registered name; config never names a callable)."""
        suite = self.cfg["suite"]
        if suite.get("builder"):
            t0 = time.perf_counter()
            try:
                builder = self.host.suite(suite["builder"])
            except KeyError as e:  # e.g. suite.builder=os:system: a name, never code
                raise ConfigTypeError(f"suite.builder: {e.args[0]}") from None
            builder.build(Path(suite["root"]), dict(suite.get("params") or {}), progress=self.cfg["progress"])
            self.timing["suite_build"] += time.perf_counter() - t0

    def load(self, plans: list[BenchmarkPlan]) -> dict[str, list[Case | CaseError]]:
        """Every benchmark's cases of this shard, loaded before any is evaluated; backend preflight per plan
        (its skips join ``plan.skipped``, said with the other skips before evaluating)."""
        t0 = time.perf_counter()
        items = {}
        for plan in plans:
            items[plan.name] = load_memo.load(plan, self.shard_index, self.shard_count, self.pool,
                                              lambda plan=plan: load_cases(plan, self.shard_index, self.shard_count),
                                              keep=self.foresee)
            preflight(plan, items[plan.name], self.hub)
        self.timing["load"] += time.perf_counter() - t0
        return items

    def prepare(self, plan: BenchmarkPlan, store: ResultStore, items: list[Case | CaseError]) -> _Job:
        """Skip what is final among this shard's loaded cases and, before any worker would be forked, emit
        every case whose rows all come from the score memo; the rest is left in groups (one per clip)."""
        groups: dict[str, list[Case | CaseError]] = {}
        for it in items:
            groups.setdefault(it.case_id, []).append(it)
        todo = [g for g in groups.values()
                if any(not store.is_final((plan.name, it.model, it.case_id, m)) for it in g for m in plan.metrics)]
        bar = progress_bar(len(items), plan.name, enabled=self.cfg["progress"],
                           already=len(items) - sum(len(g) for g in todo))
        self._fingerprint(todo)

        def emit(item: Case | CaseError, rows: list[ScoreRow], done: bool = True) -> None:
            for row in rows:
                if not store.is_final(row.row_key):  # the parent alone decides a row is done
                    try:
                        kept = store.append(row, flush=False)
                    except OSError as e:
                        raise ResultsNotWritable(
                            f"cannot append results to {store.path}: {e.strerror or e}; the rows written so far "
                            f"are kept (a torn last line is repaired) and rerunning the same command resumes") from None
                    if "_memo_key" in row.__dict__:  # taken from the score memo: a later job may take it as written
                        remember(row.__dict__["_memo_key"], kept)
            try:
                store.flush()  # a case's rows reach the OS together
            except OSError as e:
                raise ResultsNotWritable(f"cannot append results to {store.path}: {e.strerror or e}; the rows "
                                         f"written so far are kept and rerunning the same command resumes") from None
            if done:  # else the memo pass emitted part of the case; a worker emits the rest
                bar.update(1)

        workers = min(self.workers(), len(todo))
        if workers > 1 or (self.cfg["devices"] and todo):
            # cases whose every row is in the score memo (a warm rerun, a re-score job of a sweep) are taken
            # here, without forking; only cases that need a measurement or a score go to the workers (the
            # parent never runs a metric itself before forking, so forking stays safe)
            todo = [g for g in ([it for it in group if not self._from_memo(plan, it, store.is_final, emit)]
                                for group in todo) if g]
        scores_only = all(self.pipeline.measured(plan, it, store.is_final) for g in todo for it in g)
        return _Job(plan, todo, store.is_final, emit, bar, scores_only)

    def execute(self, job: _Job, here: bool) -> None:
        """Score the job's groups: in this process when ``here`` (or one worker), else in forked workers."""
        plan, todo, is_final = job.plan, job.todo, job.is_final

        def dead(item: Case | CaseError, reason: str) -> list[ScoreRow]:
            return self.pipeline.failure_rows(plan, item, "worker", reason, is_final)

        workers = 1 if here else min(self.workers(), len(todo))
        devices = self.cfg["devices"] if not here else None
        uses = video_uses(todo)

        def work(item: Case | CaseError) -> list[ScoreRow]:
            try:
                return self.pipeline.rows(plan, item, is_final)
            finally:  # memory follows the case: a video no later case of this run reads is dropped now
                done_with(item, uses)

        emit = job.emit
        if self.foresee and not here:  # a job that measures: what a later re-score job takes is built now
            def emit(item: Case | CaseError, rows: list[ScoreRow]) -> None:
                job.emit(item, rows)
                self._foresee(plan, item)

        if workers > 1 and not job.scores_only:
            self._preload(plan)
        if devices and todo:
            check_fork_safe_for_devices()
        make_executor(workers, self._use_device if devices and todo else None).run(
            todo, work, emit, dead, self.pipeline)
        job.bar.close()

    def _preload(self, plan: BenchmarkPlan) -> None:
        """Import what the plan's metrics and aligners declare they import (``imports``) here, before the
        workers fork: one import they share instead of one in each (torch costs ~3 CPU-seconds a process)."""
        t0 = time.perf_counter()
        names: set[str] = set()
        for name, metric in plan.metrics.items():
            if name in plan.skipped:
                continue
            names.update(metric.imports)
            aligner = plan.aligner_for(metric)
            if aligner:
                names.update(getattr(self.host.aligner(aligner), "imports", ()))
        for module in sorted(names - set(sys.modules)):
            try:
                importlib.import_module(module)
            except Exception as e:  # noqa: BLE001  (the metric then fails in its own rows, saying why)
                log.debug("preloading %s failed: %s", module, e)
        self.timing["preload"] += time.perf_counter() - t0

    def _foresee(self, plan: BenchmarkPlan, item: Case | CaseError) -> None:
        """Remember, as written, the rows a later job of this process would rebuild for ``item`` from the
        score memo (the first re-score job after a cold one then takes them as a sweep's later jobs do)."""
        for row in self.pipeline.foreseen_rows(plan, item):
            remember(row.__dict__["_memo_key"], as_written(row))

    def _use_device(self, slot: int) -> None:
        """In worker ``slot`` (just forked): see only GPU ``devices[slot]``, which CUDA then calls ``cuda:0``."""
        dev = self.cfg["devices"][slot]
        os.environ["CUDA_VISIBLE_DEVICES"] = str(dev)
        if str(self.cfg["device"]).startswith("cuda"):
            self.hub.device = self.pipeline.device = "cuda:0"
        log.debug("worker %d (pid %d): CUDA_VISIBLE_DEVICES=%s", slot, os.getpid(), dev)

    def _from_memo(self, plan: BenchmarkPlan, item: Case | CaseError, is_final: Any, emit: Any) -> bool:
        """Emit the case's rows that come from the score memo; False when some are left (a worker's work)."""
        rows, complete = self.pipeline.memo_rows(plan, item, is_final)
        emit(item, rows, done=complete)
        return complete

    def _fingerprint(self, groups: list[list[Case | CaseError]]) -> None:
        """Hash every input here, once: forked workers' digest memos die with them."""
        t0 = time.perf_counter()
        for group in groups:
            for it in group:
                if isinstance(it, Case):
                    try:
                        it.fingerprint()
                    except (OSError, VideoError):
                        pass  # the case fails later, in its own row, with the reason
        self.timing["fingerprint"] += time.perf_counter() - t0

    def workers(self) -> int:
        """``workers``; 0 = auto: one process per core (max 8) for CPU runs on classical/sidecar backends only
        (forking after a reference model or CUDA is initialised is unsafe, so those run in one process)."""
        if self.cfg["devices"]:  # one worker per listed GPU
            return len(self.cfg["devices"])
        n = int(self.cfg["workers"])
        if n > 0:
            return n
        if not str(self.cfg["device"]).startswith("cpu"):
            return 1
        kinds = {self.hub.specs[name].kind for name in self.hub.selection.values() if name in self.hub.specs}
        return 1 if "reference" in kinds else max(1, min(os.cpu_count() or 1, 8))


@dataclass
class _Job:
    """One benchmark's cases left to score after the memo pass, and how their rows are recorded."""

    plan: BenchmarkPlan
    todo: list[list[Case | CaseError]]
    is_final: Any
    emit: Any
    bar: Any
    scores_only: bool  # every row left needs a score only (alignment memoised, measurement cached)


def video_uses(groups: list[list[Case | CaseError]]) -> dict[int, int]:
    """How many of these cases read each video (generated or reference), by object identity."""
    uses: dict[int, int] = {}
    for group in groups:
        for it in group:
            for v in _videos(it):
                uses[id(v)] = uses.get(id(v), 0) + 1
    return uses


def done_with(item: Case | CaseError, uses: dict[int, int]) -> None:
    """``item`` is scored: release each of its videos that no case left in ``uses`` reads.

    In a forked worker the counts cover the whole run, so a video shared with a clip another worker scores
    is kept until that worker's pool budget drops it; clips group a reference's cases, so that is rare.
    """
    for v in _videos(item):
        n = uses.get(id(v), 0) - 1
        uses[id(v)] = n
        if n <= 0:
            v.release()


def _videos(item: Case | CaseError) -> list[Any]:
    if not isinstance(item, Case):
        return []
    return [v for v in (item.video, item.reference) if v is not None]


def check_fork_safe_for_devices() -> None:
    """``devices`` forks one worker per GPU: CUDA must not be initialised in the parent (a forked child
    cannot use it), so the run stops with the reason instead of hanging in the workers."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise ConfigTypeError("devices: CUDA was already initialised in the launching process, so the per-GPU "
                              "workers cannot be forked; start a fresh `worldrecall run devices=[…]`")


def load_rows(results_dir: Path) -> list[ScoreRow]:
    """Every row under a results folder (all shards)."""
    return read_rows(Path(results_dir).glob("rows-shard-*.jsonl"))
