"""Digests and per-part memos: a folder digest lists its files as ``sorted(rglob)`` would (one scandir per folder)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from worldrecall.core import digests
from worldrecall.core.video import list_frame_files


def _reference_folder_digest(path: Path) -> str:
    """The straightforward definition: every file of ``rglob('*')``, sorted as paths, name then bytes."""
    h = hashlib.sha256()
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        h.update(str(p.relative_to(path)).encode())
        h.update(hashlib.sha256(p.read_bytes()).hexdigest().encode())
    return h.hexdigest()


def _tree(root: Path) -> None:
    # "a-c" sorts before "a/b" as a string but after it as path parts: the order must be the parts'
    for name in ["a-c", "a/b", "a/b2/x", ".hidden", "z", "a/.q", "deep/er/est/f.txt"]:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(name)
    (root / "dir_link").symlink_to(root / "a")     # a linked folder is not entered (rglob does not)
    (root / "file_link").symlink_to(root / "z")    # a linked file is a file


def test_folder_digest_equals_the_rglob_definition(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert digests.file_digest(tmp_path) == _reference_folder_digest(tmp_path)
    files = [rel for rel, _, _ in digests._tree_files(str(tmp_path))]
    assert files[:3] == [(".hidden",), ("a", ".q"), ("a", "b")] and ("a-c",) in files
    assert not any(rel[0] == "dir_link" for rel in files) and ("file_link",) in files


def test_tree_files_lists_what_os_walk_lists(tmp_path: Path) -> None:
    """The same files, paths (the memo's keys) and states as ``os.walk`` with a stat per file: dangling links
    and linked folders left out, a linked file in."""
    import os
    from stat import S_ISREG

    _tree(tmp_path)
    (tmp_path / "a" / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "deep" / "er" / "to_file").symlink_to(tmp_path / "a-c")
    root = str(tmp_path)
    want = []
    for folder, _, names in os.walk(root):
        rel = tuple(folder[len(root) + 1:].split(os.sep)) if folder != root else ()
        for name in names:
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            if S_ISREG(st.st_mode):
                want.append(((*rel, name), path, (st.st_ino, st.st_size, st.st_mtime_ns)))
    got = [(rel, path, (st.st_ino, st.st_size, st.st_mtime_ns)) for rel, path, st in digests._tree_files(root)]
    assert got == sorted(want, key=lambda t: t[0])
    assert ("deep", "er", "to_file") in [g[0] for g in got] and ("a", "dangling") not in [g[0] for g in got]


def test_folder_digest_follows_an_edit(tmp_path: Path) -> None:
    _tree(tmp_path)
    before = digests.file_digest(tmp_path)
    (tmp_path / "a" / "b").write_text("changed, longer")
    assert digests.file_digest(tmp_path) != before
    assert digests.file_digest(tmp_path) == _reference_folder_digest(tmp_path)


def test_frame_files_sorted_by_name_images_only(tmp_path: Path) -> None:
    for n in ["010.jpg", "002.PNG", "001.jpeg", "notes.txt", ".jpg", "003.jpg.bak"]:
        (tmp_path / n).write_bytes(b"x")
    (tmp_path / "sub.jpg").mkdir()  # a folder named like an image is not a frame
    assert [p.name for p in list_frame_files(tmp_path)] == ["001.jpeg", "002.PNG", "010.jpg"]


def test_digest_memo_is_written_only_when_something_was_learnt(tmp_path: Path, monkeypatch) -> None:
    """Nothing learnt, nothing written; a digest learnt later is appended to the memo's journal, the memo itself
    left as it is, and the next run reads both."""
    import json

    monkeypatch.setattr(digests, "RACY_S", 0.0)  # files written just now count as settled here
    memo = tmp_path / "file_digests.json"
    journal = digests.journal_path(memo)
    f = tmp_path / "input.bin"
    f.write_bytes(b"abc")
    digests.load_digest_memo(memo)
    digests.file_digest(f)
    digests.save_digest_memo(memo)  # no memo yet: written whole
    first = memo.stat()
    assert not journal.exists()
    digests.load_digest_memo(memo)
    digests.file_digest(f)          # known: nothing learnt
    digests.save_digest_memo(memo)
    assert memo.stat().st_ino == first.st_ino and memo.stat().st_mtime_ns == first.st_mtime_ns
    assert not journal.exists()
    f.write_bytes(b"abcd")          # an edit is learnt, and appended
    digests.file_digest(f)
    digests.save_digest_memo(memo)
    assert (memo.stat().st_ino, memo.stat().st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    [(kind, rec)] = [json.loads(line) for line in journal.read_text().splitlines()]
    assert kind == "d" and rec[6] == hashlib.sha256(b"abcd").hexdigest()
    digests.save_digest_memo(memo)  # said once
    assert len(journal.read_text().splitlines()) == 1
    digests.load_digest_memo(memo)  # the next run reads the journal too: the edit is not hashed again
    assert (str(f), *digests._state(str(f), f.stat())[1:]) in digests._MEMO["loaded"]


def test_the_memos_journal_is_folded_in_once_it_holds_a_quarter_of_its_entries(tmp_path: Path, monkeypatch) -> None:
    """Each run that learns a few digests appends them; a torn line is skipped; past the threshold the memo is
    rewritten with the journal folded in, and the journal removed."""
    monkeypatch.setattr(digests, "RACY_S", 0.0)
    monkeypatch.setattr(digests, "COMPACT_AT", 3)
    memo = tmp_path / "file_digests.json"
    files = [tmp_path / f"f{i}.bin" for i in range(6)]
    for f in files:
        f.write_bytes(f.name.encode())
    digests.load_digest_memo(memo)
    digests.file_digest(files[0])
    digests.save_digest_memo(memo)  # the memo: one entry
    for f in files[1:3]:
        digests.load_digest_memo(memo)
        digests.file_digest(f)
        digests.save_digest_memo(memo)  # journal: 1, then 2 lines
    with open(digests.journal_path(memo), "a") as j:
        j.write('["d", ["/tmp/torn')  # a crash mid-write
    digests.load_digest_memo(memo)
    assert {Path(k[0]).name for k in digests._MEMO["loaded"]} == {"f0.bin", "f1.bin", "f2.bin"}
    for f in files[3:5]:
        digests.file_digest(f)
    digests.save_digest_memo(memo)  # 2 + 2 lines > 3: the memo is rewritten, the journal folded in
    assert not digests.journal_path(memo).exists()
    import json

    assert {Path(rec[0]).name for rec in json.loads(memo.read_text())["digests"]} == \
        {"f0.bin", "f1.bin", "f2.bin", "f3.bin", "f4.bin"}


def test_a_digest_is_trusted_only_while_device_inode_size_mtime_and_ctime_are_unchanged(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    """``cp -p`` / ``tar x`` / ``rsync -t --inplace`` restore the mtime but not the ctime: seen."""
    import os
    import time

    monkeypatch.setattr(digests, "RACY_S", 0.0)
    f = tmp_path / "poses.npy"
    f.write_bytes(b"1234")
    first = digests.file_digest(f)
    st = f.stat()
    time.sleep(0.01)  # a later ctime tick
    with open(f, "r+b") as h:  # in place: same inode, same size
        h.write(b"5678")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (f.stat().st_ino, f.stat().st_size, f.stat().st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    assert digests.file_digest(f) == hashlib.sha256(b"5678").hexdigest() != first


def test_digest_memo_keeps_what_its_runs_use_not_all_the_process_knows(tmp_path: Path, monkeypatch) -> None:
    """A pytest session or a notebook scores several roots in one process: each root's memo holds its own
    files, an earlier entry whose file is unchanged, and drops one whose file was removed or rewritten when it
    is rewritten (an entry of a removed file is never used: its state is that file's)."""
    import json

    monkeypatch.setattr(digests, "RACY_S", 0.0)
    monkeypatch.setattr(digests, "COMPACT_AT", 0)  # every save rewrites the memo
    other, mine, gone, later = (tmp_path / f"{n}.bin" for n in ("other", "mine", "gone", "later"))
    for f in (other, mine, gone, later):
        f.write_bytes(f.name.encode())
    memo = tmp_path / "file_digests.json"
    digests.load_digest_memo(memo)
    digests.file_digest(mine)
    digests.file_digest(gone)
    digests.save_digest_memo(memo)
    digests.file_digest(other)                      # another root's file, after this root's run
    digests.load_digest_memo(memo)                  # the next run on this root uses none of its files …
    gone.unlink()                                   # … one of them is removed meanwhile
    digests.save_digest_memo(memo)                  # nothing learnt: nothing written
    assert {Path(rec[0]).name for rec in json.loads(memo.read_text())["digests"]} == {"mine.bin", "gone.bin"}
    digests.file_digest(later)                      # it learns one: the memo is written, without the removed one
    digests.save_digest_memo(memo)
    names = {Path(rec[0]).name for rec in json.loads(memo.read_text())["digests"]}
    assert names == {"mine.bin", "later.bin"}


def test_what_forked_workers_hashed_is_kept_in_the_runs_memo(tmp_path: Path) -> None:
    """A cold run's workers hash files and read facts its parent never looks at (a metric's code, files its
    measure reads): they hand them to the parent, whose memo is the one saved, so the next run reads none of them
    again and leaves the memo as it is. `worldrecall run` as typed, with 2 workers, on a tiny built-in suite."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    out = tmp_path / "out"
    others = ["visual_quality", "motion_smoothness", "obj_identity", "geo3d", "ors", "camera_controllability",
              "image_reward", "gt_revisit_sim", "camera_gate", "vqa"]
    cmd = [sys.executable, "-m", "worldrecall.engine.cli", "run", f"output_root={out}", "tracking=none",
           "progress=false", "report.enabled=false", "only=[memobench]", "models_only=[oracle,frozen_camera]",
           "suite.params.n_cases=2", "suite.params.width=96", "suite.params.height=72", "suite.params.gt_frames=24",
           "suite.params.gen_frames=20", "workers=2", "aggregator_params.bootstrap.replicates=20",
           "aggregator_params.paired.replicates=20", *[f"++benchmarks.memobench.metrics.{m}.enabled=false" for m in others]]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    build = [c for c in cmd if not c.startswith(("only=", "models_only="))] + ["only=[]", "allow_empty=true"]
    built = subprocess.run(build, capture_output=True, text=True, timeout=900, cwd=repo, env=env, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    time.sleep(digests.RACY_S + 0.1)  # the suite's files past the window in which a digest is never kept
    memo = out / "cache" / "file_digests.json"
    runs = []
    for _ in range(2):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=repo, env=env, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(memo.read_bytes())
    assert runs[1] == runs[0]
