"""Shared helpers of the Python module's tests: run a built tool with --format json."""
import json
import os
import subprocess

import pytest


def tool(name):
    """Path of a built causalflow tool (CF_BIN is set by CTest to the tools' folder)."""
    bin_dir = os.environ.get("CF_BIN")
    if not bin_dir:
        pytest.fail("CF_BIN is not set: run these tests through CTest (python/tests/tests.cmake)")
    path = os.path.join(bin_dir, name)
    if not os.path.exists(path):
        pytest.fail(f"tool {path} is not built")
    return path


def cli_json(name, *args):
    """The JSON report of `name args --format json` (exit 0 required) as {'meta': ..., 'body': ...}:
    a report's JSON is its `meta` object followed by the body's keys (docs/conventions.md)."""
    r = subprocess.run([tool(name), *map(str, args), "--format", "json", "--quiet"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{name} {' '.join(map(str, args))} exited {r.returncode}: {r.stderr}"
    j = json.loads(r.stdout)
    meta = j.pop("meta")
    return {"meta": meta, "body": j}


def cli_error(name, *args):
    """(exit code, stderr) of a tool run that is expected to fail."""
    r = subprocess.run([tool(name), *map(str, args), "--format", "json", "--quiet"],
                       capture_output=True, text=True, timeout=600)
    return r.returncode, r.stderr
