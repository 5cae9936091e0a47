"""One case's story: camera program, target, what happens to the target while unseen, props, prompt.

Planning is rejection sampling from a per-case seed. Cheap bounding-sphere frustum tests choose a change
window that lies inside the target's hidden interval; the builder then renders the GT clip and checks the
exit/re-enter annotations on the real instance masks (``annotate.py``), asking for the next attempt when
they disagree with the plan. Times are in GT frame units, ``t`` in ``[0, G - 1]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from worldrecall.numerics import exact
from worldrecall.plugins.synthetic.programs import (
    PROGRAMS,
    CameraProgram,
    describe,
    heading,
    make_program,
    right_of,
)
from worldrecall.plugins.synthetic.render import TargetLook, intrinsics
from worldrecall.plugins.synthetic.scene import (
    PROP_COLOURS,
    PROP_KINDS,
    SCENES,
    TARGET_COLOURS,
    TARGET_PATTERNS,
    TARGET_SHAPES,
    Prop,
    TargetSpec,
    rgb,
)

CHANGE_KINDS = ("move", "recolour", "resize", "move_recolour")
ROOM_LIMIT = 6.0  # targets and props stay inside [-6, 6] m
CAMERA_LIMIT = 6.3


class PlanRejected(Exception):
    """This attempt's random draw does not give a clean revisit; the builder tries the next one."""


def smoothstep(x: float) -> float:
    x = min(max(x, 0.0), 1.0)
    return x * x * (3.0 - 2.0 * x)


@dataclass
class TargetTimeline:
    """The target's true state over time: it changes only inside ``[t_a, t_b]`` (while hidden)."""

    spec: TargetSpec
    kind: str
    p0: tuple[float, float]
    p1: tuple[float, float]
    scale0: float
    scale1: float
    colour0: str
    colour1: str
    t_a: float
    t_b: float
    teleport: tuple[float, float]

    @property
    def moves(self) -> bool:
        return "move" in self.kind

    @property
    def recolours(self) -> bool:
        return "recolour" in self.kind

    @property
    def resizes(self) -> bool:
        return self.kind == "resize"

    def progress(self, t: float) -> float:
        return smoothstep((t - self.t_a) / max(self.t_b - self.t_a, 1e-9))

    def centre(self, xz: tuple[float, float] | np.ndarray, scale: float) -> tuple[float, float, float]:
        """Bbox centre of the target standing on the floor at ``xz`` with ``scale``."""
        return (float(xz[0]), self.spec.height * scale / 2.0, float(xz[1]))

    def xz(self, t: float) -> np.ndarray:
        u = self.progress(t)
        return (1 - u) * np.asarray(self.p0) + u * np.asarray(self.p1)

    def scale(self, t: float) -> float:
        u = self.progress(t)
        return (1 - u) * self.scale0 + u * self.scale1

    def colour(self, t: float) -> np.ndarray:
        u = self.progress(t)
        return (1 - u) * rgb(self.colour0) + u * rgb(self.colour1)

    def look(self, t: float, *, xz: np.ndarray | None = None, drift: float = 0.0) -> TargetLook:
        """The true look at ``t`` (optionally at another floor position, or with appearance drift)."""
        s = self.scale(t)
        pos = self.xz(t) if xz is None else xz
        return TargetLook(self.centre(pos, s), s, tuple(float(c) for c in self.colour(t)), drift)


