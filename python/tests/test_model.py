"""causalflow.model, .influence, .spectral and .train on a tiny checkpoint trained by the `train`
tool, each compared with its tool's output: `capture` (HDF5 read with h5py), `influence`,
`spectral` and `train` (--format json). Bit-identical numbers are required (same library, one
thread: OMP_NUM_THREADS=1 and --threads 1)."""
import json
import math
import os
import subprocess

import h5py
import numpy as np
import pytest

from causalflow import influence, model, rollout, spectral, train
from conftest import cli_json, tool

CORPUS = os.path.join(os.environ.get("CF_SOURCE_DIR", "."), "tests", "nn", "data", "tiny_corpus.txt")
TINY = dict(n_layer=3, n_head=2, d_model=32, block_size=48, attn="full,swa,bridge", w=8, b=8)
TRAIN = dict(steps=3, batch=2, seq_len=32, eval_interval=2, eval_batches=1, ckpt_interval=2, warmup=1)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    body = cli_json("train", "--text", CORPUS, "--n-layer", 3, "--d-model", 32, "--n-head", 2, "--block-size", 48,
                    "--attn", "full,swa,bridge", "--w", 8, "--b", 8, "--seq-len", 32, "--batch", 2, "--steps", 3,
                    "--eval-interval", 2, "--eval-batches", 1, "--ckpt-interval", 2, "--warmup", 1,
                    "--threads", 1, "--out-dir", d / "cli")["body"]
    return d, body, str(d / "cli" / "last.h5")


def test_train_equals_cli(run):
    d, body, _ = run
    steps = []
    got = train.train(train.config(**TINY), text=CORPUS, out_dir=str(d / "py"), callback=steps.append, **TRAIN)
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert got["config"] == body["config"]
    for k in ("steps_done", "last_train_loss", "best_val_loss", "parameters", "unigram_entropy"):
        assert got[k] == body[k], k
    tc = dict(got["train_config"]), dict(body["train_config"])
    for c in tc:
        c.pop("out_dir", None)
    assert tc[0] == tc[1]
    assert got["history"]["loss"].shape == (3,) and got["history"]["loss"][-1] == body["last_train_loss"]
    assert os.path.exists(got["checkpoint"])
    with pytest.raises(ValueError, match="earlier run"):
        train.train(train.config(**TINY), text=CORPUS, out_dir=str(d / "py"), **TRAIN)


def test_train_callback_can_stop(tmp_path):
    got = train.train(train.config(**TINY), text=CORPUS, out_dir=str(tmp_path / "s"),
                      callback=lambda info: info["step"] < 2, **dict(TRAIN, steps=10))
    assert got["steps_done"] == 2 and got["interrupted"] is True


