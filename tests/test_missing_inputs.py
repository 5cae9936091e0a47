"""A metric's declared inputs (``Metric.missing_inputs``): a case that lacks one is a skip naming the file and
how to get it (nothing aligned or measured), the other cases complete, and providing the file later scores it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_cli_overrides

from worldrecall.core.components import MissingInput
from worldrecall.engine.cli import hydra_run
from worldrecall.engine.stages.row_store import read_rows


def test_missing_input_line_names_the_file_and_the_fix():
    m = MissingInput("intrinsics.npy", "/data/gt/007/intrinsics.npy", "export it from the GT poses")
    assert m.line() == "missing intrinsics.npy (/data/gt/007/intrinsics.npy): export it from the GT poses"
    assert MissingInput("judge").line() == "missing judge"


def _rows(out: Path) -> dict[str, object]:
    rows = read_rows(sorted((out / "results").glob("*/rows-shard-*.jsonl")))
    return {r.case_id: r for r in rows}


def test_a_case_without_a_declared_input_is_skipped_by_name_and_scored_once_it_is_there(tmp_path, toy_host):
    ds = make_dataset(tmp_path, {"good": [0, 1]})
    manifest = Path(ds["data_root"]) / "cases.json"
    cases = json.loads(manifest.read_text())
    cases["cases"][0]["id"] = "needs0"  # this case reads <video>.notes.json
    manifest.write_text(json.dumps(cases))
    out = tmp_path / "out"
    toy_plugin.MEASURE_CALLS.clear()
    assert hydra_run([*toy_cli_overrides(ds, out, "workers=1", "tracking=none")]) == 0
    rows = _rows(out)
    notes = Path(ds["generations"]) / "good" / "c0.mp4.notes.json"
    assert rows["needs0"].status == "skipped" and rows["needs0"].values == {}
    assert rows["needs0"].reason == (f"toy.brightness skipped: missing notes file ({notes}): "
                                     "write it with `echo {} > <video>.notes.json`")
    assert rows["c1"].status == "ok" and rows["c1"].values["drift"] is not None
    assert [k for k in toy_plugin.MEASURE_CALLS if "needs0" in k] == []  # nothing measured for the skip

    notes.write_text("{}")
    assert hydra_run([*toy_cli_overrides(ds, out, "workers=1", "tracking=none")]) == 0
    rows = _rows(out)
    assert rows["needs0"].status == "ok" and rows["needs0"].values["drift"] is not None
    assert len([r for r in read_rows(sorted((out / "results").glob("*/rows-shard-*.jsonl")))
                if r.case_id == "needs0"]) == 1
