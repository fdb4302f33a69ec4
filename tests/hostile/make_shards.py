#!/usr/bin/env python3
"""Split a folder's model.safetensors into two shards + model.safetensors.index.json (stdlib only).

Usage: make_shards.py SRC_DIR DST_DIR SHARD_A SHARD_B [--dup]
The tensors go to SHARD_A and SHARD_B alternately (file names as given: 'weights.bin' is a shard
the index names under a name not ending in .safetensors); config.json is copied. --dup also puts
the first tensor into SHARD_B (a tensor present in two shards). A fixture writer, not an oracle.
"""
import json
import os
import shutil
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    meta = header.pop("__metadata__", None)
    return header, body, meta


def write(path, tensors, meta):
    header, blobs, pos = {}, [], 0
    for name, (dtype, shape, raw) in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    if meta:
        header["__metadata__"] = meta
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    src, dst, a, b = sys.argv[1:5]
    dup = "--dup" in sys.argv[5:]
    header, body, meta = read(os.path.join(src, "model.safetensors"))
    names = sorted(header)
    parts = {a: [], b: []}
    weight_map = {}
    for i, name in enumerate(names):
        t = header[name]
        lo, hi = t["data_offsets"]
        shard = a if i % 2 == 0 else b
        parts[shard].append((name, (t["dtype"], t["shape"], body[lo:hi])))
        weight_map[name] = shard
    if dup:
        parts[b].append(parts[a][0])
    os.makedirs(dst, exist_ok=True)
    for shard, tensors in parts.items():
        write(os.path.join(dst, shard), tensors, meta)
    with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    shutil.copy(os.path.join(src, "config.json"), os.path.join(dst, "config.json"))
    # a sharded copy is no export of causalflow: drop the weights manifest of the single file
    with open(os.path.join(dst, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("causalflow_weights", None)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f)
    print("shards:", a, b)


if __name__ == "__main__":
    main()
