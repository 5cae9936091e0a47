"""Write ``report/index.html``: static pages (no server, no network, no script).

The index: the leaderboard views with CIs (camera-gated first), the run's figures (each aggregator's
plots, e.g. the validity matrix) and a link to each benchmark's page of cases, ``report/cases.<benchmark>.html``
(kept once in the blob store, like the tables: a re-score or a sweep's job writes again only the pages of the
benchmarks whose rows changed; ``report.self_contained=true`` puts them all in the index). Per model and case
of a benchmark: the phases of the alignment recorded on the rows (V/D/R …) as a bar, reference and generated
frame thumbnails side by side at each phase's first and last frame, every metric's values with unit and direction, and each metric's per-case files — PNGs as
thumbnails, ``worldrecall.trace`` JSON as SVG charts (see :mod:`worldrecall.engine.sinks.report.svg`), which are
pictures too: a chart that a sweep's other job draws unchanged is the same file.
The engine names no plugin: everything comes from rows, tables and ``value_meta``.

Every picture is stored once by content in the output root's blob store (:mod:`.images`) and drawn through one
CSS class per picture, so one reference frame shown for eight models is one file. The page shows them from
``report/assets/<digest>.<ext>``, hard links to the blobs beside it (no bytes copied: a sweep's jobs, a re-score
and a rerun share them, and MLflow logs them as links too), or, with ``report.self_contained=true``, inline as
base64 in one file that can be mailed.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import math
import os
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.engine.cache import Store, code_digest, inputs_digest, key_of, store_for
from worldrecall.engine.cache.blobs import BlobStore, link_or_copy, linked_blob, write_shared, written_state
from worldrecall.engine.cache.keys import canonical_json, key_of_encoded, object_json
from worldrecall.engine.sinks.leaderboard_view import compact_frames, compact_legend, leaderboard_views
from worldrecall.engine.sinks.report.images import (
    MIME,
    Picture,
    blob_path,
    frame_thumbs,
    full_image,
    image_thumb,
    put_svg,
)
from worldrecall.engine.sinks.report.svg import line_chart
from worldrecall.engine.sinks.results_view import direction_label, short_metric, unit_label, value_meta
from worldrecall.engine.stages.config import resolve_config
from worldrecall.engine.stages.row_digests import row_digest, rows_digest

log = logging.getLogger(__name__)
esc = html.escape
PHASE_COLOURS = ["#4e79a7", "#bab0ac", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2"]

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:20px;color:#222;max-width:1500px}
h1{font-size:22px} h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:3px;margin-top:28px}
h3{font-size:15px} table.lb{border-collapse:collapse;font-size:12px;margin:6px 0 4px}
table.lb th,table.lb td{border:1px solid #ddd;padding:3px 6px;text-align:right;white-space:nowrap}
table.lb th{background:#f3f3f3} table.lb td:first-child,table.lb th:first-child{text-align:left}
.note{font-size:11px;color:#555;margin:2px 0 12px} .fig img{max-width:100%;border:1px solid #ddd}
.case{border:1px solid #ddd;border-radius:6px;padding:8px 10px;margin:10px 0;background:#fcfcfc}
.case h4{margin:0 0 6px;font-size:14px} .phasebar{position:relative;height:16px;font-size:10px;color:#fff;
margin:4px 0 6px;border-radius:3px;overflow:hidden;background:#eee;max-width:900px}
.phasebar div{position:absolute;top:0;height:16px;text-align:center;line-height:16px;overflow:hidden}
.strip{display:flex;gap:3px;align-items:flex-end;margin:2px 0} .strip .lab{width:78px;font-size:11px;color:#444}
.th{display:flex;flex-direction:column;align-items:center;font-size:9px;color:#333}
.im{background-size:contain;background-repeat:no-repeat;border:2px solid #ccc}
.vals{border-collapse:collapse;font-size:11px;margin:6px 0} .vals td,.vals th{border:1px solid #e3e3e3;padding:2px 5px}
.vals th{background:#f6f6f6;text-align:left} .failed{color:#b00} .skipped{color:#888}
.arts{display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start} .arts figure{margin:0;font-size:10px;color:#555}
.badge{display:inline-block;padding:1px 6px;border-radius:8px;font-size:11px;color:#fff}
.pass{background:#2ca02c} .fail{background:#d62728} details>summary{cursor:pointer;font-weight:bold;margin:8px 0} details.zoom>summary{list-style:none}
"""


