"""The HTML report: content, pictures (beside the page or inline), the store-cached sections and thumbnails, and a
real headless browser. Pictures shared across jobs and sweeps: tests/test_report_assets.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import toy_plugin
from helpers.toy_plugin import make_dataset, toy_config

from worldrecall.engine.job import run_plain
from worldrecall.engine.sinks.report import images
from worldrecall.engine.sinks.report.html import report_files
from worldrecall.engine.sinks.report.svg import line_chart
from worldrecall.registry.host import load_plugins

CHROMIUM = Path("/usr/bin/chromium")


def test_line_chart_places_points_thresholds_and_verdict():
    trace = {"kind": "worldrecall.trace", "title": "gate FAIL", "x": [0, 1, 2], "y_range": [0.0, 1.0],
             "series": [{"label": "s", "y": [0.0, 0.5, 1.0]}], "hlines": [{"y": 0.25, "label": "tol"}],
             "verdict": "fail", "x_label": "frame", "y_label": "v"}
    svg = line_chart(trace)  # 320 x 130, margins L40 R8 T26 B30 -> plot 272 x 74
    # (x=1, y=0.5): px = 40 + 1/2 * 272 = 176.0; py = 26 + (1 - 0.5) * 74 = 63.0 (written "176,63")
    assert 'points="40,100 176,63 312,26"' in svg  # (0, 0) -> (40, 26 + 74); (2, 1) -> (312, 26)
    # threshold 0.25: py = 26 + 0.75 * 74 = 81.5, dashed across the plot
    assert 'y1="81.5"' in svg and "stroke-dasharray" in svg and "tol 0.25" in svg
    assert svg.count("<circle") == 3 and 'stroke="#d62728"' in svg  # red frame: the verdict is a fail
    assert "no data" in line_chart({"title": "t", "x": [], "series": []})


def _text_boxes(svg: str) -> list[tuple[str, tuple[float, float, float, float]]]:
    """Every unrotated ``<text>`` of an SVG with its box, estimated here on its own: width = characters x
    0.6 font sizes, from 0.8 font sizes above the baseline to 0.2 below."""
    import xml.etree.ElementTree as ET

    out = []
    for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text"):
        if t.get("transform"):
            continue  # the rotated y label runs down the left margin
        size, x, y, text = float(t.get("font-size")), float(t.get("x")), float(t.get("y")), t.text or ""
        w = len(text) * 0.6 * size
        x0 = {"start": x, "middle": x - w / 2, "end": x - w}[t.get("text-anchor", "start")]
        out.append((text, (x0, y - 0.8 * size, x0 + w, y + 0.2 * size)))
    return out


@pytest.mark.parametrize("hlines, ys, title", [
    # a camera-gate trace: long verdict title on two lines, the tolerance above every value (at the top)
    ([{"y": 10.0, "label": "return tolerance"}], [0.0, 4.0, 2.0],
     "camera gate FAIL (return (rotation)): rotation 3.1 deg from frame 0, return error 9.2 deg of 10"),
    # two thresholds a hair apart (one line height would hold only one label)
    ([{"y": 0.5, "label": "min_score"}, {"y": 0.52, "label": "pass_score"}], [0.0, 1.0, 0.3], "ORS 0.5"),
    # three at once, one on the x axis
    ([{"y": 0.0, "label": "floor"}, {"y": 0.05, "label": "low"}, {"y": 0.1, "label": "lowish"}], [0.0, 1.0], "t"),
])
def test_threshold_labels_do_not_overlap_each_other_or_the_chart_text(hlines, ys, title):
    trace = {"kind": "worldrecall.trace", "title": title, "x": list(range(len(ys))), "x_label": "generated frame",
             "y_label": "v", "series": [{"label": "s", "y": ys}], "hlines": hlines, "verdict": "fail"}
    svg = line_chart(trace)
    boxes = _text_boxes(svg)
    for h in hlines:  # every threshold is labelled with its value
        assert any(text == f"{h['label']} {h['y']:g}" for text, _ in boxes)
    for i, (ta, a) in enumerate(boxes):
        assert 0 <= a[1] and a[3] <= 130, ta  # inside the chart
        for tb, b in boxes[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (ta, a, tb, b)


def _toy_report(tmp_path: Path) -> tuple[Path, str]:
    host = load_plugins(extra=[toy_plugin], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    cfg = toy_config(tmp_path, ds)
    assert run_plain(cfg, host=host) == 0
    report = next((tmp_path / "out" / "results").glob("*/report/index.html"))
    return report, _pages(report)


def _pages(index: Path) -> str:
    """The report's text: the index, then each benchmark's page of cases."""
    return "".join(p.read_text() for p in [index, *sorted(index.parent.glob("cases.*.html"))])


def test_report_shows_leaderboard_phases_frames_and_values(tmp_path, capsys):
    report, page = _toy_report(tmp_path)
    assert f"report: {report.resolve()}" in capsys.readouterr().out  # linked from the printed summary
    assert '<h2 id="leaderboard">Leaderboard</h2>' in page and "toy · mean of each metric" in page
    assert "brightness (0–1 ↑)" in page  # unit (declared range) and direction in the header
    index = report.read_text()
    assert '<a href="cases.toy.html">toy</a>' in index and 'class="case"' not in index  # cases: a page per benchmark
    for model in ("good", "bad"):
        for case in ("c0", "c1"):
            assert f'id="case-{model}-{case}"' in page
    # the toy aligner's halves of 8 frames: A = 0–3, B = 4–7, drawn at 0 % and 50 % of the bar
    assert 'style="left:0.00%;width:50.00%;' in page and ">A 0–3<" in page
    assert 'style="left:50.00%;width:50.00%;' in page and ">B 4–7<" in page
    # generated frames at each phase's first and last frame: 0, 3, 4, 7
    strip = re.search(r'id="case-good-c0".*?<span class="lab">generated</span>(.*?)</div></div>', page, re.DOTALL)
    assert strip and all(f"frame {i}" in strip.group(1) for i in (0, 3, 4, 7))
    assert "toy/brightness" in page and "stable = <b>1</b>" in page
    # static: no script, stylesheet link or remote URL (the SVG namespace is not a request)
    assert "<script" not in page and "<link" not in page
    assert not re.search(r'(src|href)="(https?:)?//', page)
    # pictures beside the page, none inline; each distinct one is one CSS rule and one file, however often shown
    assert "data:image" not in page
    rules = re.findall(r"^\.i([0-9a-f]{16})\{background-image:url\(assets/([0-9a-f]{64}\.jpg)\)\}", page, re.MULTILINE)
    assert rules and len(rules) == len(set(rules)) and len(rules) < page.count('class="im i')
    assert sorted(p.name for p in (report.parent / "assets").iterdir()) == sorted(name for _, name in rules)


def test_case_pages_drawn_beside_the_aggregation_are_those_the_sink_draws(tmp_path, monkeypatch):
    """A job's report draws its benchmarks' pages of cases in a forked copy of the job while it aggregates
    (``ReportSink.begin``, ``sinks/beside.py``): the report is byte for byte the one drawn by the sink itself
    (no fork), and a copy that fails leaves the sink to draw them, the same way."""
    from worldrecall.engine.sinks import beside
    from worldrecall.engine.sinks.report import html

    answers: list[bool] = []
    real_join = beside.Beside.join

    def join(self):
        got = real_join(self)
        answers.append(got is not None)
        return got

    monkeypatch.setattr(beside.Beside, "join", join)

    # one set of inputs for every run (a video encoded again may differ in its last bits)
    ds = make_dataset(tmp_path / "inputs", {"good": [0, 1], "bad": [40, 60]})

    def report_in(name: str) -> str:
        folder = tmp_path / name
        assert run_plain(toy_config(folder, ds), host=load_plugins(extra=[toy_plugin], fresh=True)) == 0
        text = _pages(next((folder / "out" / "results").glob("*/report/index.html")))
        return re.sub(r"results/[0-9a-f]{16}", "results/<key>", text.replace(str(folder), "<root>"))

    forked = report_in("forked")
    assert answers == [True]  # drawn by the copy, taken by the sink
    parent, real = os.getpid(), html.case_pages

    def fails_in_the_copy(*a, **k):
        if os.getpid() != parent:
            raise RuntimeError("the copy cannot draw")
        return real(*a, **k)

    monkeypatch.setattr(html, "case_pages", fails_in_the_copy)
    assert report_in("copy_failed") == forked and answers == [True, False]
    monkeypatch.setattr(beside, "can_fork", lambda: False)
    assert report_in("here") == forked and answers == [True, False]  # no copy: drawn by the sink
    assert '<a href="cases.toy.html">toy</a>' in forked and 'id="case-good-c0"' in forked


def test_report_thumbnails_and_sections_come_from_the_store(tmp_path, monkeypatch):
    """A later process drawing the same rows reads every section and thumbnail from the store: no frame is
    read, no section drawn, and the page is the same."""
    report, page = _toy_report(tmp_path)

    def no_decode(*a, **k):
        raise AssertionError("a warm report must not read a video frame")

    monkeypatch.setattr(images, "small_frames", no_decode)
    monkeypatch.setattr(images, "small_image", no_decode)
    from worldrecall.engine.sinks.report import html

    monkeypatch.setattr(html, "_case", no_decode)
    from worldrecall.engine.sinks.report.html import write_report

    class R:  # the run's result as the report reads it
        pass

    host = load_plugins(extra=[toy_plugin], fresh=True)
    from worldrecall.engine.stages.runner import load_rows

    res = R()
    res.results_dir = report.parent.parent
    res.rows = load_rows(res.results_dir)
    res.tables, res.backends, res.row_digests = {}, {}, {}
    res.n_cases, res.n_failed_cases, res.failure_rate = 4, 0, 0.0
    plain = json.loads((res.results_dir / "meta" / "resolved_config.json").read_text())  # the run's own config
    out = write_report(res, host, [], plain)
    assert "frame 7" in _pages(out)
    cases = lambda text: text[text.index('<h2 id="cases">'):]
    assert cases(_pages(out)) == cases(page)


@pytest.mark.skipif(not CHROMIUM.exists(), reason="headless browser check needs Debian's chromium at /usr/bin/chromium "
                    "(scripts/setup.sh installs it with apt-get where it can)")
def test_report_renders_in_headless_chromium(tmp_path):
    report, _ = _toy_report(tmp_path)
    shot = tmp_path / "shot.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--allow-file-access-from-files"]
    subprocess.run([str(CHROMIUM), *flags, f"--screenshot={shot}", "--window-size=1200,1600", report.as_uri()],
                   capture_output=True, timeout=120, check=False)
    import cv2

    img = cv2.imread(str(shot))
    assert img is not None, "chromium wrote no screenshot"
    assert img.shape[:2] == (1600, 1200)
    ink = (img < 200).any(axis=2).mean()
    assert ink > 0.01 and float(img.std()) > 10  # not blank: text, tables and thumbnails were drawn
    dom = subprocess.run([str(CHROMIUM), *flags, "--dump-dom", report.as_uri()], capture_output=True, text=True,
                         timeout=120, check=False).stdout
    assert '<h2 id="leaderboard">Leaderboard</h2>' in dom and 'href="cases.toy.html"' in dom
    cases = report.parent / "cases.toy.html"
    dom = subprocess.run([str(CHROMIUM), *flags, "--dump-dom", cases.as_uri()], capture_output=True, text=True,
                         timeout=120, check=False).stdout
    assert 'id="case-good-c0"' in dom and "good · c0" in dom


def test_ors_and_camera_gate_write_trace_views(tmp_path):
    from worldrecall.plugins.memobench.camera_gate import CameraGate
    from worldrecall.plugins.memobench.ors import ORS

    m = {"cand_frame": np.array([0, 0, 2]), "cand_coverage": np.array([0.1, 0.9, 0.2]),
         "cand_score": np.array([0.8, 0.9, 0.6]), "n_r": 3, "r": 10}
    ors = ORS()
    [p] = ors.artifacts(m, ors.thresholds, tmp_path / "ors")
    t = json.loads(p.read_text())
    # frame 0: coverage 0.1 in [0.0005, 0.5] -> 0.8 (0.9 coverage is outside both bands); frame 1: nothing;
    # frame 2: 0.6. ORS = 2/3 * (0.8 + 0.6) / 2 = 0.4667
    assert t["series"][0]["y"] == [0.8, 0.0, 0.6] and t["x"] == [0, 1, 2]
    assert t["title"] == "ORS 0.467: target detected on 2/3 R frames" and "r = 10" in t["x_label"]
    gate = CameraGate()
    pan = np.tile(np.eye(4)[:3], (4, 1, 1))
    for k, a in enumerate(np.radians([0.0, 30.0, 40.0, 5.0])):
        pan[k, :3, :3] = [[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]]
    g = {"gen_c2w": pan, "ref_c2w": pan, "has_reference": True, "reference": "GT trajectory", "instructed": False,
         "return_frames": np.array([3]), "return_from_phase": True, "absence_measured": False, "absence_n": 0,
         "cand_frame": np.zeros(0), "cand_coverage": np.zeros(0), "cand_score": np.zeros(0)}
    [q] = gate.artifacts(g, gate.thresholds, tmp_path / "gate")
    t = json.loads(q.read_text())
    # generated = GT: departs 40° of 40° (needs 24°), 0° from the GT pose at R (tolerance max(10, 10) = 10°)
    assert t["verdict"] == "pass" and t["title"].startswith("camera gate PASS: departed 40° of the reference's 40°")
    assert [s["label"] for s in t["series"]] == ["generated camera", "reference camera"]
    assert [h["y"] for h in t["hlines"]] == [pytest.approx(10.0)]
    assert 'stroke="#2ca02c"' in line_chart(t)  # drawn with a green frame


def test_reference_model_opens_first_and_values_show_headline_first(tmp_path):
    host = load_plugins(extra=[toy_plugin], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    cfg = toy_config(tmp_path, ds)
    cfg.setdefault("aggregator_params", {})["paired"] = {"reference": "good"}
    assert run_plain(cfg, host=host) == 0
    page = _pages(next((tmp_path / "out" / "results").glob("*/report/index.html")))
    # "good" is the configured reference: expanded first, although "bad" sorts first by name
    assert page.index('<details open id="model-good">') < page.index('<details id="model-bad">')
    # brightness emits "stable" (primary) and "drift": the non-headline value is folded, never dropped
    assert "<summary class=note>1 more values</summary><span class=note>drift=" in page


def _source(tmp_path: Path):
    from worldrecall.engine.cache import Store
    from worldrecall.engine.cache.blobs import BlobStore
    from worldrecall.engine.sinks.report import html

    return html._Source(Store(tmp_path / "cache"), BlobStore(tmp_path / "blobs"))


def test_png_artifacts_open_at_full_size(tmp_path):
    """A figure's thumbnail opens the figure itself: the PNG's own bytes at its own size (a point cloud's legend
    is not re-encoded as JPEG), stored once in the blob store."""
    import hashlib
    from types import SimpleNamespace

    import cv2

    from worldrecall.core.data import ScoreRow
    from worldrecall.engine.sinks.report import html

    png = tmp_path / "cloud.png"
    cv2.imwrite(str(png), np.full((464, 840, 3), 128, np.uint8))
    row = ScoreRow("toy", "m", "c0", "toy.brightness", {"stable": 1.0}, info={"artifacts": [str(png)]})
    imgs = html._Images()
    page = html._case("m", "c0", [row], SimpleNamespace(metrics={}), imgs, _source(tmp_path),
                      {"image_side": 360, "frames_per_phase": 0, "max_cases_per_model": 0, "thumb_side": 96})
    sizes = re.findall(r'style="width:(\d+)px;height:(\d+)px"', page)
    assert ("360", "199") in sizes and ("840", "464") in sizes  # the thumbnail, and the figure behind it
    assert "<details class=zoom>" in page and "click: full size" in page
    full, thumb = list(imgs.names)
    assert full == hashlib.sha256(png.read_bytes()).hexdigest() + ".png" and thumb.endswith(".jpg")
    blob = tmp_path / "blobs" / "sha256" / full[:2] / full
    assert blob.read_bytes() == png.read_bytes() and blob.stat().st_ino == png.stat().st_ino  # linked, not copied


def _sections_world(tmp_path: Path):
    from types import SimpleNamespace

    import cv2

    from worldrecall.core.data import ScoreRow

    png = tmp_path / "fig.png"
    cv2.imwrite(str(png), np.random.default_rng(0).integers(0, 255, (120, 160, 3), dtype=np.uint8))
    host = SimpleNamespace(metrics={}, benchmarks={})
    opts = {"image_side": 64, "frames_per_phase": 0, "max_cases_per_model": 0, "thumb_side": 32,
            "self_contained": False}

    def rows(case: str, v: float) -> list[ScoreRow]:
        return [ScoreRow("toy", "m", case, "toy.a", {"x": v}, info={"artifacts": [str(png)]})]

    return host, opts, rows


def test_a_changed_row_redraws_its_own_section_only(tmp_path, monkeypatch):
    """Sections are cached in the store by the rows' content: a re-score that changes one case's row draws that
    case's section again and takes every other from the store; a fresh process (a new store object on the same
    folder) draws nothing and gets the same text."""
    from worldrecall.engine.sinks.report import html

    host, opts, rows = _sections_world(tmp_path)
    drawn: list[str] = []
    real = html._case
    monkeypatch.setattr(html, "_case", lambda m, cid, *a: drawn.append(cid) or real(m, cid, *a))

    def draw(values: dict[str, float]) -> dict[str, str]:
        src, sections = _source(tmp_path), None
        sections = html._Sections(src.store, host)
        return {c: sections.render("m", c, rows(c, v), host, html._Images(), src, opts) for c, v in values.items()}

    first = draw({"c0": 0.25, "c1": 0.5})
    assert sorted(drawn) == ["c0", "c1"]
    drawn.clear()
    second = draw({"c0": 0.75, "c1": 0.5})
    assert drawn == ["c0"] and second["c1"] == first["c1"] and "x=0.75" in second["c0"]
    drawn.clear()
    assert draw({"c0": 0.75, "c1": 0.5}) == second and drawn == []
    # how the page ships pictures is not part of a section: the self-contained page reuses it too
    assert html._Sections(_source(tmp_path).store, host).key("m", "c0", rows("c0", 0.75), opts) == \
        html._Sections(_source(tmp_path).store, host).key("m", "c0", rows("c0", 0.75), {**opts, "self_contained": True})


def test_section_keys_from_parts_encoded_once_are_those_of_the_whole_structure(tmp_path):
    """A section's key encodes the metrics' declarations once per report, not once per section: the key is the
    one of encoding identity, inputs and params whole, for the real plugins' declarations."""
    from worldrecall.core.data import ScoreRow
    from worldrecall.engine.cache.keys import key_of
    from worldrecall.engine.sinks.report import html
    from worldrecall.engine.stages.row_digests import row_digest
    from worldrecall.registry.host import load_plugins

    host = load_plugins()
    _, opts, _ = _sections_world(tmp_path)
    sections = html._Sections(_source(tmp_path).store, host)
    assert len(sections.base["metrics"]) >= 30  # every metric's declaration is in it
    for model, cid, values in (("m", "c0", {"ors": 0.5}), ("oracle", "c é", {"ors": None, "x": 1})):
        rows = [ScoreRow("memobench", model, cid, "memobench.ors", values)]
        whole = key_of(sections.identity, {"rows": [row_digest(r) for r in rows], "files": []},
                       {**sections.base, "model": model, "case": cid, "opts": html._drawn(opts)})
        assert sections.key(model, cid, rows, opts) == whole


