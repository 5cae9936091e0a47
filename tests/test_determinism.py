"""A case's numbers do not depend on which process scored it: the serial executor runs with the thread counts of
a forked worker (OpenCV's DIS flow and torch split their work by thread count, which moves the 8th digit)."""

from __future__ import annotations

import cv2

from worldrecall.engine.stages.executor import SerialExecutor


def test_serial_executor_scores_with_one_thread_like_a_worker():
    cv2.setNumThreads(2)
    seen = []
    SerialExecutor().run([[1]], lambda item: seen.append(cv2.getNumThreads()) or [], lambda *a: None,
                         lambda *a: None, None)
    assert seen == [1]