class _Images:
    """The pictures a page (or one section) shows, each distinct one once, in first-use order: one CSS class
    per picture, its background the file beside the page or, self-contained, the bytes inline."""

    def __init__(self) -> None:
        self.names: dict[str, None] = {}

    def div(self, pic: Picture, title: str = "", border: str = "") -> str:
        self.names.setdefault(pic.name)
        style = f"width:{pic.width}px;height:{pic.height}px" + (f";border-color:{border}" if border else "")
        return f'<div class="im i{pic.name[:16]}" style="{style}" title="{esc(title)}"></div>'

    def merge(self, names: Iterable[str]) -> None:
        """Add a cached section's pictures, in its order, as if it had been drawn here."""
        for name in names:
            self.names.setdefault(name)

    def css(self, blobs: BlobStore, inline: bool) -> str:
        return "\n".join(f".i{n[:16]}{{background-image:url({_src(blobs, n, inline)})}}" for n in self.names)


def _src(blobs: BlobStore, name: str, inline: bool) -> str:
    """A picture's address on the page: ``assets/<name>`` beside it, or its bytes as a data URI."""
    if not inline:
        return f"assets/{name}"
    data = base64.b64encode(blob_path(blobs, name).read_bytes()).decode("ascii")
    return f"data:{MIME[name[64:]]};base64,{data}"


def _link_assets(out_dir: Path, blobs: BlobStore, names: Iterable[str]) -> list[Path]:
    """``out_dir/assets/<name>``: a hard link to each picture's blob (a copy across devices); files of an
    earlier page that this one does not show are removed (links only: the blobs stay)."""
    assets = out_dir / "assets"
    wanted = {n: assets / n for n in names}
    if wanted:
        assets.mkdir(parents=True, exist_ok=True)
    for p in (assets.iterdir() if assets.is_dir() else []):
        if p.name not in wanted:
            p.unlink()
    for name, dst in wanted.items():
        src = blob_path(blobs, name)
        try:
            if os.path.samefile(src, dst):
                continue
        except OSError:
            pass
        link_or_copy(src, dst)
    if assets.is_dir() and not wanted:
        assets.rmdir()
    return list(wanted.values())


@dataclass(frozen=True)
class _Source:
    """Where a section's pictures come from and go: the thumbnail cache (None: none) and the blob store; and
    ``frames``, every frame index the report shows of each video (:func:`_frames_shown`), so a video is
    read once for all the pages that show it, each at its own benchmark's phases."""

    store: Store | None
    blobs: BlobStore
    frames: Mapping[tuple[str, int | None], frozenset[int]] = field(default_factory=dict)


def _drawn(opts: Mapping[str, Any]) -> dict[str, Any]:
    """The report options that change what a section or page draws (not how its pictures are shipped)."""
    return {k: v for k, v in opts.items() if k != "self_contained"}


