"""Measured influence (Position bias (Herasimchyk et al.), Eq. 6) and Jacobian blocks (Runway (Lee & Clark))."""
from typing import Any, Dict, List

import numpy as np
import numpy.typing as npt

from .model import ModelLike, Tokens

def profile(model: ModelLike, text: Tokens, n: int = 0, windows: int = 64, target: str = "probability",
            batch: int = 0) -> Dict[str, Any]:
    """Eq. 6: {'profile' (n,) summing to 1, 'mean_g' (n,), 'per_window' (W, n), 'window_starts' (W,),
    'backward_passes'}; target 'probability' | 'log-probability' | 'logit'; n = 0: min(256, block_size)."""
def layer_attention(model: ModelLike, tokens: Tokens) -> List[npt.NDArray[np.float64]]:
    """Head-mean attention A(l), one (n, n) row-stochastic array per layer."""
def jacobian_blocks(model: ModelLike, tokens: Tokens, L: int = 0, r: int = 1) -> Dict[str, Any]:
    """||d h_d(L+r) / d h_s(L)||: {'frobenius' (n, n), 'spectral' (n, n), 'vjps', 'backward_calls'}."""
