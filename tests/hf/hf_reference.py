#!/usr/bin/python3
"""Tiny random Hugging Face checkpoints and an independent torch forward pass per family (issue 13).

Usage: hf_reference.py make FAMILY DIR   write DIR/config.json + safetensors (names and layouts of
                                         the HF classes), DIR/tokens.txt, DIR/ref_logits.f32 and
                                         DIR/ref_loss.txt (torch, float64), DIR/expected_spectral.json
       hf_reference.py gpt2-logits DIR   print the max |logit| difference between DIR/ref_logits.f32
                                         and a torch-only GPT-2 forward pass of the exported DIR
       hf_reference.py bf16-logits DIR OUT   write OUT (float32 [T, V]): the logits of DIR/tokens.txt
                                         with the inputs of every linear layer's product rounded to
                                         bfloat16 (the weight matrices once, the activations per
                                         product), float64 otherwise: the independent oracle of the
                                         device analysis model's bf16 policy (docs/gpu.md)
Families: gpt2, gpt2-bf16-sharded, gpt2-f16, gpt2-inner (n_inner = 3 n_embd, exact-erf "gelu",
layer_norm_epsilon 1e-6), gpt_neox, gpt_neox-seq, bloom, bloom6 (6 heads: BLOOM's interleaved ALiBi
slopes for a head count that is not a power of two), llama, qwen2.
Exit 77 when torch/numpy are missing (CTest skip), except under CI=true, where it fails. No transformers, no safetensors package: the
reference implementations below are written from the HF modeling code's equations, the files
with struct/json/numpy.
"""
import json
import math
import os
import struct
import sys

try:
    import numpy as np
    import torch
except ImportError as e:  # the oracle is missing: skip, never pass silently
    if os.environ.get("CI") == "true":
        print(f"FAILED: the torch/numpy oracle is missing under CI=true ({e})")
        sys.exit(1)
    print(f"skipped: {e}")
    sys.exit(77)

torch.set_grad_enabled(False)
DT = torch.float64
ROUND_BF16 = False  # bf16-logits: round every linear layer's input to bfloat16 (mm below)
V, C, H, L, T = 61, 32, 4, 2, 13


