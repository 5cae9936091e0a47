"""The data model every plugin speaks: cases, phases, alignments, case errors and score rows."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldrecall.core.digests import file_digest
from worldrecall.core.video import Video


class CaseFailure(Exception):
    """Raised inside a loader/aligner/metric for a problem that fails one case only.

    The message must be one line naming the file (or field) and the problem, e.g.
    ``"poses_c2w.npy: 80 rows but the video has 81 frames"``.
    """


class CaseSkip(Exception):
    """An input the metric needs is absent here: the row is skipped with this one line (the file, how to produce it).
    ``info``: facts for the row's ``info`` (e.g. the quality that made a pose estimate unusable)."""

    def __init__(self, message: str, info: dict[str, Any] | None = None):
        super().__init__(message)
        self.info = dict(info or {})


def finite_float(v: Any) -> float | None:
    """``v`` as a finite float, else None (missing, unparsable, NaN or infinite)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def one_line(e: BaseException | str, limit: int = 500) -> str:
    """An exception (or text) as one whitespace-collapsed line, at most ``limit`` characters (for rows and logs)."""
    return " ".join(str(e).split())[:limit]


@dataclass
class Case:
    """One generated video to score, with everything a metric may need to know about it."""

    benchmark: str
    case_id: str
    model: str
    video: Video | None
    reference: Video | None = None
    strata: dict[str, str] = field(default_factory=dict)    # split / domain / subcategory / scene / branch
    prompt: str | None = None
    subject: str | None = None
    annotations: dict[str, Any] = field(default_factory=dict)  # benchmark-specific, JSON-able
    sidecars: dict[str, Path] = field(default_factory=dict)    # named files next to the generation
    data_root: Path | None = None
    warnings: list[str] = field(default_factory=list)  # one-line input anomalies, copied onto every row

    @property
    def key(self) -> str:
        return f"{self.benchmark}/{self.model}/{self.case_id}"

    def fingerprint(self) -> str:
        """Content hash of every input of this case: videos, sidecar files, annotations, text (the files'
        digests are memoised by :mod:`worldrecall.core.digests`, so asking again is cheap)."""
        h = hashlib.sha256()
        for v in (self.video, self.reference):
            h.update((v.content_hash() if v is not None else "-").encode())
        for name in sorted(self.sidecars):
            h.update(name.encode())
            h.update(file_digest(self.sidecars[name]).encode())
        h.update(json.dumps([self.prompt, self.subject, self.annotations], sort_keys=True, default=str).encode())
        return h.hexdigest()


@dataclass(frozen=True)
class Phase:
    """An inclusive range of generated-frame indices, e.g. MemoBench's V = [0, h]."""

    name: str
    start: int
    end: int  # inclusive

    def __len__(self) -> int:
        return max(0, self.end - self.start + 1)

    def indices(self) -> range:
        return range(self.start, self.end + 1)


@dataclass
class Alignment:
    """Where each phase/segment lies on the generated video's own frame axis, plus JSON-able facts."""

    phases: dict[str, Phase] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"phases": {k: [p.start, p.end] for k, p in self.phases.items()}, "info": self.info}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Alignment:
        return cls({k: Phase(k, int(a), int(b)) for k, (a, b) in d["phases"].items()}, dict(d["info"]))


@dataclass
class CaseError:
    """A case that could not be built, aligned, measured or scored; the run goes on without it."""

    benchmark: str
    case_id: str
    model: str
    stage: str  # load | align | measure | score
    reason: str
    strata: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # one line, always: reasons end up in tables and logs
        self.reason = " ".join(str(self.reason).split())


@dataclass
class ScoreRow:
    """One metric's values for one case (or the failure/skip that replaced them)."""

    benchmark: str
    model: str
    case_id: str
    metric: str
    values: dict[str, float | None]
    status: str = "ok"  # ok | failed | skipped
    reason: str = ""
    strata: dict[str, str] = field(default_factory=dict)
    metric_version: str = ""
    backend: dict[str, str] = field(default_factory=dict)  # role -> model spec name
    info: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # input anomalies that did not stop the score
    key: str = ""  # the cache key it was computed under (everything it depends on): a rerun keeps it only if equal

    @property
    def row_key(self) -> tuple[str, str, str, str]:
        return (self.benchmark, self.model, self.case_id, self.metric)

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON-able dict (fields are already plain data: no deep copy, rows are written often)."""
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ScoreRow:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
