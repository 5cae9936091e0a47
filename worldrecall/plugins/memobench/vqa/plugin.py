"""MemoBench VQA plugin: registers the ``memobench.vqa`` metric (judge-backed, cached answers)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from worldrecall.core.components import Command, Registry
from worldrecall.core.hookspecs import hookimpl
from worldrecall.plugins.memobench.vqa.metric import VQAMetric


@hookimpl
def register_metrics(register: Callable[..., None]) -> None:
    """Register :class:`VQAMetric` (``memobench.vqa``; judge ``gemini`` by default, a param)."""
    register(VQAMetric)


class VqaBankCommand(Command):
    """``worldrecall vqa-bank …``: build a MemoBench VQA question bank for a new clip (needs a judge's API key)."""

    name = "vqa-bank"
    help = "build a MemoBench VQA question bank for a clip (asks a VLM judge)"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        from worldrecall.plugins.memobench.vqa.command import add_arguments

        add_arguments(parser)
        parser.add_argument("--judge", default="gemini", help="registered judge that writes and answers questions")

    def run(self, args: argparse.Namespace, registry: Registry) -> int:
        from worldrecall.core.judges import JudgeError
        from worldrecall.plugins.memobench.vqa.command import run_builder

        spec = registry.judges.get(args.judge)
        if spec is None:
            raise SystemExit(f"error: unknown judge {args.judge!r}; known: {', '.join(sorted(registry.judges))}")

        def make_judge(opts: Mapping[str, Any]) -> Any:
            try:
                return spec.factory({**spec.defaults, **opts})
            except ImportError as e:  # the judge's SDK is an optional extra
                raise JudgeError(f"judge {args.judge!r} unavailable: {e}") from None

        return run_builder(args, make_judge)


@hookimpl
def register_commands(register: Callable[..., None]) -> None:
    """Register ``worldrecall vqa-bank``."""
    register(VqaBankCommand())
