"""mxkit_cuda.cudnn.cached: handles, plans, descriptors and workspaces are each made once, however many
engine threads meet a new key at the same moment (runs without a GPU: nothing here calls CUDA)."""

from __future__ import annotations

import threading
import time

from mxkit_cuda.cudnn import cached


def test_a_key_is_made_once_by_racing_threads_and_kept():
    cache: dict = {}
    made: list[int] = []
    start = threading.Barrier(8)

    def make():
        made.append(1)
        time.sleep(0.01)  # a slow maker widens the race
        return object()

    results = []

    def ask():
        start.wait()
        results.append(cached(cache, ("conv", 3), make))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1
    assert all(result is results[0] for result in results)
    assert cached(cache, ("conv", 3), make) is results[0] and len(made) == 1
    assert cached(cache, ("conv", 4), make) is not results[0] and len(made) == 2


def test_a_maker_may_ask_for_another_key_inside():
    # a convolution plan made under the lock makes the device's handle under it too
    cache: dict = {}
    outer = cached(cache, "plan", lambda: ("plan", cached(cache, "handle", lambda: "handle")))
    assert outer == ("plan", "handle") and cache["handle"] == "handle"
