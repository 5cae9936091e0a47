"""Where a result comes from: code, plugins, backends, config and inputs — recorded once, on the result.

Every output that states provenance (the submission bundle, MLflow tags) reads :class:`Provenance`, so they
cannot disagree.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldrecall import __version__
from worldrecall.numerics import isa

# keys that say where results go or how a run looks, not what it computes: left out of the config hash
_NOT_HASHED = ("output_root", "cache_dir", "progress", "tracking", "view", "verbose")  # outputs only


def git_commit() -> str:
    """The checkout's commit, or "" outside a git checkout (an installed wheel)."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=Path(__file__).parent).stdout.strip()
    except Exception:
        return ""


def config_hash(cfg: Mapping[str, Any]) -> str:
    """Short hash of the resolved config, without the output location (equal hash = same computation)."""
    d = {k: v for k, v in cfg.items() if k not in _NOT_HASHED}
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:12]


_DIST_INFO = re.compile(r"^(.+?)-([^-]+)\.dist-info$")


def installed_packages() -> dict[str, Any]:
    """Every installed distribution's version, their digest, and how they compare with requirements.lock when
    this is a checkout that has one (the set ``scripts/setup.sh`` installs by default)."""
    from importlib import metadata

    installed = {}
    for dist in metadata.distributions():
        # a wheel's ``<name>-<version>.dist-info`` folder names both, normalized (PEP 503 name, PEP 440
        # version): read from the folder's name, not by parsing ~200 METADATA files (0.2-0.5 s a job)
        folder = getattr(dist, "_path", None)
        m = _DIST_INFO.match(folder.name) if isinstance(folder, Path) else None
        if m:
            name, version = m.group(1).lower().replace("_", "-").replace(".", "-"), m.group(2)
        else:  # an egg-info or another layout: its metadata
            name, version = (dist.metadata["Name"] or "").lower().replace("_", "-"), dist.version
        if name and name != "worldrecall":
            installed[name] = version
    installed = dict(sorted(installed.items()))
    out: dict[str, Any] = {"installed": installed,
                           "digest": hashlib.sha256(json.dumps(installed).encode()).hexdigest()}
    lock = Path(__file__).resolve().parents[3] / "requirements.lock"
    if lock.is_file():
        pins = {}
        for line in lock.read_text().splitlines():
            head = line.split(" ", 1)[0]
            if "==" in head and not line.startswith("#"):
                name, version = head.split("==", 1)
                pins[name.split("[")[0].lower().replace("_", "-")] = version
        differ = sorted(n for n, v in pins.items() if installed.get(n) != v)
        out["lock"] = ("matches requirements.lock" if not differ else
                       f"{len(differ)} differ from requirements.lock: " + ", ".join(
                           f"{n} {installed.get(n, 'absent')} (locked {pins[n]})" for n in differ[:10]))
    return out


def input_manifest_sha256(cases: Iterable[tuple[str, str, str]]) -> str:
    """Hash of the sorted (benchmark, model, case) triples a result covers."""
    return hashlib.sha256(json.dumps(sorted(set(cases)), default=str).encode()).hexdigest()


def suite_digests(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The built suite's params and content digests from its manifest (empty for a dataset without one)."""
    root = (cfg.get("suite") or {}).get("root")
    manifest = Path(root) / "manifest.json" if root else None
    if manifest is None or not manifest.is_file():
        return {}
    try:
        m = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return {}
    return {"root_name": Path(root).name, "params_digest": m.get("params_digest"),
            "content_digest": m.get("content_digest")}


@dataclass(frozen=True)
class Provenance:
    """Code, plugin and backend versions, config hash, input and suite digests of one result."""

    worldrecall_version: str
    git_commit: str
    config_hash: str
    input_manifest_sha256: str
    python: str
    plugins: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)
    backends: Mapping[str, str] = field(default_factory=dict)
    suite: Mapping[str, Any] = field(default_factory=dict)
    # the instruction set numpy/torch/OpenCV kernels were capped at (worldrecall/numerics/isa.py)
    cpu_kernels: Mapping[str, Any] = field(default_factory=dict)
    # every installed distribution's version, their digest, and the comparison with requirements.lock
    packages: Mapping[str, Any] = field(default_factory=dict)
    # the identities the rows' keys folded in: {"backends": {name: identity}, "judges": {name: identity}}
    # (code digests, options, weight digests, library versions, state: engine/cache/identity.py)
    identities: Mapping[str, Any] = field(default_factory=dict)
    # whether worldrecall and each plugin ran from a git working tree with changes (None: not a checkout)
    modified: Mapping[str, bool | None] = field(default_factory=dict)

    @classmethod
    def of(cls, cfg: Mapping[str, Any], plugins: Iterable[Any], cases: Iterable[tuple[str, str, str]],
           backends: Mapping[str, str], identities: Mapping[str, Any] | None = None) -> Provenance:
        plugins = sorted(plugins, key=lambda p: p.name)
        return cls(__version__, git_commit(), config_hash(cfg), input_manifest_sha256(cases),
                   platform.python_version(),
                   {p.name: {"version": p.version, "distribution": p.distribution} for p in plugins},
                   {k: v for k, v in sorted(backends.items()) if v}, suite_digests(cfg), isa.state(),
                   packages=installed_packages(), identities=dict(identities or {}),
                   modified=modified_trees({"worldrecall": "worldrecall", **{p.name: p.module for p in plugins}}))


def modified_trees(modules: Mapping[str, str]) -> dict[str, bool | None]:
    """Per name, whether its module's folder lies in a git working tree with uncommitted changes there (None
    outside a checkout, e.g. an installed wheel); one ``git status`` per folder."""
    import importlib.util

    seen: dict[str, bool | None] = {}
    out: dict[str, bool | None] = {}
    for name, module in modules.items():
        try:
            spec = importlib.util.find_spec(module.split(":")[0]) if module else None
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
        if not origin or not origin.endswith(".py"):
            out[name] = None
            continue
        folder = str(Path(origin).parent)
        if folder not in seen:
            try:
                res = subprocess.run(["git", "status", "--porcelain", "--", "."], check=False, capture_output=True,
                                     text=True, timeout=10, cwd=folder)
                seen[folder] = bool(res.stdout.strip()) if res.returncode == 0 else None
            except (OSError, subprocess.SubprocessError):
                seen[folder] = None
        out[name] = seen[folder]
    return out
