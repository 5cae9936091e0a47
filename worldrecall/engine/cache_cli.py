"""``worldrecall cache``: what an output root's cache holds (``info``), removing it (``clear``, ``prune``) and
why a row was or was not computed again (``explain``).

Each action takes the overrides ``run`` takes for where things are (``output_root=…``, ``cache_dir=…``). A
mistyped action, option, kind, size or duration is exit 2 with one line and a did-you-mean.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

ACTIONS = {
    "info": "entries and bytes per kind of the output root's cache",
    "clear": "remove the whole cache, or one kind (--kind)",
    "prune": "remove entries unused for a while (--older-than 7d) or the least recently used past a size "
             "(--max-size 2G)",
    "explain": "the key ingredients of the last run's rows and whether each was reused: "
               "explain <benchmark> [model] [case] [metric]",
}


class UsageError(Exception):
    """A bad command line: one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises :class:`UsageError` with a did-you-mean for an unknown option."""

    def error(self, message: str) -> NoReturn:
        from worldrecall.registry.names import did_you_mean

        hint = ""
        if "unrecognized arguments:" in message:
            first = message.split("unrecognized arguments:", 1)[1].split()[0]
            hint = did_you_mean(first.split("=")[0], [o for a in self._actions for o in a.option_strings])
        raise UsageError(f"{self.prog}: {message}" + (f"; {hint}" if hint else ""))


def _parser(action: str) -> _Parser:
    p = _Parser(prog=f"worldrecall cache {action}", description=ACTIONS[action])
    p.add_argument("--json", action="store_true", help="print JSON")
    if action == "clear":
        p.add_argument("--kind", default=None, help="only this kind (see `worldrecall cache info`)")
    if action == "prune":
        p.add_argument("--older-than", default=None, help="remove entries unused for this long: 7d, 12h, 30m")
        p.add_argument("--max-size", default=None, help="then the least recently used until the cache is at "
                                                        "most this size: 2G, 500M")
    if action == "explain":
        p.add_argument("--results-dir", default=None, help="a results folder (default: the last run's)")
    p.add_argument("args", nargs="*", help="key=value overrides (output_root=…); explain: the row's names too")
    return p


def main(argv: Sequence[str], compose: Callable[[Sequence[str]], Mapping[str, Any]]) -> int:
    """``worldrecall cache <action> …``; returns the exit code. ``compose``: the config of overrides, as ``run``
    composes it (``engine.cli.compose``; passed in, so this module does not import the command it serves)."""

    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stderr if not argv else sys.stdout)
        return 0 if argv else 2
    action = argv[0]
    try:
        ns, overrides, names = parse(argv)
        cfg = compose(overrides)
        output_root, cache_dir = Path(cfg["output_root"]), Path(cfg["cache_dir"])
        return {"info": _info, "clear": _clear, "prune": _prune, "explain": _explain}[action](
            ns, output_root, cache_dir, names)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str], list[str]]:
    """``worldrecall cache <action> …``'s arguments: (options, overrides, names); :class:`UsageError` with a
    did-you-mean for an unknown action or option."""
    from worldrecall.registry.names import unknown_name

    action = argv[0] if argv else ""
    if action not in ACTIONS:
        raise UsageError(unknown_name("cache action", action, ACTIONS, "worldrecall cache"))
    ns = _parser(action).parse_intermixed_args(list(argv[1:]))
    overrides = [a for a in ns.args if "=" in a]
    names = [a for a in ns.args if "=" not in a]
    if names and action != "explain":
        raise UsageError(f"worldrecall cache {action}: unexpected argument {names[0]!r} (overrides are "
                         f"key=value, e.g. output_root=worldrecall_out)")
    return ns, overrides, names


def usage() -> str:
    lines = ["usage: worldrecall cache {info,clear,prune,explain} [options] [output_root=…]"]
    lines += [f"  {a:<9} {h}" for a, h in ACTIONS.items()]
    return "\n".join(lines)


def _info(ns: argparse.Namespace, output_root: Path, cache_dir: Path, names: list[str]) -> int:
    from worldrecall.engine.cache import admin

    recs = admin.info(cache_dir, output_root)
    rows = admin.results_rows(output_root)
    if ns.json:
        print(json.dumps({"output_root": str(output_root), "cache_dir": str(cache_dir), "kinds": recs,
                          "results": rows}, indent=1))
        return 0
    print(f"cache of {output_root} (cache_dir {cache_dir})")
    print(admin.table(recs) if recs else "empty")
    if rows is not None:
        print(f"{rows['kind']:<18} {rows['entries']:>8} {admin.human_bytes(rows['bytes']):>11}  {rows['what']}")
    return 0


def _clear(ns: argparse.Namespace, output_root: Path, cache_dir: Path, names: list[str]) -> int:
    from worldrecall.engine.cache import admin
    from worldrecall.registry.names import unknown_name

    if ns.kind is not None and ns.kind not in admin.known_kinds(cache_dir, output_root):
        raise UsageError(unknown_name("cache kind", ns.kind, admin.known_kinds(cache_dir, output_root), "--kind"))
    removed = admin.clear(cache_dir, output_root, ns.kind)
    n, b = sum(r["entries"] for r in removed), sum(r["bytes"] for r in removed)
    if ns.json:
        print(json.dumps({"removed": removed}, indent=1))
    else:
        what = f"kind {ns.kind}" if ns.kind else "the cache"
        print(f"cleared {what} of {output_root}: {n} entries, {admin.human_bytes(b)}")
    return 0


def _prune(ns: argparse.Namespace, output_root: Path, cache_dir: Path, names: list[str]) -> int:
    from worldrecall.engine.cache import admin
    from worldrecall.engine.stages.sizes import parse_size

    if ns.older_than is None and ns.max_size is None:
        raise UsageError("worldrecall cache prune: say what to prune: --older-than 7d and/or --max-size 2G")
    try:
        age = admin.parse_duration(ns.older_than, "--older-than") if ns.older_than is not None else None
        size = parse_size(ns.max_size, "--max-size") if ns.max_size is not None else None
    except ValueError as e:
        raise UsageError(str(e)) from None
    done = admin.prune(cache_dir, output_root, older_than_s=age, max_bytes=size)
    if ns.json:
        print(json.dumps(done.__dict__))
        return 0
    print(f"pruned {done.entries} entries ({admin.human_bytes(done.bytes)}) of {output_root}; "
          f"{admin.human_bytes(done.left_bytes)} left")
    if done.over:
        print(f"still {admin.human_bytes(done.over)} over --max-size: kinds that are removed whole only "
              f"(`worldrecall cache info`; `worldrecall cache clear --kind <kind>`)")
    return 0


def _explain(ns: argparse.Namespace, output_root: Path, cache_dir: Path, names: list[str]) -> int:
    from worldrecall.engine.cache import explain

    if not names:
        raise UsageError("worldrecall cache explain: name a benchmark (and optionally a model, a case, a metric)")
    if len(names) > 4:
        raise UsageError(f"worldrecall cache explain: at most benchmark, model, case, metric; got {len(names)} names")
    try:
        out: Any = explain.explain(output_root, cache_dir, names,
                                   Path(ns.results_dir) if ns.results_dir else None, as_json=ns.json)
    except explain.ExplainError as e:
        raise UsageError(str(e)) from None
    print(json.dumps(out, indent=1) if ns.json else out)
    return 0