# ---------------------------------------------------------------- safetensors without the package
def st_write(path, tensors, dtype="F32"):
    """tensors: list of (name, np.ndarray float32). dtype F32 | F16 | BF16 (stored rounded)."""
    header, blobs, pos = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors:
        a = np.ascontiguousarray(a, dtype=np.float32)
        if dtype == "F32":
            b = a.tobytes()
        elif dtype == "F16":
            b = a.astype(np.float16).tobytes()
        else:  # BF16: round to nearest even on the top 16 bits
            u = a.view(np.uint32).astype(np.uint64)
            u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
            b = u.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [pos, pos + len(b)]}
        blobs.append(b)
        pos += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def st_read(path):
    with open(path, "rb") as f:
        buf = f.read()
    n = struct.unpack("<Q", buf[:8])[0]
    header = json.loads(buf[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        raw = buf[8 + n + b:8 + n + e]
        if v["dtype"] == "F32":
            a = np.frombuffer(raw, dtype=np.float32)
        elif v["dtype"] == "F16":
            a = np.frombuffer(raw, dtype=np.float16).astype(np.float32)
        elif v["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(v["dtype"])
        out[k] = a.reshape(v["shape"]).copy()
    return out


def read_dir(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        w = {}
        for f in sorted(set(json.load(open(idx))["weight_map"].values())):
            w.update(st_read(os.path.join(d, f)))
        return w
    return st_read(os.path.join(d, "model.safetensors"))


# ---------------------------------------------------------------- torch reference pieces
def t(w, k):
    return torch.tensor(w[k], dtype=DT)


def bf16(x):
    """x rounded to bfloat16 (nearest even), as float64."""
    return x.to(torch.float32).to(torch.bfloat16).to(DT)


def mm(x, W):
    """A linear layer's product x W; under ROUND_BF16 its activation x rounded to bfloat16 (the
    weights were rounded once when read, bf16_logits)."""
    return (bf16(x) if ROUND_BF16 else x) @ W


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def causal_softmax(s):
    n = s.shape[-1]
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
    return torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def rope(x, r, base):
    """x [H, T, dh]: rotate the first r dims, pairs (i, i + r/2), angle t * base^(-2i/r)."""
    inv = 1.0 / (base ** (torch.arange(0, r, 2, dtype=DT) / r))
    f = torch.outer(torch.arange(x.shape[1], dtype=DT), inv)
    emb = torch.cat([f, f], dim=-1)
    xr, xp = x[..., :r], x[..., r:]
    xr = xr * emb.cos() + rotate_half(xr) * emb.sin()
    return torch.cat([xr, xp], dim=-1)


def heads_of(x, n, dh):  # [T, n*dh] -> [n, T, dh]
    return x.view(x.shape[0], n, dh).transpose(0, 1)


def merge(y):  # [H, T, dh] -> [T, H*dh]
    return y.transpose(0, 1).reshape(y.shape[1], -1)


def gpt2_act(cfg):
    """GPT-2's activation_function (transformers ACT2FN): the tanh approximations or exact erf GELU."""
    a = cfg.get("activation_function", "gelu_new")
    if a in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return gelu_tanh
    if a == "gelu":
        return gelu_erf
    raise SystemExit(f"activation_function {a} has no reference here")


def forward_gpt2(w, cfg, tok, prefix):
    n, h, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    act = gpt2_act(cfg)
    dh = n // h
    p = prefix
    x = t(w, p + "wte.weight")[tok] + t(w, p + "wpe.weight")[: len(tok)]
    for l in range(cfg["n_layer"]):
        q = f"{p}h.{l}."
        a = layer_norm(x, t(w, q + "ln_1.weight"), t(w, q + "ln_1.bias"), eps)
        qkv = mm(a, t(w, q + "attn.c_attn.weight")) + t(w, q + "attn.c_attn.bias")  # Conv1D: x W, W [in, out]
        Q, K, Vv = (heads_of(z, h, dh) for z in qkv.split(n, dim=-1))
        y = causal_softmax(Q @ K.transpose(-1, -2) / math.sqrt(dh)) @ Vv
        x = x + mm(merge(y), t(w, q + "attn.c_proj.weight")) + t(w, q + "attn.c_proj.bias")
        m = layer_norm(x, t(w, q + "ln_2.weight"), t(w, q + "ln_2.bias"), eps)
        m = act(mm(m, t(w, q + "mlp.c_fc.weight")) + t(w, q + "mlp.c_fc.bias"))
        x = x + mm(m, t(w, q + "mlp.c_proj.weight")) + t(w, q + "mlp.c_proj.bias")
    x = layer_norm(x, t(w, p + "ln_f.weight"), t(w, p + "ln_f.bias"), eps)
    return mm(x, t(w, p + "wte.weight").T)


def forward_neox(w, cfg, tok):
    n, h, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    dh = n // h
    r = int(dh * cfg["rotary_pct"])
    p = "gpt_neox."
    x = t(w, p + "embed_in.weight")[tok]
    for l in range(cfg["num_hidden_layers"]):
        q = f"{p}layers.{l}."
        a = layer_norm(x, t(w, q + "input_layernorm.weight"), t(w, q + "input_layernorm.bias"), eps)
        qkv = mm(a, t(w, q + "attention.query_key_value.weight").T) + t(w, q + "attention.query_key_value.bias")
        qkv = qkv.view(len(tok), h, 3 * dh).transpose(0, 1)  # per head [q | k | v]
        Q, K, Vv = qkv[..., :dh], qkv[..., dh:2 * dh], qkv[..., 2 * dh:]
        Q, K = rope(Q, r, cfg["rotary_emb_base"]), rope(K, r, cfg["rotary_emb_base"])
        y = causal_softmax(Q @ K.transpose(-1, -2) / math.sqrt(dh)) @ Vv
        att = mm(merge(y), t(w, q + "attention.dense.weight").T) + t(w, q + "attention.dense.bias")

        def mlp(z):
            z = gelu_erf(mm(z, t(w, q + "mlp.dense_h_to_4h.weight").T) + t(w, q + "mlp.dense_h_to_4h.bias"))
            return mm(z, t(w, q + "mlp.dense_4h_to_h.weight").T) + t(w, q + "mlp.dense_4h_to_h.bias")

        ln2 = lambda z: layer_norm(z, t(w, q + "post_attention_layernorm.weight"),
                                   t(w, q + "post_attention_layernorm.bias"), eps)
        if cfg["use_parallel_residual"]:
            x = x + att + mlp(ln2(x))
        else:
            x = x + att
            x = x + mlp(ln2(x))
    x = layer_norm(x, t(w, p + "final_layer_norm.weight"), t(w, p + "final_layer_norm.bias"), eps)
    return mm(x, t(w, "embed_out.weight").T)


def bloom_slopes(n):
    cp = 2 ** math.floor(math.log2(n))
    base = 2 ** (-(2 ** -(math.log2(cp) - 3)))
    s = [base ** i for i in range(1, cp + 1)]
    if cp != n:
        eb = 2 ** (-(2 ** -(math.log2(2 * cp) - 3)))
        s += [eb ** i for i in range(1, 2 * (n - cp), 2)]
    return torch.tensor(s, dtype=DT)


def forward_bloom(w, cfg, tok):
    n, h, eps = cfg["n_embed"], cfg["n_head"], cfg["layer_norm_epsilon"]
    dh = n // h
    x = t(w, "word_embeddings.weight")[tok]
    x = layer_norm(x, t(w, "word_embeddings_layernorm.weight"), t(w, "word_embeddings_layernorm.bias"), eps)
    alibi = bloom_slopes(h)[:, None, None] * torch.arange(len(tok), dtype=DT)[None, None, :]  # slope * key pos
    for l in range(cfg["n_layer"]):
        q = f"h.{l}."
        a = layer_norm(x, t(w, q + "input_layernorm.weight"), t(w, q + "input_layernorm.bias"), eps)
        f = mm(a, t(w, q + "self_attention.query_key_value.weight").T) + t(w, q + "self_attention.query_key_value.bias")
        f = f.view(len(tok), h, 3, dh)
        Q, K, Vv = (f[:, :, i].transpose(0, 1) for i in range(3))
        s = alibi + (Q @ K.transpose(-1, -2)) / math.sqrt(dh)
        y = causal_softmax(s) @ Vv
        x = x + mm(merge(y), t(w, q + "self_attention.dense.weight").T) + t(w, q + "self_attention.dense.bias")
        m = layer_norm(x, t(w, q + "post_attention_layernorm.weight"), t(w, q + "post_attention_layernorm.bias"), eps)
        m = gelu_tanh(mm(m, t(w, q + "mlp.dense_h_to_4h.weight").T) + t(w, q + "mlp.dense_h_to_4h.bias"))
        x = x + mm(m, t(w, q + "mlp.dense_4h_to_h.weight").T) + t(w, q + "mlp.dense_4h_to_h.bias")
    x = layer_norm(x, t(w, "ln_f.weight"), t(w, "ln_f.bias"), eps)
    return mm(x, t(w, "word_embeddings.weight").T)


def forward_llama(w, cfg, tok):
    n, h, kv, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["rms_norm_eps"]
    dh = n // h
    qwen = cfg["model_type"] == "qwen2"
    bias = qwen or cfg.get("attention_bias", False)
    x = t(w, "model.embed_tokens.weight")[tok]

    def lin(z, name, b):
        y = mm(z, t(w, name + ".weight").T)
        return y + t(w, name + ".bias") if b else y

    for l in range(cfg["num_hidden_layers"]):
        q = f"model.layers.{l}."
        a = rms_norm(x, t(w, q + "input_layernorm.weight"), eps)
        Q = heads_of(lin(a, q + "self_attn.q_proj", bias), h, dh)
        K = heads_of(lin(a, q + "self_attn.k_proj", bias), kv, dh)
        Vv = heads_of(lin(a, q + "self_attn.v_proj", bias), kv, dh)
        Q, K = rope(Q, dh, cfg["rope_theta"]), rope(K, dh, cfg["rope_theta"])
        K, Vv = K.repeat_interleave(h // kv, dim=0), Vv.repeat_interleave(h // kv, dim=0)  # repeat_kv
        y = causal_softmax(Q @ K.transpose(-1, -2) / math.sqrt(dh)) @ Vv
        x = x + lin(merge(y), q + "self_attn.o_proj", bias and not qwen)
        m = rms_norm(x, t(w, q + "post_attention_layernorm.weight"), eps)
        m = torch.nn.functional.silu(lin(m, q + "mlp.gate_proj", False)) * lin(m, q + "mlp.up_proj", False)
        x = x + lin(m, q + "mlp.down_proj", False)
    x = rms_norm(x, t(w, "model.norm.weight"), eps)
    head = "model.embed_tokens.weight" if cfg["tie_word_embeddings"] else "lm_head.weight"
    return mm(x, t(w, head).T)


# ---------------------------------------------------------------- random checkpoints
def randn(rng, *shape, sd=0.3):
    return (sd * rng.standard_normal(shape)).astype(np.float32)


def norm_w(rng):
    return (1 + 0.2 * rng.standard_normal(C)).astype(np.float32)


def make(family, d):
    global C, H
    if family == "bloom6":  # 6 heads of 6: H is not a power of two (one family per process)
        C, H = 36, 6
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(abs(hash(family)) % (2 ** 32) if False else sum(map(ord, family)))
    dh = C // H
    ws, cfg = [], {}
    if family.startswith("gpt2"):
        cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V, "n_positions": 32,
               "n_embd": C, "n_layer": L, "n_head": H, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}
        F = 4 * C
        if family == "gpt2-inner":  # an MLP width other than 4 n_embd, exact GELU, another epsilon
            F = 3 * C
            cfg.update({"n_inner": F, "activation_function": "gelu", "layer_norm_epsilon": 1e-6})
        p = "transformer." if family in ("gpt2", "gpt2-inner") else ""
        ws += [(p + "wte.weight", randn(rng, V, C)), (p + "wpe.weight", randn(rng, 32, C, sd=0.1))]
        for l in range(L):
            q = f"{p}h.{l}."
            ws += [(q + "ln_1.weight", norm_w(rng)), (q + "ln_1.bias", randn(rng, C, sd=0.1)),
                   (q + "attn.c_attn.weight", randn(rng, C, 3 * C)), (q + "attn.c_attn.bias", randn(rng, 3 * C, sd=0.1)),
                   (q + "attn.c_proj.weight", randn(rng, C, C, sd=0.2)), (q + "attn.c_proj.bias", randn(rng, C, sd=0.1)),
                   (q + "ln_2.weight", norm_w(rng)), (q + "ln_2.bias", randn(rng, C, sd=0.1)),
                   (q + "mlp.c_fc.weight", randn(rng, C, F, sd=0.2)), (q + "mlp.c_fc.bias", randn(rng, F, sd=0.1)),
                   (q + "mlp.c_proj.weight", randn(rng, F, C, sd=0.1)), (q + "mlp.c_proj.bias", randn(rng, C, sd=0.1)),
                   (q + "attn.bias", np.tril(np.ones((1, 1, 32, 32), dtype=np.float32)))]  # legacy buffer, ignored
        ws += [(p + "ln_f.weight", norm_w(rng)), (p + "ln_f.bias", randn(rng, C, sd=0.1))]
    elif family.startswith("gpt_neox"):
        F = 3 * C
        cfg = {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "vocab_size": V, "hidden_size": C,
               "num_hidden_layers": L, "num_attention_heads": H, "intermediate_size": F, "rotary_pct": 0.5,
               "rotary_emb_base": 500.0, "max_position_embeddings": 32, "layer_norm_eps": 1e-5,
               "use_parallel_residual": family == "gpt_neox", "hidden_act": "gelu", "tie_word_embeddings": False}
        p = "gpt_neox."
        ws += [(p + "embed_in.weight", randn(rng, V, C))]
        for l in range(L):
            q = f"{p}layers.{l}."
            ws += [(q + "input_layernorm.weight", norm_w(rng)), (q + "input_layernorm.bias", randn(rng, C, sd=0.1)),
                   (q + "post_attention_layernorm.weight", norm_w(rng)),
                   (q + "post_attention_layernorm.bias", randn(rng, C, sd=0.1)),
                   (q + "attention.query_key_value.weight", randn(rng, 3 * C, C)),
                   (q + "attention.query_key_value.bias", randn(rng, 3 * C, sd=0.1)),
                   (q + "attention.dense.weight", randn(rng, C, C, sd=0.2)), (q + "attention.dense.bias", randn(rng, C, sd=0.1)),
                   (q + "mlp.dense_h_to_4h.weight", randn(rng, F, C, sd=0.2)), (q + "mlp.dense_h_to_4h.bias", randn(rng, F, sd=0.1)),
                   (q + "mlp.dense_4h_to_h.weight", randn(rng, C, F, sd=0.1)), (q + "mlp.dense_4h_to_h.bias", randn(rng, C, sd=0.1)),
                   (q + "attention.rotary_emb.inv_freq", np.ones(2, dtype=np.float32))]  # buffer, ignored
        ws += [(p + "final_layer_norm.weight", norm_w(rng)), (p + "final_layer_norm.bias", randn(rng, C, sd=0.1)),
               ("embed_out.weight", randn(rng, V, C))]
    elif family in ("bloom", "bloom6"):
        cfg = {"model_type": "bloom", "architectures": ["BloomForCausalLM"], "vocab_size": V, "n_embed": C,
               "n_layer": L, "n_head": H, "layer_norm_epsilon": 1e-5, "apply_residual_connection_post_layernorm": False}
        ws += [("word_embeddings.weight", randn(rng, V, C)), ("word_embeddings_layernorm.weight", norm_w(rng)),
               ("word_embeddings_layernorm.bias", randn(rng, C, sd=0.1))]
        for l in range(L):
            q = f"h.{l}."
            ws += [(q + "input_layernorm.weight", norm_w(rng)), (q + "input_layernorm.bias", randn(rng, C, sd=0.1)),
                   (q + "self_attention.query_key_value.weight", randn(rng, 3 * C, C)),
                   (q + "self_attention.query_key_value.bias", randn(rng, 3 * C, sd=0.1)),
                   (q + "self_attention.dense.weight", randn(rng, C, C, sd=0.2)),
                   (q + "self_attention.dense.bias", randn(rng, C, sd=0.1)),
                   (q + "post_attention_layernorm.weight", norm_w(rng)),
                   (q + "post_attention_layernorm.bias", randn(rng, C, sd=0.1)),
                   (q + "mlp.dense_h_to_4h.weight", randn(rng, 4 * C, C, sd=0.2)),
                   (q + "mlp.dense_h_to_4h.bias", randn(rng, 4 * C, sd=0.1)),
                   (q + "mlp.dense_4h_to_h.weight", randn(rng, C, 4 * C, sd=0.1)),
                   (q + "mlp.dense_4h_to_h.bias", randn(rng, C, sd=0.1))]
        ws += [("ln_f.weight", norm_w(rng)), ("ln_f.bias", randn(rng, C, sd=0.1))]
    elif family in ("llama", "qwen2"):
        qwen = family == "qwen2"
        kv, F = (1 if qwen else 2), 40
        cfg = {"model_type": family, "architectures": ["Qwen2ForCausalLM" if qwen else "LlamaForCausalLM"],
               "vocab_size": V, "hidden_size": C, "intermediate_size": F, "num_hidden_layers": L,
               "num_attention_heads": H, "num_key_value_heads": kv, "hidden_act": "silu",
               "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 1000.0 if qwen else 10000.0,
               "tie_word_embeddings": qwen, "attention_bias": False, "rope_scaling": None}
        ws += [("model.embed_tokens.weight", randn(rng, V, C))]
        for l in range(L):
            q = f"model.layers.{l}."
            ws += [(q + "input_layernorm.weight", norm_w(rng)), (q + "post_attention_layernorm.weight", norm_w(rng)),
                   (q + "self_attn.q_proj.weight", randn(rng, H * dh, C)),
                   (q + "self_attn.k_proj.weight", randn(rng, kv * dh, C)),
                   (q + "self_attn.v_proj.weight", randn(rng, kv * dh, C)),
                   (q + "self_attn.o_proj.weight", randn(rng, C, H * dh, sd=0.2)),
                   (q + "mlp.gate_proj.weight", randn(rng, F, C, sd=0.2)),
                   (q + "mlp.up_proj.weight", randn(rng, F, C, sd=0.2)),
                   (q + "mlp.down_proj.weight", randn(rng, C, F, sd=0.1))]
            if qwen:
                ws += [(q + "self_attn.q_proj.bias", randn(rng, H * dh, sd=0.1)),
                       (q + "self_attn.k_proj.bias", randn(rng, kv * dh, sd=0.1)),
                       (q + "self_attn.v_proj.bias", randn(rng, kv * dh, sd=0.1))]
        ws += [("model.norm.weight", norm_w(rng))]
        if not qwen:
            ws += [("lm_head.weight", randn(rng, V, C))]
    else:
        raise SystemExit(f"unknown family {family}")
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    for f in ("model.safetensors", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
              "model-00002-of-00002.safetensors"):
        if os.path.exists(os.path.join(d, f)):
            os.remove(os.path.join(d, f))
    if family == "gpt2-bf16-sharded":
        half = len(ws) // 2
        names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
        st_write(os.path.join(d, names[0]), ws[:half], "BF16")
        st_write(os.path.join(d, names[1]), ws[half:], "BF16")
        wm = {n: names[0] for n, _ in ws[:half]}
        wm.update({n: names[1] for n, _ in ws[half:]})
        json.dump({"metadata": {"total_size": 0}, "weight_map": wm},
                  open(os.path.join(d, "model.safetensors.index.json"), "w"))
    else:
        st_write(os.path.join(d, "model.safetensors"), ws, "F16" if family == "gpt2-f16" else "F32")
    w = read_dir(d)  # what was stored (rounded for F16/BF16)
    tok = torch.tensor(rng.integers(0, V, T), dtype=torch.long)
    if family.startswith("gpt2"):
        logits = forward_gpt2(w, cfg, tok, "transformer." if family in ("gpt2", "gpt2-inner") else "")
    elif family.startswith("gpt_neox"):
        logits = forward_neox(w, cfg, tok)
    elif family in ("bloom", "bloom6"):
        logits = forward_bloom(w, cfg, tok)
    else:
        logits = forward_llama(w, cfg, tok)
    loss = torch.nn.functional.cross_entropy(logits[:-1], tok[1:]).item()
    open(os.path.join(d, "tokens.txt"), "w").write(" ".join(map(str, tok.tolist())) + "\n")
    logits.numpy().astype(np.float32).tofile(os.path.join(d, "ref_logits.f32"))
    open(os.path.join(d, "ref_loss.txt"), "w").write(f"{loss:.17g}\n")
    json.dump(expected_spectral(family, cfg, w), open(os.path.join(d, "expected_spectral.json"), "w"))
    print(f"ok: {family} -> {d} (loss {loss:.6f})")


def erank(s):
    s = s[s > 1e-12 * s.max()]
    q = s / s.sum()
    return float(np.exp(-(q * np.log(q)).sum()))


def qk_heads(family, cfg, w, l):
    """Per-head (W_Q(h), W_K(h)) as d_model x d_head float64, read from the HF layout directly."""
    dh = C // H
    g = lambda k: w[k].astype(np.float64)
    if family.startswith("gpt2"):
        p = "transformer." if family in ("gpt2", "gpt2-inner") else ""
        a = g(f"{p}h.{l}.attn.c_attn.weight")  # [C, 3C] (Conv1D)
        return [(a[:, h * dh:(h + 1) * dh], a[:, C + h * dh:C + (h + 1) * dh]) for h in range(H)]
    if family.startswith("gpt_neox") or family.startswith("bloom"):
        k = f"gpt_neox.layers.{l}.attention.query_key_value.weight" if not family.startswith("bloom") else \
            f"h.{l}.self_attention.query_key_value.weight"
        a = g(k)  # [3C, C], rows (h, {q,k,v}, d)
        return [(a[h * 3 * dh:h * 3 * dh + dh].T, a[h * 3 * dh + dh:h * 3 * dh + 2 * dh].T) for h in range(H)]
    kv = cfg["num_key_value_heads"]
    q = g(f"model.layers.{l}.self_attn.q_proj.weight")
    k = g(f"model.layers.{l}.self_attn.k_proj.weight")
    return [(q[h * dh:(h + 1) * dh].T, k[(h // (H // kv)) * dh:(h // (H // kv) + 1) * dh].T) for h in range(H)]


def expected_spectral(family, cfg, w):
    exp = {"heads": []}
    for l in range(L):
        for h, (WQ, WK) in enumerate(qk_heads(family, cfg, w, l)):
            M = WQ @ WK.T
            F, R = (M + M.T) / 2, (M - M.T) / 2
            sF, sR = np.linalg.svd(F, compute_uv=False), np.linalg.svd(R, compute_uv=False)
            exp["heads"].append({"layer": l, "head": h, "rho": float(np.linalg.norm(R) / np.linalg.norm(F)),
                                 "erank_R": erank(sR), "erank_F": erank(sF),
                                 "max_re_lambda": float(np.linalg.eigvals(M).real.max())})
    return exp


def forward_dir(d, read=read_dir):
    """The reference logits of DIR/tokens.txt, the family read from config.json, the weights by `read`."""
    cfg = json.load(open(os.path.join(d, "config.json")))
    w = read(d)
    tok = torch.tensor([int(x) for x in open(os.path.join(d, "tokens.txt")).read().split()], dtype=torch.long)
    kind = cfg["model_type"]
    if kind == "gpt2":
        return forward_gpt2(w, cfg, tok, "transformer." if "transformer.wte.weight" in w else "")
    if kind == "gpt_neox":
        return forward_neox(w, cfg, tok)
    if kind == "bloom":
        return forward_bloom(w, cfg, tok)
    return forward_llama(w, cfg, tok)


def bf16_logits(d, out):
    """forward_dir with every linear layer's inputs in bfloat16: the device's matrices (every 2-D
    tensor but GPT-2's learned positions, which the device keeps in float32) rounded once, the
    activations per product (mm)."""
    global ROUND_BF16

    def rounded(dd):
        w = read_dir(dd)
        for k, a in w.items():
            if a.ndim == 2 and not k.endswith("wpe.weight"):
                w[k] = bf16(torch.tensor(a, dtype=DT)).numpy()
        return w

    ROUND_BF16 = True
    forward_dir(d, rounded).numpy().astype(np.float32).tofile(out)
    print(f"ok: bf16 logits of {d} -> {out}")


def gpt2_logits(d):
    """Torch-only GPT-2 forward pass of an exported directory vs its ref_logits.f32."""
    cfg = json.load(open(os.path.join(d, "config.json")))
    w = read_dir(d)
    prefix = "transformer." if "transformer.wte.weight" in w else ""
    tok = torch.tensor([int(x) for x in open(os.path.join(d, "tokens.txt")).read().split()], dtype=torch.long)
    got = forward_gpt2(w, cfg, tok, prefix).numpy()
    ref = np.fromfile(os.path.join(d, "ref_logits.f32"), dtype=np.float32).reshape(got.shape)
    diff = float(np.abs(got - ref).max())
    print(f"max |logit difference| {diff:.3g}")
    sys.exit(0 if diff < 1e-4 else 1)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "gpt2-logits":
        gpt2_logits(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "bf16-logits":
        bf16_logits(sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        sys.exit(2)
