"""Load a causalflow checkpoint (.h5) or a Hugging Face folder, tokenise, forward, capture."""
import os
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

Tokens = Union[npt.ArrayLike, str]
"""An int array of token ids, or a text file path / packaged corpus name ('kjv', 'brown')."""

class Model:
    path: str
    @property
    def config(self) -> Dict[str, Any]: ...
    @property
    def n_layer(self) -> int: ...
    @property
    def n_head(self) -> int: ...
    @property
    def d_model(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def block_size(self) -> int: ...
    @property
    def parameters(self) -> int: ...

ModelLike = Union[Model, str, os.PathLike]

def load(path: Union[str, os.PathLike]) -> Model:
    """Load a checkpoint or Hugging Face folder (ValueError for a missing or foreign file)."""
def tokenize(model: ModelLike, text: str) -> npt.NDArray[np.int32]:
    """Token ids (N,) of a text file or corpus name in the model's tokenizer."""
def forward(model: ModelLike, tokens: Tokens) -> npt.NDArray[np.float32]:
    """Next-token logits (T, vocab_size); row t predicts token t+1."""
def capture(model: ModelLike, tokens: Tokens,
            what: Sequence[str] = ("attn_probs", "q", "k", "resid_in", "attn_out", "resid_out"),
            heads: Optional[Sequence[int]] = None) -> Dict[str, Any]:
    """{'tokens' (T,), 'logits' (T, V), 'layer_l': {'attn_probs' (H, T, T), 'q', 'k' (H, T, d_head),
    'resid_in', 'attn_out', 'resid_out' (T, d_model)}} (float32; the capture file layout)."""
def capture_file(model: ModelLike, text: str, out: str, seq_len: int = 0, sequences: int = 4,
                 store_qk: bool = False) -> Dict[str, Any]:
    """Write an HDF5 capture (measured alpha and kernels for causalflow.rollout.rollout(model=out))."""
