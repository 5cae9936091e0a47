"""Example plugin: registers one MemoBench metric (see metric.py) and ships a config group in conf/."""

from worldrecall import hookimpl

from worldrecall_colour_shift.metric import ColourShift


@hookimpl
def register_metrics(register):
    """Register the colour-shift metric."""
    register(ColourShift)
