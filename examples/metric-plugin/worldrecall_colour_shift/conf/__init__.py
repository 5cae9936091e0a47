"""Hydra config groups of the example plugin: a package, so Hydra opens pkg://worldrecall_colour_shift.conf."""
