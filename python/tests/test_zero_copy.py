"""Arrays returned by the module view the C++ results: no copy (the array does not own its data,
its base is the capsule that owns the C++ object), writeable, and freed with the last reference
(no memory growth over 1,000 calls)."""
import gc
import os

import numpy as np
import pytest

from causalflow import graph, rollout


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def arrays():
    yield graph.coverage_map(graph.Pattern("se-bridge", b=64))
    yield graph.closure_sizes("swa", 1000, b=8, w=8, layers=3)
    c = graph.closure("pbb", 100, b=16)
    yield c["offsets"]
    yield c["intervals"]
    yield graph.dense_mask(graph.Pattern("block", b=4), 16)
    yield from rollout.rollout(model="mpt-7b", n=64).values()
    yield rollout.kernels(n=16, model="bloom-7b1")[0]
    yield rollout.sweep(n=[16, 32], model="bloom")["p_first"]


@pytest.mark.parametrize("i", range(10))
def test_no_copy_flags(i):
    a = list(arrays())[i]
    assert isinstance(a, np.ndarray)
    assert a.flags.owndata is False
    assert a.base is not None
    assert type(a.base).__name__ == "PyCapsule"
    assert a.flags.writeable
    assert a.flags.c_contiguous or a.flags.f_contiguous


def test_large_result_is_not_copied():
    # a 65,536-point profile (512 KB each, three of them) and a 1 MB+ coverage map: the array's
    # data pointer stays the capsule's memory; views keep it alive after the dict is gone
    p = rollout.rollout(model="bloom", n=65536)["residual"]
    assert p.nbytes == 65536 * 8 and p.flags.owndata is False
    C = graph.coverage_map(graph.Pattern("swa", b=1024, w=1024), d_max=1100)
    assert C.nbytes > 1 << 20 and C.flags.owndata is False
    v = C[10:20]
    del C
    gc.collect()
    assert v.base is not None and int(v.sum()) >= 0  # still readable: the capsule lives


def test_no_memory_growth_over_1000_calls():
    pat = graph.Pattern("se-bridge", b=256)
    for _ in range(50):  # warm up allocator pools
        graph.coverage_map(pat)
        rollout.rollout(model="mpt-7b", n=256)
    gc.collect()
    before = rss_bytes()
    for _ in range(1000):
        C = graph.coverage_map(pat)  # 513 x 256 bytes
        d = rollout.rollout(model="mpt-7b", n=256)  # 3 x 2 KB
        del C, d
    gc.collect()
    grown = rss_bytes() - before
    # a leak of the coverage map alone would be 1000 x 131 KB = 131 MB
    assert grown < 8 << 20, f"RSS grew by {grown} bytes over 1,000 calls"
