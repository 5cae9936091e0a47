"""Orchestration: plan -> per-case pipeline -> executor -> aggregate -> report/track, the Hydra app and the CLI.

Sits above `core` and `registry`; reads only what components declare and never names a plugin.
"""
