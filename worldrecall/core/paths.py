"""Path safety: paths read from manifests and sheets may never leave their data root."""

from __future__ import annotations

from pathlib import Path

from worldrecall.core.data import CaseFailure


def safe_join(root: Path | str, relative: str | Path, *, what: str = "path") -> Path:
    """``root / relative``, refusing absolute paths and ``..`` tricks (symlinks included) that escape ``root``."""
    try:  # a NUL byte (ValueError) or an over-long name (OSError) in a sheet/manifest cell: this case only
        root = Path(root).resolve()
        rel = Path(relative)
        if rel.is_absolute():
            candidate = rel.resolve()
        else:
            candidate = (root / rel).resolve()
        if "\0" in str(candidate):
            raise ValueError("embedded null byte")
        candidate.exists()  # resolve() is lenient; a name too long for the file system raises here
    except (OSError, ValueError) as e:
        problem = getattr(e, "strerror", None) or e
        raise CaseFailure(f"{what} {str(relative)[:120]!r}: unusable path ({problem})") from None
    if candidate != root and root not in candidate.parents:
        raise CaseFailure(f"{what} {str(relative)!r} escapes the data root {root}")
    return candidate
