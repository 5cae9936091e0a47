"""MemoBench (MemoBench-Team/MemoBench): loader, V/D/R phases, automated metrics, ORS and leaderboard.

One module per concept: ``sampling`` (phase mapping, frame sampling), ``rounding`` (official rounding),
``loader`` / ``discovery`` / ``sheets`` / ``metadata`` / ``gt`` (data), one module per metric, and
``leaderboard``. VQA is in the ``vqa`` sub-package.
"""
