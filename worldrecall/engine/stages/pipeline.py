"""Stage 2 — the per-case pipeline: align -> measure (cached) -> score (pure, memoised) -> rows.

:meth:`CasePipeline.rows` turns one case into one row per metric. Every failure is caught here and becomes
that row's status and one-line reason; nothing a case does can end the run. The pipeline holds no global
state: its caches, hubs and counters are attributes, so a forked worker carries its own copy.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldrecall.core.cache import ScoreCache, cache_key
from worldrecall.core.components import MeasureContext, Metric
from worldrecall.core.data import Alignment, Case, CaseError, CaseFailure, ScoreRow, one_line
from worldrecall.core.digests import file_state
from worldrecall.core.judges import JudgeError, JudgeHub
from worldrecall.core.models import BackendUnavailable, ModelHub
from worldrecall.core.results import json_default
from worldrecall.core.video import VideoError, VideoPool
from worldrecall.engine.stages.bounded import remember
from worldrecall.engine.stages.measurement_memo import ProcessMeasurementCache
from worldrecall.engine.stages.plan import BenchmarkPlan
from worldrecall.engine.stages.row_memo import context, memo_key, recall
from worldrecall.engine.stages.score_memo import ProcessScoreCache
from worldrecall.registry.host import PluginHost

log = logging.getLogger(__name__)

IsFinal = Callable[[tuple[str, str, str, str]], bool]


@dataclass
class Counters:
    """What a pipeline did: seconds per stage, cache hits, decodes and model time (merged across workers)."""

    timing: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    cache: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    decodes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    model_seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def to_json(self) -> dict[str, dict[str, float]]:
        return {k: dict(getattr(self, k)) for k in ("timing", "cache", "decodes", "model_seconds")}

    def merge(self, other: Mapping[str, Mapping[str, float]]) -> None:
        for part, values in other.items():
            target = getattr(self, part)
            for k, v in values.items():
                target[k] += v


class CasePipeline:
    """Align, measure and score one case with every metric of a plan."""

    def __init__(self, host: PluginHost, hub: ModelHub, judges: JudgeHub, pool: VideoPool, cache_root: Path,
                 *, artifacts: bool, device: str, batch_size: int):
        self.host, self.hub, self.judges, self.pool = host, hub, judges, pool
        self.measurements = ProcessMeasurementCache(cache_root / "measurements")
        self.scores = ProcessScoreCache(cache_root / "scores", defer=True)  # its files: after the outputs
        self.alignments = ProcessScoreCache(cache_root / "alignments")  # same pure-function memo, own counters
        # notes a reader added to case.warnings while a metric measured (e.g. a corrupt depth frame read as
        # NaN), per measurement key: a cached measurement brings its notes back onto the rows
        self.input_notes = ScoreCache(cache_root / "input_notes")
        self.artifacts_dir = cache_root / "artifacts"
        # (id(alignment), metric, id(case)) -> (alignment, case, (measurement key, score key)), for this job (a
        # pipeline lives for one job): the memo pass, the scores-only check and the scoring all ask
        self._keys: dict[tuple[int, str, int], tuple[Alignment, Case, tuple[str, str]]] = {}
        self._fixed: dict[int, tuple[Metric, tuple[str, str, str]]] = {}  # id(metric) -> its case-free key text
        self.write_artifacts, self.device, self.batch_size = artifacts, device, batch_size
        self.counters = Counters()
        self.merged = Counters()  # what forked workers reported

    # -- counters -------------------------------------------------------------------------------
    def reset_counters(self) -> None:
        """Start counting from zero (a forked worker reports only its own work)."""
        self.counters = Counters()
        self.pool.decode_counts.clear()
        self.hub.forward_seconds.clear()
        self.measurements.hits = self.measurements.misses = self.measurements.corrupt = 0
        self.scores.hits = self.alignments.hits = 0

    def snapshot(self) -> dict[str, dict[str, float]]:
        """Counters including the caches', decodes and model time accumulated since the last reset."""
        out = self.counters.to_json()
        out["cache"].update({"hits": self.measurements.hits, "misses": self.measurements.misses,
                             "corrupt": self.measurements.corrupt, "score_hits": self.scores.hits,
                             "alignment_hits": self.alignments.hits})
        out["decodes"] = dict(self.pool.decode_counts)
        out["model_seconds"] = dict(self.hub.forward_seconds)
        return out

    def merge(self, other: Mapping[str, Mapping[str, float]]) -> None:
        """Add a worker's counters (its :meth:`snapshot`) to this run's totals."""
        self.merged.merge(other)

    def learnt(self) -> dict[str, list[tuple[str, str, str]]]:
        """The score and alignment memo entries this (worker) process wrote since the last call."""
        return {"scores": self.scores.take_recent(), "alignments": self.alignments.take_recent()}

    def learn(self, entries: Mapping[str, Any]) -> None:
        """Keep in this process the memo entries a forked worker wrote (:meth:`learnt`): the next job (a
        sweep's re-score job after its cold one) finds them in memory instead of reading and checking each
        file again."""
        self.scores.learn(entries.get("scores") or ())
        self.alignments.learn(entries.get("alignments") or ())

    def totals(self) -> dict[str, dict[str, float]]:
        """This process's counters plus every merged worker's."""
        t = Counters()
        t.merge(self.snapshot())
        t.merge(self.merged.to_json())
        return t.to_json()

    def _tick(self, stage: str, t0: float) -> None:
        self.counters.timing[stage] += time.perf_counter() - t0

    # -- rows -----------------------------------------------------------------------------------
    def failure_rows(self, plan: BenchmarkPlan, item: Case | CaseError, stage: str, reason: str,
                     is_final: IsFinal) -> list[ScoreRow]:
        """One failed row per metric not already final, with the same one-line reason."""
        return [ScoreRow(plan.name, item.model, item.case_id, name, {}, "failed", f"{stage}: {one_line(reason)}",
                         dict(item.strata), metric.version, warnings=list(item.warnings))
                for name, metric in plan.metrics.items() if not is_final((plan.name, item.model, item.case_id, name))]

    def rows(self, plan: BenchmarkPlan, item: Case | CaseError, is_final: IsFinal) -> list[ScoreRow]:
        """The rows of one case (every metric not already final), in metric order."""
        return self._rows(plan, item, is_final, memo_only=False)[0]

    def memo_rows(self, plan: BenchmarkPlan, item: Case | CaseError,
                  is_final: IsFinal) -> tuple[list[ScoreRow], bool]:
        """The final rows of one case that come from the score memo — no metric runs, no video is read — and
        whether they are every row left to do (else the rest is a worker's: a re-score job's one metric)."""
        rows, complete = self._rows(plan, item, is_final, memo_only=True)
        return (rows, True) if complete else ([r for r in rows if r.status in ("ok", "skipped")], False)

    def foreseen_rows(self, plan: BenchmarkPlan, item: Case | CaseError) -> list[ScoreRow]:
        """The rows a later job of this process would take from the score memo for this case, built now by
        that job's own memo pass (a cold job's case, once its workers' memo entries are here): each carries
        its row-memo key. Counted as ``foresee`` time, not as alignment or measurement, and not as memo hits."""
        t0 = time.perf_counter()
        timing, hits = dict(self.counters.timing), (self.scores.hits, self.alignments.hits)
        try:
            rows, _ = self._rows(plan, item, lambda key: False, memo_only=True)
        finally:
            self.counters.timing.clear()
            self.counters.timing.update(timing)
            self.scores.hits, self.alignments.hits = hits
            self._tick("foresee", t0)
        return [r for r in rows if "_memo_key" in r.__dict__]

    def _rows(self, plan: BenchmarkPlan, item: Case | CaseError, is_final: IsFinal,
              memo_only: bool) -> tuple[list[ScoreRow], bool]:
        if isinstance(item, CaseError):
            return self.failure_rows(plan, item, item.stage, item.reason, is_final), True
        case = item
        out: list[ScoreRow] = []
        complete = True
        case_context = context(case.strata, video_paths(case))
        alignments: dict[str, Alignment | CaseFailure | None] = {}
        for name, metric in plan.metrics.items():
            if is_final((plan.name, case.model, case.case_id, name)):
                continue
            row = ScoreRow(plan.name, case.model, case.case_id, name, {}, strata=dict(case.strata),
                           metric_version=metric.version,
                           backend=self.hub.backend_names(metric.models + metric.optional_models),
                           warnings=list(case.warnings))
            if name in plan.skipped:
                row.status, row.reason = "skipped", plan.skipped[name]
                out.append(row)
                continue
            aligner = plan.aligner_for(metric)
            if aligner not in alignments:
                alignments[aligner] = self.align(aligner, case, plan.params_for(aligner), memo_only=memo_only)
            alignment = alignments[aligner]
            if alignment is None:  # memo_only and not aligned before: that needs the video, a worker's job
                complete = False
                continue
            if isinstance(alignment, CaseFailure):
                row.status, row.reason = "failed", f"align: {alignment}"
            else:
                row.warnings.extend(alignment.info.get("warnings", []))
                absent = plan.absent.get(name)
                known = self._recalled(metric, case, alignment, row, case_context, absent)
                if known is not None:  # appended by an earlier job of this process, the memo entry unchanged
                    out.append(known)
                    continue
                before = tuple(row.warnings)
                if not self.measure_and_score(metric, case, alignment, row, memo_only=memo_only):
                    complete = False  # memo_only: this metric would run
                    continue
                if row.status == "ok" and absent is not None:  # systematically null values: said on the row
                    row.warnings.append(absent)
                row = _as_written(row, case_context, absent, before)
            out.append(row)
        return out, complete

    def align(self, name: str, case: Case, params: Mapping[str, Any],
              memo_only: bool = False) -> Alignment | CaseFailure | None:
        """The case's alignment (memoised: a pure function of its inputs and params), or why there is none.

        ``memo_only``: None when the alignment is not memoised (computing it may decode the video).
        """
        t0 = time.perf_counter()
        try:
            if not name:
                return Alignment()
            aligner = self.host.aligner(name)
            merged = {**aligner.defaults, **params}
            key = cache_key({"aligner": name, "case": case.fingerprint(), "params": merged})
            memo_file = self.alignments.file_of(name, key)
            known = _ALIGNED.get(memo_file)
            if known is not None and known[0] == file_state(memo_file):
                self.alignments.hits += 1
                return known[1]  # read earlier in this process, its memo file unchanged: the same object
            memo = self.alignments.get(name, key)
            if memo is not None:  # only alignments that passed the checks below are memoised
                alignment = Alignment.from_json(memo)
                _remember_alignment(memo_file, alignment)
                return alignment
            if memo_only:
                return None
            n = case.video.num_frames if case.video is not None else None
            short = None
            if n is not None and n < aligner.min_frames:
                short = (f"{case.video.path}: {n} frame(s); the {name} aligner needs at least "
                         f"{aligner.min_frames}")
                if not merged.get("official_parity"):
                    return CaseFailure(short)
            alignment = aligner.align(case, merged)
            if short:  # official parity scores it as the official code would; the row says why to distrust it
                alignment.info.setdefault("warnings", []).append(f"{short}; scored anyway (official_parity)")
            self.alignments.put(name, key, json.loads(json.dumps(alignment.to_json(), default=json_default)))
            return alignment
        except (CaseFailure, VideoError) as e:
            return CaseFailure(one_line(e))
        except Exception as e:
            return CaseFailure(f"{type(e).__name__}: {one_line(e)}")
        finally:
            self._tick("align", t0)

    def measure_and_score(self, metric: Metric, case: Case, alignment: Alignment, row: ScoreRow,
                          memo_only: bool = False) -> bool:
        """Fill ``row`` with the metric's values (or its failure/skip); never raises.

        Returns False only for ``memo_only`` when the score is not in the memo (nothing was run).
        """
        stage = "measure"
        before = list(case.warnings)  # readers append their notes here while the metric measures
        try:
            t0 = time.perf_counter()
            key, score_key = self.keys(metric, case, alignment)
            memo = self.scores.get(metric.name, score_key)
            if memo is not None:  # pure score of the same inputs: reuse (no measurement load at all)
                row.__dict__["_score_memo"] = (score_key, self.scores.text_of(metric.name, score_key))
                row.values = memo["values"]
                row.info = {"alignment": alignment.to_json(), "cache_hit": True, "score_cache_hit": True}
                row.info["videos"] = video_paths(case)  # the HTML report's frame thumbnails
                if memo.get("artifacts"):
                    row.info["artifacts"] = memo["artifacts"]
                if memo.get("verdict"):
                    row.info["verdict"] = memo["verdict"]
                row.warnings.extend(w for w in memo.get("warnings", []) if w not in row.warnings)
                self._tick("measure", t0)
                return True
            if memo_only:
                return False
            ctx = MeasureContext(models=self.hub, judges=self.judges, artifacts_dir=self.artifacts_dir,
                                 device=self.device, batch_size=self.batch_size)
            measurement, hit = self.measurements.get_or_compute(metric.name, key,
                                                                lambda: metric.measure(case, alignment, ctx))
            notes = self._input_notes(metric, key, case, before, hit)
            row.warnings.extend(w for w in notes if w not in row.warnings)
            self._tick("measure", t0)
            stage, t0 = "score", time.perf_counter()
            values = metric.score(measurement, metric.thresholds)
            undeclared = metric.undeclared(values)
            if undeclared:  # a value without declared direction and range is never shown or ranked
                raise CaseFailure(f"{metric.name} emitted undeclared value(s) {', '.join(map(repr, undeclared))} "
                                  f"(declare each in the metric's `values`)")
            row.values = {k: _num(v) for k, v in values.items()}
            row.info = {"alignment": alignment.to_json(), "cache_hit": hit}
            row.info["videos"] = video_paths(case)  # the HTML report's frame thumbnails
            verdict = metric.verdict(measurement, metric.thresholds)
            if verdict:
                row.info["verdict"] = one_line(verdict)
            self._tick("score", t0)
            paths: list[Path] = []
            if self.write_artifacts:
                t0 = time.perf_counter()
                # content-addressed like the score itself, so a re-scored sweep job reuses them
                paths = list(metric.artifacts(measurement, metric.thresholds,
                                              self.artifacts_dir / metric.name / score_key[:2] / score_key))
                if paths:
                    row.info["artifacts"] = [str(p) for p in paths]
                self._tick("artifacts", t0)
            self.scores.put(metric.name, score_key, {"values": row.values, "artifacts": [str(p) for p in paths],
                                                     "warnings": notes,
                                                     **({"verdict": row.info["verdict"]} if verdict else {})})
        except BackendUnavailable as e:
            row.status, row.reason = "skipped", f"{metric.name} skipped: {one_line(e)}"
        except (CaseFailure, VideoError, JudgeError) as e:
            row.status, row.reason = "failed", f"{stage}: {one_line(e)}"
        except Exception as e:  # a bug in one metric must not end the run; the reason says where
            log.debug("metric %s failed on %s", metric.name, case.key, exc_info=True)
            row.status, row.reason = "failed", (f"{stage}: {metric.name} raised {type(e).__name__}: {one_line(e)} "
                                                f"(inputs: {input_files(case)})")
        finally:  # notes of a failed measurement still say what was wrong with the input
            row.warnings.extend(w for w in case.warnings[len(before):] if w not in row.warnings)
            case.warnings[:] = before
        return True

    def _recalled(self, metric: Metric, case: Case, alignment: Alignment, row: ScoreRow, case_context: str,
                  absent: str | None) -> ScoreRow | None:
        """The row an earlier job of this process appended for this metric on this case, when the score memo
        entry it came from is unchanged (and its artifacts still there): taken before the entry is parsed and
        the row filled from it (:mod:`.row_memo`). None: the row is built from the memo or computed."""
        t0 = time.perf_counter()
        try:
            _, score_key = self.keys(metric, case, alignment)
            entry = self.scores.valid_text(metric.name, score_key)
            if entry is None:
                return None
            known = recall(memo_key(row, score_key, entry, case_context, absent))
            if known is None or any(not os.path.exists(a) for a in (known.info or {}).get("artifacts") or []):
                return None  # artifacts cleaned up: the memo path scores again to rewrite them
            self.scores.hits += 1
            return known
        except Exception:  # noqa: BLE001  (a key that cannot be built: the memo path says why, on the row)
            return None
        finally:
            self._tick("measure", t0)

    def keys(self, metric: Metric, case: Case, alignment: Alignment) -> tuple[str, str]:
        """(measurement key, score key) of one metric on one aligned case (once per job: the memo pass, the
        scores-only check and the scoring itself all ask)."""
        known = self._keys.get((id(alignment), metric.name, id(case)))
        if known is not None and known[0] is alignment and known[1] is case:
            return known[2]
        # cache_key({"alignment": …, "case": …, "extra": …, "metric": …, "models": …, "optional_models": …,
        # "params": …, "version": …}) and cache_key({"artifacts": …, "measurement": key, "thresholds": …,
        # "version": …}), written out in sorted key order from the parts serialised once (tested equal)
        fixed = self._fixed_parts(metric)
        key = key_with_alignment_text(alignment, '"case":' + _dump(case.fingerprint()) + ',"extra":'
                                      + _dump(metric.cache_params(case, alignment)) + fixed[0])
        score_key = hashlib.sha256((fixed[1] + key + fixed[2]).encode()).hexdigest()
        self._keys[(id(alignment), metric.name, id(case))] = (alignment, case, (key, score_key))
        return key, score_key

    def _fixed_parts(self, metric: Metric) -> tuple[str, str, str]:
        """A metric's key text that no case changes (name, models, params, version, thresholds), once a job."""
        known = self._fixed.get(id(metric))
        if known is not None and known[0] is metric:
            return known[1]
        optional = {r: self.hub.selection.get(r) or "" for r in metric.optional_models}
        measurement = (f',"metric":{_dump(metric.name)},"models":{_dump(self.hub.identities(metric.models))},'
                       f'"optional_models":{_dump(optional)},"params":{_dump(metric.params)},'
                       f'"version":{_dump(metric.version)}}}')
        parts = (measurement, f'{{"artifacts":{_dump(self.write_artifacts)},"measurement":"',
                 f'","thresholds":{_dump(metric.thresholds)},"version":{_dump(metric.version)}}}')
        self._fixed[id(metric)] = (metric, parts)
        return parts

    def measured(self, plan: BenchmarkPlan, item: Case | CaseError, is_final: IsFinal) -> bool:
        """Whether every row of ``item`` left to do needs a score only: its alignment is memoised and its
        measurement cached (nothing to decode, no model to run). Never runs an aligner or a metric."""
        if isinstance(item, CaseError):
            return True
        try:
            for name, metric in plan.metrics.items():
                if name in plan.skipped or is_final((plan.name, item.model, item.case_id, name)):
                    continue
                alignment = self.align(plan.aligner_for(metric), item, plan.params_for(plan.aligner_for(metric)),
                                       memo_only=True)
                if alignment is None:
                    return False
                if isinstance(alignment, CaseFailure):
                    continue
                if not os.path.isfile(self.measurements.path_for(metric.name, self.keys(metric, item, alignment)[0])):
                    return False
        except Exception:  # noqa: BLE001 - anything odd: let a worker find out (and say) what it is
            return False
        return True

    def _input_notes(self, metric: Metric, key: str, case: Case, before: list[str], hit: bool) -> list[str]:
        """The reader notes of this measurement: new on ``case.warnings`` when it was computed (then kept
        beside the measurement), else the ones kept when it was."""
        new = [w for w in case.warnings[len(before):] if w not in before]
        del case.warnings[len(before):]
        if not hit:
            if new:
                self.input_notes.put(metric.name, key, {"warnings": new})
            return new
        memo = self.input_notes.get(metric.name, key)
        return list(memo["warnings"]) if memo else new


