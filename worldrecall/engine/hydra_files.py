"""Hydra's own files under the output root (``.hydra/*.yaml``, ``multirun.yaml``) with secrets redacted.

Hydra writes the composed config and the command-line overrides verbatim; a key passed as
``+judge_options.gemini.api_key=…`` would sit there in clear text. Each job rewrites the files of its own
job folder (and its sweep's) through the same redaction as MLflow params.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from worldrecall.core.atomic import atomic_write_text
from worldrecall.engine.redaction import redact_tree

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def redact_hydra_files(*folders: Path | None) -> list[Path]:
    """Rewrite every Hydra YAML file in ``folders`` (and their ``.hydra``) with secrets redacted."""
    done = []
    for folder in folders:
        if folder is None:
            continue
        for path in [*Path(folder).glob(".hydra/*.yaml"), *Path(folder).glob("multirun.yaml")]:
            try:
                data = yaml.load(path.read_text(), Loader=_LOADER)  # safe either way; libyaml's is 8x faster
            except (OSError, yaml.YAMLError):
                continue
            clean = redact_tree(data)  # secret keys, and key=value secrets inside overrides / names
            if clean != data:
                atomic_write_text(path, yaml.safe_dump(clean, sort_keys=False))
                done.append(path)
    return done
