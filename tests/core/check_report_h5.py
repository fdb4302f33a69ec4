"""Oracle for `--out FILE.h5` (cf::output::write_report_h5): h5py opens the file, the long vectors are
float64 datasets under /body at their JSON paths, /meta and /report are fixed-length strings holding
JSON. Usage: check_report_h5.py FILE.h5 N"""
import json
import sys

try:
    import h5py
    import numpy as np
except ImportError:
    print("skipped: /usr/bin/python3 lacks h5py or numpy")
    sys.exit(77)

path, n = sys.argv[1], int(sys.argv[2])
with h5py.File(path, "r") as f:
    for key in ("attention_only", "residual"):
        d = f["body/variants/" + key]
        assert d.dtype == np.float64 and d.shape == (n,), (key, d.dtype, d.shape)
        v = d[()]
        assert abs(v.sum() - 1.0) < 1e-9 and (v >= 0).all(), (key, v.sum())
    for key in ("meta", "report"):
        t = f[key].id.get_type()
        assert not t.is_variable_str(), f"/{key} is a variable-length string"
    meta = json.loads(f["meta"][()].decode())
    assert meta["tool"] == "rollout", meta
    report = json.loads(f["report"][()].decode())
    assert report["variants"]["residual"] == "<dataset /body/variants/residual>", report["variants"]
print(f"ok: {path}: /body/variants/* are {n} float64 values summing to 1; /meta, /report fixed-length JSON")
