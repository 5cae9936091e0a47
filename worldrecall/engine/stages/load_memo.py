"""The cases a loader yielded, for the later jobs of this process while nothing it reads has changed.

A sweep's jobs load the same datasets again: a re-score job spent ~0.25 s in the loaders and ~0.12 s
fingerprinting what they yield. A loader that declares ``reads_request_paths_only`` (every file it reads lies
under its request's data root, its generation folders or a path an option names) has its cases kept here
with the state (mtime, size, inode, mode; a link's own too) of every entry under those paths, taken before it
ran. A later job with the same load (loader, root, generations, options, shard) whose walk finds the same
states takes fresh copies of them: its own warning lists and annotations, its own pool's videos (with the frame
rate and content hash already read), the fingerprints computed last time, and the loader's log records and
printed lines again. An entry changed, added or removed under those paths: the loader runs again. Paths
with more than :data:`MAX_ENTRIES` entries under them are not watched (that loader runs every job: a count,
not a timing, so the choice is the same on every machine), nor those of a loader that does not declare it.
What is kept changes no number: it is what the loader yielded from the same files.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import logging
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from worldrecall.core.cache import cache_key
from worldrecall.core.data import Case, CaseError
from worldrecall.core.video import Video, VideoPool
from worldrecall.engine.stages.bounded import remember

# entries walked per load: a default suite has ~12,000 (~0.06 s with warm caches), a MemoBench release of 150
# clips of 300 frames ~50,000; past this, a walk could cost more than the load it saves
MAX_ENTRIES = 100_000
MEMO_LOADS = 16  # (benchmark, shard) loads kept


@dataclass
class _Kept:
    """One load: the walk before it, its items frozen (videos as path, fps and hash), what it said."""

    walk: str  # the digest of the entries' states before it ran
    items: list[dict[str, Any]]
    logs: list[logging.LogRecord] = field(default_factory=list)
    out: str = ""
    err: str = ""


_MEMO: dict[str, _Kept] = {}
_UNWATCHED: set[str] = set()  # loads whose paths hold too many entries to walk every job


def load(plan: Any, shard_index: int, shard_count: int, pool: VideoPool,
         fresh: Callable[[], list[Case | CaseError]], keep: bool = True) -> list[Case | CaseError]:
    """``fresh()`` (the plan's loader, this shard), or copies of what it yielded last time when nothing under
    the paths it reads has changed since. ``keep``: a later job of this process may follow (else what is
    loaded here is not kept, and nothing is walked unless an earlier job kept this load)."""
    key = _load_key(plan, shard_index, shard_count)
    if key is None or key in _UNWATCHED or (not keep and key not in _MEMO):
        return fresh()
    walk = _walk(_watched(plan.request))
    if walk is None:
        _UNWATCHED.add(key)
        return fresh()
    kept = _MEMO.get(key)
    if kept is not None and kept.walk == walk:
        _say_again(kept)
        return [_thaw(rec, pool) for rec in kept.items]
    if not keep:
        return fresh()
    kept = _Kept(walk, [])
    with _Said(kept):
        items = fresh()
    for it in items:
        rec = _freeze(it)
        it.__dict__["_load_memo"] = rec
        kept.items.append(rec)
    remember(_MEMO, key, kept, MEMO_LOADS)
    return items


def learn(items: list[Case | CaseError]) -> None:
    """Keep what this job found out about its loaded cases (fingerprints, frame rates, content hashes) for the
    later jobs that take copies of them; called once the job has fingerprinted them."""
    for it in items:
        rec = it.__dict__.get("_load_memo")
        if rec is None or not isinstance(it, Case):
            continue
        if "_fingerprint" in it.__dict__:
            rec["fingerprint"] = it.__dict__["_fingerprint"]
        for name in ("video", "reference"):
            v = getattr(it, name)
            if v is not None:
                rec[name] = v.known()


def forget_all() -> None:
    """Empty the memo (tests: a fresh process)."""
    _MEMO.clear()
    _UNWATCHED.clear()


def _load_key(plan: Any, shard_index: int, shard_count: int) -> str | None:
    loader, req = plan.loader, plan.request
    if not getattr(loader, "reads_request_paths_only", False):
        return None
    cls = type(loader)
    return cache_key({"loader": f"{cls.__module__}.{cls.__qualname__}", "name": loader.name,
                      "benchmark": plan.name, "root": os.path.abspath(req.data_root),
                      "generations": {m: os.path.abspath(p) for m, p in sorted(req.generations.items())},
                      "options": json.loads(json.dumps(req.options, sort_keys=True, default=repr)),
                      "shard": [shard_index, shard_count], "cwd": os.getcwd()})


def _watched(req: Any) -> list[str]:
    """The data root, the generation folders and every existing path an option names (as given or under the
    root), resolved, without those inside another."""
    paths = [req.data_root, *req.generations.values()]
    for v in _strings(req.options):
        for cand in (Path(v), Path(req.data_root) / v):
            try:
                if cand.exists():
                    paths.append(cand)
            except (OSError, ValueError):
                pass
    out: list[str] = []
    for p in sorted({os.path.realpath(p) for p in paths}):
        if not any(p.startswith(q.rstrip(os.sep) + os.sep) for q in out):
            out.append(p)
    return out


def _strings(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v] if v and "\0" not in v else []
    if isinstance(v, dict):
        return [s for x in v.values() for s in _strings(x)]
    if isinstance(v, (list, tuple)):
        return [s for x in v for s in _strings(x)]
    return []


def _state(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_mtime_ns, st.st_size, st.st_ino, st.st_mode


def _walk(roots: list[str]) -> str | None:
    """A digest of every entry under ``roots`` with its state (:func:`_entries`); None past :data:`MAX_ENTRIES`.
    Hashed as walked, so the walk keeps no object per entry (nor wakes the garbage collector)."""
    h = hashlib.sha256()
    for n, entry in enumerate(_entries(roots)):
        if n >= MAX_ENTRIES:
            return None
        h.update(repr(entry).encode())
    return h.hexdigest()


def _entries(roots: list[str]) -> Iterator[tuple[Any, ...]]:
    """Every entry under ``roots`` with its state (links followed, a linked folder entered once; a link's own
    state too), in a fixed order."""
    seen: set[tuple[int, int]] = set()
    for root in roots:
        try:
            st = os.stat(root)
        except OSError as e:
            yield (root, "missing", e.errno)
            continue
        yield (root, *_state(st))
        if not stat.S_ISDIR(st.st_mode):
            continue
        stack = [root]
        seen.add((st.st_dev, st.st_ino))
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as e:
                yield (folder, "unreadable", e.errno)
                continue
            for e in entries:
                try:
                    st = e.stat()
                    own = _state(e.stat(follow_symlinks=False)) if e.is_symlink() else None
                except OSError:
                    yield (e.path, "dangling")
                    continue
                yield (e.path, *_state(st), own)
                if stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    stack.append(e.path)


def _freeze(it: Case | CaseError) -> dict[str, Any]:
    if isinstance(it, CaseError):
        return {"error": replace(it, strata=dict(it.strata), warnings=list(it.warnings))}
    rec: dict[str, Any] = {"case": replace(it, video=None, reference=None, strata=dict(it.strata),
                                           annotations=copy.deepcopy(it.annotations), sidecars=dict(it.sidecars),
                                           warnings=list(it.warnings))}
    for name in ("video", "reference"):
        v: Video | None = getattr(it, name)
        rec[name] = v.known() if v is not None else None
    return rec


def _thaw(rec: dict[str, Any], pool: VideoPool) -> Case | CaseError:
    if "error" in rec:
        e = rec["error"]
        out: Case | CaseError = replace(e, strata=dict(e.strata), warnings=list(e.warnings))
    else:
        c = rec["case"]
        videos = {n: pool.adopt(*rec[n]) if rec[n] is not None else None for n in ("video", "reference")}
        out = replace(c, strata=dict(c.strata), annotations=copy.deepcopy(c.annotations),
                      sidecars=dict(c.sidecars), warnings=list(c.warnings), **videos)
        if "fingerprint" in rec:
            out.__dict__["_fingerprint"] = rec["fingerprint"]
    out.__dict__["_load_memo"] = rec
    return out


class _Said(logging.Handler):
    """While the loader runs: its log records and printed lines, kept (and shown as usual) to be said again."""

    def __init__(self, kept: _Kept) -> None:
        super().__init__(logging.NOTSET)
        self.kept = kept

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self._thread:  # the loader's, not a background thread's
            self.kept.logs.append(record)

    def __enter__(self) -> _Said:
        self._thread = threading.get_ident()
        self._out, self._err = sys.stdout, sys.stderr
        self._bufs = io.StringIO(), io.StringIO()
        sys.stdout, sys.stderr = _Tee(self._out, self._bufs[0]), _Tee(self._err, self._bufs[1])
        logging.root.addHandler(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        logging.root.removeHandler(self)
        sys.stdout, sys.stderr = self._out, self._err
        self.kept.out, self.kept.err = self._bufs[0].getvalue(), self._bufs[1].getvalue()


class _Tee(io.TextIOBase):
    def __init__(self, real: Any, copy_to: io.StringIO) -> None:
        self.real, self.copy_to = real, copy_to

    def write(self, s: str) -> int:
        self.copy_to.write(s)
        return self.real.write(s)

    def flush(self) -> None:
        self.real.flush()

    # what code that prints may ask of the stream: the real one's answers
    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.real, "encoding", "utf-8")

    def isatty(self) -> bool:
        return bool(getattr(self.real, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self.real.fileno()


def _say_again(kept: _Kept) -> None:
    sys.stdout.write(kept.out)
    sys.stderr.write(kept.err)
    now = time.time()
    for record in kept.logs:  # said now: with this job's time, not the one of the job that loaded
        again = logging.makeLogRecord(record.__dict__)
        again.created, again.msecs = now, (now - int(now)) * 1000
        logging.getLogger(record.name).handle(again)
