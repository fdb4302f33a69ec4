#!/usr/bin/env python3
"""Every Catch2 TEST_CASE in tests/ runs under CTest (issue 29).

1. Reads every TEST_CASE name from the sources under tests/ (adjacent string literals joined).
   A name with ';' is an error: CTest's discovery splits it, Catch2 matches nothing and exits 0.
2. Lists the CTest tests of this build (`ctest --show-only=json-v1`) and each Catch2 executable's
   own cases (`EXE --list-test-names-only`).
3. Every case compiled into an executable must be run by CTest: either the executable runs whole
   (a CTest whose command has no test-name argument) or a discovered CTest names exactly that case.
4. Every TEST_CASE of the sources must be compiled into some executable of the build, except the
   device programs listed in DEVICE_ONLY when this build has no CUDA (they are built only with it).
Prints the counts; exit 1 with the offending names otherwise.
Usage: check_discovery.py SOURCE_DIR BUILD_DIR
"""
import json, os, re, subprocess, sys

src, build = sys.argv[1], sys.argv[2]
DEVICE_ONLY = {"tests/gpu/test_gpu_device.cpp", "tests/gpu/test_gpu_train_device.cpp"}

lit = re.compile(r'"((?:[^"\\]|\\.)*)"')


def source_cases():
    cases = {}
    for root, _, files in os.walk(os.path.join(src, "tests")):
        for f in files:
            if not f.endswith((".cpp", ".hpp")):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src)
            text = open(path, encoding="utf-8").read()
            for m in re.finditer(r'\bTEST_CASE\s*\(', text):
                i, parts = m.end(), []
                while True:
                    while i < len(text) and text[i].isspace():
                        i += 1
                    mm = lit.match(text, i)
                    if not mm:
                        break
                    parts.append(bytes(mm.group(1), "utf-8").decode("unicode_escape").encode("latin-1").decode("utf-8"))
                    i = mm.end()
                if parts:
                    cases.setdefault("".join(parts), []).append(rel)
    return cases


def main():
    errors = []
    cases = source_cases()
    for name, where in cases.items():
        if ";" in name:
            errors.append(f"';' in a test name (CTest splits it): {name!r} in {where[0]}")
        if len(where) > 1:
            errors.append(f"test name defined twice: {name!r} in {', '.join(where)}")
    info = json.loads(subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True,
                                     text=True, check=True).stdout)
    whole, named = set(), {}
    for t in info.get("tests", []):
        cmd = t.get("command") or []
        if not cmd:
            continue
        exe = os.path.realpath(cmd[0])
        named.setdefault(exe, set())
        if len(cmd) == 1 or cmd[1].startswith("-"):
            whole.add(exe)
        else:
            # catch_discover_tests escapes Catch2's special characters with a backslash
            named[exe].add(re.sub(r"\\(.)", r"\1", cmd[1]))
    compiled, run_count = set(), 0
    for exe in sorted(named):
        if not os.access(exe, os.X_OK) or not os.path.basename(exe).startswith("test_"):
            continue
        r = subprocess.run([exe, "--list-test-names-only"], capture_output=True, text=True)
        if r.returncode < 0:
            continue
        listed = [l.strip() for l in r.stdout.splitlines() if l.strip()]
        for case in listed:
            compiled.add(case)
            if exe in whole or case in named[exe]:
                run_count += 1
            else:
                errors.append(f"{os.path.basename(exe)}: {case!r} is compiled but no CTest runs it")
    # the device programs exit 77 before listing their cases on a machine without a GPU: they count
    # as run when CTest runs them whole (CUDA builds), and are not built at all without CUDA
    device_whole = {os.path.basename(e) for e in whole} & {"test_gpu_device", "test_gpu_train_device"}
    missing = []
    for name, where in cases.items():
        if name in compiled:
            continue
        if all(w in DEVICE_ONLY for w in where):
            exe = os.path.splitext(os.path.basename(where[0]))[0]
            if exe in device_whole or not any(os.path.basename(e) == exe for e in named):
                continue
        missing.append(f"{name!r} ({where[0]}) is not compiled into any test executable CTest knows")
    errors += missing
    print(f"{len(cases)} TEST_CASEs in tests/, {len(compiled)} compiled, {run_count} run by CTest")
    if errors:
        print("\n".join(errors))
        return 1
    return 0


sys.exit(main())
