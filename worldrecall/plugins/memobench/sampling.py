"""MemoBench's phase mapping and every metric's frame sampling, as pure functions.

All index arithmetic follows the official code exactly: Python ``round`` (half to even) where it rounds,
``int()`` truncation where it samples uniformly, divide-before-multiply in the phase mapping (errata 1),
and the same clamps. Nothing here reads files or frames.
"""

from __future__ import annotations

PHASE_NAMES = ("V", "D", "R", "ALL")


def map_boundary(x_gt: int, gt_frames: int, gen_frames: int) -> int:
    """GT boundary -> generated frame: ``round(x_gt / G * N)`` in float64, divide first (errata 1).

    ``h_gt=54, G=196, N=49``: 54/196*49 = 13.4999… -> 13 (exact arithmetic would give 13.5 -> 14).
    """
    return int(round(x_gt / gt_frames * gen_frames))


def phase_bounds(h_gt: int, r_gt: int, gt_frames: int, gen_frames: int) -> tuple[int, int]:
    """(h, r) on the generated axis with the official clamps.

    h = max(2, min(h, N - 4)); r = max(h + 2, min(r, N - 1)). For N < 6 this can give r >= N; the
    official code then requests frames past the end, which the readers clamp.
    """
    if gt_frames <= 0:
        raise ValueError(f"GT frame count must be positive, got {gt_frames}")
    h = map_boundary(h_gt, gt_frames, gen_frames)
    r = map_boundary(r_gt, gt_frames, gen_frames)
    h = max(2, min(h, gen_frames - 4))
    r = max(h + 2, min(r, gen_frames - 1))
    return int(h), int(r)


def phase_ranges(h: int, r: int, n: int) -> dict[str, tuple[int, int]]:
    """Inclusive phase ranges: V = [0, h], D = [h, r], R = [r, N-1], ALL = [0, N-1] (boundaries shared)."""
    return {"V": (0, h), "D": (h, r), "R": (r, n - 1), "ALL": (0, n - 1)}


def step_indices(start: int, end: int, step: int, n: int) -> list[int]:
    """``start, start+step, … <= end`` with start clamped to >= 0 and end to <= N-1 (``iter_indices``)."""
    return list(range(max(0, start), min(n - 1, end) + 1, step))


def uniform_indices(start: int, end: int, n_sample: int, n: int) -> list[int]:
    """``n_sample`` indices spread over [start, end] by ``start + int(i*(n_range-1)/(n_sample-1))``.

    Start and end are first clamped into the video (start to [0, N-1], end to [start, N-1]). A range of
    one frame (or ``n_sample <= 1``) gives ``[start]``.
    """
    start = max(0, min(start, n - 1))
    end = max(start, min(end, n - 1))
    n_range = end - start + 1
    if n_sample <= 1 or n_range <= 1:
        return [start]
    return [start + int(i * (n_range - 1) / (n_sample - 1)) for i in range(n_sample)]


# -- per-metric sampling -------------------------------------------------------------------------

def motion_phase_indices(h: int, r: int, n: int, step: int = 4) -> dict[str, list[int] | None]:
    """Motion smoothness samples: V = 0, step, … <= h; R = r, r+step, … <= N-1.

    A phase the official code does not score at all is ``None``: V needs h >= 2 (always true after the
    clamps), R needs N - 1 - r >= 2.
    """
    return {
        "V": step_indices(0, h, step, n) if h >= 2 else None,
        "R": step_indices(r, n - 1, step, n) if (n - 1 - r) >= 2 else None,
    }


def visual_quality_indices(n: int, step: int = 4) -> list[int]:
    """Aesthetic and IQA samples: 0, step, 2*step, … <= N-1."""
    return step_indices(0, n - 1, step, n)


def identity_indices(r: int, n: int, n_sample: int = 9) -> list[int]:
    """Object-identity samples in R: ``r + int(i*(n_R-1)/8)``, i = 0..8 (N=81, r=54 -> 54,57,…,76,80)."""
    return uniform_indices(r, n - 1, n_sample, n)


def geo_phase_indices(start: int, end: int, n: int, n_sample: int = 3) -> list[int]:
    """Geometry samples of one phase (start, midpoint, end); ``[]`` when the phase spans <= 1 frame.

    An empty list means the phase scores mean = min = 0.0 (official). V uses [0, h], R uses [r, N-1].
    """
    s = max(0, min(start, n - 1))
    e = max(s, min(end, n - 1))
    if n_sample <= 1 or e - s + 1 <= 1:
        return []
    return uniform_indices(start, end, n_sample, n)


def image_reward_indices(n: int, n_sample: int = 5) -> list[int]:
    """ImageReward samples over the whole video: ``int(i*(N-1)/(n_sample-1))`` (N=81 -> 0,20,40,60,80)."""
    return [int(i * (n - 1) / (n_sample - 1)) for i in range(n_sample)]


def ors_indices(r: int, n: int) -> list[int]:
    """ORS scores every frame r … N-1 (empty when r >= N)."""
    return list(range(r, n))


def resample_gt_indices(gt_start: int, gt_end: int, count: int) -> list[int]:
    """GT indices matched to ``count`` generated frames: ``round(gt_s + i*(gt_e-gt_s)/(count-1))``.

    ``count == 1`` or ``gt_s == gt_e`` repeats ``gt_s``; ``count <= 0`` gives ``[]``.
    """
    if count <= 0:
        return []
    if count == 1 or gt_start == gt_end:
        return [gt_start] * count
    return [round(gt_start + i * (gt_end - gt_start) / (count - 1)) for i in range(count)]


def pixel_phase_indices(h: int, r: int, n: int, h_gt: int, r_gt: int,
                        gt_frames: int) -> dict[str, tuple[list[int], list[int]]]:
    """Per phase (V, D, R, ALL): every generated index and the matching resampled GT indices.

    GT ranges use the raw sheet values: (0, h_gt), (h_gt, r_gt), (r_gt, G-1), (0, G-1). Empty phases are
    left out (the official code skips them).
    """
    g_last = gt_frames - 1
    defs = {"V": (0, h, 0, h_gt), "D": (h, r, h_gt, r_gt), "R": (r, n - 1, r_gt, g_last),
            "ALL": (0, n - 1, 0, g_last)}
    out: dict[str, tuple[list[int], list[int]]] = {}
    for name, (gs, ge, ts, te) in defs.items():
        gen = list(range(gs, ge + 1))
        if gen:
            out[name] = (gen, resample_gt_indices(ts, te, len(gen)))
    return out


def pose_resample_indices(gt_count: int, n: int) -> list[int]:
    """GT pose rows for N generated frames: identity when counts agree, else ``round(i*(G-1)/(N-1))``.

    Raises ZeroDivisionError for N = 1 with G != 1 (the official metric is NaN then).
    """
    if gt_count == n:
        return list(range(n))
    return [round(i * (gt_count - 1) / (n - 1)) for i in range(n)]


def revisit_pairs(r_gt: int, gt_frames: int, r: int, n: int) -> list[tuple[int, int]]:
    """GTRevisitSim's 3 (GT, generated) pairs: ``int(r_gt + k*(G-1-r_gt)/2)``, ``int(r + k*(N-1-r)/2)``."""
    return [(int(r_gt + k * (gt_frames - 1 - r_gt) / 2), int(r + k * (n - 1 - r) / 2)) for k in range(3)]
