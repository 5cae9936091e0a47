"""The blob store's digest memo is a journal: a job appends what it hashed, never rewrites what it knew."""

from __future__ import annotations

from worldrecall.engine.sinks import blobs


def test_the_digest_journal_appends_only_new_digests_and_survives_a_torn_line(tmp_path):
    files = []
    for i in range(3):
        f = tmp_path / f"f{i}.txt"
        f.write_text(f"content {i}")
        files.append(f)
    blobs._MEMOS.clear()
    store = blobs.BlobStore(tmp_path / "blobs")
    d0, blob0 = store.put(files[0])
    store.save()
    journal = tmp_path / "blobs" / "digests.jsonl"
    assert len(journal.read_text().splitlines()) == 1 and blob0.read_text() == "content 0"
    store.save()  # nothing new: nothing appended
    second = blobs.BlobStore(tmp_path / "blobs")  # this process's later job: the memo it wrote
    assert second.digest(files[0]) == d0 and not second._new
    second.put(files[1])
    second.save()
    assert len(journal.read_text().splitlines()) == 2  # one line added, the first one not written again
    with open(journal, "a") as f:
        f.write('["torn')  # a crash mid-append
    blobs._MEMOS.clear()  # another process: reads the journal
    third = blobs.BlobStore(tmp_path / "blobs")
    assert third.digest(files[0]) == d0 and third.digest(files[1]) == second.digest(files[1]) and not third._new
    files[0].write_text("changed")  # a new file state is hashed again
    assert third.digest(files[0]) != d0 and len(third._new) == 1
    third.put(files[2])
    third.save()
    blobs._MEMOS.clear()
    assert len(blobs.BlobStore(tmp_path / "blobs")._memo) == 4  # the torn line skipped, later lines kept
