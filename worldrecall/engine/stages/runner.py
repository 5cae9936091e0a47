"""The runner, top-down: build the suite -> plan -> per-case pipeline in an executor -> aggregate -> result.

Each stage is its own module (``plan``, ``pipeline``, ``executor``, ``aggregate``); this one only wires them
for one resolved config. Rows are appended as cases finish (by this process alone), so a rerun of the same
config resumes; aggregation happens after all rows are written, and ``max_failure_rate`` decides the exit
code last (see :func:`worldrecall.engine.stages.aggregate.outcome`).
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from worldrecall.core.components import ConfigTypeError
from worldrecall.core.data import Case, CaseError, ScoreRow
from worldrecall.core.digests import load_digest_memo, save_digest_memo
from worldrecall.core.video import VideoPool
from worldrecall.engine.cache import VideoFacts, code_digest, store_for
from worldrecall.engine.cache.blobs import BlobStore
from worldrecall.engine.cache.identity import IdentifiedJudgeHub, IdentifiedModelHub
from worldrecall.engine.cache.keys import refresh_code_digests
from worldrecall.engine.stages.absence import all_null_values, unmeasured_headlines
from worldrecall.engine.stages.aggregate import aggregate_rows
from worldrecall.engine.stages.config import ResolvedConfig, resolve_config
from worldrecall.engine.stages.executor import make_executor
from worldrecall.engine.stages.name_checks import check_aggregator_paths, check_names, check_selection
from worldrecall.engine.stages.pipeline import CasePipeline, KeyParts
from worldrecall.engine.stages.plan import (
    BenchmarkPlan,
    enable_metrics,
    load_cases,
    plan_benchmarks,
    preflight,
    run_key,
    weight_free_fallback,
)
from worldrecall.engine.stages.progress import progress_bar
from worldrecall.engine.stages.readiness import readiness, run_lines
from worldrecall.engine.stages.result import RunResult, build_result
from worldrecall.engine.stages.row_digests import LineDigests, row_digests
from worldrecall.engine.stages.row_store import EarlierRows, ResultStore, read_rows, rows_files
from worldrecall.registry.host import PluginHost

log = logging.getLogger(__name__)


class ResultsNotWritable(RuntimeError):
    """Rows cannot be appended (disk full, read-only folder): the run stops with this one-line message."""


class Runner:
    """Runs every enabled benchmark of a config (a plain dict; missing keys take the schema's defaults)."""

    def __init__(self, cfg: Mapping[str, Any], host: PluginHost,
                 outputs_due: Callable[[], None] | None = None, outputs: Any = None,
                 before_aggregate: Callable[[RunResult], None] | None = None):
        """``outputs_due``: called once it is known that the job writes outputs (MLflow's process starts then):
        as it begins, unless its outputs may turn out unchanged; then once the outputs check found a change.
        ``outputs``: given by a job that records its outputs' key (``engine/sinks/unchanged.py``'s
        :class:`OutputsCheck`): the result then carries it, and is marked ``unchanged`` (not aggregated) when the
        outputs on disk match it. ``before_aggregate(result)``: called with the result (its rows final, no tables
        yet) before the aggregation of a job that writes outputs: what needs the rows only starts beside it."""
        self.outputs_due = outputs_due
        self.outputs = outputs
        self.before_aggregate = before_aggregate
        cfg = resolve_config(cfg)  # a no-op for the job's config, which is resolved already
        self.results_dir = Path(cfg["output_root"]) / "results" / run_key(cfg)  # the config as written
        self.cfg = cfg = ResolvedConfig(enable_metrics(cfg, host))  # metrics=[name, …] joins each to its benchmark
        self.host = host
        cache_root = Path(cfg["cache_dir"])
        models_cfg = dict(cfg["models"])
        options = models_cfg.pop("options", None) or {}
        backend_set = models_cfg.pop("set", None) or ""
        refresh_code_digests()  # a module reloaded since the last run in this process is hashed again
        self.hub = IdentifiedModelHub(host.models, models_cfg, options, device=cfg["device"], roles=host.roles,
                            backend_set=backend_set)
        self.cache_mode = str(cfg["cache"]["mode"])
        # judges keep their own answers: with the cache refreshed or off they are asked again (and keep none)
        self.judges = IdentifiedJudgeHub(host.judges, cfg["judge_options"],
                                         cache_dir=cache_root / "judge_answers" if self.cache_mode == "use" else None)
        self.store = store_for(cfg)
        self.hub.store = self.store  # model and classical backends' outputs: computed once per input
        self.pool = VideoPool(cfg["video"]["max_bytes"], VideoFacts(self.store), max_pixels=cfg["video"]["max_pixels"],
                              max_frames=cfg["video"]["max_frames"])
        self.pipeline = CasePipeline(host, self.hub, self.judges, self.pool, cache_root, artifacts=cfg["artifacts"],
                                     device=cfg["device"], batch_size=cfg["batch_size"], store=self.store)
        self.digest_memo = cache_root / "file_digests.json"
        self.shard_count, self.shard_index = cfg["shard"]["count"], cfg["shard"]["index"]
        self.timing = self.pipeline.counters.timing
        self.appended: set[tuple[str, str, str, str]] = set()  # rows this run wrote (the others were kept)

    def save_digest_memo(self) -> None:
        """Keep the file digests and facts this job looked up for the next run on this output root (not with
        the cache off: it writes nothing under ``cache_dir``)."""
        if self.cache_mode != "off":
            save_digest_memo(self.digest_memo)

    def run(self) -> RunResult:
        started_at, t_start = time.time(), time.perf_counter()
        deferred = self._may_be_unchanged()  # decided once: the check below may remove the record
        if self.outputs_due is not None and not deferred:
            self.outputs_due()
        plans, items = self.plan_and_load()
        # said once, before evaluating: metrics skipped, values no backend can give (LPIPS without one …), and
        # metrics that cannot run on some cases for an input those cases lack (`worldrecall check` in full)
        absent = [m for p in plans for k, m in p.absent.items() if k not in p.skipped]
        for msg in sorted({*(m for p in plans for m in p.skipped.values()), *absent}):
            log.warning(msg)
        for msg in run_lines(readiness(plans, items, getattr(self.host, "benchmarks", {}))):
            log.warning(msg)
        rows_file = ResultStore(self.results_dir, self.shard_index, self.shard_count,
                                blobs=BlobStore(Path(self.cfg["output_root"]) / "blobs"))
        before = dict(rows_file.done)  # what `cache explain` compares this run's keys with
        # a re-score's or a sweep job's new folder takes the rows another folder has under the same keys
        earlier = EarlierRows(self.results_dir, self.shard_index, self.shard_count) if self.cache_mode == "use" \
            else None
        try:
            jobs = [self.prepare(plan, rows_file, items[plan.name], earlier) for plan in plans]
            # when every row left needs a score only (a sweep's re-score job), this process scores them: forking
            # workers costs more than the scoring. Decided for the whole job, so no worker of this job is forked
            # after this process ran a metric's score; scoring here runs as a worker would (one thread for torch,
            # OpenCV and OpenMP: the same numbers)
            here = all(j.scores_only for j in jobs)
            for job in jobs:
                self.execute(job, here)
        finally:
            try:
                rows_file.close()
            except OSError:
                pass  # the write error itself is what the run reports
        rows = rows_file.all_rows()
        self.log_keys(rows, before, earlier)
        for msg in all_null_values(rows, self.host.metrics, [k for p in plans for k in p.absent]):
            log.warning(msg)
        block = unmeasured_headlines(rows, self.host.benchmarks)  # once: which headlines need what
        if block:
            log.warning(block)
        t0 = time.perf_counter()
        # once: the aggregation's keys, the outputs' key and the report's read them
        known = self.line_digests()
        digests = row_digests(rows, rows_file.lines_of(rows), known)
        if known is not None:
            known.save()
        per_benchmark = {p.name: p.aggregators for p in plans}
        backends = {r: self.hub.selection.get(r, "") for p in plans for m in p.metrics.values() for r in m.models}
        result = build_result(self.results_dir, rows, {}, self.cfg, self.host.plugins.values(), None,
                              backends, started_at, digests, self.planned_identities(plans))
        if self.outputs is not None:
            result = self.check_outputs(result, per_benchmark)
            if result.unchanged is not None:  # nothing to aggregate: no output would change
                self.timing["aggregate"] += time.perf_counter() - t0
                self.timing["total"] = time.perf_counter() - t_start
                return replace(result, **self._totals())
            if self.outputs_due is not None and deferred:  # outputs to write after all: now
                self.outputs_due()
        if self.before_aggregate is not None:
            self.before_aggregate(result)
        part_keys: dict[str, dict[str, str]] = {}
        tables = aggregate_rows(self.host, rows, self.cfg, per_benchmark, store=self.store, digests=digests,
                                part_keys=part_keys)
        self.timing["aggregate"] += time.perf_counter() - t0
        if self.outputs is None:  # a job saves it once, after its outputs (their keys read digests too)
            self.save_digest_memo()  # after the aggregation: its keys read code digests too
        self.timing["total"] = time.perf_counter() - t_start
        return replace(result, tables=dict(tables), table_parts=part_keys, **self._totals())

    def line_digests(self) -> LineDigests | None:
        """The row digests earlier jobs of this output root computed, by line (None with the cache off or
        refreshed: every digest is computed again)."""
        if self.cache_mode != "use":
            return None
        code = hashlib.sha256(" ".join(code_digest(m) for m in ("worldrecall.engine.stages.row_digests",
                                                               "worldrecall.engine.stages.row_store")).encode())
        name = "row_digests.json" if self.shard_count <= 1 else \
            f"row_digests-shard-{self.shard_index:04d}-of-{self.shard_count:04d}.json"
        return LineDigests(Path(self.cfg["cache_dir"]) / name, code.hexdigest())

    def _may_be_unchanged(self) -> bool:
        """Whether this job's outputs may turn out unchanged (it records them and its results folder has a
        record): then ``outputs_due`` (the MLflow process's start) waits for the outputs check; else it is called
        as the job begins (a re-score's new results folder, a sweep's job, a cold run)."""
        return self.outputs is not None and self.outputs.has_record(self.results_dir)

    def _totals(self) -> dict[str, Any]:
        totals = self.pipeline.totals()
        return {"timing": dict(totals.get("timing", {})),
                "decode_counts": {k: int(v) for k, v in totals.get("decodes", {}).items()},
                "cache_stats": {k: int(v) for k, v in totals.get("cache", {}).items()},
                "model_seconds": dict(totals.get("model_seconds", {}))}

    def planned_identities(self, plans: list[BenchmarkPlan]) -> dict[str, Any]:
        """The identity of every backend and judge the planned metrics receive (what their keys fold in),
        whether or not this job computed anything with them: a warm rerun states what a cold run states."""
        from worldrecall.engine.cache.identity import received_identity

        for plan in plans:
            for name, metric in plan.metrics.items():
                if name in plan.skipped:
                    continue
                try:
                    received_identity(metric, self.hub, self.judges)
                except Exception as e:  # noqa: BLE001  (a role without a backend: its metric is skipped already)
                    log.debug("identity of what %s receives: %s", name, e)
        return {"backends": dict(sorted(self.hub.__dict__.get("_identities", {}).items())),
                "judges": dict(sorted(self.judges.__dict__.get("_identities", {}).items()))}

    def check_outputs(self, result: RunResult, per_benchmark: Mapping[str, list[str]]) -> RunResult:
        """The result with its outputs' key, marked ``unchanged`` when the outputs on disk match it: asked of the
        job's ``outputs`` check (``engine/sinks/unchanged.py``'s :class:`OutputsCheck`; stages import no sink)."""
        scopes = {"*": [*(self.cfg["aggregators"] or []), *(self.cfg["suite"].get("aggregators") or [])],
                  **per_benchmark}
        return self.outputs.check(result, self.host, scopes)

    def plan_and_load(self) -> tuple[list[BenchmarkPlan], dict[str, list[Case | CaseError]]]:
        """Names checked, the suite built, every benchmark planned and its cases loaded (with the backends'
        preflight): everything a run knows before it aligns or measures anything (``worldrecall check`` stops
        here)."""
        check_names(self.cfg, self.host)  # a typo ends the run here, before the suite is built
        self.build_suite()
        check_aggregator_paths(self.cfg, self.host)  # after the build: the suite writes some of those files
        if self.cache_mode != "off":
            load_digest_memo(self.digest_memo)  # before loading: loaders read file facts through it
        plans = plan_benchmarks(self.cfg, self.host, self.hub, self.judges, self.pool)
        items = self.load(plans)
        check_selection(self.cfg, sum(map(len, items.values())), {it.model for v in items.values() for it in v},
                        {m for p in plans for m in p.models})
        return plans, items

    def log_keys(self, rows: list[ScoreRow], before: Mapping[tuple[str, str, str, str], ScoreRow],
                 earlier: EarlierRows | None = None) -> None:
        """Record each row's keys and how this run obtained it, for ``worldrecall cache explain`` (a log
        that cannot be written costs the explanation, never the run). ``earlier``: the newest other folder's
        rows, when this run read them (the log's previous rows, not read again from that run's log)."""
        from worldrecall.engine.cache.explain import write_log

        newest = (earlier.dir.name, earlier.rows) if earlier is not None and earlier.dir is not None else None
        try:
            write_log(self.results_dir, self.shard_index, self.shard_count, rows, self.appended, before,
                      self.cache_mode, newest)
        except OSError as e:
            log.warning("could not record the cache log for `worldrecall cache explain`: %s", e)

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
            items[plan.name] = load_cases(plan, self.shard_index, self.shard_count)
        # said once, before evaluating: a defaulted sidecar backend no video can feed gives way to a weight-free one
        for msg in weight_free_fallback(plans, items, self.hub):
            log.warning(msg)
        for plan in plans:
            preflight(plan, items[plan.name], self.hub, self.judges)
        self.timing["load"] += time.perf_counter() - t0
        return items

    def prepare(self, plan: BenchmarkPlan, rows_file: ResultStore, items: list[Case | CaseError],
                earlier: EarlierRows | None = None) -> _Job:
        """Settle every case here (:meth:`CasePipeline.settle`: rows unchanged on disk are kept, rows ``earlier``
        holds under the same key are adopted, rows whose score is cached are appended) and leave the rest, in
        groups of a clip's cases, to the executor."""
        bar = progress_bar(len(items), plan.name, enabled=self.cfg["progress"])

        def emit(item: Case | CaseError, rows: list[ScoreRow], done: bool = True) -> None:
            for row in rows:
                self.appended.add(row.row_key)
                try:
                    if earlier is not None and earlier.holds(row):
                        rows_file.adopt(row, earlier, flush=False)
                    else:
                        rows_file.append(row, flush=False)
                except OSError as e:
                    raise ResultsNotWritable(
                        f"cannot append results to {rows_file.path}: {e.strerror or e}; the rows written so far "
                        f"are kept (a torn last line is repaired) and rerunning the same command resumes") from None
            try:
                rows_file.flush()  # a case's rows reach the OS together
            except OSError as e:
                raise ResultsNotWritable(f"cannot append results to {rows_file.path}: {e.strerror or e}; the rows "
                                         f"written so far are kept and rerunning the same command resumes") from None
            if done:
                bar.update(1)

        groups: dict[str, list[Case | CaseError]] = {}
        left: dict[int, dict[str, str]] = {}  # the metrics left of each case, with their measurement keys
        parts = KeyParts()  # the key parts every case of the plan shares, encoded once
        for it in items:
            if isinstance(it, CaseError):
                names = dict.fromkeys(plan.metrics, "")  # its inputs cannot be read: no earlier row stands
            else:
                # refresh / off: no row on disk stands, every row is computed again
                rows, names = self.pipeline.settle(plan, it, rows_file.done if self.cache_mode == "use" else {}, parts,
                                                   earlier)
                emit(it, rows, done=not names)
            if names:
                left[id(it)] = names
                groups.setdefault(it.case_id, []).append(it)
        todo = list(groups.values())
        scores_only = all(isinstance(it, CaseError) or self.pipeline.measured(left[id(it)])
                          for g in todo for it in g)
        return _Job(plan, todo, left, emit, bar, scores_only)

    def execute(self, job: _Job, here: bool) -> None:
        """Score the job's groups: in this process when ``here`` (or one worker), else in forked workers."""
        plan, todo = job.plan, job.todo

        def dead(item: Case | CaseError, reason: str) -> list[ScoreRow]:
            return self.pipeline.failure_rows(plan, item, "worker", reason, job.left[id(item)])

        workers = 1 if here else min(self.workers(), len(todo))
        devices = self.cfg["devices"] if not here else None
        uses = video_uses(todo)

        def work(item: Case | CaseError) -> list[ScoreRow]:
            try:
                return self.pipeline.rows(plan, item, job.left[id(item)])
            finally:  # memory follows the case: a video no later case of this run reads is dropped now
                done_with(item, uses)

        if workers > 1 and not job.scores_only:
            self._preload(plan)
        if devices and todo:
            check_fork_safe_for_devices()
        make_executor(workers, self._use_device if devices and todo else None).run(
            todo, work, job.emit, dead, self.pipeline)
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

    def _use_device(self, slot: int) -> None:
        """In worker ``slot`` (just forked): see only GPU ``devices[slot]``, which CUDA then calls ``cuda:0``."""
        dev = self.cfg["devices"][slot]
        os.environ["CUDA_VISIBLE_DEVICES"] = str(dev)
        if str(self.cfg["device"]).startswith("cuda"):
            self.hub.device = self.pipeline.device = "cuda:0"
        log.debug("worker %d (pid %d): CUDA_VISIBLE_DEVICES=%s", slot, os.getpid(), dev)

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
    """One benchmark's cases left to score once settled, the metrics left of each, and how rows are recorded."""

    plan: BenchmarkPlan
    todo: list[list[Case | CaseError]]
    left: dict[int, dict[str, str]]  # id(case) -> the metrics a worker must score, with their measurement keys
    emit: Any
    bar: Any
    scores_only: bool  # every row left needs a score only (alignment and measurement cached)


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
    return read_rows(rows_files(results_dir))