class _Sections:
    """Case sections cached in the store under the one key recipe: this package's code, the metrics'
    declarations, the report options, the case's rows (their content) and the content digest of every file
    they show (frames, figures). A re-score job re-renders only the cases whose rows changed; a warm rerun
    none. A section names its pictures, which live once each in the blob store (:mod:`.images`)."""

    def __init__(self, store: Store, host: Any) -> None:
        self.store, self.host = store, host
        decl = {n: [getattr(c, "primary", ""), {v: repr(m) for v, m in (getattr(c, "values", None) or {}).items()}]
                for n, c in sorted(getattr(host, "metrics", {}).items())}
        self.identity = {"name": "report.section", "code": code_digest(__name__)}
        self.base = {"metrics": decl, "heads": _headline_values(host)}
        # encoded once (every metric's declaration): a re-score keys ~200 sections and their pieces
        self._identity = canonical_json(self.identity)
        self._base = {k: canonical_json(v) for k, v in self.base.items()}
        self._files: dict[str, list[str]] = {}  # path -> [path, digest], looked up once per report

    def files_digest(self, files: Iterable[str]) -> list[list[str]]:
        """:func:`inputs_digest` of ``files``, each path looked up once per report: a reference clip's frame
        folder is shown by every model's section of that case (a folder's digest stats every file in it)."""
        out = []
        for f in files:
            if f not in self._files:
                self._files[f] = inputs_digest([f])[0]
            out.append(self._files[f])
        return out

    def key(self, model: str, cid: str, rows: list[Any], opts: Mapping[str, Any],
            digests: Mapping[Any, str] | None = None) -> str:
        """``digests``: the result's row digests (each row hashed once per job), else computed here."""
        files = sorted({str(p) for r in rows for p in _row_files(r)})
        drawn = _drawn(opts)
        known = digests or {}
        inputs = {"rows": [known.get(r.row_key) or row_digest(r) for r in rows], "files": self.files_digest(files)}
        params = {**self._base, "model": canonical_json(model), "case": canonical_json(cid),
                  "opts": canonical_json(drawn)}
        return key_of_encoded(self._identity, canonical_json(inputs), object_json(params))[0]

    def page_key(self, bench: str, by_model: Mapping[str, Mapping[str, list[Any]]], reference: str,
                 opts: Mapping[str, Any], digests: Mapping[Any, str] | None = None) -> str:
        """The key of a benchmark's page of cases: what each of its sections is keyed on (:meth:`key`: the rows'
        content, every file shown, the metrics' declarations, the options) and the page's own order (the
        reference model first)."""
        rows = [r for cases in by_model.values() for rs in cases.values() for r in rs]
        files = sorted({str(p) for r in rows for p in _row_files(r)})
        known = digests or {}
        drawn = _drawn(opts)
        return key_of({**self.identity, "name": "report.page"},
                      {"rows": rows_digest(sorted(rows, key=lambda r: r.row_key), known or None),
                       "files": self.files_digest(files)},
                      {**self.base, "benchmark": bench, "reference": reference, "opts": drawn})

    def render(self, model: str, cid: str, rows: list[Any], host: Any, imgs: _Images, src: _Source,
               opts: Mapping[str, Any], digests: Mapping[Any, str] | None = None) -> str:
        key = self.key(model, cid, rows, opts, digests)
        doc = self.store.get_json("report_sections", key)
        if doc is None or not all(blob_path(src.blobs, n).is_file() for n in doc["images"]):  # a blob cleaned up
            local = _Images()  # the section's pictures in the order it uses them, merged below as if drawn now
            text = _case(model, cid, rows, host, local, src, opts, self.piece)
            # deflated: a re-score redraws every section it changes, and HTML tables shrink ~10x
            doc = {"html_z": base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii"),
                   "images": list(local.names)}
            self.store.put_json("report_sections", key, doc)
        else:
            text = zlib.decompress(base64.b64decode(doc["html_z"])).decode("utf-8")
        imgs.merge(doc["images"])
        return text

    def piece(self, what: Mapping[str, Any], files: list[str], draw: Any, imgs: _Images, src: _Source,
              opts: Mapping[str, Any]) -> str:
        """A part of a section that does not depend on the rows' values — the frame strips of a case, the
        figures of one row's files — cached under what it shows (``what``: names and paths; the content of
        ``files``), so a section whose values changed (a re-score) draws again only what changed.
        ``draw(imgs)`` renders it."""
        drawn = _drawn(opts)
        key = key_of_encoded(self._identity, canonical_json({"files": self.files_digest(sorted(set(files)))}),
                             canonical_json({"piece": what, "opts": drawn}))[0]
        doc = self.store.get_json("report_sections", key)
        if doc is None or not all(blob_path(src.blobs, n).is_file() for n in doc["images"]):
            local = _Images()
            text = draw(local)
            doc = {"html": text, "images": list(local.names)}
            self.store.put_json("report_sections", key, doc)
        imgs.merge(doc["images"])
        return str(doc["html"])


