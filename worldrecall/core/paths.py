"""Path safety: paths read from manifests and sheets may never leave their data root."""

from __future__ import annotations

from pathlib import Path

from worldrecall.core.data import CaseFailure


def path_problem(e: BaseException) -> str:
    """What is wrong with a path, in a few words (``embedded null byte``, ``File name too long``)."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return " ".join(str(e).split())[:120] or type(e).__name__


def probe(path: Path | str, what: str = "path") -> Path:
    """``path`` when the operating system can look it up (it need not exist); a NUL byte or an over-long
    name -> :class:`CaseFailure` naming it, so that ``is_file()`` / ``is_dir()`` cannot raise later."""
    p = Path(path)
    try:
        if "\0" in str(p):
            raise ValueError("embedded null byte")
        p.exists()  # ENAMETOOLONG and friends raise here, not only "does not exist"
    except (OSError, ValueError) as e:
        raise CaseFailure(f"{what} {str(p)[:120]!r}: unusable path ({path_problem(e)})") from None
    return p


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
        raise CaseFailure(f"{what} {str(relative)[:120]!r}: unusable path ({path_problem(e)})") from None
    if candidate != root and root not in candidate.parents:
        raise CaseFailure(f"{what} {str(relative)!r} escapes the data root {root}")
    return candidate
