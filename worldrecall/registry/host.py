"""The plugin host: entry-point discovery with per-plugin isolation, allowlist, collision rules and typed lookups.

Built-in plugins are entry points of the ``worldrecall`` group in our own pyproject, so they take exactly
the path a third-party plugin takes. A plugin that fails to import (or whose hooks raise) is reported with
its name and error and skipped; ``WORLDRECALL_STRICT_PLUGINS=1`` turns that into an error. Hooks are called
through pluggy, one plugin at a time (a subset hook caller per plugin), with a ``register`` callback that knows
the calling plugin; ``WORLDRECALL_TRACE_PLUGINS=1`` prints pluggy's trace of those calls to stderr.

Name collisions are decided by rule, never by load order: a third-party plugin cannot replace a built-in
component (the built-in keeps the name, the collision is an error naming both plugins) unless the config
says so explicitly (``plugins.override={<component>: <plugin>}``, logged); two third-party plugins claiming
one name both lose it. The engine refuses to run while a collision is unresolved.
"""

from __future__ import annotations

import importlib.metadata as md
import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pluggy

from worldrecall.core import hookspecs
from worldrecall.core.components import Aggregator, Aligner, Benchmark, Command, Loader, Metric, Sink, Suite
from worldrecall.core.judges import JudgeSpec
from worldrecall.core.models import KINDS, ModelSpec, Role
from worldrecall.registry.metadata import metric_problems
from worldrecall.registry.names import unknown_name

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "worldrecall"
ENV_STRICT = "WORLDRECALL_STRICT_PLUGINS"
ENV_ALLOW = "WORLDRECALL_PLUGINS"          # comma-separated allowlist; empty string = none
ENV_BLOCK = "WORLDRECALL_DISABLE_PLUGINS"  # comma-separated blocklist
ENV_TRACE = "WORLDRECALL_TRACE_PLUGINS"    # 1: print pluggy's trace of every hook call to stderr

# hook name -> (component kind, base class or spec type)
HOOKS: dict[str, tuple[str, type]] = {
    "register_loaders": ("loader", Loader),
    "register_aligners": ("aligner", Aligner),
    "register_metrics": ("metric", Metric),
    "register_aggregators": ("aggregator", Aggregator),
    "register_models": ("model", (ModelSpec, Role)),
    "register_judges": ("judge", JudgeSpec),
    "register_suites": ("suite", Suite),
    "register_commands": ("command", Command),
    "register_benchmarks": ("benchmark", Benchmark),
    "register_sinks": ("sink", Sink),
}
BUILTIN_DISTRIBUTION = "worldrecall"
RESERVED_COMMANDS = ("run", "aggregate", "plugins")


class PluginError(Exception):
    """A plugin problem raised only in strict mode (otherwise reported and skipped)."""


@dataclass
class PluginInfo:
    name: str
    distribution: str = ""
    version: str = ""
    module: str = ""
    hooks: list[str] = field(default_factory=list)
    components: dict[str, list[str]] = field(default_factory=dict)
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "distribution": self.distribution, "version": self.version,
                "module": self.module, "hooks": self.hooks, "components": self.components,
                **({"error": self.error} if self.error else {})}


class _Register:
    """The ``register`` callback handed to one plugin's hook: it stages what that plugin registers.

    Components are validated only after the hook returned, so a hook that raises half-way registers nothing.
    """

    def __init__(self, plugin: str):
        self.plugin = plugin
        self.staged: list[Any] = []

    def __call__(self, component: Any) -> None:
        self.staged.append(component)

    def __repr__(self) -> str:  # what pluggy's trace prints for the argument
        return f"<register for plugin {self.plugin!r}>"


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0", "false")


def _env_list(name: str) -> list[str] | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    return [x.strip() for x in raw.split(",") if x.strip()]


