"""causalflow.train (the extension's submodule; see train.pyi for signatures, shapes and references)."""
from ._causalflow import train as _ext
from ._reexport import reexport as _reexport

_reexport(globals(), _ext)
