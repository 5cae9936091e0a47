"""Stage 2 — the per-case pipeline: align -> measure -> score -> rows, each step through the cache.

Every step's result is kept in the :class:`~worldrecall.engine.cache.Store` under a key built by
:mod:`worldrecall.engine.cache.keys` from everything it depends on:

- alignment: the aligner's identity (name, version, code, libraries), its params, the case's content;
- measurement: the metric's identity without its scoring code, its params (and the files they name), the
  identities of the backends and judges its measure is handed (:mod:`worldrecall.engine.cache.identity`), the
  alignment's key, the case's content;
- score: the metric's whole identity, its thresholds, the measurement's key;
- row: the score's key and what the row carries besides the values (strata, warnings, paths).

A row on disk is kept by a rerun only when its key is the one computed now (:meth:`CasePipeline.settle`).
Every failure is caught here and becomes that row's status and one-line reason; nothing a case does can end
the run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldrecall.core.components import MeasureContext, Metric
from worldrecall.core.data import (
    Alignment,
    Case,
    CaseError,
    CaseFailure,
    CaseSkip,
    ScoreRow,
    finite_float,
    one_line,
)
from worldrecall.core.judges import JudgeError, JudgeHub
from worldrecall.core.models import BackendUnavailable, ModelHub
from worldrecall.core.results import json_default
from worldrecall.core.video import VideoError, VideoPool
from worldrecall.engine.cache import Store, component_identity, key_and_ingredients, key_of, named_files
from worldrecall.engine.cache.identity import received_identity
from worldrecall.engine.cache.keys import canonical_json, key_of_encoded, object_json
from worldrecall.engine.stages.plan import BenchmarkPlan, skip_reason
from worldrecall.registry.host import PluginHost

log = logging.getLogger(__name__)

# the methods that turn a measurement into numbers: no alignment or measurement depends on them, so editing
# them re-scores and never re-aligns or re-measures (left out of those keys' code digests)
SCORING_METHODS = ("score", "verdict", "artifacts")
_ROW_REST = json.JSONEncoder(sort_keys=True, default=str)  # a row key's JSON part: one encoder, not one a row


@dataclass(frozen=True)
class MetricKeyParts:
    """The parts of a metric's measurement and score keys that every case shares, each encoded once by
    :func:`~worldrecall.engine.cache.keys.canonical_json` (settling a run computes thousands of keys)."""

    measurement_identity: str
    measurement_params: Mapping[str, str]  # params and the received identities: all but the case's ``extra``
    score_identity: str
    score_params: str
    files: str = ""  # the digests of the files its params name (an input of every case's measurement)


@dataclass(frozen=True)
class AlignerKeyParts:
    """The parts of an aligner's alignment keys that every case of a plan shares (its identity, the files its
    params name, its params), each encoded once by :func:`~worldrecall.engine.cache.keys.canonical_json`."""

    identity: str
    files: str
    params: str


@dataclass
class KeyParts:
    """Each metric's and aligner's shared key parts, filled as a plan's cases are settled (one job: a file its
    params name is digested once, not once per case)."""

    metrics: dict[str, MetricKeyParts] = field(default_factory=dict)
    aligners: dict[tuple[str, str], AlignerKeyParts] = field(default_factory=dict)


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
                 *, artifacts: bool, device: str, batch_size: int, store: Store | None = None):
        self.host, self.hub, self.judges, self.pool = host, hub, judges, pool
        self.store = store or Store(cache_root)
        self.artifacts_dir, self.write_artifacts = Path(cache_root) / "artifacts", artifacts
        self.device, self.batch_size = device, batch_size
        self.counters = Counters()
        self.merged = Counters()  # what forked workers reported
        self._aligned_from_cache: dict[str, bool] = {}  # alignment key -> read from the store (this case)

    # -- counters -------------------------------------------------------------------------------
    def reset_counters(self) -> None:
        """Start counting from zero (a forked worker reports only its own work)."""
        self.counters = Counters()
        self.pool.decode_counts.clear()
        self.hub.forward_seconds.clear()
        self.store.hits.clear()
        self.store.misses.clear()
        self.store.corrupt = 0

    def snapshot(self) -> dict[str, dict[str, float]]:
        """Counters including the store's hits and misses, decodes and model time since the last reset."""
        out = self.counters.to_json()
        hits, misses = self.store.hits, self.store.misses
        out["cache"].update({"hits": hits.get("measurements", 0), "misses": misses.get("measurements", 0),
                             "corrupt": self.store.corrupt, "score_hits": hits.get("scores", 0),
                             "alignment_hits": hits.get("alignments", 0)})
        out["decodes"] = dict(self.pool.decode_counts)
        out["model_seconds"] = dict(self.hub.forward_seconds)
        return out

    def merge(self, other: Mapping[str, Mapping[str, float]]) -> None:
        """Add a worker's counters (its :meth:`snapshot`) to this run's totals."""
        self.merged.merge(other)

    def totals(self) -> dict[str, dict[str, float]]:
        """This process's counters plus every merged worker's."""
        t = Counters()
        t.merge(self.snapshot())
        t.merge(self.merged.to_json())
        return t.to_json()

    def _tick(self, stage: str, t0: float) -> None:
        self.counters.timing[stage] += time.perf_counter() - t0

    # -- keys -----------------------------------------------------------------------------------
    def alignment_ingredients(self, name: str, case: Case, params: Mapping[str, Any],
                              fp: str | None = None) -> dict[str, Any]:
        """Everything an alignment's key is made of (``key_of(**ingredients)``): the aligner's identity, the case's
        content and the files its params name, its params."""
        aligner = self.host.aligner(name)
        merged = {**aligner.defaults, **params}
        return {"identity": component_identity(aligner, without=SCORING_METHODS),
                "inputs": {"case": fp or case.fingerprint(), "files": named_files(aligner, merged)}, "params": merged}

    def alignment_key(self, name: str, case: Case, params: Mapping[str, Any], fp: str | None = None) -> str:
        """``fp``: the case's fingerprint when the caller has it (each costs a walk of its sidecar folders)."""
        return self.alignment_keyed(name, case, params, fp)[0]

    def alignment_keyed(self, name: str, case: Case, params: Mapping[str, Any], fp: str | None = None,
                        parts: KeyParts | None = None) -> tuple[str, str]:
        """The alignment key and its ingredients as the key hashed them (``worldrecall cache explain``).
        ``parts``: the plan's shared key parts so far (the aligner's are encoded once, kept there)."""
        if parts is None:
            return key_and_ingredients(**self.alignment_ingredients(name, case, params, fp))
        shared = parts.aligners.get((name, canonical_json(params)))
        if shared is None:
            whole = self.alignment_ingredients(name, case, params, "")
            shared = AlignerKeyParts(canonical_json(whole["identity"]),
                                     canonical_json(whole["inputs"]["files"]), canonical_json(whole["params"]))
            parts.aligners[(name, canonical_json(params))] = shared
        inputs = object_json({"case": canonical_json(fp or case.fingerprint()), "files": shared.files})
        return key_of_encoded(shared.identity, inputs, shared.params)

    def key_parts(self, metric: Metric) -> MetricKeyParts:
        """What a metric's measurement and score keys hold that is the same on every case (its identities, its
        params with the identities of the backends and judges its measure is handed, its thresholds), encoded."""
        return MetricKeyParts(
            measurement_identity=canonical_json(component_identity(metric, without=SCORING_METHODS)),
            measurement_params={"params": canonical_json(metric.params),
                                **{k: canonical_json(v)
                                   for k, v in received_identity(metric, self.hub, self.judges).items()}},
            score_identity=canonical_json(component_identity(metric)),
            score_params=canonical_json({"thresholds": metric.thresholds, "artifacts": self.write_artifacts}),
            files=canonical_json(named_files(metric, metric.params)))

    def keys(self, metric: Metric, case: Case, alignment_key: str, alignment: Alignment,
             fp: str | None = None, parts: MetricKeyParts | None = None) -> tuple[str, str]:
        """(measurement key, score key) of one metric on one aligned case."""
        (measurement, _), (score, _) = self.keyed(metric, case, alignment_key, alignment, fp, parts)
        return measurement, score

    def keyed(self, metric: Metric, case: Case, alignment_key: str, alignment: Alignment,
              fp: str | None = None, parts: MetricKeyParts | None = None) -> tuple[tuple[str, str], tuple[str, str]]:
        """((measurement key, its ingredients), (score key, its ingredients)) of one metric on one aligned case.

        A measurement's key holds the metric's identity without its scoring code; its inputs (the case's
        content, the alignment's key, the files its params name); its params, what it adds for this case
        (``cache_params``), and the identities of the backends and judges its measure is handed. A score's key
        holds the metric's whole identity, the measurement's key, its thresholds and whether it writes per-case
        files. ``parts``: :meth:`key_parts` of the metric, when the caller computes many keys of it."""
        parts = parts or self.key_parts(metric)
        inputs = object_json({"case": canonical_json(fp or case.fingerprint()),
                              "alignment": canonical_json(alignment_key), "files": parts.files})
        params = object_json({**parts.measurement_params,
                              "extra": canonical_json(metric.cache_params(case, alignment))})
        measurement = key_of_encoded(parts.measurement_identity, inputs, params)
        score = key_of_encoded(parts.score_identity, canonical_json({"measurement": measurement[0]}),
                               parts.score_params)
        return measurement, score

    def keep_ingredients(self, key: str, ingredients: str) -> None:
        """Store what ``key`` was built from beside its entry (``worldrecall cache explain`` reads it)."""
        if key and ingredients and self.store.enabled:
            self.store.put_json("ingredients", key, json.loads(ingredients))

    @staticmethod
    def row_key(score_key: str, row: ScoreRow, absent: str | None = None) -> str:
        """A row's key: its score's key and what the row carries besides what the score gives (taken before
        the score fills it: what the score adds is determined by its key)."""
        rest = _ROW_REST.encode([row.strata, row.warnings, row.backend, row.info.get("videos"), absent])
        return hashlib.sha256(f"{score_key}\0{rest}".encode()).hexdigest()

    # -- rows -----------------------------------------------------------------------------------
    def new_row(self, plan: BenchmarkPlan, case: Case | CaseError, name: str, metric: Metric) -> ScoreRow:
        backend = self.hub.backend_names(metric.models + metric.optional_models) if isinstance(case, Case) else {}
        return ScoreRow(plan.name, case.model, case.case_id, name, {}, strata=dict(case.strata),
                        metric_version=metric.version, backend=backend, warnings=list(case.warnings))

    def failure_rows(self, plan: BenchmarkPlan, item: Case | CaseError, stage: str, reason: str,
                     names: Any = None) -> list[ScoreRow]:
        """One failed row per metric (of ``names``, default all) with the same one-line reason."""
        out = []
        for name, metric in plan.metrics.items():
            if names is None or name in names:
                row = ScoreRow(plan.name, item.model, item.case_id, name, {}, "failed",
                               f"{stage}: {one_line(reason)}", dict(item.strata), metric.version,
                               warnings=list(item.warnings))
                out.append(row)
        return out

    def settle(self, plan: BenchmarkPlan, case: Case, existing: Mapping[tuple[str, str, str, str], ScoreRow],
               parts: KeyParts | None = None,
               earlier: Mapping[tuple[str, str, str, str], ScoreRow] | None = None
               ) -> tuple[list[ScoreRow], dict[str, str]]:
        """What this process can decide about a case without running an aligner or a metric (a parent that
        forks workers never does): rows whose key is unchanged are kept as they are (not returned), rows that
        ``earlier`` (another results folder's rows, by place) holds under the same key are returned as they are
        there, rows whose score is in the cache are built now (returned), the other metrics are left (second
        item: each with its measurement key, ``""`` where its alignment is not cached: :meth:`measured` reads
        them). ``parts``: the plan's shared key parts so far, kept by the caller over its cases (filled
        here)."""
        parts = KeyParts() if parts is None else parts
        t0 = time.perf_counter()
        out: list[ScoreRow] = []
        left: dict[str, str] = {}
        try:
            fp = case.fingerprint()
            alignments: dict[str, tuple[str, Alignment | None, dict[str, Any] | None]] = {}
            for name, metric in plan.metrics.items():
                row = self.new_row(plan, case, name, metric)
                if self._skip(plan, name, metric, case, row, fp):
                    if _kept(existing, row) is None:
                        out.append(row)
                    continue
                aligner = plan.aligner_for(metric)
                if aligner not in alignments:
                    akey = self.alignment_keyed(aligner, case, plan.params_for(aligner), fp, parts)[0] \
                        if aligner else ""
                    got = self._stored_alignment(akey) if aligner else Alignment()
                    # one JSON object for the case's rows: the rows file stores it once (row_store)
                    alignments[aligner] = (akey, got, got.to_json() if got is not None else None)
                akey, alignment, alignment_json = alignments[aligner]
                if alignment is None:
                    left[name] = ""
                    continue
                if name not in parts.metrics:
                    parts.metrics[name] = self.key_parts(metric)
                mkey, skey = self.keys(metric, case, akey, alignment, fp, parts.metrics[name])
                row.warnings.extend(alignment.info.get("warnings", []))  # as :meth:`rows` does
                row.info = {"alignment": alignment_json, "videos": video_paths(case),
                            "keys": {"alignment": akey, "measurement": mkey, "score": skey}}
                row.key = self.row_key(skey, row, plan.absent.get(name))
                if _kept(existing, row) is not None:
                    continue  # the row on disk was computed under this very key
                adopted = _kept(earlier, row) if earlier is not None else None
                if adopted is not None:  # so was that folder's: the same row, its score not read again
                    out.append(adopted)
                    continue
                if self._decided_before(row, skey, mkey, plan.absent.get(name)):
                    out.append(row)
                else:
                    left[name] = mkey
        except Exception:
            log.debug("settling %s failed", case.key, exc_info=True)
            return [], dict.fromkeys(plan.metrics, "")
        finally:
            self._tick("settle", t0)
        return out, left

    def _skip(self, plan: BenchmarkPlan, name: str, metric: Metric, case: Case, row: ScoreRow, fp: str) -> bool:
        """Make ``row`` the skip it is when the plan skips the metric (a backend, judge or key missing) or the
        case lacks an input the metric declares (:meth:`Metric.missing_inputs`); False when it can run."""
        reason = skip_reason(plan, name, metric, case)
        if not reason:
            return False
        row.status, row.reason = "skipped", reason
        # the fingerprint covers the case's files: providing the missing one later is a new key
        row.key = self.row_key(key_of(component_identity(metric), fp, {"skipped": reason}), row)
        return True

    def _score_entry(self, skey: str) -> dict[str, Any] | None:
        entry = self.store.get_json("scores", skey)
        if entry is not None and any(not os.path.exists(a) for a in entry.get("artifacts") or []):
            return None  # its files were cleaned up: score again to write them
        return entry

    def _fill_from_entry(self, row: ScoreRow, entry: Mapping[str, Any], absent: str | None) -> None:
        row.values = entry["values"]
        if not any(finite_float(v) is not None for v in row.values.values()):
            # `ok` means a value: a row without any is skipped with the metric's own one-line verdict (its "not
            # applicable" reason), else it failed: a metric that measures nothing must say why
            if entry.get("verdict"):
                row.status, row.reason = "skipped", f"{row.metric} not applicable: {entry['verdict']}"
            else:
                row.status, row.reason = "failed", f"score: {row.metric} returned no value"
        row.warnings.extend(w for w in entry.get("warnings", []) if w not in row.warnings)
        if entry.get("artifacts"):
            row.info["artifacts"] = entry["artifacts"]
        if entry.get("verdict"):
            row.info["verdict"] = entry["verdict"]
        if entry.get("info"):
            row.info.update(entry["info"])
        if absent is not None:  # systematically null values: said on the row
            row.warnings.append(absent)

    def _decided_before(self, row: ScoreRow, skey: str, mkey: str, absent: str | None) -> bool:
        """Fill ``row`` from the score kept under ``skey`` or the skip kept under ``mkey``; whether either was."""
        entry = self._score_entry(skey)
        if entry is not None:
            self._fill_from_entry(row, entry, absent)
            row.info["cache_hit"], row.info["score_cache_hit"] = True, True
            return True
        skip = self.store.get_json("skips", mkey)
        if skip is not None:  # measured before and found wanting
            self._fill_skip(row, skip)
            return True
        return False

    def _keep_skip(self, mkey: str, row: ScoreRow, info: Mapping[str, Any], notes: list[str]) -> None:
        """Keep a skip decided while measuring under the measurement's key, as a measurement would be: a sweep job
        or a re-score in a new results folder settles the row from it, with no worker started for it."""
        self.store.put_json("skips", mkey, {"reason": row.reason, "info": dict(info),
                                            "warnings": [w for w in notes if w not in row.warnings]})

    @staticmethod
    def _score(metric: Metric, measurement: Any, notes: list[str]) -> dict[str, Any]:
        """The score entry of ``measurement``: values, the input notes, and the verdict and facts beside them."""
        values = metric.score(measurement, metric.thresholds)
        undeclared = metric.undeclared(values)
        if undeclared:  # a value without declared direction and range is never shown or ranked
            raise CaseFailure(f"{metric.name} emitted undeclared value(s) {', '.join(map(repr, undeclared))} "
                              f"(declare each in the metric's `values`)")
        entry: dict[str, Any] = {"values": {k: _num(v) for k, v in values.items()}, "warnings": notes}
        verdict = metric.verdict(measurement, metric.thresholds)
        if verdict:
            entry["verdict"] = one_line(verdict)
        info = metric.row_info(measurement)
        if info:  # facts beside the values (assumed references, said once per run; a pose's quality)
            entry["info"] = json.loads(json.dumps(info, default=json_default))
        return entry

    @staticmethod
    def _fill_skip(row: ScoreRow, skip: Mapping[str, Any]) -> None:
        """Make ``row`` the skip its metric's measure stage decided under the same measurement key (``skips``)."""
        row.status, row.reason = "skipped", skip["reason"]
        row.info.update(skip.get("info") or {})
        row.warnings.extend(w for w in skip.get("warnings") or [] if w not in row.warnings)
        row.info["cache_hit"] = True

    def rows(self, plan: BenchmarkPlan, item: Case | CaseError,
             names: Collection[str] | None = None) -> list[ScoreRow]:
        """The rows of one case for the metrics in ``names`` (default: all), in metric order."""
        if isinstance(item, CaseError):
            return self.failure_rows(plan, item, item.stage, item.reason, names)
        case = item
        out: list[ScoreRow] = []
        alignments: dict[str, tuple[str, Alignment | CaseFailure]] = {}
        self._aligned_from_cache.clear()
        fp, unreadable = "", None
        try:
            fp = case.fingerprint()
        except (CaseFailure, VideoError) as e:  # an input that cannot be read: each row says so, as align would
            unreadable = CaseFailure(one_line(e))
        except Exception as e:  # noqa: BLE001
            unreadable = CaseFailure(f"{type(e).__name__}: {one_line(e)}")
        for name, metric in plan.metrics.items():
            if names is not None and name not in names:
                continue
            row = self.new_row(plan, case, name, metric)
            if self._skip(plan, name, metric, case, row, fp):
                out.append(row)
                continue
            aligner = plan.aligner_for(metric)
            if aligner not in alignments:
                try:
                    if unreadable is not None:
                        raise unreadable
                    akey, aing = (self.alignment_keyed(aligner, case, plan.params_for(aligner), fp) if aligner
                                  else ("", ""))
                except CaseFailure as e:
                    alignments[aligner] = ("", e)
                except Exception as e:  # noqa: BLE001  (an unreadable input: the case fails, saying why)
                    alignments[aligner] = ("", CaseFailure(f"{type(e).__name__}: {one_line(e)}"))
                else:
                    hits = self.store.hits.get("alignments", 0)
                    alignments[aligner] = (akey, self.align(aligner, case, plan.params_for(aligner), akey, aing))
                    self._aligned_from_cache[akey] = self.store.hits.get("alignments", 0) > hits
            akey, alignment = alignments[aligner]
            if isinstance(alignment, CaseFailure):
                row.status, row.reason = "failed", f"align: {alignment}"
            else:
                row.warnings.extend(alignment.info.get("warnings", []))
                self.measure_and_score(metric, case, alignment, row, akey=akey, absent=plan.absent.get(name), fp=fp)
            out.append(row)
        return out

    def _stored_alignment(self, key: str) -> Alignment | None:
        stored = self.store.get_json("alignments", key)
        return Alignment.from_json(stored) if stored is not None else None

    def align(self, name: str, case: Case, params: Mapping[str, Any], key: str | None = None,
              ingredients: str = "") -> Alignment | CaseFailure:
        """The case's alignment (from the cache, or computed and kept under ``key``, its alignment key, with
        the key's ``ingredients``), or why there is none."""
        t0 = time.perf_counter()
        try:
            if not name:
                return Alignment()
            key = key or self.alignment_key(name, case, params)
            stored = self._stored_alignment(key)
            if stored is not None:  # only alignments that passed the checks below are kept
                return stored
            aligner = self.host.aligner(name)
            merged = {**aligner.defaults, **params}
            n = case.video.num_frames if case.video is not None else None
            short = None
            if n is not None and n < aligner.min_frames:
                short = f"{case.video.path}: {n} frame(s); the {name} aligner needs at least {aligner.min_frames}"
                if not merged.get("official_parity"):
                    return CaseFailure(short)
            alignment = aligner.align(case, merged)
            if short:  # official parity scores it as the official code would; the row says why to distrust it
                alignment.info.setdefault("warnings", []).append(f"{short}; scored anyway (official_parity)")
            kept = self.store.put_json("alignments", key, json.loads(json.dumps(alignment.to_json(),
                                                                                 default=json_default)))
            self.keep_ingredients(key, ingredients)
            return Alignment.from_json(kept)  # exactly what a later cache hit gives
        except (CaseFailure, VideoError) as e:
            return CaseFailure(one_line(e))
        except Exception as e:
            return CaseFailure(f"{type(e).__name__}: {one_line(e)}")
        finally:
            self._tick("align", t0)

    def measure_and_score(self, metric: Metric, case: Case, alignment: Alignment, row: ScoreRow, *,
                          akey: str = "", absent: str | None = None, fp: str | None = None) -> None:
        """Fill ``row`` with the metric's values (or its failure/skip); never raises. ``akey``: the alignment's
        key (empty for the empty alignment); ``absent``: the note of values no backend gives here."""
        stage, key, mkey = "measure", "", ""
        ctx: MeasureContext | None = None
        before = list(case.warnings)  # readers append their notes here while the metric measures
        row.info = {"alignment": alignment.to_json(), "videos": video_paths(case)}
        try:
            t0 = time.perf_counter()
            (mkey, ming), (skey, sing) = self.keyed(metric, case, akey, alignment, fp)
            key = self.row_key(skey, row, absent)
            row.info["keys"] = {"alignment": akey, "measurement": mkey, "score": skey}
            if akey and self._aligned_from_cache.get(akey):
                row.info["alignment_hit"] = True
            if self._decided_before(row, skey, mkey, absent):  # another job of a sweep: nothing to load or run
                row.key = key
                self._tick("measure", t0)
                return
            measurement = self.store.get_arrays("measurements", mkey)
            hit = measurement is not None
            provisional: list[str] = []
            if not hit:
                ctx = MeasureContext(models=self.hub, judges=self.judges, artifacts_dir=self.artifacts_dir,
                                     device=self.device, batch_size=self.batch_size)
                raw = metric.measure(case, alignment, ctx)
                provisional = [f"{one_line(r)} (not kept: measured again on the next run)" for r in ctx.not_kept]
                # scoring sees exactly what a later cache hit would (JSON turns tuples into lists …)
                measurement = (self.store if not provisional else Store(self.store.root, enabled=False)).put_arrays(
                    "measurements", mkey, raw)
                if not provisional:
                    self.keep_ingredients(mkey, ming)
            notes = self._input_notes(mkey, case, before, hit)
            row.warnings.extend(w for w in notes if w not in row.warnings)
            self._tick("measure", t0)
            stage, t0 = "score", time.perf_counter()
            entry = self._score(metric, measurement, notes)
            self._tick("score", t0)
            if self.write_artifacts:
                t0 = time.perf_counter()
                # under the score's key, like the score itself: a re-scored sweep job reuses them
                paths = metric.artifacts(measurement, metric.thresholds, self.artifacts_dir / metric.name / skey[:2] / skey)
                entry["artifacts"] = [str(p) for p in paths]
                self._tick("artifacts", t0)
            if provisional:  # scored for this run only: no entry, and a row no rerun keeps (it has no key)
                row.warnings.extend(w for w in provisional if w not in row.warnings)
                key = ""
            else:
                self.store.put_json("scores", skey, entry)
                self.keep_ingredients(skey, sing)
            self._fill_from_entry(row, {**entry, "warnings": []}, absent)
            row.info["cache_hit"] = hit
            row.key = key
        except BackendUnavailable as e:  # final under its key, like a score
            row.status, row.reason, row.key = "skipped", f"{metric.name} skipped: {one_line(e)}", key
        except CaseSkip as e:  # an input this metric needs is absent: final under its key (the case's content)
            row.status, row.reason, row.key = "skipped", f"{metric.name} skipped: {one_line(e)}", key
            info = json.loads(json.dumps(e.info, default=json_default))
            row.info.update(info)
            if key and stage == "measure" and not (ctx is not None and ctx.not_kept):
                self._keep_skip(mkey, row, info, case.warnings[len(before):])
        except (CaseFailure, VideoError, JudgeError) as e:
            row.status, row.reason = "failed", f"{stage}: {one_line(e)}"
        except Exception as e:  # a bug in one metric must not end the run; the reason says where
            log.debug("metric %s failed on %s", metric.name, case.key, exc_info=True)
            row.status, row.reason = "failed", (f"{stage}: {metric.name} raised {type(e).__name__}: {one_line(e)} "
                                                f"(inputs: {input_files(case)})")
        finally:  # notes of a failed measurement still say what was wrong with the input
            row.warnings.extend(w for w in case.warnings[len(before):] if w not in row.warnings)
            case.warnings[:] = before

    def measured(self, left: Mapping[str, str]) -> bool:
        """Whether every metric :meth:`settle` left needs a score only: its alignment was cached (it gave a
        measurement key) and so is its measurement."""
        return all(mkey and self.store.has("measurements", mkey, ".safetensors") for mkey in left.values())

    def _input_notes(self, mkey: str, case: Case, before: list[str], hit: bool) -> list[str]:
        """The reader notes of this measurement: new on ``case.warnings`` when it was computed (then kept
        beside the measurement), else the ones kept when it was."""
        new = [w for w in case.warnings[len(before):] if w not in before]
        del case.warnings[len(before):]
        if not hit:
            if new:
                self.store.put_json("input_notes", mkey, {"warnings": new})
            return new
        kept = self.store.get_json("input_notes", mkey)
        return list(kept["warnings"]) if kept else new


def _kept(existing: Mapping[tuple[str, str, str, str], ScoreRow], row: ScoreRow) -> ScoreRow | None:
    """The row on disk for ``row``'s place when it is final and was computed under the same key."""
    old = existing.get(row.row_key)
    if old is None or old.status not in ("ok", "skipped") or not old.key or old.key != row.key:
        return None
    if any(not os.path.exists(a) for a in (old.info or {}).get("artifacts") or []):
        return None  # its files were cleaned up: score again to write them
    return old


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

