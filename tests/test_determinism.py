"""A case's numbers do not depend on which process scored it: the serial executor runs with the thread counts of
a forked worker (OpenCV's DIS flow and torch split their work by thread count, which moves the 8th digit)."""

from __future__ import annotations

import os

import cv2

from worldrecall.engine.stages.executor import SerialExecutor


def test_serial_executor_scores_with_one_thread_like_a_worker():
    cv2.setNumThreads(2)
    seen = []
    SerialExecutor().run([[1]], lambda item: seen.append(cv2.getNumThreads()) or [], lambda *a: None,
                         lambda *a: None, None)
    assert seen == [1]



def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]


def test_workers_use_one_blas_thread_and_the_serial_run_gives_the_parents_back():
    # numpy's OpenBLAS spins a helper thread per core after each product: in a worker it would take the
    # other worker's core. One BLAS thread while scoring; the serial executor restores the parent's after
    from threadpoolctl import threadpool_limits

    from worldrecall.engine.stages.executor import ForkExecutor

    with threadpool_limits(2, user_api="blas"):
        assert set(_blas_threads()) == {2}
        seen = []
        SerialExecutor().run([[1]], lambda item: seen.append(_blas_threads()) or [], lambda *a: None,
                             lambda *a: None, None)
        assert seen == [[1] * len(seen[0])] and seen[0]
        assert set(_blas_threads()) == {2}

        class Counters:
            def reset_counters(self): ...
            def snapshot(self): return {}
            def merge(self, other): ...
            def learnt(self): return {}
            def learn(self, entries): ...

        def work(item):  # in the forked worker: a worker dies (and reports it) unless it has one BLAS thread
            if set(_blas_threads()) != {1}:
                os._exit(3)
            return []

        got, died = [], []
        ForkExecutor(1).run([[1]], work, lambda item, rows: got.append(item),
                            lambda item, why: died.append(why) or [], Counters())
        assert (got, died) == ([1], [])
