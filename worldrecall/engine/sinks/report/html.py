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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.engine.cache import Store, code_digest, inputs_digest, key_of
from worldrecall.engine.sinks.blobs import write_if_changed
from worldrecall.engine.sinks.leaderboard_view import leaderboard_views
from worldrecall.engine.sinks.report.images import frame_thumbs, image_thumb
from worldrecall.engine.sinks.report.svg import line_chart
from worldrecall.engine.sinks.results_view import direction_label, short_metric, unit_label, value_meta
from worldrecall.engine.stages.config import resolve_config
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
        """Add a cached section's images, in its order, as if it had been drawn here."""
        for h, b64 in rules.items():
            self.rules.setdefault(h, b64)

    def css(self) -> str:
        return "\n".join(f".i{h}{{background-image:url(data:image/jpeg;base64,{b})}}" for h, b in self.rules.items())


class _Sections:
    """Case sections cached in the store under the one key recipe: this package's code, the metrics'
    declarations, the report options, the case's rows (their content) and the content digest of every file
    they show (frames, figures). A re-score job re-renders only the cases whose rows changed; a warm rerun
    none. A section's images are kept once each, by their own digest, apart from the sections naming them."""

    def __init__(self, store: Store, host: Any) -> None:
        self.store, self.host = store, host
        decl = {n: [getattr(c, "primary", ""), {v: repr(m) for v, m in (getattr(c, "values", None) or {}).items()}]
                for n, c in sorted(getattr(host, "metrics", {}).items())}
        self.identity = {"name": "report.section", "code": code_digest(__name__)}
        self.base = {"metrics": decl, "heads": _headline_values(host)}

    def key(self, model: str, cid: str, rows: list[Any], opts: Mapping[str, Any]) -> str:
        files = sorted({str(p) for r in rows for p in _row_files(r)})
        return key_of(self.identity, {"rows": [row_digest(r) for r in rows], "files": inputs_digest(files)},
                      {**self.base, "model": model, "case": cid, "opts": dict(opts)})

    def render(self, model: str, cid: str, rows: list[Any], host: Any, imgs: _Images, thumbs: Store,
               opts: Mapping[str, Any]) -> str:
        key = self.key(model, cid, rows, opts)
        doc = self.store.get_json("report_sections", key)
        images = None
        if doc is not None:
            images = {}
            for name in doc["images"]:
                b64 = self.store.get_json("report_images", name)
                if b64 is None:  # an image cleaned up: draw the section again
                    images = None
                    break
                images[name] = b64
        if images is None:
            local = _Images()  # the section's images in the order it uses them, merged below as if drawn now
            doc = {"html": _case(model, cid, rows, host, local, thumbs, opts), "images": list(local.rules)}
            for name, b64 in local.rules.items():
                if not self.store.has("report_images", name):
                    self.store.put_json("report_images", name, b64)
            self.store.put_json("report_sections", key, doc)
            images = local.rules
        imgs.merge(images)
        return str(doc["html"])


def write_report(result: Any, host: Any, figures: list[Path], plain: Mapping[str, Any]) -> Path:
    """Write the report of ``result`` to ``<results_dir>/report/index.html`` and return its path."""
    plain = resolve_config(plain)  # the schema holds the report options' defaults
    opts = plain["report"]
    store = Store(plain["cache_dir"])
    imgs = _Images()
    sections = _Sections(store, host)
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
                body.append(sections.render(model, cid, by_case[model][cid], host, imgs, store, opts))
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


def _case(model: str, cid: str, rows: list[Any], host: Any, imgs: _Images, memo: Store,
          opts: Mapping[str, Any]) -> str:
    phases, n = _phases(rows)
    vids = _videos(rows)
    out = [_head(model, cid, phases, n, vids, imgs, memo, opts)]
    heads = _headline_values(host)
    lines = [_value_line(r, host, heads) for r in sorted(rows, key=lambda r: (r.benchmark, r.metric))]
    out.append("<table class=vals><tr><th>metric</th><th>primary</th><th>headline values · other values</th></tr>"
               + "".join(lines) + "</table>")
    arts = []
    for r in sorted(rows, key=lambda r: r.metric):
        arts += _row_arts(r, imgs, memo, opts)
    if arts:
        out.append('<div class="arts">' + "".join(arts) + "</div>")
    out.append("</div>")
    return "".join(out)


def _head(model: str, cid: str, phases: dict[str, tuple[int, int]], n: int, vids: dict[str, str], imgs: _Images,
          memo: Store, opts: Mapping[str, Any]) -> str:
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


def _row_arts(r: Any, imgs: _Images, memo: Store, opts: Mapping[str, Any]) -> list[str]:
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
