"""The blob store's digest memo is a journal: a job appends what it hashed, never rewrites what it knew."""

from __future__ import annotations

from worldrecall.engine.cache import blobs


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
    first = runs.case_index(result, blobs.BlobStore(out / "blobs"), out)
    entry = first[("b", "m")]
    assert len(entry) == 1 and entry[0]["bytes"] == 6 and (out / entry[0]["blob"]).read_text() == "[1, 2]"
    assert runs.case_index(result, blobs.BlobStore(out / "blobs"), out) == first
    art.write_text("[1, 2, 3]")  # the file changed: stored again
    changed = runs.case_index(result, blobs.BlobStore(out / "blobs"), out)[("b", "m")][0]
    assert changed["sha256"] != entry[0]["sha256"] and (out / changed["blob"]).read_text() == "[1, 2, 3]"
    (out / changed["blob"]).unlink()  # its blob is gone: stored again
    again = runs.case_index(result, blobs.BlobStore(out / "blobs"), out)[("b", "m")][0]
    assert again == changed and (out / again["blob"]).read_text() == "[1, 2, 3]"
