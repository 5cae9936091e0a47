"""CPU renderer of the synthetic suite: open3d raycasting, procedural textures, Lambertian shading.

Embree (through open3d) only lists the triangles each ray crosses; the hit distance, the closest triangle and
its face normal are computed here in fixed-order float64 (:func:`exact_hits`), and the texture is resized in
numpy (:func:`upsample_cubic`), so the suite is the same bits on every x86-64 CPU.

Rays are generated here (not with ``create_rays_pinhole``) so that pixel ``u`` looks along
``((u - cx) / fx, (v - cy) / fy, 1)`` — the integer-pixel-centre convention the sidecar consumers
back-project with — and so that the ray parameter ``t_hit`` *is* the camera z-depth.

Cost tricks: the static room (walls, floor, props) is raycast and shaded once per (scene variant, pose,
resolution) and shared by every counterfactual on that camera path; the target lives in its own small
scene at a canonical pose, rays are mapped into its frame (so moving/scaling it never rebuilds a scene),
only the pixels inside its projected bounding circle are cast, and it is composited by depth.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from worldrecall.numerics import exact
from worldrecall.plugins.synthetic.scene import (
    PATTERN_CEILING,
    PATTERN_FLOOR,
    PATTERN_WALL,
    RoomLayout,
    TargetSpec,
    hue_shift,
    yaw_matrix,
)

HFOV_DEG = 60.0
TARGET_ID = 1
LIGHT = np.array([0.35, 0.85, -0.40]) / exact.norm([0.35, 0.85, -0.40])
TEX_SIZE = 512
SECONDARY = np.array([0.93, 0.92, 0.86])
DRIFT_HUE_DEG = 150.0  # hue rotation of a fully drifted target


def intrinsics(width: int, height: int, hfov_deg: float = HFOV_DEG) -> np.ndarray:
    """3x3 pinhole K with square pixels and the principal point at the image centre (pixel-centre coords)."""
    f = (width / 2.0) / math.tan(math.radians(hfov_deg) / 2.0)
    return np.array([[f, 0.0, (width - 1) / 2.0], [0.0, f, (height - 1) / 2.0], [0.0, 0.0, 1.0]])


def scale_intrinsics(K: np.ndarray, size: tuple[int, int], new_size: tuple[int, int]) -> np.ndarray:
    """K for the same camera sampled at ``new_size`` (w, h): pixel centres map as (u + 0.5) * s - 0.5."""
    sx, sy = new_size[0] / size[0], new_size[1] / size[1]
    out = K.copy()
    out[0, 0] *= sx
    out[1, 1] *= sy
    out[0, 2] = (K[0, 2] + 0.5) * sx - 0.5
    out[1, 2] = (K[1, 2] + 0.5) * sy - 0.5
    return out


def detail_texture(seed: int) -> np.ndarray:
    """A 512x512 float32 multi-octave value-noise texture in [0, 1] with sharp blotches (for features)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7E57]))
    tex = np.zeros((TEX_SIZE, TEX_SIZE), np.float32)
    for cells, amp in ((8, 0.35), (24, 0.3), (64, 0.2), (160, 0.15)):
        grid = rng.random((cells, cells)).astype(np.float32)
        tex += amp * upsample_cubic(grid, TEX_SIZE)
    blot = upsample_cubic(rng.random((48, 48)).astype(np.float32), TEX_SIZE)
    tex = np.where(blot > 0.78, tex * 0.45, tex)  # dark blotches with hard edges = corners to match
    tex -= tex.min()
    tex /= max(float(tex.max()), 1e-6)
    return tex.astype(np.float32)


def _cubic_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """Source indices (n_out, 4; clamped at the borders) and Keys weights (a = -0.75, as OpenCV's
    INTER_CUBIC) of each output sample, pixel centres mapped as (i + 0.5) * n_in / n_out - 0.5."""
    src = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
    x0 = np.floor(src)
    f = src - x0
    a = -0.75
    d = np.stack([1.0 + f, f, 1.0 - f, 2.0 - f], -1)  # distances to the taps x0-1 .. x0+2
    near = ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0
    far = ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a
    w = np.where(d <= 1.0, near, far)
    idx = np.clip(x0[:, None].astype(np.int64) + np.arange(-1, 3), 0, n_in - 1)
    return idx, w


