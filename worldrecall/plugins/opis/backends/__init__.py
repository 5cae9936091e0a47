"""OPIS perception backends, registered by the OPIS plugin for the roles it declares.

Role interfaces (structural; backends need not inherit):

* ``opis_embedder``: ``backend`` (the label stored with every identity number, e.g. ``"colorhist"``,
  ``"dinov3_vits16"``) and ``embed(crops) -> [N, D]`` float array (one row per RGB crop).
* ``opis_geometry``: ``geometry(image, *, case=None, index=None) -> MonoGeometry`` at the image's own
  resolution; ``index=None`` means the case's input image (``raw.jpg``), else a generated-frame index.
* ``opis_matcher``: ``match(ref_image, frame, *, case=None, index=None) -> (ref_px [M,2], cur_px [M,2])``,
  reference-image and frame pixels (x, y).
* ``pose_landmarks``: ``keypoints(image, boxes, *, template) -> list[(xy [17, 2], confidence [17])]``
  (COCO-17 for ``human``, AP-10K-17 for ``animal``), one entry per box.
"""
