"""Renders a few synthetic-suite frames and prints their digest: run natively and under ``qemu-x86_64 -cpu
<model>`` by tests/test_isa_emulated.py, which compares the two (argv[1]: the checkout to import)."""

import hashlib
import sys

sys.path.insert(0, sys.argv[1])

import worldrecall  # noqa: E402,F401  (the ISA pin, as in a run)
import numpy as np  # noqa: E402

from worldrecall.plugins.synthetic.render import Renderer, TargetLook, detail_texture  # noqa: E402
from worldrecall.plugins.synthetic.scene import Prop, RoomLayout, TargetSpec  # noqa: E402


def c2w(pos: np.ndarray, yaw_deg: float) -> np.ndarray:
    a = np.radians(yaw_deg)
    m = np.eye(4)
    m[:3, :3] = [[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]]
    m[:3, 3] = pos
    return m


h = hashlib.sha256()
tex = detail_texture(0)
h.update(tex.tobytes())
r = Renderer(160, 120, (32, 24), TargetSpec("ball", "checkered", 0.3), tex)
r.add_layout("k", RoomLayout("Gallery", [Prop("crate", "brown", -1.5, 4.0, (0.6, 0.6, 0.6), 0.3, 2),
                                          Prop("crate", "blue", 1.2, 3.0, (0.5, 0.9, 0.5), 0.7, 3)]), np.zeros((8, 2)))
for yaw in np.linspace(-40, 40, 9):
    for a in r.composite("k", c2w(np.array([0.2, 1.4, 0.5]), yaw), TargetLook((0.1, 0.4, 3.0), 1.1, (0.9, 0.1, 0.1))):
        h.update(a.tobytes())
print(h.hexdigest())
