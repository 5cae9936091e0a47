"""A content-addressed blob store under the output root: every file's bytes are kept once.

``blobs/sha256/<aa>/<digest><suffix>``. Per-case files from the (content-addressed) cache are hard-linked
in (no bytes copied at all); other files are copied once. Runs log a small index pointing at blobs instead of copies, and a local
MLflow artifact store gets hard links to the blob, so a resumed run or a re-score job that produces the same
bytes adds directory entries, not data. Digests come from the one input digest (core/digests.py), so a warm
run re-hashes nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worldrecall.core.atomic import atomic_write
from worldrecall.core.digests import file_digest


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
    """Content-addressed files under ``root`` (normally ``<output_root>/blobs``); a file's digest is the one
    input digest (:func:`worldrecall.core.digests.file_digest`)."""

    def __init__(self, root: Path | str):
        self.root = Path(root)

    def digest(self, path: Path) -> str:
        """sha256 of the file's bytes."""
        return file_digest(path)

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


def write_if_changed(path: Path, text: str | bytes) -> Path:
    """Write ``text`` (UTF-8, or bytes as they are) atomically unless the file already holds exactly these bytes
    (then keep its inode, so the blob store and MLflow's hard links to it stay the only copy)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
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


def _place(blob: Path, path: Path) -> None:
    """``path`` becomes a hard link to ``blob`` in one step (a reader sees the old file or the new one), or a
    copy across devices; nothing is done when it is that link already."""
    if path.exists() and os.path.samefile(path, blob):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.link{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        os.link(blob, tmp)
    except OSError:
        shutil.copyfile(blob, tmp)
    os.replace(tmp, path)


def write_shared(path: Path, text: str | bytes, blobs: BlobStore) -> Path:
    """Write ``text`` to ``path`` as :func:`write_if_changed` does, but keep its bytes once in ``blobs``: a text
    some job wrote before (an unchanged benchmark's table in a re-score or a sweep's job) is a hard link to that
    blob, a new one is written and linked into the blob store."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    blob = blobs.path_for(hashlib.sha256(data).hexdigest(), path.suffix.lower())
    held = blob.is_file()
    # its bytes compared, not only its size: an output edited in place edited the blob it is a link to
    if held and blob.stat().st_size == len(data) and blob.read_bytes() == data:
        _place(blob, path)
        return path
    write_if_changed(path, data)
    if held:  # the blob named for these bytes holds others: this file, written atomically, becomes the blob
        _place(path, blob)
    else:
        blobs.put(path, link=True)  # written atomically, never in place: safe to share
    return path


def linked_blob(path: Path, kind: str, key: str, store: Any, blobs: BlobStore, *, checked: bool = False
                ) -> dict | None:
    """When the cache's ``kind`` entry for ``key`` names a blob that is there (``{"sha256": …}``, and whatever
    else its writer kept), ``path`` becomes a link to it and the entry is returned; else None (nothing done).
    ``checked``: only a blob whose size and modification time are those the entry recorded (``size``,
    ``mtime_ns``): an output edited in place edits the blob it links to, which then holds other bytes."""
    doc = store.get_json(kind, key)
    if not isinstance(doc, dict) or "sha256" not in doc:
        return None
    if checked and not as_written(blobs.path_for(str(doc["sha256"]), path.suffix.lower()), doc):
        return None
    return doc if place_blob(str(doc["sha256"]), path, blobs) else None


def written_state(blob: Path) -> dict[str, int]:
    """What a cache entry records of the blob it names (its size and modification time): :func:`as_written`."""
    st = blob.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def as_written(blob: Path, recorded: Any) -> bool:
    """Whether ``blob`` still has the size and modification time ``recorded`` (:func:`written_state`) holds; False
    when it records none (an entry written before they were kept) or the blob is gone."""
    try:
        st = blob.stat()
    except OSError:
        return False
    return isinstance(recorded, dict) and st.st_size == recorded.get("size") and \
        st.st_mtime_ns == recorded.get("mtime_ns")


def place_blob(digest: str, path: Path, blobs: BlobStore) -> bool:
    """Make ``path`` a link to the blob of ``digest`` (of ``path``'s suffix) when it is there; whether it was."""
    blob = blobs.path_for(digest, path.suffix.lower())
    if not blob.is_file():
        return False
    _place(blob, path)
    return True


def stored_text(path: Path, kind: str, key: str, render: Callable[[], str], store: Any, blobs: BlobStore) -> Path:
    """Place at ``path`` the text ``render`` gives for ``key`` (what it is drawn from: the rows it shows and the
    code that draws it): as a hard link to the blob written for that key before (the cache's ``kind`` entry
    names its digest, size and modification time), else rendered, written and kept for the next job. An output
    part whose inputs a re-score or a sweep's job did not change then costs neither time nor bytes; a missing
    blob or entry, or a blob no longer as it was written (its output edited in place), is rendered again."""
    if linked_blob(path, kind, key, store, blobs, checked=True) is not None:
        return path
    data = render().encode("utf-8")
    write_shared(path, data, blobs)  # the blob of these bytes holds them (put back if edited through a link)
    digest = hashlib.sha256(data).hexdigest()
    store.put_json(kind, key, {"sha256": digest, **written_state(blobs.path_for(digest, path.suffix.lower()))})
    return path
