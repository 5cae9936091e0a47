"""The rest of the official ``memory_loop`` suite beside Scene Memory F1 (``memory_loop.py``).

All read the turnaround aligner's shared pass — the return gate and the diverse revisit pairs
(``find_revisit_pairs`` + ``select_diverse_pairs``, at most ``max_scored_pairs``), memoised once per
rollout — and decode only the paired frames:

* ``memory_return_gate``: 0/1 diagnostic (never averaged into memory scores);
* ``memory_revisit_fidelity``: per pair w_sem·clamp((cos + 1)/2) + w_ssim·SSIM, frame B resized to A;
* ``memory_geometric_closure``: SIFT matches (role ``local_features``) against the epipolar geometry of
  the estimated poses;
* ``memory_rendering_recovery``: CIELAB lightness / chroma deltas and a texture (Gram) distance;
* ``memory_half_life``: the exponential decay of revisit fidelity against the time gap.

Statuses as released (``memory_loop.analyze_memory_rollout``, each component in its own ``try``) — except a
missing sidecar, which measures nothing and is a skipped row naming the file and how to produce it: a failed
gate, no pair on a decoded frame, no scorable pair, a refused fit, missing intrinsics
(closure), and a backend that raises while it runs (embedder: fidelity and half-life; texture model:
rendering recovery; matcher: closure) -> not applicable (None, the release's reason as the row's verdict).
A backend that cannot be built at all (``BackendUnavailable``) skips the metric, as everywhere in
worldrecall. The gate is the one ``memory_scene_f1`` uses (with worldrecall's absolute floor unless
``official_parity``). Measurements are threshold-free: every τ, weight and ``min_matches`` re-scores from
the cache.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Metric, MissingInput, Value
from worldrecall.core.data import Alignment, Case, one_line
from worldrecall.core.models import BackendUnavailable
from worldrecall.plugins.scene_memory.aligners import case_sidecar, missing_intrinsics, missing_vipe, skip_if_missing
from worldrecall.plugins.scene_memory.closure import measure_pair, pair_score
from worldrecall.plugins.scene_memory.exports import is_native_layout, read_release_intrinsics
from worldrecall.plugins.scene_memory.half_life import HalfLifeRefused, fit_half_life
from worldrecall.plugins.scene_memory.pair_frames import (
    clamp01,
    pair_frames,
    resize_like,
    rgb_stats,
    ssim_rgb,
    usable_pairs,
)
from worldrecall.plugins.scene_memory.rendering import colour_deltas, lab_means, pair_scores

_FACTS = ("gate", "gate_official", "departed", "returned", "n_pairs", "departure", "floor_passed")


class _SuiteMetric(Metric):
    """Shared gate handling and pair bookkeeping of the memory_loop pair metrics."""

    benchmark = "scene_memory"
    version = "1"
    higher_is_better = True
    range = (0.0, 1.0)
    thresholds: ClassVar[dict[str, Any]] = {"official_parity": False}

    def missing_inputs(self, case: Case) -> list[MissingInput]:
        """The rollout's ViPE sidecar (or precomputed clouds): every value here is computed from it."""
        return missing_vipe(case)

    def _facts(self, alignment: Alignment) -> dict[str, Any]:
        info = alignment.info
        skip_if_missing(info)  # every measure starts here: a missing sidecar is a skip saying how to produce it
        return {**{k: info.get(k) for k in _FACTS}, "missing": bool(info.get("missing")),
                "reason": str(info.get("reason", ""))}

    @staticmethod
    def gate_of(facts: Mapping[str, Any], th: Mapping[str, Any]) -> bool | None:
        """The gate that counts: official (parity) or with worldrecall's floor; None when unknown."""
        g = facts.get("gate_official") if th.get("official_parity") else facts.get("gate")
        return None if g is None else bool(g)

    def _pairs(self, case: Case, alignment: Alignment) -> list[dict[str, Any]]:
        pairs = list(alignment.info.get("scored_pairs") or [])
        if not pairs or case.video is None:
            return []
        return usable_pairs(pairs, case.video.num_frames)

    def _start(self, case: Case, alignment: Alignment) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """(the measurement's common part, the usable pairs); ``error`` says why nothing was measured."""
        out: dict[str, Any] = {"facts": self._facts(alignment), "pairs": [], "error": ""}
        pairs = self._pairs(case, alignment)
        if not pairs and alignment.info.get("scored_pairs"):
            out["error"] = "no revisit pair maps onto a decoded frame"  # the release's pair_error
        return out, pairs

    def needs_models(self, case: Case) -> bool:
        return "vipe" in case.sidecars

    @staticmethod
    def gate_reason(facts: Mapping[str, Any], th: Mapping[str, Any]) -> str:
        """Why a rollout is not scorable for memory (``memory_loop._gate_reason``), plus our floor's case."""
        if facts.get("missing"):
            return str(facts.get("reason") or "memory metrics require an estimated camera-pose sidecar")
        if not facts.get("departed"):
            return "camera never departed its anchor viewpoint, so returning to it does not test memory"
        if not facts.get("returned"):
            return "rollout never revisited an earlier viewpoint"
        if not th.get("official_parity") and facts.get("gate_official") and not facts.get("gate"):
            return "camera stayed within worldrecall's absolute departure floor (jitter is not a revisit)"
        return "no scorable revisit pair"

    def verdict(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> str | None:
        """The release's not-applicable reason when the primary value is None (else None)."""
        th = {**type(self).thresholds, **dict(thresholds)}
        try:
            value = self.score(measurement, th).get(self.primary)
        except BackendUnavailable:
            return None
        if value is not None:
            return None
        facts = measurement.get("facts") or {}
        if not self.gate_of(facts, th):
            return self.gate_reason(facts, th)
        return str(measurement.get("error") or self.empty_reason)

    empty_reason: ClassVar[str] = "no scorable revisit pair"


class MemoryReturnGate(_SuiteMetric):
    """``memory_return_gate``: did the camera depart and come back (0/1, a diagnostic)."""

    name = "scene_memory.memory_return_gate"
    description = ("whether the rollout departed and returned (diagnostic: how often memory can be scored at "
                   "all; not averaged into memory scores)")
    primary = "passed"
    values: ClassVar[dict[str, Value]] = {
        "passed": Value(higher_is_better=True, range=(0.0, 1.0), description="gate of memory_scene_f1 (official without the floor "
                                                       "under official_parity)"),
        "passed_official": Value(higher_is_better=True, range=(0.0, 1.0), description="departed and returned, as released"),
        "departed": Value(higher_is_better=True, range=(0.0, 1.0), description="d_0k* ≥ departure_factor × radius"),
        "returned": Value(higher_is_better=True, range=(0.0, 1.0), description="at least one revisit pair"),
        "n_pairs": Value(higher_is_better=None, range=None, description="revisit pairs found"),
    }

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        return {"facts": self._facts(alignment)}

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        th = {**type(self).thresholds, **dict(thresholds)}
        f = measurement["facts"]
        g = self.gate_of(f, th)

        def b(v: Any) -> float | None:
            return None if v is None else float(bool(v))

        return {"passed": b(g), "passed_official": b(f.get("gate_official")), "departed": b(f.get("departed")),
                "returned": b(f.get("returned")), "n_pairs": None if f.get("n_pairs") is None else float(f["n_pairs"])}


# Revisit fidelity and half-life measure the same pairs with the same embedder: the second of the two
# reuses the first's pair facts (one entry: the last case's). The entry holds the embedder it was made
# with, so a key naming that object's id cannot be reused by another.
_LAST_FIDELITY: dict[str, Any] = {}


def _fidelity_measure(metric: _SuiteMetric, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
    out, pairs = metric._start(case, alignment)
    if not pairs:
        return out
    embedder = ctx.models.get("revisit_embedder")
    key = (case.fingerprint(), json.dumps(pairs, sort_keys=True, default=str), id(embedder))
    if _LAST_FIDELITY.get("key") == key:
        out["pairs"] = [dict(p) for p in _LAST_FIDELITY["pairs"]]
        out["error"] = _LAST_FIDELITY["error"]
        return out
    a, b = pair_frames(case, pairs)  # decoded outside the guard: a decode failure is no backend failure
    try:
        out["pairs"] = _fidelity_pairs(case, pairs, a, b, embedder)
    except BackendUnavailable:
        raise
    except Exception as e:  # noqa: BLE001 - the release's fidelity_error: fidelity and half-life not applicable
        out["error"] = f"revisit embedder failed: {type(e).__name__}: {one_line(e, 300)}"
    _LAST_FIDELITY.clear()
    _LAST_FIDELITY.update(key=key, embedder=embedder, pairs=[dict(p) for p in out["pairs"]], error=out["error"])
    return out


def _fidelity_pairs(case: Case, pairs: list[dict[str, Any]], a: list[np.ndarray], b: list[np.ndarray],
                    embedder: Any) -> list[dict[str, Any]]:
    """Per pair: its facts plus the embedding cosine and RGB SSIM of its two frames (B resized to A)."""
    b = [resize_like(y, x) for x, y in zip(a, b)]
    emb = np.asarray(embedder.embed([*a, *b], case=case))
    if not np.issubdtype(emb.dtype, np.floating):
        emb = emb.astype(np.float64)
    # the cosine in the embedder's own precision (DINOv2: float32), as the release's np.dot of its features
    ea, eb = emb[: len(a)], emb[len(a):]
    stats: dict[int, Any] = {}  # a first frame's SSIM terms, shared by the pairs that start there
    for p, x in zip(pairs, a):
        if int(p["first_frame"]) not in stats:
            stats[int(p["first_frame"])] = rgb_stats(x)
    return [{**p, "cosine": float(np.dot(u, v)), "ssim": ssim_rgb(x, y, stats[int(p["first_frame"])])}
            for p, x, y, u, v in zip(pairs, a, b, ea, eb)]


def _fidelity_per_pair(pairs: list[dict[str, Any]], th: Mapping[str, Any]) -> list[float]:
    ws, wt, rel = float(th["semantic_weight"]), float(th["ssim_weight"]), bool(th["official_parity"])
    return [clamp01(ws * clamp01((p["cosine"] + 1.0) / 2.0, release=rel) + wt * float(p["ssim"]), release=rel)
            for p in pairs]


class MemoryRevisitFidelity(_SuiteMetric):
    """``memory_revisit_fidelity``: does a revisited viewpoint look the way it first did."""

    name = "scene_memory.memory_revisit_fidelity"
    description = ("mean over pose-matched revisit pairs of 0.7·(embedding cosine + 1)/2 + 0.3·SSIM "
                   "(DINOv2 CLS under models=reference)")
    primary = "fidelity"
    models = ("revisit_embedder",)
    values: ClassVar[dict[str, Value]] = {
        "fidelity": Value(higher_is_better=True, range=(0.0, 1.0), description="mean pair fidelity"),
        "semantic": Value(higher_is_better=True, range=(0.0, 1.0), description="mean clamp((cos + 1)/2)"),
        "ssim": Value(higher_is_better=True, range=(0.0, 1.0), description="mean RGB SSIM of the pairs"),
        "n_pairs": Value(higher_is_better=None, range=None, description="pairs scored"),
    }
    thresholds: ClassVar[dict[str, Any]] = {"official_parity": False, "semantic_weight": 0.7, "ssim_weight": 0.3}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        return _fidelity_measure(self, case, alignment, ctx)

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        th = {**type(self).thresholds, **dict(thresholds)}
        pairs = list(measurement.get("pairs") or [])
        none = {"fidelity": None, "semantic": None, "ssim": None, "n_pairs": float(len(pairs))}
        if not self.gate_of(measurement["facts"], th) or not pairs or measurement.get("error"):
            return none
        per = _fidelity_per_pair(pairs, th)
        rel = bool(th["official_parity"])
        return {"fidelity": float(np.mean(per)),
                "semantic": float(np.mean([clamp01((p["cosine"] + 1.0) / 2.0, release=rel) for p in pairs])),
                "ssim": float(np.mean([p["ssim"] for p in pairs])), "n_pairs": float(len(pairs))}


class MemoryHalfLife(_SuiteMetric):
    """``memory_half_life``: how long revisit fidelity survives (exponential fit over the pair gaps)."""

    name = "scene_memory.memory_half_life"
    description = ("half-life (s) of revisit fidelity fitted as a·exp(−gap/τ) + b over the revisit pairs; "
                   "not applicable when the fit is refused")
    primary = "half_life_s"
    higher_is_better = True
    range = None
    models = ("revisit_embedder",)
    values: ClassVar[dict[str, Value]] = {
        "half_life_s": Value(higher_is_better=True, range=None, unit="s", description="τ·ln 2 of the fit"),
        "score": Value(higher_is_better=True, range=(0.0, 1.0), description="clamp(half-life / reference seconds), the released raw"),
        "tau_s": Value(higher_is_better=True, range=None, unit="s", description="decay constant of the fit"),
        "r_squared": Value(higher_is_better=None, range=None, description="fit quality R²"),
        "n_points": Value(higher_is_better=None, range=None, description="pairs in the fit"),
    }
    thresholds: ClassVar[dict[str, Any]] = {"official_parity": False, "semantic_weight": 0.7, "ssim_weight": 0.3,
                                            "min_points": 5, "min_r_squared": 0.3, "reference_s": 60.0}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        return _fidelity_measure(self, case, alignment, ctx)

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        th = {**type(self).thresholds, **dict(thresholds)}
        pairs = list(measurement.get("pairs") or [])
        none = {"half_life_s": None, "score": None, "tau_s": None, "r_squared": None,
                "n_points": float(len(pairs))}
        if not self.gate_of(measurement["facts"], th) or not pairs or measurement.get("error"):
            return none
        try:
            fit = fit_half_life([p["gap_s"] for p in pairs], _fidelity_per_pair(pairs, th),
                                min_points=int(th["min_points"]), min_r_squared=float(th["min_r_squared"]))
        except HalfLifeRefused:
            return none
        return {"half_life_s": fit["half_life_s"], "tau_s": fit["tau_s"], "r_squared": fit["r_squared"],
                "n_points": float(fit["n_points"]),
                "score": clamp01(fit["half_life_s"] / max(float(th["reference_s"]), 1e-6),
                                 release=bool(th["official_parity"]))}

    def verdict(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> str | None:
        """As :meth:`_SuiteMetric.verdict`; the fit's own refusal, or the embedder's failure, as released."""
        th = {**type(self).thresholds, **dict(thresholds)}
        pairs = list(measurement.get("pairs") or [])
        err = str(measurement.get("error") or "")
        if self.gate_of(measurement.get("facts") or {}, th) and pairs and not err:
            try:
                fit_half_life([p["gap_s"] for p in pairs], _fidelity_per_pair(pairs, th),
                              min_points=int(th["min_points"]), min_r_squared=float(th["min_r_squared"]))
            except HalfLifeRefused as e:
                return str(e)
            return None
        if err.startswith("revisit embedder failed"):
            measurement = {**measurement, "error": f"revisit fidelity is unavailable, so its decay cannot be "
                                                   f"fitted: {err}"}
        return super().verdict(measurement, th)


class MemoryGeometricClosure(_SuiteMetric):
    """``memory_geometric_closure``: do revisited frames obey the geometry their estimated poses imply."""

    name = "scene_memory.memory_geometric_closure"
    description = ("SIFT matches (role local_features) of each revisit pair against the epipolar geometry of "
                   "the estimated poses: "
                   "exp(−median epipolar error / 4 px), averaged with exp(−reprojection / 8 px) with a baseline")
    primary = "closure"
    models = ("local_features",)
    values: ClassVar[dict[str, Value]] = {
        "closure": Value(higher_is_better=True, range=(0.0, 1.0), description="mean pair score over pairs with enough matches"),
        "epipolar_error_px": Value(higher_is_better=False, range=None, unit="px", description="mean pair median epipolar error"),
        "n_scored": Value(higher_is_better=None, range=None, description="pairs with ≥ min_matches SIFT matches"),
        "n_pairs": Value(higher_is_better=None, range=None, description="pairs measured"),
    }
    thresholds: ClassVar[dict[str, Any]] = {"official_parity": False, "min_matches": 12, "epipolar_tau_px": 4.0,
                                            "reprojection_tau_px": 8.0}

    empty_reason = "no revisit pair produced enough SIFT correspondences, or intrinsics are missing"

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        out, pairs = self._start(case, alignment)
        out["release_readable"] = True
        if not pairs:
            return out
        sc = case_sidecar(case, need_depth=False)
        if missing_intrinsics(sc):
            # as released: no intrinsics -> no pair is matched or scored, the metric is not applicable
            out["error"] = missing_intrinsics(sc)
            out["pairs"] = [{**p, "n_matches": 0, "baseline": None, "epipolar_error": None,
                             "reprojection_error": None, "n_triangulated": 0} for p in pairs]
            return out
        # the release uses intrinsics.npy only as [N,3,3] (else no pair is scored); ours reads the others too
        out["release_readable"] = not is_native_layout(sc.source) and read_release_intrinsics(sc.source) is not None
        K, P = sc.intrinsics, sc.poses_c2w
        matcher = ctx.models.get("local_features")
        a, b = pair_frames(case, pairs)
        try:
            matches = matcher.match(list(zip(a, b)), case=case)
            for p, m in zip(pairs, matches):
                i, j = int(p["first_row"]), int(p["revisit_row"])
                Ki, Kj = K[min(i, len(K) - 1)], K[min(j, len(K) - 1)]
                out["pairs"].append({**p, **measure_pair(m, P[i], P[j], Ki, Kj)})
        except BackendUnavailable:
            raise
        except Exception as e:  # noqa: BLE001 - the release's geometric_error: not applicable
            out["pairs"], out["error"] = [], f"geometric closure failed: {type(e).__name__}: {one_line(e, 300)}"
        return out

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        th = {**type(self).thresholds, **dict(thresholds)}
        pairs = list(measurement.get("pairs") or [])
        out: dict[str, float | None] = {"closure": None, "epipolar_error_px": None, "n_scored": 0.0,
                                        "n_pairs": float(len(pairs))}
        if not self.gate_of(measurement["facts"], th) or not pairs or measurement.get("error"):
            return out
        if th["official_parity"] and not measurement.get("release_readable", True):
            return out
        kw = {"min_matches": int(th["min_matches"]), "epipolar_tau": float(th["epipolar_tau_px"]),
              "reprojection_tau": float(th["reprojection_tau_px"]), "release_clamp": bool(th["official_parity"])}
        scored = [(s, p) for p in pairs if (s := pair_score(p, **kw)) is not None]
        if not scored:
            return out
        return {"closure": float(np.mean([s for s, _ in scored])),
                "epipolar_error_px": float(np.mean([p["epipolar_error"] for _, p in scored])),
                "n_scored": float(len(scored)), "n_pairs": float(len(pairs))}


class MemoryRenderingRecovery(_SuiteMetric):
    """``memory_rendering_recovery``: are lighting, colour and texture the same on revisit."""

    name = "scene_memory.memory_rendering_recovery"
    description = ("CIELAB lightness (τ 6) and chroma (τ 8) deltas of the spatial means and a texture Gram "
                   "distance (τ 0.002, VGG19 under models=reference) per revisit pair, exp(−Δ/τ) averaged")
    primary = "recovery"
    optional_models = ("texture",)
    values: ClassVar[dict[str, Value]] = {
        "recovery": Value(higher_is_better=True, range=(0.0, 1.0), description="mean pair score"),
        "lighting": Value(higher_is_better=True, range=(0.0, 1.0), description="mean exp(−ΔL/τ)"),
        "chroma": Value(higher_is_better=True, range=(0.0, 1.0), description="mean exp(−Δab/τ)"),
        "texture": Value(higher_is_better=True, range=(0.0, 1.0), description="mean exp(−gram/τ)"),
        "texture_fallback": Value(higher_is_better=None, range=(0.0, 1.0), description="1: no texture backend, colour-only score "
                                                                   "(the release's fallback, official_parity)"),
        "n_pairs": Value(higher_is_better=None, range=None, description="pairs scored"),
    }
    thresholds: ClassVar[dict[str, Any]] = {"official_parity": False, "lightness_tau": 6.0, "chroma_tau": 8.0,
                                            "gram_tau": 0.002}

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        out, pairs = self._start(case, alignment)
        out["texture_error"] = ""
        if not pairs:
            return out
        try:
            texture = ctx.models.get("texture")
        except BackendUnavailable as e:
            texture, out["texture_error"] = None, str(e)
        a, b = pair_frames(case, pairs)
        try:
            out["pairs"] = self._pairs_measured(pairs, a, b, texture, out)
        except Exception as e:  # noqa: BLE001 - the release's rendering_error: not applicable
            out["pairs"], out["error"] = [], f"rendering recovery failed: {type(e).__name__}: {one_line(e, 300)}"
        return out

    @staticmethod
    def _pairs_measured(pairs: list[dict[str, Any]], a: list[np.ndarray], b: list[np.ndarray], texture: Any,
                        out: dict[str, Any]) -> list[dict[str, Any]]:
        """Per pair: colour deltas and the texture distance (None: the release's colour-only fallback, taken
        when no texture backend can be built or it raises ImportError — the release catches only that)."""
        means: dict[int, tuple[float, float, float]] = {}  # a first frame's colour means, shared by its pairs
        measured = []
        for p, x, y in zip(pairs, a, b):
            y = resize_like(y, x)
            if int(p["first_frame"]) not in means:
                means[int(p["first_frame"])] = lab_means(x)
            light, chroma = colour_deltas(x, y, means[int(p["first_frame"])])
            gram = None
            if texture is not None:
                try:
                    gram = float(texture.distance(x, y))
                except (ImportError, BackendUnavailable) as e:
                    out["texture_error"] = str(e)
            measured.append({**p, "lightness_delta": light, "chroma_delta": chroma, "gram_distance": gram})
        return measured

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        th = {**type(self).thresholds, **dict(thresholds)}
        pairs = list(measurement.get("pairs") or [])
        out: dict[str, float | None] = {"recovery": None, "lighting": None, "chroma": None, "texture": None,
                                        "texture_fallback": None, "n_pairs": float(len(pairs))}
        if not self.gate_of(measurement["facts"], th) or not pairs or measurement.get("error"):
            return out
        fallback = any(p.get("gram_distance") is None for p in pairs)
        if fallback and not th["official_parity"]:
            # by default a missing texture backend skips the metric (the released colour-only fallback is
            # a different number); parity reproduces that fallback and flags it
            raise BackendUnavailable(measurement.get("texture_error") or
                                     f"{self.name}: no texture backend (set models.texture=<name>)")
        # parity: each pair without a texture distance takes the colour-only mean, as released (per pair)
        per = [pair_scores(p, lightness_tau=float(th["lightness_tau"]), chroma_tau=float(th["chroma_tau"]),
                           gram_tau=float(th["gram_tau"]), release_clamp=bool(th["official_parity"]))
               for p in pairs]
        return {"recovery": float(np.mean([s["score"] for s in per])),
                "lighting": float(np.mean([s["lighting"] for s in per])),
                "chroma": float(np.mean([s["chroma"] for s in per])),
                "texture": None if fallback else float(np.mean([s["texture"] for s in per])),
                "texture_fallback": float(fallback), "n_pairs": float(len(pairs))}


SUITE_METRICS = (MemoryReturnGate, MemoryRevisitFidelity, MemoryGeometricClosure, MemoryRenderingRecovery,
                 MemoryHalfLife)
