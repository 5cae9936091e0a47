"""Stage 1 — plan: which benchmarks run, with which components, over which cases.

A plan is built from the resolved config and the registry only: loader, aligner, metric instances (params
and thresholds type-checked), metrics that must be skipped (a backend or judge unavailable, and why), the
load request, and the benchmark's own aggregators. :func:`load_cases` then turns a plan into this shard's
work list; one bad case never ends the list.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldrecall.core.cache import cache_key
from worldrecall.core.components import ConfigTypeError, Loader, LoadRequest, Metric, MissingInput
from worldrecall.core.data import Case, CaseError, one_line
from worldrecall.core.judges import JudgeError, JudgeHub
from worldrecall.core.models import BackendUnavailable, ModelHub
from worldrecall.core.video import VideoPool
from worldrecall.engine.stages.config import validate_benchmark
from worldrecall.registry.host import PluginHost
from worldrecall.registry.names import unknown_name

log = logging.getLogger(__name__)


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
    models: list[str] = field(default_factory=list)  # every model the generations hold (before models_only)
    absent: dict[str, str] = field(default_factory=dict)  # metric -> values it cannot compute in this run, and why

    def aligner_for(self, metric: Metric) -> str:
        """The aligner a metric declares, else the benchmark's own."""
        return metric.aligner or self.aligner_name

    def params_for(self, aligner_name: str) -> dict[str, Any]:
        """Flat ``aligner_params`` go to the benchmark's aligner; ``{<aligner name>: {...}}`` entries to others."""
        nested = self.aligner_params.get(aligner_name)
        if isinstance(nested, Mapping):
            return dict(nested)
        if aligner_name != self.aligner_name:
            return {}
        return {k: v for k, v in self.aligner_params.items() if not isinstance(v, Mapping) or "." not in k}


def shard_of(case_id: str, count: int) -> int:
    """Deterministic shard of a case id (all models of one clip land in the same shard)."""
    return int(hashlib.sha256(case_id.encode()).hexdigest()[:8], 16) % max(count, 1)


def run_key(cfg: Mapping[str, Any]) -> str:
    """What decides the rows: benchmarks (metrics, params, thresholds, data), backends, suite, filters.

    Computed on the config as written (``metrics`` not yet expanded), so ``aggregate`` finds the same folder.
    """
    parts = {k: cfg.get(k) for k in ("benchmarks", "models", "suite", "only", "models_only")}
    if cfg.get("metrics"):  # only when used: every other run keeps its key
        parts["metrics"] = list(cfg["metrics"])
    parts["shard_count"] = cfg["shard"]["count"]
    return cache_key(parts)[:16]


def enable_metrics(cfg: Mapping[str, Any], host: PluginHost) -> dict[str, Any]:
    """The config with each metric named in ``metrics`` switched on in its own benchmark's node.

    A name is a registered metric's full name (``memobench.colour_shift``) or its short name when only one
    benchmark registers it; the benchmark comes from the metric's declaration, never from the config tree. A
    metric already configured keeps its params and thresholds (``enabled: false`` is overridden); an unknown,
    ambiguous name, or one whose benchmark the config does not define, is a config error naming what is known.
    """
    names = list(cfg.get("metrics") or [])
    if not names:
        return dict(cfg)
    out = {**cfg, "benchmarks": {k: dict(v or {}) for k, v in (cfg.get("benchmarks") or {}).items()}}
    for name in names:
        full = resolve_metric_name(str(name), host)
        bench = host.metric(full).benchmark
        node = out["benchmarks"].get(bench)
        if node is None:
            defined = ", ".join(sorted(out["benchmarks"])) or "none"
            raise ConfigTypeError(f"metrics: {full!r} is a metric of benchmark {bench!r}, which the config does not "
                                  f"define (defined: {defined})")
        only = cfg.get("only")
        if not node.get("enabled", True) or (only is not None and bench not in only):
            log.warning("metrics: %s is switched on, but its benchmark %s does not run (enabled: false or `only`)",
                        full, bench)
        short = full[len(bench) + 1:]
        metrics = node["metrics"] = dict(node.get("metrics") or {})
        metrics[short] = {**dict(metrics.get(short) or {}), "enabled": True}
    return out


