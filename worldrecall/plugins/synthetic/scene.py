"""What a synthetic scene is made of: a closed textured room, static props and one target object.

Everything here is plain data plus open3d mesh construction; rendering lives in ``render.py``. Meshes are
built in world coordinates (Y up, floor at y = 0) except the target's, which is canonical (centred at the
origin, unit scale) because the target moves and changes size: the renderer maps rays into its frame.
"""

from __future__ import annotations

import colorsys
import math
from dataclasses import dataclass, field, replace

import numpy as np

from worldrecall.numerics import exact

# The OPIS quick-start palette (nearest-colour attribute names); renders use these albedos.
PALETTE: dict[str, tuple[int, int, int]] = {
    "black": (20, 20, 20),
    "white": (235, 235, 235),
    "gray": (128, 128, 128),
    "red": (210, 45, 45),
    "green": (55, 160, 70),
    "blue": (55, 100, 210),
    "yellow": (220, 200, 40),
    "orange": (225, 125, 35),
    "brown": (125, 80, 45),
    "purple": (145, 80, 175),
}
TARGET_COLOURS = ("red", "blue", "green", "yellow", "orange", "purple")
PROP_COLOURS = ("brown", "gray", "white", "black")

ROOM_HALF = 7.0  # the room spans [-7, 7] m in x and z
ROOM_HEIGHT = 3.0
WALL = 0.2  # slab thickness

SCENES = ("Atrium", "Gallery", "Workshop", "Depot")
# per scene: floor, wall, ceiling albedo (0-1) — each scene is one "environment" with many clips
SCENE_STYLE: dict[str, tuple[tuple[float, float, float], ...]] = {
    "Atrium": ((0.62, 0.55, 0.45), (0.80, 0.76, 0.66), (0.86, 0.86, 0.82)),
    "Gallery": ((0.45, 0.42, 0.40), (0.88, 0.88, 0.86), (0.92, 0.92, 0.90)),
    "Workshop": ((0.40, 0.44, 0.46), (0.60, 0.66, 0.70), (0.78, 0.78, 0.76)),
    "Depot": ((0.52, 0.50, 0.44), (0.72, 0.62, 0.52), (0.80, 0.78, 0.74)),
}

# surface pattern codes the renderer understands
PATTERN_PLAIN, PATTERN_FLOOR, PATTERN_WALL, PATTERN_CEILING = 0, 1, 2, 3

TARGET_SHAPES = ("ball", "cube", "drum", "cone")
TARGET_PATTERNS = ("striped", "checkered", "dotted")
PROP_KINDS = ("crate", "pillar", "stool", "pot", "shelf", "bench")


def rgb(name: str) -> np.ndarray:
    """Palette colour as float RGB in [0, 1]."""
    return np.asarray(PALETTE[name], dtype=np.float64) / 255.0


def nearest_colour(c: np.ndarray) -> str:
    """Name of the palette colour nearest to ``c`` (0-255 or 0-1 RGB, judged on the 0-255 scale)."""
    c = np.asarray(c, dtype=np.float64)
    if c.max() <= 1.0:
        c = c * 255.0
    return min(PALETTE, key=lambda k: float(np.sum((np.asarray(PALETTE[k]) - c) ** 2)))


def hue_shift(c: np.ndarray, degrees: float) -> np.ndarray:
    """Rotate an RGB colour's hue (keeps saturation and value)."""
    h, s, v = colorsys.rgb_to_hsv(*[float(x) for x in c])
    return np.asarray(colorsys.hsv_to_rgb((h + degrees / 360.0) % 1.0, s, v))


@dataclass(frozen=True)
class Surface:
    """Material of one raycast geometry: albedo, texture scale/offset, pattern and instance id (0 = room)."""

    colour: tuple[float, float, float]
    texel: float  # metres per detail-texture pixel
    offset: tuple[float, float]
    pattern: int = PATTERN_PLAIN
    instance: int = 0


@dataclass(frozen=True)
class Prop:
    """A static prop standing on the floor."""

    kind: str
    colour: str
    x: float
    z: float
    size: tuple[float, float, float]  # width, height, depth (m); radius = width / 2 for round ones
    yaw: float
    instance: int

    @property
    def phrase(self) -> str:
        return f"{self.colour} {self.kind}"

    @property
    def radius(self) -> float:
        """Footprint radius (for spacing and sight-line checks)."""
        w, _, d = self.size
        return 0.5 * float(np.hypot(w, d)) if self.kind in ("crate", "shelf", "bench") else 0.5 * w

    @property
    def height(self) -> float:
        return self.size[1]

    def moved(self, x: float, z: float, colour: str) -> Prop:
        return replace(self, x=float(x), z=float(z), colour=colour)

    def mesh(self):
        """Legacy open3d mesh in world coordinates."""
        w, h, d = self.size
        shape = {
            "crate": "box",
            "shelf": "box",
            "bench": "box",
            "pillar": "cylinder",
            "stool": "cylinder",
            "pot": "sphere",
        }[self.kind]
        m = canonical_mesh(shape, (w, h, d))
        m.rotate(_yaw_matrix(self.yaw), center=(0.0, 0.0, 0.0))
        m.translate((self.x, h / 2.0, self.z))
        return m


