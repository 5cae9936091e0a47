"""safe_join resolves like ``Path.resolve()`` (symlinks, ``..``, missing parts) and refuses what escapes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from worldrecall.core.data import CaseFailure
from worldrecall.core.paths import safe_join


def _reference(root: Path, rel: str) -> Path | None:
    """The earlier implementation's answer, built on ``Path.resolve()``: the path, or None for an escape."""
    real_root = root.resolve()
    cand = Path(rel).resolve() if Path(rel).is_absolute() else (real_root / rel).resolve()
    return cand if cand == real_root or real_root in cand.parents else None


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("x")
    root = tmp_path / "data"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.mp4").write_bytes(b"v")
    (root / "file.txt").write_text("t")
    os.symlink(root / "a", root / "link_in")                 # stays inside
    os.symlink(outside, root / "link_out")                   # leaves the root
    os.symlink("../a/b", root / "a" / "rel_link")            # relative, inside
    os.symlink(root / "missing_target", root / "dangling")
    os.symlink(root, tmp_path / "root_link")                  # the root itself reached through a link
    return root


CASES = ["a/b/f.mp4", "a/./b//f.mp4", "a/b/../b/f.mp4", "link_in/b/f.mp4", "a/rel_link/f.mp4", "missing/x.mp4",
         "a/missing/../b/f.mp4", "file.txt/x", "dangling", "dangling/x", ".", "a/..", "../data/a/b/f.mp4",
         "link_out/secret.txt", "link_in/../../outside/secret.txt", "../outside/secret.txt", "a/b/../../..",
         "link_out/../data/file.txt"]


@pytest.mark.parametrize("rel", CASES)
@pytest.mark.parametrize("via_link", [False, True])
def test_safe_join_matches_path_resolve(tree: Path, rel: str, via_link: bool) -> None:
    root = tree.parent / "root_link" if via_link else tree
    want = _reference(root, rel)
    if want is None:
        with pytest.raises(CaseFailure, match="escapes the data root"):
            safe_join(root, rel, what="video")
    else:
        assert safe_join(root, rel, what="video") == want


def test_absolute_paths_inside_and_outside(tree: Path) -> None:
    assert safe_join(tree, str(tree / "a" / "b" / "f.mp4")) == tree.resolve() / "a" / "b" / "f.mp4"
    with pytest.raises(CaseFailure, match="escapes"):
        safe_join(tree, str(tree.parent / "outside" / "secret.txt"))

