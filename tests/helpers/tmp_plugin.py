"""Install a plugin into a throw-away folder (its package and a ``.dist-info`` with the entry point), for tests
that run ``worldrecall`` in a fresh process the way a user who pip-installed a plugin does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import worldrecall

MAIN = "import sys; from worldrecall.engine.cli import main; sys.exit(main(sys.argv[1:]))"


def install(site: Path, name: str, source: str) -> Path:
    """``site/<name>/__init__.py`` holding ``source`` and its ``worldrecall`` entry point; returns the file."""
    pkg = site / name
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(source)
    dist = site / f"{name}-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[worldrecall]\n{name} = {name}\n")
    return pkg / "__init__.py"


def env_with(site: Path, *names: str) -> dict[str, str]:
    """The environment of a process that sees this checkout and the plugins installed under ``site``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(worldrecall.__file__).parents[1]),
                                         env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["WORLDRECALL_PLUGINS"] = ",".join(filter(None, [env.get("WORLDRECALL_PLUGINS", ""), *names]))
    return env


def worldrecall_cli(env: dict[str, str], *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``worldrecall <args>`` in a fresh process."""
    return subprocess.run([sys.executable, "-c", MAIN, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
