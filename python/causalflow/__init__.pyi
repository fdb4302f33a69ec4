from . import graph as graph
from . import influence as influence
from . import model as model
from . import probe as probe
from . import rollout as rollout
from . import spectral as spectral
from . import train as train

__version__: str
"""causalflow's version (the CMake project version)."""
git_revision: str
"""`git rev-parse --short HEAD` of the build."""
