"""Test-wide environment: offline hubs, temp caches, no user plugins leaking in."""

from __future__ import annotations

import os
import tempfile

# Set before any test module imports transformers / huggingface_hub / torch hub / mlflow.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TORCH_HOME", tempfile.mkdtemp(prefix="wr-torch-home-"))
os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="wr-hf-home-"))
os.environ["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
# fresh MLflow stores are copies of one migrated template per test session (never the user's ~/.cache one)
os.environ["WORLDRECALL_MLFLOW_TEMPLATE_DIR"] = tempfile.mkdtemp(prefix="wr-mlflow-template-")
os.environ.pop("MLFLOW_TRACKING_URI", None)
# Pin the built-in plugins (this distribution's own entry points): whatever else is installed in the
# environment (a user's plugins, a half-uninstalled example) cannot change what the tests see.
import importlib.metadata as _md

os.environ["WORLDRECALL_PLUGINS"] = ",".join(sorted(
    ep.name for ep in _md.entry_points(group="worldrecall")
    if ep.dist is not None and ep.dist.metadata["Name"] == "worldrecall"))
os.environ.pop("WORLDRECALL_STRICT_PLUGINS", None)
for key in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
    os.environ.pop(key, None)
import pytest

# before any test module loads numpy/torch/OpenCV: they pick their CPU kernels when they load
# (worldrecall/numerics/isa.py), and the figures the tests check are those of the pinned kernels
import worldrecall  # noqa: E402,F401


@pytest.fixture(scope="session")
def default_run(tmp_path_factory):
    """One fresh default `worldrecall run` for the whole session (see tests/helpers/default_run.py)."""
    pytest.importorskip("open3d")  # the default suite's renderer
    from tests.helpers.default_run import default_run as run

    return run(tmp_path_factory.mktemp("default-run"))


@pytest.fixture()
def toy_host():
    """The registry with the toy plugin (``tests/helpers/toy_plugin.py``) as the process's registry, so the
    CLI path (``worldrecall run …``) sees the toy benchmark; restored after the test."""
    import sys
    from pathlib import Path

    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from helpers import toy_plugin  # the same module object the tests import

    from worldrecall.registry import host as host_mod

    host_mod._HOST = host_mod.load_plugins(extra=[toy_plugin], fresh=True)
    yield host_mod._HOST
    host_mod._HOST = None