def test_a_cached_section_names_its_pictures_and_a_missing_blob_draws_it_again(tmp_path, monkeypatch):
    """A section in the store holds its text and the names of its pictures (small: no picture bytes); each
    picture is one blob. A later process reads the section back with its pictures; a blob cleaned up makes it
    draw the section again, with the same text and pictures."""
    from worldrecall.engine.sinks.report import html

    host, opts, rows = _sections_world(tmp_path)
    src = _source(tmp_path)
    imgs = html._Images()
    page = html._Sections(src.store, host).render("m", "c0", rows("c0", 0.25), host, imgs, src, opts)
    entries = [json.loads(p.read_text())["entry"] for p in (tmp_path / "cache" / "report_sections").glob("??/*.json")]
    docs = [d for d in entries if "html_z" in d]  # the section; the others are its parts that show files
    assert len(docs) == 1 and docs[0]["images"] == list(imgs.names) and len(imgs.names) == 2  # thumbnail + figure
    assert len(json.dumps(docs[0])) < 3000
    assert sorted(n for d in entries if "html" in d for n in d["images"]) == sorted(imgs.names)
    blobs = sorted((tmp_path / "blobs" / "sha256").glob("??/*"))
    assert sorted(p.name for p in blobs) == sorted(imgs.names)

    drawn: list[str] = []
    real = html._case
    monkeypatch.setattr(html, "_case", lambda *a: drawn.append("drawn") or real(*a))
    again = html._Images()
    fresh = _source(tmp_path)
    assert html._Sections(fresh.store, host).render("m", "c0", rows("c0", 0.25), host, again, fresh, opts) == page
    assert drawn == [] and again.names == imgs.names
    thumb = next(p for p in blobs if p.suffix == ".jpg")
    thumb.unlink()  # cleaned up
    fresh = _source(tmp_path)
    redrawn = html._Images()
    assert html._Sections(fresh.store, host).render("m", "c0", rows("c0", 0.25), host, redrawn, fresh, opts) == page
    assert drawn == ["drawn"] and redrawn.names == imgs.names and thumb.is_file()