def key_with_alignment(alignment: Alignment, parts: Mapping[str, Any]) -> str:
    """``cache_key({"alignment": alignment.to_json(), **parts})``, with the alignment serialised once per
    alignment object (a case's metrics share it; an OPIS or Scene Memory alignment is kilobytes).

    ``cache_key`` sorts keys and "alignment" sorts before every other part, so the text is the whole
    mapping's serialisation with the alignment's text first (``tests/test_rescore_memos.py`` checks it)."""
    assert all(k > "alignment" for k in parts)
    if not parts:
        return cache_key({"alignment": alignment.to_json()})
    return key_with_alignment_text(alignment, _dump(dict(parts))[1:-1] + "}")


def key_with_alignment_text(alignment: Alignment, rest: str) -> str:
    """sha256 of ``'{"alignment":' + <the alignment's text> + "," + rest``: ``rest`` is the serialised other
    parts (each key sorting after "alignment") without the opening brace, with the closing one."""
    head = alignment.__dict__.get("_key_head")
    if head is None:  # an alignment is not changed once aligned: its text is hashed once, then copied
        text = _dump(alignment.to_json())
        head = alignment.__dict__["_key_head"] = (text, hashlib.sha256(('{"alignment":' + text + ",").encode()))
    h = head[1].copy()
    h.update(rest.encode())
    return h.hexdigest()


