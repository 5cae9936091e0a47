"""The ``memobench.phases`` aligner: GT exit / re-enter frames -> V, D, R phases of the generated video."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from worldrecall.core.components import Aligner
from worldrecall.core.data import Alignment, Case, CaseFailure, Phase
from worldrecall.plugins.memobench import sampling


class PhaseAligner(Aligner):
    """Maps the sheet's (h_gt, r_gt) onto N generated frames with the official rounding and clamps.

    ``info`` holds G (and where it came from), h_gt, r_gt, h, r, N, plus ``h_ors``/``r_ors``: the same
    mapping with the GT frame count the official ORS script uses (intrinsics rows / ``FRAMES/`` files),
    None when that source is missing.
    """

    name: ClassVar[str] = "memobench.phases"
    description: ClassVar[str] = "MemoBench V/D/R phases (round(h_gt / G * N), clamps, shared boundary frames)"
    defaults: ClassVar[dict[str, Any]] = {"official_parity": False}
    # h = max(2, min(h, N-4)) and r = max(h+2, min(r, N-1)) keep V, D and R inside the video only for N >= 6;
    # shorter videos make the official code read past the end (clamped), so they are scored only under parity
    min_frames: ClassVar[int] = 6

    def align(self, case: Case, params: Mapping[str, Any]) -> Alignment:
        """Phases V = [0, h], D = [h, r], R = [r, N-1], ALL = [0, N-1] on the generated frame axis."""
        ann = case.annotations
        try:
            h_gt, r_gt, g = int(ann["h_gt"]), int(ann["r_gt"]), int(ann["G"])
        except (KeyError, TypeError, ValueError):
            raise CaseFailure(f"{case.case_id}: annotations lack h_gt / r_gt / G (not a memobench case?)") from None
        if g <= 0:
            raise CaseFailure(f"{case.case_id}: GT frame count G = {g} ({ann.get('G_source')})")
        if case.video is None:
            raise CaseFailure(f"{case.case_id}: no generated video")
        n = case.video.num_frames
        h, r = sampling.phase_bounds(h_gt, r_gt, g, n)
        g_ors = ann.get("G_ors")
        h_ors, r_ors = sampling.phase_bounds(h_gt, r_gt, int(g_ors), n) if g_ors else (None, None)
        phases = {name: Phase(name, s, e) for name, (s, e) in sampling.phase_ranges(h, r, n).items()}
        info = {"G": g, "G_source": ann.get("G_source"), "h_gt": h_gt, "r_gt": r_gt, "h": h, "r": r, "N": n,
                "G_ors": g_ors, "h_ors": h_ors, "r_ors": r_ors}
        return Alignment(phases=phases, info=info)