def test_a_section_whose_values_changed_draws_again_only_its_values_not_its_frames_or_figures(tmp_path,
                                                                                            monkeypatch):
    """A re-score changes a case's values, not the frames or files it shows: the section is assembled again
    from its cached frame strip and figures (the parts keyed by what they show), byte for byte as if drawn."""
    from worldrecall.engine.sinks.report import html

    host, opts, rows = _sections_world(tmp_path)
    src = _source(tmp_path)
    html._Sections(src.store, host).render("m", "c0", rows("c0", 0.25), host, html._Images(), src, opts)
    drawn: list[str] = []
    real_head, real_arts = html._head, html._row_arts
    monkeypatch.setattr(html, "_head", lambda *a: drawn.append("head") or real_head(*a))
    monkeypatch.setattr(html, "_row_arts", lambda *a: drawn.append("arts") or real_arts(*a))
    imgs = html._Images()
    page = html._Sections(src.store, host).render("m", "c0", rows("c0", 0.5), host, imgs, src, opts)
    assert drawn == []  # the values changed: the frames and the figure came from the cache
    fresh_src = _source(tmp_path / "elsewhere")
    fresh = html._Images()
    assert html._case("m", "c0", rows("c0", 0.5), host, fresh, fresh_src, opts) == page  # as drawn whole
    assert fresh.names == imgs.names and drawn == ["head", "arts"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_crashing_output_is_reported_the_others_still_run_and_the_exit_code_says_so(tmp_path, capsys,
                                                                                      monkeypatch, workers):
    from worldrecall.engine.sinks import report as report_pkg
    from worldrecall.engine.sinks.base import EXIT_OUTPUT_FAILED
    from worldrecall.engine.sinks.report import html as report_html

    def boom(*a, **k):
        raise RuntimeError("renderer exploded")

    monkeypatch.setattr(report_html, "write_report", boom)
    assert report_pkg is not None
    host = load_plugins(extra=[toy_plugin], fresh=True)
    ds = make_dataset(tmp_path, {"good": [0, 1], "bad": [40, 60]})
    cfg = toy_config(tmp_path, ds)
    cfg["workers"] = workers
    assert run_plain(cfg, host=host) == EXIT_OUTPUT_FAILED
    out, err = capsys.readouterr()
    assert "error: output report failed: RuntimeError: renderer exploded" in err
    results = next((tmp_path / "out" / "results").iterdir())
    # every other output is there: tables, the leaderboard (file and console), the submission bundle
    assert (results / "tables" / "mean" / "toy.csv").is_file() and (results / "tables" / "leaderboard.txt").is_file()
    assert (results / "submission" / "aggregate.json").is_file()
    assert re.search(r"(== toy|: toy)$", out, re.MULTILINE)  # the console's view of the benchmark
    assert not (results / "report" / "index.html").exists()


def test_trace_charts_are_svg_pictures_shared_by_equal_charts(tmp_path):
    """A ``worldrecall.trace`` JSON is drawn as an SVG chart stored once as a picture: the same trace in another
    section (a sweep's other job, a camera gate that a threshold does not change) is the same file."""
    from types import SimpleNamespace

    from worldrecall.core.data import ScoreRow
    from worldrecall.engine.sinks.report import html

    trace = tmp_path / "gate.json"
    trace.write_text(json.dumps({"kind": "worldrecall.trace", "title": "camera gate PASS", "x": [0, 1, 2],
                                 "series": [{"label": "s", "y": [0.0, 0.5, 1.0]}], "verdict": "pass"}))
    opts = {"image_side": 64, "frames_per_phase": 0, "max_cases_per_model": 0, "thumb_side": 32}
    names = []
    for case in ("c0", "c1"):
        imgs = html._Images()
        row = ScoreRow("toy", "m", case, "toy.a", {"x": 1.0}, info={"artifacts": [str(trace)]})
        page = html._case("m", case, [row], SimpleNamespace(metrics={}), imgs, _source(tmp_path), opts)
        assert "<svg" not in page and 'style="width:320px;height:130px"' in page
        names += list(imgs.names)
    assert len(names) == 2 and names[0] == names[1] and names[0].endswith(".svg")
    blob = (tmp_path / "blobs" / "sha256" / names[0][:2] / names[0]).read_text()
    assert blob.startswith('<svg class="trace"') and "camera gate PASS" in blob


def test_a_trace_without_data_is_said_in_its_section_not_a_failed_section(tmp_path):
    """A trace with no finite point (a camera gate whose poses all failed) draws no chart: its section says
    "no data" for that figure and shows everything else (it used to fail whole, as "could not render")."""
    from types import SimpleNamespace

    from worldrecall.core.data import ScoreRow
    from worldrecall.engine.sinks.report import html

    empty = tmp_path / "gate.json"
    empty.write_text(json.dumps({"kind": "worldrecall.trace", "title": "camera gate", "x": [0, 1],
                                 "series": [{"label": "s", "y": [None, None]}]}))
    opts = {"image_side": 64, "frames_per_phase": 0, "max_cases_per_model": 0, "thumb_side": 32}
    imgs = html._Images()
    row = ScoreRow("toy", "m", "c0", "toy.a", {"x": 1.0}, info={"artifacts": [str(empty)]})
    page = html._case("m", "c0", [row], SimpleNamespace(metrics={}), imgs, _source(tmp_path), opts)
    assert "camera gate: no data" in page and "a · gate.json" in page and not list(imgs.names)


def test_each_benchmark_has_its_page_and_an_unchanged_one_is_linked_not_written_again(tmp_path, monkeypatch):
    """A re-score changes one benchmark's rows: that benchmark's page is written again, the other one's is a
    hard link to the page the earlier job wrote (the blob store's), none of its sections even looked up, and
    the index links both."""
    from dataclasses import replace

    from worldrecall.engine.sinks.report import html
    from worldrecall.engine.sinks.report.html import write_report
    from worldrecall.engine.stages.runner import load_rows

    report, _ = _toy_report(tmp_path)
    host = load_plugins(extra=[toy_plugin], fresh=True)
    plain = json.loads((report.parent.parent / "meta" / "resolved_config.json").read_text())
    rows = load_rows(report.parent.parent)

    def write(folder: str, alpha_value: float | None) -> Path:
        res = SimpleNamespace(results_dir=tmp_path / "out" / "results" / folder, tables={}, backends={},
                              row_digests={}, n_cases=4, n_failed_cases=0, failure_rate=0.0)
        res.rows = [*(replace(r, benchmark="alpha", values={**r.values, "stable": alpha_value}) for r in rows
                      if alpha_value is not None), *(replace(r, benchmark="beta") for r in rows)]
        return write_report(res, host, [], plain)

    first = write("one", 0.25)
    looked_up: list[str] = []
    real = html._Sections.render
    monkeypatch.setattr(html._Sections, "render", lambda self, m, c, rows, *a: looked_up.append(rows[0].benchmark)
                        or real(self, m, c, rows, *a))
    second = write("two", 0.75)
    assert set(looked_up) == {"alpha"}
    index = second.read_text()
    assert '<a href="cases.alpha.html">alpha</a>' in index and '<a href="cases.beta.html">beta</a>' in index
    pages = {p.name: p for p in report_files(second) if p.suffix == ".html"}
    assert sorted(pages) == ["cases.alpha.html", "cases.beta.html", "index.html"]
    assert os.path.samefile(first.parent / "cases.beta.html", second.parent / "cases.beta.html")
    assert not os.path.samefile(first.parent / "cases.alpha.html", second.parent / "cases.alpha.html")
    assert "stable = <b>0.75</b>" in pages["cases.alpha.html"].read_text()
    assert "stable = <b>0.25</b>" in (first.parent / "cases.alpha.html").read_text()  # the earlier job's, as it was
    # a picture the page shows was cleaned up from the blob store: the page is drawn again, and shows it again
    for p in (tmp_path / "out" / "blobs").rglob("*.jpg"):
        p.unlink()
    looked_up.clear()
    third = write("three", None)  # beta's rows only: its page's key is the one stored
    assert set(looked_up) == {"beta"} and (third.parent / "cases.beta.html").read_text() == \
        (second.parent / "cases.beta.html").read_text()
    assert all((third.parent / "assets" / n).is_file() for n in re.findall(r"assets/([0-9a-f]{64}\.jpg)",
                                                                          (third.parent / "cases.beta.html").read_text()))


def test_a_video_shown_on_several_pages_is_read_once_for_all_of_their_frames(tmp_path, monkeypatch):
    """Benchmarks that share a case show its video (often one file linked under each benchmark's layout) at
    their own phases: the first page that draws it reads every frame any page shows (``together``), and each
    thumbnail is kept by the video's content, so the other names and pages read nothing."""
    from worldrecall.engine.cache import Store
    from worldrecall.engine.cache.blobs import BlobStore
    from worldrecall.formats.mp4 import write_video

    video = write_video(tmp_path / "a" / "v.mp4", [np.full((32, 32, 3), 10 * i, np.uint8) for i in range(12)])
    other = tmp_path / "b" / "v.mp4"
    other.parent.mkdir()
    os.link(video, other)
    reads: list[list[int]] = []
    real = images.small_frames
    monkeypatch.setattr(images, "small_frames", lambda p, idx, *a, **k: reads.append(list(idx)) or real(p, idx, *a, **k))
    store, blobs = Store(tmp_path / "cache"), BlobStore(tmp_path / "blobs")
    first = images.frame_thumbs(video, [0, 3], 16, store, blobs=blobs, together=[0, 3, 7, 11])
    assert reads == [[0, 3, 7, 11]] and sorted(first) == [0, 3]
    second = images.frame_thumbs(other, [7, 11], 16, store, blobs=blobs, together=[0, 3, 7, 11])
    assert reads == [[0, 3, 7, 11]] and sorted(second) == [7, 11]
    assert first[0] != second[7]  # frames of their own (the frames' brightness differs)
    images.frame_thumbs(other, [5], 16, store, blobs=blobs)  # a frame no page announced is read when asked
    assert reads[1:] == [[5]]
