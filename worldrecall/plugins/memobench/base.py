"""What every MemoBench metric shares: its benchmark name and small helpers for frames and roles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from worldrecall.core.components import MeasureContext, Metric, batched  # noqa: F401  (re-exported)
from worldrecall.core.data import Alignment, Case, CaseFailure
from worldrecall.core.models import BackendUnavailable


class MemoBenchMetric(Metric):
    """Base for ``memobench.*`` metrics (roles a metric can do without go in ``optional_models``:
    LPIPS in pixel fidelity, the segmenter in the camera gate)."""

    benchmark: ClassVar[str] = "memobench"


def phase_info(alignment: Alignment) -> tuple[int, int, int]:
    """(h, r, N) of a ``memobench.phases`` alignment."""
    try:
        return int(alignment.info["h"]), int(alignment.info["r"]), int(alignment.info["N"])
    except KeyError:
        raise CaseFailure("alignment lacks h / r / N (use the memobench.phases aligner)") from None


def capped_frames(case: Case, max_side: int) -> np.ndarray:
    """Generated frames downsized so the long side is <= ``max_side`` (official 640 cap; 0 = native)."""
    if case.video is None:
        raise CaseFailure(f"{case.case_id}: no generated video")
    return case.video.resized(max_side) if max_side > 0 else case.video.frames()


def pick(frames: np.ndarray, indices: Sequence[int]) -> list[np.ndarray]:
    """Frames at ``indices`` with out-of-range requests clamped to [0, N-1] (official readers)."""
    n = len(frames)
    return [frames[min(max(int(i), 0), n - 1)] for i in indices]


def optional_model(ctx: MeasureContext, role: str) -> tuple[Any | None, str | None]:
    """(model, backend name) for an optional role, or (None, None) when it is unset or unavailable."""
    try:
        model = ctx.models.get(role)
    except BackendUnavailable:
        return None, None
    return model, ctx.models.selection.get(role)


