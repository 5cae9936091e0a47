"""The first present key of an ``.npz`` file, read safely (headers checked before a member is inflated)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from worldrecall.core.data import CaseFailure
from worldrecall.formats.arrays import load_npz, npz_names

__all__ = ["load_npz_key"]


def load_npz_key(path: Path, keys: tuple[str, ...]) -> tuple[np.ndarray, str]:
    """The array under the first of ``keys`` present in ``path`` and that key; CaseFailure naming the file
    and the keys found when none is."""
    for k in keys:  # the first present key only: each member's header is checked before it is inflated
        got = load_npz(path, (k,))
        if k in got:
            return got[k], k
    found = ", ".join(npz_names(path)) or "none"
    raise CaseFailure(f"{path}: none of the keys {', '.join(keys)} (found: {found})")
