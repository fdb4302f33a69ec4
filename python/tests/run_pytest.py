#!/usr/bin/env python3
"""Run one test file of the Python module with pytest (CTest calls this; python/tests/tests.cmake).

Exit codes: pytest's own, except that "no tests collected" (5) becomes 1 (a test that runs nothing
must not pass), and a missing dependency (pytest, numpy) gives 77 (CTest SKIP) unless the
environment variable CI is "true", where it fails (1) naming the missing package."""
import os
import sys


def missing(what, hint):
    msg = f"python tests: {what} is not importable under {sys.executable} ({hint})"
    if os.environ.get("CI") == "true":
        print(msg + "; CI=true: failing", file=sys.stderr)
        sys.exit(1)
    print(msg + "; skipping", file=sys.stderr)
    sys.exit(77)


def main():
    if len(sys.argv) != 2:
        print("usage: run_pytest.py TEST_FILE", file=sys.stderr)
        return 2
    try:
        import pytest
    except ImportError:
        missing("pytest", "Debian package python3-pytest")
    try:
        import numpy  # noqa: F401
    except ImportError:
        missing("numpy", "Debian package python3-numpy")
    try:
        import h5py  # noqa: F401  (test_model reads capture files with it)
    except ImportError:
        missing("h5py", "Debian package python3-h5py")
    rc = pytest.main(["-q", "-p", "no:cacheprovider", sys.argv[1]])
    if rc == 5:
        print(f"python tests: no tests collected from {sys.argv[1]}", file=sys.stderr)
        return 1
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
