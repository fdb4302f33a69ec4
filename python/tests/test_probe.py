"""causalflow.probe against exact rational arithmetic (math.comb, fractions) and a numpy bootstrap
written from the definition (same generator is not available in numpy, so the interval is checked
for its estimate and ordering; the McNemar and binomial values exactly)."""
from fractions import Fraction
from math import comb, log10

import numpy as np
import pytest

from causalflow import probe


def upper(k, n, p):
    p = Fraction(p)
    return float(sum(comb(n, i) * p**i * (1 - p)**(n - i) for i in range(max(k, 0), n + 1)))


@pytest.mark.parametrize("k,n,p", [(0, 10, 0.3), (7, 10, 0.5), (60, 100, 0.5), (3, 3, 0.125), (11, 10, 0.5),
                                   (520, 1000, 0.5)])
def test_binomial_tails_exact(k, n, p):
    assert probe.binomial_upper_tail(k, n, p) == pytest.approx(upper(k, n, p), rel=1e-11, abs=1e-300)
    assert probe.binomial_lower_tail(k, n, p) == pytest.approx(1 - upper(k + 1, n, p), rel=1e-11, abs=1e-15)
    if 0 <= k <= n:
        assert probe.binomial_test_above(k, n, p) == pytest.approx(upper(k, n, p), rel=1e-11, abs=1e-300)


@pytest.mark.parametrize("n01,n10", [(0, 0), (5, 1), (10, 10), (30, 3), (400, 250)])
def test_mcnemar_exact(n01, n10):
    n, k = n01 + n10, min(n01, n10)
    ref = 1.0 if n == 0 else min(1.0, float(2 * Fraction(sum(comb(n, i) for i in range(k + 1)), 2**n)))
    r = probe.mcnemar(n01, n10)
    assert r["p_value"] == pytest.approx(ref, rel=1e-11)
    assert r["log10_p"] == pytest.approx(log10(ref), abs=1e-10)
    a = np.array([1] * n01 + [0] * n10 + [1, 0])
    b = np.array([0] * n01 + [1] * n10 + [1, 0])
    assert probe.mcnemar_outcomes(a, b)["p_value"] == r["p_value"]


def test_bootstrap_estimate_and_interval():
    rng = np.random.default_rng(0)
    a, b = (rng.random(200) < 0.7).astype(float), (rng.random(200) < 0.6).astype(float)
    ci = probe.paired_bootstrap(a, b, resamples=2000, level=0.9, seed=7)
    assert ci["estimate"] == pytest.approx(a.mean() - b.mean(), abs=1e-15)
    assert ci["lo"] <= ci["estimate"] <= ci["hi"]
    # width against a numpy bootstrap of the same statistic (independent generator): within 25 %
    idx = rng.integers(0, 200, size=(4000, 200))
    d = a[idx].mean(1) - b[idx].mean(1)
    lo, hi = np.quantile(d, [0.05, 0.95])
    assert abs((ci["hi"] - ci["lo"]) - (hi - lo)) < 0.25 * (hi - lo)
    assert probe.paired_bootstrap(a, b, resamples=2000, level=0.9, seed=7) == ci  # seeded: reproducible


def test_bad_inputs():
    with pytest.raises(ValueError):
        probe.binomial_test_above(5, 3, 0.5)
    with pytest.raises(ValueError):
        probe.mcnemar_outcomes([1, 0, 2], [0, 0, 0])
    with pytest.raises(ValueError):
        probe.paired_bootstrap([1.0], [1.0, 0.0])
    with pytest.raises(ValueError):
        probe.paired_bootstrap([1.0], [1.0], level=1.5)


def test_probe_tool_numbers_equal_the_bindings(tmp_path):
    """The `probe boundary-copy` report of two tiny models (block, se-bridge) on a K = 4 task: each
    phase's coverage bound and exact binomial p-value, and the paired McNemar p, recomputed through the
    bindings from the counts the report prints, equal its numbers bit for bit."""
    import subprocess
    from conftest import cli_json, tool
    d = str(tmp_path)
    r = subprocess.run([tool("prepare-data"), "--task", "boundary-copy", "--K", "4", "--b", "4", "--seq-len", "32",
                        "--rows-train", "40", "--rows-val", "40", "--out", f"{d}/bc", "--quiet"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for attn, extra in (("block", []), ("se-bridge", ["--e", "2"])):
        r = subprocess.run([tool("train"), "--data", f"{d}/bc", "--attn", attn, "--b", "4", *extra, "--block-size",
                            "32", "--n-layer", "1", "--n-head", "1", "--d-model", "8", "--steps", "3", "--batch", "2",
                            "--eval-batches", "1", "--warmup", "0", "--threads", "1", "--quiet", "--out-dir",
                            f"{d}/{attn}"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    body = cli_json("probe", "boundary-copy", "--data", f"{d}/bc", "--checkpoint", f"{d}/block/last.h5",
                    "--checkpoint", f"{d}/se-bridge/last.h5", "--resamples", 200)["body"]
    K = body["task"]["K"]
    checked = 0
    for m in body["models"]:
        for ph in m["phases"]:
            acc, ce = probe.coverage_limited_bound(ph["pi"], K)
            assert acc == ph["accuracy_bound"] and ce == ph["cross_entropy_bound"]
            assert probe.binomial_test_above(ph["correct"], ph["readouts"], min(1.0, acc)) == ph["p_value"]
            checked += 1
    assert checked >= 8
    assert body["paired"]
    for pair in body["paired"].values():  # overall and per part of the readouts
        mc = probe.mcnemar(pair["a_only"], pair["b_only"])
        assert mc["p_value"] == pair["mcnemar_p"] and mc["log10_p"] == pair["mcnemar_log10_p"]
