#!/usr/bin/env python3
"""Overhead of the Python bindings against the same C++ calls (docs/benchmarks.md "Python bindings").

Run from the repository root after building the module and bench_binding_cpp:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 PYTHONPATH=build/python \\
        /usr/bin/python3 bench/python/bench_bindings.py [--bench build/bench/bin/bench_binding_cpp]

Both sides run with the same environment (the C++ binary inherits it); on a shared, loaded machine
OMP_NUM_THREADS=1 keeps OpenMP oversubscription (10x slower calls at load 8 with 2 threads) out of
the comparison. Each case is measured in three alternating rounds (binding, C++, binding, C++, ...)
and the best median of each side is reported.

For each case it times the binding call (median of REPS calls, wall clock, time.perf_counter) and runs
bench_binding_cpp for the same library call (median of REPS calls) right after, on the same machine in
the same run, and prints both, their ratio, the result size and whether the returned array is a view
(owndata False, capsule base: no copy). The CPU model and the load average are printed with them."""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

import causalflow
from causalflow import graph, rollout

CASES = {
    # name: (binding call, array to check, reps)
    "coverage_map": (lambda: graph.coverage_map(graph.Pattern("se-bridge", b=128)), lambda r: r, 2000),
    "closure_sizes": (lambda: graph.closure_sizes("swa", 262144, layers=4, b=128), lambda r: r, 20),
    "rollout": (lambda: rollout.rollout(model="bloom", n=65536), lambda r: r["residual"], 5),
}


def cpu_model():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="build/bench/bin/bench_binding_cpp", help="path of bench_binding_cpp")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every REPS (e.g. 0.2 for a quick run)")
    a = ap.parse_args()
    for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if v in os.environ:
            sys.exit(f"unset {v} first (both sides must run alike): env -u {v} ...")
    print(f"# causalflow {causalflow.__version__} ({causalflow.git_revision}), CPU: {cpu_model()}, "
          f"{os.cpu_count()} cores, load average before: {os.getloadavg()[0]:.2f}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    print("| case | result | binding wall | C++ wall | wall ratio | binding CPU | C++ CPU | CPU ratio "
          "| binding - C++ (CPU) | array is a view | a copy of the result would cost |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, (call, arr_of, reps) in CASES.items():
        reps = max(3, int(reps * a.scale))
        call()  # warm-up: presets read, pages touched
        py_rounds, cpp_rounds, pyc_rounds, cppc_rounds = [], [], [], []
        for _ in range(3):
            t, c = [], []
            for _ in range(reps):
                c0, t0 = time.process_time(), time.perf_counter()
                r = call()
                t.append(time.perf_counter() - t0)
                c.append(time.process_time() - c0)
                del r
            py_rounds.append(statistics.median(t))
            pyc_rounds.append(statistics.median(c))
            out = subprocess.run([a.bench, name, str(reps)], capture_output=True, text=True, check=True).stdout
            cpp = json.loads(out)
            cpp_rounds.append(cpp["median_s"])
            cppc_rounds.append(cpp["median_cpu_s"])
        py, pyc = min(py_rounds), min(pyc_rounds)
        cpp["median_s"], cppc = min(cpp_rounds), min(cppc_rounds)
        arr = arr_of(call())
        view = arr.flags.owndata is False and type(arr.base).__name__ == "PyCapsule"
        size = cpp["result_bytes"]
        res = call()
        arrays = list(res.values()) if isinstance(res, dict) else [res]
        tc = []
        for _ in range(max(3, reps)):
            t0 = time.perf_counter()
            for x in arrays:
                x.copy()
            tc.append(time.perf_counter() - t0)
        copy_cost = statistics.median(tc)
        unit = (lambda s: f"{s * 1e6:.1f} us") if py < 1e-2 else (lambda s: f"{s * 1e3:.2f} ms")
        print(f"| {name} | {size / 1024:.0f} KiB | {unit(py)} | {unit(cpp['median_s'])} | "
              f"{py / cpp['median_s']:.3f} | {unit(pyc)} | {unit(cppc)} | {pyc / cppc:.3f} | "
              f"{(pyc - cppc) * 1e6:+.1f} us | {view} | {copy_cost * 1e6:.1f} us |")
    print(f"# load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
