"""The suite in Scene Memory F1's layout (hard links to the MemoBench copies; no duplicate bytes).

scene_memory/{model}/{case}.mp4
scene_memory/{model}/annotations_vipe/{case}_vipe_ann/<sidecar files>
scene_memory/{model}/{case}_actions.json   {"actions": [...], "frames_per_action": k, ...}
"""

from __future__ import annotations

from worldrecall.plugins.synthetic.files import SuiteFiles
from worldrecall.plugins.synthetic.sidecars import SIDECAR_FILES


def video_path(model: str, case: str) -> str:
    return f"scene_memory/{model}/{case}.mp4"


def sidecar_dir(model: str, case: str) -> str:
    return f"scene_memory/{model}/annotations_vipe/{case}_vipe_ann"


def actions_path(model: str, case: str) -> str:
    return f"scene_memory/{model}/{case}_actions.json"


def link_generation(
    files: SuiteFiles,
    model: str,
    case: str,
    video_rel: str,
    sidecar_rel: str,
    tokens: list[str],
    num_frames: int,
) -> dict[str, str]:
    """Link one generation and its sidecars into the layout and write the requested action program."""
    files.link(video_rel, video_path(model, case))
    for name in SIDECAR_FILES:
        files.link(f"{sidecar_rel}/{name}", f"{sidecar_dir(model, case)}/{name}")
    # the action program is the *request* (same for every model); the split of the experimental variant
    # is computed from the action count, frames_per_action is informative
    files.json(
        actions_path(model, case),
        {
            "actions": list(tokens),
            "frames_per_action": max(1, round(num_frames / len(tokens))),
            "num_frames": int(num_frames),
        },
    )
    return {
        "video": video_path(model, case),
        "sidecars": sidecar_dir(model, case),
        "actions": actions_path(model, case),
    }
