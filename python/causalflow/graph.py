"""Attention masks as graphs, closures R_L(t), coverage maps, score counts and bounds
(Boundary repair (Yang)). See graph.pyi for the signatures and shapes."""
from ._causalflow import graph as _ext
from ._reexport import reexport as _reexport

_reexport(globals(), _ext)
