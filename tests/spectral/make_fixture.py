#!/usr/bin/python3
"""Write tiny causalflow checkpoints (docs/checkpoint_format.md) with h5py for the `spectral` smoke
tests, plus the expected weight-level numbers computed here with numpy from the DENSE d x d kernel
(an independent oracle for the factorised C++ path).

Usage: make_fixture.py OUTDIR
Writes OUTDIR/std.h5 (3 layers, 2 heads, d_model 16, LayerNorm), OUTDIR/sd.h5 (3 S-D layers, no LN),
OUTDIR/noattn.h5 (valid config, no attention weights), OUTDIR/expected_std.json.
"""
import json
import sys

import h5py
import numpy as np

V, BLOCK, L, H, D = 256, 64, 3, 2, 16
DH = D // H


def layers(attn):
    return [{"attn": attn, "b": 16, "w": 16, "e": 8, "fusion": "branch", "d_head": DH, "sd_eps": 0.1} for _ in range(L)]


def write(path, attn, norm, rng, with_attn=True):
    cfg = {"vocab_size": V, "block_size": BLOCK, "n_layer": L, "n_head": H, "d_model": D, "pos": "learned",
           "norm": norm, "bias": False, "proj_bias": False, "layers": layers(attn)}
    p = {}
    f32 = lambda *s: (0.3 * rng.standard_normal(s)).astype(np.float32)
    p["wte.weight"] = f32(V, D)
    p["wpe.weight"] = f32(BLOCK, D)
    for l in range(L):
        if norm == "layernorm":
            for n in ("ln_1", "ln_2"):
                p[f"h.{l}.{n}.weight"] = np.ones(D, np.float32)
                p[f"h.{l}.{n}.bias"] = np.zeros(D, np.float32)
        if with_attn:
            p[f"h.{l}.attn.c_attn.weight"] = f32(3 * H * DH, D)
        p[f"h.{l}.attn.c_proj.weight"] = f32(D, H * DH)
        if attn == "sd":
            p[f"h.{l}.attn.damp.weight"] = f32(H, D)
            p[f"h.{l}.attn.damp.bias"] = np.zeros(H, np.float32)
        p[f"h.{l}.mlp.c_fc.weight"] = f32(4 * D, D)
        p[f"h.{l}.mlp.c_fc.bias"] = np.zeros(4 * D, np.float32)
        p[f"h.{l}.mlp.c_proj.weight"] = f32(D, 4 * D)
        p[f"h.{l}.mlp.c_proj.bias"] = np.zeros(D, np.float32)
    if norm == "layernorm":
        p["ln_f.weight"] = np.ones(D, np.float32)
        p["ln_f.bias"] = np.zeros(D, np.float32)
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "causalflow-checkpoint"
        f.attrs["format_version"] = 1
        f.attrs["config"] = json.dumps(cfg)
        f.attrs["step"] = 0
        g = f.create_group("params")
        for k, v in p.items():
            g.create_dataset(k, data=v)
    return p


def erank(s):
    s = s[s > 1e-12 * s.max()]
    q = s / s.sum()
    return float(np.exp(-(q * np.log(q)).sum()))


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(2026)
    p = write(f"{out}/std.h5", "full", "layernorm", rng)
    write(f"{out}/sd.h5", "sd", "none", rng)
    write(f"{out}/noattn.h5", "full", "layernorm", rng, with_attn=False)
    exp = {"heads": []}
    for l in range(L):
        w = p[f"h.{l}.attn.c_attn.weight"].astype(np.float64)
        for h in range(H):
            WQ = w[h * DH:(h + 1) * DH, :].T
            WK = w[H * DH + h * DH:H * DH + (h + 1) * DH, :].T
            M = WQ @ WK.T  # dense d x d kernel
            F, R = (M + M.T) / 2, (M - M.T) / 2
            sF, sR = np.linalg.svd(F, compute_uv=False), np.linalg.svd(R, compute_uv=False)
            exp["heads"].append({"layer": l, "head": h, "rho": float(np.linalg.norm(R) / np.linalg.norm(F)),
                                 "erank_R": erank(sR), "erank_F": erank(sF),
                                 "max_re_lambda": float(np.linalg.eigvals(M).real.max())})
    with open(f"{out}/expected_std.json", "w") as f:
        json.dump(exp, f)


if __name__ == "__main__":
    main()
