"""causalflow.spectral (the extension's submodule; see spectral.pyi for signatures, shapes and references)."""
from ._causalflow import spectral as _ext
from ._reexport import reexport as _reexport

_reexport(globals(), _ext)
