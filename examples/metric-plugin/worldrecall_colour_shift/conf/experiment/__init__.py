"""The ``experiment`` config group: ``worldrecall run experiment=colour_shift``."""
