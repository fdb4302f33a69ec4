#!/usr/bin/python3
"""Turn a causalflow checkpoint (docs/checkpoint_format.md) into a grouped-query one: keep key and
value heads 0 .. KV-1 of every layer's c_attn (weights, bias and both AdamW moments) and set
arch.n_kv_head = KV, so that the `train` CLI (which has no GQA option) can resume a GQA model.
Usage: make_gqa_checkpoint.py IN.h5 OUT.h5 KV"""
import json
import sys

import h5py
import numpy as np


def main():
    src, dst, kv = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
        cfg = json.loads(f.attrs["config"].decode())
        H, C = cfg["n_head"], cfg["d_model"]
        assert H % kv == 0, "n_head must be a multiple of KV"
        rows = []
        for l in range(cfg["n_layer"]):
            dh = cfg["layers"][l].get("d_head") or C // H
            HD = H * dh
            rows.append(np.r_[0:HD, HD:HD + kv * dh, 2 * HD:2 * HD + kv * dh])
        cfg.setdefault("arch", {})["n_kv_head"] = kv

        def copy(name, obj):
            if not isinstance(obj, h5py.Dataset):
                return
            data = obj[()]
            leaf = name.split("/")[-1]
            if leaf.startswith("h.") and ".attn.c_attn." in leaf:
                data = data[rows[int(leaf.split(".")[1])]]
            g.create_dataset(name, data=data)
            for k, v in obj.attrs.items():
                g[name].attrs[k] = v

        f.visititems(copy)
        for path in ("optim",):
            if path in f:
                for k, v in f[path].attrs.items():
                    g[path].attrs[k] = v
        for k, v in f.attrs.items():
            if k == "config":
                v = json.dumps(cfg).encode()
            g.attrs[k] = np.bytes_(v) if isinstance(v, bytes) else v


if __name__ == "__main__":
    main()
