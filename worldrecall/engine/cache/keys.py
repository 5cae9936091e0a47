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
by its source's bytes; a module's imports and its methods' line ranges are parsed once per file content. A
component of an installed, non-editable distribution is identified by the distribution's name, version and the digest of its
``RECORD`` (the hashes of every file it installed). A version bump stays how an author says "same code,
different meaning".
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import importlib.metadata as md
import json
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from worldrecall.core.digests import content_memo, file_digest

# the libraries whose results can differ between releases (kernels, defaults, resampling)
LIBRARIES = {"numpy": "numpy", "scipy": "scipy", "pandas": "pandas", "opencv": "opencv-python-headless",
             "torch": "torch"}


def key_of(identity: Mapping[str, Any], inputs: Any = None, params: Any = None) -> str:
    """The cache key: sha256 over the identity, the inputs' digests and the params (canonical JSON)."""
    return key_and_ingredients(identity, inputs, params)[0]


def key_and_ingredients(identity: Mapping[str, Any], inputs: Any = None, params: Any = None) -> tuple[str, str]:
    """The cache key and what it was built from: the canonical JSON the key hashes (identity, the inputs'
    digests, params: never an input's content), kept beside what a run computes for ``worldrecall cache
    explain``."""
    text = json.dumps({"identity": identity, "inputs": inputs, "params": params}, sort_keys=True, default=str,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest(), text


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


def named_files(component: Any, params: Mapping[str, Any]) -> list[list[str]]:
    """Digests of the files and folders the component's ``path_params`` name (their contents are inputs)."""
    names = getattr(component, "path_params", ()) or ()
    return inputs_digest(str(params[n]) for n in names if params.get(n))


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
    path = _source_path(module)
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


def _source_path(module: str) -> Path | None:
    """The module's ``.py`` file (None for a built-in, compiled or namespace module)."""
    origin = _located(module)[1]
    return Path(origin) if origin and origin.endswith(".py") else None


@cache
def _located(module: str) -> tuple[bool, str | None, tuple[str, ...] | None]:
    """(exists, its source file, where its submodules live when it is a package), found without importing
    anything: ``importlib.util.find_spec`` imports a module's parents, and a key must not run a package's
    ``__init__`` (nor the heavy libraries a lazily imported module pulls in) to say what it covers."""
    mod = sys.modules.get(module)
    if mod is not None:
        path = getattr(mod, "__path__", None)
        return True, getattr(mod, "__file__", None), tuple(path) if path is not None else None
    parent = module.rpartition(".")[0]
    search = None
    if parent:
        found, _, search = _located(parent)
        if not found or search is None:  # no such parent, or a plain module: no submodules
            return False, None, None
    try:
        spec = importlib.machinery.PathFinder.find_spec(module, list(search) if search is not None else None)
    except (ImportError, ValueError):
        return False, None, None
    if spec is None:
        return False, None, None
    locations = spec.submodule_search_locations
    return True, spec.origin, tuple(locations) if locations is not None else None


@cache
def _parsed(module: str) -> dict[str, Any]:
    """What the key needs of a module's source: the modules it imports (absolute names) and the line ranges
    of its classes' scoring methods. Kept under the file's content digest (``core.digests.content_memo``,
    persisted between runs), so an unchanged file is never parsed again."""
    path = _source_path(module)
    if path is None:
        return {"imports": [], "methods": []}
    return content_memo(path, f"code.parsed.{sys.version_info[0]}.{sys.version_info[1]}",
                        lambda: _parse(module, path), persist=True)


def _parse(module: str, path: Path) -> dict[str, Any]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    methods: list[list[Any]] = []  # [name, first line, last line] of every method of every class
    for node in ast.walk(tree):
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
        elif isinstance(node, ast.ClassDef):
            for b in node.body:
                if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    first = min([b.lineno, *(d.lineno for d in b.decorator_list)])
                    methods.append([b.name, first, b.end_lineno])
    return {"imports": sorted(found), "methods": methods}


@cache
def _imports(module: str) -> frozenset[str]:
    """Modules of the same top-level package that ``module``'s source imports (anywhere in it)."""
    top = module.split(".")[0]
    out = set()
    for name in _parsed(module)["imports"]:
        if name.split(".")[0] != top:
            continue
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
            prefix = ".".join(parts[:i])
            if _located(prefix)[0]:
                out.add(prefix)
    return frozenset(out)


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
    """sha256 of the module's source, without the lines of its classes' methods named in ``without``."""
    path = _source_path(module)
    if path is None:
        return hashlib.sha256(b"").hexdigest()  # no source to read: as the empty text
    if not without:
        return file_digest(path)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for name, first, last in _parsed(module)["methods"]:
        if name in without:
            lines[first - 1:last] = [""] * (last - first + 1)
    return hashlib.sha256("".join(lines).encode()).hexdigest()
