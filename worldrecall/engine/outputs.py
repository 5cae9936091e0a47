"""Outputs are isolated: one that crashes is reported in one line, the others still run, and the exit code says so.

The run's rows are already on disk when the outputs run (tables, plots, the HTML report, the submission bundle,
MLflow, the console views), so a failing output never costs results: rerunning the same command resumes and
writes it again.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from worldrecall.core.data import one_line

T = TypeVar("T")
EXIT_OUTPUT_FAILED = 5  # every result was written, but an output (report, MLflow …) could not be
log = logging.getLogger("worldrecall")


@dataclass
class Outputs:
    """Runs each output, keeping the names of those that failed."""

    failed: list[str] = field(default_factory=list)

    def run(self, name: str, fn: Callable[..., T], *args: Any, default: Any = None, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``; on any exception: one line on stderr, ``default`` returned, ``name`` kept."""
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001  (one output must not cost the others; the exit code tells)
            log.debug("output %s failed", name, exc_info=True)
            print(f"error: output {name} failed: {type(e).__name__}: {one_line(e)} (the other outputs were "
                  "written; rerun the same command to retry)", file=sys.stderr)
            self.failed.append(name)
            return default

    def exit_code(self, code: int) -> int:
        """The run's own code, or :data:`EXIT_OUTPUT_FAILED` where it was 0 and an output failed."""
        return EXIT_OUTPUT_FAILED if code == 0 and self.failed else code
