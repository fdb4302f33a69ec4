"""causalflow.model (the extension's submodule; see model.pyi for signatures, shapes and references)."""
from ._causalflow import model as _ext
from ._reexport import reexport as _reexport

_reexport(globals(), _ext)
