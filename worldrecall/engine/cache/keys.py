"""The one key recipe for everything cached: what computes it, what it reads, and how it was asked.

``key_of(identity, inputs, params)`` is the sha256 of:

- the component's identity (:func:`component_identity`): qualified name, declared version, a digest of the
  code along its class hierarchy (:func:`class_code_digest`), the major.minor versions of the libraries that
  code imports (:func:`imported_libraries`) and ``WORLDRECALL_ISA``; the identities of the backends and judges
  a measurement receives come from :mod:`.identity`;
- the content digests of its inputs (a case's fingerprint, an upstream key, the files a param names:
  :func:`inputs_digest`);
- its params and thresholds.

The code digest of a class is its module and, transitively, every module of the same top-level package (or of
``worldrecall``: a third-party plugin runs worldrecall's code too) that module imports, each by its source's
bytes (and a package's bundled ``data/`` folder by content), and the same for the module of every base class
from another package; a module's imports and its methods' line ranges are parsed once per file content. A
component of an installed, non-editable distribution is identified by the distribution's name, version and the digest of its
``RECORD`` (the hashes of every file it installed). A version bump stays how an author says "same code,
different meaning".

Digests are memoised for one run (:func:`refresh_code_digests` starts a new one: the runner calls it). A module
reloaded since (``importlib.reload``, ``%autoreload``) is hashed again; a loaded module whose file changed but
which was not reloaded keeps the digest of the source it was first hashed from, or, edited before it was first
hashed, the digest of the compiled file it runs: the key names the code running, never the file's new text.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import importlib.metadata as md
import json
import os
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

from worldrecall.core.components import PathParam
from worldrecall.core.digests import content_memo, file_digest, provide_code_identity

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
    return key_of_encoded(canonical_json(identity), canonical_json(inputs), canonical_json(params))


def key_of_encoded(identity: str, inputs: str, params: str) -> tuple[str, str]:
    """:func:`key_and_ingredients` of its three parts already encoded by :func:`canonical_json` (or
    :func:`object_json`): a caller computing thousands of keys encodes what they share once."""
    text = object_json({"identity": identity, "inputs": inputs, "params": params})
    return hashlib.sha256(text.encode()).hexdigest(), text


# json.dumps with these options builds an encoder per call; tens of thousands of keys a run share this one
_CANONICAL = json.JSONEncoder(sort_keys=True, default=str, separators=(",", ":"))


def canonical_json(value: Any) -> str:
    """The JSON every key hashes: keys sorted, no spaces, what JSON cannot hold as its ``str``."""
    return _CANONICAL.encode(value)


def object_json(fields: Mapping[str, str]) -> str:
    """:func:`canonical_json` of an object whose values are given encoded already (each by
    :func:`canonical_json` or this function): the same text, character for character."""
    # encode_basestring_ascii is what json.dumps does with a str (ensure_ascii), without its per-call set-up
    return "{" + ",".join(f"{encode_basestring_ascii(k)}:{v}" for k, v in sorted(fields.items())) + "}"


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
    """Name, version, code digest (along the class hierarchy), imported libraries' versions and the CPU-kernel
    switch of a registered component (class or instance).

    ``without``: methods left out of the code digest, for a key that must not depend on them (a metric's
    measurement does not depend on its ``score``)."""
    cls = component if isinstance(component, type) else type(component)
    return {"name": getattr(cls, "name", "") or f"{cls.__module__}.{cls.__qualname__}",
            "class": f"{cls.__module__}.{cls.__qualname__}", "version": str(getattr(cls, "version", "") or ""),
            "code": class_code_digest(cls, tuple(sorted(without))),
            "libraries": imported_libraries(*_class_modules(cls)), "isa": isa_setting()}


def isa_setting() -> str:
    """``WORLDRECALL_ISA`` as set (``native`` lets the libraries choose their kernels: other last bits)."""
    return os.environ.get("WORLDRECALL_ISA", "")


def callable_code_digest(obj: Any) -> str:
    """Code digest of a factory: a class along its hierarchy, a function (or ``functools.partial``) by its
    module."""
    while hasattr(obj, "func") and callable(obj.func):  # functools.partial
        obj = obj.func
    if isinstance(obj, type):
        return class_code_digest(obj)
    return code_digest(getattr(obj, "__module__", "") or "")


def callable_modules(obj: Any) -> tuple[str, ...]:
    """The modules whose code a factory runs (see :func:`callable_code_digest`)."""
    while hasattr(obj, "func") and callable(obj.func):
        obj = obj.func
    return _class_modules(obj) if isinstance(obj, type) else (getattr(obj, "__module__", "") or "",)


def class_code_digest(cls: type, without: tuple[str, ...] = ()) -> str:
    """Digest of the code of ``cls``'s module (:func:`code_digest`) and of the module of each base class that
    closure does not already cover, whatever package it lives in (a third-party subclass of a built-in metric
    changes key when the built-in's code changes). One module only: exactly :func:`code_digest`."""
    mods = _class_modules(cls)
    if len(mods) == 1:
        return code_digest(mods[0], without)
    h = hashlib.sha256()
    for m in mods:
        h.update(f"{m}\0{code_digest(m, without)}\0".encode())
    return h.hexdigest()


@cache
def _class_modules(cls: type) -> tuple[str, ...]:
    """``cls``'s module, then each base's module outside its closure (standard library and builtins left out)."""
    own = cls.__module__
    covered = _closure(own)
    out = [own]
    for base in cls.__mro__[1:]:
        m = base.__module__
        if m in covered or m in out or m.split(".")[0] in sys.stdlib_module_names or m == "builtins":
            continue
        out.append(m)
        covered = covered | _closure(m)
    return tuple(out)


@cache
def imported_libraries(*modules: str) -> dict[str, str]:
    """major.minor of every installed distribution whose packages the code of ``modules`` (and the modules of
    theirs it covers: :func:`_closure`) imports, anywhere in it (not a fixed list: a backend importing
    transformers or lpips carries their versions)."""
    tops: set[str] = set()
    own: set[str] = set()
    for module in modules:
        for m in _closure(module):
            own.add(m.split(".")[0])
            tops.update(n.split(".")[0] for n in _parsed(m)["imports"])
    out = {}
    for top in sorted(tops - own - set(sys.stdlib_module_names) - {"", "__future__", "worldrecall"}):
        for dist, version in _distributions_of(top):
            out[dist] = ".".join(version.split(".")[:2])
    return out


@cache
def _distributions_of(top: str) -> tuple[tuple[str, str], ...]:
    """(distribution, version) of what provides the import name ``top``, found without importing it and without
    ``packages_distributions()`` (which reads every installed distribution's file list: ~2 s a process): the
    ``.dist-info`` folders beside where ``top`` lies, by their ``top_level.txt``, else their ``RECORD``."""
    found, origin, search = _located(top)
    if not found:
        return ()
    if origin and origin not in ("built-in", "frozen"):
        where = Path(origin).parent
        site = where.parent if Path(origin).stem == "__init__" else where
    elif search:
        site = Path(search[0]).parent  # a namespace package
    else:
        return ()
    out = []
    for info, provides in _site_distributions(str(site)):
        if top in provides:
            out.append(info)
    return tuple(out)


@cache
def _site_distributions(site: str) -> tuple[tuple[tuple[str, str], frozenset[str]], ...]:
    """Each distribution installed in ``site``: ((name, version), the top-level import names it provides)."""
    try:
        folders = sorted(p for p in Path(site).iterdir() if p.name.endswith(".dist-info"))
    except OSError:
        return ()
    out = []
    for folder in folders:
        name, _, version = folder.name[: -len(".dist-info")].partition("-")
        try:
            listed = (folder / "top_level.txt").read_text(encoding="utf-8").split()
        except OSError:
            try:  # no top_level.txt (flit, hatch, maturin wheels): the first part of each installed path
                record = (folder / "RECORD").read_text(encoding="utf-8")
            except OSError:
                continue
            listed = [line.split(",", 1)[0].split("/", 1)[0] for line in record.splitlines()]
        tops = frozenset(n.split(".", 1)[0] for n in listed if n and not n.endswith((".dist-info", ".data")))
        out.append(((name.lower().replace("_", "-"), version), tops))
    return tuple(out)


def refresh_code_digests() -> None:
    """Start a new run's memo of code digests: a module reloaded since the last one is hashed again."""
    for f in (code_digest, _located, _parsed, _imports, _module_digest, imported_libraries, _class_modules,
              _distributions_of, _site_distributions):
        f.cache_clear()


def inputs_digest(paths: Iterable[Path | str]) -> list[list[str]]:
    """[path, content digest] of each file or folder (a folder: every file under it, names and bytes)."""
    out = []
    for p in paths:
        try:
            out.append([str(p), file_digest(Path(p))])
        except OSError as e:  # a file a param names that is not there: its absence is the input
            out.append([str(p), f"unreadable: {e.strerror or type(e).__name__}"])
    return out


def path_param_names(component: Any) -> tuple[str, ...]:
    """The params naming files or folders: declared in ``path_params``, or typed: a default that is a
    :class:`~worldrecall.core.components.PathParam` declares itself."""
    cls = component if isinstance(component, type) else type(component)
    names = list(getattr(cls, "path_params", ()) or ())
    for attr in ("params", "defaults"):
        defaults = getattr(cls, attr, None)
        if isinstance(defaults, Mapping):
            names += [k for k, v in defaults.items() if isinstance(v, PathParam)]
    return tuple(dict.fromkeys(names))


def named_files(component: Any, params: Mapping[str, Any]) -> list[list[str]]:
    """Digests of the files and folders the component's path params name (their contents are inputs)."""
    return inputs_digest(str(params[n]) for n in path_param_names(component) if params.get(n))


@cache
def code_digest(module: str, without: tuple[str, ...] = ()) -> str:
    """Digest of the code of ``module`` and the modules of its package it imports (see the module doc)."""
    dist = _installed_distribution(module)
    names = sorted(_closure(module))
    if dist is not None:
        if module.split(".")[0] == "worldrecall":
            return dist
        # a third-party wheel: its RECORD, and the worldrecall code it runs
        names = [n for n in names if n.split(".")[0] == "worldrecall"]
        if not names:
            return dist
    h = hashlib.sha256(dist.encode() if dist else b"")
    for name in names:
        h.update(name.encode())
        h.update(_module_digest(name, without).encode())
        data = _package_data(name)
        if data is not None:  # files the package ships beside its code and reads (a bundled results table)
            h.update(f"\0data\0{file_digest(data)}".encode())
    return h.hexdigest()


provide_code_identity(code_digest)  # a plugin's facts kept between runs are keyed on the same code identity


def _package_data(module: str) -> Path | None:
    """The ``data`` folder of a package (``<package>/data/``), where its bundled files live, or None."""
    path = _source_path(module)
    if path is None or path.name != "__init__.py":
        return None
    data = path.parent / "data"
    return data if data.is_dir() else None


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
    """Modules of the same top-level package, or of ``worldrecall``, that ``module``'s source imports (anywhere
    in it)."""
    top = module.split(".")[0]
    out = set()
    for name in _parsed(module)["imports"]:
        if name.split(".")[0] not in (top, "worldrecall"):
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


# (module, without) -> (the loaded module's spec when hashed, digest): the code a loaded module runs
_RUNNING: dict[tuple[str, tuple[str, ...]], tuple[Any, str]] = {}


@cache
def _module_digest(module: str, without: tuple[str, ...]) -> str:
    """sha256 of the module's source, without the lines of its classes' methods named in ``without``. A loaded
    module not reloaded since it was first hashed keeps that digest (its file may have changed since: the code
    that runs is still the one hashed); a reload gives the module a new spec, and its source is hashed again."""
    loaded = sys.modules.get(module)
    spec = getattr(loaded, "__spec__", None) if loaded is not None else None
    known = _RUNNING.get((module, without))
    if known is not None and spec is not None and known[0] is spec:
        return known[1]
    stale = _compiled_if_edited(spec)
    # edited since it was imported: the code that runs is the compiled one, not the file's
    digest = f"compiled:{file_digest(stale)}" if stale is not None else _source_digest(module, without)
    if spec is not None:
        _RUNNING[(module, without)] = (spec, digest)
    return digest


def _compiled_if_edited(spec: Any) -> Path | None:
    """The ``.pyc`` a loaded module runs when its source was edited since it was compiled (the pyc records the
    source's mtime and size, and importing checks them), else None (not loaded, no timestamp pyc, unchanged)."""
    if spec is None or not spec.cached or not spec.origin or not str(spec.origin).endswith(".py"):
        return None
    if sys.dont_write_bytecode or not os.access(os.path.dirname(spec.cached) or ".", os.W_OK):
        # this process wrote no .pyc on import: one that disagrees with the source is left from an earlier
        # version, not the code running, and would freeze the key across further edits
        return None
    try:
        with open(spec.cached, "rb") as f:
            head = f.read(16)
        st = os.stat(spec.origin)
    except OSError:
        return None
    if len(head) < 16 or int.from_bytes(head[4:8], "little") != 0:  # a hash-checked pyc: no timestamp to compare
        return None
    recorded = (int.from_bytes(head[8:12], "little"), int.from_bytes(head[12:16], "little"))
    return Path(spec.cached) if recorded != (int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF) else None


def _source_digest(module: str, without: tuple[str, ...]) -> str:
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
