#!/usr/bin/python3
"""The torch side of scripts/device/analysers.py (run by it, one process per step): `make` writes a
random-weight Hugging Face folder of a shape and its tokens; `torch` runs the analysers' computations
in PyTorch on the same GPU and prints one JSON line of seconds.

Usage: analysers_torch.py make SHAPE DIR [--dry-run-cpu]
       analysers_torch.py torch SHAPE DIR TASK... [--dry-run-cpu]
TASK: KIND:T:N (KIND alpha, capture, ppl or probe over N windows of T tokens), eigh, or
vs-capture:FILE (a capture file against forward hooks on its tokens).
Exit 77 without torch (CTest: skipped), except under CI=true, where it fails (tests/hf's rule).
"""
import argparse
import json
import math
import os
import shutil
import struct
import sys
import time

try:
    import torch
except ImportError as e:  # the oracle is missing: skip, never pass silently (tests/hf/hf_reference.py)
    if os.environ.get("CI") == "true":
        print(f"FAILED: torch is missing under CI=true ({e})")
        sys.exit(1)
    print(f"skipped: {e}")
    sys.exit(77)

from analysers import SHAPES, TINY, config_json, tensor_list

torch.set_grad_enabled(False)
torch.backends.cuda.matmul.allow_tf32 = False  # float32 GEMMs, as the analysers' (the comparisons below)


# ---------------------------------------------------------------- safetensors, streamed tensor by tensor
def st_dtype(name):
    """The torch dtype of a safetensors dtype, and the same-size integer dtype whose view gives its bytes."""
    return {"F32": (torch.float32, torch.int32), "BF16": (torch.bfloat16, torch.int16)}[name]


def gen_device():
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def write_shard(path, tensors, dtype, gen, dev):
    """One safetensors file: the header from the shapes, then each tensor generated on `dev` in the
    stored dtype and written at once (one tensor in host memory at a time, never as float32)."""
    size = 2 if dtype == "BF16" else 4
    header, pos = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, _ in tensors:
        n = math.prod(shape) * size
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [pos, pos + n]}
        pos += n
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, shape, sd in tensors:
            t = torch.randn(shape, generator=gen, device=dev, dtype=st_dtype(dtype)[0])
            t = 1 + 0.1 * t if sd is None else sd * t
            f.write(t.contiguous().view(st_dtype(dtype)[1]).cpu().numpy())
    return pos + 8 + len(h)


