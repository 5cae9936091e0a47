"""Numerics that must come out the same on every CPU: the kernel pin (``isa``) and ordered small products
(``exact``). Imports nothing from worldrecall; anything may import it (``isa`` loads before numpy does)."""
