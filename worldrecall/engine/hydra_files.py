"""Hydra's own files under the output root (``.hydra/*.yaml``, ``multirun.yaml``) with secrets redacted.

Hydra writes the composed config and the command-line overrides verbatim; a key passed as
``+judge_options.gemini.api_key=…`` would sit there in clear text. Each job rewrites the files of its own
job folder (and its sweep's) through the same redaction as MLflow params.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from worldrecall.core.atomic import atomic_write_text
from worldrecall.engine.tracking import REDACTED, is_secret, redact_override


def _redact(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (REDACTED if is_secret(str(k)) and v not in (None, "") and not isinstance(v, (dict, list))
                    else _redact(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_redact(x) for x in node]
    if isinstance(node, str) and "=" in node:  # an override, or Hydra's comma-joined override_dirname
        return ",".join(redact_override(part) for part in node.split(","))
    return node


def redact_hydra_files(*folders: Path | None) -> list[Path]:
    """Rewrite every Hydra YAML file in ``folders`` (and their ``.hydra``) with secrets redacted."""
    done = []
    for folder in folders:
        if folder is None:
            continue
        for path in [*Path(folder).glob(".hydra/*.yaml"), *Path(folder).glob("multirun.yaml")]:
            try:
                data = yaml.safe_load(path.read_text())
            except (OSError, yaml.YAMLError):
                continue
            clean = _redact(data)
            if clean != data:
                atomic_write_text(path, yaml.safe_dump(clean, sort_keys=False))
                done.append(path)
    return done
