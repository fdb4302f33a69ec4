"""Probe statistics (Boundary repair (Yang), Section 5): exact binomial tests, McNemar, paired bootstrap."""
from typing import Dict, Tuple, Union

import numpy.typing as npt

def binomial_upper_tail(k: int, n: int, p: float) -> float:
    """P(X >= k), X ~ Binomial(n, p)."""
def binomial_lower_tail(k: int, n: int, p: float) -> float:
    """P(X <= k), X ~ Binomial(n, p)."""
def binomial_test_above(correct: int, n: int, bound: float) -> float:
    """One-sided p-value of H0: accuracy <= bound (Prop. 3's bound) given `correct` of n."""
def mcnemar(n01: int, n10: int) -> Dict[str, Union[int, float]]:
    """Exact two-sided McNemar: {'n01', 'n10', 'p_value', 'log10_p'}."""
def mcnemar_outcomes(a: npt.ArrayLike, b: npt.ArrayLike) -> Dict[str, Union[int, float]]:
    """McNemar on per-item 0/1 outcomes (N,) of two classifiers."""
def paired_bootstrap(a: npt.ArrayLike, b: npt.ArrayLike, resamples: int = 10000, level: float = 0.95,
                     seed: int = 1) -> Dict[str, Union[int, float]]:
    """Percentile interval of mean(a) - mean(b): {'estimate', 'lo', 'hi', 'level', 'resamples', 'seed'}."""
def coverage_limited_bound(pi: float, K: int) -> Tuple[float, float]:
    """Prop. 3: (pi + (1 - pi)/K, (1 - pi) log K)."""
