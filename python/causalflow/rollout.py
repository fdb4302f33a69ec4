"""Residual-aware attention rollout (Position bias (Herasimchyk et al.)) and the Jacobian bound of
Runway (Lee & Clark). See rollout.pyi for the signatures and shapes."""
from ._causalflow import rollout as _ext
from ._reexport import reexport as _reexport

_reexport(globals(), _ext)
