"""Path safety: paths read from manifests and sheets may never leave their data root."""

from __future__ import annotations

from pathlib import Path

from worldrecall.core.data import CaseFailure


def safe_join(root: Path | str, relative: str | Path, *, what: str = "path") -> Path:
    """``root / relative``, refusing absolute paths and ``..`` tricks (symlinks included) that escape ``root``."""
    root = Path(root).resolve()
    rel = Path(relative)
    if rel.is_absolute():
        candidate = rel.resolve()
    else:
        candidate = (root / rel).resolve()
    if candidate != root and root not in candidate.parents:
        raise CaseFailure(f"{what} {str(relative)!r} escapes the data root {root}")
    return candidate
