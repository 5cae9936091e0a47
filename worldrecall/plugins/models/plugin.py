"""Built-in plugin entry point (registered through the `worldrecall` entry-point group)."""

from worldrecall.core.hookspecs import hookimpl  # noqa: F401
