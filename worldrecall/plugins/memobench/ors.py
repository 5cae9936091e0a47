"""MemoBench Object Revisit Score (ORS): is the target found again in every frame of R?

Measure: the ``segmenter`` role (SAM-3 in the paper) on every R frame r … N-1 at native resolution with
the clip's text query — synthetic: the prompt's "… (subject) …" phrase, real: the ``subject`` column —
storing each candidate's mask coverage (pixels / (W·H)) and score. Score: a frame is detected when a
candidate with score >= ``min_score`` (inclusive, as the official comparison: with the default 0.0 a
candidate scored exactly 0.0 still counts) has coverage in [area_min, area_max] (fallback band
[area_min, area_max_fallback] when the first is empty); its confidence is the best such score.
``ORS = n_d / n_R · mean(confidence of detected frames)``; n_R = 0 or n_d = 0 -> 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, MissingInput, Value
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.core.models import Detection
from worldrecall.plugins.memobench import gt as gt_io
from worldrecall.plugins.memobench import rounding, sampling
from worldrecall.plugins.memobench.base import MemoBenchMetric, batched, phase_info


def candidate_arrays(per_frame: list[list[Detection]]) -> dict[str, np.ndarray]:
    """Flatten detections to (frame position, coverage, score) arrays; coverage = mask pixels / (W·H)."""
    fr, cov, sc = [], [], []
    for k, dets in enumerate(per_frame):
        for d in dets:
            m = np.asarray(d.mask, dtype=bool)
            fr.append(k)
            cov.append(int(m.sum()) / m.size)
            sc.append(float(d.score))
    return {"cand_frame": np.asarray(fr, dtype=np.int64), "cand_coverage": np.asarray(cov, dtype=np.float64),
            "cand_score": np.asarray(sc, dtype=np.float64)}


def frame_confidences(cand_frame: np.ndarray, cand_coverage: np.ndarray, cand_score: np.ndarray, n_frames: int,
                      area_min: float, area_max: float, area_max_fallback: float,
                      min_score: float) -> list[float | None]:
    """Per frame: best in-band score, or None when not detected (official two-band rule).

    Frame by frame, as the official loop: a frame's candidates with score >= ``min_score`` (inclusive: a
    0.0-score candidate is detected at min_score 0.0), the first band where one has coverage in it, that
    band's best score. Computed for all frames at once (a re-score job scores every case's R frames)."""
    n = max(int(n_frames), 0)
    frame = np.asarray(cand_frame)
    cov, sc = np.asarray(cand_coverage), np.asarray(cand_score)
    keep = (frame >= 0) & (frame < n) & (sc >= min_score)  # a candidate of no R frame is never looked at
    frame, cov, sc = frame[keep].astype(np.int64), cov[keep], sc[keep]
    found = np.zeros(n, dtype=bool)
    best = np.full(n, -np.inf)
    for upper in (area_max, area_max_fallback):  # the fallback band only for frames the first left empty
        band = (cov >= area_min) & (cov <= upper) & ~found[frame]
        hit = np.zeros(n, dtype=bool)
        hit[frame[band]] = True
        np.maximum.at(best, frame[band], sc[band].astype(np.float64))
        found |= hit
    return [float(b) if f else None for b, f in zip(best.tolist(), found.tolist())]


def ors_values(confidences: list[float | None]) -> tuple[float, float, float, int]:
    """(ORS, detection rate, mean confidence, n_detected), unrounded; all 0 when nothing is detected."""
    n_r = len(confidences)
    det = [c for c in confidences if c is not None]
    if n_r == 0:
        return 0.0, 0.0, 0.0, 0
    rate = len(det) / n_r
    mean_conf = float(np.mean(det)) if det else 0.0
    return rate * mean_conf, rate, mean_conf, len(det)


class ORS(MemoBenchMetric):
    """``ors`` on 0-1 (leaderboard ×100 in the official CSV, 0-1 in the paper)."""

    name: ClassVar[str] = "memobench.ors"
    description: ClassVar[str] = "Object Revisit Score: detection rate × mean confidence of the target over R"
    primary: ClassVar[str] = "score"
    values: ClassVar[dict[str, Value]] = {
        "score": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                       description="object revisit score: detection rate x mean confidence over R"),
        "score_raw": Value(higher_is_better=True, range=(0.0, 1.0), unit="", description="ORS unrounded"),
        "detection_rate": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                description="fraction of R-phase frames where the object is detected"),
        "mean_confidence": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                 description="mean detection confidence over detected R frames"),
        "n_detected": Value(higher_is_better=None, range=None, unit="frames",
                            description="R-phase frames with a detection"),
        "n_r_frames": Value(higher_is_better=None, range=None, unit="frames",
                            description="R-phase frames scored"),
    }
    models: ClassVar[tuple[str, ...]] = ("segmenter",)
    params: ClassVar[dict[str, Any]] = {
        "r_source": "ors",          # ors: r from the GT count compute_ors.py uses (intrinsics rows / FRAMES) | alignment
        "query_source": "official",  # official: synthetic prompt phrase, real subject | subject: the subject column
    }
    thresholds: ClassVar[dict[str, Any]] = {"area_min": 0.0005, "area_max": 0.50, "area_max_fallback": 0.70,
                                            "min_score": 0.0}

    def missing_inputs(self, case: Case) -> list[MissingInput]:
        """The file ORS counts the GT frames of (``r_source: ors``) and the segmenter's query (the clip's
        sam3_metadata subject): the other metrics of the clip do not read them."""
        out = gt_io.missing_ors_frame_count(case) if self.params["r_source"] == "ors" else []
        query = case.annotations.get("ors_query") or case.subject
        if self.params["query_source"] != "official":
            query = case.subject
        if not query and case.annotations.get("split") in ("synthetic", "real"):
            name = f"{case.annotations['split']}_metadata.csv"
            where = str(Path(case.data_root) / "sam3_metadata" / name) if case.data_root is not None else name
            out.append(MissingInput(f"subject of clip {case.case_id}", where,
                                    "add the clip's row (the object ORS segments) from the MemoBench release"))
        return out

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Every candidate (coverage, score) of every R frame at native resolution."""
        if case.video is None:
            raise CaseFailure(f"{case.case_id}: no generated video")
        frames = case.video.frames()
        _, r, n = phase_info(alignment)
        if self.params["r_source"] == "ors":
            if alignment.info.get("r_ors") is None:
                raise CaseFailure(f"{case.case_id}: no GT frame count for ORS ({case.annotations.get('G_ors_source')} "
                                  "missing: intrinsics.npy rows / FRAMES/ files)")
            r = int(alignment.info["r_ors"])
        if self.params["query_source"] == "official":
            query = case.annotations.get("ors_query") or case.subject
        else:
            query = case.subject
        if not query:
            raise CaseFailure(f"{case.case_id}: no segmenter query (subject missing from sam3_metadata)")
        idx = sampling.ors_indices(r, n)
        model = ctx.models.get("segmenter")
        parts: list[dict[str, np.ndarray]] = []
        done = 0
        for chunk in batched(idx, ctx.batch_size):
            dets = model.segment([frames[i] for i in chunk], query, case=case, indices=list(chunk))
            if len(dets) != len(chunk):
                raise CaseFailure(f"segmenter returned {len(dets)} frames of candidates for {len(chunk)} frames")
            # reduce masks to (coverage, score) per batch: full-resolution masks of every R frame would not fit
            part = candidate_arrays(dets)
            part["cand_frame"] = part["cand_frame"] + done
            parts.append(part)
            done += len(chunk)
        cand = {k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, dt)
                for k, dt in (("cand_frame", np.int64), ("cand_coverage", np.float64), ("cand_score", np.float64))}
        return {"r": r, "n_r": len(idx), "query": query, **cand}

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """``score`` = ORS (4 dp), detection rate, mean confidence, counts."""
        conf = frame_confidences(np.asarray(measurement["cand_frame"]), np.asarray(measurement["cand_coverage"]),
                                 np.asarray(measurement["cand_score"]), int(measurement["n_r"]),
                                 thresholds["area_min"], thresholds["area_max"], thresholds["area_max_fallback"],
                                 thresholds["min_score"])
        ors, rate, mean_conf, n_d = ors_values(conf)
        return {
            "score": rounding.round_py(ors, 4),
            "score_raw": ors,
            "detection_rate": rounding.round_py(rate, 4),
            "mean_confidence": rounding.round_py(mean_conf, 4),
            "n_r_frames": float(len(conf)),
            "n_detected": float(n_d),
        }

    def artifacts(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any], out_dir: Path) -> list[Path]:
        """``ors_trace.json``: the target's confidence on each R frame (0 = not detected), for the report."""
        conf = frame_confidences(np.asarray(measurement["cand_frame"]), np.asarray(measurement["cand_coverage"]),
                                 np.asarray(measurement["cand_score"]), int(measurement["n_r"]),
                                 thresholds["area_min"], thresholds["area_max"], thresholds["area_max_fallback"],
                                 thresholds["min_score"])
        ors, _, _, n_d = ors_values(conf)
        trace = {"kind": "worldrecall.trace", "title": f"ORS {ors:.3f}: target detected on {n_d}/{len(conf)} R frames",
                 "x_label": f"R-phase frame (from frame r = {int(measurement['r'])})", "y_label": "confidence",
                 "x": list(range(len(conf))), "y_range": [0.0, 1.0],
                 "series": [{"label": "best in-band confidence (0 = not detected)",
                             "y": [0.0 if c is None else round(float(c), 4) for c in conf]}],
                 "hlines": [{"y": float(thresholds["min_score"]), "label": "min_score"}] if thresholds["min_score"] else []}
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "ors_trace.json"
        path.write_text(json.dumps(trace))
        return [path]
