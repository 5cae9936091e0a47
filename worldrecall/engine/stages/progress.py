"""Progress for long stages (scoring): a tqdm bar on a terminal, a few plain lines elsewhere, silent when off.

When stderr is not a terminal (CI, ``tee``, a SLURM log) a redrawn bar would land in the log as hundreds of
lines, so each stage writes one plain line at most every :data:`LINE_EVERY_S` seconds and one final line.
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO, Any

LINE_EVERY_S = 10.0  # without a terminal: at most one progress line per stage this often


class _Silent:
    def update(self, n: int = 1) -> None: ...
    def close(self) -> None: ...


class LineProgress:
    """tqdm's ``update``/``close`` as plain lines: ``memobench: 96/192 cases (50%), 2.1 cases/s, ~46 s left``
    at most every ``every`` seconds, and ``memobench: 192/192 cases in 1m32s`` when closed. The clock starts at
    the first update (a runner makes every stage's bar before scoring the first). Cases done before this run
    (``already``) count as done but not towards the rate."""

    def __init__(self, total: int, desc: str, *, already: int = 0, unit: str = "case", every: float = LINE_EVERY_S,
                 stream: IO[str] | None = None, clock: Any = time.monotonic) -> None:
        self.total, self.desc, self.unit, self.every = total, desc, unit, every
        self.n = self.already = already
        self.stream, self.clock = stream, clock
        self.start: float | None = None
        self.last, self.first = 0.0, already
        self.closed = False

    def _line(self, text: str) -> None:
        print(text, file=self.stream if self.stream is not None else sys.stderr, flush=True)

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if self.start is None:  # the rate counts the cases finished after this one
            self.start, self.last, self.first = now, now, self.n
        if now - self.last < self.every or self.n >= self.total:
            return  # the last case is reported by close()
        self.last = now
        rate = (self.n - self.first) / max(now - self.start, 1e-9)
        left = f", ~{_duration((self.total - self.n) / rate)} left" if rate > 0 else ""
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        self._line(f"{self.desc}: {self.n}/{self.total} {self.unit}s{pct}, {rate:.1f} {self.unit}s/s{left}")

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        before = f" ({self.already} done before)" if self.already else ""
        took = _duration(self.clock() - self.start) if self.start is not None else "0 s"
        self._line(f"{self.desc}: {self.n}/{self.total} {self.unit}s in {took}{before}")


def _duration(seconds: float) -> str:
    s = max(round(seconds), 0)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s} s"


def is_terminal(stream: IO[str] | None = None) -> bool:
    """Whether ``stream`` (default stderr, where progress goes) is an interactive terminal."""
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced by an object without isatty
        return False


def progress_bar(total: int, desc: str, *, enabled: bool, already: int = 0, unit: str = "case",
                 terminal: bool | None = None) -> Any:
    """A bar over ``total`` items of which ``already`` were done before this run (a resumed run): they are
    shown as done but do not count towards the rate, so a resume never reports millions of cases/s.
    ``terminal``: whether stderr is a terminal (default: ask it); without one, :class:`LineProgress`."""
    if not enabled:
        return _Silent()
    if not (is_terminal() if terminal is None else terminal):
        return LineProgress(total, desc, already=already, unit=unit)
    from tqdm import tqdm

    return tqdm(total=total, initial=already, desc=desc, unit=unit, leave=True, dynamic_ncols=True)


def calm_other_bars() -> None:
    """Without a terminal, make bars drawn with tqdm directly (a plugin's, e.g. the synthetic suite build)
    redraw at most every :data:`LINE_EVERY_S` seconds (tqdm reads ``TQDM_MININTERVAL``; a value already set in
    the environment wins)."""
    if not is_terminal():
        os.environ.setdefault("TQDM_MININTERVAL", str(LINE_EVERY_S))
