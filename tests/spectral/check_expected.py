#!/usr/bin/python3
"""Compare `spectral --format json` weight-level head metrics with numpy's dense oracle.
Usage: check_expected.py REPORT.json EXPECTED.json   (exit 0 when every head agrees to 1e-6 rel;
the checkpoint stores float32, both sides read the same float32 values and compute in double)."""
import json
import sys

rep = json.load(open(sys.argv[1]))
exp = json.load(open(sys.argv[2]))
got = {(h["layer"], h["head"]): h for h in rep["weight"]["heads"]}
bad = 0
for e in exp["heads"]:
    g = got[(e["layer"], e["head"])]
    for k in ("rho", "erank_R", "erank_F", "max_re_lambda"):
        tol = 1e-6 * max(1.0, abs(e[k]))
        if abs(g[k] - e[k]) > tol:
            print(f"layer {e['layer']} head {e['head']} {k}: spectral {g[k]} numpy {e[k]}")
            bad += 1
print(f"{len(exp['heads'])} heads compared, {bad} mismatches")
sys.exit(1 if bad else 0)
