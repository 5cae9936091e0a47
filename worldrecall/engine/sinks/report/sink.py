"""The HTML report sink (``report.enabled``): one static page with the plots written before it, its pictures
beside it (``report/assets/``, links to the blob store) or inline (``report.self_contained``).

Its case sections and thumbnails are cached in the store (see :mod:`.html`), so a re-score job re-renders
only the cases whose rows changed.
"""

from __future__ import annotations

from pathlib import Path

from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.stages.result import RunResult


class ReportSink:
    name = "report"

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        if not result.config["report"]["enabled"]:
            return []
        from worldrecall.engine.sinks.report.html import report_files, write_report  # large: only when used

        return report_files(write_report(result, ctx.host, [p for p in ctx.written if p.suffix == ".png"],
                                         result.config))