def _leaderboard_and_figures(result: Any, host: Any, figures: list[Path], src: _Source,
                             inline: bool) -> tuple[list[str], list[str]]:
    """The index's header, leaderboard views and figures (HTML parts), and the figures' picture names."""
    backends = ", ".join(f"{k}={v}" for k, v in sorted(result.backends.items()) if v) or "-"
    body = [(f"<h1>worldrecall report</h1><p class=note>results: {esc(str(result.results_dir))} · "
             f"cases: {result.n_cases} · failed: {result.n_failed_cases} ({result.failure_rate:.1%}) · "
             f"backends: {esc(backends)}</p>")]
    body.append('<h2 id="leaderboard">Leaderboard</h2>')
    # first the compact view the console prints (rank, model, ranked headline, gate), then every wide view folded
    compact = compact_frames(result, host)
    for title, df in compact:
        body.append(f"<h3>{esc(title)}</h3>{_table(df)}")
    if compact:
        body.append(f"<p class=note>{esc(compact_legend([(t, [], df.values.tolist()) for t, df in compact]))}</p>")
    body.append(f'<details id="leaderboard-full"{"" if compact else " open"}><summary>Full tables: every column, '
                "the all-cases views and what each headline cannot see (as in tables/leaderboard.txt)</summary>")
    for title, df, note in leaderboard_views(result, host):
        body.append(f"<h3>{esc(title)}</h3>{_table(df)}<p class=note>{esc(note)}</p>")
    body.append("</details>")
    figs = [Path(f) for f in figures if Path(f).exists()]
    fig_names = []
    if figs:
        body.append('<h2 id="figures">Figures</h2>')
        for f in figs:
            fig_names.append(src.blobs.put(f)[0] + ".png")  # the plots sink placed it there already: found
            body.append(f'<figure class="fig" id="fig-{esc(f.stem)}"><figcaption>{esc(f.name)}</figcaption>'
                        f'<img alt="{esc(f.stem)}" src="{_src(src.blobs, fig_names[-1], inline)}"></figure>')
    return body, fig_names


def write_report(result: Any, host: Any, figures: list[Path], plain: Mapping[str, Any],
                 pages: Mapping[str, list[str]] | None = None) -> Path:
    """Write the report of ``result`` to ``<results_dir>/report/index.html`` (its pictures in ``assets/`` beside
    it unless ``report.self_contained``) and return its path. ``pages``: what :func:`case_pages` returned for
    this result (drawn beforehand, beside the aggregation); else they are drawn here."""
    plain = resolve_config(plain)  # the schema holds the report options' defaults
    opts = plain["report"]
    inline = bool(opts["self_contained"])
    store = store_for(plain)
    by_bench = _by_bench(result)
    imgs = _Images()
    # the sections and the frames they show are for whoever draws them: here when inline, else case_pages
    sections = _Sections(store, host) if inline else None
    src = _source_of(by_bench, plain, store, sections) if sections is not None else \
        _Source(store, BlobStore(Path(plain["output_root"]) / "blobs"))
    body, fig_names = _leaderboard_and_figures(result, host, figures, src, inline)
    body.append('<h2 id="cases">Cases</h2>')
    report_dir = Path(result.results_dir) / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    names: dict[str, None] = dict.fromkeys(fig_names)
    if sections is not None:
        for bench in sorted(by_bench):
            cases_html, _ = _bench_cases(by_bench[bench], _reference(plain), sections, host, imgs, src, opts, result)
            body.append(f'<h3 id="cases-{esc(bench)}">{esc(bench)}</h3>{CASES_NOTE}{cases_html}')
        kept: list[Path] = []
    else:
        made = pages if pages is not None else case_pages(result, host, plain)
        for bench in sorted(by_bench):
            n = sum(len(c) for c in by_bench[bench].values())
            body.append(f'<p><a href="cases.{esc(bench)}.html">{esc(bench)}</a>: {len(by_bench[bench])} models, '
                        f"{n} model × case sections</p>")
        names.update(dict.fromkeys(made["images"]))
        kept = [Path(p) for p in made["pages"]]
        body.append("<p class=note>Each benchmark's cases are on a page of their own, so a re-score or a sweep's job "
                    "writes again only the pages of the benchmarks whose rows changed.</p>")
    for old in report_dir.glob("cases.*.html"):  # a benchmark no longer in the result, or inlined now
        if old not in kept:
            old.unlink()
    out = report_dir / "index.html"
    _link_assets(report_dir, src.blobs, [] if inline else list(names))
    # readable like any output (not mkstemp's 0600): browsers, MLflow servers
    write_shared(out, _page("worldrecall report", imgs.css(src.blobs, inline) if inline else "", "\n".join(body)),
                 src.blobs)
    return out


