"""Input-grounded geometry (spec A.5): reference queries once per case, a background camera per window.

Reference side (:func:`reference_queries`): per object, the support mask (instance mask, else bbox) eroded
by 3 px (outside the image counts as background, so the image border erodes, as in the release) and
intersected with the reference validity; 128 query pixels drawn by stratified sampling over the
raster-ordered interior pixels (strata edges ``linspace(0, P, 129)`` truncated to int, errata 10; one
integer per stratum from ``numpy.random.default_rng(0).integers(lo, hi)``, a fresh generator per object;
an interior of at most 128 pixels is used whole). Background = validity minus the 3 px dilation of the
union of all object masks.

Per window (:func:`fit_window`): correspondences (reference pixel -> frame pixel) from the matcher; the
camera is fitted from background matches only, with every gate of A.5 (>= 12 matches, >= 16 background
matches, spatial support >= 0.02 in both images, rank >= 2, train/holdout split by reference (y, x),
EPnP-RANSAC and its LM refinement on two K candidates (four poses, lowest clipped train error), reliability
>= 0.65 with inlier support >= 0.02 (train and holdout inliers, both images), depth-scale gates).
A failed gate gives ``WindowGeometry(scored=False, failure_reason=...)``: an evaluator failure for that
frame, never a score.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from worldrecall.plugins.opis.records import ObjectProjection, WindowGeometry

N_QUERIES = 128
ERODE_PX = 3
QUERY_SEED = 0
MIN_MATCHES = 12
MIN_BACKGROUND = max(12, 2 * 8)    # 16
MIN_SUPPORT = 0.02
RANSAC_ITERATIONS = 1000
RANSAC_THRESHOLD_PX = 8.0
RANSAC_CONFIDENCE = 0.999
RANSAC_SEED = 0
MIN_PNP_INLIERS = 6
RELIABILITY_MIN = max(0.45, 0.65)  # 0.65
MIN_DEPTH_SAMPLES = 8
SCALE_RANGE = (0.25, 4.0)
DEPTH_LOG_P90_MAX = 0.15
MIN_OBJECT_QUERIES = 4
MOVE_THRESHOLD = 0.01


@dataclass
class MonoGeometry:
    """Single-image geometry at the image's own resolution (camera frame, OpenCV axes)."""

    depth: np.ndarray                 # [H, W] float z (metres or model units), 0 where invalid
    K: np.ndarray                     # [3, 3] pixel intrinsics (pixel-centre convention)
    valid: np.ndarray                 # [H, W] bool
    confidence: np.ndarray | None = None  # [H, W] in [0, 1]; None = fully confident (sidecar depth)
    points: np.ndarray | None = None  # [H, W, 3]; None = back-project depth with K

    @property
    def size(self) -> tuple[int, int]:
        """(W, H)."""
        return int(self.depth.shape[1]), int(self.depth.shape[0])

    def points_at(self, px: np.ndarray) -> np.ndarray:
        """3-D points at integer-rounded pixels ``px`` [M, 2] (x, y); NaN where invalid or outside."""
        xy = np.rint(np.asarray(px, np.float64)).astype(np.int64)
        W, H = self.size
        ok = (xy[:, 0] >= 0) & (xy[:, 0] < W) & (xy[:, 1] >= 0) & (xy[:, 1] < H)
        out = np.full((len(xy), 3), np.nan)
        x, y = xy[ok, 0], xy[ok, 1]
        if self.points is not None:
            pts = np.asarray(self.points[y, x], np.float64)
        else:
            z = np.asarray(self.depth[y, x], np.float64)
            Kinv = np.linalg.inv(np.asarray(self.K, np.float64))
            rays = np.stack([x, y, np.ones_like(x)], axis=1).astype(np.float64) @ Kinv.T
            pts = rays * z[:, None]
        good = np.asarray(self.valid[y, x], bool) & np.isfinite(pts).all(axis=1)
        pts[~good] = np.nan
        out[ok] = pts
        return out

    def sample(self, px: np.ndarray, field: str) -> tuple[np.ndarray, np.ndarray]:
        """(value, inside-and-valid) of ``depth`` or ``confidence`` at integer-rounded pixels."""
        xy = np.rint(np.asarray(px, np.float64)).astype(np.int64)
        W, H = self.size
        ok = (xy[:, 0] >= 0) & (xy[:, 0] < W) & (xy[:, 1] >= 0) & (xy[:, 1] < H)
        val = np.zeros(len(xy))
        good = np.zeros(len(xy), bool)
        x, y = xy[ok, 0], xy[ok, 1]
        arr = self.depth if field == "depth" else self.confidence
        if arr is None:
            val[ok] = 1.0
        else:
            val[ok] = np.asarray(arr[y, x], np.float64)
        good[ok] = np.asarray(self.valid[y, x], bool) & np.isfinite(val[ok])
        if field == "depth":
            good &= val > 0
        return val, good