@dataclass(frozen=True)
class TargetSpec:
    """The remembered object: shape, surface pattern and canonical size (scaled by its state)."""

    shape: str
    pattern: str
    yaw: float

    @property
    def noun(self) -> str:
        return self.shape

    @property
    def phrase(self) -> str:
        return f"{self.pattern} {self.shape}"

    @property
    def dims(self) -> tuple[float, float, float]:
        return {
            "ball": (0.6, 0.6, 0.6),
            "cube": (0.55, 0.55, 0.55),
            "drum": (0.56, 0.62, 0.56),
            "cone": (0.64, 0.72, 0.64),
        }[self.shape]

    @property
    def height(self) -> float:
        return self.dims[1]

    @property
    def bound_radius(self) -> float:
        """Radius of a sphere around the canonical mesh (centred at the bbox centre)."""
        return 0.5 * exact.norm(self.dims)

    def mesh(self):
        mesh_shape = {"ball": "sphere", "cube": "box", "drum": "cylinder", "cone": "cone"}[self.shape]
        return canonical_mesh(mesh_shape, self.dims)


@dataclass
class RoomLayout:
    """The static world of one scene variant: room slabs plus props, with one Surface per geometry."""

    scene: str
    props: list[Prop]
    surfaces: list[Surface] = field(default_factory=list)

    def meshes(self, rng_offsets: np.ndarray, prop_texel: float = 0.012) -> list:
        """Legacy meshes in raycast order (room slabs first); fills :attr:`surfaces` to match."""
        import open3d as o3d

        floor_c, wall_c, ceil_c = SCENE_STYLE[self.scene]
        H, R, T = ROOM_HEIGHT, ROOM_HALF, WALL
        slabs = [  # (min corner, size, colour, pattern)
            ((-R - T, -T, -R - T), (2 * R + 2 * T, T, 2 * R + 2 * T), floor_c, PATTERN_FLOOR),
            ((-R - T, H, -R - T), (2 * R + 2 * T, T, 2 * R + 2 * T), ceil_c, PATTERN_CEILING),
            ((R, 0.0, -R - T), (T, H, 2 * R + 2 * T), wall_c, PATTERN_WALL),
            ((-R - T, 0.0, -R - T), (T, H, 2 * R + 2 * T), tuple(0.93 * c for c in wall_c), PATTERN_WALL),
            ((-R, 0.0, R), (2 * R, H, T), tuple(0.97 * c for c in wall_c), PATTERN_WALL),
            ((-R, 0.0, -R - T), (2 * R, H, T), tuple(0.90 * c for c in wall_c), PATTERN_WALL),
        ]
        meshes, surfaces = [], []
        for k, (lo, size, colour, pattern) in enumerate(slabs):
            m = o3d.geometry.TriangleMesh.create_box(*size)
            m.translate(lo)
            meshes.append(m)
            surfaces.append(Surface(tuple(colour), 0.03, tuple(rng_offsets[k]), pattern, 0))
        for j, p in enumerate(self.props):
            meshes.append(p.mesh())
            surfaces.append(
                Surface(
                    tuple(rgb(p.colour)), prop_texel, tuple(rng_offsets[6 + j]), PATTERN_PLAIN, p.instance
                )
            )
        self.surfaces = surfaces
        return meshes


def _yaw_matrix(deg: float) -> np.ndarray:
    # math, not numpy: numpy's float64 sin/cos take a different (vectorised) path on AVX-512 CPUs
    a = math.radians(deg)
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def yaw_matrix(deg: float) -> np.ndarray:
    """Rotation about the world Y axis (used for the target's orientation)."""
    return _yaw_matrix(deg)


_Z_TO_Y = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])  # open3d builds along +z


def canonical_mesh(shape: str, dims: tuple[float, float, float]):
    """A legacy open3d mesh centred at the origin, Y up, with bounding box ``dims`` (w, h, d)."""
    import open3d as o3d

    w, h, d = dims
    if shape == "box":
        m = o3d.geometry.TriangleMesh.create_box(w, h, d)
        m.translate((-w / 2, -h / 2, -d / 2))
    elif shape == "sphere":
        m = o3d.geometry.TriangleMesh.create_sphere(radius=w / 2, resolution=14)
        v = np.asarray(m.vertices)
        v[:, 1] *= h / w  # squash/stretch into an ellipsoid when h != w
        m.vertices = o3d.utility.Vector3dVector(v)
    elif shape == "cylinder":
        m = o3d.geometry.TriangleMesh.create_cylinder(radius=w / 2, height=h, resolution=24, split=1)
        m.rotate(_Z_TO_Y, center=(0, 0, 0))
    elif shape == "cone":
        m = o3d.geometry.TriangleMesh.create_cone(radius=w / 2, height=h, resolution=24, split=1)
        m.rotate(_Z_TO_Y, center=(0, 0, 0))
        m.translate((0.0, -h / 2, 0.0))
    else:
        raise ValueError(f"unknown mesh shape {shape!r}")
    return m
