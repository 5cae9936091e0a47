"""The validity heat-map drawn with Pillow: a grid of labelled cells, outlines, rotated ticks and a colour bar.

Matplotlib took a third of a second for this figure (two draws of ~350 text artists); a sweep draws it once per
job whose validity table changed. Pillow draws the same picture — matplotlib's colour map and its DejaVu font —
in a few hundredths of a second, without importing matplotlib (another 0.15-0.3 s of a re-score's job): the
colour map is matplotlib's RdYlGn computed here (:func:`_colours`, checked against matplotlib's in the tests) and
the font is the DejaVu Sans file matplotlib ships.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

MISSING = (221, 221, 221)  # not applicable: no comparable cases
CELL_W, CELL_H = 104, 46


@dataclass(frozen=True)
class Cell:
    """One cell: its fraction (None: not applicable), its two text lines and its outline."""

    row: int
    col: int
    fraction: float | None
    text: str
    outline: str = ""  # "" | "solid" | "dashed"


@lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(_font_file()), size)


def _font_file() -> Path | str:
    """The DejaVu Sans that matplotlib ships (the same file on every machine, whatever fonts it has), found
    without importing matplotlib; matplotlib's own pick where that file is not there."""
    spec = importlib.util.find_spec("matplotlib")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        if path.is_file():
            return path
    from matplotlib import font_manager

    return str(font_manager.findfont("DejaVu Sans"))


# ColorBrewer's 11-class RdYlGn, the colours matplotlib's "RdYlGn" runs through, evenly spaced on [0, 1]
_RDYLGN = np.array([(165, 0, 38), (215, 48, 39), (244, 109, 67), (253, 174, 97), (254, 224, 139), (255, 255, 191),
                    (217, 239, 139), (166, 217, 106), (102, 189, 99), (26, 152, 80), (0, 104, 55)], float) / 255.0
_LUT_SIZE = 256  # matplotlib's default number of entries in a colour map's table


@lru_cache(maxsize=1)
def _rdylgn_table() -> np.ndarray:
    """The colour map's table as matplotlib builds it from a list of colours, in the same arithmetic (the same
    bits): entry ``i`` interpolated linearly between the two colours around ``i`` on the colours' positions
    scaled to ``[0, N - 1]``; the first and last entries are the end colours."""
    n = _LUT_SIZE - 1
    at = np.linspace(0.0, 1.0, len(_RDYLGN)) * n
    want = n * np.linspace(0.0, 1.0, _LUT_SIZE)
    hi = np.searchsorted(at, want)[1:-1]
    t = (want[1:-1] - at[hi - 1]) / (at[hi] - at[hi - 1])
    inner = t[:, None] * (_RDYLGN[hi] - _RDYLGN[hi - 1]) + _RDYLGN[hi - 1]
    return np.clip(np.concatenate([_RDYLGN[:1], inner, _RDYLGN[-1:]]), 0.0, 1.0)


def _colours(fractions: Sequence[float]) -> list[tuple[int, int, int]]:
    """RGB of each fraction in [0, 1] on RdYlGn, as matplotlib's colour map gives it: the table entry
    ``floor(x * N)``, 1.0 the last one."""
    x = np.clip(np.asarray(fractions, float), 0.0, 1.0)
    idx = np.minimum((x * _LUT_SIZE).astype(int), _LUT_SIZE - 1)
    rgb = _rdylgn_table()[idx]
    return [(round(255 * px[0]), round(255 * px[1]), round(255 * px[2])) for px in rgb]


def _size(draw: ImageDraw.ImageDraw, text: str, font: ImageFont.FreeTypeFont) -> tuple[int, int]:
    box = draw.multiline_textbbox((0, 0), text, font=font, spacing=2)
    return box[2] - box[0], box[3] - box[1]


def _rotated(text: str, font: ImageFont.FreeTypeFont, angle: float) -> Image.Image:
    """``text`` in black on a transparent tile, rotated counter-clockwise by ``angle`` degrees."""
    probe = ImageDraw.Draw(Image.new("L", (1, 1)))
    box = probe.textbbox((0, 0), text, font=font)
    tile = Image.new("L", (box[2] - box[0] + 2, box[3] - box[1] + 2), 0)
    ImageDraw.Draw(tile).text((1 - box[0], 1 - box[1]), text, fill=255, font=font)
    return tile.rotate(angle, expand=True, resample=Image.Resampling.BICUBIC)


def _paste_text(img: Image.Image, mask: Image.Image, xy: tuple[int, int]) -> None:
    img.paste((0, 0, 0), (int(xy[0]), int(xy[1])), mask)


def _dashed_rect(draw: ImageDraw.ImageDraw, box: tuple[int, int, int, int], width: int, dash: int = 9) -> None:
    x0, y0, x1, y1 = box
    for a, b, horizontal, at in ((x0, x1, True, y0), (x0, x1, True, y1), (y0, y1, False, x0), (y0, y1, False, x1)):
        for s in range(a, b, 2 * dash):
            e = min(s + dash, b)
            if horizontal:
                draw.line([(s, at), (e, at)], fill=(0, 0, 0), width=width)
            else:
                draw.line([(at, s), (at, e)], fill=(0, 0, 0), width=width)


