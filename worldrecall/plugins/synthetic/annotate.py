"""Exit / re-enter annotations computed from instance masks (never from the plan).

A target is *fully in view* in a frame when it has pixels and none of them touch the image border; it is
*fully out* when it has no pixels. ``exits`` is the first frame fully out after the target was seen,
``back`` the first later frame with any target pixel, ``re_enter`` the first frame from ``back`` on where it
is fully in view again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from worldrecall.plugins.synthetic.render import TARGET_ID


@dataclass(frozen=True)
class Visibility:
    """Per-frame target presence and full visibility."""

    present: np.ndarray  # [N] bool: any target pixel
    full: np.ndarray  # [N] bool: present and not touching the border
    pixels: np.ndarray  # [N] int: target pixel count


@dataclass(frozen=True)
class ExitReenter:
    """Frame indices (0-based) of the first full exit, the first return of any pixel, the full re-entry."""

    exits: int | None
    back: int | None
    re_enter: int | None

    @property
    def complete(self) -> bool:
        return None not in (self.exits, self.back, self.re_enter)


def visibility(ids: np.ndarray, target_id: int = TARGET_ID) -> Visibility:
    """Target visibility per frame of an ``[N, H, W]`` instance-id stack."""
    m = np.asarray(ids) == target_id
    pixels = m.reshape(len(m), -1).sum(axis=1)
    border = (
        m[:, 0, :].any(axis=1) | m[:, -1, :].any(axis=1) | m[:, :, 0].any(axis=1) | m[:, :, -1].any(axis=1)
    )
    present = pixels > 0
    return Visibility(present, present & ~border, pixels)


def exit_reenter(vis: Visibility) -> ExitReenter:
    """First full exit after a sighting, first pixel back after it, first full re-entry from there."""
    seen = False
    exits = back = re_enter = None
    for i, p in enumerate(vis.present):
        if exits is None:
            if p:
                seen = True
            elif seen:
                exits = i
        elif back is None and p:
            back = i
        if back is not None and vis.full[i]:
            re_enter = i
            break
    return ExitReenter(exits, back, re_enter)