def case_pages(result: Any, host: Any, plain: Mapping[str, Any]) -> dict[str, list[str]]:
    """Write each benchmark's page of cases (``report/cases.<benchmark>.html``; not with ``report.self_contained``)
    and return their paths (``pages``) and the pictures they show (``images``, in order). They need the rows only,
    not the tables: a job draws them beside its aggregation (``ReportSink.begin``)."""
    plain = resolve_config(plain)
    opts = plain["report"]
    store = store_for(plain)
    by_bench = _by_bench(result)
    sections = _Sections(store, host)
    src = _source_of(by_bench, plain, store, sections)
    reference = _reference(plain)
    report_dir = Path(result.results_dir) / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    pages: list[str] = []
    names: dict[str, None] = {}
    for bench in sorted(by_bench):
        page_path = report_dir / f"cases.{bench}.html"
        # the page as a whole, under what every section of it is drawn from: a benchmark whose rows a re-score or
        # a sweep's job did not change takes its page from the blob store, no section looked up
        key = sections.page_key(bench, by_bench[bench], reference, opts, result.row_digests)
        doc = linked_blob(page_path, "report_pages", key, store, src.blobs, checked=True)
        if doc is not None and all(blob_path(src.blobs, name).is_file() for name in doc["images"]):
            names.update(dict.fromkeys(doc["images"]))
            pages.append(str(page_path))
            continue
        page_imgs = _Images()  # the page's own picture classes: a page stays the same bytes while its sections do
        cases_html, failed = _bench_cases(by_bench[bench], reference, sections, host, page_imgs, src, opts, result)
        names.update(page_imgs.names)
        page = _page(f"worldrecall report · {bench}", page_imgs.css(src.blobs, False),
                     # nothing of the job's own (its folder): the page is the same file for every job it fits
                     '<p class=note><a href="index.html">back to the report</a></p>'
                     f"<h1>{esc(bench)}: cases</h1>{CASES_NOTE}{cases_html}")
        pages.append(str(write_shared(page_path, page, src.blobs)))
        if not failed:  # a section that could not be drawn is tried again next time, like the section itself
            digest = src.blobs.digest(page_path)
            store.put_json("report_pages", key, {"sha256": digest, "images": list(page_imgs.names),
                                                 **written_state(src.blobs.path_for(digest, ".html"))})
    return {"pages": pages, "images": list(names)}


def _by_bench(result: Any) -> dict[str, dict[str, dict[str, list[Any]]]]:
    """benchmark -> model -> case -> its rows."""
    by_bench: dict[str, dict[str, dict[str, list[Any]]]] = {}
    for r in result.rows:
        by_bench.setdefault(r.benchmark, {}).setdefault(r.model, {}).setdefault(r.case_id, []).append(r)
    return by_bench


def _source_of(by_bench: Mapping[str, Mapping[str, Mapping[str, list[Any]]]], plain: Mapping[str, Any],
               store: Store, sections: _Sections) -> _Source:
    groups = [rs for models in by_bench.values() for cases in models.values() for rs in cases.values()]
    return _Source(store, BlobStore(Path(plain["output_root"]) / "blobs"),
                   _frames_shown(groups, plain["report"], lambda f: sections.files_digest([f])[0][1]))


def _reference(plain: Mapping[str, Any]) -> str:
    """The model every other is compared with (the paired aggregator's), shown first."""
    return str(((plain.get("aggregator_params") or {}).get("paired") or {}).get("reference") or "")


CASES_NOTE = ("<p class=note>Per model and case: the alignment's phases on the generated video's frame axis (V "
              "visible, D disappear, R reappear …), reference and generated frames at each phase's first and last "
              "frame (reference frames at the proportional index when its length differs), every metric's values, "
              "and each metric's per-case views.</p>")


def _page(title: str, picture_css: str, body: str) -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)}</title>"
            f"<style>{CSS}\n{picture_css}</style></head><body>{body}</body></html>")


