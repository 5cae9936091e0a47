"""A content-addressed blob store under the output root: every file's bytes are kept once.

``blobs/sha256/<aa>/<digest><suffix>``. Per-case files from the (content-addressed) cache are hard-linked
in (no bytes copied at all); other files are copied once. Runs log a small index pointing at blobs instead of copies, and a local
MLflow artifact store gets hard links to the blob, so a resumed run or a re-score job that produces the same
bytes adds directory entries, not data. Digests are memoised by (path, size, mtime, inode), so a warm run
re-hashes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from worldrecall.core.atomic import atomic_write
from worldrecall.core.digests import file_state


def _read_umask() -> int:
    """The process umask without changing it (Linux: /proc); elsewhere set-and-restore once at import."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


class BlobStore:
    """Content-addressed files under ``root`` (normally ``<output_root>/blobs``).

    The digest memo is a journal, ``digests.jsonl``: each job appends the digests it computed (one JSON line
    per file state), so saving costs what the job learnt, not what every job before it did; a torn last line
    (a crash mid-append) is skipped, and two jobs appending at once each add whole lines.
    """

    def __init__(self, root: Path | str):
        self.root = Path(root)
        self._memo_path = self.root / "digests.jsonl"
        self._memo: dict[str, str] = {}
        self._new: dict[str, str] = {}
        state = file_state(self._memo_path)
        known = _MEMOS.get(str(self._memo_path))
        if known is not None and known[0] == state:  # the file this process last read or wrote
            self._memo = known[1]
        elif state is not None:
            self._memo = _read_journal(self._memo_path)
            _MEMOS[str(self._memo_path)] = (state, self._memo)

    def digest(self, path: Path) -> str:
        """sha256 of the file's bytes (memoised while the file is unchanged)."""
        st = path.stat()
        # inode, size and mtime identify the content: an absolute path without resolving links (a realpath is
        # a stat per path component, for every per-case file of every job)
        key = f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"
        d = self._memo.get(key) or self._new.get(key)
        if d is None:
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            d = self._new[key] = h.hexdigest()
        return d

    def path_for(self, digest: str, suffix: str) -> Path:
        return self.root / "sha256" / digest[:2] / f"{digest}{suffix}"

    def put(self, path: Path | str, link: bool = False) -> tuple[str, Path]:
        """Store ``path`` once; returns (digest, blob path). Existing blobs are never written again.

        ``link=True`` hard-links instead of copying: only for files nobody rewrites in place (per-case files
        in the content-addressed cache); a table rewritten by the next run would change the blob with it.
        """
        src = Path(path)
        d = self.digest(src)
        dst = self.path_for(d, src.suffix.lower())
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(dst.name + f".tmp{os.getpid()}")
            if link:
                try:
                    os.link(src, tmp)
                except OSError:
                    shutil.copyfile(src, tmp)
            else:
                shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
        return d, dst

    def save(self) -> None:
        """Append this store's new digests to the journal (concurrent writers only lose memo entries)."""
        if not self._new:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps([k, d]) + "\n" for k, d in self._new.items())
        with open(self._memo_path, "a+b") as f:
            end = f.seek(0, os.SEEK_END)
            if end and os.pread(f.fileno(), 1, end - 1) != b"\n":
                lines = "\n" + lines  # after a torn last line: start on a line of our own
            f.write(lines.encode())
        memo = {**self._memo, **self._new}
        _MEMOS[str(self._memo_path)] = (file_state(self._memo_path), memo)
        self._memo, self._new = memo, {}


def _read_journal(path: Path) -> dict[str, str]:
    """The journal's digests; a torn or damaged line is skipped (it only costs hashing that file again)."""
    memo: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return memo
    for line in text.splitlines():
        try:
            k, d = json.loads(line)
        except (ValueError, TypeError):
            continue
        if isinstance(k, str) and isinstance(d, str):
            memo[k] = d
    return memo


_MEMOS: dict[str, tuple[Any, dict[str, str]]] = {}  # journal -> (its state, content) as last read or written
# (the content is never changed in place: a save makes a new dict, so a store never sees another's entries half-added)


def write_if_changed(path: Path, text: str) -> Path:
    """Write ``text`` atomically unless the file already holds exactly these bytes (then keep its inode, so
    the blob store and MLflow's hard links to it stay the only copy)."""
    data = text.encode("utf-8")
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return path
    except OSError:
        pass
    atomic_write(path, lambda f: f.write(data))  # the bytes encoded above (a report page is ~20 MB)
    path.chmod(0o666 & ~_UMASK)  # mkstemp makes 0600; logged files must be readable like any other output
    return path


def link_or_copy(src: Path, dst: Path) -> None:
    """Place ``src`` at ``dst`` as a hard link (same bytes, no copy) or, across devices, as a copy."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
