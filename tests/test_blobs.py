"""The blob store's digest memo is a journal: a job appends what it hashed, never rewrites what it knew."""

from __future__ import annotations

import os
from pathlib import Path

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


def test_a_plot_is_placed_through_the_blob_store_and_a_redraw_never_changes_an_earlier_one(tmp_path):
    """An aggregator draws into a folder of its own (here in place, as ``Path.write_bytes`` does); the plots sink
    places each figure under ``plots/`` as a link to its blob, so equal figures of two jobs are one file and the
    report links it; a later, different drawing in the same results folder leaves the earlier bytes intact."""
    import hashlib
    from types import SimpleNamespace

    from worldrecall.engine.sinks.base import SinkContext
    from worldrecall.engine.sinks.plots import PlotsSink

    class Pic:
        data = b"\x89PNG first"

        def plots(self, tables, out_dir):
            (out_dir / "fig.png").write_bytes(self.data)
            return [out_dir / "fig.png"]

    host = SimpleNamespace(components={"aggregator": {"pic": Pic}})

    def job(folder: str) -> Path:
        result = SimpleNamespace(results_dir=tmp_path / "results" / folder, tables={},
                                 config={"output_root": str(tmp_path)})
        [p] = PlotsSink().write(result, SinkContext(host))
        assert not list(result.results_dir.glob(".plots-*"))  # the drawing folder is gone
        return p

    one, two = job("one"), job("two")
    blob = tmp_path / "blobs" / "sha256" / hashlib.sha256(Pic.data).hexdigest()[:2]
    [blob] = list(blob.iterdir())
    assert one == tmp_path / "results" / "one" / "plots" / "fig.png"
    assert os.path.samefile(one, two) and os.path.samefile(one, blob)  # one file on disk
    Pic.data = b"\x89PNG second"
    assert job("one").read_bytes() == b"\x89PNG second"
    assert blob.read_bytes() == two.read_bytes() == b"\x89PNG first"  # the earlier figure kept its bytes


def test_an_aggregator_that_declares_its_tables_is_drawn_once_per_their_content(tmp_path):
    """``plots_from``: a job whose declared tables are those of an earlier job links that job's figure (the
    cache's ``figures`` entry names its blob) instead of drawing it; another table, or a lost blob, draws again."""
    from types import SimpleNamespace

    import pandas as pd

    from worldrecall.engine.sinks.base import SinkContext
    from worldrecall.engine.sinks.plots import PlotsSink

    drawn: list[str] = []

    class Bars:
        plots_from = ("t",)

        def plots(self, tables, out_dir):
            text = tables["t"].to_csv(index=False)  # the figure shows its table
            drawn.append(text)
            (out_dir / "sub").mkdir()
            (out_dir / "sub" / "bars.png").write_bytes(b"\x89PNG " + text.encode())
            return [out_dir / "sub" / "bars.png"]

    host = SimpleNamespace(components={"aggregator": {"bars": Bars}})
    config = {"output_root": str(tmp_path), "cache_dir": str(tmp_path / "cache"), "cache": {"mode": "use"}}

    def job(folder: str, values: list[float]) -> Path:
        tables = {"t": pd.DataFrame({"v": values}), "other": pd.DataFrame({"x": [len(drawn)]})}
        result = SimpleNamespace(results_dir=tmp_path / "results" / folder, tables=tables, config=config)
        [p] = PlotsSink().write(result, SinkContext(host))
        assert p == result.results_dir / "plots" / "sub" / "bars.png"
        return p

    one = job("one", [1.0, 2.0])
    two = job("two", [1.0, 2.0])  # another table changed, not the declared one: linked
    assert len(drawn) == 1 and os.path.samefile(one, two) and two.read_bytes() == b"\x89PNG v\n1.0\n2.0\n"
    three = job("three", [1.0, 3.0])
    assert len(drawn) == 2 and three.read_bytes() == b"\x89PNG v\n1.0\n3.0\n"
    for blob in (tmp_path / "blobs").rglob("*"):  # the blobs are gone (a prune): drawn again, never a dangling link
        if blob.is_file():
            blob.unlink()
    four = job("four", [1.0, 2.0])
    assert len(drawn) == 3 and four.read_bytes() == one.read_bytes()
    config["cache"] = {"mode": "off"}
    job("five", [1.0, 2.0])
    assert len(drawn) == 4  # the cache off: drawn every time
