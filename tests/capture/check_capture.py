"""Open a capture with h5py and check the documented layout (docs/checkpoint_format.md): row-major
PyTorch shapes [N, H, T, T] / [N, H, T, d_head] / [N, T], rows of the attention probabilities
(row = query) sum to 1 (2 where a branch-fused bridge admits a key) and vanish above the diagonal,
and alpha_l in both forms has L entries in [0, 1].
Usage: check_capture.py CAPTURE.h5 N T"""
import json
import sys

import h5py
import numpy as np

path, N, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
f = h5py.File(path, "r")
fmt = f.attrs["format"]  # fixed-length strings (docs/checkpoint_format.md "Strings"): bytes in h5py
assert isinstance(fmt, bytes) and fmt.decode() == "causalflow-capture", fmt
cfg = json.loads(f.attrs["config"])
L, H = cfg["n_layer"], cfg["n_head"]
for l in range(L):
    g = f[f"layer_{l}"]
    dh = cfg["layers"][l].get("d_head") or cfg["d_model"] // H
    p = g["attn_probs"][()]
    assert p.shape == (N, H, T, T) and p.dtype == np.float32, (l, p.shape, p.dtype)
    assert g["q"].shape == (N, H, T, dh) and g["k"].shape == (N, H, T, dh), (l, g["q"].shape)
    for name in ("resid_in_norm", "attn_out_norm", "resid_out_norm"):
        assert g[name].shape == (N, T), (l, name, g[name].shape)
    assert np.all(np.triu(p, k=1) == 0), f"layer {l}: mass above the diagonal (row must be the query)"
    s = p.sum(-1)
    ok = np.isclose(s, 1, atol=1e-5) | np.isclose(s, 2, atol=1e-5)
    assert ok.all(), f"layer {l}: row sums {s[~ok][:5]}"
    if cfg["layers"][l]["attn"] in ("full", "swa", "block", "linear"):
        assert np.allclose(s, 1, atol=1e-5), f"layer {l}: rows must sum to 1"
for name in ("alpha_token_mean", "alpha_frobenius"):
    a = f[name][()]
    assert a.shape == (L,) and np.all((a >= 0) & (a <= 1)), (name, a)
assert f["tokens"].shape == (N, T)
print(f"ok: {L} layers, {H} heads, N = {N}, T = {T}, alpha = {np.round(f['alpha_token_mean'][()], 4).tolist()}")
