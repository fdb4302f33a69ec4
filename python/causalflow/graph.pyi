"""Attention masks as directed graphs over positions, per-layer schedules, the structural dependency
sets R_L(t) (Boundary repair (Yang), Lemma 1), coverage C(d, r) (Eqs. 18, 22-24), score accounting
(Table 2) and accuracy bounds (Theorem 2, Prop. 3, Eqs. 28 and 33).

Shapes: n = sequence length, b = block size, L = layers. Bad input raises ValueError."""
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

class Pattern:
    """A mask family with its parameters. kind: 'full' | 'block' | 'swa' | 'bridge' | 'pbb' |
    'se-bridge'; b >= 1; w (swa window; bridge/pbb width, even, 2 <= w <= 2b) default b;
    e (se-bridge extension, 1 <= e <= b) default max(1, b // 2)."""
    def __init__(self, kind: str, b: int = 128, w: Optional[int] = None, e: Optional[int] = None) -> None: ...
    @property
    def kind(self) -> str: ...
    @property
    def b(self) -> int: ...
    @property
    def w(self) -> int: ...
    @property
    def e(self) -> int: ...
    @property
    def h(self) -> int:
        """Bridge half-width w // 2."""
    def validate(self, n: int) -> None:
        """ValueError unless the pattern is valid for sequence length n (1 <= n <= 2^31)."""

ScheduleLike = Union[Pattern, Sequence[Pattern], str]
"""A Pattern (repeated `layers` times), a list of Patterns (layer 1 first) or 'pbb*3,full' (with b, w, e)."""

def pattern_names() -> List[str]:
    """['full', 'block', 'swa', 'bridge', 'pbb', 'se-bridge']."""

def schedule(spec: str, b: int = 128, w: Optional[int] = None, e: Optional[int] = None) -> List[Pattern]:
    """Parse 'pbb,pbb,pbb,full' or 'swa*3,full' into Patterns sharing b, w, e."""

def dense_mask(pattern: Pattern, n: int) -> npt.NDArray[np.uint8]:
    """0/1 mask A[t, s] = [(s, t) in E], shape (n, n), n <= 4096 (Section 3)."""

def sources(pattern: Pattern, n: int, t: int) -> npt.NDArray[np.int64]:
    """Sources of target t in one layer as closed intervals, shape (k, 2), rows [lo, hi]."""

def closure(schedule: ScheduleLike, n: int, layers: int = 1, b: int = 128, w: Optional[int] = None,
            e: Optional[int] = None) -> Dict[str, npt.NDArray[np.int64]]:
    """R_L(t) of Lemma 1: {'offsets': (n+1,), 'intervals': (k, 2)}; R_L(t) = rows
    intervals[offsets[t]:offsets[t+1]] (closed [lo, hi]). No copy."""

def closure_sizes(schedule: ScheduleLike, n: int, layers: int = 1, b: int = 128, w: Optional[int] = None,
                  e: Optional[int] = None) -> npt.NDArray[np.int64]:
    """|R_L(t)| for t = 0..n-1, shape (n,) (Lemma 1)."""

def coverage_map(pattern: Pattern, d_max: Optional[int] = None) -> npt.NDArray[np.uint8]:
    """Closed-form C(d, r), shape (d_max+1, b), d_max default 2b (Eqs. 18, 22-24, Prop. 2)."""

def coverage_map_closure(schedule: ScheduleLike, n: int, block: Optional[int] = None, d_max: Optional[int] = None,
                         layers: int = 1, b: int = 128, w: Optional[int] = None,
                         e: Optional[int] = None) -> npt.NDArray[np.uint8]:
    """C[d, r] = [t - d in R_L(t)], t = J b + r, shape (d_max+1, b); block J default n // b - 1,
    d_max default min(2b, J b)."""

def phase_fraction(C: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Fraction of phases reaching each distance d (Prop. 1: (b - d)/b under Block)."""

def scores(pattern: Pattern, n: int) -> Dict[str, int]:
    """{'branch', 'union', 'write_back'} score counts per head (Table 2, Section 6.9)."""

def schedule_scores(schedule: ScheduleLike, n: int, layers: int = 1, b: int = 128, w: Optional[int] = None,
                    e: Optional[int] = None) -> Dict[str, Union[int, npt.NDArray[np.int64]]]:
    """{'branch', 'union', 'branch_per_layer' (L,), 'union_per_layer' (L,)}."""

def boundary_copy_bound(K: int) -> Dict[str, float]:
    """Theorem 2: {'accuracy_max': 1/K, 'cross_entropy_min': log K}; K >= 2."""

def coverage_limited_bound(pi: float, K: int) -> Dict[str, float]:
    """Prop. 3: accuracy <= pi + (1 - pi)/K, cross-entropy >= (1 - pi) log K."""

def covered_fraction(pattern: Pattern, d: Sequence[int], r: Sequence[int],
                     weight: Optional[Sequence[float]] = None) -> float:
    """pi_D (Eq. 28) of phase probes (d, r) under the closed-form coverage."""

def covered_fraction_pairs(schedule: ScheduleLike, n: int, u: Sequence[int], t: Sequence[int],
                           weight: Optional[Sequence[float]] = None, layers: int = 1, b: int = 128,
                           w: Optional[int] = None, e: Optional[int] = None) -> float:
    """pi_D (Eq. 28) of (u, t) probes: single-layer edges, or u in R_L(t) for several layers."""

def cost_normalised_gain(acc_m: float, acc_block: float, scores_m: float, scores_block: float) -> float:
    """U_D (Eq. 33)."""

def swa_gap_recovery(acc_m: float, acc_block: float, acc_swa: float) -> float:
    """rho_D = (Acc(M) - Acc(Block)) / (Acc(SWA) - Acc(Block))."""

def report(pattern: str = "", n: int = 1024, b: int = 128, w: Optional[int] = None, e: Optional[int] = None,
           layers: int = 0, schedule: str = "", compare: str = "", fusion: str = "branch",
           coverage: str = "direct", block: Optional[int] = None, d_max: Optional[int] = None,
           runways: Optional[Tuple[int, int]] = None, probes: str = "", K: int = 0,
           accuracy: Optional[Mapping[str, float]] = None, verify: bool = False) -> dict:
    """The body of `coverage --format json` (the tool's options as keywords)."""
