"""The HTML report sink (``report.enabled``): one static page with the plots written before it, its pictures
beside it (``report/assets/``, links to the blob store) or inline (``report.self_contained``).

Its case sections and thumbnails are cached in the store (see :mod:`.html`), so a re-score job re-renders
only the cases whose rows changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.stages.result import RunResult


class ReportSink:
    name = "report"

    def __init__(self) -> None:
        self._early: tuple[Any, Any] | None = None  # the case pages begun beside the aggregation, and their rows

    def begin(self, result: RunResult, host: Any) -> None:
        """Start drawing the benchmarks' pages of cases, which need the rows only, in a forked copy of this
        process while this one aggregates (``sinks/beside.py``); :meth:`write` takes them. Not for a report
        whose cases are inlined in its index (``report.self_contained``)."""
        report = result.config["report"]
        if not report["enabled"] or report["self_contained"]:
            return
        from worldrecall.engine.sinks.beside import Beside, can_fork
        from worldrecall.engine.sinks.report.html import case_pages

        if can_fork():
            try:
                self._early = (Beside(lambda: case_pages(result, host, result.config)), result.rows)
            except OSError:  # no process or pipe to be had now: write() draws them, as without fork
                self._early = None

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        early, self._early = self._early, None
        pages = early[0].join() if early is not None else None
        if early is not None and early[1] is not result.rows:  # begun for other rows: drawn again here
            pages = None
        if not result.config["report"]["enabled"]:
            return []
        from worldrecall.engine.sinks.report.html import report_files, write_report  # large: only when used

        return report_files(write_report(result, ctx.host, [p for p in ctx.written if p.suffix == ".png"],
                                         result.config, pages))
