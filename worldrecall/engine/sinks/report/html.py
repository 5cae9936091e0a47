"""Write ``report/index.html``: one self-contained file (no server, no network, images inline).

Sections: the leaderboard views with CIs (camera-gated first), the run's figures (each aggregator's
plots, e.g. the validity matrix), then per model and case: the phases of the alignment recorded on the
rows (V/D/R …) as a bar, reference and generated frame thumbnails side by side at each phase's first and
last frame, every metric's values with unit and direction, and each metric's per-case files — PNGs as
thumbnails, ``worldrecall.trace`` JSON as inline charts (see :mod:`worldrecall.engine.sinks.report.svg`).
The engine names no plugin: everything comes from rows, tables and ``value_meta``.

Identical images (e.g. one reference frame shown for eight models) are stored once, as a CSS class.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import logging
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.atomic import atomic_write_text
from worldrecall.core.cache import cache_key
from worldrecall.core.digests import file_digest
from worldrecall.engine.sinks.blobs import write_if_changed
from worldrecall.engine.sinks.leaderboard_view import leaderboard_views
from worldrecall.engine.sinks.report.images import frame_thumbs, image_thumb
from worldrecall.engine.sinks.report.svg import line_chart
from worldrecall.engine.sinks.results_view import direction_label, short_metric, unit_label, value_meta
from worldrecall.engine.stages.bounded import remember
from worldrecall.engine.stages.config import resolve_config
from worldrecall.engine.stages.later import later
from worldrecall.engine.stages.row_digests import row_digest

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


def jpeg_size(data: bytes) -> tuple[int, int] | None:
    """(height, width) from a JPEG's start-of-frame marker, without decoding it."""
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker, seg = data[i + 1], int.from_bytes(data[i + 2:i + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2):
            return int.from_bytes(data[i + 5:i + 7], "big"), int.from_bytes(data[i + 7:i + 9], "big")
        i += 2 + seg
    return None


class _Images:
    """Inline images, each distinct JPEG stored once as a CSS class."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def div(self, data: bytes, title: str = "", border: str = "") -> str:
        h = hashlib.sha1(data).hexdigest()[:14]
        if h not in self.rules:
            self.rules[h] = base64.b64encode(data).decode("ascii")
        hh, ww = jpeg_size(data) or (72, 96)
        style = f"width:{ww}px;height:{hh}px" + (f";border-color:{border}" if border else "")
        return f'<div class="im i{h}" style="{style}" title="{esc(title)}"></div>'

    def merge(self, rules: Mapping[str, str]) -> None:
        """Add a memoised part's images, in its order, as if it had been drawn here."""
        for h, b64 in rules.items():
            self.rules.setdefault(h, b64)

    def css(self) -> str:
        return "\n".join(f".i{h}{{background-image:url(data:image/jpeg;base64,{b})}}" for h, b in self.rules.items())


class _Sections:
    """Case sections memoised by the digest of what they show: the case's rows (values, info, paths), the
    state (size, mtime) of every file they read, the report options, the metrics' declarations and this
    package's source. A re-score job re-renders only the cases whose rows changed; a warm rerun none.

    Kept in memory (a sweep's jobs in one process) and under ``<cache_dir>/report_sections`` as JSON that names
    its images; each image is kept once, under ``report_sections/images`` by its name (a re-scored section
    shows the same frames: it writes its text only)."""

    def __init__(self, root: Path, host: Any) -> None:
        self.root, self.host = root, host
        here = Path(__file__).parent
        decl = {n: [getattr(c, "primary", ""), {v: repr(m) for v, m in (getattr(c, "values", None) or {}).items()}]
                for n, c in sorted(getattr(host, "metrics", {}).items())}
        self.base = {"format": 3, "code": [file_digest(p) for p in sorted(here.glob("*.py"))],
                     "metrics": decl, "heads": _headline_values(host)}
        self.base_key = cache_key(self.base)  # what every section shares, hashed once (not per section)
        self.fragments = _Fragments(self.base_key)
        self.images = root / "images"

    def key(self, model: str, cid: str, rows: list[Any], opts: Mapping[str, Any]) -> str:
        return cache_key({"base": self.base_key, "model": model, "case": cid, "opts": dict(opts),
                          "files": file_states(p for r in rows for p in _row_files(r)),
                          "rows": [row_digest(r) for r in rows]})

    def _image(self, name: str) -> Path:
        return self.images / name[:2] / f"{name}.b64"

    def _read_images(self, names: list[str]) -> dict[str, str]:
        """A persisted section's images by name; ValueError when one is gone or is not what its name says."""
        out = {}
        for name in names:
            try:
                b64 = self._image(name).read_text()
            except OSError:
                raise ValueError(f"image {name} is gone") from None
            if hashlib.sha1(base64.b64decode(b64)).hexdigest()[:14] != name:
                raise ValueError(f"image {name} does not hold its image")
            out[name] = b64
        return out

    def _keep_images(self, rules: Mapping[str, str]) -> list[tuple[Path, str]]:
        """The images of ``rules`` this process has not kept yet, marked kept; returns the files to write."""
        out = []
        for name, b64 in rules.items():
            if name not in _KEPT_IMAGES:
                out.append((self._image(name), b64))
                _KEPT_IMAGES.add(name)
                if _JOURNAL is not None:
                    _JOURNAL.append(("kept", name))
        return out

    def render(self, model: str, cid: str, rows: list[Any], host: Any, imgs: _Images, memo: Path,
               opts: Mapping[str, Any]) -> str:
        key = self.key(model, cid, rows, opts)
        hit = _SECTION_MEMO.get(key)
        path = self.root / key[:2] / f"{key}.json"
        if hit is None:
            try:
                doc = json.loads(path.read_text())
                hit = (str(doc["html"]), self._read_images([str(k) for k in doc["images"]]))
            except (OSError, ValueError, KeyError, TypeError):
                hit = None
        if hit is None:
            local = _Images()  # the section's images in the order it uses them, merged below as if drawn now
            html_text = _case(model, cid, rows, host, local, memo, opts, self.fragments)
            hit = (html_text, dict(local.rules))
            images, doc = self._keep_images(local.rules), {"html": html_text, "images": list(local.rules)}

            def store(images: list[tuple[Path, str]] = images, doc: dict[str, Any] = doc, path: Path = path) -> None:
                try:
                    for file, b64 in images:  # before the section that names them
                        if not file.exists():
                            atomic_write_text(file, b64)
                    atomic_write_text(path, json.dumps(doc))
                except OSError:
                    pass  # a full cache costs time, never the report

            later(store)  # for later processes only (this one has it in memory): after the job's outputs
        _keep("sections", key, hit)
        imgs.merge(hit[1])
        return hit[0]


_SECTION_MEMO: dict[str, tuple[str, dict[str, str]]] = {}
_KEPT_IMAGES: set[str] = set()  # image names this process wrote or found under report_sections/images

# -- the in-memory memos, and how a forked report hands its new entries back (engine/sinks/forked.py) ------
_LIMITS = {"sections": 20_000, "fragments": 100_000, "charts": 50_000, "images": 200_000}
# every image a memo entry holds, by name (the same string objects): a forked report sends back the names of
# the images its new entries use, and the bytes of those this process has not seen
_IMAGES: dict[str, str] = {}
_JOURNAL: list[tuple[str, Any]] | None = None  # in a forked report: (memo, key) of each entry it adds


def _memo(name: str) -> dict[Any, Any]:
    return {"sections": _SECTION_MEMO, "fragments": _FRAGMENTS, "charts": _CHARTS, "images": _IMAGES}[name]


def _keep(name: str, key: Any, value: Any) -> Any:
    memo = _memo(name)
    if key not in memo:
        if _JOURNAL is not None:
            _JOURNAL.append((name, key))
        if name in ("sections", "fragments"):
            for image, b64 in value[1].items():
                if image not in _IMAGES:
                    _keep("images", image, b64)
    return remember(memo, key, value, _LIMITS[name])


def start_journal() -> None:
    """From now on (in a forked report child), note each memo entry added."""
    global _JOURNAL
    _JOURNAL = []


def journal_delta() -> dict[str, Any]:
    """The entries added since :func:`start_journal`, as JSON: keys as nested lists, images by name (with
    the bytes of the images new to the memos)."""
    out: dict[str, Any] = {"sections": [], "fragments": [], "charts": [], "kept": [], "images": {}}
    for name, key in _JOURNAL or []:
        memo = _memo(name) if name != "kept" else None
        if memo is not None and key not in memo:  # added, then dropped again by the bound
            continue
        if name == "kept":
            out["kept"].append(key)
        elif name == "images":
            out["images"][key] = memo[key]
        elif name == "charts":
            out["charts"].append([key, memo[key]])
        else:
            value, images = memo[key]
            out[name].append([key, value, list(images)])
    return out


def _tuples(v: Any) -> Any:
    """A JSON key back as the tuple it was (memo keys hold tuples only, never lists)."""
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def merge_delta(delta: dict[str, Any]) -> None:
    """Take a forked report's new entries into this process's memos, as if it had rendered here (an entry
    whose image this process no longer holds is left out: it is drawn again when needed)."""
    for image, b64 in delta["images"].items():
        remember(_IMAGES, image, b64, _LIMITS["images"])
    for name in ("sections", "fragments"):
        for key, value, names in delta[name]:
            try:
                images = {n: _IMAGES[n] for n in names}
            except KeyError:
                continue
            _keep(name, key if name == "sections" else _tuples(key), (value, images))
    for key, value in delta["charts"]:
        _keep("charts", _tuples(key), value)
    _KEPT_IMAGES.update(delta["kept"])


def write_report(result: Any, host: Any, figures: list[Path], plain: Mapping[str, Any]) -> Path:
    """Write the report of ``result`` to ``<results_dir>/report/index.html`` and return its path."""
    plain = resolve_config(plain)  # the schema holds the report options' defaults
    _STATES.clear()  # files are looked at again by each report (once)
    opts = plain["report"]
    cache = Path(plain["cache_dir"])
    memo = cache / "report_thumbs"
    imgs = _Images()
    sections = _Sections(cache / "report_sections", host)
    backends = ", ".join(f"{k}={v}" for k, v in sorted(result.backends.items()) if v) or "-"
    body = [(f"<h1>worldrecall report</h1><p class=note>results: {esc(str(result.results_dir))} · "
             f"cases: {result.n_cases} · failed: {result.n_failed_cases} ({result.failure_rate:.1%}) · "
             f"backends: {esc(backends)}</p>")]
    body.append('<h2 id="leaderboard">Leaderboard</h2>')
    for title, df, note in leaderboard_views(result, host):
        body.append(f"<h3>{esc(title)}</h3>{_table(df)}<p class=note>{esc(note)}</p>")
    figs = [f for f in figures if Path(f).exists()]
    if figs:
        body.append('<h2 id="figures">Figures</h2>')
        for f in figs:
            b64 = base64.b64encode(Path(f).read_bytes()).decode("ascii")
            body.append(f'<figure class="fig" id="fig-{esc(Path(f).stem)}"><figcaption>{esc(Path(f).name)}'
                        f'</figcaption><img alt="{esc(Path(f).stem)}" src="data:image/png;base64,{b64}"></figure>')
    body.append('<h2 id="cases">Cases</h2><p class=note>Per model and case: the alignment\'s phases on the '
                "generated video's frame axis (V visible, D disappear, R reappear …), reference and generated "
                "frames at each phase's first and last frame (reference frames at the proportional index when "
                "its length differs), every metric's values, and each metric's per-case views.</p>")
    by_case: dict[str, dict[str, list[Any]]] = {}
    for r in result.rows:
        by_case.setdefault(r.model, {}).setdefault(r.case_id, []).append(r)
    reference = str(((plain.get("aggregator_params") or {}).get("paired") or {}).get("reference") or "")
    # the reference model (the one every other is compared with) first and open, then by name
    for k, model in enumerate(sorted(by_case, key=lambda m: (m != reference, m))):
        cases = sorted(by_case[model])
        if opts["max_cases_per_model"]:
            cases = cases[: int(opts["max_cases_per_model"])]
        body.append(f'<details{" open" if k == 0 else ""} id="model-{esc(model)}"><summary>{esc(model)} '
                    f"({len(cases)} cases)</summary>")
        for cid in cases:
            try:
                body.append(sections.render(model, cid, by_case[model][cid], host, imgs, memo, opts))
            except Exception as e:  # noqa: BLE001  (one unreadable file must not cost the whole report)
                body.append(f'<div class="case"><h4>{esc(model)} · {esc(cid)}</h4><p class=failed>'
                            f"could not render: {esc(type(e).__name__)}: {esc(str(e)[:300])}</p></div>")
        body.append("</details>")
    page = ("<!doctype html><html lang=en><head><meta charset=utf-8><title>worldrecall report</title>"
            f"<style>{CSS}\n{imgs.css()}</style></head><body>" + "\n".join(body) + "</body></html>")
    out = Path(result.results_dir) / "report" / "index.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_if_changed(out, page)  # readable like any output (not mkstemp's 0600): browsers, MLflow servers
    return out


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


def file_states(paths: Any) -> list[list[Any]]:
    """[path, size, mtime] of each distinct path, sorted (None, None for a file that is gone); each path is
    looked at once per report (:data:`_STATES`, cleared when a report starts)."""
    out = []
    for p in sorted({str(p) for p in paths}):
        state = _STATES.get(p)
        if state is None:
            try:
                st = os.stat(p)
                state = _STATES[p] = [p, st.st_size, st.st_mtime_ns]
            except (OSError, ValueError):
                state = _STATES[p] = [p, None, None]
        out.append(list(state))
    return out


_STATES: dict[str, list[Any]] = {}


def _frozen(states: list[list[Any]]) -> tuple[tuple[Any, ...], ...]:
    return tuple(map(tuple, states))


class _Fragments:
    """A section's parts memoised in this process: the head (phases and frame strips) per case, and each row's
    values line and figures per row — a re-score job that changed one metric re-draws that metric's parts."""

    def __init__(self, base: str) -> None:
        self.base = base

    def get(self, kind: str, key: tuple[Any, ...], imgs: _Images, draw: Any) -> Any:
        k = (self.base, kind, key)  # hashable parts: a dict lookup, no serialisation per fragment
        hit = _FRAGMENTS.get(k)
        if hit is None:
            local = _Images()
            hit = (draw(local), dict(local.rules))
            _keep("fragments", k, hit)
        imgs.merge(hit[1])
        return hit[0]


_FRAGMENTS: dict[tuple[Any, ...], tuple[Any, dict[str, str]]] = {}


def _case(model: str, cid: str, rows: list[Any], host: Any, imgs: _Images, memo: Path, opts: Mapping[str, Any],
          fragments: _Fragments) -> str:
    phases, n = _phases(rows)
    vids = _videos(rows)
    head_key = (model, cid, tuple(sorted(phases.items())), n, tuple(sorted(vids.items())),
                _frozen(file_states(vids.values())), opts["frames_per_phase"], opts["thumb_side"])
    out = [fragments.get("head", head_key, imgs, lambda im: _head(model, cid, phases, n, vids, im, memo, opts))]
    heads = _headline_values(host)
    lines = [fragments.get("values", (row_digest(r),), imgs, lambda im, r=r: _value_line(r, host, heads))
             for r in sorted(rows, key=lambda r: (r.benchmark, r.metric))]
    out.append("<table class=vals><tr><th>metric</th><th>primary</th><th>headline values · other values</th></tr>"
               + "".join(lines) + "</table>")
    arts = []
    for r in sorted(rows, key=lambda r: r.metric):
        key = (row_digest(r), _frozen(file_states((r.info or {}).get("artifacts") or [])), opts["image_side"])
        arts += fragments.get("arts", key, imgs, lambda im, r=r: _row_arts(r, im, memo, opts))
    if arts:
        out.append('<div class="arts">' + "".join(arts) + "</div>")
    out.append("</div>")
    return "".join(out)


def _head(model: str, cid: str, phases: dict[str, tuple[int, int]], n: int, vids: dict[str, str], imgs: _Images,
          memo: Path, opts: Mapping[str, Any]) -> str:
    """A section's title, phase bar and reference / generated frame strips."""
    colour = {name: PHASE_COLOURS[i % len(PHASE_COLOURS)] for i, name in enumerate(phases)}
    out = [f'<div class="case" id="case-{esc(model)}-{esc(cid)}"><h4>{esc(model)} · {esc(cid)}</h4>']
    if phases and n:
        segs = "".join(f'<div style="left:{100 * a / n:.2f}%;width:{100 * (b - a + 1) / n:.2f}%;'
                       f'background:{colour[k]}" title="{esc(k)}: frames {a}–{b}">{esc(k)} {a}–{b}</div>'
                       for k, (a, b) in phases.items())
        out.append(f'<div class="phasebar" title="phases on the generated frame axis">{segs}</div>')
    picks: list[tuple[int, str]] = []
    for k, (a, b) in phases.items():
        idx = [a, b] if opts["frames_per_phase"] >= 2 and b > a else [a]
        picks += [(i, k) for i in idx]
    if not picks and n:
        picks = [(int(i), "") for i in np.linspace(0, n - 1, 4).round()]
    if vids and picks:
        gen = vids.get("generated")
        gen_thumbs = frame_thumbs(Path(gen), [i for i, _ in picks], int(opts["thumb_side"]), memo) if gen else {}
        ref = vids.get("reference")
        ref_thumbs = frame_thumbs(Path(ref), [i for i, _ in picks], int(opts["thumb_side"]), memo,
                                  axis_len=n or None) if ref else {}
        for label, thumbs in (("reference", ref_thumbs), ("generated", gen_thumbs)):
            if thumbs:
                cells = "".join(f'<div class="th">{imgs.div(thumbs[i], f"{label} {k} frame {i}", colour.get(k, ""))}'
                                f"{esc(k)} {i}</div>" for i, k in picks)
                out.append(f'<div class="strip"><span class="lab">{label}</span>{cells}</div>')
    elif not vids:
        out.append("<p class=note>frames: the rows record no video paths (info.videos)</p>")
    return "".join(out)


def _row_arts(r: Any, imgs: _Images, memo: Path, opts: Mapping[str, Any]) -> list[str]:
    """A row's figures: PNG/JPEG artifacts as thumbnails that open full size, trace JSON as inline charts."""
    arts = []
    for a in (r.info or {}).get("artifacts") or []:
        p = Path(a)
        if not p.is_file():
            continue
        label = f"{short_metric(r.metric, r.benchmark)} · {p.name}"
        if p.suffix.lower() in (".png", ".jpg", ".jpeg"):
            # the thumbnail opens the figure at its own size (legends of point-cloud renders are small)
            full = imgs.div(image_thumb(p, 4096, memo), label)
            arts.append(f"<figure><details class=zoom><summary>"
                        f"{imgs.div(image_thumb(p, int(opts['image_side']), memo), label)}</summary>{full}"
                        f"</details><figcaption>{esc(label)} <span class=note>(click: full size)</span>"
                        f"</figcaption></figure>")
        elif p.suffix.lower() == ".json":
            chart = _trace_chart(p)
            if chart:
                arts.append(f"<figure>{chart}<figcaption>{esc(label)}</figcaption></figure>")
    return arts


_CHARTS: dict[tuple[str, int, int, int], str] = {}  # trace file state -> its chart (a section re-rendered
# because another benchmark's row changed still shows the same per-case traces)


def _trace_chart(p: Path) -> str:
    """The inline chart of a ``worldrecall.trace`` JSON file ('' for any other JSON), once per file state."""
    st = p.stat()
    key = (str(p), st.st_mtime_ns, st.st_size, st.st_ino)
    if key not in _CHARTS:
        try:
            t = json.loads(p.read_text())
        except ValueError:
            t = None
        _keep("charts", key, line_chart(t) if isinstance(t, dict) and t.get("kind") == "worldrecall.trace" else "")
    return _CHARTS[key]


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
