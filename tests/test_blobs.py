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


def test_the_case_index_stores_each_per_case_file_once_and_again_when_it_changes(tmp_path):
    from types import SimpleNamespace

    from worldrecall.core.data import ScoreRow
    from worldrecall.engine.sinks.tracking import runs

    art = tmp_path / "cache" / "trace.json"
    art.parent.mkdir()
    art.write_text("[1, 2]")
    rows = [ScoreRow("b", "m", "c0", "b.x", {"v": 1.0}, info={"artifacts": [str(art), str(tmp_path / "gone.png")]})]
    result = SimpleNamespace(rows=rows)
    out = tmp_path / "out"
    runs._STORED.clear()
    first = runs.case_index(result, blobs.BlobStore(out / "blobs"), out)
    entry = first[("b", "m")]
    assert len(entry) == 1 and entry[0]["bytes"] == 6 and (out / entry[0]["blob"]).read_text() == "[1, 2]"
    assert runs.case_index(result, blobs.BlobStore(out / "blobs"), out) == first  # from this process's memo
    art.write_text("[1, 2, 3]")  # the file changed: stored again
    changed = runs.case_index(result, blobs.BlobStore(out / "blobs"), out)[("b", "m")][0]
    assert changed["sha256"] != entry[0]["sha256"] and (out / changed["blob"]).read_text() == "[1, 2, 3]"
    (out / changed["blob"]).unlink()  # its blob is gone: stored again
    again = runs.case_index(result, blobs.BlobStore(out / "blobs"), out)[("b", "m")][0]
    assert again == changed and (out / again["blob"]).read_text() == "[1, 2, 3]"
