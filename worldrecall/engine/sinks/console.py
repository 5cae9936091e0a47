"""The console sink: the leaderboard (the compact view by default, every view with ``view=full``; a sweep job
points to its file instead), where the results are, the case counts, then the lines other sinks left for the
end (the MLflow link)."""

from __future__ import annotations

from pathlib import Path

from worldrecall.engine.sinks.base import SinkContext
from worldrecall.engine.sinks.leaderboard_view import assumed_lines, print_leaderboard
from worldrecall.engine.sinks.tracking.runs import override_label
from worldrecall.engine.stages.result import RunResult


class ConsoleSink:
    """``merged``: the number of shard files a merge read (its summary line differs from a run's)."""

    name = "console"

    def __init__(self, merged: int | None = None) -> None:
        self.merged = merged

    def write(self, result: RunResult, ctx: SinkContext) -> list[Path]:
        if ctx.sweep_dir is None or self.merged is not None:
            print_leaderboard(result, ctx.host, view=str(result.config.get("view", "compact")), mlflow=bool(ctx.notes))
            lines = assumed_lines(result.rows)  # each reference the run assumed, said once (issue 43)
            if lines:
                print("\n" + "\n".join(lines))
        else:  # a sweep job: its leaderboard is a file; the sweep prints one summary across jobs at the end
            print(f"\n[{override_label(list(ctx.overrides))}] leaderboard: "
                  f"{result.results_dir / 'tables' / 'leaderboard.txt'}")
        if self.merged is not None:
            print(f"\nmerged {self.merged} shard file(s), {result.n_cases} cases, {result.n_failed_cases} failed")
            print(f"results: {result.results_dir}")
        else:
            print(f"\nresults: {result.results_dir}")
            print(f"cases: {result.n_cases}  failed: {result.n_failed_cases}  failure rate: "
                  f"{result.failure_rate:.1%} (max_failure_rate {result.config['max_failure_rate']})")
        for line in ctx.notes:
            print(line)
        return []
