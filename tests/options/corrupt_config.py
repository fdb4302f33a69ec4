#!/usr/bin/env python3
"""Write copies of a causalflow checkpoint whose `config` / `train_config` JSON attribute is damaged
in one field each (tests/options: config fields validated with the field named, exit 2).
Usage: corrupt_config.py CHECKPOINT OUTDIR. Exits 77 (CTest skip) without h5py."""
import json
import shutil
import sys

try:
    import h5py
    import numpy as np
except ImportError:
    print("skipped: h5py/numpy not available")
    sys.exit(77)

src, out = sys.argv[1], sys.argv[2]


def rewrite(name, key, edit, raw_text=None):
    """edit(j) changes the parsed JSON; raw_text (if given) replaces the attribute's text as is."""
    dst = f"{out}/{name}.h5"
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        raw = f.attrs[key]
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        j = json.loads(text)
        edit(j)
        new = json.dumps(j) if raw_text is None else raw_text
        dtype = f.attrs.get_id(key).dtype
        del f.attrs[key]
        if h5py.check_string_dtype(dtype) is not None and h5py.check_string_dtype(dtype).length is None:
            f.attrs.create(key, new, dtype=h5py.string_dtype())
        else:  # fixed-length string: same kind, new length
            f.attrs.create(key, np.bytes_(new.encode()))


def setitem(path, value):
    def edit(j):
        obj = j
        for p in path[:-1]:
            obj = obj[p]
        obj[path[-1]] = value
    return edit


rewrite("n_layer_string", "config", setitem(["n_layer"], "two"))
rewrite("n_head_huge", "config", setitem(["n_head"], 10**12))
rewrite("layers_short", "config", lambda j: j["layers"].pop())
rewrite("unknown_key", "config", setitem(["layers", 0, "colour"], "blue"))
rewrite("w_negative", "config", setitem(["layers", 0, "w"], -8))
rewrite("sd_eps_string", "config", setitem(["layers", 0, "sd_eps"], "small"))
rewrite("bridge_w_odd", "config", lambda j: j["layers"][0].update({"attn": "bridge", "w": 7, "b": 8}))
rewrite("d_head_string", "config", setitem(["layers", 1, "d_head"], "8"))
rewrite("lr_string", "train_config", setitem(["lr"], "fast"))
rewrite("batch_negative", "train_config", setitem(["batch"], -4))
rewrite("seed_negative", "train_config", setitem(["seed"], -1))
# not JSON at all: resuming must not fall back to the default options
rewrite("train_config_not_json", "train_config", lambda j: None, raw_text='{"batch": 2, "lr": 0.003, "ckpt_interval": 1x0}')
rewrite("train_config_list", "train_config", lambda j: None, raw_text="[1, 2]")
print("ok")
