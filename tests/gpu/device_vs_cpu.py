#!/usr/bin/env python3
"""A whole tool on the emulated device against the CPU analyser (issue 30 acceptance 1).

Usage: device_vs_cpu.py RTOL ATOL -- TOOL ARGS...
Runs `TOOL ARGS --format json --device cpu` and `CF_GPU_EMULATE=1 TOOL ARGS --format json --device
cuda`, and compares the two JSON reports entry by entry: every number within ATOL + RTOL |cpu|,
every string, integer count and key equal. Left out: "meta" (timestamps; the device is named there)
and "seconds" (wall times). Prints the worst relative difference; exit 1 naming the first entry
that differs, or either run failing.
"""
import json
import os
import subprocess
import sys

rtol, atol = float(sys.argv[1]), float(sys.argv[2])
cmd = sys.argv[4:] if sys.argv[3] == "--" else sys.argv[3:]


def run(device, emulate):
    env = dict(os.environ)
    env.pop("CF_GPU_EMULATE", None)
    if emulate:
        env["CF_GPU_EMULATE"] = "1"
    p = subprocess.run(cmd + ["--format", "json", "--device", device], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"--device {device} run failed (exit {p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)


cpu, dev = run("cpu", False), run("cuda", True)
worst = [0.0, ""]
count = [0]


def compare(a, b, path):
    if isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            sys.exit(f"{path}: keys differ: {sorted(a) if isinstance(a, dict) else a} vs {b if not isinstance(b, dict) else sorted(b)}")
        for k in a:
            if k not in ("meta", "seconds"):
                compare(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            sys.exit(f"{path}: lengths differ")
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, f"{path}[{i}]")
    elif isinstance(a, bool) or isinstance(a, str) or a is None:
        if a != b:
            sys.exit(f"{path}: cpu {a!r} != device {b!r}")
    elif isinstance(a, (int, float)):
        if not isinstance(b, (int, float)) or isinstance(b, bool):
            sys.exit(f"{path}: cpu {a!r} vs device {b!r}")
        count[0] += 1
        d = abs(a - b)
        if d > atol + rtol * abs(a):
            sys.exit(f"{path}: cpu {a!r} vs device {b!r} (difference {d:.3g} > {atol:g} + {rtol:g} |cpu|)")
        rel = d / abs(a) if a != 0 else d
        if rel > worst[0]:
            worst[:] = [rel, path]
    else:
        sys.exit(f"{path}: unexpected JSON value {a!r}")


compare(cpu, dev, "")
if count[0] == 0:
    sys.exit("no numbers compared")
print(f"ok: device = cpu, {count[0]} numbers, worst relative difference {worst[0]:.3g} at {worst[1] or '-'}")
