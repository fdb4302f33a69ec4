"""Train a causal transformer on the CPU with a Python callback per update (the `train` tool's options)."""
from typing import Any, Callable, Dict, Optional

def config(n_layer: int = 4, n_head: int = 4, d_model: int = 256, block_size: int = 256, vocab_size: int = 256,
           attn: str = "full", pos: str = "learned", norm: str = "layernorm", b: int = 64, w: int = 64, e: int = 32,
           fusion: str = "branch", sd_eps: float = 0.1, bias: bool = True) -> Dict[str, Any]:
    """A model config dict; attn one name or a per-layer list ('full,swa,bridge', 'pbb*3,full')."""
def train(config: Dict[str, Any], text: str = "", corpus: str = "", data: str = "", out_dir: str = "run",
          steps: int = 1000, batch: int = 8, seq_len: int = 256, accum: int = 1, lr: float = 1e-3,
          min_lr: float = 1e-4, warmup: int = 100, clip: float = 1.0, weight_decay: float = 0.1,
          eval_interval: int = 100, eval_batches: int = 4, ckpt_interval: int = 100, seed: int = 1337,
          val_fraction: float = 0.1, overwrite: bool = False,
          callback: Optional[Callable[[Dict[str, float]], Optional[bool]]] = None) -> Dict[str, Any]:
    """Train on exactly one of text / corpus / data; callback(info) after every update (return False to
    stop). Returns the `train --format json` body plus 'history' (arrays) and 'checkpoint'."""
