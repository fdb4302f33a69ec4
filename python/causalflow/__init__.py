"""causalflow: information flow in causal transformers, from Python.

The C++ libraries of causalflow as numpy-returning functions, one submodule per library:

* ``causalflow.graph``   -- masks, schedules, closures R_L(t), coverage maps C(d, r), score counts,
  accuracy bounds (Boundary repair (Yang)).
* ``causalflow.rollout`` -- residual-aware rollout, presets, model configs, variants, sweeps,
  monotonicity, dichotomy (Position bias (Herasimchyk et al.)); Jacobian bound (Runway (Lee & Clark)).
* ``causalflow.spectral`` -- routing/filtering decomposition M = F + R, per-head metrics, the spectral
  cascade of a checkpoint, surgery (Routing/filtering (Jamil & Kapadia)).
* ``causalflow.model`` -- load a checkpoint or Hugging Face folder, tokenise, logits, capture.
* ``causalflow.influence`` -- measured influence (Eq. 6 of Position bias), Jacobian blocks.
* ``causalflow.probe`` -- exact McNemar, binomial tests, paired bootstrap.
* ``causalflow.train`` -- train a config on text or token files with a Python callback per step.

Bad input raises ValueError (the command-line tools exit 2 with the same message), runtime
failures RuntimeError (exit 1). Arrays returned are views of the C++ results (no copy).
See docs/python.md.
"""
import sys as _sys

try:
    import numpy as _numpy  # noqa: F401  (every result is a numpy array)
except ImportError:  # e.g. a pyenv / venv interpreter first on PATH instead of /usr/bin/python3
    import warnings as _warnings

    _warnings.warn(f"causalflow: numpy is not importable under {_sys.executable}: every function that returns "
                   "an array will fail; run /usr/bin/python3 (Debian's python3-numpy), the interpreter the "
                   "module is built for (docs/python.md)", RuntimeWarning, stacklevel=2)
try:
    from . import _causalflow
except ImportError as _e:
    raise ImportError(f"causalflow's extension does not load into {_sys.executable} (Python "
                      f"{_sys.version.split()[0]}): it is built for /usr/bin/python3 unless CMake was given "
                      f"-DCF_PYTHON_EXECUTABLE (docs/python.md); {_e}") from _e
from ._causalflow import __version__, git_revision
from . import graph, influence, model, probe, rollout, spectral, train

__all__ = ["__version__", "git_revision", "graph", "influence", "model", "probe", "rollout", "spectral", "train"]