@dataclass
class CaseStory:
    """Everything that defines one case before rendering."""

    index: int
    scene: str
    clip: int
    program: CameraProgram
    wrong: CameraProgram
    wrong_factor: float
    target: TargetTimeline
    props: list[Prop]
    props_moved: list[Prop]
    moved_ids: list[int]
    offsets: np.ndarray  # texture offsets per raycast geometry
    gt_frames: int
    gen_frames: int
    attempt: int = 0
    t_return: float | None = None  # GT frame of the full re-entry, set from the GT masks

    @property
    def case_id(self) -> str:
        return f"{self.scene}_{self.clip:03d}"

    @property
    def duration(self) -> float:
        return float(self.gt_frames - 1)

    def gen_times(self) -> np.ndarray:
        """GT time shown by each generated frame: i * (G - 1) / (N - 1)."""
        N = self.gen_frames
        return np.arange(N, dtype=np.float64) * (self.gt_frames - 1) / max(N - 1, 1)

    def instances(self) -> dict[int, str]:
        """Instance id -> phrase (1 = target)."""
        out = {1: self.target.spec.phrase}
        out.update({p.instance: p.phrase for p in self.props})
        return out

    # -- text ----------------------------------------------------------------------------------------
    def move_direction(self) -> str:
        d = np.asarray(self.target.p1) - np.asarray(self.target.p0)
        r = right_of(self.program.yaw0)
        return "right" if exact.matmul(d, r[[0, 2]]) > 0 else "left"

    def change_sentence(self) -> str:
        tl, noun = self.target, self.target.spec.noun
        parts = []
        if tl.moves:
            dist = exact.norm(np.asarray(tl.p1) - np.asarray(tl.p0))
            parts.append(f"slides about {dist:.1f} m to the {self.move_direction()}")
        if tl.recolours:
            parts.append(f"changes colour from {tl.colour0} to {tl.colour1}")
        if tl.resizes:
            verb = "grows" if tl.scale1 > tl.scale0 else "shrinks"
            parts.append(f"{verb} to about {tl.scale1 / tl.scale0:.1f} times its size")
        return f"While it is out of view, the {noun} " + " and ".join(parts) + "."

    def prompt(self) -> str:
        """Generation prompt in the official style: '... sees <phrase>(subject) <where>. ...'."""
        tl = self.target
        noun = tl.spec.noun
        where = "standing still" if self.program.name in ("pan", "tilt", "double_yaw") else "walking slowly"
        return (
            f"First person view of a person {where} in the {self.scene.lower()} hall who sees a "
            f"{tl.spec.phrase}(subject) on the floor ahead. The {noun} is {tl.colour0} at first. "
            f"{describe(self.program, noun)}. {self.change_sentence()} "
            f"The camera re-sees the {noun} in its FOV at the end."
        )

    def description(self) -> str:
        return f"a {self.target.colour0} {self.target.spec.phrase}"


# -- visibility by bounding sphere -------------------------------------------------------------------
def sphere_view(c2w: np.ndarray, K: np.ndarray, size: tuple[int, int], centre, radius: float) -> str:
    """'in' (fully inside the image), 'out' (fully outside the frustum) or 'partial'."""
    w, h = size
    pc = exact.matmul(c2w[:3, :3].T, np.asarray(centre, np.float64) - c2w[:3, 3])
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    planes = np.array(
        [[fx, 0.0, cx + 0.5], [-fx, 0.0, w - 0.5 - cx], [0.0, fy, cy + 0.5], [0.0, -fy, h - 0.5 - cy]]
    )
    planes /= np.linalg.norm(planes, axis=1, keepdims=True)
    dist = np.append(exact.matmul(planes, pc), pc[2] - 0.05)
    if (dist < -radius).any():
        return "out"
    if (dist > radius * 1.08).all():
        return "in"
    return "partial"