def draw_heatmap(path: Path, rows: Sequence[str], cols: Sequence[str], cells: Sequence[Cell], *, title: str,
                 xlabel: str, legend: Sequence[str], ylabel: str, bar_label: str) -> Path:
    """Write the heat-map PNG: ``rows`` x ``cols`` cells coloured by fraction (red 0 … green 1)."""
    small, tick, big = _font(11), _font(12), _font(15)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    row_w = max((_size(probe, r, tick)[0] for r in rows), default=0)
    col_tiles = [_rotated(c, tick, 35) for c in cols]
    col_h = max((t.height for t in col_tiles), default=0)
    left = 40 + row_w + 12
    top = 50
    grid_w, grid_h = CELL_W * len(cols), CELL_H * len(rows)
    lines = [xlabel, "", *legend]
    text_h = sum(_size(probe, ln or " ", tick)[1] + 6 for ln in lines)
    width = max(left + grid_w + 150, left + max((_size(probe, ln, tick)[0] for ln in lines), default=0) + 20)
    height = top + grid_h + col_h + 24 + text_h + 16
    img = Image.new("RGB", (int(width), int(height)), (255, 255, 255))
    draw = ImageDraw.Draw(img)

    tw, th = _size(draw, title, big)
    draw.text((left + (grid_w - tw) / 2, (top - th) / 2 - 4), title, fill=(0, 0, 0), font=big)
    if rows and cols:  # a cell without a record is not applicable (grey), like a cell with no comparable case
        draw.rectangle([left, top, left + grid_w, top + grid_h], fill=MISSING)
    colours = _colours([c.fraction if c.fraction is not None else 0.0 for c in cells])
    for c, colour in zip(cells, colours):
        x, y = left + c.col * CELL_W, top + c.row * CELL_H
        draw.rectangle([x, y, x + CELL_W, y + CELL_H], fill=colour if c.fraction is not None else MISSING)
    for c in cells:  # texts and outlines over every fill (an outline spans its neighbours' edges)
        x, y = left + c.col * CELL_W, top + c.row * CELL_H
        w, h = _size(draw, c.text, small)
        draw.multiline_text((x + (CELL_W - w) / 2, y + (CELL_H - h) / 2 - 2), c.text, fill=(0, 0, 0), font=small,
                            spacing=2, align="center")
        if c.outline == "solid":
            draw.rectangle([x + 1, y + 1, x + CELL_W - 1, y + CELL_H - 1], outline=(0, 0, 0), width=3)
        elif c.outline == "dashed":
            _dashed_rect(draw, (x + 1, y + 1, x + CELL_W - 1, y + CELL_H - 1), 3)
    draw.rectangle([left, top, left + grid_w, top + grid_h], outline=(0, 0, 0), width=1)

    for i, r in enumerate(rows):
        w, h = _size(draw, r, tick)
        draw.text((left - 8 - w, top + i * CELL_H + (CELL_H - h) / 2 - 2), r, fill=(0, 0, 0), font=tick)
    for j, t in enumerate(col_tiles):  # rotated labels end at their cell's centre, under the grid
        cx = left + j * CELL_W + CELL_W // 2
        _paste_text(img, t, (cx - t.width + 4, top + grid_h + 6))
    ylab = _rotated(ylabel, tick, 90)
    _paste_text(img, ylab, (8, top + (grid_h - ylab.height) / 2))

    y = top + grid_h + col_h + 20
    for ln in lines:
        w, h = _size(draw, ln or " ", tick)
        if ln:
            draw.text((left + (grid_w - w) / 2, y), ln, fill=(0, 0, 0), font=tick)
        y += h + 6

    bar_x, bar_top, bar_h = left + grid_w + 22, top + grid_h * 0.1, grid_h * 0.8
    ramp = _colours(np.linspace(1.0, 0.0, max(int(bar_h), 2)))
    for k, colour in enumerate(ramp):
        draw.line([(bar_x, bar_top + k), (bar_x + 16, bar_top + k)], fill=colour)
    draw.rectangle([bar_x, bar_top, bar_x + 16, bar_top + len(ramp)], outline=(0, 0, 0), width=1)
    for v in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0):
        yy = bar_top + (1.0 - v) * (len(ramp) - 1)
        draw.line([(bar_x + 16, yy), (bar_x + 20, yy)], fill=(0, 0, 0))
        draw.text((bar_x + 23, yy - 7), f"{v:.1f}", fill=(0, 0, 0), font=tick)
    blab = _rotated(bar_label, small, 90)
    _paste_text(img, blab, (bar_x + 58, bar_top + (bar_h - blab.height) / 2))

    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, format="PNG")
    return path


def draw_note(path: Path, text: str) -> Path:
    """A small PNG that only says ``text`` (a table with no rows)."""
    font = _font(13)
    w, h = _size(ImageDraw.Draw(Image.new("RGB", (1, 1))), text, font)
    img = Image.new("RGB", (w + 60, h + 50), (255, 255, 255))
    ImageDraw.Draw(img).text((30, 25 - 2), text, fill=(0, 0, 0), font=font)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, format="PNG")
    return path
