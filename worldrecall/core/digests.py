"""Content digests of input files: the one place where a file's state on disk is trusted.

A digest is reused, in this process and between runs (the persisted memo), only while the file's state is
exactly what it was when it was hashed: device, inode, size, modification time and change time (the
change time cannot be set back by ``cp -p``, ``tar x`` or ``rsync -t``, so a rewrite with its mtime restored
is still seen). As git does with its index, a file changed within the last :data:`RACY_S` seconds is hashed
every time and its digest is never kept: a write in the same clock tick as the hash could otherwise go
unseen. :func:`content_memo` keeps other facts read from a file (a container's frame count) under the file's
digest, so they too are trusted only through it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import Any

from worldrecall.core.atomic import atomic_write_text

RACY_S = 2.0  # seconds: a file changed more recently than this is hashed again every time
_DIGESTS: dict[tuple[str, int, int, int, int, int], str] = {}  # (path, dev, ino, size, mtime, ctime) -> sha256
_FACTS: dict[tuple[str, str], tuple[Any, bool]] = {}  # (kind, content digest) -> (fact, persist)
# the memo file holds what the runs on its output root use, not all this process knows (a test session, a
# notebook scoring several roots): the entries read from it, and those looked up since
_MEMO: dict[str, set] = {"loaded": set(), "used": set(), "facts_loaded": set(), "facts_used": set(),
                         "new": set(), "new_facts": set()}  # new: computed here since the last learned()
# the memo's journal as loaded and appended by this process: its lines, and whether the memo it adds to was read
_JOURNAL: dict[str, Any] = {"lines": 0, "memo": False}
COMPACT_AT = 2000  # journal lines below which the memo is never rewritten (a quarter of its entries above)


def file_digest(path: Path | str) -> str:
    """sha256 of a file, or of a folder (every regular file under it, by relative name and content)."""
    abspath = os.path.abspath(path)
    st = os.stat(abspath)
    if S_ISDIR(st.st_mode):
        h = hashlib.sha256()
        for rel, file, fst in _tree_files(abspath):
            h.update("/".join(rel).encode())
            h.update(_digest_of(file, fst).encode())
        return h.hexdigest()
    return _digest_of(abspath, st)


def _state(abspath: str, st: os.stat_result) -> tuple[str, int, int, int, int, int]:
    return (abspath, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _racy(st: os.stat_result) -> bool:
    return time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_S * 1e9


def _digest_of(abspath: str, st: os.stat_result) -> str:
    key = _state(abspath, st)
    known = _DIGESTS.get(key)
    if known is not None:
        _MEMO["used"].add(key)
        return known
    h = hashlib.sha256()
    with open(abspath, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    if not _racy(st):  # a file that may still change within its timestamp's tick is never trusted by state
        _DIGESTS[key] = digest
        _MEMO["used"].add(key)
        _MEMO["new"].add(key)
    return digest


def _tree_files(root: str) -> list[tuple[tuple[str, ...], str, os.stat_result]]:
    """Every regular file under ``root`` (symlinks to files included, linked folders not entered, unreadable
    ones skipped) as (parts relative to it, absolute path, stat), sorted by parts."""
    out = []
    for folder, _, names in os.walk(root):
        rel = tuple(folder[len(root) + 1:].split(os.sep)) if folder != root else ()
        for name in names:
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:  # a dangling link, or removed while listing: not a file
                continue
            if S_ISREG(st.st_mode):
                out.append(((*rel, name), path, st))
    return sorted(out, key=lambda t: t[0])


def content_memo(path: Path | str, kind: str, compute: Callable[[], Any], persist: bool = False) -> Any:
    """``compute()`` (a fact read from the file at ``path``; callers never mutate it), kept under the file's
    content digest; ``persist``: also kept in the memo file between runs (JSON-able facts only)."""
    key = (kind, file_digest(path))
    if key not in _FACTS:
        _FACTS[key] = (compute(), persist)
        if persist:
            _MEMO["new_facts"].add(key)
    if _FACTS[key][1]:
        _MEMO["facts_used"].add(key)
    return _FACTS[key][0]


def learned() -> dict[str, list]:
    """The digests and kept facts this process computed since the last call: what a forked worker hands its
    parent (:func:`adopt`), whose memo is the one saved — the next run then reads none of those files again."""
    out = {"digests": [[*k, _DIGESTS[k]] for k in _MEMO["new"] if k in _DIGESTS],
           "facts": [[*k, _FACTS[k][0]] for k in _MEMO["new_facts"] if k in _FACTS]}
    _MEMO["new"].clear()
    _MEMO["new_facts"].clear()
    return out


def adopt(got: dict[str, list]) -> None:
    """Take what a worker :func:`learned` as if this process had looked it up (each digest is of a file state)."""
    for rec in got.get("digests", []):
        key = (str(rec[0]), *(int(x) for x in rec[1:6]))
        _DIGESTS.setdefault(key, str(rec[6]))
        _MEMO["used"].add(key)
    for rec in got.get("facts", []):
        key = (str(rec[0]), str(rec[1]))
        _FACTS.setdefault(key, (rec[2], True))
        _MEMO["facts_used"].add(key)


_CODE_IDENTITY: list[Callable[[str], str]] = []  # the engine's code digest (engine/cache/keys.py), once imported
CODE_MARK = "@code:"  # in a fact's kind: kept under a code identity (dropped from the memo once unused)


def provide_code_identity(digest: Callable[[str], str]) -> None:
    """What :func:`code_memo` keys on: ``digest(module)``, the identity of a module's code and what it imports."""
    _CODE_IDENTITY[:] = [digest]


