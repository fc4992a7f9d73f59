"""numpy's BLAS runs on one thread while a run's pools are open, and gets its own count back after."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from edct_task.engine.dispatch import Dispatcher
from edct_task.engine.runtime import SingleThreadedBlas, ThreadRuntime, numpy_blas_libraries


def _threads() -> list[int]:
    ours = set(numpy_blas_libraries())
    return [lib["num_threads"] for lib in threadpool_info() if lib["filepath"] in ours]


@pytest.fixture()
def two_blas_threads(monkeypatch):
    np.ones((2, 2)) @ np.ones((2, 2))  # numpy's BLAS is loaded
    # no holder left by an earlier test's runtime (restored afterwards)
    monkeypatch.setattr(SingleThreadedBlas, "_holders", 0)
    monkeypatch.setattr(SingleThreadedBlas, "_limiter", None)
    if not numpy_blas_libraries():
        pytest.skip("numpy uses a BLAS outside its own installation (not limited)")
    with threadpool_limits(limits=2, user_api="blas"):
        if _threads() != [2]:
            pytest.skip("numpy's BLAS cannot run two threads here")
        yield


def test_one_thread_while_runtimes_are_open_then_restored(two_blas_threads) -> None:
    first = ThreadRuntime(lambda _pool: None)
    second = ThreadRuntime(lambda _pool: None)
    assert _threads() == [1]
    first.close()
    first.close()  # idempotent: one release per runtime
    assert _threads() == [1]  # the second still holds the limit
    second.close()
    assert _threads() == [2]


def test_a_dispatcher_holds_the_limit_for_its_lifetime(two_blas_threads) -> None:
    with Dispatcher({}, None):
        assert _threads() == [1]
    assert _threads() == [2]


def test_a_new_holder_limits_again_what_was_raised_meanwhile(two_blas_threads) -> None:
    first = ThreadRuntime(lambda _pool: None)
    with threadpool_limits(limits=2, user_api="blas"):  # someone else raises it while a run is open
        second = ThreadRuntime(lambda _pool: None)
        assert _threads() == [1]
        second.close()
    first.close()
    assert _threads() == [2]


def test_only_numpys_own_library_is_named() -> None:
    import numpy

    libraries = numpy_blas_libraries()
    assert all("numpy" in path for path in libraries)
    assert not any("torch" in path for path in libraries)
    assert libraries or not any("numpy" in lib["filepath"] for lib in threadpool_info()), numpy.__file__
