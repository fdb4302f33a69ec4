"""Long computations release the GIL: Python code in another thread runs while they run."""
import threading
import time

from causalflow import graph, rollout


def progress_during(work):
    done = threading.Event()
    t = threading.Thread(target=lambda: (work(), done.set()))
    t.start()
    time.sleep(0.01)  # let the worker enter the C++ call
    ticks = 0
    while not done.is_set():
        ticks += 1  # pure Python: needs the GIL
        time.sleep(0)
    t.join()
    return ticks


def test_rollout_releases_the_gil():
    # BLOOM-176B at n = 65,536: about half a second of C++; the main thread keeps running meanwhile
    assert progress_during(lambda: rollout.rollout(model="bloom", n=65536)) > 100


def test_closure_releases_the_gil():
    assert progress_during(lambda: graph.closure_sizes("swa", 1 << 19, layers=8, b=128)) > 100


def test_sweep_callback_runs_with_the_gil():
    seen = []
    rollout.sweep(n=[32, 64, 128], model="mpt-7b", progress=lambda d, t: seen.append(threading.get_ident()))
    assert seen == [threading.get_ident()] * 3
