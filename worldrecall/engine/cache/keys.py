"""The one key recipe for everything cached: what computes it, what it reads, and how it was asked.

``key_of(identity, inputs, params)`` is the sha256 of:

- the component's identity (:func:`component_identity`): qualified name, declared version, a digest of the
  code that computes it (:func:`code_digest`) and the major.minor versions of the numeric libraries whose
  results can differ (:func:`library_versions`);
- the content digests of its inputs (a case's fingerprint, an upstream key, the files a param names:
  :func:`inputs_digest`);
- its params and thresholds.

The code digest of a class is its module and, transitively, every module of the same top-level package that
module imports (for ``worldrecall`` itself: the plugin's own package and ``core``/``formats``/``gates``), each
as the syntax tree Python parsed (comments and layout do not count). A component of an installed,
non-editable distribution is identified by the distribution's name, version and the digest of its
``RECORD`` (the hashes of every file it installed). A version bump stays how an author says "same code,
different meaning".
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata as md
import importlib.util
import json
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from worldrecall.core.digests import file_digest

# the libraries whose results can differ between releases (kernels, defaults, resampling)
LIBRARIES = {"numpy": "numpy", "scipy": "scipy", "pandas": "pandas", "opencv": "opencv-python-headless",
             "torch": "torch"}


def key_of(identity: Mapping[str, Any], inputs: Any = None, params: Any = None) -> str:
    """The cache key: sha256 over the identity, the inputs' digests and the params (canonical JSON)."""
    text = json.dumps({"identity": identity, "inputs": inputs, "params": params}, sort_keys=True, default=str,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@cache
def library_versions() -> dict[str, str]:
    """major.minor of each library in :data:`LIBRARIES` (``""`` where not installed); read from the installed
    distributions' metadata, so nothing is imported."""
    out = {}
    for name, dist in LIBRARIES.items():
        try:
            out[name] = ".".join(md.version(dist).split(".")[:2])
        except md.PackageNotFoundError:
            out[name] = ""
    return out


def component_identity(component: Any, *, without: Iterable[str] = ()) -> dict[str, Any]:
    """Name, version, code digest and library versions of a registered component (class or instance).

    ``without``: methods left out of the code digest, for a key that must not depend on them (a metric's
    measurement does not depend on its ``score``)."""
    cls = component if isinstance(component, type) else type(component)
    return {"name": getattr(cls, "name", "") or f"{cls.__module__}.{cls.__qualname__}",
            "class": f"{cls.__module__}.{cls.__qualname__}", "version": str(getattr(cls, "version", "") or ""),
            "code": code_digest(cls.__module__, tuple(sorted(without))), "libraries": library_versions()}


def inputs_digest(paths: Iterable[Path | str]) -> list[list[str]]:
    """[path, content digest] of each file or folder (a folder: every file under it, names and bytes)."""
    out = []
    for p in paths:
        try:
            out.append([str(p), file_digest(Path(p))])
        except OSError as e:  # a file a param names that is not there: its absence is the input
            out.append([str(p), f"unreadable: {e.strerror or type(e).__name__}"])
    return out


@cache
def code_digest(module: str, without: tuple[str, ...] = ()) -> str:
    """Digest of the code of ``module`` and the modules of its package it imports (see the module doc)."""
    dist = _installed_distribution(module)
    if dist is not None:
        return dist
    h = hashlib.sha256()
    for name in sorted(_closure(module)):
        h.update(name.encode())
        h.update(_module_digest(name, without).encode())
    return h.hexdigest()


def _installed_distribution(module: str) -> str | None:
    """'name==version sha256(RECORD)' when ``module`` comes from a regular (non-editable) installed wheel:
    its file lies in an installation's site-packages (an editable install's sources lie elsewhere)."""
    _, path = _source(module)
    if path is None or not any(path.resolve().is_relative_to(p) for p in _site_dirs()):
        return None
    top = module.split(".")[0]
    for dist_name in _packages().get(top, []):
        try:
            dist = md.distribution(dist_name)
            record = dist.read_text("RECORD")
        except Exception:  # noqa: BLE001  (metadata we cannot read: fall back to the source itself)
            return None
        if record:
            return f"{dist.metadata['Name']}=={dist.version} {hashlib.sha256(record.encode()).hexdigest()}"
    return None


@cache
def _site_dirs() -> tuple[Path, ...]:
    import sysconfig

    return tuple({Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")})


@cache
def _packages() -> Mapping[str, list[str]]:
    return md.packages_distributions()


def _source(module: str) -> tuple[str, Path | None]:
    mod = sys.modules.get(module)
    path = getattr(mod, "__file__", None)
    if path is None:
        spec = importlib.util.find_spec(module)
        path = spec.origin if spec is not None else None
    if not path or not str(path).endswith(".py"):
        return "", None
    return Path(path).read_text(encoding="utf-8"), Path(path)


def _is_package(module: str) -> bool:
    _, path = _source(module)
    return path is not None and path.name == "__init__.py"


@cache
def _imports(module: str) -> frozenset[str]:
    """Modules of the same top-level package that ``module``'s source imports (anywhere in it)."""
    text, path = _source(module)
    if not text:
        return frozenset()
    top = module.split(".")[0]
    package = module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            found.add(origin)
            found.update(f"{origin}.{a.name}" for a in node.names)  # ``from pkg import module``
    out = set()
    for name in found:
        if name.split(".")[0] != top:
            continue
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
            prefix = ".".join(parts[:i])
            if _exists(prefix):
                out.add(prefix)
    return frozenset(out)


@cache
def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _closure(module: str) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_imports(name) - seen)
    return seen


@cache
def _module_digest(module: str, without: tuple[str, ...]) -> str:
    text, _ = _source(module)
    tree = ast.parse(text)
    if without:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                node.body = [b for b in node.body
                             if not (isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and b.name in without)]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()
