"""worldrecall: does a video world model remember?

The plugin-author API, importable from one place::

    from worldrecall import hookimpl, Metric, Loader, Aligner, Aggregator, Case, Alignment, Phase, Value

Everything here is re-exported from :mod:`worldrecall.core` (the contract); see docs/plugins.md.
"""

# first, before numpy/torch/OpenCV load: they choose their CPU kernels once, when they load
from worldrecall.numerics import isa as _isa

_isa.pin()

from worldrecall.core.components import (
    Aggregator,
    Aligner,
    Benchmark,
    Command,
    ConfigTypeError,
    Loader,
    LoadRequest,
    MeasureContext,
    Metric,
    MissingInput,
    PathParam,
    Registry,
    Sink,
    Suite,
    Value,
)
from worldrecall.core.data import Alignment, Case, CaseError, CaseFailure, CaseSkip, Phase, ScoreRow
from worldrecall.core.hookspecs import hookimpl, hookspec
from worldrecall.core.judges import Judge, JudgeError, JudgeResponse, JudgeSpec
from worldrecall.core.models import BackendUnavailable, Detection, ModelSpec, Role, WeightFile
from worldrecall.core.video import Video, VideoError

__version__ = "0.1.0"

__all__ = [
    "Aggregator",
    "Aligner",
    "Alignment",
    "BackendUnavailable",
    "Benchmark",
    "Case",
    "CaseError",
    "CaseFailure",
    "CaseSkip",
    "Command",
    "ConfigTypeError",
    "Detection",
    "Judge",
    "JudgeError",
    "JudgeResponse",
    "JudgeSpec",
    "LoadRequest",
    "Loader",
    "MeasureContext",
    "Metric",
    "MissingInput",
    "PathParam",
    "ModelSpec",
    "Phase",
    "Registry",
    "Role",
    "ScoreRow",
    "Sink",
    "Suite",
    "Value",
    "Video",
    "VideoError",
    "WeightFile",
    "__version__",
    "hookimpl",
    "hookspec",
]
