"""WRBench (JinPLu/WRBench, release 0.1.3): "look away and come back" at parity with the released evaluators.

D1 requested-camera precision (CamPrec) and prompt-camera alignment (CamAlign) from the ``pose`` role, D2 visual
integrity from the ``cls_patch_embedder`` role, D3-D6 from yes/no probes a judge scores by log-probability, the
shared re-observation judgeability gate with the metric contract's null policy, the main-table aggregation and
the frozen 23-model paper table as official rows. Differences from the release: docs/wrbench.md.
"""
