"""D2 metric ``wrbench.visual_integrity``: candidate E of the contract on the ``cls_patch_embedder`` role.

Frames are sampled by :func:`worldrecall.plugins.wrbench.d2.sample_indices`, the release's sampler (official:
3 fps, at most 24, at least 4; an unknown frame rate takes evenly spaced frames as there; the release's runtime example — 2 fps, at most 16 — is ``params.sampling: example_config``), embedded
full-FoV (resize-and-pad) and scored by :func:`worldrecall.plugins.wrbench.d2.visual_integrity`. The tokens are
stored, so the score is re-derived without the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Metric, Value
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.plugins.wrbench import d2

SAMPLINGS = {"official": d2.OFFICIAL_SAMPLING, "example_config": d2.EXAMPLE_CONFIG_SAMPLING}


class VisualIntegrity(Metric):
    """``score`` = min(CLS first-last cosine, 20th percentile of adjacent-pair best-match patch lows)."""

    name: ClassVar[str] = "wrbench.visual_integrity"
    benchmark: ClassVar[str] = "wrbench"
    version: ClassVar[str] = "2"  # 2: the release's frame sampler (last frame kept, truncating thinning)
    description: ClassVar[str] = "D2 visual integrity: min(CLS first-last cosine, local patch-token low p20)"
    primary: ClassVar[str] = "score"
    models: ClassVar[tuple[str, ...]] = ("cls_patch_embedder",)
    values: ClassVar[dict[str, Value]] = {
        "score": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                       description="D2 (d2_selected_visual_integrity_score)"),
        "cls_first_last": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                                description="clipped cosine of the first and last sampled frames' CLS tokens"),
        "local_low_p20": Value(higher_is_better=True, range=(0.0, 1.0), unit="",
                               description="20th percentile over adjacent pairs of their best-match low (p20)"),
        "frames": Value(higher_is_better=None, range=None, unit="frames", description="sampled frames"),
    }
    params: ClassVar[dict[str, Any]] = {"sampling": "official", "sample_fps": 0.0, "max_frames": 0, "min_frames": 0,
                                        "policy": ""}

    def sampling(self) -> dict[str, Any]:
        """The sampling in force: the named preset, each of its keys overridable (0 / "" = the preset's)."""
        if self.params["sampling"] not in SAMPLINGS:
            raise CaseFailure(f"{self.name}.params.sampling: expected one of {', '.join(SAMPLINGS)}, "
                              f"got {self.params['sampling']!r}")
        s = dict(SAMPLINGS[self.params["sampling"]])
        for key, p in (("fps", "sample_fps"), ("max_frames", "max_frames"), ("min_frames", "min_frames"),
                       ("policy", "policy")):
            if self.params[p]:
                s[key] = self.params[p]
        return s

    def measure(self, case: Case, alignment: Alignment, ctx: MeasureContext) -> dict[str, Any]:
        """Sampled frame indices and their CLS / patch tokens."""
        if case.video is None:
            raise CaseFailure(f"{case.case_id}: no generated video")
        fps = case.video.fps
        # an unknown frame rate falls back to evenly spaced frames, as the release's sampler does
        video_fps = float(fps) if fps and fps > 0 else None
        s = self.sampling()
        idx = d2.sample_indices(case.video.num_frames, video_fps, str(s["policy"]), float(s["fps"]),
                                int(s["min_frames"]), int(s["max_frames"]))
        frames = case.video.frames_at(idx)
        cls, patches = ctx.models.get("cls_patch_embedder").cls_and_patches(frames, case=case, indices=idx)
        cls, patches = np.asarray(cls, np.float32), np.asarray(patches, np.float32)
        if len(cls) != len(idx) or len(patches) != len(idx):
            raise CaseFailure(f"cls_patch_embedder returned {len(cls)}/{len(patches)} frames for {len(idx)}")
        if not (np.all(np.isfinite(cls)) and np.all(np.isfinite(patches))):
            # the release's clip reads a non-finite cosine as 0: a broken embedding would score, not fail
            raise CaseFailure(f"{case.video.path}: cls_patch_embedder returned non-finite tokens")
        return {"indices": np.asarray(idx, np.int64), "cls": cls, "patches": patches}

    def score(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> dict[str, float | None]:
        """D2 and its two terms (None below two sampled frames)."""
        r = d2.visual_integrity(np.asarray(measurement["cls"]), np.asarray(measurement["patches"]))
        return {"score": r["score"], "cls_first_last": r["cls_first_last"], "local_low_p20": r["local_low_p20"],
                "frames": float(r["frames"])}

    def verdict(self, measurement: Mapping[str, Any], thresholds: Mapping[str, Any]) -> str | None:
        """Why D2 is null, or which adjacent pair is lowest."""
        r = d2.visual_integrity(np.asarray(measurement["cls"]), np.asarray(measurement["patches"]))
        if r["score"] is None:
            return f"D2 null: {r['frames']} sampled frame(s), two are needed"
        idx = np.asarray(measurement["indices"]).tolist()
        i = r["lowest_pair"]
        return f"lowest pair: frames {idx[i]}-{idx[i + 1]} (of {r['frames']} sampled)"