def normalized_k_to_pixels(K_norm: np.ndarray, width: int, height: int) -> np.ndarray:
    """MoGe's normalised K in pixels, OpenCV pixel-centre convention: rows x (W, H), then cx, cy -= 0.5."""
    K = np.asarray(K_norm, np.float64).copy()
    K[0, :] *= width
    K[1, :] *= height
    K[0, 2] -= 0.5
    K[1, 2] -= 0.5
    return K


def rescale_k(K: np.ndarray, src: tuple[int, int], dst: tuple[int, int]) -> np.ndarray:
    """K of a ``src`` (W, H) image for the same camera at ``dst`` size (pixel-centre convention)."""
    sx, sy = dst[0] / src[0], dst[1] / src[1]
    K2 = np.asarray(K, np.float64).copy()
    K2[0, 0] *= sx
    K2[1, 1] *= sy
    K2[0, 1] *= sx
    K2[0, 2] = (K2[0, 2] + 0.5) * sx - 0.5
    K2[1, 2] = (K2[1, 2] + 0.5) * sy - 0.5
    return K2


def _morph(mask: np.ndarray, px: int, op: str, *, erode_border: bool = True) -> np.ndarray:
    """Erode / dilate with a (2 px + 1) square (= ``px`` passes of a 3x3 square).

    Outside the image is background for both operations (the release pads with False), so an object
    touching the image border loses its outer ``px`` pixels there; ``erode_border=False`` treats outside as
    foreground for erosion instead (the border is then not an edge of the object).
    """
    import cv2

    if px <= 0:
        return mask.astype(bool)
    kernel = np.ones((2 * px + 1, 2 * px + 1), np.uint8)
    f = cv2.erode if op == "erode" else cv2.dilate
    outside = 1 if (op == "erode" and not erode_border) else 0
    return f(mask.astype(np.uint8), kernel, borderType=cv2.BORDER_CONSTANT, borderValue=outside).astype(bool)


def support_mask(obj_mask: np.ndarray | None, bbox: tuple[float, float, float, float], size: tuple[int, int]) -> np.ndarray:
    """The object's support: its instance mask, else its bbox (integer pixel span) clipped to the image."""
    W, H = size
    if obj_mask is not None:
        return np.asarray(obj_mask, bool)
    m = np.zeros((H, W), bool)
    x0, y0, x1, y1 = bbox
    xa, ya = max(0, int(np.floor(x0))), max(0, int(np.floor(y0)))
    xb, yb = min(W, int(np.ceil(x1))), min(H, int(np.ceil(y1)))
    if xb > xa and yb > ya:
        m[ya:yb, xa:xb] = True
    return m


def stratum_edges(n_pixels: int, n: int) -> np.ndarray:
    """``n + 1`` stratum edges over ``n_pixels`` raster positions: ``linspace(0, P, n + 1)`` truncated to int.

    The float spacing is the release's (errata 10): e.g. P = 122, n = 14 gives edge 7 = 60, not 7 * 122 / 14
    = 61, because 7 x (122 / 14) is 60.999... in floating point.
    """
    return np.linspace(0, n_pixels, n + 1, dtype=np.int64)


