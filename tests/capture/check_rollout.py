"""Read `rollout --format json` on stdin: every variant is a distribution over n = T positions."""
import json
import sys

d = json.load(sys.stdin)
n = int(sys.argv[1])
assert d["meta"]["params"]["kernels"].startswith("measured"), d["meta"]["params"]
for key, p in d["variants"].items():
    assert len(p) == n, (key, len(p))
    assert min(p) >= 0 and abs(sum(p) - 1) < 1e-9, (key, sum(p))
print("ok:", ", ".join(f"{k} sums to {sum(v):.12f}" for k, v in d["variants"].items()))
