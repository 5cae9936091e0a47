"""The score (and alignment) memo of :mod:`worldrecall.core.cache`, kept in memory too for later jobs of the
same process: a sweep's re-score jobs and a warm rerun read thousands of small entries a job.

An entry is kept as its JSON text (each caller gets its own copy) with the state (mtime, size, inode) of
its file when it was read or written; a file deleted, rewritten or tampered with since is read (and its
digest checked) again, exactly as without the memo. A job's own new entries (``defer``) are served from memory
while their files wait for the end of the job's outputs (:mod:`worldrecall.engine.stages.later`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from worldrecall.core.cache import ScoreCache
from worldrecall.core.digests import file_state
from worldrecall.engine.stages.bounded import remember
from worldrecall.engine.stages.later import later

MEMO_ENTRIES = 200_000  # per cache folder; an entry is a few hundred bytes of JSON
# folder -> (metric, key) -> (entry JSON, the entry file's (mtime, size, inode), or PENDING)
_MEMO: dict[str, dict[tuple[str, str], tuple[str, tuple[int, int, int] | None]]] = {}
PENDING = None  # the state of an entry put with ``defer``: no file state is known; after its job, read again
_PENDING: dict[str, set[tuple[str, str]]] = {}  # folder -> entries this job put whose files are deferred


class ProcessScoreCache(ScoreCache):
    """:class:`ScoreCache` whose verified entries are remembered for the process (shared per folder)."""

    def __init__(self, root: Path | str, enabled: bool = True, defer: bool = False):
        super().__init__(root, enabled)
        self._memo = _MEMO.setdefault(str(self.root.absolute()), {})
        # defer: an entry this process puts is served from memory for the rest of the job and its file is
        # written after the job's outputs (stages/later.py), on the report child's core; a forked worker
        # writes at once (its queue would die with it). A cache is made per job: what an earlier job deferred
        # is written by now, may still be being written by that job's report child (engine/sinks/forked.py),
        # or is lost; so its entries are checked against their files again (one not there yet: a miss)
        self.defer = defer
        self._pending = _PENDING.setdefault(str(self.root.absolute()), set())
        self._pending.clear()
        self._root = str(self.root)
        self.recent: list[tuple[str, str, str]] = []  # put by a forked worker, for its parent (take_recent)
        self._owner = os.getpid()

    def _file(self, metric: str, key: str) -> str:
        """The entry's file (as ``_path``, without building a Path: thousands of lookups a job)."""
        return os.path.join(self._root, metric, key[:2], f"{key}.json")

    file_of = _file

    def text_of(self, metric: str, key: str) -> str | None:
        """The JSON text of the entry last read or written here (what :meth:`get` returned a copy of)."""
        known = self._memo.get((metric, key))
        return known[0] if known is not None else None

    def valid_text(self, metric: str, key: str) -> str | None:
        """The entry's JSON text when this process holds it and its file is as it was then (or it was put by
        this job, its file not yet written); else None (then :meth:`get` reads and checks the file)."""
        if not self.enabled:
            return None
        known = self._memo.get((metric, key))
        if known is None:
            return None
        if (metric, key) in self._pending:
            return known[0]
        state = file_state(self._file(metric, key))
        return known[0] if state is not None and known[1] == state else None

    def get(self, metric: str, key: str) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        text = self.valid_text(metric, key)
        if text is not None:
            entry = json.loads(text)  # the file is as it was: no re-read, no re-hash
            if any(not os.path.exists(a) for a in entry.get("artifacts", [])):
                return None  # artifacts were cleaned up: score again to rewrite them
            self.hits += 1
            return entry
        entry = super().get(metric, key)
        if entry is not None:
            self._remember(metric, key, entry)
        return entry

    def put(self, metric: str, key: str, entry: Mapping[str, Any]) -> None:
        if self.enabled and self.defer and os.getpid() == self._owner:
            text = json.dumps(entry, sort_keys=True, allow_nan=True)  # what the file gets, as of now
            later(lambda: self.write_body(metric, key, text))
            self._pending.add((metric, key))
            self._keep(metric, key, json.dumps(json.loads(text), sort_keys=True, allow_nan=True), PENDING)
            return
        super().put(metric, key, entry)
        if self.enabled:
            body = self._remember(metric, key, json.loads(json.dumps(entry, sort_keys=True, allow_nan=True)))
            if body is not None and os.getpid() != self._owner:  # a worker forked from the process that made it
                self.recent.append((metric, key, body))

    def take_recent(self) -> list[tuple[str, str, str]]:
        """The entries put since the last call, as (metric, key, JSON text): a forked worker hands them to the
        parent with its rows, so the parent's later jobs find them in memory too."""
        out, self.recent = self.recent, []
        return out

    def learn(self, entries: Iterable[Sequence[str]]) -> None:
        """Remember entries a worker of this process put (:meth:`take_recent`), as of their files' state now."""
        for metric, key, body in entries:
            state = file_state(self._file(metric, key))
            if state is not None:
                self._keep(metric, key, body, state)

    def _remember(self, metric: str, key: str, entry: Mapping[str, Any]) -> str | None:
        state = file_state(self._file(metric, key))
        if state is None:
            return None
        body = json.dumps(entry, sort_keys=True, allow_nan=True)
        self._keep(metric, key, body, state)
        return body

    def _keep(self, metric: str, key: str, body: str, state: tuple[int, int, int] | None) -> None:
        remember(self._memo, (metric, key), (body, state), MEMO_ENTRIES)
