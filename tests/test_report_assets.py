"""The report's pictures through the CLI, as a user runs it in a fresh output root: each picture is one file in
the output root's blob store, linked beside every job's page (``report/assets/``) and into MLflow's artifacts, so a
rerun, a re-score or a sweep never stores a picture twice; ``report.self_contained=true`` inlines them instead."""

from __future__ import annotations

import base64
import hashlib
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers.tmp_plugin import env_with, install, worldrecall_cli
from helpers.toy_plugin import make_dataset, toy_cli_overrides

# the toy benchmark with a per-case PNG figure (as the point-cloud renders are): its pixels follow the measurement
# only, so a threshold sweep draws the same figure
PLUGIN = '''
import sys
sys.path.insert(0, {tests!r})
import cv2
import numpy as np
from helpers.toy_plugin import BrightnessDrift, HalvesAligner, ToyLoader
from worldrecall.core.hookspecs import hookimpl


class PictureDrift(BrightnessDrift):
    def artifacts(self, m, thresholds, out_dir):
        paths = super().artifacts(m, thresholds, out_dir)
        img = np.full((300, 520, 3), 255, np.uint8)
        cv2.circle(img, (260, 150), 40 + int(m["mean_b"]) % 60, (0, 0, 200), -1)
        cv2.putText(img, "legend: depth (m)", (10, 290), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 1)
        p = out_dir / "cloud.png"
        cv2.imwrite(str(p), img)
        return [*paths, p]


@hookimpl
def register_loaders(register):
    register(ToyLoader())


@hookimpl
def register_aligners(register):
    register(HalvesAligner())


@hookimpl
def register_metrics(register):
    register(PictureDrift)
'''


@pytest.fixture()
def world(tmp_path: Path) -> dict:
    install(tmp_path / "site", "reportplug", PLUGIN.format(tests=str(Path(__file__).parent)))
    ds = make_dataset(tmp_path, {"good": [0, 1, 2], "bad": [40, 60, 80]})
    return {"tmp": tmp_path, "env": env_with(tmp_path / "site", "reportplug"), "ds": ds}


def _run(world: dict, root: str, *extra: str) -> Path:
    out = world["tmp"] / root
    proc = worldrecall_cli(world["env"], "run", *toy_cli_overrides(world["ds"], out, *extra))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _pages(out: Path) -> list[Path]:
    return sorted((out / "results").glob("*/report/index.html"))


def _picture_files(out: Path) -> dict[str, set[int]]:
    """Every file under the output root named like a picture (``<sha256>.jpg|png``): name -> its inodes."""
    found: dict[str, set[int]] = {}
    for p in out.rglob("*"):
        if re.fullmatch(r"[0-9a-f]{64}\.(jpg|png)", p.name) and p.is_file():
            found.setdefault(p.name, set()).add(p.stat().st_ino)
    return found


def test_pictures_are_files_beside_the_page_each_stored_once_across_reruns_and_sweeps(world):
    out = _run(world, "out")
    [page] = _pages(out)
    text = "".join(p.read_text() for p in sorted(page.parent.glob("*.html")))  # the index and toy's cases page
    assert "data:image" not in text
    shown = set(re.findall(r"url\(assets/([0-9a-f]{64}\.(?:jpg|png))\)", text))
    assets = {p.name: p for p in (page.parent / "assets").iterdir()}
    assert shown and set(assets) == shown  # every picture the page shows is there, and nothing else
    for name, p in assets.items():  # named by content, and a link to the blob: no second copy of the bytes
        assert hashlib.sha256(p.read_bytes()).hexdigest() == name[:64]
        blob = out / "blobs" / "sha256" / name[:2] / name
        assert blob.stat().st_ino == p.stat().st_ino
    # the per-case figure is shown full size as its own PNG (not re-encoded), beside its JPEG thumbnail
    figures = list(out.rglob("cloud.png"))  # (kept with the cached measurement)
    assert figures and {hashlib.sha256(f.read_bytes()).hexdigest() + ".png" for f in figures} <= shown
    # a re-score (another tolerance, same pictures) and a two-value sweep: new pages, no new picture bytes
    _run(world, "out", "benchmarks.toy.metrics.brightness.thresholds.tolerance=30")
    proc = worldrecall_cli(world["env"], "run", "-m", *toy_cli_overrides(
        world["ds"], out, "benchmarks.toy.metrics.brightness.thresholds.tolerance=5,20"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(_pages(out)) == 4
    files = _picture_files(out)
    assert set(files) == shown  # the same pictures everywhere ...
    assert all(len(inodes) == 1 for inodes in files.values()), files  # ... each one file (links only)
    # MLflow logged them as links too (the job runs' report/assets), and the cache holds no picture bytes
    logged = [p for p in out.rglob("*") if p.parent.name == "assets" and p.parent.parent.name == "report"
              and "results" not in p.parts]
    assert logged and {p.name for p in logged} <= shown
    for p in (out / "cache").rglob("report_*/*/*.json"):  # names only: no JPEG/PNG as hex or base64
        assert not re.search(r"ffd8ff|/9j/|89504e47|iVBOR", p.read_text()), p


def test_self_contained_report_inlines_every_picture(world):
    out = _run(world, "out", "report.self_contained=true")
    [page] = _pages(out)
    text = page.read_text()
    assert not (page.parent / "assets").exists() and "assets/" not in text
    assert not list(page.parent.glob("cases.*.html"))  # self-contained: every case is in the one page
    inline = re.findall(r"url\(data:image/(jpeg|png);base64,([A-Za-z0-9+/=]+)\)", text)
    assert {kind for kind, _ in inline} == {"jpeg", "png"}  # frame thumbnails, and the figure at full size
    import cv2

    for _, b64 in inline:
        img = cv2.imdecode(np.frombuffer(base64.b64decode(b64), np.uint8), cv2.IMREAD_COLOR)
        assert img is not None and img.size
    # the same rows drawn as files beside the page take the cached sections: the same case text
    again = _run(world, "out", "report.self_contained=false")
    [page2] = _pages(again)
    cases = lambda t: t[re.search(r'<details( open)? id="model-', t).start():t.rindex("</body>")]  # noqa: E731
    assert cases((page2.parent / "cases.toy.html").read_text()) == cases(text)
