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
from . import _causalflow
from ._causalflow import __version__, git_revision
from . import graph, influence, model, probe, rollout, spectral, train

__all__ = ["__version__", "git_revision", "graph", "influence", "model", "probe", "rollout", "spectral", "train"]
