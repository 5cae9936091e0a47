"""``mind.mirror``: the mirror test (generated scene consistency, the release's ``gsc``).

Release (``src/process.py``, ``mirror_test`` branch): a model walks an action path and then its mirror back, in
one video; the first half is compared with the time-reversed second half (frame ``i`` with ``n - 1 - i``) with
the same four values as the LCM (:mod:`worldrecall.plugins.mind.lcm`), all frames at once (no batch is
dropped). An odd frame count is an error for that video, as released (the ``mind.pairs`` aligner fails it).
"""

from __future__ import annotations

from typing import ClassVar

from worldrecall.plugins.mind.lcm import PairFidelity


class MindMirror(PairFidelity):
    """``mind.mirror``: first half vs time-reversed second half of every ``mirror_test`` video."""

    name: ClassVar[str] = "mind.mirror"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "mirror test: MSE/PSNR/SSIM/LPIPS of a path's first half vs its time-reversed " \
                                 "second half (the release's gsc)"
    mirror_metric: ClassVar[bool] = True
