"""The self-contained static HTML report of a run (``report/index.html`` in the results folder)."""