def code_memo(path: Path | str, kind: str, module: str, compute: Callable[[], Any],
              libraries: tuple[str, ...] = ()) -> Any:
    """:func:`content_memo` of a fact (plain JSON, checked) that code reads from a file: persisted between runs
    under the file's content, the code of ``module`` and the installed versions of ``libraries``; in this process
    only where no code identity is provided (the module used without the engine)."""
    if not _CODE_IDENTITY:
        return content_memo(path, kind, compute)
    ident = json.dumps([_CODE_IDENTITY[0](module), [_version(lib) for lib in libraries]]).encode()

    def plain() -> Any:
        fact = compute()
        if not _plain(fact):  # a tuple, a NumPy number: would come back from the memo as something else
            raise TypeError(f"{kind}: a persisted fact must be plain JSON")
        return fact

    return content_memo(path, f"{kind}{CODE_MARK}{hashlib.sha256(ident).hexdigest()[:16]}", plain, persist=True)


def _plain(x: Any) -> bool:
    """Whether ``x`` reads back from JSON as itself: dicts with str keys, lists, str, int, float (NaN too), bool, None."""
    if isinstance(x, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in x.items())
    if isinstance(x, list):
        return all(_plain(v) for v in x)
    return x is None or type(x) in (str, int, float, bool)


def _version(library: str) -> str:
    from importlib import metadata

    try:
        return f"{library}=={metadata.version(library)}"
    except metadata.PackageNotFoundError:
        return f"{library} not installed"


def journal_path(path: Path | str) -> Path:
    """The file beside the memo ``path`` that the digests and facts learnt since its last rewrite are appended
    to (``file_digests.json`` -> ``file_digests.learnt.jsonl``)."""
    return Path(path).with_suffix(".learnt.jsonl")


def load_digest_memo(path: Path | str) -> None:
    """Reuse the digests and facts an earlier run kept in ``path`` and its journal (each digest valid while its
    file's state is unchanged); an unreadable or older-format memo is ignored, a torn journal line skipped.
    Starts what :func:`save_digest_memo` keeps."""
    for entries in _MEMO.values():
        entries.clear()
    _JOURNAL.update(lines=0, memo=False)
    records: list[tuple[str, Any]] = []
    try:
        doc = json.loads(Path(path).read_text())
        if doc.get("format") == 2:
            records = [("d", rec) for rec in doc["digests"]] + [("f", rec) for rec in doc["facts"]]
            _JOURNAL["memo"] = True
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    try:
        with open(journal_path(path), encoding="utf-8") as f:
            for line in f:
                try:
                    kind, rec = json.loads(line)
                except (ValueError, TypeError):
                    continue  # torn by a crash mid-write: that entry is hashed again
                records.append((kind, rec))
                _JOURNAL["lines"] += 1
    except OSError:
        pass
    for kind, rec in records:
        try:
            if kind == "d":
                key = (str(rec[0]), *(int(x) for x in rec[1:6]))
                _DIGESTS[key] = str(rec[6])
                _MEMO["loaded"].add(key)
            elif kind == "f":
                fact = (str(rec[0]), str(rec[1]))
                _FACTS.setdefault(fact, (rec[2], True))
                _MEMO["facts_loaded"].add(fact)
        except (ValueError, TypeError, IndexError):
            continue


def save_digest_memo(path: Path | str) -> None:
    """Keep what this process learnt since :func:`load_digest_memo`: the digests and facts it looked up that the
    memo lacks are appended to its journal (:func:`journal_path`), so a run that learnt a few never rewrites
    what the memo holds; nothing learnt, nothing written. Without a memo to add to, or once the journal holds
    more than a quarter of the memo's entries (:data:`COMPACT_AT` at least), the memo is rewritten instead,
    the journal folded in: the digests looked up, and those kept whose file is still in the same state (a
    removed or rewritten file's entry is dropped then); the facts looked up, and those kept of a file whose
    digest is kept."""
    new = {k for k in _MEMO["used"] - _MEMO["loaded"] if k in _DIGESTS}
    new_facts = {k for k in _MEMO["facts_used"] - _MEMO["facts_loaded"] if k in _FACTS}
    if not new and not new_facts:
        return
    size = _JOURNAL["lines"] + len(new) + len(new_facts)
    if _JOURNAL["memo"] and size <= max(COMPACT_AT, len(_MEMO["loaded"]) // 4):
        lines = [json.dumps(["d", [*k, _DIGESTS[k]]]) for k in sorted(new)]
        lines += [json.dumps(["f", [*k, _FACTS[k][0]]]) for k in sorted(new_facts)]
        try:
            with open(journal_path(path), "a", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in lines))  # one write: appends of two runs never interleave
        except OSError:
            return  # a memo that cannot be kept costs time on the next run, never results
        _MEMO["loaded"] |= new
        _MEMO["facts_loaded"] |= new_facts
        _JOURNAL["lines"] += len(lines)
        return
    kept_loaded = set()
    for key in _MEMO["loaded"] - _MEMO["used"]:
        try:
            if _state(key[0], os.stat(key[0])) == key:
                kept_loaded.add(key)
        except OSError:
            pass
    digests = {k for k in _MEMO["used"] | kept_loaded if k in _DIGESTS}
    values = {_DIGESTS[k] for k in digests}
    # a fact kept under a code identity stays while it is used: changed code leaves its old entries behind
    facts = {k for k in _MEMO["facts_loaded"] if k[1] in values and CODE_MARK not in k[0]} | _MEMO["facts_used"]
    atomic_write_text(path, json.dumps({"format": 2, "digests": [[*k, _DIGESTS[k]] for k in sorted(digests)],
                                        "facts": [[*k, _FACTS[k][0]] for k in sorted(facts)]}))
    journal_path(path).unlink(missing_ok=True)  # folded in
    _MEMO["loaded"], _MEMO["facts_loaded"] = digests, facts
    _JOURNAL.update(lines=0, memo=True)
