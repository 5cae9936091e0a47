"""Numerics that must come out the same on every CPU: the kernel pin (``isa``) and ordered small products
(``exact``); and the trajectory comparisons several metrics share (``trajectory``: Umeyama Sim(3), RPE — BLAS/LAPACK
backed like any metric, not bit-exact across CPUs). Imports nothing from worldrecall; anything may import it
(``isa`` loads before numpy does)."""
