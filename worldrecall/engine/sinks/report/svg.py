"""Inline SVG line charts for the report: per-case traces (``worldrecall.trace`` JSON) and sweep curves.

A metric's ``artifacts()`` may write a ``*.json`` file of this shape, which the report draws without
knowing the metric::

    {"kind": "worldrecall.trace", "title": str, "x_label": str, "y_label": str, "x": [..],
     "series": [{"label": str, "y": [..]}], "hlines": [{"y": float, "label": str}],
     "y_range": [lo, hi] (optional), "verdict": "pass" | "fail" (optional)}
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


Box = tuple[float, float, float, float]  # x0, y0, x1, y1 of a text label (SVG user units, y down)
CHAR_W = 0.6  # a character's width in font sizes: generous for the default sans-serif, so estimates over-cover


def text_box(x: float, y: float, text: str, size: float, anchor: str = "start") -> Box:
    """The estimated box of a one-line ``<text>`` at baseline ``y`` (ascent 0.8, descent 0.2 font sizes)."""
    w = len(text) * size * CHAR_W
    x0 = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
    return (x0, y - 0.8 * size, x0 + w, y + 0.2 * size)


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _title_lines(title: str, width: int = 46) -> list[str]:
    """The chart title, broken once at a comma or colon when it would overflow the chart."""
    lines = [title]
    if len(title) > width:
        cut = max(title.rfind(", ", 0, width), title.rfind(": ", 0, width))
        if cut > 0:
            lines = [title[:cut + 1], title[cut + 2:]]
    return lines[:2]


def _title(lines: list[str], x: int, colour: str) -> list[str]:
    return [f'<text x="{x}" y="{10 + 10 * i}" font-size="9.5" font-weight="bold" fill="{colour}">{html.escape(t)}</text>'
            for i, t in enumerate(lines)]


def place_labels(labels: list[tuple[float, str]], taken: list[Box], left: float, right: float, top: float,
                 bottom: float, size: float) -> list[tuple[float, float, str]]:
    """(x, baseline y, text-anchor) for each threshold label (line y, text), so that no two label boxes and
    no box in ``taken`` (title, ticks, axis labels) intersect.

    A label sits just above its line at the right end of the plot; where that box is taken it tries just
    below, then steps further away (above and below in turn, one line height each), then the left end.
    Its box stays within ``top``..``bottom``; if nothing is free (a chart crowded with thresholds) it keeps
    the first position. Placed boxes are added to ``taken``."""
    step = size + 1
    out = []
    for y_line, text in labels:
        candidates = []
        for k in range(int((bottom - top) / step) + 2):
            for y in (y_line - 2 - k * step, y_line + 0.8 * size + 2 + k * step):
                candidates += [(right - 2, y, "end"), (left + 2, y, "start")]
        candidates.sort(key=lambda c: c[2] != "end")  # the right end first, at every distance
        boxed = [(c, text_box(c[0], c[1], text, size, c[2])) for c in candidates]  # each box measured once
        fits = [(c, box) for c, box in boxed if top <= box[1] and box[3] <= bottom]
        free = [(c, box) for c, box in fits if not any(_overlaps(box, b) for b in taken)]
        (x, y, anchor), box = (free or fits or boxed)[0]
        taken.append(box)
        out.append((x, y, anchor))
    return out


def _n(v: float) -> str:
    """A coordinate with one decimal at most: ``176.0`` -> ``176`` (reports hold hundreds of traces)."""
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def line_chart(trace: Mapping[str, Any], width: int = 320, height: int = 130,
               bands: list[tuple[float, float]] | None = None) -> str:
    """An SVG chart of ``trace`` (see the module doc); ``bands``: shaded (lo, hi) per series (CIs)."""
    esc = html.escape
    xs = [float(x) for x in trace.get("x", [])]
    series = trace.get("series", [])
    ys = [float(v) for s in series for v in s.get("y", []) if _finite(v)]
    ys += [float(h["y"]) for h in trace.get("hlines", []) if _finite(h.get("y"))]
    ys += [float(v) for b in (bands or []) for v in b if _finite(v)]
    if not xs or not ys:
        return f'<div class="trace empty">{esc(str(trace.get("title", "")))}: no data</div>'
    lo, hi = trace.get("y_range") or (min(ys), max(ys))
    lo, hi = min(lo, min(ys)), max(hi, max(ys))
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    L, R, T, B = 40, 8, 26, 30
    pw, ph = width - L - R, height - T - B

    def px(x: float) -> float:
        return L + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return T + (1 - (y - lo) / (hi - lo)) * ph

    verdict = trace.get("verdict")
    title = _title_lines(str(trace.get("title", "")))
    x_label, y_label = str(trace.get("x_label", "")), str(trace.get("y_label", ""))
    hi_s, lo_s, x0_s, x1_s = f"{hi:.3g}", f"{lo:.3g}", f"{x0:g}", f"{x1:g}"
    frame = {"pass": "#2ca02c", "fail": "#d62728"}.get(str(verdict), "#999")
    out = [(f'<svg class="trace" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(str(trace.get("title", "")))}">'),
           (f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" fill="#fff" stroke="{frame}" '
            f'stroke-width="{2 if verdict else 1}"/>'),
           *_title(title, L, frame if verdict else "#222"),
           f'<line x1="{L}" y1="{T + ph}" x2="{L + pw}" y2="{T + ph}" stroke="#444"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{T + ph}" stroke="#444"/>',
           f'<text x="{L - 3}" y="{T + 4}" font-size="9" text-anchor="end">{hi_s}</text>',
           f'<text x="{L - 3}" y="{T + ph}" font-size="9" text-anchor="end">{lo_s}</text>',
           f'<text x="{L}" y="{T + ph + 11}" font-size="9">{x0_s}</text>',
           f'<text x="{L + pw}" y="{T + ph + 11}" font-size="9" text-anchor="end">{x1_s}</text>',
           (f'<text x="{L + pw / 2}" y="{height - 4}" font-size="9" text-anchor="middle">'
            f'{esc(x_label)}</text>'),
           (f'<text x="10" y="{T + ph / 2}" font-size="9" text-anchor="middle" '
            f'transform="rotate(-90 10 {T + ph / 2})">{esc(y_label)}</text>')]
    # what the threshold labels must not cover (the rotated y label is a column left of the axis)
    taken = [*(text_box(L, 10 + 10 * i, t, 9.5) for i, t in enumerate(title)),
             text_box(L - 3, T + 4, hi_s, 9, "end"), text_box(L - 3, T + ph, lo_s, 9, "end"),
             text_box(L, T + ph + 11, x0_s, 9), text_box(L + pw, T + ph + 11, x1_s, 9, "end"),
             text_box(L + pw / 2, height - 4, x_label, 9, "middle")]
    for b_i, s in enumerate(series):
        colour = COLOURS[b_i % len(COLOURS)]
        if bands and b_i == 0:
            up = [(px(x), py(b[1])) for x, b in zip(xs, bands) if _finite(b[0]) and _finite(b[1])]
            dn = [(px(x), py(b[0])) for x, b in zip(xs, bands) if _finite(b[0]) and _finite(b[1])]
            if up:
                pts = " ".join(f"{a:.1f},{c:.1f}" for a, c in up + dn[::-1])
                out.append(f'<polygon points="{pts}" fill="{colour}" fill-opacity="0.18" stroke="none"/>')
        pts = [(px(x), py(float(y))) for x, y in zip(xs, s.get("y", [])) if _finite(y)]
        if pts:
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="'
                       + " ".join(f"{_n(a)},{_n(c)}" for a, c in pts) + '"/>')
            if len(pts) <= 24:
                out += [f'<circle cx="{a:.1f}" cy="{c:.1f}" r="2" fill="{colour}"/>' for a, c in pts]
    hl = [(py(float(h["y"])), f'{h.get("label", "")} {float(h["y"]):g}') for h in trace.get("hlines", [])
          if _finite(h.get("y"))]
    for y, _ in hl:
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{L + pw}" y2="{y:.1f}" stroke="#777" stroke-dasharray="4 3"/>')
    for (_, text), (x, y, anchor) in zip(hl, place_labels(hl, taken, L, L + pw, 0, T + ph, 8)):
        out.append(f'<text x="{_n(x)}" y="{y:.1f}" font-size="8" text-anchor="{anchor}" fill="#555">'
                   f'{esc(text)}</text>')
    out.append("</svg>")
    return "".join(out)