def upsample_cubic(grid: np.ndarray, size: int) -> np.ndarray:
    """Bicubic resize of a square float grid to ``size`` x ``size`` (rows, then columns), each output the
    four taps added in order in float64: the same bits on every CPU, where ``cv2.resize``'s vectorised
    cubic path rounds differently on an AVX2-only CPU than on an AVX-512 one (capped at AVX2 or not)."""
    g = np.asarray(grid, np.float64)
    idx, w = _cubic_taps(g.shape[0], size)
    rows = g[idx[:, 0]] * w[:, 0, None]
    for k in range(1, 4):
        rows = rows + g[idx[:, k]] * w[:, k, None]
    idx, w = _cubic_taps(g.shape[1], size)
    out = rows[:, idx[:, 0]] * w[None, :, 0]
    for k in range(1, 4):
        out = out + rows[:, idx[:, k]] * w[None, :, k]
    return out.astype(np.float32)


def sample_wrap(tex: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bilinear lookup of a float32 texture at pixel coordinates (x, y), wrapping at the borders.

    What ``cv2.remap(..., INTER_LINEAR, BORDER_WRAP)`` computes (coordinates rounded to 1/32 pixel), spelt
    out in elementwise float32 so that it rounds the same on every CPU: OpenCV's vectorised remap differs
    in the last bit between its SSE and AVX2 paths, which is enough to flip a pixel of the suite."""
    h, w = tex.shape
    ix = np.rint(np.asarray(x, np.float32) * np.float32(32)).astype(np.int64)
    iy = np.rint(np.asarray(y, np.float32) * np.float32(32)).astype(np.int64)
    ax = (ix & 31).astype(np.float32) * np.float32(1 / 32)
    ay = (iy & 31).astype(np.float32) * np.float32(1 / 32)
    x0, y0 = (ix >> 5) % w, (iy >> 5) % h
    x1, y1 = (x0 + 1) % w, (y0 + 1) % h
    bx, by = np.float32(1) - ax, np.float32(1) - ay
    top = tex[y0, x0] * bx + tex[y0, x1] * ax
    bottom = tex[y1, x0] * bx + tex[y1, x1] * ax
    return top * by + bottom * ay


def drifted_primary(look: TargetLook) -> np.ndarray:
    """The target's main colour as drawn: its state colour, hue-rotated by up to 150 degrees when drifting."""
    c = np.asarray(look.colour, np.float64)
    return hue_shift(c, DRIFT_HUE_DEG * look.drift) if look.drift > 0 else c


@dataclass
class Layer:
    """One raycast layer: z-depth (inf = miss), instance ids and (full resolution only) shaded RGB
    (uint8 for the room, float for the target before compositing).

    A layer may cover only a window of the image starting at pixel (``x0``, ``y0``).
    """

    z: np.ndarray
    ids: np.ndarray
    rgb: np.ndarray | None = None
    x0: int = 0
    y0: int = 0

    @property
    def window(self) -> tuple[slice, slice]:
        h, w = self.z.shape
        return slice(self.y0, self.y0 + h), slice(self.x0, self.x0 + w)


@dataclass(frozen=True)
class TargetLook:
    """Where and how the target is drawn in one frame."""

    position: tuple[float, float, float]  # bbox centre, world
    scale: float
    colour: tuple[float, float, float]
    drift: float = 0.0  # appearance drift in [0, 1]


class Renderer:
    """Renders one case's frames at two resolutions (video and depth sidecar)."""

    def __init__(
        self,
        width: int,
        height: int,
        depth_size: tuple[int, int],
        target: TargetSpec,
        texture: np.ndarray,
        *,
        nthreads: int = 0,
    ):
        import open3d as o3d

        self._o3d = o3d
        self.nthreads = nthreads
        self.size = {"full": (width, height), "depth": tuple(depth_size)}
        self.K = {"full": intrinsics(width, height)}
        self.K["depth"] = scale_intrinsics(self.K["full"], (width, height), self.size["depth"])
        self._dirs = {}
        for res, (w, h) in self.size.items():
            K = self.K[res]
            u, v = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
            self._dirs[res] = np.stack(
                [(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u)], -1
            )
        self._dirs32 = {k: v.astype(np.float32) for k, v in self._dirs.items()}
        # an odd integer down-sampling factor puts every depth pixel centre on a video pixel centre, so the
        # depth sidecar is an exact subsample of the video-resolution z-buffer (no second raycast)
        dw, dh = self.size["depth"]
        k = width // dw
        self._depth_step = k if (k % 2 == 1 and dw * k == width and dh * k == height) else 0
        self.texture = texture
        self.target = target
        self._target_scene = self._scene([target.mesh()])
        self._static: dict[str, tuple] = {}
        self._bg_cache: OrderedDict[tuple, Layer] = OrderedDict()
        self.cache_size = 32
        self._memo: OrderedDict[tuple, object] = OrderedDict()

    # -- static room --------------------------------------------------------------------------------
    def add_layout(self, key: str, layout: RoomLayout, offsets: np.ndarray) -> None:
        """Register a static scene variant (e.g. ``base``, ``hallucinated``) under ``key``."""
        scene = self._scene(layout.meshes(offsets))
        s = layout.surfaces
        table = {
            # one row per geometry: r, g, b, 1/texel, offset u, offset v, pattern (gathered in one go)
            "rows": np.array([[*x.colour, 1.0 / x.texel, *x.offset, x.pattern] for x in s], np.float32),
            "instance": np.array([x.instance for x in s], np.uint8),
        }
        self._static[key] = (scene, table)

    def _scene(self, meshes: list) -> _Scene:
        """An Embree scene of ``meshes`` (legacy open3d meshes, geometry id = list index) and their triangles."""
        o3d = self._o3d
        raycaster = o3d.t.geometry.RaycastingScene(nthreads=self.nthreads)
        tris = []
        for m in meshes:
            tm = o3d.t.geometry.TriangleMesh.from_legacy(m)
            raycaster.add_triangles(tm)
            tris.append(tm.vertex.positions.numpy()[tm.triangle.indices.numpy()])  # float32, as Embree sees them
        return _Scene(raycaster, tris)

    def _cast(self, scene: _Scene, origin: np.ndarray, dirs: np.ndarray) -> dict[str, np.ndarray]:
        """Closest hits: every triangle a ray crosses from Embree, the distances, the choice among them and the
        face normal from :func:`exact_hits`.

        Embree's own ``t_hit`` and normals come from SIMD kernels it picks by CPU (an approximate reciprocal
        refined per instruction set; 4-, 8- or 16-wide), so they differ in the last bits between an AVX2 and
        an AVX-512 machine, and so does its choice between two triangles a ray meets at one point (an edge of a
        box); there is no switch to pin it (this open3d build reads no Embree config). Whether a ray crosses a
        triangle is a sign test, the same on every CPU."""
        rays = np.empty(dirs.shape[:-1] + (6,), np.float32)
        rays[..., :3] = origin
        rays[..., 3:] = dirs
        flat = np.ascontiguousarray(rays.reshape(-1, 6))
        found = scene.raycaster.list_intersections(self._o3d.core.Tensor.from_numpy(flat), nthreads=self.nthreads)
        ans = exact_hits(scene, flat, found["ray_ids"].numpy(), found["geometry_ids"].numpy(),
                         found["primitive_ids"].numpy())
        return {k: v.reshape(dirs.shape[:-1] + v.shape[1:]) for k, v in ans.items()}

    def background(self, key: str, c2w: np.ndarray, res: str) -> Layer:
        """The static scene ``key`` seen from ``c2w`` at resolution ``res`` (memoised per pose)."""
        ck = (key, res, np.asarray(c2w, np.float64).tobytes())
        hit = self._bg_cache.get(ck)
        if hit is not None:
            self._bg_cache.move_to_end(ck)
            return hit
        scene, table = self._static[key]
        R, t = c2w[:3, :3].astype(np.float32), c2w[:3, 3].astype(np.float32)
        dirs = exact.matmul(self._dirs32[res], R.T)
        ans = self._cast(scene, t, dirs)
        z = ans["t_hit"].astype(np.float32)
        gid = ans["geometry_ids"].astype(np.int64)
        miss = ~np.isfinite(z) | (gid >= len(table["instance"]))
        gid = np.where(miss, 0, gid)
        ids = np.where(miss, 0, table["instance"][gid]).astype(np.uint8)
        z = np.where(miss, np.inf, z).astype(np.float32)
        rgb = None
        if res == "full":
            pts = t + dirs * np.where(miss, np.float32(0.0), z)[..., None]
            rgb = to_uint8(self._shade_static(pts, ans["primitive_normals"], gid, table, miss))
        layer = Layer(z=z, ids=ids, rgb=rgb)
        self._bg_cache[ck] = layer
        while len(self._bg_cache) > self.cache_size:  # callers render pose by pose, so a small LRU suffices
            self._bg_cache.popitem(last=False)
        return layer

    def _shade_static(
        self, pts: np.ndarray, normals: np.ndarray, gid: np.ndarray, table: dict, miss: np.ndarray
    ) -> np.ndarray:
        n = normals.astype(np.float32)
        a, b = _planar_coords(pts, n)
        rows = table["rows"][gid]
        mu = a * rows[..., 3]
        mu += rows[..., 4]
        mv = b * rows[..., 3]
        mv += rows[..., 5]
        detail = sample_wrap(self.texture, mu, mv)
        shade = detail * np.float32(0.45)
        shade += np.float32(0.55)
        pattern = rows[..., 6]
        sel = pattern == PATTERN_FLOOR  # 0.6 m floor tiles
        if sel.any():
            x, z = pts[..., 0][sel], pts[..., 2][sel]
            shade[sel] *= 0.78 + 0.22 * ((np.floor(x / 0.6) + np.floor(z / 0.6)) % 2)
        sel = pattern == PATTERN_WALL  # panel seams every 1.2 m and a dado line at 0.9 m
        if sel.any():
            aa, y = a[sel], pts[..., 1][sel]
            seam = (np.abs(((aa + 0.6) % 1.2) - 0.6) < 0.025) | (np.abs(y - 0.9) < 0.03)
            shade[sel] *= np.where(seam, 0.55, 1.0).astype(np.float32)
        sel = pattern == PATTERN_CEILING  # 1 m ceiling grid
        if sel.any():
            x, z = pts[..., 0][sel], pts[..., 2][sel]
            grid = (np.abs(((x + 0.5) % 1.0) - 0.5) < 0.02) | (np.abs(((z + 0.5) % 1.0) - 0.5) < 0.02)
            shade[sel] *= np.where(grid, 0.6, 1.0).astype(np.float32)
        shade *= _lambert(n)
        shade[miss] = 0.0
        return rows[..., :3] * shade[..., None]

    # -- target ---------------------------------------------------------------------------------------
    def target_layer(self, look: TargetLook | None, c2w: np.ndarray, res: str) -> Layer | None:
        """The target alone (None when absent or outside the view); memoised per (look, pose, resolution)."""
        if look is None:
            return None
        ck = ("target", res, np.asarray(c2w, np.float64).tobytes(), look)
        if ck in self._memo:
            return self._memo_get(ck)
        layer = self._target_layer(look, c2w, res)
        self._memo_put(ck, layer)
        return layer

    def _target_layer(self, look: TargetLook, c2w: np.ndarray, res: str) -> Layer | None:
        w, h = self.size[res]
        K = self.K[res]
        R, t = c2w[:3, :3], c2w[:3, 3]
        centre = np.asarray(look.position, np.float64)
        radius = self.target.bound_radius * look.scale
        pc = exact.matmul(R.T, centre - t)
        if pc[2] + radius <= 0.01:
            return None
        if pc[2] - radius > 0.05:  # the projected bounding circle, padded; else cast the whole frame
            rp = K[0, 0] * radius / (pc[2] - radius) + 2.0
            uc, vc = K[0, 0] * pc[0] / pc[2] + K[0, 2], K[1, 1] * pc[1] / pc[2] + K[1, 2]
            x0, x1 = max(math.floor(uc - rp), 0), min(math.ceil(uc + rp) + 1, w)
            y0, y1 = max(math.floor(vc - rp), 0), min(math.ceil(vc + rp) + 1, h)
        else:
            x0, x1, y0, y1 = 0, w, 0, h
        if x0 >= x1 or y0 >= y1:
            return None
        Rt = yaw_matrix(self.target.yaw)
        # world -> canonical target frame: p_local = Rt^T (p - centre) / scale; t_hit stays the world one
        dirs_l = exact.matmul(self._dirs[res][y0:y1, x0:x1], exact.matmul(R.T, Rt) / look.scale)
        origin_l = exact.matmul(Rt.T, t - centre) / look.scale
        ans = self._cast(self._target_scene, origin_l, dirs_l)
        z = ans["t_hit"].astype(np.float32)
        hit = np.isfinite(z)
        if not hit.any():
            return None
        ids = np.where(hit, TARGET_ID, 0).astype(np.uint8)
        rgb = None
        if res == "full":
            local = origin_l + dirs_l * np.where(hit, z, 0.0)[..., None]
            n_local = ans["primitive_normals"].astype(np.float64)
            rgb = self._shade_target(local, n_local, exact.matmul(n_local, Rt.T), look)
        return Layer(z=z, ids=ids, rgb=rgb, x0=x0, y0=y0)

    def _shade_target(
        self, local: np.ndarray, n_local: np.ndarray, n_world: np.ndarray, look: TargetLook
    ) -> np.ndarray:
        d = float(look.drift)
        primary = drifted_primary(look)
        secondary = SECONDARY
        if d > 0:  # appearance drift: hue walks away, the light colour tints, the pattern stretches/shifts
            secondary = (1.0 - 0.6 * d) * SECONDARY + 0.6 * d * np.array([0.25, 0.55, 0.35])
        freq = 1.0 + 0.8 * d
        phase = 0.37 * d
        x, y, z = local[..., 0], local[..., 1], local[..., 2]
        pat = self.target.pattern
        if pat == "striped":
            mark = np.floor((y + 1.0 + phase) * 10.0 * freq) % 2 == 1
        elif pat == "checkered":
            f = 7.0 * freq
            mark = (np.floor(x * f + phase) + np.floor(y * f) + np.floor(z * f)) % 2 == 1
        else:  # dotted: blobs of the detail texture in the object's own coordinates
            a, b = _planar_coords(local, n_local)
            spots = sample_wrap(
                self.texture,
                ((a + phase) * 60.0 * freq + 37.0).astype(np.float32),
                (b * 60.0 * freq + 11.0).astype(np.float32),
            )
            mark = spots > 0.62
        a, b = _planar_coords(local, n_local)
        fine = sample_wrap(
            self.texture, (a * 140.0 + 200.0).astype(np.float32), (b * 140.0 + 90.0).astype(np.float32)
        )
        albedo = np.where(mark[..., None], secondary, primary) * (0.82 + 0.18 * fine)[..., None]
        return (albedo * _lambert(n_world)[..., None]).astype(np.float32)

    # -- compositing ----------------------------------------------------------------------------------
    def composite(self, key: str, c2w: np.ndarray, look: TargetLook | None):
        """Full-resolution (uint8 RGB [H,W,3], instance ids [H,W], z-depth [H,W]) of one frame.

        Memoised: counterfactuals that agree up to the change share their frames.
        """
        ck = ("full", key, np.asarray(c2w, np.float64).tobytes(), look)
        hit = self._memo_get(ck)
        if hit is not None:
            return hit
        bg = self.background(key, c2w, "full")
        tg = self.target_layer(look, c2w, "full")
        rgb, ids, z = bg.rgb, bg.ids, bg.z
        if tg is not None:
            win = tg.window
            front = tg.z < z[win]
            rgb, ids, z = rgb.copy(), ids.copy(), z.copy()
            rgb[win][front] = to_uint8(tg.rgb[front])
            ids[win][front] = tg.ids[front]
            z[win][front] = tg.z[front]
        out = (rgb, ids, z)
        self._memo_put(ck, out)
        return out

    def frame(self, key: str, c2w: np.ndarray, look: TargetLook | None) -> tuple[np.ndarray, np.ndarray]:
        """Full-resolution (uint8 RGB [H,W,3], instance ids [H,W]) of one frame."""
        rgb, ids, _ = self.composite(key, c2w, look)
        return rgb, ids

    def depth(self, key: str, c2w: np.ndarray, look: TargetLook | None) -> np.ndarray:
        """Depth-resolution z-depth [h, w] float32 (metres; inf where nothing was hit)."""
        k = self._depth_step
        if k:
            z = self.composite(key, c2w, look)[2]
            return np.ascontiguousarray(z[k // 2 :: k, k // 2 :: k])
        bg = self.background(key, c2w, "depth")
        tg = self.target_layer(look, c2w, "depth")
        if tg is None:
            return bg.z
        z = bg.z.copy()
        z[tg.window] = np.minimum(z[tg.window], tg.z)
        return z

    def _memo_get(self, key: tuple):
        hit = self._memo.get(key)
        if hit is not None:
            self._memo.move_to_end(key)
        return hit

    def _memo_put(self, key: tuple, value) -> None:
        self._memo[key] = value
        while len(self._memo) > 96:
            self._memo.popitem(last=False)

    def visible_target_pixels(self, look: TargetLook | None, c2w: np.ndarray) -> int:
        """Pixels the target would cover with nothing in front of it (to spot occlusion)."""
        tg = self.target_layer(look, c2w, "full")
        return 0 if tg is None else int((tg.ids == TARGET_ID).sum())


INVALID_ID = np.uint32(0xFFFFFFFF)  # Embree's "no geometry"


class _Scene:
    """An Embree scene and, per geometry, its triangles' float32 corners (n, 3 corners, xyz) with the plane
    of each triangle precomputed in float64: a corner and the unnormalised normal (v1 - v0) x (v2 - v0)."""

    def __init__(self, raycaster, tris: list[np.ndarray]):
        self.raycaster = raycaster
        corners = np.concatenate(tris).astype(np.float64) if tris else np.zeros((0, 3, 3))
        self.offsets = np.cumsum([0] + [len(t) for t in tris[:-1]]).astype(np.int64)
        self.v0 = corners[:, 0]
        e1, e2 = corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]
        n = np.stack([e1[:, 1] * e2[:, 2] - e1[:, 2] * e2[:, 1],
                      e1[:, 2] * e2[:, 0] - e1[:, 0] * e2[:, 2],
                      e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]], -1)
        self.normal = n
        length = np.sqrt(n[:, 0] * n[:, 0] + n[:, 1] * n[:, 1] + n[:, 2] * n[:, 2])
        self.unit = (n / np.where(length > 0, length, 1.0)[:, None]).astype(np.float32)


def exact_hits(scene: _Scene, rays: np.ndarray, ray_ids: np.ndarray, gid: np.ndarray, pid: np.ndarray
               ) -> dict[str, np.ndarray]:
    """Per ray (``rays``: n x 6, float32) the closest of the triangles it crosses (``ray_ids``, ``gid``,
    ``pid``: one entry per crossing, in any order): ``t_hit`` (inf on a miss), ``geometry_ids`` and
    ``primitive_normals``. Distances are computed in separate IEEE operations in a fixed order (float64 from
    the float32 rays and corners, rounded to float32 once); the closest is the least distance, then the least
    geometry id, then the least triangle id: the same bits and the same choice on every CPU. A crossing
    parallel to the triangle's plane or behind the origin does not count."""
    n = len(rays)
    ray_ids = np.asarray(ray_ids, np.int64)
    gid = np.asarray(gid, np.int64)
    pid = np.asarray(pid, np.int64)
    tri = scene.offsets[gid] + pid if len(gid) else np.zeros(0, np.int64)
    r = np.asarray(rays, np.float32).astype(np.float64)[ray_ids]
    v0, nrm = scene.v0[tri], scene.normal[tri]
    num = (v0[:, 0] - r[:, 0]) * nrm[:, 0] + (v0[:, 1] - r[:, 1]) * nrm[:, 1] + (v0[:, 2] - r[:, 2]) * nrm[:, 2]
    den = r[:, 3] * nrm[:, 0] + r[:, 4] * nrm[:, 1] + r[:, 5] * nrm[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = num / den
    ok = np.isfinite(t) & (t > 0)
    ray_ids, gid, tri, t = ray_ids[ok], gid[ok], tri[ok], t[ok]
    order = np.lexsort((tri, gid, t, ray_ids))  # by ray, then distance, geometry, triangle
    first = order[np.r_[True, ray_ids[order][1:] != ray_ids[order][:-1]]] if len(order) else order
    hit_ray = ray_ids[first]
    t_hit = np.full(n, np.inf, np.float32)
    t_hit[hit_ray] = t[first].astype(np.float32)
    geometry = np.full(n, INVALID_ID, np.uint32)
    geometry[hit_ray] = gid[first].astype(np.uint32)
    normals = np.zeros((n, 3), np.float32)
    normals[hit_ray] = scene.unit[tri[first]]
    return {"t_hit": t_hit, "geometry_ids": geometry, "primitive_normals": normals}


def _planar_coords(p: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """2-D texture coordinates: drop the axis the surface normal points along most."""
    ax = np.argmax(np.abs(n), axis=-1)
    a = np.where(ax == 0, p[..., 2], p[..., 0])
    b = np.where(ax == 1, p[..., 2], p[..., 1])
    return a, b


def _lambert(n: np.ndarray) -> np.ndarray:
    return (0.42 + 0.58 * np.clip(exact.matmul(n, LIGHT.astype(n.dtype)), 0.0, None)).astype(n.dtype)


def to_uint8(rgb: np.ndarray) -> np.ndarray:
    """Float RGB in [0, 1] -> uint8 with rounding."""
    return np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8)