def _bench_cases(by_model: Mapping[str, Mapping[str, list[Any]]], reference: str, sections: _Sections, host: Any,
                 imgs: _Images, src: _Source, opts: Mapping[str, Any], result: Any) -> tuple[str, bool]:
    """One benchmark's case sections: the reference model (the one every other is compared with) first and
    open, then by name; and whether a section could not be drawn."""
    body, failed = [], False
    for k, model in enumerate(sorted(by_model, key=lambda m: (m != reference, m))):
        cases = sorted(by_model[model])
        if opts["max_cases_per_model"]:
            cases = cases[: int(opts["max_cases_per_model"])]
        body.append(f'<details{" open" if k == 0 else ""} id="model-{esc(model)}"><summary>{esc(model)} '
                    f"({len(cases)} cases)</summary>")
        for cid in cases:
            try:
                body.append(sections.render(model, cid, by_model[model][cid], host, imgs, src, opts,
                                            result.row_digests))
            except Exception as e:  # noqa: BLE001  (one unreadable file must not cost the whole report)
                failed = True
                body.append(f'<div class="case"><h4>{esc(model)} · {esc(cid)}</h4><p class=failed>'
                            f"could not render: {esc(type(e).__name__)}: {esc(str(e)[:300])}</p></div>")
        body.append("</details>")
    return "".join(body), failed


def report_files(index: Path) -> list[Path]:
    """The pages (the index, then each benchmark's cases) and the pictures beside them (``assets/``), as the
    report sink returns them."""
    assets = index.parent / "assets"
    return [index, *sorted(index.parent.glob("cases.*.html")), *(sorted(assets.iterdir()) if assets.is_dir() else [])]