def stratified_queries(interior: np.ndarray, n: int = N_QUERIES, seed: int = QUERY_SEED) -> np.ndarray:
    """Query pixels [Q, 2] (x, y) over the raster-ordered interior pixels (A.5 step 2, as released).

    An interior of at most ``n`` pixels is used whole (raster order). Otherwise stratum k spans raster
    positions ``[e_k, e_{k+1})`` (:func:`stratum_edges`) and one position is drawn per stratum with
    ``numpy.random.default_rng(seed).integers(e[:-1], e[1:])`` (one vectorised call, in stratum order).
    """
    flat = np.flatnonzero(np.asarray(interior, bool).ravel())
    P = len(flat)
    if P == 0:
        return np.zeros((0, 2), np.int64)
    if P <= n:
        pick = np.arange(P)
    else:
        edges = stratum_edges(P, n)
        pick = np.random.default_rng(seed).integers(edges[:-1], edges[1:])
    W = interior.shape[1]
    lin = flat[pick]
    return np.stack([lin % W, lin // W], axis=1)


@dataclass
class ReferenceGeometry:
    """Everything the per-window camera fit needs from the input image, computed once per case."""

    geometry: MonoGeometry
    background: np.ndarray                 # [H, W] bool
    queries: dict[str, np.ndarray]         # object_id -> [Q, 2] reference pixels (x, y)
    query_points: dict[str, np.ndarray]    # object_id -> [Q, 3] reference 3-D points
    supported: dict[str, bool]             # object_id -> non-empty eroded support


def reference_queries(geometry: MonoGeometry, objects: list[tuple[str, tuple[float, float, float, float], np.ndarray | None]],
                      *, n_queries: int = N_QUERIES, erode_px: int = ERODE_PX, seed: int = QUERY_SEED,
                      erode_border: bool = True) -> ReferenceGeometry:
    """A.5 reference side: per object (id, bbox, mask or None) its query pixels/points; the background mask."""
    size = geometry.size
    union = np.zeros((size[1], size[0]), bool)
    queries, points, supported = {}, {}, {}
    for oid, bbox, mask in objects:
        sup = support_mask(mask, bbox, size)
        union |= sup
        interior = _morph(sup, erode_px, "erode", erode_border=erode_border) & np.asarray(geometry.valid, bool)
        q = stratified_queries(interior, n_queries, seed)
        supported[oid] = len(q) > 0
        queries[oid] = q
        points[oid] = geometry.points_at(q) if len(q) else np.zeros((0, 3))
    background = np.asarray(geometry.valid, bool) & ~_morph(union, erode_px, "dilate")
    return ReferenceGeometry(geometry, background, queries, points, supported)


def hull_fraction(px: np.ndarray, size: tuple[int, int]) -> float:
    """Convex-hull area of pixels ``px`` [M, 2] over the image area (0 with < 3 points)."""
    import cv2

    if len(px) < 3:
        return 0.0
    hull = cv2.convexHull(np.asarray(px, np.float32).reshape(-1, 1, 2))
    return float(cv2.contourArea(hull)) / float(size[0] * size[1])


def project(points: np.ndarray, rvec: np.ndarray, tvec: np.ndarray, K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixels [M, 2] and camera-frame z [M] of 3-D points (NaN rows stay NaN)."""
    import cv2

    R, _ = cv2.Rodrigues(np.asarray(rvec, np.float64))
    cam = np.asarray(points, np.float64) @ R.T + np.asarray(tvec, np.float64).reshape(1, 3)
    z = cam[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        uv = cam @ np.asarray(K, np.float64).T
        px = uv[:, :2] / uv[:, 2:3]
    return px, z


def _fail(reason: str, ref_px: np.ndarray, cur_px: np.ndarray) -> WindowGeometry:
    return WindowGeometry(scored=False, failure_reason=reason, ref_px=np.asarray(ref_px, np.float64).reshape(-1, 2),
                          cur_px=np.asarray(cur_px, np.float64).reshape(-1, 2))


def background_rank(points: np.ndarray) -> int:
    """Rank of the centred background 3-D points with the release's absolute singular-value tolerance 1e-6."""
    p = np.asarray(points, np.float64).reshape(-1, 3)
    return int(np.linalg.matrix_rank(p - p.mean(axis=0), tol=1e-6))


def inlier_support(ref_px: np.ndarray, cur_px: np.ndarray, train: np.ndarray, hold: np.ndarray, inlier: np.ndarray,
                   ref_size: tuple[int, int], cur_size: tuple[int, int]) -> float:
    """The release's inlier spatial support: the smallest hull fraction of the train inliers and of the holdout
    inliers, each measured in the reference and in the current image (4 hulls)."""
    return min(hull_fraction(px[idx[inlier[idx]]], size)
               for idx in (train, hold) for px, size in ((ref_px, ref_size), (cur_px, cur_size)))


def _train_loss(obj: np.ndarray, img: np.ndarray, rvec: np.ndarray, tvec: np.ndarray, K: np.ndarray) -> float:
    """Mean train reprojection error clipped at 8 px (a point behind the camera counts 8)."""
    px, z = project(obj, rvec, tvec, K)
    err = np.linalg.norm(px - img, axis=1)
    err = np.where(np.isfinite(err) & (z > 0), err, RANSAC_THRESHOLD_PX)
    return float(np.mean(np.minimum(err, RANSAC_THRESHOLD_PX)))


def _pnp(obj: np.ndarray, img: np.ndarray, K: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """Camera candidates for one K, as released: EPnP-RANSAC (1000 iterations, 8 px, 0.999, seed 0, >= 6
    inliers) and its LM refinement on the RANSAC inliers, each with its clipped mean train error (raw first).
    """
    import cv2

    cv2.setRNGSeed(RANSAC_SEED)
    try:
        ok, rvec, tvec, inl = cv2.solvePnPRansac(
            obj.astype(np.float64), img.astype(np.float64), K.astype(np.float64), None,
            iterationsCount=RANSAC_ITERATIONS, reprojectionError=RANSAC_THRESHOLD_PX,
            confidence=RANSAC_CONFIDENCE, flags=cv2.SOLVEPNP_EPNP)
    except cv2.error:
        return []
    if not ok or inl is None or len(inl) < MIN_PNP_INLIERS:
        return []
    idx = inl.ravel()
    out = [(rvec.copy(), tvec.copy(), _train_loss(obj, img, rvec, tvec, K))]
    try:
        r2, t2 = cv2.solvePnPRefineLM(obj[idx].astype(np.float64), img[idx].astype(np.float64),
                                      K.astype(np.float64), None, rvec.copy(), tvec.copy())
        out.append((r2, t2, _train_loss(obj, img, r2, t2, K)))
    except cv2.error:
        pass
    return out


def fit_window(ref: ReferenceGeometry, cur: MonoGeometry, ref_px: np.ndarray, cur_px: np.ndarray,
               object_ids: list[str] | None = None) -> WindowGeometry:
    """A.5 per-window steps 3-9: background camera, gates, projections of every object's queries."""
    ref_px = np.asarray(ref_px, np.float64).reshape(-1, 2)
    cur_px = np.asarray(cur_px, np.float64).reshape(-1, 2)
    M = len(ref_px)
    if M < MIN_MATCHES:
        return _fail(f"{M} correspondences (< {MIN_MATCHES})", ref_px, cur_px)
    Wr, Hr = ref.geometry.size
    Wc, Hc = cur.size
    P_ref = ref.geometry.points_at(ref_px)
    ref_ok = np.isfinite(P_ref).all(axis=1)
    rxy = np.rint(ref_px).astype(np.int64)
    inside_r = (rxy[:, 0] >= 0) & (rxy[:, 0] < Wr) & (rxy[:, 1] >= 0) & (rxy[:, 1] < Hr)
    is_bg = np.zeros(M, bool)
    is_bg[inside_r] = ref.background[rxy[inside_r, 1], rxy[inside_r, 0]]
    cur_depth, cur_ok = cur.sample(cur_px, "depth")
    bg = np.flatnonzero(ref_ok & is_bg & cur_ok)
    if len(bg) < MIN_BACKGROUND:
        return _fail(f"{len(bg)} background matches (< {MIN_BACKGROUND})", ref_px, cur_px)
    if hull_fraction(ref_px[bg], (Wr, Hr)) < MIN_SUPPORT or hull_fraction(cur_px[bg], (Wc, Hc)) < MIN_SUPPORT:
        return _fail(f"background matches cover < {MIN_SUPPORT} of an image", ref_px, cur_px)
    if background_rank(P_ref[bg]) < 2:
        return _fail("degenerate background points (rank < 2)", ref_px, cur_px)
    order = bg[np.lexsort((ref_px[bg, 0], ref_px[bg, 1]))]   # by reference (y, x)
    train, hold = order[0::2], order[1::2]
    K_ref_cur = rescale_k(ref.geometry.K, (Wr, Hr), (Wc, Hc))
    best = None
    # four candidates (current K, rescaled reference K) x (RANSAC, RANSAC + LM): the lowest train loss wins,
    # the first of equal losses in that order (as released)
    for name, K in (("current", np.asarray(cur.K, np.float64)), ("reference", K_ref_cur)):
        for rv, tv, loss in _pnp(P_ref[train], cur_px[train], K):
            if best is None or loss < best[4]:
                best = (name, K, rv, tv, loss)
    if best is None:
        return _fail("EPnP-RANSAC found no camera with >= 6 inliers", ref_px, cur_px)
    _, K, rvec, tvec, _ = best
    proj, z = project(np.where(ref_ok[:, None], P_ref, 0.0), rvec, tvec, K)
    err = np.linalg.norm(proj - cur_px, axis=1)
    err = np.where(ref_ok & np.isfinite(err), err, np.inf)
    inlier = ref_ok & cur_ok & (z > 0) & (err <= RANSAC_THRESHOLD_PX)
    reliability = min(float(inlier[train].mean()), float(inlier[hold].mean())) if len(hold) else 0.0
    geo = WindowGeometry(scored=False, camera_confidence=reliability, ref_px=ref_px, cur_px=cur_px,
                         reproj_err=err, inlier=inlier)
    if reliability < RELIABILITY_MIN:
        geo.failure_reason = f"camera reliability {reliability:.3f} (< {RELIABILITY_MIN})"
        return geo
    if inlier_support(ref_px, cur_px, train, hold, inlier, (Wr, Hr), (Wc, Hc)) < MIN_SUPPORT:
        geo.failure_reason = f"background inliers cover < {MIN_SUPPORT} of an image (train or holdout)"
        return geo
    scale = _depth_scale(geo, z, cur_depth, cur_ok, train, hold, inlier)
    if scale is None:
        return geo
    geo.scored, geo.depth_scale = True, scale
    _camera_motion(geo, proj, ref_px, hold, inlier, (Wr, Hr), (Wc, Hc))
    _project_objects(geo, ref, cur, rvec, tvec, K, scale, object_ids, (Wc, Hc))
    return geo


def _depth_scale(geo: WindowGeometry, z: np.ndarray, cur_depth: np.ndarray, cur_ok: np.ndarray,
                 train: np.ndarray, hold: np.ndarray, inlier: np.ndarray) -> float | None:
    """Depth alignment: scale = median(z_cam / current depth) over train inliers with valid depth, checked
    on the holdout; None (and ``geo.failure_reason``) when a gate fails."""
    tr = train[inlier[train] & cur_ok[train]]
    ho = hold[inlier[hold] & cur_ok[hold]]
    if len(tr) < MIN_DEPTH_SAMPLES or len(ho) < MIN_DEPTH_SAMPLES:
        geo.failure_reason = f"{len(tr)} train / {len(ho)} holdout depth samples (< {MIN_DEPTH_SAMPLES})"
        return None
    scale = float(np.median(z[tr] / cur_depth[tr]))
    if not (SCALE_RANGE[0] <= scale <= SCALE_RANGE[1]):
        geo.failure_reason = f"depth scale {scale:.3f} outside [{SCALE_RANGE[0]}, {SCALE_RANGE[1]}]"
        return None
    p90 = float(np.percentile(np.abs(np.log(cur_depth[ho] * scale / z[ho])), 90))
    if not p90 <= DEPTH_LOG_P90_MAX:
        geo.failure_reason = f"holdout depth disagreement p90 |log| {p90:.3f} (> {DEPTH_LOG_P90_MAX})"
        return None
    return scale


def _camera_motion(geo: WindowGeometry, proj: np.ndarray, ref_px: np.ndarray, hold: np.ndarray,
                   inlier: np.ndarray, ref_size: tuple[int, int], cur_size: tuple[int, int]) -> None:
    """Diagnostic camera motion (A.5 step 9, not a gate): median holdout-inlier displacement / diagonal."""
    (Wr, Hr), (Wc, Hc) = ref_size, cur_size
    hin = hold[inlier[hold]]
    initial = np.stack([(ref_px[hin, 0] + 0.5) * Wc / Wr - 0.5, (ref_px[hin, 1] + 0.5) * Hc / Hr - 0.5], axis=1)
    disp = np.linalg.norm(proj[hin] - initial, axis=1) / float(np.hypot(Wc, Hc)) if len(hin) else np.zeros(0)
    geo.displacement_fraction = float(np.median(disp)) if len(disp) else None
    geo.moves = bool(geo.displacement_fraction is not None and geo.displacement_fraction >= MOVE_THRESHOLD)


def _project_objects(geo: WindowGeometry, ref: ReferenceGeometry, cur: MonoGeometry, rvec: np.ndarray,
                     tvec: np.ndarray, K: np.ndarray, scale: float, object_ids: list[str] | None,
                     cur_size: tuple[int, int]) -> None:
    """Every object's reference queries projected into the current frame, with the scaled current depth."""
    Wc, Hc = cur_size
    for oid in object_ids if object_ids is not None else list(ref.queries):
        P = ref.query_points.get(oid)
        if P is None:
            continue
        ok = np.isfinite(P).all(axis=1)
        if int(ok.sum()) < MIN_OBJECT_QUERIES:
            continue
        P = P[ok]
        ppx, pz = project(P, rvec, tvec, K)
        in_view = (pz > 0) & (ppx[:, 0] >= 0) & (ppx[:, 0] <= Wc - 1) & (ppx[:, 1] >= 0) & (ppx[:, 1] <= Hc - 1)
        # sampled as released: at the rounded pixel wherever it falls inside the frame (x up to W - 0.5),
        # not only where the unrounded projection is in view; the scorer applies its own in-view test
        at = np.where(np.isfinite(ppx).all(axis=1)[:, None], ppx, -1.0)
        d, d_ok = cur.sample(at, "depth")
        c, _ = cur.sample(at, "confidence")
        geo.projections[oid] = ObjectProjection(
            object_id=oid, in_view=in_view, projected_px=np.nan_to_num(ppx, nan=-1.0, posinf=-1.0, neginf=-1.0),
            projected_depth=pz, current_depth=np.where(d_ok, d * scale, 0.0), depth_valid=d_ok,
            depth_confidence=np.where(d_ok, c, 0.0))

