"""The HTML report sink (``report.enabled``): one self-contained page, with the plots written before it.

The page is written by a forked child while the tables, the submission bundle and MLflow's preparation are
written here (:mod:`worldrecall.engine.sinks.forked`); the rendered sections it adds to the memos come back,
so a sweep's next job re-renders only what changed, as if the page had been written in this process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.stages.result import RunResult


class ReportSink:
    name = "report"
    reads_outputs = True  # the plots it embeds

    def forks(self, result: RunResult) -> bool:
        return bool(result.config["report"]["enabled"])

    def prepare(self, result: RunResult, ctx: SinkContext) -> None:
        """The leaderboard views, drawn here before the fork: the tables and the console show them too."""
        if result.config["report"]["enabled"]:
            from worldrecall.engine.sinks.leaderboard_view import leaderboard_views

            leaderboard_views(result, ctx.host)

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        if not result.config["report"]["enabled"]:
            return []
        from worldrecall.engine.sinks.report.html import write_report  # jinja-free but large: only when used

        return [write_report(result, ctx.host, [p for p in ctx.written if p.suffix == ".png"], result.config)]

    def memo_mark(self) -> Any:
        """The report's memos note each entry added from now on (the mark is that journal)."""
        from worldrecall.engine.sinks.report import html

        html.start_journal()
        return True

    def memo_delta(self, mark: Any) -> dict[str, Any]:
        from worldrecall.engine.sinks.report import html

        return html.journal_delta()

    def memo_merge(self, delta: dict[str, Any]) -> None:
        from worldrecall.engine.sinks.report import html

        html.merge_delta(delta)
