"""D3-D6 metric ``wrbench.probes``: yes/no probes through a judge, the re-observation gate and the null policy.

The judge (``params.judge``) answers every probe of :mod:`worldrecall.plugins.wrbench.probes` about the whole
video with ``p_yes`` (a log-probability judge: ``qwen_vl_logprob``; the precomputed answers of a sidecar:
``wrbench_probe_sidecar``). A video with any unanswered probe fails the row (``thresholds.partial_probes: drop``,
the release's export of ``probe_status == "ok"`` rows only; ``score_available`` fails only what needs the
missing answer). D3/D4 must be non-null; D5/D6 are null exactly when the gate says not applicable, with the
gate's reason in the verdict — a null D5/D6 with an applicable gate fails the row. Answers the scores need that
the judge did not give (left out, or not a probability: NaN, text, outside [0, 1]) fail the measurement itself,
so nothing is stored and the next run asks the judge again. ``reobservation_support`` is the shared gate
(1 / 0), whose mean is the paper's re-observation support rate.

Gate sources (``params.gate_source``): ``evidence`` (official: the evidence record of
``export_runtime_v2_evidence_first``, from the manifest or the release's ``evidence.jsonl``; no record = not
applicable, ``missing_evidence``), ``probe_dimension`` (the P25 scorer's own D5/D6 gate probes),
``probe_shared`` (the P10 shared judgeability probes, asked in addition).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from worldrecall.core.components import MeasureContext, Metric, Value
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.core.digests import file_digest
from worldrecall.core.judges import JudgeError
from worldrecall.formats.safe_json import read_json
from worldrecall.plugins.wrbench import probes

GATE_SOURCES = ("evidence", "probe_dimension", "probe_shared")
# drop: the release (a video with an unanswered probe leaves every export); score_available: fail only the
# dimensions that need the missing answer
PARTIAL_PROBES = ("drop", "score_available")
SCHEMA = {"type": "yes_no_logprob", "yes": list(probes.YES_VARIANTS), "no": list(probes.NO_VARIANTS)}


def _probability(v: Any) -> float | None:
    """``v`` as a probability, or None when it is not one (a bool, text, NaN, outside [0, 1])."""
    if isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) and 0.0 <= f <= 1.0 else None


def load_catalog(path: str) -> dict[str, str] | None:
    """``{probe_id: question}`` from a JSON file (e.g. the release's exact question texts), or None."""
    if not path:
        return None
    doc = read_json(path)
    if not isinstance(doc, Mapping) or not all(isinstance(v, str) for v in doc.values()):
        raise CaseFailure(f"{path}: a prompt catalog is a JSON object {{probe_id: question text}}")
    return {str(k): v for k, v in doc.items()}


class ProbeScores(Metric):
    """D3 / D4 (visible), D5 / D6 (returned, gate-masked) and the shared re-observation gate."""

    name: ClassVar[str] = "wrbench.probes"
    benchmark: ClassVar[str] = "wrbench"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ("Yes/no probe log-probabilities: visible spatial (D3) / state (D4), returned "
                                  "spatial (D5) / event-state (D6) past the re-observation gate")
    primary: ClassVar[str] = "d6"
    values: ClassVar[dict[str, Value]] = {
        "d3": Value(higher_is_better=True, range=(0.0, 1.0), unit="", description="D3 visible spatial consistency"),
        "d4": Value(higher_is_better=True, range=(0.0, 1.0), unit="", description="D4 visible state consistency"),
        "d5": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                    description="D5 returned spatial consistency; null when the gate says not applicable"),
        "d6": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                    description="D6 returned event-state consistency; null when the gate says not applicable"),
        "reobservation_support": Value(higher_is_better=None, range=(0.0, 1.0), unit="",
                                       description="the shared re-observation judgeability gate (1 applicable)"),
    }
    params: ClassVar[dict[str, Any]] = {"judge": "qwen_vl_logprob", "fps": "2", "gate_source": "evidence",
                                        "prompt_catalog": "", "num_samples": 1}
    # score-time switch (re-scored from the stored answers)
    thresholds: ClassVar[dict[str, Any]] = {"partial_probes": "drop"}

    def judge_names(self) -> tuple[str, ...]:
        """The configured judge."""
        return (str(self.params["judge"]),)

    def cache_params(self, case: Case, alignment: Alignment) -> dict[str, Any]:
        """The question catalog's content (when a file gives it)."""
        p = self.params["prompt_catalog"]
        return {"prompt_catalog": file_digest(Path(p)) if p and Path(p).is_file() else None,
                "catalog_version": probes.CATALOG_VERSION}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Every probe's ``p_yes``, the judge's identity and precision, and the gate's inputs."""
        if self.params["gate_source"] not in GATE_SOURCES:
            raise CaseFailure(f"{self.name}.params.gate_source: expected one of {', '.join(GATE_SOURCES)}")
        if case.video is None:
            raise CaseFailure(f"{case.case_id}: no generated video")
        if not case.prompt:
            raise CaseFailure(f"{case.case_id}: no world_state_prompt to ask the probes about")
        asked = probes.catalog(str(self.params["gate_source"]), load_catalog(str(self.params["prompt_catalog"])))
        questions = [{"id": p.probe_id, "prompt": probes.build_prompt(case.prompt, p, str(self.params["fps"]))}
                     for p in asked]
        if ctx.judges is None:
            raise CaseFailure(f"{self.name}: no judge hub")
        judge = ctx.judges.get(str(self.params["judge"]))
        n = self.params["num_samples"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise CaseFailure(f"{self.name}.params.num_samples: a whole number >= 1, got {n!r}")
        samples: list[dict[str, float | None]] = []
        unusable: list[str] = []
        for _ in range(n):   # the release scores the video num_samples times and takes each probe's median
            resp = judge.ask(Path(case.video.path), "", questions, {**SCHEMA, "fps": str(self.params["fps"])})
            sample: dict[str, float | None] = {q["id"]: None for q in questions}
            for a in resp.answers:
                if str(a.get("id")) in sample and a.get("p_yes") is not None:
                    v = _probability(a["p_yes"])
                    if v is None:  # not a probability (NaN from a broken forward pass, text …): no answer
                        unusable.append(f"{a['id']}={a['p_yes']!r}")
                    sample[str(a["id"])] = v
            samples.append(sample)
        p_yes = samples[0] if n == 1 else probes.median_samples(samples, [q["id"] for q in questions])
        m = {"p_yes": p_yes, **({"samples": samples} if n > 1 else {}),
             "judge_model": resp.model_id or str(self.params["judge"]),
             "precision": dict(resp.usage or {}), "evidence": case.annotations.get("evidence"),
             "manifest_reobservation_support": case.annotations.get("reobservation_support"),
             "gate_source": str(self.params["gate_source"])}
        if any(v is None for v in p_yes.values()):
            # answers the scores need and the judge did not give are a failure of this ask, never a number nor a
            # stored measurement: the row fails with the reason and the next run asks the judge again
            try:
                self.score(m, self.thresholds)
            except CaseFailure as e:
                bad = f"; unusable answers: {', '.join(unusable)}" if unusable else ""
                raise JudgeError(f"judge {self.params['judge']} ({m['judge_model']}): {e}{bad}") from None
        return m

    def _gate(self, m: Mapping[str, Any]) -> probes.Gate:
        if m["gate_source"] == "evidence":
            return probes.evidence_gate(m.get("evidence"), m.get("manifest_reobservation_support"))
        # the release's probe-gated export reads the probes only, never the manifest's reobservation_support
        return probes.probe_gate(m["p_yes"], str(m["gate_source"]))

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """D3-D6 under the contract: D3/D4 never null, D5/D6 null only where the gate is not applicable."""
        p_yes = {k: (None if v is None else float(v)) for k, v in dict(measurement["p_yes"]).items()}
        scores, missing = probes.dimension_scores(p_yes)
        policy = str(thresholds.get("partial_probes", "drop"))
        if policy not in PARTIAL_PROBES:
            raise CaseFailure(f"{self.name}.thresholds.partial_probes: expected one of {', '.join(PARTIAL_PROBES)}, "
                              f"got {policy!r}")
        unanswered = probes.unanswered(p_yes)
        if policy == "drop" and unanswered:
            # the release exports only probe_status == "ok" videos (merge_sharded_outputs): one unanswered
            # probe the scorer asked, gate probes included, drops the video from D3-D6
            raise CaseFailure(f"probe_status partial: no answer to {', '.join(unanswered)} (the release drops "
                              "the video; thresholds.partial_probes: score_available scores what it can)")
        if scores["d3"] is None or scores["d4"] is None:
            raise CaseFailure(f"D3/D4 must be non-null; missing probe answers: {', '.join(missing)}")
        gate = self._gate(measurement)
        masked = probes.masked_oov(scores, gate)
        for dim, ok in (("d5", gate.d5), ("d6", gate.d6)):
            if ok and masked[dim] is None:
                raise CaseFailure(f"{dim.upper()} is null but its gate is applicable (missing probe answers: "
                                  f"{', '.join(missing)})")
        return {"d3": scores["d3"], "d4": scores["d4"], "d5": masked["d5"], "d6": masked["d6"],
                "reobservation_support": float(gate.shared)}

    def verdict(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> str:
        """The gate (and why D5/D6 are null) and which judge, at which precision, scored the probes."""
        gate = self._gate(measurement)
        prec = measurement.get("precision") or {}
        how = ", ".join(f"{k}={prec[k]}" for k in ("dtype", "attn_implementation", "device") if prec.get(k))
        g = ("gate applicable" if gate.shared else f"gate not applicable ({gate.shared_reason}): D5/D6 null") \
            if gate.d5 == gate.d6 == gate.shared else \
            f"D5 gate {'ok' if gate.d5 else gate.d5_reason}, D6 gate {'ok' if gate.d6 else gate.d6_reason}"
        return f"{g} [{gate.source}]; probes by {measurement['judge_model']}" + (f" ({how})" if how else "")
