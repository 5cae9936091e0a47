"""Scene Memory F1 (worldarena memory_loop): point-cloud retention vs hallucination between the observation
leg and the revisit leg of a closed camera loop, from ViPE depth and poses.

Modules: ``loader`` (rollouts, sidecars, action programs), ``trajectory`` (pose distance, turnaround, gates),
``actions`` (action programs, experimental split), ``aligners``, ``clouds`` (B.6 reconstruction), ``icp``
(trimmed ICP), ``f1`` (B.7 kernel), ``metrics`` (the two metrics), ``render`` (PLY/PNG artifacts),
``plugin`` (hook implementations).
"""
