"""The synthetic revisit suite: open3d-raycast scenes with exact depth, poses and instance masks, a camera
that looks, turns away and comes back while a target moves or changes state, and counterfactual "models"
(oracle, frozen camera, forgetful, state reset, teleport, hallucinated background, appearance drift, wrong
trajectory) written in the MemoBench, Scene Memory F1 and OPIS layouts. It doubles as the validity suite.

Modules: ``programs`` (camera paths), ``scene`` (room, props, target), ``story`` (one case's plan),
``render`` (raycasting + shading), ``annotate`` (exit/re-enter from masks), ``counterfactuals``,
``sidecars`` / ``memobench_layout`` / ``scene_memory_layout`` / ``opis_layout`` / ``vqa_bank`` (on-disk
formats), ``build`` (``ensure_suite``), ``validity`` (the validity matrix).
"""
