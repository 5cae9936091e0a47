"""A case's numbers do not depend on which process scored it: the serial executor runs with the thread counts of
a forked worker (OpenCV's DIS flow and torch split their work by thread count, which moves the 8th digit)."""

from __future__ import annotations

import os

import cv2
import pytest

from worldrecall.engine.stages.executor import SerialExecutor


def test_serial_executor_scores_with_one_thread_like_a_worker():
    cv2.setNumThreads(2)
    seen = []
    SerialExecutor().run([[1]], lambda item: seen.append(cv2.getNumThreads()) or [], lambda *a: None,
                         lambda *a: None, None)
    assert seen == [1]



class _NoCounters:
    """Counter hooks that count nothing (the executors' contract, for runs of bare work functions)."""

    def reset_counters(self): ...
    def snapshot(self): return {}
    def merge(self, other): ...
    def learnt(self): return {}
    def learn(self, entries): ...


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

        def work(item):  # in the forked worker: a worker dies (and reports it) unless it has one BLAS thread
            if set(_blas_threads()) != {1}:
                os._exit(3)
            return []

        got, died = [], []
        ForkExecutor(1).run([[1]], work, lambda item, rows: got.append(item),
                            lambda item, why: died.append(why) or [], _NoCounters())
        assert (got, died) == ([1], [])


@pytest.mark.timeout(120)
def test_workers_fork_cleanly_after_this_process_ran_opencv_with_its_thread_pool():
    """A large OpenCV call here starts OpenCV's pool; a worker forked after it sets one thread (as every worker
    does) and must not wait forever for pool threads it does not have. The pool is stopped while workers are
    forked and given back after."""
    import numpy as np

    from worldrecall.engine.stages.executor import ForkExecutor

    cv2.setNumThreads(2)
    big = np.random.default_rng(0).integers(0, 255, (2000, 2000, 3), dtype=np.uint8)
    cv2.GaussianBlur(big, (31, 31), 5)  # the pool's threads now exist in this process

    got, died = [], []
    ForkExecutor(2).run([[1], [2]], lambda item: [], lambda item, rows: got.append(item),
                        lambda item, why: died.append(why) or [], _NoCounters())
    assert sorted(got) == [1, 2] and died == []
    assert cv2.getNumThreads() == 2  # this process's own setting is back
