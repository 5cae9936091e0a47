"""OPIS Presence: strict frame presence with frame zeroing (A.9) and its soft diagnostics.

A window scores 1 only when every presence-eligible object is matched and no confirmed extra remains;
any confirmed failure zeroes the frame. P_case = mean over scored windows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from worldrecall.plugins.opis.rows import Row, WindowExtras
from worldrecall.plugins.opis.visibility import KNOWN_INVISIBLE


def frame_scores(rows: Sequence[Row], extras: Sequence[WindowExtras]) -> list[tuple[str, float]]:
    """``(window_id, f_w)`` for every scored window, in window order.

    E_w = presence-eligible rows; X_w = extras attributable and ``unmatched_count`` > 0. E_w empty: the
    window is skipped unless X_w (then 0). Otherwise f_w = 1 if nothing in E_w is missing and not X_w, else 0.
    """
    by_window: dict[str, list[Row]] = {}
    for r in rows:
        by_window.setdefault(r.window_id, []).append(r)
    out: list[tuple[str, float]] = []
    for e in sorted(extras, key=lambda e: e.window_ordinal):
        eligible = [r for r in by_window.get(e.window_id, []) if r.presence is not None]
        confirmed_extra = e.attributable and e.unmatched_count > 0
        if not eligible:
            if confirmed_extra:
                out.append((e.window_id, 0.0))
            continue
        missing = any(float(r.presence) <= 0.0 for r in eligible)
        out.append((e.window_id, 0.0 if (missing or confirmed_extra) else 1.0))
    return out


def strict_presence(rows: Sequence[Row], extras: Sequence[WindowExtras]) -> tuple[float, str, int]:
    """``(P_case, status, n_scored_windows)``; P = 0 with status ``no_evidence_zero_fallback`` (the release's
    label) when no window scored."""
    f = frame_scores(rows, extras)
    if not f:
        return 0.0, "no_evidence_zero_fallback", 0
    return sum(v for _, v in f) / len(f), "observed", len(f)


def _ratio(a: float, b: float) -> float | None:
    return float(a / b) if b else None


def presence_diagnostics(rows: Sequence[Row], extras: Sequence[WindowExtras]) -> dict[str, Any]:
    """Soft Presence diagnostics pooled over the case (A.9).

    TP = matched eligible rows; FN = eligible missing rows; FP = confirmed extras over attributable windows;
    unverified missing = non-eligible rows whose visibility is not outside_view/occluded; unverified extras =
    candidate extras of non-attributable windows. recall = TP/(TP+FN+UM); precision = TP/(TP+FP+UE) (None
    when any window's extras were not attributable); F1 = 2TP/(2TP+FP+FN+UM+UE) (0 when undefined);
    known F1 = 2TP/(2TP+FP+FN); frame-macro F1 = mean over attributable windows of 2tp/(2tp+fp+fn).
    """
    eligible = [r for r in rows if r.presence is not None]
    tp = sum(1 for r in eligible if r.presence > 0)
    fn = sum(1 for r in eligible if r.state == "generation_failure" and r.presence <= 0)
    fp = sum(e.unmatched_count for e in extras if e.attributable)
    unverified_missing = sum(1 for r in rows if r.presence is None and r.visibility_state not in KNOWN_INVISIBLE)
    unverified_extra = sum(e.candidate_count for e in extras if not e.attributable)
    all_attributable = all(e.attributable for e in extras)
    by_window: dict[str, list[Row]] = {}
    for r in rows:
        by_window.setdefault(r.window_id, []).append(r)
    macro: list[float] = []
    for e in extras:
        if not e.attributable:
            continue
        el = [r for r in by_window.get(e.window_id, []) if r.presence is not None]
        wtp = sum(1 for r in el if r.presence > 0)
        wfn = sum(1 for r in el if r.state == "generation_failure" and r.presence <= 0)
        v = _ratio(2 * wtp, 2 * wtp + e.unmatched_count + wfn)
        if v is not None:
            macro.append(v)
    f1 = _ratio(2 * tp, 2 * tp + fp + fn + unverified_missing + unverified_extra)
    return {
        "presence_tp": tp,
        "presence_fn": fn,
        "presence_fp": fp,
        "presence_unverified_missing": unverified_missing,
        "presence_unverified_extra": unverified_extra,
        "presence_recall": _ratio(tp, tp + fn + unverified_missing),
        "presence_precision": _ratio(tp, tp + fp + unverified_extra) if all_attributable else None,
        "presence_f1": f1 if f1 is not None else 0.0,
        "presence_f1_known": _ratio(2 * tp, 2 * tp + fp + fn),
        "presence_f1_frame_macro": (sum(macro) / len(macro)) if macro else None,
        "presence_evidence_coverage": _ratio(len(eligible), len(rows)),
        "extras_evidence_coverage": _ratio(sum(e.attributable for e in extras), len(extras)),
    }
