#!/usr/bin/python3
"""ALiBi slopes of BLOOM configs with any head count against Hugging Face's build_alibi_tensor.

Usage: alibi_slopes_oracle.py HF_CHECK H [H ...]
Runs `HF_CHECK bloom-slopes H` (the slopes lib/hf gives a BLOOM config.json with n_head = H, through
cf/core/alibi.hpp) and compares them with the slope formula of transformers'
models/bloom/modeling_bloom.py build_alibi_tensor, reproduced here in torch: in float32 exactly as
the HF code computes them (relative tolerance 4P float32 ulp: the float32 base raised to powers up
to 2P - 1, P = 2^floor(log2 H)) and in float64 (1e-14, the strict comparison).
Exit 77 when torch is missing (CTest skip), except under CI=true, where a missing oracle fails.
"""
import math
import subprocess
import sys

try:
    import torch
except ImportError as e:
    if __import__("os").environ.get("CI") == "true":
        print(f"FAILED: the torch oracle is missing under CI=true ({e})")
        sys.exit(1)
    print(f"skipped: torch is missing ({e})")
    sys.exit(77)


def build_alibi_slopes(num_heads, dtype):
    """The slope part of transformers' build_alibi_tensor (BLOOM), line for line."""
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=dtype)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), dtype=dtype)
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    return slopes


def main():
    check, heads = sys.argv[1], [int(h) for h in sys.argv[2:]]
    ok = True
    for H in heads:
        out = subprocess.run([check, "bloom-slopes", str(H)], capture_output=True, text=True)
        if out.returncode != 0:
            print(f"H = {H}: hf_check failed: {out.stderr.strip()}")
            ok = False
            continue
        got = torch.tensor([float(x) for x in out.stdout.split()], dtype=torch.float64)
        ref32 = build_alibi_slopes(H, torch.float32).to(torch.float64)
        ref64 = build_alibi_slopes(H, torch.float64)
        if got.numel() != H or ref64.numel() != H:
            print(f"H = {H}: {got.numel()} slopes from lib/hf, {ref64.numel()} from build_alibi_tensor")
            ok = False
            continue
        r32 = float(((got - ref32).abs() / ref32).max())
        r64 = float(((got - ref64).abs() / ref64).max())
        # float32: the base is rounded to float32 (relative error <= 2^-24) and raised to powers up
        # to 2P - 1, which multiplies that error by the power; float64 is the strict comparison
        P = 2 ** math.floor(math.log2(H))
        tol32 = 2 * (2 * P) * 2.0 ** -24
        good = r32 <= tol32 and r64 <= 1e-14
        ok &= good
        print(f"H = {H}: {H} slopes, max relative difference {r32:.3g} vs float32 build_alibi_tensor, "
              f"{r64:.3g} vs float64; first {got[0].item():.6g}, last {got[-1].item():.6g} "
              f"{'ok' if good else 'MISMATCH'}")
    print("slopes ok" if ok else "slopes MISMATCH")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
