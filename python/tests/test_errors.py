"""Careless and hostile inputs: every bad argument raises ValueError (the tools' exit 2) naming the
argument, before any long work; runtime failures RuntimeError (exit 1); nothing hangs or returns a
silent NaN. Limits are the tools' (coverage and rollout: n <= 2^26)."""
import math

import numpy as np
import pytest

from causalflow import graph, probe, rollout, spectral
from conftest import cli_error


@pytest.mark.parametrize("call,needle", [
    (lambda: graph.scores(graph.Pattern("full"), 2**40), "n must be <= 67108864"),
    (lambda: graph.schedule_scores("pbb", 2**31, b=128), "n must be <= 67108864"),
    (lambda: graph.closure_sizes("swa", 2**27, b=4), "n must be <= 67108864"),
    (lambda: graph.report(pattern="pbb", n=2**30), "n must be <= 67108864"),
    (lambda: graph.covered_fraction_pairs("pbb", 2**30, [0], [1]), "n must be <= 67108864"),
    (lambda: rollout.rollout(n=10**9), "n must lie in [1, 67108864]"),
    (lambda: rollout.rollout(n=-1), "n must lie in [1, 67108864]"),
    (lambda: rollout.sweep(n=[10**9]), "n"),
    (lambda: rollout.sweep(n=[64, 32]), "increase"),
    (lambda: rollout.sweep(n=[]), "at least one"),
    (lambda: rollout.monotonicity_stats(np.eye(4000)), "n <= 2048"),
    (lambda: rollout.monotonicity_stats(np.array([[1.0, np.nan], [0.5, 0.5]])), "K[0, 1] is not finite"),
    (lambda: rollout.summarize([0.5, np.inf]), "p[1] is not finite"),
    (lambda: rollout.jacobian_bound([np.eye(2), np.ones((3, 3))]), ""),
    (lambda: spectral.analyse(np.array([[np.inf]])), "not finite"),
    (lambda: spectral.surgery(np.eye(4), "routing", 3), "odd"),
    (lambda: spectral.effective_rank([-1.0]), ">= 0"),
    (lambda: spectral.effective_rank([1.0], form="nope"), "form"),
    (lambda: probe.mcnemar(-1, 3), ">= 0"),
    (lambda: graph.covered_fraction(graph.Pattern("pbb"), [1], [1, 2]), "same length"),
    (lambda: graph.report(pattern="pbb", runways=(5, 3)), "--runways"),
    (lambda: graph.dense_mask(graph.Pattern("block", b=4), 5000), "n <= 4096"),
])
def test_value_errors(call, needle):
    with pytest.raises(ValueError) as e:
        call()
    assert needle in str(e.value)


def test_same_message_as_the_tool():
    # the tool prefixes "coverage: error: "; the exception carries the library's message itself
    rc, err = cli_error("coverage", "--pattern", "se-bridge", "--b", 8, "--e", 9)
    assert rc == 2
    with pytest.raises(ValueError) as e:
        graph.report(pattern="se-bridge", b=8, e=9)
    assert f"coverage: error: {e.value}" in err


def test_type_errors_are_type_errors():
    with pytest.raises(TypeError):
        graph.Pattern(3)
    with pytest.raises(TypeError):
        rollout.rollout(n="many")


def test_no_silent_nan():
    # a profile with a NaN is refused, not summarised
    with pytest.raises(ValueError):
        rollout.prefix_mass([0.5, math.nan, 0.5])
