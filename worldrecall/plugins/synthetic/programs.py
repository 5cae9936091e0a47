"""Camera programs of the synthetic revisit suite: twelve equal slots of action tokens -> c2w poses.

A program is a list of :class:`Slot` s (one action token each, e.g. ``pan_right``) spread evenly over the
GT time axis ``[0, duration]``. Within a slot the camera turns and moves at constant rates, so the pose at
any (fractional) time has a closed form and GT frames and generated frames sample the same path.

World frame: Y up, floor at y = 0. Camera axes are OpenCV's (x right, y down, z forward); a c2w matrix's
rotation columns are the camera's right, down and forward vectors in world coordinates.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from worldrecall.numerics import exact

SLOTS = 12
PROGRAMS = ("pan", "tilt", "u_turn", "dolly", "double_yaw")

UP = np.array([0.0, 1.0, 0.0])
FORWARD0 = np.array([0.0, 0.0, 1.0])  # heading at yaw 0
RIGHT0 = np.array([-1.0, 0.0, 0.0])  # right-hand side at yaw 0 (right x down = forward)

# Token inverses as in the memory-loop itineraries (used to describe a program's return leg)
INVERSE = {
    "pan_right": "pan_left",
    "pan_left": "pan_right",
    "tilt_up": "tilt_down",
    "tilt_down": "tilt_up",
    "push_in": "pull_out",
    "pull_out": "push_in",
    "fixed": "fixed",
}


@dataclass(frozen=True)
class Slot:
    """One action slot: degrees turned right, degrees tilted up, metres moved along the heading."""

    token: str
    yaw: float = 0.0
    pitch: float = 0.0
    forward: float = 0.0


@dataclass(frozen=True)
class CameraProgram:
    """A camera path: start pose plus slots evenly spread over ``[0, duration]`` (GT frame units)."""

    name: str
    slots: tuple[Slot, ...]
    start: tuple[float, float, float]
    yaw0: float  # degrees, positive = turned right of +Z
    pitch0: float  # degrees, positive = looking up
    duration: float

    @property
    def tokens(self) -> list[str]:
        return [s.token for s in self.slots]

    @property
    def slot_length(self) -> float:
        return self.duration / len(self.slots)

    @functools.cached_property
    def _slot_starts(self) -> list[tuple[np.ndarray, float, float]]:
        """(position, yaw, pitch) at the start of each slot."""
        pos = np.array(self.start, dtype=np.float64)
        yaw, pitch = self.yaw0, self.pitch0
        out = []
        for s in self.slots:
            out.append((pos, yaw, pitch))
            pos = pos + _arc(yaw, s.yaw, s.forward)
            yaw += s.yaw
            pitch += s.pitch
        out.append((pos, yaw, pitch))
        return out

    def state(self, t: float) -> tuple[np.ndarray, float, float]:
        """(position, yaw, pitch) at time ``t`` (clamped to the program's span)."""
        t = min(max(float(t), 0.0), self.duration)
        L = self.slot_length
        k = min(int(t // L), len(self.slots) - 1)
        frac = (t - k * L) / L
        pos, yaw, pitch = self._slot_starts[k]
        s = self.slots[k]
        return pos + _arc(yaw, s.yaw * frac, s.forward * frac), yaw + s.yaw * frac, pitch + s.pitch * frac

    def pose(self, t: float) -> np.ndarray:
        """4x4 camera-to-world (OpenCV axes) at time ``t``."""
        pos, yaw, pitch = self.state(t)
        return c2w_from(pos, yaw, pitch)

    def poses(self, times: np.ndarray) -> np.ndarray:
        """[n, 4, 4] c2w at each time."""
        return np.stack([self.pose(t) for t in np.asarray(times, dtype=np.float64)])

    def frozen(self) -> CameraProgram:
        """The same start pose held for the whole span (the frozen-camera counterfactual)."""
        return replace(self, name=self.name + "_frozen", slots=tuple(Slot("fixed") for _ in self.slots))

    def wrong(self, factor: float) -> CameraProgram:
        """Turns scaled by ``factor`` (too little or too far); a turn-free program yaws while pushing in."""
        if any(s.yaw or s.pitch for s in self.slots):
            slots = tuple(replace(s, yaw=s.yaw * factor, pitch=s.pitch * factor) for s in self.slots)
        else:
            # a straight dolly has no turn to get wrong: it veers by 10 degrees per push slot instead
            slots = tuple(
                replace(s, yaw=10.0 * math.copysign(1.0, factor - 1.0)) if s.token == "push_in" else s
                for s in self.slots
            )
        return replace(self, name=f"{self.name}_wrong", slots=slots)


def _arc(yaw_deg: float, dyaw_deg: float, dist: float) -> np.ndarray:
    """Displacement after moving ``dist`` metres while the heading turns uniformly by ``dyaw_deg``."""
    if dist == 0.0:
        return np.zeros(3)
    a0 = math.radians(yaw_deg)
    w = math.radians(dyaw_deg)
    if abs(w) < 1e-12:
        c, s = math.cos(a0), math.sin(a0)
    else:  # mean of cos/sin of the heading over the arc (closed form of the integral)
        c = (math.sin(a0 + w) - math.sin(a0)) / w
        s = (math.cos(a0) - math.cos(a0 + w)) / w
    return dist * (c * FORWARD0 + s * RIGHT0)


def heading(yaw_deg: float) -> np.ndarray:
    """Unit vector in the floor plane the camera faces at ``yaw_deg``."""
    a = math.radians(yaw_deg)
    return math.cos(a) * FORWARD0 + math.sin(a) * RIGHT0


def right_of(yaw_deg: float) -> np.ndarray:
    """Unit vector to the camera's right at ``yaw_deg`` (horizontal; no roll)."""
    a = math.radians(yaw_deg)
    return math.cos(a) * RIGHT0 - math.sin(a) * FORWARD0


def c2w_from(pos: np.ndarray, yaw_deg: float, pitch_deg: float) -> np.ndarray:
    """4x4 c2w for a camera at ``pos`` with heading ``yaw_deg`` and elevation ``pitch_deg`` (no roll)."""
    p = math.radians(pitch_deg)
    h = heading(yaw_deg)
    f = math.cos(p) * h + math.sin(p) * UP
    r = right_of(yaw_deg)
    d = math.sin(p) * h - math.cos(p) * UP  # = f x r (closed form)
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = r, d, f, pos
    return m


def rotation_angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    """Geodesic angle between the rotations of two poses, degrees."""
    r = exact.matmul(a[:3, :3].T, b[:3, :3])
    return math.degrees(math.acos(max(-1.0, min(1.0, (np.trace(r) - 1.0) / 2.0))))


def make_program(name: str, rng: np.random.Generator, duration: float) -> CameraProgram:
    """One of :data:`PROGRAMS` with a random direction and start pose inside the room."""
    side = 1.0 if rng.random() < 0.5 else -1.0
    pitch0 = -10.0
    if name == "pan":
        turn = 36.0 * side
        tok, back = ("pan_right", "pan_left") if side > 0 else ("pan_left", "pan_right")
        slots = (
            [Slot("fixed")] * 2
            + [Slot(tok, yaw=turn)] * 3
            + [Slot("fixed")] * 2
            + [Slot(back, yaw=-turn)] * 3
            + [Slot("fixed")] * 2
        )
        start = (rng.uniform(-1.0, 1.0), 1.2, rng.uniform(-3.0, -1.5))
        yaw0 = rng.uniform(-20.0, 20.0)
    elif name == "tilt":
        slots = (
            [Slot("fixed")] * 2
            + [Slot("tilt_up", pitch=28.0)] * 3
            + [Slot("fixed")] * 2
            + [Slot("tilt_down", pitch=-28.0)] * 3
            + [Slot("fixed")] * 2
        )
        start = (rng.uniform(-1.0, 1.0), 1.2, rng.uniform(-3.0, -1.5))
        yaw0 = rng.uniform(-20.0, 20.0)
    elif name == "u_turn":
        tok = "pan_right" if side > 0 else "pan_left"
        slots = (
            [Slot("push_in", forward=1.5)] * 4
            + [Slot(tok, yaw=36.0 * side, forward=0.5)] * 5
            + [Slot("fixed")] * 3
        )
        start = (rng.uniform(-0.5, 0.5), 1.2, rng.uniform(-5.3, -4.9))
        yaw0 = rng.uniform(-5.0, 5.0)
    elif name == "dolly":
        slots = (
            [Slot("fixed")]
            + [Slot("push_in", forward=0.9)] * 4
            + [Slot("fixed")]
            + [Slot("pull_out", forward=-0.9)] * 4
            + [Slot("fixed")] * 2
        )
        start = (rng.uniform(-1.0, 1.0), 1.2, rng.uniform(-3.5, -2.5))
        yaw0 = rng.uniform(-15.0, 15.0)
    elif name == "double_yaw":
        turn = 50.0 * side
        tok, back = ("pan_right", "pan_left") if side > 0 else ("pan_left", "pan_right")
        leg = [Slot("fixed")] + [Slot(tok, yaw=turn)] * 2 + [Slot("fixed")] + [Slot(back, yaw=-turn)] * 2
        slots = leg + leg
        start = (rng.uniform(-1.0, 1.0), 1.2, rng.uniform(-3.0, -1.5))
        yaw0 = rng.uniform(-20.0, 20.0)
    else:
        raise ValueError(f"unknown camera program {name!r} (known: {', '.join(PROGRAMS)})")
    assert len(slots) == SLOTS
    return CameraProgram(
        name, tuple(slots), tuple(float(x) for x in start), float(yaw0), pitch0, float(duration)
    )


def describe(program: CameraProgram, target: str) -> str:
    """One sentence saying what the camera does, for prompts and VQA questions."""
    toks = program.tokens
    if program.name == "pan":
        d = "right" if "pan_right" == toks[2] else "left"
        back = "left" if d == "right" else "right"
        return (
            f"The camera pans about {abs(sum(s.yaw for s in program.slots[:5])):.0f} degrees to the {d} "
            f"until the {target} leaves the view, holds, then pans back to the {back} to the starting view"
        )
    if program.name == "tilt":
        return (
            "The camera tilts up towards the ceiling until the "
            f"{target} leaves the view, holds, then tilts back down to the starting view"
        )
    if program.name == "u_turn":
        d = "right" if "pan_right" in toks else "left"
        return (
            f"The camera walks forward past the {target}, makes a U-turn to the {d} and walks back towards it"
        )
    if program.name == "dolly":
        return (
            f"The camera moves straight forward past the {target} and then moves straight back "
            "to where it started"
        )
    if program.name == "double_yaw":
        d = "right" if "pan_right" == toks[1] else "left"
        return (
            f"The camera pans to the {d} away from the {target} and back, and then does the same "
            "a second time"
        )
    return f"The camera follows the {program.name} program"