def _seg_dist(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    ab = b - a
    u = float(np.clip(exact.matmul(p - a, ab) / max(exact.matmul(ab, ab), 1e-12), 0.0, 1.0))
    return exact.norm(p - (a + u * ab))


def plan_case(
    index: int, seed: int, attempt: int, *, width: int, height: int, gt_frames: int, gen_frames: int
) -> CaseStory:
    """Draw case ``index`` (attempt ``attempt``); raises :class:`PlanRejected` when the draw is unusable.

    The helpers draw from one generator in a fixed order (program, wrong factor, target, positions,
    teleport, props, texture offsets): the same seed gives the same case.
    """
    rng = np.random.default_rng(np.random.SeedSequence([seed, index, attempt]))
    G = gt_frames
    duration = float(G - 1)
    name = PROGRAMS[index % len(PROGRAMS)]
    program = make_program(name, rng, duration)
    if name == "tilt":
        factor = float(rng.choice([0.5, 1.25]))
    else:
        factor = float(rng.choice([0.5, 1.6]))
    wrong = program.wrong(factor)
    K = intrinsics(width, height)
    size = (width, height)
    _check_cameras_in_room(program, wrong, duration)

    spec, kind, colour0, colour1, scale1 = _draw_target(rng, index)
    p0, p1 = _target_positions(rng, program, name, kind)
    gt_poses = program.poses(np.arange(G, dtype=np.float64))
    end = gt_poses[-1]

    def view(pose, xz, scale):
        c = (float(xz[0]), spec.height * scale / 2.0, float(xz[1]))
        return sphere_view(pose, K, size, c, spec.bound_radius * scale)

    if view(gt_poses[0], p0, 1.0) != "in":
        raise PlanRejected("target not fully in the first frame")
    if view(end, p1, scale1) != "in":
        raise PlanRejected("changed target not fully in view at the end")
    t_a, t_b = _change_window(view, gt_poses, p0, p1, scale1)
    teleport = _teleport_destination(rng, view, end, p1, scale1)
    tl = TargetTimeline(
        spec=spec,
        kind=kind,
        p0=tuple(map(float, p0)),
        p1=tuple(map(float, p1)),
        scale0=1.0,
        scale1=scale1,
        colour0=colour0,
        colour1=colour1,
        t_a=float(t_a),
        t_b=float(t_b),
        teleport=tuple(map(float, teleport)),
    )
    # the target must stay unseen while it changes (also on its teleport path)
    for g in range(math.floor(t_a), math.ceil(t_b) + 1):
        for xz in (tl.xz(g), (1 - tl.progress(g)) * np.asarray(p0) + tl.progress(g) * teleport):
            if view(gt_poses[g], xz, tl.scale(g)) != "out":
                raise PlanRejected("target visible while changing")

    props, props_moved, moved_ids = _place_props(rng, program, wrong, tl, gt_poses, K, size)
    offsets = rng.uniform(0, 512, size=(6 + len(props), 2))
    scene = SCENES[index % len(SCENES)]
    clip = index // len(SCENES) + 1
    return CaseStory(
        index=index,
        scene=scene,
        clip=clip,
        program=program,
        wrong=wrong,
        wrong_factor=factor,
        target=tl,
        props=props,
        props_moved=props_moved,
        moved_ids=moved_ids,
        offsets=offsets,
        gt_frames=G,
        gen_frames=gen_frames,
        attempt=attempt,
    )


def _check_cameras_in_room(program: CameraProgram, wrong: CameraProgram, duration: float) -> None:
    """Both camera programs (the true one and the wrong one) must stay inside the room."""
    times = np.linspace(0.0, duration, 49)
    cam_xz = np.array([[p.pose(t)[0, 3], p.pose(t)[2, 3]] for p in (program, wrong) for t in times])
    if np.abs(cam_xz).max() > CAMERA_LIMIT:
        raise PlanRejected("camera leaves the room")


def _draw_target(rng: np.random.Generator, index: int) -> tuple[TargetSpec, str, str, str, float]:
    """The target's shape and pattern, its change kind, start / end colour and end scale."""
    spec = TargetSpec(
        TARGET_SHAPES[int(rng.integers(len(TARGET_SHAPES)))],
        TARGET_PATTERNS[int(rng.integers(len(TARGET_PATTERNS)))],
        float(rng.uniform(0, 90)),
    )
    kind = CHANGE_KINDS[(index // len(PROGRAMS) + index) % len(CHANGE_KINDS)]
    colours = list(TARGET_COLOURS)
    colour0 = colours.pop(int(rng.integers(len(colours))))
    colour1 = colours[int(rng.integers(len(colours)))] if "recolour" in kind else colour0
    scale1 = float(rng.choice([1.6, 0.6])) if kind == "resize" else 1.0
    return spec, kind, colour0, colour1, scale1


def _target_positions(rng: np.random.Generator, program: CameraProgram, name: str,
                      kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Floor positions (x, z) of the target before and after its change, ahead of the opening view."""
    pos0 = np.asarray(program.start)
    h0, r0 = heading(program.yaw0)[[0, 2]], right_of(program.yaw0)[[0, 2]]
    if name == "dolly":
        d, lat = rng.uniform(2.2, 2.8), rng.choice([-1.0, 1.0]) * rng.uniform(0.45, 0.7)
    elif name == "u_turn":
        turn_side = 1.0 if "pan_right" in program.tokens else -1.0
        d, lat = rng.uniform(2.8, 3.4), turn_side * rng.uniform(0.8, 1.1)
    else:
        d = rng.uniform(2.6, 3.4)
        lat = d * math.tan(math.radians(rng.uniform(-8.0, 8.0)))
    p0 = pos0[[0, 2]] + d * h0 + lat * r0
    if "move" in kind:
        # mostly towards the middle of the opening view, so the moved target is still in view there
        toward = -1.0 if lat > 0 else 1.0
        sign = toward if rng.random() < 0.8 else -toward
        p1 = p0 + sign * rng.uniform(0.7, 1.1) * r0 + rng.uniform(-0.3, 0.3) * h0
    else:
        p1 = p0.copy()
    if np.abs(np.concatenate([p0, p1])).max() > ROOM_LIMIT:
        raise PlanRejected("target outside the room")
    return p0, p1


def _change_window(view: Callable[..., str], gt_poses: np.ndarray, p0: np.ndarray, p1: np.ndarray,
                   scale1: float) -> tuple[float, float]:
    """``[t_a, t_b]``: the middle 40 % of the first interval in which the target (before and after) is hidden."""
    G = len(gt_poses)
    hidden = np.array([view(P, p0, 1.0) == "out" and view(P, p1, scale1) == "out" for P in gt_poses])
    first = int(np.argmax(hidden)) if hidden.any() else -1
    if first <= 0:
        raise PlanRejected("target never hidden")
    last = first
    while last + 1 < G and hidden[last + 1]:
        last += 1
    if last - first < 2 or last >= G - 2:
        raise PlanRejected("hidden interval too short or too late")
    return first + 0.3 * (last - first), first + 0.7 * (last - first)


def _teleport_destination(rng: np.random.Generator, view: Callable[..., str], end: np.ndarray, p1: np.ndarray,
                          scale1: float) -> np.ndarray:
    """Somewhere else for the teleporting model's target: in view at the end, inside the room."""
    r_end = end[:3, 0][[0, 2]]
    f_end = end[:3, 2][[0, 2]]
    f_end = f_end / max(exact.norm(f_end), 1e-9)
    for off in rng.permutation([1.1, -1.1, 1.4, -1.4, 0.9, -0.9]):
        cand = p1 + off * r_end / max(exact.norm(r_end), 1e-9) + rng.uniform(-0.3, 0.3) * f_end
        if np.abs(cand).max() > ROOM_LIMIT or exact.norm(cand - p1) < 0.85:
            continue
        if view(end, cand, scale1) == "in":
            return cand
    raise PlanRejected("no visible teleport destination")


def _place_props(
    rng: np.random.Generator,
    program: CameraProgram,
    wrong: CameraProgram,
    tl: TargetTimeline,
    gt_poses: np.ndarray,
    K: np.ndarray,
    size: tuple[int, int],
):
    """Two props in the final view (the ones the hallucinating model moves) plus six elsewhere."""
    placer = _PropPlacer(rng, program, wrong, tl, gt_poses)
    # props in the *final* view (the opening view again, except after a U-turn): the hallucinating model
    # moves these, so the change is on screen after the return
    end = gt_poses[-1]
    r_v = end[[0, 2], 0] / max(exact.norm(end[[0, 2], 0]), 1e-9)
    placer.place_in_final_view(end)
    props = placer.props
    in_view = list(props)
    placer.scatter(len(in_view) + 6)
    if not in_view:
        raise PlanRejected("no prop fits in the final view")
    # the hallucinated background: every prop seen in the final view jumps sideways and takes a vivid colour
    for p in props:
        if (
            p not in in_view
            and sphere_view(end, K, size, (p.x, p.height / 2, p.z), float(np.hypot(p.radius, p.height / 2)))
            != "out"
        ):
            in_view.append(p)
    vivid = [c for c in TARGET_COLOURS if c not in (tl.colour0, tl.colour1)]
    moved = {p.instance: p for p in props}
    for p in in_view:
        colour = vivid[int(rng.integers(len(vivid)))]
        placed = None
        for shift in rng.permutation([1.8, -1.8, 2.2, -2.2, 1.4, -1.4]):
            xz = np.array([p.x, p.z]) + shift * r_v
            cand = p.moved(xz[0], xz[1], colour)
            if placer.ok(cand, list(moved.values())):
                placed = cand
                break
        moved[p.instance] = placed if placed is not None else p.moved(p.x, p.z, colour)
    props_moved = [moved[p.instance] for p in props]
    return props, props_moved, [p.instance for p in in_view]


class _PropPlacer:
    """Draws props one at a time, clear of the cameras, the target's places and the sight lines to them.

    Holds the props placed so far (their instance ids follow the target's: 2, 3, …) and their phrases,
    which stay unique so every question can name a prop unambiguously.
    """

    def __init__(self, rng: np.random.Generator, program: CameraProgram, wrong: CameraProgram,
                 tl: TargetTimeline, gt_poses: np.ndarray):
        self.rng = rng
        self.tl = tl
        times = np.linspace(0.0, program.duration, 61)
        self.cams = np.array([[p.pose(t)[0, 3], p.pose(t)[2, 3]] for p in (program, wrong) for t in times])
        self.targets = [np.asarray(tl.p0), np.asarray(tl.p1), np.asarray(tl.teleport)]
        self.t_rad = tl.spec.bound_radius * max(tl.scale0, tl.scale1)
        # sight lines that must stay clear: start camera -> p0, end camera -> p1 / teleport
        c0, c1 = gt_poses[0][[0, 2], 3], gt_poses[-1][[0, 2], 3]
        self.lines = [(c0, self.targets[0]), (c1, self.targets[1]), (c1, self.targets[2])]
        self.props: list[Prop] = []
        self.used_phrases: set[str] = set()

    def ok(self, p: Prop, others: list[Prop] | None = None) -> bool:
        """``p`` fits: inside the room, off the camera paths, targets and sight lines, apart from ``others``."""
        xz = np.array([p.x, p.z])
        targets, t_rad = self.targets, self.t_rad
        if np.abs(xz).max() + p.radius > ROOM_LIMIT + 0.6:
            return False
        if np.min(np.linalg.norm(self.cams - xz, axis=1)) < p.radius + 0.7:
            return False
        if any(exact.norm(xz - t) < p.radius + t_rad + 0.35 for t in targets):
            return False
        if _seg_dist(xz, targets[0], targets[1]) < p.radius + t_rad + 0.2:
            return False
        if any(_seg_dist(xz, a, b) < p.radius + t_rad + 0.15 for a, b in self.lines):
            return False
        return all(
            np.hypot(p.x - q.x, p.z - q.z) > p.radius + q.radius + 0.25
            for q in (self.props if others is None else others)
            if q.instance != p.instance
        )

    def draw(self, kind: str, colour: str, x: float, z: float, big: bool = False) -> Prop:
        """A prop of ``kind`` at (x, z) with drawn size and yaw (the next instance id)."""
        rng = self.rng
        crate = rng.uniform(0.8, 1.0) if big else rng.uniform(0.5, 0.8)
        dims = {
            "crate": (crate,) * 3,
            "pillar": (0.36, rng.uniform(2.0, 2.6), 0.36),
            "stool": (0.6, 0.45, 0.6),
            "pot": (0.62, 0.62, 0.62),
            "shelf": (1.2, 1.5, 0.4),
            "bench": (1.4, 0.45, 0.5),
        }[kind]
        return Prop(
            kind,
            colour,
            float(x),
            float(z),
            tuple(float(v) for v in dims),
            float(rng.uniform(0, 90)),
            2 + len(self.props),
        )

    def new_kind_colour(self) -> tuple[str, str]:
        """A (kind, colour) whose phrase no placed prop has yet."""
        rng = self.rng
        for _ in range(50):
            kind = PROP_KINDS[int(rng.integers(len(PROP_KINDS)))]
            colour = PROP_COLOURS[int(rng.integers(len(PROP_COLOURS)))]
            if f"{colour} {kind}" not in self.used_phrases:
                return kind, colour
        raise PlanRejected("ran out of prop names")

    def add(self, p: Prop) -> None:
        self.props.append(p)
        self.used_phrases.add(p.phrase)

    def place_in_final_view(self, end: np.ndarray) -> None:
        """One big prop on each side behind the target in the final view (``end`` pose), if one fits."""
        rng, tl = self.rng, self.tl
        pos_v = end[[0, 2], 3]
        h_v = end[[0, 2], 2] / max(exact.norm(end[[0, 2], 2]), 1e-9)
        r_v = end[[0, 2], 0] / max(exact.norm(end[[0, 2], 0]), 1e-9)
        d_t = exact.norm(np.asarray(tl.p1) - pos_v)
        for side in (-1.0, 1.0):  # big ones, behind the target, so a moved one is a large share of the view
            for _ in range(30):
                kind, colour = self.new_kind_colour()
                if kind not in ("shelf", "crate", "bench"):
                    continue
                ang = math.radians(side * rng.uniform(14.0, 22.0))
                dist = d_t + rng.uniform(1.2, 2.4)
                xz = pos_v + dist * (math.cos(ang) * h_v + math.sin(ang) * r_v)
                p = self.draw(kind, colour, xz[0], xz[1], big=True)
                if self.ok(p):
                    self.add(p)
                    break

    def scatter(self, total: int) -> None:
        """Props anywhere in the room until there are ``total`` (at most 400 draws)."""
        tries = 0
        while len(self.props) < total and tries < 400:
            tries += 1
            kind, colour = self.new_kind_colour()
            xz = self.rng.uniform(-ROOM_LIMIT, ROOM_LIMIT, size=2)
            p = self.draw(kind, colour, xz[0], xz[1])
            if self.ok(p):
                self.add(p)
