"""causalflow.influence (the extension's submodule; see influence.pyi for signatures, shapes and references)."""
from ._causalflow import influence as _ext
from ._reexport import reexport as _reexport

_reexport(globals(), _ext)
