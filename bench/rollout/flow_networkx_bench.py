#!/usr/bin/python3
"""Attention flow benchmark, causalflow beside networkx in the same run (issue 34, acceptance 2).

Runs bench_flow (C++: the layered solver and Boost.Graph's two) and networkx.maximum_flow_value (the algorithm of Abnar &
Zuidema's public code: preflow-push on a DiGraph of the layered attention graph) on the SAME
residual-mixed kernels (bench_flow writes them), n = 256, L = 12, sources to the last position.
networkx is too slow for all 256 sources in a shared session: it is timed on SAMPLES evenly spaced
sources j = floor(k n / SAMPLES) (a stratified sample of the graph sizes (n - j)^2), its flows are
checked against causalflow's to 1e-9 relative, and its all-sources time is EXTRAPOLATED as
n * mean(sampled times) (stated as such). causalflow is timed on all sources and on the same sample.
Then causalflow alone at n = 2048: the layered solver on all sources with --n2048-threads OpenMP
threads, and Boost push-relabel on --n2048-samples evenly spaced sources (0: skipped) with as many.
Usage: flow_networkx_bench.py BENCH_FLOW [--samples 8] [--n2048-samples 8] [--threads 1] [--n2048-threads 2]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import networkx as nx
import numpy as np


def run(cmd, env):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {r.stderr}")
    return r.stdout, wall


def table_seconds(out, alg):
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == alg:
            return float(parts[1]), float(parts[2])
    sys.exit(f"no {alg} row in:\n{out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench_flow")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--n2048-samples", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n2048-threads", type=int, default=2)
    a = ap.parse_args()
    env = dict(os.environ)
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(k, None)
    env["OMP_NUM_THREADS"] = str(a.threads)
    n, L, S = a.n, a.layers, a.samples
    cpu = subprocess.run(["sh", "-c", "lscpu | grep 'Model name'"], capture_output=True, text=True).stdout.strip()
    print(f"# {cpu}; load average before: {os.getloadavg()}; causalflow threads: {a.threads}")
    with tempfile.TemporaryDirectory() as tmp:
        kf, ff = os.path.join(tmp, "R.txt"), os.path.join(tmp, "flows.txt")
        out_all, _ = run([a.bench_flow, str(n), str(L), "0", "layered,bk,push-relabel", kf, ff], env)
        print(out_all)
        out_s, _ = run([a.bench_flow, str(n), str(L), str(S)], env)
        print(out_s)
        flows = {int(j): float(f) for j, f in (line.split() for line in open(ff))}
        R = np.loadtxt(kf).reshape(L, n, n)
    G = nx.DiGraph()
    for l in range(1, L + 1):
        K = R[l - 1]
        for i in range(n):
            for j in range(i + 1):
                if K[i, j] > 0:
                    G.add_edge((l - 1, j), (l, i), capacity=float(K[i, j]))
    srcs = [k * n // S for k in range(S)]
    times, cpus, worst = [], [], 0.0
    for j in srcs:
        t0, c0 = time.perf_counter(), time.process_time()
        f = nx.maximum_flow_value(G, (0, j), (L, n - 1))
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        err = abs(f - flows[j]) / max(abs(f), 1e-300)
        worst = max(worst, err)
        print(f"networkx source {j:4d}: {times[-1]:8.2f} s wall, {cpus[-1]:8.2f} s cpu, flow {f:.12g} (causalflow {flows[j]:.12g}, rel {err:.2g})")
        if err > 1e-9:
            sys.exit("FAIL: networkx and causalflow differ beyond 1e-9")
    nx_sample, nx_sample_cpu = sum(times), sum(cpus)
    nx_all, nx_all_cpu = n * (nx_sample / S), n * (nx_sample_cpu / S)
    res = {}
    for alg in ("layered", "bk", "push-relabel"):
        res[alg] = (table_seconds(out_all, alg), table_seconds(out_s, alg))
    print(f"\nn = {n}, L = {L}: networkx on {S} sampled sources {nx_sample:.1f} s wall / {nx_sample_cpu:.1f} s cpu "
          f"(measured); all {n} sources {nx_all:.0f} s wall / {nx_all_cpu:.0f} s cpu (EXTRAPOLATED as n x mean)")
    for alg, ((wall_all, cpu_all), (wall_s, cpu_s)) in res.items():
        print(f"  causalflow {alg:13s}: sample {wall_s:.3f} s wall / {cpu_s:.3f} s cpu ({nx_sample / wall_s:.0f}x / "
              f"{nx_sample_cpu / cpu_s:.0f}x networkx, measured); all sources {wall_all:.3f} s wall / {cpu_all:.3f} s "
              f"cpu ({nx_all / wall_all:.0f}x / {nx_all_cpu / cpu_all:.0f}x the extrapolated networkx)")
    print(f"  worst relative difference networkx vs causalflow: {worst:.2g}")
    env["OMP_NUM_THREADS"] = str(a.n2048_threads)
    print(f"# n = 2048, {a.n2048_threads} thread(s); load average before: {os.getloadavg()}")
    out_big, _ = run([a.bench_flow, "2048", str(L), "0", "layered"], env)
    print(out_big)
    if a.n2048_samples > 0:
        out_pr, _ = run([a.bench_flow, "2048", str(L), str(a.n2048_samples), "layered,push-relabel"], env)
        print(out_pr)
    print(f"# load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