def make(shape_name, d, tiny):
    s = (TINY if tiny else SHAPES)[shape_name]
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    json.dump(config_json(s), open(os.path.join(d, "config.json"), "w"), indent=1)
    dev = gen_device()
    gen = torch.Generator(device=dev)
    gen.manual_seed(sum(map(ord, shape_name)))
    ts = tensor_list(s)
    if s["shards"] == 1:
        total = write_shard(os.path.join(d, "model.safetensors"), ts, s["dtype"], gen, dev)
    else:  # contiguous runs of tensors of about equal bytes, as save_pretrained's max_shard_size does
        per = math.ceil(sum(math.prod(sh) for _, sh, _ in ts) / s["shards"])
        groups, cur, acc = [], [], 0
        for t in ts:
            cur.append(t)
            acc += math.prod(t[1])
            if acc >= per and len(groups) < s["shards"] - 1:
                groups, cur, acc = groups + [cur], [], 0
        groups.append(cur)
        names = [f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors" for i in range(len(groups))]
        total, wm = 0, {}
        for nm, g in zip(names, groups):
            total += write_shard(os.path.join(d, nm), g, s["dtype"], gen, dev)
            wm.update({t[0]: nm for t in g})
        json.dump({"metadata": {"total_size": total}, "weight_map": wm},
                  open(os.path.join(d, "model.safetensors.index.json"), "w"))
    params = sum(math.prod(sh) for _, sh, _ in ts)
    return params, total


def write_tokens(d, vocab, n, seed):
    """DIR/tokens.txt (capture --tokens) and, for vocabularies up to 65,536, the token files PREFIX =
    DIR/data (spectral-surgery --data: uint16, docs/data.md)."""
    g = torch.Generator().manual_seed(seed)
    tok = torch.randint(0, vocab, (n,), generator=g)
    open(os.path.join(d, "tokens.txt"), "w").write(" ".join(map(str, tok.tolist())) + "\n")
    if vocab <= 65536:
        half = n // 2
        tok[:half].numpy().astype("<u2").tofile(os.path.join(d, "data.train.bin"))
        tok[half:].numpy().astype("<u2").tofile(os.path.join(d, "data.val.bin"))
        json.dump({"vocab_size": vocab, "tokenizer": "byte" if vocab == 256 else "gpt2", "n_train": half,
                   "n_val": n - half, "source": "random ids (scripts/device/analysers.py)"},
                  open(os.path.join(d, "data.meta.json"), "w"))
    return tok


# ---------------------------------------------------------------- the PyTorch side (same GPU, float32 or bf16)
def read_weights(d, dev, names=None, dtype=torch.float32):
    """Every tensor (or those of `names`) of a folder, as `dtype` on `dev` (float32, or bfloat16: the
    model in bf16 as PyTorch runs it on bf16 tensor cores), shard by shard."""
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    out = {}
    for fn in files:
        with open(os.path.join(d, fn), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            base = 8 + n
            for k, v in header.items():
                if k == "__metadata__" or (names is not None and k not in names):
                    continue
                b, e = v["data_offsets"]
                f.seek(base + b)
                stored, raw = st_dtype(v["dtype"])
                t = torch.frombuffer(bytearray(f.read(e - b)), dtype=raw)
                out[k] = t.view(stored).reshape(v["shape"]).to(dev).to(dtype)
    return out


class Model(torch.nn.Module):
    """The HF forward pass of gpt2 / llama / qwen2 written from their equations (as tests/hf's
    reference), with explicit attention probabilities, so forward hooks on each `Attention` see them."""

    def __init__(self, cfg, w):
        super().__init__()
        self.cfg, self.w = cfg, w
        self.gpt2 = cfg["model_type"] == "gpt2"
        self.L = cfg["n_layer"] if self.gpt2 else cfg["num_hidden_layers"]
        self.blocks = torch.nn.ModuleList([Block(self, l) for l in range(self.L)])

    def forward(self, tok):  # tok [B, T] -> logits [B, T, V]
        w = self.w
        if self.gpt2:
            x = w["transformer.wte.weight"][tok] + w["transformer.wpe.weight"][: tok.shape[1]]
        else:
            x = w["model.embed_tokens.weight"][tok]
        for b in self.blocks:
            x = b(x)
        if self.gpt2:
            x = torch.nn.functional.layer_norm(x, x.shape[-1:], w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], 1e-5)
            return x @ w["transformer.wte.weight"].T
        x = rms(x, w["model.norm.weight"], self.cfg["rms_norm_eps"])
        return x @ w["model.embed_tokens.weight" if self.cfg["tie_word_embeddings"] else "lm_head.weight"].T


def rms(x, g, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def rope(x, theta):  # rotate_half convention, x [B, H, T, dh]
    T, dh = x.shape[2], x.shape[3]
    inv = 1.0 / theta ** (torch.arange(0, dh, 2, device=x.device, dtype=torch.float32) / dh)
    ang = torch.arange(T, device=x.device, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    x1, x2 = x[..., : dh // 2], x[..., dh // 2:]
    return (x * cos + torch.cat([-x2, x1], -1) * sin).to(x.dtype)  # bf16 stays bf16 (angles in float32)


class Attention(torch.nn.Module):
    """Returns (output, probabilities [B, H, T, T], Q, K [B, H, T, d_head] after RoPE, K of each query
    head's kv head): what the hooks read."""

    def __init__(self, m, l):
        super().__init__()
        self.m, self.l = m, l

    def forward(self, a):
        m, w, cfg, B, T = self.m, self.m.w, self.m.cfg, a.shape[0], a.shape[1]
        if m.gpt2:
            H = cfg["n_head"]
            q_ = f"transformer.h.{self.l}.attn."
            qkv = a @ w[q_ + "c_attn.weight"] + w[q_ + "c_attn.bias"]
            Q, K, V = (z.reshape(B, T, H, -1).transpose(1, 2) for z in qkv.split(a.shape[-1], -1))
        else:
            H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
            q_ = f"model.layers.{self.l}.self_attn."
            bias = cfg["model_type"] == "qwen2"

            def lin(n):
                y = a @ w[q_ + n + ".weight"].T
                return y + w[q_ + n + ".bias"] if bias else y
            Q = lin("q_proj").reshape(B, T, H, -1).transpose(1, 2)
            K = lin("k_proj").reshape(B, T, KV, -1).transpose(1, 2)
            V = lin("v_proj").reshape(B, T, KV, -1).transpose(1, 2)
            Q, K = rope(Q, cfg["rope_theta"]), rope(K, cfg["rope_theta"])
            K, V = K.repeat_interleave(H // KV, 1), V.repeat_interleave(H // KV, 1)
        s = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=a.device).triu(1), float("-inf"))
        p = torch.softmax(s, -1)
        y = (p @ V).transpose(1, 2).reshape(B, T, -1)
        if m.gpt2:
            return y @ w[q_ + "c_proj.weight"] + w[q_ + "c_proj.bias"], p, Q, K
        return y @ w[q_ + "o_proj.weight"].T, p, Q, K


class Block(torch.nn.Module):
    def __init__(self, m, l):
        super().__init__()
        self.m, self.l = m, l
        self.attn = Attention(m, l)

    def forward(self, x):
        m, w = self.m, self.m.w
        if m.gpt2:
            q = f"transformer.h.{self.l}."
            ln = lambda z, n: torch.nn.functional.layer_norm(z, z.shape[-1:], w[q + n + ".weight"], w[q + n + ".bias"], 1e-5)
            x = x + self.attn(ln(x, "ln_1"))[0]
            h = torch.nn.functional.gelu(ln(x, "ln_2") @ w[q + "mlp.c_fc.weight"] + w[q + "mlp.c_fc.bias"], approximate="tanh")
            return x + h @ w[q + "mlp.c_proj.weight"] + w[q + "mlp.c_proj.bias"]
        q, eps = f"model.layers.{self.l}.", m.cfg["rms_norm_eps"]
        x = x + self.attn(rms(x, w[q + "input_layernorm.weight"], eps))[0]
        h = rms(x, w[q + "post_attention_layernorm.weight"], eps)
        h = torch.nn.functional.silu(h @ w[q + "mlp.gate_proj.weight"].T) * (h @ w[q + "mlp.up_proj.weight"].T)
        return x + h @ w[q + "mlp.down_proj.weight"].T


def timed(fn, dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    r = fn()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return r, time.perf_counter() - t0


def torch_side(shape_name, d, tasks, tiny, dtype=torch.float32):
    """The analysers' computations in PyTorch: one JSON line per task with its seconds (load = the
    weights from the files to the GPU; each task after one untimed warm-up of the same kernels);
    `dtype` bfloat16: every weight and activation in bf16 (the tools' --precision bf16 beside it)."""
    s = (TINY if tiny else SHAPES)[shape_name]
    dev = gen_device()
    cfg = json.load(open(os.path.join(d, "config.json")))
    tok = torch.tensor(list(map(int, open(os.path.join(d, "tokens.txt")).read().split())), device=dev)
    res = {"shape": shape_name, "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
           "torch": torch.__version__, "dtype": str(dtype).replace("torch.", "")}
    if tasks == ["eigh"]:  # only the query and key weights
        names = {n for n, _, _ in tensor_list(s) if n.endswith(("q_proj.weight", "k_proj.weight", "c_attn.weight"))}
        w, res["load_s"] = timed(lambda: read_weights(d, dev, names), dev)
        timed(lambda: head_cores_eigh(s, w), dev)  # warm-up: cuSOLVER's first call
        res["eigh"] = dict(zip(("heads", "seconds"), timed(lambda: head_cores_eigh(s, w), dev)))
        print(json.dumps(res))
        return
    w, res["load_s"] = timed(lambda: read_weights(d, dev, dtype=dtype), dev)
    model = Model(cfg, w)
    if tasks[0].startswith("vs-capture:"):
        res["vs_capture"] = versus_capture(model, tasks[0].split(":", 1)[1], dev)
        print(json.dumps(res))
        return
    work = {"capture": lambda x, B: capture_hooks(model, x[:, :-1], B, probs=True),
            "alpha": lambda x, B: capture_hooks(model, x[:, :-1], B, probs=False),
            "ppl": lambda x, B: perplexity(model, x, B),
            "probe": lambda x, B: probe_probs(model, x[:, :-1], B)}
    for task in tasks:  # KIND:T:N = N windows of T tokens
        kind, T, N = task.split(":")[0], *map(int, task.split(":")[1:])
        # perplexity: spectral-surgery's windows (--context T --stride T over the val split, the second
        # half of tokens.txt): T inputs, T targets each
        src = tok[len(tok) // 2:] if kind == "ppl" else tok
        windows = src.unfold(0, T + 1, T)[:N]
        B = max(1, min(N, 8192 // T))  # sequences per forward pass (8 of 1024: 1.6 GB of logits)
        timed(lambda: work[kind](windows[:1], 1), dev)  # warm-up of the same kernels
        out, sec = timed(lambda: work[kind](windows, B), dev)
        res[task] = {"seconds": sec, "value": out}
    print(json.dumps(res))


def versus_capture(model, path, dev):
    """The capture file's datasets against forward hooks on the same tokens (its /tokens): every
    layer's attention probabilities (of the heads it kept), Q and K (after RoPE, in lib/hf's pair
    order; the kv head of each query head), the residual norms entering and leaving the attention block and the attention
    output's. Returns {dataset: max |file - torch| / max |torch|}; exit 1 above 1e-5 (float32 on
    both sides, summed in other orders)."""
    import h5py
    import numpy as np
    f = h5py.File(path, "r")
    if model.gpt2:
        interleave = lambda x: x
    else:  # lib/hf stores RoPE heads interleaved (pairs 2i, 2i+1), HF in halves (i, i + d_head/2)
        interleave = lambda x: torch.stack([x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]], -1).flatten(-2)
    tok = torch.tensor(f["tokens"][()], device=dev)
    heads = f["heads"][()].tolist() if "heads" in f else None
    got = {}
    hooks = []
    for l, blk in enumerate(model.blocks):
        def pre(mod, inp, l=l):
            mod.attn.resid_in = inp[0]
            got.setdefault(f"layer_{l}/resid_in_norm", []).append(inp[0].norm(dim=-1))

        def post(mod, inp, out, l=l):
            a, p, q, k = out
            x = mod.resid_in
            got.setdefault(f"layer_{l}/attn_out_norm", []).append(a.norm(dim=-1))
            got.setdefault(f"layer_{l}/resid_out_norm", []).append((x + a).norm(dim=-1))
            sel = (lambda t: t[:, heads]) if heads is not None else (lambda t: t)
            got.setdefault(f"layer_{l}/attn_probs", []).append(sel(p))
            got.setdefault(f"layer_{l}/q", []).append(sel(interleave(q)))
            got.setdefault(f"layer_{l}/k", []).append(sel(interleave(k)))
        hooks += [blk.register_forward_pre_hook(pre), blk.attn.register_forward_hook(post)]
    model(tok)
    for h in hooks:
        h.remove()
    worst, out = 0.0, {}
    for name, parts in got.items():
        if name not in f:
            continue
        ref = torch.cat(parts).double().cpu().numpy()
        val = f[name][()].astype(np.float64)
        if val.shape != ref.shape:
            print(f"{path}: {name} has shape {val.shape}, PyTorch's {ref.shape}")
            sys.exit(1)
        out[name] = float(np.max(np.abs(val - ref)) / max(np.max(np.abs(ref)), 1e-30))
        worst = max(worst, out[name])
    if not out or worst > 1e-5:
        print(f"{path}: the capture differs from PyTorch's hooks: {out}")
        sys.exit(1)
    return {"datasets": len(out), "worst": worst, "worst_dataset": max(out, key=out.get)}


def capture_hooks(model, x, B, probs):
    """Forward hooks on every attention module and block: the probabilities of every head copied to
    the host (capture's attn_probs) or the residual norms (capture's alpha_l inputs)."""
    got, hooks = [], []
    for blk in model.blocks:
        if probs:
            hooks.append(blk.attn.register_forward_hook(lambda mod, inp, out: got.append(out[1].cpu())))
        else:
            hooks.append(blk.register_forward_hook(
                lambda mod, inp, out: got.append((inp[0].norm(dim=-1).double().cpu(), out.norm(dim=-1).double().cpu()))))
    for b in range(0, x.shape[0], B):
        model(x[b:b + B])
    for h in hooks:
        h.remove()
    return len(got)


def perplexity(model, windows, B):
    nll, n = 0.0, 0
    for b in range(0, windows.shape[0], B):
        w = windows[b:b + B]
        lp = torch.log_softmax(model(w[:, :-1]), -1)
        nll += -lp.gather(-1, w[:, 1:, None]).double().sum().item()
        n += w[:, 1:].numel()
    return math.exp(nll / n)


def probe_probs(model, x, B):
    """probe's work per batch: next-token probabilities at every position and their top-1."""
    top = 0
    for b in range(0, x.shape[0], B):
        top += int(torch.softmax(model(x[b:b + B]), -1).argmax(-1).sum().item())
    return top


def head_cores_eigh(s, w):
    """spectral --level weight: per head U = [W_Q,h  W_K,h] (d x 2 dh, the kv head of a query head),
    R of its QR, the core C = R_A R_B^T, then eigh of sym(C) and of the embeddings [[0, X], [X^T, 0]]
    of skew(C) and C (docs/spectral.md), batched over every head."""
    H, KV, d = s["heads"], s["kv"], s["d"]
    dh = d // H
    us = []
    for l in range(s["layers"]):
        if s["family"] == "gpt2":
            c = w[f"transformer.h.{l}.attn.c_attn.weight"]  # [d, 3d]
            q, k = c[:, :d].reshape(d, H, dh), c[:, d:2 * d].reshape(d, H, dh)
        else:
            q = w[f"model.layers.{l}.self_attn.q_proj.weight"].T.reshape(d, H, dh)
            k = w[f"model.layers.{l}.self_attn.k_proj.weight"].T.reshape(d, KV, dh).repeat_interleave(H // KV, 1)
        us.append(torch.cat([q, k], -1).permute(1, 0, 2))  # [H, d, 2 dh]
    U = torch.cat(us).double()
    R = torch.linalg.qr(U, mode="r")[1]
    C = R[:, :, :dh] @ R[:, :, dh:].transpose(-1, -2)
    def emb(X):
        z = torch.zeros_like(X)
        return torch.cat([torch.cat([z, X], -1), torch.cat([X.transpose(-1, -2), z], -1)], -2)
    F, Rs = (C + C.transpose(-1, -2)) / 2, (C - C.transpose(-1, -2)) / 2
    for m in (F, emb(Rs), emb(C)):
        torch.linalg.eigvalsh(m.float())
    return int(U.shape[0])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("shape", choices=sorted(SHAPES))
    m.add_argument("dir")
    m.add_argument("--dry-run-cpu", action="store_true")
    t = sub.add_parser("torch")
    t.add_argument("shape", choices=sorted(SHAPES))
    t.add_argument("dir")
    t.add_argument("tasks", nargs="+")
    t.add_argument("--dry-run-cpu", action="store_true")
    t.add_argument("--bf16", action="store_true", help="weights and activations in bfloat16")
    a = p.parse_args()
    if a.cmd == "torch":
        torch_side(a.shape, a.dir, a.tasks, a.dry_run_cpu, torch.bfloat16 if a.bf16 else torch.float32)
        return 0
    t0 = time.monotonic()
    params, size = make(a.shape, a.dir, a.dry_run_cpu)
    s = (TINY if a.dry_run_cpu else SHAPES)[a.shape]
    write_tokens(a.dir, s["vocab"], 2 * (1 << 16) + 2 if not a.dry_run_cpu else 4096, 1)  # val: 64k + 1
    print(f"{a.shape}: {params / 1e6:.1f}M parameters, {size / 2**30:.2f} GiB of {s['dtype']} in {s['shards']} "
          f"file(s), written in {time.monotonic() - t0:.1f} s on {gen_device()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
