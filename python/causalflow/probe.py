"""causalflow.probe (the extension's submodule; see probe.pyi for signatures, shapes and references)."""
from ._causalflow import probe as _ext
from ._reexport import reexport as _reexport

_reexport(globals(), _ext)
