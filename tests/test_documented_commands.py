"""Every documented command runs as printed: each ``worldrecall …`` line in a code block of README.md and
docs/*.md is composed as the CLI composes it (group options, Hydra, the schema, every name checked against the
registry, with did-you-means) — not run. Placeholders (``<WRBench>``, ``/data/…``, ``/models/…``) become
folders that exist; a sweep is composed at its first value."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from worldrecall.core.components import ConfigTypeError
from worldrecall.engine.cli import compose_checked
from worldrecall.engine.job import host_for
from worldrecall.engine.stages.config import resolve_config
from worldrecall.engine.stages.name_checks import check_aggregator_paths, check_names
from worldrecall.engine.stages.plan import enable_metrics

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BUILTIN = {"run", "check", "aggregate", "plugins", "--version", "models", "vqa-bank"}
PLACEHOLDER_ROOTS = ("/data/", "/models/", "/path/to/")


def code_lines(text: str) -> list[str]:
    """The lines of fenced (```) and indented (4 spaces) code blocks, continuations (``\\``) joined."""
    out, fenced, pending = [], False, ""
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not (fenced or line.startswith("    ")):
            pending = ""
            continue
        line = pending + line.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        out.append(line)
    return out


def documented_commands() -> list[tuple[str, str]]:
    """(where, command) for every ``worldrecall …`` line of a code block."""
    found = []
    for doc in DOCS:
        for line in code_lines(doc.read_text()):
            m = re.match(r"^(?:\S*/)?worldrecall(\s.*)?$", line)
            if m:
                found.append((doc.name, line))
    return found


def argv_of(command: str, tmp: Path) -> list[str]:
    """The command's arguments with its placeholders made real folders under ``tmp``."""
    def folder(m: re.Match) -> str:
        p = tmp / re.sub(r"\W+", "_", m.group(0)).strip("_")
        p.mkdir(parents=True, exist_ok=True)
        return str(p)

    command = re.sub(r"<[^<>]+>", folder, command)
    args = shlex.split(command, comments=True)[1:]
    out = []
    for a in args:
        if a == "...":  # "the rest of the command above"
            continue
        key, eq, value = a.partition("=")
        for root in PLACEHOLDER_ROOTS:
            if eq and value.startswith(root):
                p = tmp / value.lstrip("/")
                p.mkdir(parents=True, exist_ok=True)
                a = f"{key}={p}"
        out.append(a)
    return out


def compose_as_the_cli(argv: list[str]) -> str:
    """'' when ``worldrecall <argv>`` composes and passes every name check, else its one-line error."""
    if argv[0] == "cache":  # its own options, then the overrides that say where the cache is
        from worldrecall.engine import cache_cli

        try:
            _, overrides, _ = cache_cli.parse(argv[1:])
        except cache_cli.UsageError as e:
            return str(e)
        cfg, code = compose_checked(overrides)
        return "" if cfg is not None else f"exit {code}"
    if argv[0] not in ("run", "check", "aggregate"):
        return "" if argv[0] in BUILTIN else f"unknown command {argv[0]!r}"
    cfg, code = compose_checked(argv[1:])
    if cfg is None:
        return f"exit {code}"
    try:
        cfg = resolve_config(cfg)
        host = host_for(cfg)
        check_names(resolve_config(enable_metrics(cfg, host)), host)
        if not (cfg["suite"] or {}).get("builder"):  # a suite writes its files when built: not here
            check_aggregator_paths(cfg, host)
    except ConfigTypeError as e:
        return str(e)
    return ""


COMMANDS = documented_commands()


def test_the_docs_hold_the_commands_this_test_checks():
    where = {w for w, _ in COMMANDS}
    assert {"README.md", "wrbench.md", "running.md"} <= where
    assert any("judge_options.qwen_vl_logprob.model_path" in c for _, c in COMMANDS)
    assert len(COMMANDS) >= 12


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[f"{w}:{c[:60]}" for w, c in COMMANDS])
def test_documented_command_composes_as_printed(where, command, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WORLDRECALL_OUTPUT", str(tmp_path / "out"))
    error = compose_as_the_cli(argv_of(command, tmp_path))
    assert error == "", f"{where}: `{command}` -> {error} {capsys.readouterr().err}"