def test_load_and_capture_equal_capture_tool(run, tmp_path):
    _, body, ck = run
    m = model.load(ck)
    assert m.config == body["config"] and m.n_layer == 3 and m.block_size == 48
    out = tmp_path / "cap.h5"
    r = subprocess.run([tool("capture"), "--checkpoint", ck, "--text", CORPUS, "--seq-len", "32", "--n-seq", "2",
                        "--out", str(out), "--quiet"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    mine = tmp_path / "mine.h5"
    s = model.capture_file(m, CORPUS, str(mine), seq_len=32, sequences=2, store_qk=True)
    assert s["sequences"] == 2 and s["seq_len"] == 32
    with h5py.File(out) as f, h5py.File(mine) as g:
        tokens = f["tokens"][...]
        assert np.array_equal(tokens, g["tokens"][...])
        for l in range(3):
            for q in ("attn_probs", "q", "k", "resid_in_norm", "attn_out_norm"):
                assert np.array_equal(f[f"layer_{l}/{q}"][...], g[f"layer_{l}/{q}"][...]), (l, q)
        # one forward pass of sequence 0 captured in memory (forward_logits on one sequence, where the
        # capture tool runs the N sequences as one batch: float32 sums in another order, so equal to
        # float32 rounding, not bit for bit)
        cap = model.capture(m, tokens[0])
        assert cap["logits"].shape == (32, m.vocab_size) and cap["logits"].dtype == np.float32
        for l in range(3):
            a = cap[f"layer_{l}"]
            assert a["attn_probs"].shape == (2, 32, 32) and a["attn_probs"].flags.owndata is False
            assert np.allclose(a["attn_probs"], f[f"layer_{l}/attn_probs"][0], rtol=1e-5, atol=1e-7), l
            assert np.allclose(a["q"], f[f"layer_{l}/q"][0], rtol=1e-5, atol=1e-6), l
            norms = np.linalg.norm(a["resid_in"].astype(np.float64), axis=1)
            assert np.allclose(norms, f[f"layer_{l}/resid_in_norm"][0], rtol=1e-5)
    assert np.array_equal(model.forward(m, tokens[0]), cap["logits"])
    # the capture is a rollout model: measured alpha and kernels
    ro = rollout.rollout(model=str(mine))
    assert set(ro) == {"attention_only", "residual"} and ro["residual"].shape == (32,)


def test_influence_equals_cli(run):
    _, _, ck = run
    body = cli_json("influence", "--checkpoint", ck, "--text", CORPUS, "--n", 24, "--windows", 3)["body"]
    got = influence.profile(ck, CORPUS, n=24, windows=3)
    assert got["profile"].tolist() == body["profile"]
    assert got["mean_g"].tolist() == body["mean_g"]
    assert got["window_starts"].tolist() == body["starts"]
    assert abs(got["profile"].sum() - 1) < 1e-12


def test_jacobian_blocks_and_layer_attention(run):
    _, _, ck = run
    toks = model.tokenize(ck, CORPUS)[:12]
    jb = influence.jacobian_blocks(ck, toks, L=0, r=2)
    assert jb["frobenius"].shape == (12, 12)
    assert np.all(np.triu(jb["frobenius"], 1) == 0)  # causality: no block for s > d
    A = influence.layer_attention(ck, toks)
    assert len(A) == 3 and all(np.allclose(a.sum(axis=1), 1, atol=1e-12) for a in A)


def test_spectral_equals_cli(run):
    _, _, ck = run
    body = cli_json("spectral", "--checkpoint", ck, "--level", "weight")["body"]
    got = spectral.analyse_checkpoint(ck, level="weight")["weight"]
    cols = got.pop("columns")
    assert got == body["weight"]
    assert cols["rho"].tolist() == [h["rho"] for h in body["weight"]["heads"]]


def test_spectral_sequence_level_equals_cli(run):
    _, _, ck = run
    body = cli_json("spectral", "--checkpoint", ck, "--level", "sequence", "--layers", "0,2")["body"]
    got = spectral.analyse_checkpoint(ck, level="sequence", layers="0,2")["sequence"]
    got.pop("columns")
    assert got == body["sequence"]


def test_spectral_decomposition_against_numpy():
    rng = np.random.default_rng(3)
    M = rng.standard_normal((12, 12))
    F, R = spectral.split(M)
    assert np.array_equal(F, (M + M.T) / 2) and np.array_equal(R, (M - M.T) / 2)
    a = spectral.analyse(M)
    sF = np.linalg.svd(F, compute_uv=False)
    sR = np.linalg.svd(R, compute_uv=False)
    assert np.allclose(a["F"]["sigma"], sF[:len(a["F"]["sigma"])], rtol=1e-10)
    assert np.allclose(a["R"]["sigma"], sR[:len(a["R"]["sigma"])], rtol=1e-10)
    assert a["rho"] == pytest.approx(np.linalg.norm(R) / np.linalg.norm(F), rel=1e-12)
    assert a["max_re_lambda"] == pytest.approx(np.linalg.eigvals(M).real.max(), rel=1e-9)
    p = sR / sR.sum()
    assert spectral.effective_rank(sR) == pytest.approx(math.exp(-(p * np.log(p)).sum()), rel=1e-12)
    A, B = rng.standard_normal((20, 3)), rng.standard_normal((20, 3))
    f = spectral.analyse_factored(A, B)
    d = spectral.analyse(A @ B.T)
    assert f["rho"] == pytest.approx(d["rho"], rel=1e-9)
    X = spectral.surgery(M, "routing", 0)
    assert np.allclose(X, F, atol=1e-14)


def test_model_errors(tmp_path):
    with pytest.raises(ValueError):
        model.load(str(tmp_path / "absent.h5"))
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not hdf5")
    with pytest.raises(ValueError):
        model.load(str(bad))
    with pytest.raises(ValueError):
        train.config(n_layer=2, attn="nope")
    with pytest.raises(ValueError, match="exactly one"):
        train.train(train.config(**TINY), out_dir=str(tmp_path / "x"))


def test_jacobian_blocks_equal_cli(run):
    _, _, ck = run
    body = cli_json("jacobian", "--checkpoint", ck, "--text", CORPUS, "--n", 12, "--window", 1, "--windows", 3,
                    "--layer", 0, "--span", 2)["body"]
    start = body["window_start"]
    toks = model.tokenize(ck, CORPUS)[start:start + 12]
    jb = influence.jacobian_blocks(ck, toks, L=0, r=2)
    # the JSON matrices are n x n with null above the diagonal (s > d: outside the causal triangle)
    assert [jb["frobenius"][d, :d + 1].tolist() + [None] * (11 - d) for d in range(12)] == body["J_frobenius"]
    assert [jb["spectral"][d, :d + 1].tolist() + [None] * (11 - d) for d in range(12)] == body["J_spectral"]


def test_hugging_face_folder_loads_and_forwards_as_the_checkpoint(tmp_path):
    # the gpt2 layout of `export` needs full causal attention at every layer
    ck = train.train(train.config(n_layer=2, n_head=2, d_model=32, block_size=48), text=CORPUS,
                     out_dir=str(tmp_path / "full"), **TRAIN)["checkpoint"]
    hf = tmp_path / "hf"
    r = subprocess.run([tool("export"), "--checkpoint", ck, "--to", str(hf), "--quiet"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    a, b = model.load(ck), model.load(hf)
    assert b.n_layer == a.n_layer and b.vocab_size == a.vocab_size
    toks = model.tokenize(a, CORPUS)[:24]
    assert np.allclose(model.forward(b, toks), model.forward(a, toks), rtol=1e-5, atol=1e-5)


def test_callback_exception_propagates_with_its_type(tmp_path):
    def cb(info):
        if info["step"] == 2:
            raise KeyError("stop here")
    with pytest.raises(KeyError, match="stop here"):
        train.train(train.config(**TINY), text=CORPUS, out_dir=str(tmp_path / "cb"), callback=cb, **TRAIN)


def test_outputs_never_replace_inputs(run, tmp_path):
    _, _, ck = run
    before = open(ck, "rb").read()
    with pytest.raises(ValueError, match="same file"):
        model.capture_file(ck, CORPUS, ck, seq_len=16, sequences=1)
    assert open(ck, "rb").read() == before
    text = tmp_path / "last.h5"
    text.write_bytes(open(CORPUS, "rb").read())
    with pytest.raises(ValueError, match="writes into out_dir"):
        train.train(train.config(**TINY), text=str(text), out_dir=str(tmp_path), **TRAIN)
    with pytest.raises(ValueError):
        model.capture_file(ck, CORPUS, str(tmp_path / "no" / "such" / "dir" / "c.h5"))
