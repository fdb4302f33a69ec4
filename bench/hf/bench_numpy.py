#!/usr/bin/python3
"""numpy side of bench/hf/run_bench.sh: read a safetensors directory without the safetensors
package (header by json, tensors by np.frombuffer + copy to float32), then the weight-level metrics
of every head (rho, erank R/F, max Re lambda) computed the factorised way (QR of [W_Q W_K], small
eigenproblems), the fair numpy counterpart of `spectral --level weight`.
Usage: bench_numpy.py DIR [REPEATS]   prints numpy_read_s and numpy_spectral_s (best of REPEATS)."""
import json
import os
import struct
import sys
import time

import numpy as np


def read(d):
    with open(os.path.join(d, "model.safetensors"), "rb") as f:
        buf = f.read()
    n = struct.unpack("<Q", buf[:8])[0]
    h = json.loads(buf[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        assert v["dtype"] == "F32"
        out[k] = np.frombuffer(buf, dtype=np.float32, count=(e - b) // 4, offset=8 + n + b).reshape(v["shape"]).copy()
    return out


def erank(s):
    s = s[s > 1e-12 * s.max()]
    q = s / s.sum()
    return float(np.exp(-(q * np.log(q)).sum()))


def spectral(w, cfg):
    C, H, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    dh = C // H
    rows = []
    for l in range(L):
        a = w[f"transformer.h.{l}.attn.c_attn.weight"].astype(np.float64)
        for h in range(H):
            WQ, WK = a[:, h * dh:(h + 1) * dh], a[:, C + h * dh:C + (h + 1) * dh]
            Q, R = np.linalg.qr(np.hstack([WQ, WK]))
            I = np.eye(dh)
            Z = np.zeros((dh, dh))
            F = R @ np.block([[Z, I / 2], [I / 2, Z]]) @ R.T  # F = Q F_small Q^T
            Rr = R @ np.block([[Z, I / 2], [-I / 2, Z]]) @ R.T
            sF, sR = np.linalg.svd(F, compute_uv=False), np.linalg.svd(Rr, compute_uv=False)
            lam = np.linalg.eigvals(WK.T @ WQ).real.max()  # nonzero eigenvalues of W_Q W_K^T
            rows.append((np.linalg.norm(sR) / np.linalg.norm(sF), erank(sR), erank(sF), max(lam, 0.0)))
    return rows


if __name__ == "__main__":
    d, reps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    cfg = json.load(open(os.path.join(d, "config.json")))
    br = bs = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        w = read(d)
        t1 = time.perf_counter()
        rows = spectral(w, cfg)
        t2 = time.perf_counter()
        br, bs = min(br, t1 - t0), min(bs, t2 - t1)
    print(f"numpy_read_s {br:.4f} values {sum(v.size for v in w.values())}")
    print(f"numpy_spectral_s {bs:.4f} heads {len(rows)} median_rho {np.median([r[0] for r in rows]):.6f}")
