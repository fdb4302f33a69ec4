"""causalflow.graph against `coverage --format json` (the same library computes both; the test
checks the binding layer: arguments, defaults, shapes, dtypes, no lost digit) and against direct
definitions where one is short (Prop. 1, Theorem 2)."""
import math

import numpy as np
import pytest

import causalflow
from causalflow import graph
from conftest import cli_json


def test_version_matches_the_tools():
    meta = cli_json("coverage", "--pattern", "block", "--n", "16", "--b", "4")["meta"]
    assert causalflow.__version__ == meta["causalflow_version"]


@pytest.mark.parametrize("kind,b,extra", [("se-bridge", 128, {}), ("pbb", 64, {"w": 32}),
                                          ("swa", 32, {"w": 20}), ("block", 16, {}), ("bridge", 8, {"w": 4})])
def test_coverage_map_equals_cli(kind, b, extra):
    args = ["--pattern", kind, "--b", b, "--n", 1024]
    for k, v in extra.items():
        args += [f"--{k}", v]
    body = cli_json("coverage", *args)["body"]
    C = graph.coverage_map(graph.Pattern(kind, b=b, **extra))
    assert C.dtype == np.uint8 and C.shape == (2 * b + 1, b)
    assert np.array_equal(C, np.array(body["coverage"]["matrix"], dtype=np.uint8))
    assert graph.phase_fraction(C).tolist() == body["coverage"]["phase_fraction"]
    s = graph.scores(graph.Pattern(kind, b=b, **extra), 1024)
    assert s["branch"] == body["scores"]["branch"]
    assert s["union"] == body["scores"]["union"]
    assert s["write_back"] == body["write_back"]


def test_report_equals_cli_body():
    args = dict(pattern="pbb", n=512, b=32, compare="swa", runways=(0, 40))
    body = cli_json("coverage", "--pattern", "pbb", "--n", 512, "--b", 32, "--compare", "swa",
                    "--runways", "0,40")["body"]
    assert graph.report(**args) == body


def test_closure_sizes_and_map_equal_cli():
    body = cli_json("coverage", "--pattern", "swa", "--w", 16, "--b", 16, "--layers", 4, "--n", 256,
                    "--coverage", "closure")["body"]
    sizes = graph.closure_sizes(graph.Pattern("swa", b=16, w=16), 256, layers=4)
    assert sizes.dtype == np.int64 and sizes.shape == (256,)
    assert sizes.tolist() == body["closure"]["sizes"]
    C = graph.coverage_map_closure(graph.Pattern("swa", b=16, w=16), 256, layers=4)
    assert np.array_equal(C, np.array(body["coverage"]["matrix"], dtype=np.uint8))
    # |R_4(t)| of a width-16 window: min(t + 1, 4 * 15 + 1) (each layer reaches 15 further back)
    assert sizes.tolist() == [min(t + 1, 61) for t in range(256)]


def test_schedule_scores_equal_cli():
    body = cli_json("coverage", "--schedule", "pbb,pbb,pbb,full", "--n", 2048, "--b", 128)["body"]
    ss = graph.schedule_scores("pbb,pbb,pbb,full", 2048, b=128)
    ref = body["scores"]["schedule"]
    assert ss["branch"] == ref["branch"] and ss["union"] == ref["union"]
    assert ss["branch_per_layer"].tolist() == ref["branch_per_layer"]
    assert ss["union_per_layer"].tolist() == ref["union_per_layer"]


def test_closure_intervals_cover_sizes():
    c = graph.closure("se-bridge*2", 300, b=32)
    off, iv = c["offsets"], c["intervals"]
    assert off.shape == (301,) and iv.shape[1] == 2
    sizes = [int((iv[off[t]:off[t + 1], 1] - iv[off[t]:off[t + 1], 0] + 1).sum()) for t in range(300)]
    assert sizes == graph.closure_sizes("se-bridge*2", 300, b=32).tolist()


def test_dense_mask_against_block_definition():
    A = graph.dense_mask(graph.Pattern("block", b=4), 10)
    ref = np.array([[1 if s <= t and s // 4 == t // 4 else 0 for s in range(10)] for t in range(10)], np.uint8)
    assert np.array_equal(A, ref)


def test_block_phase_fraction_is_prop1():
    b = 16
    frac = graph.phase_fraction(graph.coverage_map(graph.Pattern("block", b=b)))
    assert frac.tolist() == [max(b - d, 0) / b for d in range(2 * b + 1)]


def test_bounds_theorem2_and_prop3():
    assert graph.boundary_copy_bound(8) == {"accuracy_max": 1 / 8, "cross_entropy_min": math.log(8)}
    b = graph.coverage_limited_bound(0.25, 4)
    assert b["accuracy_max"] == pytest.approx(0.25 + 0.75 / 4, abs=1e-15)
    assert b["cross_entropy_min"] == pytest.approx(0.75 * math.log(4), abs=1e-15)


def test_probe_bounds_equal_cli(tmp_path):
    probes = tmp_path / "probes.csv"
    probes.write_text("d,r,weight\n0,0,1\n5,3,2\n130,2,1\n")
    body = cli_json("coverage", "--pattern", "pbb", "--b", 128, "--probes", probes, "--K", 8,
                    "--accuracy", "model=0.61,block=0.42,swa=0.70")["body"]
    rep = graph.report(pattern="pbb", b=128, probes=str(probes), K=8,
                       accuracy={"model": 0.61, "block": 0.42, "swa": 0.70})
    assert rep["probes"] == body["probes"] and rep["accuracy"] == body["accuracy"]
    pi = graph.covered_fraction(graph.Pattern("pbb", b=128), [0, 5, 130], [0, 3, 2], [1, 2, 1])
    assert pi == body["probes"]["pi"]
    # by hand: (0, 0) and (5, 3)? d <= r fails for (5, 3) but r < h = 64 and d <= r + h: covered;
    # (130, 2): d > r + h = 66: not covered -> pi = (1 + 2) / 4
    assert pi == 0.75
    bound = graph.coverage_limited_bound(pi, 8)
    assert bound["accuracy_max"] == body["probes"]["accuracy_max"]
    assert bound["cross_entropy_min"] == body["probes"]["cross_entropy_min"]


def test_bad_inputs_raise_value_error_with_the_cli_message():
    with pytest.raises(ValueError, match="SE-Bridge extension"):
        graph.Pattern("se-bridge", b=8, e=9)
    with pytest.raises(ValueError, match="unknown|pattern"):
        graph.Pattern("nope")
    with pytest.raises(ValueError):
        graph.closure_sizes("swa", 0, b=4)
    with pytest.raises(ValueError):
        graph.boundary_copy_bound(1)
    with pytest.raises(TypeError):
        graph.Pattern(3)
