"""Hydra config groups of the example plugin (a package, so Hydra finds it at pkg://worldrecall_colour_shift.conf)."""
