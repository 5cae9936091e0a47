"""Libraries imported where first used: a rerun that finds nothing changed never aggregates or writes a
table, so the modules on its path (plugins, sinks) take pandas (0.4 s of imports) as ``pd = lazy.pandas``."""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for module ``name``: the first attribute read imports it; every read is the module's own."""

    def __init__(self, name: str) -> None:
        self._name, self._module = name, None

    def __getattr__(self, attr: str) -> Any:  # called only for names this object lacks
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


pandas = LazyModule("pandas")
