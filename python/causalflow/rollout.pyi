"""Residual-aware attention rollout of Position bias (Herasimchyk et al.):
R(l) = (1 - alpha_l) I + alpha_l Abar(l), P(L) = R(L) ... R(1), p_j = P(L)[n-1, j] (Eqs. 1-3), and the
Jacobian bound of Runway (Lee & Clark), Theorem 3.3.

Model keyword arguments (shared by rollout, sweep, kernels, verify, dichotomy; as the `rollout` tool):
model (preset 'bloom-176b' | 'bloom' | 'bloom-7b1' | 'mpt-7b' | 'mpt-30b' | 'falcon-rw-7b' or a capture
.h5), model_config (YAML/JSON), dataset ('fineweb-edu' | 'dclm' | 'wikipedia'), alpha ('measured' |
'const:X' | 'power[0|1]:A0,BETA' | 'file:PATH'), mask ('causal' | 'swa:W'), slopes ('preset' | 'simple' |
'hf'), content ('measured' | 'mean' | 'none' | 'c,delta'), content_scale ('raw' | 'sqrt'), head_weights
(file), kernel_file (file), kernels ('auto' | 'measured' | 'file' | 'alibi'), alpha_kind ('token-mean' |
'frobenius'), falcon_scale (bool). Bad input raises ValueError."""
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]

def preset_names() -> List[str]: ...
def dataset_names() -> List[str]: ...
def load_preset(name: str, dataset: str = "") -> Dict[str, Any]:
    """{'name', 'layers' L, 'heads' H, 'd_head', 'slope_recipe', 'slopes' (H,), 'dataset',
    'alpha_measured' (L,), 'content_delta' (L, H), 'content_mean', 'source'}."""
def load_model_config(path: str) -> Dict[str, Any]:
    """A rollout model config: layers, heads, slopes, head weights, 'alpha' (L,), 'content_delta'."""
def alibi_slopes(recipe: str, H: int) -> List[float]:
    """'simple': m_h = 2^(-8h/H), h = 1..H; 'hf': BLOOM's build_alibi_tensor."""
def alpha_power(L: int, a0: float, beta: float, origin: int = 0) -> F64:
    """alpha_l = a0 / l^beta (origin 0) or a0 / (l+1)^beta (origin 1), shape (L,)."""

def rollout(n: int = 0, dense: bool = False, model: str = "bloom", model_config: str = "", dataset: str = "",
            alpha: str = "measured", mask: str = "causal", slopes: str = "preset", content: str = "measured",
            content_scale: str = "raw", head_weights: str = "", kernel_file: str = "", kernels: str = "auto",
            alpha_kind: str = "token-mean", falcon_scale: bool = False) -> Dict[str, F64]:
    """Last-row rollout p_j = P(L)[n-1, j] (Eqs. 1-3, Section 6.2). n = 0: the model's default (256 for
    presets); dense: O(L H n^2) path (n <= 8192) instead of the structured O(L H n) one.
    Returns {'attention_only': (n,), 'residual': (n,)[, 'residual_content': (n,)]}, each summing to 1
    (variants (a), (b), (c)); equal to the 'variants' of `rollout --format json`. No copy."""

def summarize(p: npt.ArrayLike) -> Dict[str, Union[float, int]]:
    """{'p_first', 'p_last', 'argmin', 'min', 'primacy_mass', 'recency_mass'} (first/last ceil(n/10))."""

def sweep(n: Union[str, Sequence[int]] = "64,128,...,4096",
          progress: Optional[Callable[[int, int], None]] = None, model: str = "bloom", model_config: str = "",
          dataset: str = "", alpha: str = "measured", mask: str = "causal", slopes: str = "preset",
          content: str = "measured", content_scale: str = "raw", head_weights: str = "", kernel_file: str = "",
          kernels: str = "auto", alpha_kind: str = "token-mean", falcon_scale: bool = False) -> Dict[str, Any]:
    """Context-length sweep (Section 6.2): columns 'variant' (list), 'n', 'p_first', 'p_last',
    'primacy_mass', 'recency_mass', 'argmin', 'min', 'seconds' (arrays of length variants x lengths, ordered
    by variant then n); progress(done, total) after each length."""

def kernels(n: int = 0, with_content: bool = False, model: str = "bloom", model_config: str = "",
            dataset: str = "", alpha: str = "measured", mask: str = "causal", slopes: str = "preset",
            content: str = "measured", content_scale: str = "raw", head_weights: str = "", kernel_file: str = "", kernels: str = "auto",
            alpha_kind: str = "token-mean", falcon_scale: bool = False) -> List[F64]:
    """Abar(l) (Eq. 4), one (n, n) row-stochastic array per layer (n <= 2048; n = 0: 64), with the content prior
    when with_content."""

def monotonicity_stats(K: npt.ArrayLike, tol: float = 1e-10) -> Dict[str, Union[int, float, bool]]:
    """Assumption 4.1 / Definition A.1 over all triples of K (n, n): 'triples', 'violations',
    'violation_rate', 'mean_gap', 'expected_shortfall', 'max_gap', 'monotone'."""

def prefix_mass(p: npt.ArrayLike) -> F64:
    """F(k) = sum_{j <= k} p_j, shape (n,)."""
def stochastically_precedes(mu: npt.ArrayLike, nu: npt.ArrayLike, tol: float = 1e-10) -> bool:
    """mu <= nu in stochastic order (Definition A.1)."""

def verify(n: int = 0, seeds: int = 8, model: str = "bloom", model_config: str = "", dataset: str = "",
           alpha: str = "measured", mask: str = "causal", slopes: str = "preset", content: str = "measured",
           content_scale: str = "raw", head_weights: str = "", kernel_file: str = "", kernels: str = "auto",
           alpha_kind: str = "token-mean", falcon_scale: bool = False) -> Dict[str, Any]:
    """Props. 4.2-4.5 and structured vs dense: the body of `rollout verify --format json`."""

def dichotomy(depth: int = 100000, schedule: str = "const:0.5", schedule2: str = "power:0.5,2", eps: float = 0.0,
              n: int = 0, model: str = "bloom", model_config: str = "", dataset: str = "",
              alpha: str = "measured", mask: str = "causal", slopes: str = "preset", content: str = "measured",
              content_scale: str = "raw", head_weights: str = "", kernel_file: str = "", kernels: str = "auto",
              alpha_kind: str = "token-mean", falcon_scale: bool = False) -> Dict[str, Any]:
    """Lemma 5.3 / Theorem 5.4 in 50-digit arithmetic: the body of `rollout dichotomy --format json`."""

def jacobian_bound(attention: Union[npt.ArrayLike, Sequence[npt.ArrayLike]], C: float = 1.0) -> Dict[str, F64]:
    """Runway (Lee & Clark), Theorem 3.3: {'bound', 'self_term', 'gate_term'}, each (n, n), entry (d, s)."""
