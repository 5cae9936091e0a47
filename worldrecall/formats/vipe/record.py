"""The in-memory sidecar record: :class:`Sidecar` (one row per frame ViPE kept) and :class:`RowStack`
(rows decoded on access, so a long native depth stack is never held in memory)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure

__all__ = ["RowStack", "Sidecar"]


@dataclass
class Sidecar:
    """One video's camera sidecar, one row per frame ViPE kept (rows in increasing frame order).

    ``depth`` may be a read-only memory map (converted layout) or a :class:`RowStack` decoding frames on
    access (native ViPE zip); ``valid`` is the stored mask, or a :class:`RowStack` of ``finite & depth >
    0`` when none is stored, and ``None`` only when depth was not requested. Index rows (``depth[i]``)
    rather than materialising whole stacks.
    """

    source: Path
    poses_c2w: np.ndarray              # [N,4,4] float64, OpenCV camera axes (x right, y down, z forward)
    intrinsics: np.ndarray | None      # [N,3,3] float64, pixel K matching the depth maps (None: read with
                                       # need_intrinsics=False from a converted folder that has none)
    depth: np.ndarray | RowStack | None   # [N,h,w] float32 metric depth (m)
    valid: np.ndarray | RowStack | None   # [N,h,w] bool
    frame_indices: np.ndarray          # [N] int64 source-video frame of each row
    timestamps: np.ndarray | None      # [N] float64 seconds
    instance_ids: np.ndarray | None    # [N,H,W] uint8/uint16, 0 = background (worldrecall extra)
    instances: dict | None             # instances.json content (worldrecall extra)
    layout: str = "converted"          # converted | vipe_native
    notes: list[str] = field(default_factory=list)  # non-fatal findings (e.g. a corrupt EXR read as NaN)
    files: dict[str, Path] = field(default_factory=dict, repr=False)  # role -> file read (for messages)

    def __len__(self) -> int:
        return int(self.poses_c2w.shape[0])

    @property
    def depth_size(self) -> tuple[int, int] | None:
        """(width, height) of the depth maps, or None without depth."""
        if self.depth is None:
            return None
        return int(self.depth.shape[2]), int(self.depth.shape[1])

    def row_for_frame(self, i: int) -> int:
        """The row holding video frame ``i``; CaseFailure naming the sidecar when ViPE has no row for it."""
        fi = self.frame_indices
        k = int(np.searchsorted(fi, int(i)))
        if k < len(fi) and int(fi[k]) == int(i):
            return k
        raise CaseFailure(f"{self.source}: no sidecar row for video frame {int(i)} "
                          f"(rows cover {len(fi)} frames in [{int(fi[0]) if len(fi) else '-'}, "
                          f"{int(fi[-1]) if len(fi) else '-'}])")

    def nearest_row(self, i: int) -> int:
        """The row whose frame index is closest to video frame ``i`` (ties go to the earlier row)."""
        fi = self.frame_indices
        k = int(np.searchsorted(fi, int(i)))
        if k <= 0:
            return 0
        if k >= len(fi):
            return len(fi) - 1
        return k - 1 if (int(i) - int(fi[k - 1])) <= (int(fi[k]) - int(i)) else k


class RowStack:
    """A read-only ``[N, h, w]`` stack whose rows are produced on access (decoded EXR, derived mask).

    Long native ViPE outputs hold thousands of full-resolution depth frames; consumers read a few rows,
    so nothing is decoded up front. Supports ``stack[i]``, ``stack[a:b]``, ``len``, ``shape``, ``dtype``
    and ``np.asarray(stack)`` (decodes everything).
    """

    ndim = 3

    def __init__(self, n: int, hw: tuple[int, int], dtype: np.dtype | type, fetch: Callable[[int], np.ndarray]):
        self.shape = (int(n), int(hw[0]), int(hw[1]))
        self.dtype = np.dtype(dtype)
        self._fetch = fetch

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> np.ndarray:
        rest: tuple = ()
        if isinstance(key, tuple):
            key, rest = key[0], key[1:]
        if isinstance(key, slice):
            out = np.stack([self._row(i) for i in range(*key.indices(self.shape[0]))]) \
                if len(range(*key.indices(self.shape[0]))) else np.zeros((0, *self.shape[1:]), self.dtype)
        elif isinstance(key, (int, np.integer)):
            i = int(key) + (self.shape[0] if int(key) < 0 else 0)
            if not 0 <= i < self.shape[0]:
                raise IndexError(f"row {int(key)} out of range for {self.shape[0]} rows")
            out = self._row(i)
        else:
            out = np.stack([self._row(int(i)) for i in np.asarray(key).ravel()])
        return out[(slice(None), *rest)] if rest and out.ndim == 3 else (out[rest] if rest else out)

    def _row(self, i: int) -> np.ndarray:
        return np.asarray(self._fetch(i), dtype=self.dtype)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self[0: self.shape[0]]
        return a if dtype is None else a.astype(dtype)
