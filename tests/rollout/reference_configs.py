#!/usr/bin/python3
"""Acceptance 5 of issue 9: every shipped position-bias config of the Position bias (Herasimchyk et al.) reference
implementation (data/position-bias/config/rollout, github ml-uhh/position-bias @ a514e09) runs
through `rollout --model-config` and gives the reference's numbers.

The oracle is an independent numpy transcription of the reference's model, written from its
documented semantics (Position bias (Herasimchyk et al.) Eqs. 1-4, docs/spec.md section 2) and not from causalflow's code:
dense n x n masked softmax of -m_h (i-j) + content per head (content of head min(h, len-1) only,
so a single score applies to head 0 alone, as the reference builds it), uniform or given head
weights, R = (1 - lambda) I + lambda A, P = R(L) ... R(1), p = last row. Compared entry by entry
(relative 1e-9 where p_j > 1e-280) at n = 64 (and n = 256 for all_content/fineweb-edu/bloom-7b1).
Usage: reference_configs.py ROLLOUT_BINARY CONFIG_DIR. Exit 77 (skip) without numpy or PyYAML.
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import yaml
except ImportError as e:  # the oracle is missing: skipped, never a silent pass
    print("SKIP: numpy/PyYAML not available under /usr/bin/python3:", e)
    sys.exit(77)


def load(path):
    with open(path) as f:
        return yaml.safe_load(f.read().replace("\t", " "))  # the shipped files use tabs inside lists


def oracle(cfg, n):
    L = cfg["num_layers"]
    ac = cfg["attention_config"]
    H = ac["num_heads"]
    T = ac.get("softmax_temperature", 1.0) or 1.0
    mc = cfg.get("mask_config") or {"mask_type": "causal"}
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    mask = j <= i
    if mc["mask_type"] == "sliding_window":
        mask &= j >= i - (mc["window_size"] - 1)
    dist = (i - j).astype(float)
    cc = cfg["content_config"]
    lc = cfg["lambda_schedule_config"]
    if lc["schedule_type"] == "constant":
        lam = np.full(L, lc["lambda_const"])
    elif lc["schedule_type"] == "custom":
        lam = np.array(lc["lambdas_custom"], dtype=float)
    else:
        lam = lc["lambda_0"] / (np.arange(L) + 1.0) ** lc["beta"]
    lam = np.clip(lam, 0.0, 1.0)
    P = np.eye(n)
    for l in range(L):
        sl = ac["alibi_slopes"][min(l, len(ac["alibi_slopes"]) - 1)]
        hw = ac.get("head_weights")
        w = np.ones(H) / H if hw is None else np.array(hw[min(l, len(hw) - 1)], float) / np.sum(hw[min(l, len(hw) - 1)])
        drow = cc["diagonal_scores"][min(l, len(cc["diagonal_scores"]) - 1)]
        brow = cc["base_scores"][min(l, len(cc["base_scores"]) - 1)]
        A = np.zeros((n, n))
        for h in range(H):
            m = sl[min(h, len(sl) - 1)]
            content = np.zeros((n, n))
            if h < len(drow):  # heads past the list get no content (the reference's broadcasting)
                content = brow[h] + drow[h] * np.eye(n)
            z = (content - m * dist) / T
            z = np.where(mask, z, -np.inf)
            z = z - z.max(axis=1, keepdims=True)
            e = np.where(mask, np.exp(z), 0.0)
            A += w[h] * e / e.sum(axis=1, keepdims=True)
        R = (1 - lam[l]) * np.eye(n) + lam[l] * A
        P = R @ P
    return P[-1]


def main():
    binary, root = sys.argv[1], sys.argv[2]
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".yaml"))
    assert len(files) == 33, f"expected the 33 shipped configs, found {len(files)}"
    worst = 0.0
    for path in files:
        cfg = load(path)
        has_content = any(x != 0 for row in cfg["content_config"]["diagonal_scores"] for x in row)
        ns = [64]
        if path.endswith("all_content/fineweb-edu/bloom-7b1.yaml"):
            ns.append(256)
        for n in ns:
            out = subprocess.run([binary, "--model-config", path, "--n", str(n), "--format", "json"],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                print(f"FAIL {path}: exit {out.returncode}: {out.stderr.strip()}")
                sys.exit(1)
            res = json.loads(out.stdout)
            key = "residual_content" if has_content else "residual"
            p = np.array(res["variants"][key])
            q = oracle(cfg, n)
            assert p.shape == q.shape
            assert (p >= 0).all(), f"{path}: negative entry"
            big = q > 1e-280
            rel = np.max(np.abs(p[big] - q[big]) / q[big])
            tiny_ok = np.all(np.abs(p[~big]) <= 1e-270)
            worst = max(worst, rel)
            status = "ok" if rel < 1e-9 and tiny_ok else "FAIL"
            print(f"{status} n={n} rel={rel:.2e} p0={p[0]:.6g} p_last={p[-1]:.6g} {os.path.relpath(path, root)} ({key})")
            if status != "ok":
                sys.exit(1)
    print(f"all {len(files)} shipped configs match the oracle; worst entrywise relative error {worst:.2e}")


if __name__ == "__main__":
    main()
