"""Progress bars for long stages (the suite build, scoring): tqdm when enabled, silent otherwise."""

from __future__ import annotations

from typing import Any


class _Silent:
    def update(self, n: int = 1) -> None: ...
    def close(self) -> None: ...


def progress_bar(total: int, desc: str, *, enabled: bool, already: int = 0, unit: str = "case") -> Any:
    """A bar over ``total`` items of which ``already`` were done before this run (a resumed run): they are
    shown as done but do not count towards the rate, so a resume never reports millions of cases/s."""
    if not enabled:
        return _Silent()
    from tqdm import tqdm

    return tqdm(total=total, initial=already, desc=desc, unit=unit, leave=True, dynamic_ncols=True)
