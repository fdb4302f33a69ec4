"""causalflow.rollout against `rollout ... --format json` (every number equal: the JSON holds the
shortest decimal that round-trips to the same double) and against numpy where the definition is
short (Eqs. 1-3 on dense kernels)."""
import numpy as np
import pytest

from causalflow import rollout
from conftest import cli_json, cli_error


@pytest.mark.parametrize("args", [
    dict(model="bloom"),
    dict(model="mpt-7b", n=64),
    dict(model="bloom-7b1", n=300, alpha="const:0.5", mask="swa:40"),
    dict(model="falcon-rw-7b", n=128, dataset="wikipedia", content_scale="sqrt"),
    dict(model="mpt-30b", n=100, alpha="power1:0.8,0.5", content="none"),
])
def test_variants_equal_cli(args):
    cli = []
    for k, v in args.items():
        cli += [f"--{k.replace('_', '-')}", v]
    body = cli_json("rollout", *cli)["body"]
    got = rollout.rollout(**args)
    assert list(got) == list(body["variants"])
    for key, p in got.items():
        assert p.dtype == np.float64 and p.ndim == 1
        assert p.tolist() == body["variants"][key], key  # bit-identical
        s = rollout.summarize(p)
        ref = body["summary"][key]
        for f in ("p_first", "p_last", "argmin", "min", "primacy_mass", "recency_mass"):
            assert s[f] == ref[f], (key, f)


def test_dense_path_equals_cli():
    body = cli_json("rollout", "--model", "bloom-7b1", "--n", 48, "--path", "dense")["body"]
    got = rollout.rollout(model="bloom-7b1", n=48, dense=True)
    for key, p in got.items():
        assert p.tolist() == body["variants"][key]


def test_residual_rollout_against_numpy_product():
    # Eq. 3 by hand: e_{n-1}^T R(L) ... R(1), R(l) = (1 - a_l) I + a_l Abar(l), with the binding's own kernels
    n = 40
    ks = rollout.kernels(n=n, model="mpt-7b", content="none")
    alpha = rollout.load_preset("mpt-7b")["alpha_measured"]
    v = np.zeros(n)
    v[-1] = 1
    for K, a in reversed(list(zip(ks, alpha))):
        v = v @ ((1 - a) * np.eye(n) + a * K)
    got = rollout.rollout(model="mpt-7b", n=n, content="none")["residual"]
    assert np.allclose(got, v, rtol=1e-12, atol=1e-15)


def test_sweep_equals_cli():
    rows = cli_json("rollout", "sweep", "--model", "bloom", "--n", "64,128,...,1024")["body"]["rows"]
    calls = []
    got = rollout.sweep(n="64,128,...,1024", model="bloom", progress=lambda d, t: calls.append((d, t)))
    assert calls == [(i, 5) for i in range(1, 6)]
    assert got["variant"] == [r["variant"] for r in rows]
    for f in ("n", "p_first", "p_last", "primacy_mass", "recency_mass", "argmin", "min"):
        assert got[f].tolist() == [r[f] for r in rows], f


def test_monotonicity_equals_cli():
    rows = cli_json("rollout", "monotonicity", "--model", "bloom-7b1", "--n", 32, "--content", "none")["body"]["kernels"]
    K = rollout.kernels(n=32, model="bloom-7b1", content="none")[0]
    st = rollout.monotonicity_stats(K)
    for f in ("triples", "violation_rate", "mean_gap", "expected_shortfall", "max_gap"):
        assert st[f] == rows[0][f], f
    assert st["triples"] == 32 * 31 // 2 * 32


def test_verify_and_dichotomy_equal_cli():
    v = cli_json("rollout", "verify", "--model", "bloom", "--n", 24, "--seeds", 2)["body"]
    got = rollout.verify(model="bloom", n=24, seeds=2)
    assert got == v
    d = cli_json("rollout", "dichotomy", "--model", "bloom", "--n", 4, "--depth", 1000)["body"]
    assert rollout.dichotomy(model="bloom", n=4, depth=1000) == d


def test_jacobian_bound_equals_cli():
    rows = cli_json("rollout", "jacobian", "--model", "bloom-7b1", "--n", 6)["body"]["rows"]
    ks = rollout.kernels(n=6, model="bloom-7b1", with_content=True)
    b = rollout.jacobian_bound(ks, C=1.0)
    d = 5
    assert b["bound"][d, :d + 1].tolist() == [r["bound"] for r in rows]
    assert b["self_term"][d, :d + 1].tolist() == [r["self_term"] for r in rows]
    assert b["gate_term"][d, :d + 1].tolist() == [r["gate_term"] for r in rows]


def test_preset_and_slopes():
    p = rollout.load_preset("bloom")
    assert p["name"] == "bloom-176b" and p["slopes"].shape == (p["heads"],)
    assert p["alpha_measured"].shape == (p["layers"],)
    assert p["content_delta"].shape == (p["layers"], p["heads"])
    H = 8
    assert rollout.alibi_slopes("simple", H) == [2.0 ** (-8 * h / H) for h in range(1, H + 1)]
    assert np.allclose(rollout.alpha_power(4, 0.8, 1.0), [0.8 / l for l in range(1, 5)], rtol=0, atol=1e-16)


def test_errors_carry_the_cli_message():
    rc, err = cli_error("rollout", "--model", "no-such-model")
    assert rc == 2
    with pytest.raises(ValueError) as e:
        rollout.rollout(model="no-such-model")
    assert str(e.value) in err
    rc, err = cli_error("rollout", "--model", "bloom", "--alpha", "const:2")
    assert rc == 2
    with pytest.raises(ValueError) as e:
        rollout.rollout(model="bloom", alpha="const:2")
    assert str(e.value) in err
    with pytest.raises(ValueError):
        rollout.rollout(model="bloom", n=-3)
    with pytest.raises(ValueError):
        rollout.monotonicity_stats("abc")
    with pytest.raises(ValueError):
        rollout.jacobian_bound(np.ones((2, 3)))


def test_missing_model_file_is_a_runtime_or_value_error(tmp_path):
    # a config file that cannot be read: the tool exits 1 or 2; the binding raises the matching type
    missing = tmp_path / "absent.yaml"
    rc, err = cli_error("rollout", "--model-config", missing)
    with pytest.raises(ValueError if rc == 2 else RuntimeError) as e:
        rollout.rollout(model_config=str(missing))
    assert str(e.value) in err