def resolve_metric_name(name: str, host: PluginHost) -> str:
    """A registered metric's full name from its full or (unambiguous) short name."""
    known = sorted(host.metrics)
    if name in host.metrics:
        full = name
    else:
        hits = [m for m in known if m.split(".", 1)[-1] == name]
        if len(hits) > 1:
            raise ConfigTypeError(f"metrics: {name!r} is registered by several benchmarks "
                                  f"({', '.join(hits)}); name one in full")
        if not hits:
            raise ConfigTypeError(f"metrics: unknown metric {name!r}; known: {', '.join(known) or 'none'}")
        full = hits[0]
    bench = host.metric(full).benchmark
    if not full.startswith(f"{bench}."):
        raise ConfigTypeError(f"metrics: {full!r} is not named '<benchmark>.<metric>' for its benchmark {bench!r}")
    return full


def plan_benchmarks(cfg: Mapping[str, Any], host: PluginHost, hub: ModelHub, judges: JudgeHub,
                    pool: VideoPool) -> list[BenchmarkPlan]:
    """A plan per enabled benchmark (``only`` filters by name)."""
    return [_plan_one(cfg, name, b, host, hub, judges, pool) for name, b in enabled_benchmarks(cfg).items()]


def enabled_benchmarks(cfg: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The benchmarks a run scores: enabled, and named by ``only`` when it is set (runs and merges agree)."""
    only = cfg.get("only")
    return {name: b for name, b in (cfg["benchmarks"] or {}).items()
            if b and b.get("enabled", True) and (only is None or name in only)}


def _plan_one(cfg: Mapping[str, Any], name: str, node: Mapping[str, Any], host: PluginHost, hub: ModelHub,
              judges: JudgeHub, pool: VideoPool) -> BenchmarkPlan:
    b = validate_benchmark(name, dict(node))
    metrics: dict[str, Metric] = {}
    skipped: dict[str, str] = {}
    absent: dict[str, str] = {}
    for short, mcfg in (b["metrics"] or {}).items():
        mcfg = dict(mcfg or {})
        if not mcfg.pop("enabled", True):
            continue
        full = f"{name}.{short}"
        unknown = set(mcfg) - {"params", "thresholds"}
        if unknown:
            raise ConfigTypeError(f"benchmarks.{name}.metrics.{short}: unknown keys {sorted(unknown)}")
        try:
            cls = host.metric(full)
        except KeyError:
            known = [m.split(".", 1)[1] for m in host.metrics if m.startswith(f"{name}.")]
            raise ConfigTypeError(unknown_name("metric", short, known, f"benchmarks.{name}.metrics")) from None
        metrics[full] = cls(mcfg.get("params"), mcfg.get("thresholds"))
        reason = availability(metrics[full], hub, judges)
        if reason:
            skipped[full] = reason
        elif missing := optional_absence(metrics[full], hub):
            absent[full] = missing
    request = LoadRequest(data_root=Path(b["data_root"]) if b["data_root"] else Path("."),
                          generations=resolve_generations(b["generations"], cfg["models_only"]),
                          options=dict(b["loader_options"]), pool=pool)
    try:
        loader = host.loader(b["loader"])
    except KeyError as e:
        raise ConfigTypeError(f"benchmarks.{name}.loader: {e.args[0]}") from None
    return BenchmarkPlan(name=name, loader=loader, aligner_name=b["aligner"] or "",
                         aligner_params=dict(b["aligner_params"]), metrics=metrics, skipped=skipped,
                         request=request, aggregators=list(b["aggregators"]),
                         models=sorted(resolve_generations(b["generations"], None)), absent=absent)


def availability(metric: Metric, hub: ModelHub, judges: JudgeHub) -> str:
    """'' when every backend/judge the metric needs can be built, else why not (the metric is skipped)."""
    for role in metric.models:
        try:
            hub.get(role)
        except BackendUnavailable as e:
            return _with_alternatives(f"{metric.name} skipped: {e}", hub, role, hub.selection.get(role, ""), True)
    for judge in metric.judge_names():
        try:
            judges.get(judge)
        except (JudgeError, BackendUnavailable) as e:
            return f"{metric.name} skipped: {e}"
    return ""


def role_alternatives(hub: ModelHub, role: str, exclude: str = "", sidecars: bool = False) -> str:
    """What else can fill ``role``, from the registry's declared backends: weight-free ones first, then those
    that need weights (``worldrecall models fetch``); sidecar readers only when ``sidecars``. '' when none."""
    specs = [s for s in hub.specs.values() if s.role == role and s.name != exclude]
    free = sorted(s.name for s in specs if s.kind not in ("reference", "sidecar") and not s.weights)
    weighted = sorted(s.name for s in specs if s.kind == "reference" or (s.weights and s.kind != "sidecar"))
    side = sorted(s.name for s in specs if s.kind == "sidecar") if sidecars else []
    parts = []
    if free:
        parts.append(", ".join(f"models.{role}={n}" for n in free) + " (weight-free)")
    if weighted:
        parts.append(", ".join(f"models.{role}={n}" for n in weighted)
                     + " (needs weights: `worldrecall models fetch`; models=reference sets every role)")
    if side:
        parts.append(", ".join(f"models.{role}={n}" for n in side) + " (reads ViPE sidecars)")
    if not parts:
        return ""
    return f"for models.{role} use " + "; or ".join(parts)


def _with_alternatives(message: str, hub: ModelHub, role: str, exclude: str = "", sidecars: bool = False) -> str:
    alt = role_alternatives(hub, role, exclude, sidecars)
    return f"{message}; {alt}" if alt else message


def optional_absence(metric: Metric, hub: ModelHub) -> str:
    """'' when every optional role the metric would use has a backend, else which values stay null and why.

    Said once before evaluating and put on each of the metric's rows, so a null LPIPS is never silent."""
    out = []
    for role, values in metric.optional_roles().items():
        try:
            hub.get(role)
        except BackendUnavailable as e:
            out.append(f"{values} not computed: {one_line(e)}")
    return f"{metric.name}: " + "; ".join(out) if out else ""


def declared_missing(metric: Metric, case: Case) -> list[MissingInput]:
    """The inputs ``metric`` declares that ``case`` lacks (:meth:`Metric.missing_inputs`); a check that raises
    declares nothing, so the measurement says what went wrong instead."""
    try:
        return list(metric.missing_inputs(case))
    except Exception:
        log.debug("%s.missing_inputs failed on %s", metric.name, case.key, exc_info=True)
        return []


def skip_reason(plan: BenchmarkPlan, name: str, metric: Metric, case: Case) -> str:
    """Why ``metric`` is skipped on ``case`` (a backend, judge or key the plan lacks, or a declared input the
    case lacks), '' when it can run. The run's rows and ``worldrecall check`` both read it."""
    if name in plan.skipped:
        return plan.skipped[name]
    missing = declared_missing(metric, case)
    return f"{metric.name} skipped: " + "; ".join(m.line() for m in missing) if missing else ""


def load_cases(plan: BenchmarkPlan, shard_index: int, shard_count: int) -> list[Case | CaseError]:
    """This shard's cases of one benchmark, case-major (all models of a clip together).

    A case id listed twice for one model keeps its first copy; the duplicate becomes a warning on that
    case's rows (never a second row, never a failure of the good copy).
    """
    stream: list[Case | CaseError] = []
    crash: list[CaseError] = []  # in every shard, as before: it stands for the cases never yielded
    try:  # loaders fail one case per bad clip; what a crashing loader yielded before the crash is kept
        for it in plan.loader.load(plan.request):
            stream.append(it)
    except Exception as e:  # a loader bug must not lose the other benchmarks
        log.error("loader %s failed: %s", plan.loader.name, e)
        after = f" after {len(stream)} case(s)" if stream else ""
        crash.append(CaseError(plan.name, "*", "*", "load",
                               f"loader {plan.loader.name} failed{after}: {type(e).__name__}: {one_line(e)}"))
    items: dict[tuple[str, str], Case | CaseError] = {}
    for it in stream:
        if shard_of(it.case_id, shard_count) != shard_index:
            continue
        key = (it.model, it.case_id)
        if key in items:
            items[key].warnings.append(f"duplicate case id {it.case_id!r} for model {it.model!r} in the "
                                       f"{plan.loader.name} loader's output; the later copy was ignored")
            continue
        items[key] = it
    return sorted(items.values(), key=lambda c: (c.case_id, c.model, isinstance(c, CaseError))) + crash


def preflight(plan: BenchmarkPlan, items: list[Case | CaseError], hub: ModelHub,
              judges: JudgeHub | None = None) -> list[str]:
    """Backends (and judges) whose declared preflight fails for EVERY loaded case: their metrics are skipped with
    one message (what is missing, which setting fixes it) instead of failing every case. Returns the messages."""
    cases = [it for it in items if isinstance(it, Case)]
    if not cases:
        return []
    verdicts: dict[str, str | None] = {}  # backend -> first reason when it fails everywhere
    messages = []
    for name, metric in plan.metrics.items():
        if name in plan.skipped:
            continue
        if _judge_preflight(plan, name, metric, cases, judges, verdicts, messages):
            continue
        for role in metric.models:
            backend = hub.selection.get(role, "")
            spec = hub.specs.get(backend)
            if spec is None or spec.preflight is None:
                continue
            needing = [c for c in cases if metric.needs_models(c)]
            if not needing:
                continue
            if backend not in verdicts:
                reasons = [_preflight_one(spec, c) for c in needing]
                verdicts[backend] = reasons[0] if all(reasons) else None
            if verdicts[backend]:
                plan.skipped[name] = _with_alternatives(
                    f"{name} skipped: backend {backend} (models.{role}) cannot serve any of the {len(cases)} "
                    f"{plan.name} cases (e.g. {verdicts[backend]}); {spec.fix}", hub, role, backend)
                messages.append(plan.skipped[name])
                break
    return messages


def weight_free_fallback(plans: list[BenchmarkPlan], items: Mapping[str, list[Case | CaseError]],
                         hub: ModelHub) -> list[str]:
    """Roles whose backend the backend set chose (not the config) reads sidecars no case of the run has: the
    role gets the first weight-free backend the registry declares for it, so the default profile produces every
    value a weight-free backend can on videos without sidecars. Returns what it said (once per role)."""
    messages = []
    roles = sorted({r for p in plans for m in p.metrics.values() for r in m.models})
    for role in roles:
        backend = hub.selection.get(role, "")
        spec = hub.specs.get(backend)
        if role in hub.explicit or spec is None or spec.preflight is None:
            continue
        needing = list({id(c): c for p in plans for name, m in p.metrics.items()
                        if role in m.models and name not in p.skipped
                        for c in items.get(p.name, []) if isinstance(c, Case) and m.needs_models(c)}.values())
        if not needing or not all(_preflight_one(spec, c) for c in needing):
            continue
        free = sorted(s.name for s in hub.specs.values() if s.role == role and s.kind not in ("reference", "sidecar")
                      and not s.weights and s.preflight is None)
        if not free:
            continue
        hub.selection[role] = free[0]
        alt = role_alternatives(hub, role, free[0])
        messages.append(f"models.{role}: no video of this run has what {backend} reads "
                        f"({_preflight_one(spec, needing[0])}); using {free[0]} (weight-free) instead"
                        + (f"; {alt}" if alt else ""))
    return messages


def _judge_preflight(plan: BenchmarkPlan, name: str, metric: Metric, cases: list[Case], judges: JudgeHub | None,
                     verdicts: dict[str, str | None], messages: list[str]) -> bool:
    """A judge that cannot answer for any case (not configured: e.g. no answer files beside any video) skips the
    metric with one line saying how to configure it, as a missing API key does. True when it skipped."""
    for judge in metric.judge_names() if judges is not None else ():
        spec = judges.specs.get(judge)
        if spec is None or spec.preflight is None:
            continue
        key = f"judge:{judge}"
        if key not in verdicts:
            reasons = [_preflight_one(spec, c) for c in cases]
            verdicts[key] = reasons[0] if all(reasons) else None
        if verdicts[key]:
            plan.skipped[name] = (f"{name} skipped: judge {judge} cannot answer for any of the {len(cases)} "
                                  f"{plan.name} cases (e.g. {verdicts[key]}); {spec.fix}")
            messages.append(plan.skipped[name])
            return True
    return False


def _preflight_one(spec: Any, case: Case) -> str | None:
    """A backend's own check of one case; a check that crashes cannot judge, so it never skips anything."""
    try:
        return spec.preflight(case)
    except Exception as e:  # a plugin bug here must not end the run: the cases then fail one by one
        log.debug("preflight of %s failed on %s: %s", spec.name, case.key, one_line(e))
        return None


def resolve_generations(gens: Any, only: Iterable[str] | None) -> dict[str, Path]:
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
