"""One wording for "that name does not exist": the unknown name, the known ones, and the closest match.

Every place that looks a user-typed name up (a benchmark in ``only``, a model in ``models_only``, a metric,
a backend, a suite, a registry lookup) words its error with :func:`unknown_name`, so a typo always reads
the same and always says what was probably meant.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"did you mean 'memobench'?"`` for the closest known name (difflib, cutoff 0.6), else ``""``."""
    close = difflib.get_close_matches(str(name), sorted(set(map(str, known))), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else ""


def unknown_name(kind: str, name: str, known: Iterable[str], where: str = "") -> str:
    """One line: ``<where>: unknown <kind> 'x'; known: a, b, c; did you mean 'a'?``."""
    known = sorted(set(map(str, known)))
    hint = did_you_mean(name, known)
    head = f"{where}: " if where else ""
    return f"{head}unknown {kind} {name!r}; known: {', '.join(known) or 'none'}" + (f"; {hint}" if hint else "")
