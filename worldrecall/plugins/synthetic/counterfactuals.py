"""Counterfactual generations ("models") of the synthetic suite and what each one gets wrong.

Each counterfactual says, for a case story and a GT time ``t``, where the camera is, which static scene
variant is shown and how the target looks (or that it is absent). The oracle is the true continuation;
every other one breaks exactly one thing, so a metric aimed at that failure should rank the oracle above it.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from worldrecall.numerics import exact
from worldrecall.plugins.synthetic.programs import CameraProgram, rotation_angle_deg
from worldrecall.plugins.synthetic.render import TargetLook, drifted_primary
from worldrecall.plugins.synthetic.scene import nearest_colour
from worldrecall.plugins.synthetic.story import CaseStory


class Counterfactual:
    """The oracle: true camera path, true world. Subclasses override one aspect."""

    name: ClassVar[str] = "oracle"
    description: ClassVar[str] = "the true continuation of the world (re-encoded)"
    hint: ClassVar[str] = "No failure: the world evolves as described."
    # what its camera does: "true" (the reference path), "frozen" (never moves) or "wrong" (another path);
    # a camera gate must treat every "true" counterfactual exactly as it treats the oracle
    camera_kind: ClassVar[str] = "true"

    def camera(self, story: CaseStory) -> CameraProgram:
        return story.program

    def layout(self, story: CaseStory, t: float) -> str:
        return "base"

    def look(self, story: CaseStory, t: float) -> TargetLook | None:
        return story.target.look(t)

    def defined(self, story: CaseStory) -> bool:
        """Whether this failure is meaningful for the case (e.g. a reset needs something to reset)."""
        return True


class FrozenCamera(Counterfactual):
    name = "frozen_camera"
    description = "the camera never leaves the opening view; the world still changes in front of it"
    hint = "The camera stays still for the whole video instead of turning away and back."
    camera_kind = "frozen"

    def camera(self, story: CaseStory) -> CameraProgram:
        return story.program.frozen()


class Forgetful(Counterfactual):
    name = "forgetful"
    description = "the target is gone when the camera returns"
    hint = "The subject has vanished when the camera comes back."

    def look(self, story: CaseStory, t: float) -> TargetLook | None:
        return None if t >= story.target.t_a else story.target.look(t)


class StateReset(Counterfactual):
    name = "state_reset"
    description = "the target returns exactly as it was when it left (position, colour, size)"
    hint = "The subject is back in the state it had before the camera turned away, as if time had stopped."

    def look(self, story: CaseStory, t: float) -> TargetLook | None:
        return story.target.look(min(t, story.target.t_a))

    def defined(self, story: CaseStory) -> bool:
        tl = story.target
        return tl.moves or tl.recolours or tl.resizes


class Teleport(Counterfactual):
    name = "teleport"
    description = "the target returns in its true state but somewhere else"
    hint = "The subject undergoes an abrupt spatial displacement while out of view."

    def look(self, story: CaseStory, t: float) -> TargetLook | None:
        tl = story.target
        u = tl.progress(t)
        return tl.look(t, xz=(1 - u) * np.asarray(tl.p0) + u * np.asarray(tl.teleport))


class HallucinatedBackground(Counterfactual):
    name = "hallucinated_background"
    description = "props of the final view are moved and recoloured once the camera is back"
    hint = "Background objects have moved and changed colour when the camera comes back."

    def layout(self, story: CaseStory, t: float) -> str:
        t_change = story.t_return if story.t_return is not None else story.target.t_b
        return "hallucinated" if t >= t_change else "base"

    def defined(self, story: CaseStory) -> bool:
        return bool(story.moved_ids)


class AppearanceDrift(Counterfactual):
    name = "appearance_drift"
    description = "the target's colour and surface pattern drift away from its true look"
    hint = "The subject's texture and colour keep drifting after it reappears."

    @staticmethod
    def drift(story: CaseStory, t: float) -> float:
        tl = story.target
        if t < tl.t_a:
            return 0.0
        if t < tl.t_b:
            return 0.6 * (t - tl.t_a) / max(tl.t_b - tl.t_a, 1e-9)
        return 0.6 + 0.4 * (t - tl.t_b) / max(story.duration - tl.t_b, 1e-9)

    def look(self, story: CaseStory, t: float) -> TargetLook | None:
        return story.target.look(t, drift=self.drift(story, t))


class WrongTrajectory(Counterfactual):
    name = "wrong_trajectory"
    description = "the camera turns too little or too far (a straight dolly veers sideways)"
    hint = "The camera does not follow the requested trajectory."
    camera_kind = "wrong"

    def camera(self, story: CaseStory) -> CameraProgram:
        return story.wrong


COUNTERFACTUALS: dict[str, Counterfactual] = {
    c.name: c
    for c in (
        Counterfactual(),
        FrozenCamera(),
        Forgetful(),
        StateReset(),
        Teleport(),
        HallucinatedBackground(),
        AppearanceDrift(),
        WrongTrajectory(),
    )
}
MODELS = tuple(COUNTERFACTUALS)


def observed_facts(
    story: CaseStory, cf: Counterfactual, poses: np.ndarray, present: np.ndarray, full: np.ndarray, r_gen: int
) -> dict:
    """What a perfect viewer of ``cf``'s video would report (drives the VQA truth and the manifest).

    ``poses`` [N,4,4], ``present``/``full`` [N] target visibility from that video's own masks, ``r_gen``
    the first Reappear frame on the generated axis.
    """
    times = story.gen_times()
    ref = story.program.poses(times)
    rot_err = max(rotation_angle_deg(a, b) for a, b in zip(ref, poses))
    pos_err = float(np.max(np.linalg.norm(ref[:, :3, 3] - poses[:, :3, 3], axis=1)))
    start_angle = max(rotation_angle_deg(poses[0], p) for p in poses)
    moved = float(np.max(np.linalg.norm(poses[:, :3, 3] - poses[0, :3, 3], axis=1)))
    seen = np.flatnonzero(present)
    leaves_returns = False
    if seen.size:
        gone = np.flatnonzero(~present[seen[0] :]) + seen[0]
        if gone.size:
            leaves_returns = bool(full[gone[0] :].any())
    t_r = float(times[min(r_gen, len(times) - 1)])
    look = cf.look(story, t_r)
    tl = story.target
    present_r = bool(present[r_gen:].any()) and look is not None
    facts = {
        "camera_moves": bool(start_angle > 5.0 or moved > 0.1),
        "follows_program": bool(rot_err <= 5.0 and pos_err <= 0.2),
        "max_rotation_error_deg": round(float(rot_err), 3),
        "end_rotation_deg": round(rotation_angle_deg(poses[0], poses[-1]), 3),
        "target_leaves_and_returns": bool(leaves_returns),
        "target_present_at_return": present_r,
        "props_moved": cf.layout(story, story.duration) != "base",
        "appearance_drifts": isinstance(cf, AppearanceDrift),
    }
    if look is not None:
        xz = np.array([look.position[0], look.position[2]])
        facts.update(
            {
                "colour_at_return": nearest_colour(drifted_primary(look)),
                "scale_at_return": round(float(look.scale), 4),
                "position_at_return": [round(float(v), 4) for v in xz],
                "dist_to_true_position": round(exact.norm(xz - tl.xz(t_r)), 4),
                "dist_to_start_position": round(exact.norm(xz - np.asarray(tl.p0)), 4),
            }
        )
    return facts
