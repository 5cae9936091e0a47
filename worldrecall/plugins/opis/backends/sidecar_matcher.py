"""``opis_sidecar_matcher`` (sidecar): correspondences from the geometry the dataset ships (synthetic suite).

What a perfect matcher would return, built from exact depth, poses and instance masks instead of pixels:

* every ``stride``-th input-image pixel with valid depth is lifted with the input image's depth/K/pose
  (``reference_geometry.npz``: ``depth``, ``K``, ``c2w``, ``ids``) and projected into the frame with the
  frame's sidecar pose/K; it is a correspondence when it lands in the frame, its depth agrees with the
  frame's depth (``depth_tolerance``, relative) and the same instance id is there (the surface is unchanged);
* an object whose surface is *not* where the input geometry says (moved, hallucinated elsewhere) — fewer than
  ``moved_fraction`` of its lifted pixels pass — is matched by appearance instead: its pixels map to the
  same normalised position inside the frame's box of that instance (where a descriptor matcher would find
  it), so the background-fitted camera sees it displaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from worldrecall.core.data import CaseFailure, one_line
from worldrecall.formats.arrays import load_npz
from worldrecall.plugins.opis.backends import sidecar_cache
from worldrecall.plugins.opis.backends.geometry import _note, resize_nearest
from worldrecall.plugins.opis.geometry import rescale_k

DEFAULTS: dict[str, Any] = {"stride": 4, "depth_tolerance": 0.05, "moved_fraction": 0.5}


def _reference(case: Any) -> dict[str, np.ndarray]:
    p = case.sidecars.get("reference_geometry") if case is not None else None
    if p is None:
        raise CaseFailure("opis_sidecar_matcher: the case has no reference_geometry.npz")
    try:  # member headers checked before inflating (formats.arrays)
        need = ("depth", "K", "c2w", "ids")
        z = load_npz(Path(p), need)
        missing = [k for k in need if k not in z]
        if missing:
            raise CaseFailure(f"{p}: missing {', '.join(missing)} (opis_sidecar_matcher)")
        return z
    except (OSError, ValueError) as e:
        raise CaseFailure(f"{p}: unreadable reference geometry ({one_line(e)})") from None


class SidecarMatcher:
    """Exact input-image <-> frame correspondences from shipped depth, poses and instance masks."""

    def __init__(self, opts: Mapping[str, Any]):
        self.opts = {**DEFAULTS, **{k: v for k, v in opts.items() if k in DEFAULTS}}

    def match(self, ref_image: np.ndarray, frame: np.ndarray, *, case: Any = None,
              index: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(ref_px, cur_px) [M, 2] float64 pixel centres."""
        if case is None or index is None:
            raise CaseFailure("opis_sidecar_matcher: needs the case and the frame index")
        ref = _reference(case)
        Hr, Wr = np.asarray(ref_image).shape[:2]
        Hc, Wc = np.asarray(frame).shape[:2]
        d = case.sidecars.get("vipe")
        if d is None:
            raise CaseFailure(f"{case.case_id}: no ViPE sidecar (annotations_vipe/{case.case_id}_vipe_ann)")
        sc = sidecar_cache.sidecar(d)
        if sc.instance_ids is None:
            raise CaseFailure(f"{d}: instance_masks.npz missing (opis_sidecar_matcher)")
        row = sc.row_for_frame(int(index))
        r_depth = resize_nearest(ref["depth"].astype(np.float32), Wr, Hr)
        r_ids = resize_nearest(ref["ids"], Wr, Hr)
        K_r = rescale_k(ref["K"], (ref["depth"].shape[1], ref["depth"].shape[0]), (Wr, Hr))
        c_depth = resize_nearest(np.asarray(sc.depth[row], np.float32), Wc, Hc)
        c_ids = resize_nearest(np.asarray(sc.instance_ids[row]), Wc, Hc)
        dh, dw = np.asarray(sc.depth[row]).shape
        _note(case, sc.notes)  # reader notes onto the rows
        K_c = rescale_k(np.asarray(sc.intrinsics[row], np.float64), (dw, dh), (Wc, Hc))
        s = int(self.opts["stride"])
        ys, xs = np.mgrid[s // 2:Hr:s, s // 2:Wr:s]
        xs, ys = xs.ravel(), ys.ravel()
        z = r_depth[ys, xs].astype(np.float64)
        ok = np.isfinite(z) & (z > 0)
        xs, ys, z = xs[ok], ys[ok], z[ok]
        ids = r_ids[ys, xs].astype(np.int64)
        cam = np.stack([xs, ys, np.ones_like(xs)], 1).astype(np.float64) @ np.linalg.inv(K_r).T * z[:, None]
        world = cam @ ref["c2w"][:3, :3].T + ref["c2w"][:3, 3]
        w2c = np.linalg.inv(np.asarray(sc.poses_c2w[row], np.float64))
        pc = world @ w2c[:3, :3].T + w2c[:3, 3]
        with np.errstate(divide="ignore", invalid="ignore"):
            uv = pc @ K_c.T
            u, v = uv[:, 0] / uv[:, 2], uv[:, 1] / uv[:, 2]
        ui, vi = np.rint(u).astype(np.int64, copy=False), np.rint(v).astype(np.int64, copy=False)
        inside = (pc[:, 2] > 0) & (ui >= 0) & (ui < Wc) & (vi >= 0) & (vi < Hc)
        good = np.zeros(len(xs), bool)
        ii, vv, uu = np.flatnonzero(inside), vi[inside], ui[inside]
        fd = c_depth[vv, uu].astype(np.float64)
        tol = float(self.opts["depth_tolerance"])
        good[ii] = (fd > 0) & (np.abs(fd - pc[ii, 2]) <= tol * pc[ii, 2]) & (c_ids[vv, uu].astype(np.int64) == ids[ii])
        ref_out = [np.stack([xs[good], ys[good]], 1).astype(np.float64)]
        cur_out = [np.stack([u[good], v[good]], 1)]
        # objects not where the input geometry puts them: match by appearance inside their new box
        for iid in np.unique(ids[ids > 0]):
            sel = ids == iid
            if good[sel].mean() >= float(self.opts["moved_fraction"]):
                continue
            fy, fx = np.nonzero(c_ids == iid)
            ry, rx = np.nonzero(r_ids == iid)
            if len(fx) == 0 or len(rx) == 0:
                continue
            rb = (rx.min(), ry.min(), rx.max() + 1, ry.max() + 1)
            fb = (fx.min(), fy.min(), fx.max() + 1, fy.max() + 1)
            px, py = xs[sel & ~good], ys[sel & ~good]
            nu = (px + 0.5 - rb[0]) / (rb[2] - rb[0])
            nv = (py + 0.5 - rb[1]) / (rb[3] - rb[1])
            cu = fb[0] + nu * (fb[2] - fb[0]) - 0.5
            cv = fb[1] + nv * (fb[3] - fb[1]) - 0.5
            ci, cj = np.clip(np.rint(cu).astype(np.int64), 0, Wc - 1), np.clip(np.rint(cv).astype(np.int64), 0, Hc - 1)
            hit = c_ids[cj, ci].astype(np.int64) == iid
            ref_out.append(np.stack([px[hit], py[hit]], 1).astype(np.float64))
            cur_out.append(np.stack([cu[hit], cv[hit]], 1))
        return np.concatenate(ref_out), np.concatenate(cur_out)


def build_sidecar_matcher(opts: Mapping[str, Any]) -> SidecarMatcher:
    """Factory: ``opis_sidecar_matcher``."""
    return SidecarMatcher(opts)