def _dump(value: Any) -> str:
    """JSON text as :func:`cache_key` writes it (sorted keys, no spaces, ``str`` for anything else)."""
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))


# memo file -> (its state, the alignment read from it): a sweep's later jobs reuse the object (and the hash
# of its text the measurement keys start with) while the file is unchanged
_ALIGNED: dict[str, tuple[tuple[int, int, int], Alignment]] = {}
MEMO_ALIGNMENTS = 20_000  # a default run reads 576


def _remember_alignment(memo_file: str, alignment: Alignment) -> None:
    state = file_state(memo_file)
    if state is None:
        return
    remember(_ALIGNED, memo_file, (state, alignment), MEMO_ALIGNMENTS)


def _as_written(row: ScoreRow, case_context: str, absent: str | None, before: tuple[str, ...]) -> ScoreRow:
    """A row taken from the score memo as this process appended it before (see :mod:`.row_memo`), or the
    row itself, marked with what determines it so the runner remembers it once appended. ``before``: its
    warnings before the memo entry filled it (what :meth:`CasePipeline._recalled` keys on)."""
    taken = row.__dict__.pop("_score_memo", None)
    if taken is None or taken[1] is None:
        return row
    key = memo_key(row, *taken, case_context, absent, before)
    known = recall(key)
    if known is not None:
        return known
    row.__dict__["_memo_key"] = key
    return row


def _num(v: Any) -> float | None:
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def input_files(case: Case, limit: int = 300) -> str:
    """The case's input files in one short line, for a failure whose exception does not name its file."""
    parts = [str(v.path) for v in (case.video, case.reference) if v is not None]
    parts += [f"{k}={p}" for k, p in sorted(case.sidecars.items())]
    return one_line(", ".join(parts) or case.case_id, limit)


def video_paths(case: Case) -> dict[str, str]:
    """The case's generated and reference video files (recorded on rows for the report's thumbnails)."""
    return {k: str(v.path) for k, v in (("generated", case.video), ("reference", case.reference)) if v is not None}
