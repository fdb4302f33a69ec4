#!/usr/bin/env python3
"""A whole tool on the emulated device against the CPU analyser (issue 30 acceptance 1).

Usage: device_vs_cpu.py RTOL ATOL [--h5 PREFIX | --csv PREFIX] [--device-arg ARG]... -- TOOL ARGS...
Runs `TOOL ARGS --format json --device cpu` and `CF_GPU_EMULATE=1 TOOL ARGS --format json --device
cuda` (on a machine with a GPU, CF_DEVICE_VS_CPU_EMULATE=0 runs the real device instead:
scripts/device/analysers.py), and compares the two JSON reports entry by entry: every number within ATOL + RTOL |cpu|,
every string, integer count and key equal. Left out: "meta" (timestamps; the device is named there)
and "seconds" (wall times). Prints the worst relative difference; exit 1 naming the first entry
that differs, or either run failing.

With --h5 PREFIX, the tool writes an HDF5 file (capture's --out): the argument @OUT@ in ARGS
becomes PREFIX_cpu.h5 and PREFIX_cuda.h5 (removed first: they are this script's own outputs), the
reports' strings are compared with those names put back to @OUT@, and the two files are compared
too: the same groups, datasets (shape, dtype) and attributes (numbers as the reports'; the others
equal); integer datasets equal, float ones
within ATOL + RTOL max |cpu| of the dataset (float32 round-off is relative to a tensor's scale, not
to each of its entries: a probability of 1e-9 carries the absolute error of its row).

With --csv PREFIX, the same for a headerless CSV of numbers the tool writes (rollout's --matrix):
@OUT@ becomes PREFIX_cpu.csv and PREFIX_cuda.csv, and the two files are compared entry by entry
as the reports' numbers (within ATOL + RTOL |cpu| each).

Each --device-arg ARG is appended to the device run only (e.g. `--precision bf16`: a policy the CPU
refuses); for --precision P the device report's meta (or meta.params) must say precision P.
"""
import json
import os
import subprocess
import sys

rtol, atol = float(sys.argv[1]), float(sys.argv[2])
rest = sys.argv[3:]
file_prefix, file_ext = None, None
if rest and rest[0] in ("--h5", "--csv"):
    file_ext, file_prefix, rest = rest[0][2:], rest[1], rest[2:]
device_args = []
while rest and rest[0] == "--device-arg":
    device_args, rest = device_args + [rest[1]], rest[2:]
cmd = rest[1:] if rest and rest[0] == "--" else rest


def out_file(device):
    return f"{file_prefix}_{device}.{file_ext}"


def run(device, emulate):
    env = dict(os.environ)
    env.pop("CF_GPU_EMULATE", None)
    if emulate:
        env["CF_GPU_EMULATE"] = "1"
    args = cmd
    if file_prefix:
        if os.path.exists(out_file(device)):
            os.remove(out_file(device))
        args = [out_file(device) if a == "@OUT@" else a for a in cmd]
    extra = device_args if device != "cpu" else []
    p = subprocess.run(args + extra + ["--format", "json", "--device", device], env=env, capture_output=True,
                       text=True)
    if p.returncode != 0:
        sys.exit(f"--device {device} run failed (exit {p.returncode}): {p.stderr.strip()}")
    text = p.stdout.replace(out_file(device), "@OUT@") if file_prefix else p.stdout
    return json.loads(text)


cpu, dev = run("cpu", False), run("cuda", os.environ.get("CF_DEVICE_VS_CPU_EMULATE", "1") != "0")
if "--precision" in device_args:
    want = device_args[device_args.index("--precision") + 1]
    meta = dev.get("meta", {})
    got = meta.get("precision", meta.get("params", {}).get("precision"))  # capture: meta.params
    if got != want:
        sys.exit(f"the device report's meta says precision {got!r}, not {want!r}")
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


def compare_h5(a_path, b_path):
    """The two HDF5 files: same tree, attributes and dataset shapes / dtypes; values as the docstring says."""
    import h5py
    import numpy as np

    with h5py.File(a_path, "r") as fa, h5py.File(b_path, "r") as fb:
        def walk(ga, gb, path):
            if set(ga.attrs) != set(gb.attrs):
                sys.exit(f"{path}: attributes differ: {sorted(ga.attrs)} vs {sorted(gb.attrs)}")
            for k in ga.attrs:
                x, y = np.asarray(ga.attrs[k]), np.asarray(gb.attrs[k])
                if np.issubdtype(x.dtype, np.floating) and x.shape == y.shape:
                    compare(x.tolist(), y.tolist(), f"{path} attribute {k}")  # numbers: as the reports'
                elif not np.array_equal(x, y):
                    sys.exit(f"{path} attribute {k}: cpu {ga.attrs[k]!r} != device {gb.attrs[k]!r}")
            if set(ga) != set(gb):
                sys.exit(f"{path}: members differ: {sorted(ga)} vs {sorted(gb)}")
            for k in ga:
                a, b, p = ga[k], gb[k], f"{path}/{k}"
                if isinstance(a, h5py.Group):
                    walk(a, b, p)
                    continue
                x, y = a[()], b[()]
                if x.shape != y.shape or x.dtype != y.dtype:
                    sys.exit(f"{p}: cpu {x.shape} {x.dtype} vs device {y.shape} {y.dtype}")
                count[0] += x.size
                if not np.issubdtype(x.dtype, np.floating):
                    if not np.array_equal(x, y):
                        sys.exit(f"{p}: integer values differ")
                    continue
                scale = float(np.max(np.abs(x))) if x.size else 0.0
                d = float(np.max(np.abs(x.astype(np.float64) - y))) if x.size else 0.0
                if not d <= atol + rtol * scale:
                    sys.exit(f"{p}: max |cpu - device| = {d:.3g} > {atol:g} + {rtol:g} max |cpu| ({scale:.3g})")
                rel = d / scale if scale > 0 else d
                if rel > worst[0]:
                    worst[:] = [rel, p]

        walk(fa, fb, "")


def read_csv(path):
    with open(path, encoding="utf-8") as f:
        return [[float(x) for x in line.split(",")] for line in f if line.strip()]


compare(cpu, dev, "")
if file_ext == "h5":
    compare_h5(out_file("cpu"), out_file("cuda"))
elif file_ext == "csv":
    compare(read_csv(out_file("cpu")), read_csv(out_file("cuda")), out_file("cpu"))
if count[0] == 0:
    sys.exit("no numbers compared")
print(f"ok: device = cpu, {count[0]} numbers, worst relative difference {worst[0]:.3g} at {worst[1] or '-'}")
