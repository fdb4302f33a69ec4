"""Routing/filtering decomposition of attention, Routing/filtering (Jamil & Kapadia): M = F + R with
F = (M + M^T)/2 (filtering, symmetric) and R = (M - M^T)/2 (routing, skew), rho = ||R||_F / ||F||_F,
effective ranks, max Re lambda(M); per head of a checkpoint (weight or sequence level) and surgery."""
from typing import Any, Dict, Tuple

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]

def split(M: npt.ArrayLike) -> Tuple[F64, F64]:
    """(F, R) of a square M (n, n), Section 2."""
def effective_rank(sigma: npt.ArrayLike, form: str = "entropy") -> float:
    """'entropy': exp(-sum p_i log p_i), p_i = sigma_i / sum sigma; 'participation': (sum sigma)^2 / sum sigma^2."""
def routing_filtering_ratio(norm_R: float, norm_F: float) -> float:
    """rho = ||R||_F / ||F||_F (inf when ||F|| = 0 < ||R||, NaN when both are 0)."""
def analyse(M: npt.ArrayLike, rank_tol: float = 1e-10, eigenvalues: bool = True) -> Dict[str, Any]:
    """Dense metrics of M (n, n): {'n', 'M', 'F', 'R' (each {'sigma' (k,) descending, 'fro', 'erank_entropy',
    'erank_participation', 'numerical_rank'}), 'rho', 'max_re_lambda', 'lambda_tol', 'unstable', 'method'}."""
def analyse_factored(A: npt.ArrayLike, B: npt.ArrayLike, scale: float = 1.0, rank_tol: float = 1e-10,
                     eigenvalues: bool = True) -> Dict[str, Any]:
    """Metrics of M = scale A B^T (A, B: (m, r)) without forming M; same dict as analyse()."""
def analyse_checkpoint(checkpoint: str, level: str = "weight", layers: str = "all", eigenvalues: bool = True,
                       texts: str = "", tokenizer: str = "auto", max_tokens: int = 1024) -> Dict[str, Any]:
    """{'weight': ..., 'sequence': ...}: the `spectral --format json` body sections ('heads', 'layers' = the
    spectral cascade, 'summary') plus 'columns' (per-head arrays 'layer', 'head', 'rho', 'erank_R', 'erank_F',
    'pr_R', 'pr_F', 'erank_M', 'max_re_lambda'). level: 'weight' | 'sequence' | 'both'."""
def surgery(M: npt.ArrayLike, component: str, rank: int) -> F64:
    """M' with 'routing' | 'filtering' | 'both' truncated to rank (Eckart-Young); 0 removes, < 0 keeps (Section 5.1)."""
def linearize(M: npt.ArrayLike) -> F64:
    """R -> top singular pair, F -> (trace F / n) I (Section 6)."""
def truncate_rank(X: npt.ArrayLike, k: int) -> F64:
    """Best rank-k approximation of X."""
