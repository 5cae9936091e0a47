"""The ``mind.pairs`` aligner: which generated frame is compared with which GT frame (or with which frame of its
own mirror half).

Memory clips (release ``process.py``): the generated video continues the GT after ``mark_time``, so generated
frame ``i`` is compared with GT frame ``mark_time + i`` for ``i < real_time``, where
``real_time = min(total_time - mark_time, sample_frames)``, capped by ``video_max_time`` when given
(``0`` here = the release's default ``None``). The release reads both videos in batches of
``process_batch_size · 10 = 100`` frames and stops as soon as the GT reader reports its end — *before* scoring
the batch that reached it — so the last batch (partial or full) is never scored: ``release_batches: true``
(official) reproduces that (``scored = 100 · (ceil(real_time / 100) - 1)``; a clip of at most 100 frames gets
no LCM/DINO/visual value, which the release leaves out of its JSON — a skipped row here), ``false`` scores all
``real_time`` pairs. A GT video shorter than ``mark_time + real_time`` fails the case (the release errors on the
mismatched batch).

Mirror videos: ``first`` = frames ``[0, n/2)``, ``second`` = ``[n/2, n)`` compared time-reversed (frame ``i``
with ``n - 1 - i``); an odd frame count is an error as released.

``frame_size`` (``info["frame_size"]``, read by every pixel metric): ``release`` (official) brings every frame
to 1280 × 720 as the release does; ``native`` keeps the decoded size (both videos of a pair must share it) —
the synthetic suite's setting, where upscaling small frames to 720p would only cost time.

Phases are on the generated video's axis: ``prediction`` (memory clips) or ``first`` / ``second`` (mirror);
``info`` holds ``mark_time``, ``total_time``, ``sample_frames``, ``real_time``, ``scored_frames``,
``gt_start`` (the GT frame of generated frame 0) and, when nothing is scored, ``skip`` (the reason).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

from worldrecall.core.components import Aligner
from worldrecall.core.data import Alignment, Case, CaseFailure, Phase
from worldrecall.plugins.mind.frames import FRAME_SIZES

RELEASE_BATCH = 100   # process_batch_size (10) * 10 frames per read_batch


def scored_frames(real_time: int, release_batches: bool, batch: int = RELEASE_BATCH) -> int:
    """How many leading pairs the release scores out of ``real_time`` (its last batch is dropped)."""
    if real_time <= 0:
        return 0
    if not release_batches:
        return real_time
    return batch * (math.ceil(real_time / batch) - 1)


class MindPairs(Aligner):
    """Generated vs GT frame pairs from ``mark_time`` (memory clips); first vs reversed second half (mirror)."""

    name: ClassVar[str] = "mind.pairs"
    description: ClassVar[str] = "MIND frame pairs: generated i <-> GT mark_time+i (release batching), mirror halves"
    defaults: ClassVar[dict[str, Any]] = {
        "video_max_time": 0,          # 0 = None (the release's CLI default: every frame)
        "release_batches": True,      # true (official): the release's last read batch is never scored
        "batch_frames": RELEASE_BATCH,
        "frame_size": "release",      # release (official: every frame brought to 1280x720) | native (decoded size)
    }
    min_frames: ClassVar[int] = 1

    def align(self, case: Case, params: Mapping[str, Any]) -> Alignment:
        """The case's pairs (module doc); CaseFailure naming the file on bad input."""
        p = {**self.defaults, **dict(params)}
        if p["frame_size"] not in FRAME_SIZES:
            raise CaseFailure(f"mind.pairs: frame_size {p['frame_size']!r}: expected one of {', '.join(FRAME_SIZES)}")
        if case.video is None:
            raise CaseFailure(f"{case.case_id}: no generated video")
        ann = case.annotations
        n = case.video.num_frames
        if ann.get("mirror"):
            if n < 2:
                raise CaseFailure(f"{case.video.path}: {n} frame(s); the mirror test needs two halves")
            if n % 2 == 1:
                raise CaseFailure(f"{case.video.path}: frame count {n} is not an even number (the mirror test "
                                  f"compares two halves)")
            h = n // 2
            return Alignment({"first": Phase("first", 0, h - 1), "second": Phase("second", h, n - 1)},
                             {"mirror": True, "sample_frames": n, "mark_time": h, "scored_frames": h,
                              "frame_size": p["frame_size"]})
        if ann.get("gt_missing"):
            return Alignment({}, {"sample_frames": n, "scored_frames": 0, "skip": str(ann["gt_missing"]),
                                  "frame_size": p["frame_size"]})
        mark, total = int(ann["mark_time"]), int(ann["total_time"])
        real = min(total - mark, n)
        vmt = int(p["video_max_time"] or 0)
        if vmt > 0:
            real = min(real, vmt)
        batch = int(p["batch_frames"])
        if batch < 1:
            raise CaseFailure(f"mind.pairs: batch_frames must be >= 1 (got {batch})")
        scored = scored_frames(real, bool(p["release_batches"]), batch)
        info: dict[str, Any] = {"mark_time": mark, "total_time": total, "sample_frames": n, "real_time": real,
                                "scored_frames": scored, "gt_start": mark, "video_max_time": vmt or None,
                                "release_batches": bool(p["release_batches"]),
                                "frame_size": p["frame_size"]}
        if case.reference is not None and scored > 0:
            g = case.reference.num_frames
            if g < mark + real:
                raise CaseFailure(f"{case.reference.path}: {g} frames, but the comparison reads GT frames "
                                  f"{mark}..{mark + real - 1} (mark_time {mark}, {real} frames)")
            info["gt_frames"] = g
        if scored == 0:
            why = (f"nothing to compare: {real} frame(s) after mark_time {mark} "
                   f"(sample {n} frames, total_time {total})") if real <= 0 else \
                  (f"{real} frame(s) fit in the release's first read batch of {batch}, which it never scores "
                   f"(release_batches: true; false scores them)")
            info["skip"] = why
            return Alignment({}, info)
        return Alignment({"prediction": Phase("prediction", 0, scored - 1)}, info)
