"""What a run can score, said before it runs: per benchmark and metric, ``runs`` / ``cannot run`` (on how many
cases), what is missing and what fixes it.

Built from exactly what the run reads — the plans' skips (a backend, weights, judge or key missing; a backend
whose preflight fails everywhere), the loaders' per-case errors and each metric's declared inputs
(:func:`~worldrecall.engine.stages.plan.declared_missing`, the same call the pipeline's skip makes) — with
nothing aligned or measured. ``worldrecall check`` prints :func:`full_lines`; ``worldrecall run`` says
:func:`run_lines` at its start when anything cannot run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from worldrecall.core.components import Benchmark, split_ref
from worldrecall.core.data import Case, CaseError, one_line
from worldrecall.engine.stages.plan import BenchmarkPlan, declared_missing

EXIT_HEADLINE_BLOCKED = 1  # `worldrecall check`: a requested headline cannot run on any case (2 stays for usage)


@dataclass
class Blocker:
    """One reason a metric cannot run, on how many cases, with one example of where it was looked for."""

    line: str
    cases: int = 0
    example: str = ""


@dataclass
class MetricReadiness:
    """One metric of one benchmark: how many of the benchmark's cases it can run on, and why not the others."""

    name: str
    n_cases: int
    plan_reason: str = ""  # skipped on every case by the plan (backend, weights, judge, key)
    blockers: dict[str, Blocker] = field(default_factory=dict)  # per-case reasons, by wording
    blocked_cases: int = 0
    headline: bool = False

    @property
    def runs_on(self) -> int:
        return 0 if self.plan_reason else self.n_cases - self.blocked_cases

    def add(self, key: str, line: str, example: str = "") -> None:
        b = self.blockers.setdefault(key, Blocker(line, 0, example))
        b.cases += 1


@dataclass
class BenchmarkReadiness:
    """One benchmark: its loaded cases, the cases its loader could not load, and each enabled metric."""

    name: str
    n_cases: int
    models: int
    not_loaded: list[str]  # the loader's one-line reasons, one per case it could not load
    metrics: dict[str, MetricReadiness]

    def blocked_headlines(self) -> list[str]:
        """Requested headline metrics that run on no case."""
        return [m.name for m in self.metrics.values() if m.headline and m.runs_on == 0]


def readiness(plans: list[BenchmarkPlan], items: Mapping[str, list[Case | CaseError]],
              declared: Mapping[str, Benchmark]) -> list[BenchmarkReadiness]:
    """Each plan's metrics against its loaded items (``items[plan.name]``); ``declared``: the registry's
    benchmark declarations, whose headline metrics decide ``worldrecall check``'s exit code."""
    out = []
    for plan in plans:
        its = items.get(plan.name, [])
        errors = [it for it in its if isinstance(it, CaseError)]
        heads = {split_ref(ref)[0] for ref in declared[plan.name].headline} if plan.name in declared else set()
        metrics = {}
        for name, metric in plan.metrics.items():
            m = MetricReadiness(name, len(its), plan.skipped.get(name, ""), headline=name in heads)
            if not m.plan_reason:
                for it in its:
                    if isinstance(it, CaseError):
                        m.add("\0load", "the case could not be loaded (below)")
                        m.blocked_cases += 1
                        continue
                    missing = declared_missing(metric, it)
                    for mi in missing:  # grouped by what is missing and its fix; the path is an example
                        m.add(f"{mi.kind}\0{mi.what}\0{mi.fix}",
                              " ".join(f"missing {mi.what}{f': {mi.fix}' if mi.fix else ''}".split()), mi.path)
                    m.blocked_cases += bool(missing)
            metrics[name] = m
        out.append(BenchmarkReadiness(plan.name, len(its), len({it.model for it in its}),
                                      [f"{e.model}/{e.case_id}: {one_line(e.reason)}" for e in errors], metrics))
    return out


def _cases(n: int) -> str:
    return f"{n} case{'' if n == 1 else 's'}"


def _reason(text: str, metric: str) -> str:
    """A plan's skip reason without its ``<metric> skipped:`` head (the line already names the metric)."""
    head = f"{metric} skipped: "
    return text.removeprefix(head)


def full_lines(report: list[BenchmarkReadiness], examples: int = 3) -> list[str]:
    """``worldrecall check``'s printout: every benchmark and metric, what is missing and what fixes it."""
    lines: list[str] = []
    for b in report:
        lines.append(f"{b.name}: {_cases(b.n_cases)} ({b.models} model{'' if b.models == 1 else 's'})"
                     + (f", {len(b.not_loaded)} not loaded" if b.not_loaded else ""))
        width = max((len(n) for n in b.metrics), default=0)
        for m in b.metrics.values():
            tag = "  [headline]" if m.headline else ""
            if m.plan_reason:
                lines.append(f"  {m.name:<{width}}  cannot run ({'any' if not m.n_cases else 'all'} "
                             f"{_cases(m.n_cases)}){tag}")
                lines.append(f"      - {_reason(m.plan_reason, m.name)}")
            elif m.runs_on == m.n_cases and m.n_cases:
                lines.append(f"  {m.name:<{width}}  runs ({_cases(m.n_cases)}){tag}")
            elif not m.n_cases:
                lines.append(f"  {m.name:<{width}}  cannot run (no case loaded){tag}")
            else:
                what = "cannot run" if m.runs_on == 0 else f"runs on {m.runs_on} of {m.n_cases} cases; cannot run"
                lines.append(f"  {m.name:<{width}}  {what} on {_cases(m.blocked_cases)}{tag}")
                for bl in m.blockers.values():
                    eg = f" (e.g. {bl.example})" if bl.example else ""
                    lines.append(f"      - {bl.line}{eg} [{_cases(bl.cases)}]")
        for reason in b.not_loaded[:examples]:
            lines.append(f"  not loaded: {reason}")
        if len(b.not_loaded) > examples:
            lines.append(f"  not loaded: … and {len(b.not_loaded) - examples} more")
    return lines


def run_lines(report: list[BenchmarkReadiness]) -> list[str]:
    """What ``worldrecall run`` says at its start: a line per benchmark whose loader could not load some cases,
    and one per metric and reason for what cannot run on some cases for an input they lack. The plan's
    whole-metric skips are said by the run's own skip lines, each once."""
    out = []
    for b in report:
        if b.not_loaded:
            out.append(f"{b.name}: {len(b.not_loaded)} of {_cases(b.n_cases)} could not be loaded and fail "
                       f"(e.g. {b.not_loaded[0]})")
        for m in b.metrics.values():
            if m.plan_reason:
                continue
            for key, bl in m.blockers.items():
                if key == "\0load":
                    continue
                eg = f" (e.g. {bl.example})" if bl.example else ""
                out.append(f"{m.name} cannot run on {bl.cases} of {b.n_cases} {b.name} cases: {bl.line}{eg}")
    return out


def headline_lines(report: list[BenchmarkReadiness]) -> list[str]:
    """The closing verdict of ``worldrecall check``: which requested headlines cannot run on any case."""
    blocked = [f"{b.name} ({', '.join(b.blocked_headlines())})" for b in report if b.blocked_headlines()]
    if blocked:
        return [f"headline cannot run on any case: {'; '.join(blocked)}"]
    return ["every requested headline can run on at least one case"]