def _table(df: Any) -> str:
    if df is None or not len(df):
        return "<p class=note>(no rows)</p>"
    head = "".join(f"<th>{esc(str(c))}</th>" for c in df.columns)
    rows = "".join("<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in r) + "</tr>" for r in df.itertuples(index=False))
    return f'<table class="lb"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _phases(rows: list[Any]) -> tuple[dict[str, tuple[int, int]], int]:
    """The first row's recorded alignment phases (name -> (start, end)) and the frame-axis length."""
    for r in rows:
        al = (r.info or {}).get("alignment") or {}
        ph = al.get("phases") or {}
        if ph:
            phases = {k: (int(a), int(b)) for k, (a, b) in ph.items()}
            info = al.get("info") or {}
            n = int(info.get("n_frames") or info.get("num_frames") or max(b for _, b in phases.values()) + 1)
            # a phase spanning others (e.g. "ALL") is not drawn: the bar shows the partition V / D / R
            parts = {k: (a, b) for k, (a, b) in phases.items()
                     if not any(o != k and a <= oa and ob <= b and (oa, ob) != (a, b) for o, (oa, ob) in phases.items())}
            return dict(sorted(parts.items(), key=lambda kv: kv[1])), n
    return {}, 0


def _videos(rows: list[Any]) -> dict[str, str]:
    for r in rows:
        v = (r.info or {}).get("videos")
        if v:
            return {k: str(p) for k, p in v.items() if p}
    return {}


def _row_files(r: Any) -> list[str]:
    """The files a row's part of a section shows: its videos' frames and its artifacts."""
    info = r.info or {}
    return [*(info.get("videos") or {}).values(), *(info.get("artifacts") or [])]


def _case(model: str, cid: str, rows: list[Any], host: Any, imgs: _Images, src: _Source,
          opts: Mapping[str, Any], piece: Any = None) -> str:
    """A case's section: its frame strips, every metric's values, each row's figures. ``piece``: the cache of
    the parts that do not depend on the values (:meth:`_Sections.piece`); None draws everything here."""
    phases, n = _phases(rows)
    vids = _videos(rows)
    if piece is None:
        head = _head(model, cid, phases, n, vids, imgs, src, opts)
    else:
        head = piece({"head": [model, cid, sorted(phases.items()), n, sorted(vids.items())]}, list(vids.values()),
                     lambda local: _head(model, cid, phases, n, vids, local, src, opts), imgs, src, opts)
    out = [head]
    heads = _headline_values(host)
    lines = [_value_line(r, host, heads) for r in sorted(rows, key=lambda r: (r.benchmark, r.metric))]
    out.append("<table class=vals><tr><th>metric</th><th>primary</th><th>headline values · other values</th></tr>"
               + "".join(lines) + "</table>")
    arts = []
    for r in sorted(rows, key=lambda r: r.metric):
        files = [str(a) for a in (r.info or {}).get("artifacts") or []]
        if not files:
            continue
        if piece is None:
            arts.append("".join(_row_arts(r, imgs, src, opts)))
        else:
            arts.append(piece({"arts": [r.benchmark, r.metric, files]}, files,
                              lambda local, r=r: "".join(_row_arts(r, local, src, opts)), imgs, src, opts))
    if "".join(arts):
        out.append('<div class="arts">' + "".join(arts) + "</div>")
    out.append("</div>")
    return "".join(out)


def _picks(phases: Mapping[str, tuple[int, int]], n: int, opts: Mapping[str, Any]) -> list[tuple[int, str]]:
    """The frames a section's strips show, (index on the generated axis, phase): each phase's first and last
    frame, or four spread over the video when the rows record no phases."""
    picks: list[tuple[int, str]] = []
    for k, (a, b) in phases.items():
        idx = [a, b] if opts["frames_per_phase"] >= 2 and b > a else [a]
        picks += [(i, k) for i in idx]
    if not picks and n:
        picks = [(int(i), "") for i in np.linspace(0, n - 1, 4).round()]
    return picks


def _frames_shown(groups: Iterable[list[Any]], opts: Mapping[str, Any],
                  content: Callable[[str], str]) -> dict[tuple[str, int | None], frozenset[int]]:
    """(video, the axis its indices live on) -> every frame index the sections of ``groups`` (each a (model,
    case)'s rows of one benchmark) show of it or of a file of the same content (``content``: its digest): the
    benchmarks that share a case show its video, often one file under several names, at their own phases."""
    shown: dict[tuple[str, int | None], set[int]] = {}
    names: dict[tuple[str, int | None], set[str]] = {}
    for rows in groups:
        phases, n = _phases(rows)
        vids = _videos(rows)
        at = [i for i, _ in _picks(phases, n, opts)]
        for video, axis in ((vids.get("generated"), None), (vids.get("reference"), n or None)):
            if video:
                same = (content(video), axis)
                shown.setdefault(same, set()).update(at)
                names.setdefault(same, set()).add(video)
    return {(v, same[1]): frozenset(idx) for same, idx in shown.items() for v in names[same]}


def _head(model: str, cid: str, phases: dict[str, tuple[int, int]], n: int, vids: dict[str, str], imgs: _Images,
          src: _Source, opts: Mapping[str, Any]) -> str:
    """A section's title, phase bar and reference / generated frame strips."""
    colour = {name: PHASE_COLOURS[i % len(PHASE_COLOURS)] for i, name in enumerate(phases)}
    out = [f'<div class="case" id="case-{esc(model)}-{esc(cid)}"><h4>{esc(model)} · {esc(cid)}</h4>']
    if phases and n:
        segs = "".join(f'<div style="left:{100 * a / n:.2f}%;width:{100 * (b - a + 1) / n:.2f}%;'
                       f'background:{colour[k]}" title="{esc(k)}: frames {a}–{b}">{esc(k)} {a}–{b}</div>'
                       for k, (a, b) in phases.items())
        out.append(f'<div class="phasebar" title="phases on the generated frame axis">{segs}</div>')
    picks = _picks(phases, n, opts)
    if vids and picks:
        gen = vids.get("generated")
        side, at = int(opts["thumb_side"]), [i for i, _ in picks]  # read at thumbnail size, never whole
        gen_thumbs = frame_thumbs(Path(gen), at, side, src.store, blobs=src.blobs,
                                  together=src.frames.get((str(gen), None), ())) if gen else {}
        ref = vids.get("reference")
        ref_thumbs = frame_thumbs(Path(ref), at, side, src.store, axis_len=n or None, blobs=src.blobs,
                                  together=src.frames.get((str(ref), n or None), ())) if ref else {}
        for label, thumbs in (("reference", ref_thumbs), ("generated", gen_thumbs)):
            if thumbs:
                cells = "".join(f'<div class="th">{imgs.div(thumbs[i], f"{label} {k} frame {i}", colour.get(k, ""))}'
                                f"{esc(k)} {i}</div>" for i, k in picks)
                out.append(f'<div class="strip"><span class="lab">{label}</span>{cells}</div>')
    elif not vids:
        out.append("<p class=note>frames: the rows record no video paths (info.videos)</p>")
    return "".join(out)


def _row_arts(r: Any, imgs: _Images, src: _Source, opts: Mapping[str, Any]) -> list[str]:
    """A row's figures: PNG/JPEG artifacts as thumbnails that open full size, trace JSON as inline charts."""
    arts = []
    for a in (r.info or {}).get("artifacts") or []:
        p = Path(a)
        if not p.is_file():
            continue
        label = f"{short_metric(r.metric, r.benchmark)} · {p.name}"
        if p.suffix.lower() in (".png", ".jpg", ".jpeg"):
            # the thumbnail opens the figure itself, at its own size (point-cloud legends are small)
            full = imgs.div(full_image(p, src.store, src.blobs), label)
            thumb = imgs.div(image_thumb(p, int(opts["image_side"]), src.store, src.blobs), label)
            arts.append(f"<figure><details class=zoom><summary>{thumb}</summary>{full}</details><figcaption>"
                        f"{esc(label)} <span class=note>(click: full size)</span></figcaption></figure>")
        elif p.suffix.lower() == ".json":
            chart = _trace_chart(p)
            if chart.startswith("<svg"):
                arts.append(f"<figure>{imgs.div(put_svg(src.blobs, chart), label)}<figcaption>{esc(label)}"
                            "</figcaption></figure>")
            elif chart:  # a trace with no data to draw: its note, in place of the chart
                arts.append(f"<figure>{chart}<figcaption>{esc(label)}</figcaption></figure>")
    return arts


def _trace_chart(p: Path) -> str:
    """The inline chart of a ``worldrecall.trace`` JSON file ('' for any other JSON)."""
    try:
        t = json.loads(p.read_text())
    except ValueError:
        return ""
    return line_chart(t) if isinstance(t, dict) and t.get("kind") == "worldrecall.trace" else ""


def _headline_values(host: Any) -> dict[str, list[str]]:
    """metric -> the values its benchmark declares as headline / gate (shown first in a case's values)."""
    out: dict[str, list[str]] = {}
    for b in (getattr(host, "benchmarks", None) or {}).values():
        for ref in (*b.headline, *([b.gate] if b.gate else []), *([b.protocol_gate] if b.protocol_gate else [])):
            metric, _, value = ref.partition(":")
            out.setdefault(metric, []).append(value)
    return out


def _value_line(r: Any, host: Any, heads: Mapping[str, list[str]]) -> str:
    """One metric's line: status, primary value (unit, direction), the verdict and the declared headline
    values; every other value folded (a metric may emit dozens)."""
    cls = host.metrics.get(r.metric)
    prim = getattr(cls, "primary", "") if cls is not None else ""
    name = f"{esc(r.benchmark)}/{esc(short_metric(r.metric, r.benchmark))}"
    if r.status != "ok":
        return (f"<tr><td>{name}</td><td class={esc(r.status)} colspan=2>{esc(r.status)}: "
                f"{esc(r.reason[:200])}</td></tr>")
    meta = value_meta(host, r.metric, prim)
    v = r.values.get(prim)
    pv = "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"
    unit = unit_label(meta)
    prim_cell = f"{esc(prim)} = <b>{pv}</b> <span class=note>({esc(unit)} {direction_label(meta)})</span>"

    def fmt(k: str, x: Any) -> str:
        return f"{esc(k)}={'n/a' if x is None else f'{x:.4g}'}"

    first = [k for k in heads.get(r.metric, []) if k != prim and k in r.values]
    rest = [k for k in r.values if k != prim and k not in first]
    cell = ""
    if (r.info or {}).get("verdict"):
        cell += f"<b>{esc(r.info['verdict'])}</b><br>"
    cell += ", ".join(fmt(k, r.values[k]) for k in first)
    if rest:
        folded = ", ".join(fmt(k, r.values[k]) for k in rest)
        cell += f"<details><summary class=note>{len(rest)} more values</summary><span class=note>{folded}</span></details>"
    return f"<tr><td>{name}</td><td>{prim_cell}</td><td>{cell}</td></tr>"