class PluginHost:
    """Owns the pluggy manager and every registered component, attributed to its plugin."""

    def __init__(self, strict: bool | None = None, override: Mapping[str, str] | None = None):
        self.override = dict(override or {})   # component name -> plugin allowed to claim it
        self.collisions: list[str] = []        # unresolved collisions, one line each (the engine refuses to run)
        self._lost: set[tuple[str, str]] = set()  # names two third-party plugins both claimed
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        if _env_flag(ENV_TRACE):
            self.pm.trace.root.setwriter(lambda msg: sys.stderr.write(msg))  # looked up per write: capture-safe
            self.pm.enable_tracing()
        self.strict = _env_flag(ENV_STRICT) if strict is None else strict
        self.components: dict[str, dict[str, Any]] = {kind: {} for kind, _ in HOOKS.values()}
        self.components["role"] = {}
        self.owner: dict[tuple[str, str], str] = {}
        self.plugins: dict[str, PluginInfo] = {}
        self.failures: list[tuple[str, str]] = []

    # -- discovery ------------------------------------------------------------------------------
    def load_entry_points(self, allow: Sequence[str] | None = None, block: Sequence[str] = ()) -> None:
        eps = sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
        for ep in eps:
            if allow is not None and ep.name not in allow:
                continue
            if ep.name in block:
                continue
            dist = getattr(ep, "dist", None)
            info = PluginInfo(name=ep.name, module=ep.value,
                              distribution=dist.metadata["Name"] if dist else "",
                              version=dist.version if dist else "")
            try:
                obj = ep.load()
            except Exception as e:  # any import-time error: report, skip, keep the CLI alive
                self._fail(info, f"import failed: {type(e).__name__}: {e}")
                continue
            self.add_plugin(obj, info)

    def add_plugin(self, obj: ModuleType | object, info: PluginInfo | None = None) -> None:
        """Register one plugin object/module and collect its components (used for tests too)."""
        name = info.name if info else getattr(obj, "__name__", type(obj).__name__)
        info = info or PluginInfo(name=name, module=getattr(obj, "__name__", ""))
        if name in self.plugins:
            self._fail(info, f"plugin name {name!r} is already registered")
            return
        try:
            self.pm.register(obj, name=name)
            self.pm.check_pending()  # misspelled hook names fail loudly
        except Exception as e:
            if self.pm.is_registered(obj):
                self.pm.unregister(obj)
            self._fail(info, f"registration failed: {type(e).__name__}: {e}")
            return
        info.hooks = sorted(h.name for h in self.pm.get_hookcallers(obj) or [])
        self.plugins[name] = info
        others = [p for p in self.pm.get_plugins() if p is not obj]
        for hook in info.hooks:
            kind, typ = HOOKS[hook]
            # through pluggy, restricted to this plugin: every implementation it has (``specname=`` ones too)
            # runs, tracing sees the call, and the callback knows which plugin is registering
            caller = self.pm.subset_hook_caller(hook, remove_plugins=others)
            register = _Register(name)
            try:
                caller(register=register)
            except Exception as e:
                self._fail(info, f"{hook} raised {type(e).__name__}: {e}")
                continue
            for comp in register.staged:
                self._add_component(info, kind, typ, comp)

    def _add_component(self, info: PluginInfo, kind: str, typ: type, comp: Any) -> None:
        ok = isinstance(comp, typ) or (isinstance(comp, type) and issubclass(comp, typ))
        cname = getattr(comp, "name", None)
        if not ok or not cname:
            names = " or ".join(t.__name__ for t in (typ if isinstance(typ, tuple) else (typ,)))
            self._fail(info, f"registered a {kind} that is not a named {names}: {comp!r}")
            return
        if isinstance(comp, Role):
            kind = "role"
        elif kind == "model" and comp.kind not in KINDS:
            self._fail(info, f"model {cname!r}: unknown kind {comp.kind!r} (known: {', '.join(KINDS)})")
            return
        elif kind == "command" and cname in RESERVED_COMMANDS:
            self._fail(info, f"command {cname!r} is reserved by worldrecall itself")
            return
        if kind == "metric":
            problems = metric_problems(comp)
            if problems:  # nothing is assumed about a value: its direction and range are declared, or no metric
                self._fail(info, f"metric {cname!r} of plugin {info.name!r} refused: " + "; ".join(problems))
                return
        if kind in ("loader", "aligner", "aggregator", "suite", "command", "sink") and isinstance(comp, type):
            comp = comp()  # stored as instances; metrics stay classes (built per run with params)
        prev = self.owner.get((kind, cname))
        if (kind, cname) in self._lost:
            prev = "(several third-party plugins)"
        if prev is not None and not self._resolve(kind, cname, prev, info):
            return
        self.components[kind][cname] = comp
        self.owner[(kind, cname)] = info.name
        info.components.setdefault(kind, []).append(cname)

    def is_builtin(self, plugin: str) -> bool:
        """Whether a plugin ships with worldrecall itself (by its distribution, not by its name)."""
        info = self.plugins.get(plugin)
        return info is not None and info.distribution == BUILTIN_DISTRIBUTION

    def _resolve(self, kind: str, cname: str, prev: str, info: PluginInfo) -> bool:
        """Decide a name collision by rule; True when the newcomer ``info`` takes the name."""
        new = info.name
        chosen = self.override.get(cname)
        if chosen in (prev, new):
            loser = prev if chosen == new else new
            log.warning("%s %r: plugin %r overrides plugin %r (plugins.override)", kind, cname, chosen, loser)
            if chosen == new:
                self._drop(kind, cname, prev)
            return chosen == new
        msg = None
        if self.is_builtin(prev) and not self.is_builtin(new):
            msg, keep_new = (f"{kind} name collision: {cname!r} is registered by built-in plugin {prev!r} and by "
                             f"plugin {new!r}; the built-in is kept (to replace it on purpose set "
                             f"plugins.override={{{cname}: {new}}})"), False
        elif self.is_builtin(new) and not self.is_builtin(prev):
            msg, keep_new = (f"{kind} name collision: {cname!r} is registered by built-in plugin {new!r} and by "
                             f"plugin {prev!r}; the built-in is kept (to replace it on purpose set "
                             f"plugins.override={{{cname}: {prev}}})"), True
            self._drop(kind, cname, prev)
        else:
            msg, keep_new = (f"{kind} name collision: {cname!r} is registered by plugin {prev!r} and by plugin "
                             f"{new!r}; neither is used (choose one with plugins.override={{{cname}: <plugin>}})"), False
            if prev in self.plugins:
                self._drop(kind, cname, prev)
            self._lost.add((kind, cname))
        self.collisions.append(msg)
        self._fail(info if not keep_new else self.plugins.get(prev, info), msg)
        return keep_new

    def _drop(self, kind: str, cname: str, plugin: str) -> None:
        self.components[kind].pop(cname, None)
        self.owner.pop((kind, cname), None)
        comps = self.plugins[plugin].components.get(kind, []) if plugin in self.plugins else []
        if cname in comps:
            comps.remove(cname)

    def _fail(self, info: PluginInfo, msg: str) -> None:
        info.error = msg if not info.error else f"{info.error}; {msg}"
        self.failures.append((info.name, msg))
        if info.name not in self.plugins:
            self.plugins[info.name] = info
        if self.strict:
            raise PluginError(f"plugin {info.name!r}: {msg}")
        log.warning("plugin %r skipped: %s", info.name, msg)

    def check_roles(self) -> None:
        """Drop (and report) backends for roles no plugin declared; run once every plugin is in."""
        for name, spec in list(self.components["model"].items()):
            if spec.role not in self.components["role"]:
                owner = self.owner[("model", name)]
                del self.components["model"][name]
                known = ", ".join(sorted(self.components["role"])) or "none"
                self._fail(self.plugins[owner], f"model {name!r} fills role {spec.role!r}, which no plugin "
                                                f"declares (declared roles: {known})")

    # -- lookup ---------------------------------------------------------------------------------
    def get(self, kind: str, name: str) -> Any:
        """The component of ``kind`` registered as ``name``, or a KeyError listing the known names."""
        try:
            return self.components[kind][name]
        except KeyError:
            raise KeyError(unknown_name(kind, name, self.components[kind])) from None

    def metric(self, name: str) -> type[Metric]:
        """The metric class registered as ``name`` (instantiate it with params and thresholds)."""
        return self.get("metric", name)

    def loader(self, name: str) -> Loader:
        return self.get("loader", name)

    def aligner(self, name: str) -> Aligner:
        return self.get("aligner", name)

    def aggregator(self, name: str) -> Aggregator:
        return self.get("aggregator", name)

    def suite(self, name: str) -> Suite:
        return self.get("suite", name)

    def judge(self, name: str) -> JudgeSpec:
        return self.get("judge", name)

    def model(self, name: str) -> ModelSpec:
        return self.get("model", name)

    @property
    def benchmarks(self) -> dict[str, Benchmark]:
        """Declared benchmarks (headline, ranking, gate) by name."""
        return self.components["benchmark"]

    @property
    def commands(self) -> dict[str, Command]:
        return self.components["command"]

    @property
    def sinks(self) -> dict[str, Sink]:
        """Outputs plugins registered, by name (run after the built-in files, before MLflow)."""
        return self.components["sink"]

    @property
    def metrics(self) -> dict[str, Any]:
        return self.components["metric"]

    @property
    def models(self) -> dict[str, ModelSpec]:
        return self.components["model"]

    @property
    def roles(self) -> dict[str, Role]:
        return self.components["role"]

    @property
    def judges(self) -> dict[str, JudgeSpec]:
        return self.components["judge"]

    def manifest(self) -> list[dict[str, Any]]:
        """Every plugin as JSON; a plugin that declares benchmarks lists their headline, ranking and gate."""
        out = []
        for p in sorted(self.plugins.values(), key=lambda p: p.name):
            d = p.to_json()
            names = [n for n in p.components.get("benchmark", []) if n in self.benchmarks]
            if names:
                d["benchmarks"] = [self.benchmarks[n].to_json() for n in names]
            out.append(d)
        return out


_HOST: PluginHost | None = None


def load_plugins(allow: Iterable[str] | None = None, block: Iterable[str] | None = None,
                 strict: bool | None = None, extra: Iterable[object] = (), fresh: bool = False,
                 override: Mapping[str, str] | None = None) -> PluginHost:
    """Discover plugins once per process (``fresh=True`` rebuilds). Env vars override the arguments."""
    global _HOST
    key = (tuple(allow) if allow is not None else None, tuple(block or ()), tuple(sorted((override or {}).items())))
    if _HOST is not None and not fresh and not extra and getattr(_HOST, "_key", None) == key:
        return _HOST
    env_allow = _env_list(ENV_ALLOW)
    allow_l = env_allow if env_allow is not None else (list(allow) if allow is not None else None)
    block_l = (_env_list(ENV_BLOCK) or []) + list(block or [])
    host = PluginHost(strict=strict, override=override)
    host._key = key  # type: ignore[attr-defined]
    host.load_entry_points(allow=allow_l, block=block_l)
    for obj in extra:
        host.add_plugin(obj)
    host.check_roles()
    _HOST = host
    return host
