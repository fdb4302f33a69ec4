#!/usr/bin/python3
"""The same model and step as bench_train_step.cpp in Debian's python3-torch (fp32, CPU):
GPT-2 style, pre-LN, GELU(tanh), tied embeddings, learned positions, biases, AdamW
(betas 0.9/0.95, wd 0.1 on matrices), grad clip 1.0. Reports tokens/s and peak RSS.
Usage: torch_train_step.py LAYERS D_MODEL HEADS T B VOCAB STEPS [WARMUP] [--precision fp32|tf32|bf16]
Environment: CF_TORCH_DEVICE=cuda runs it on the GPU (synchronised timers, peak device memory
reported; the baseline of bench/gpu/bench_gpu.cpp), CF_TORCH_SDPA=1 replaces the explicit masked
softmax by F.scaled_dot_product_attention(is_causal=True) (fused kernels).
--precision pairs the device trainer's policy (docs/gpu.md "Precision policies"): fp32 (default:
TF32 off), tf32 (CUDA only: TF32 matmuls, set_float32_matmul_precision('high')), bf16 (the forward
and loss under torch.autocast(dtype=torch.bfloat16): bf16 matmuls with float32 weights, AdamW
state and gradients; pair it with CF_TORCH_SDPA=1 for the fused attention)."""
import contextlib, math, os, resource, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

args = sys.argv[1:]
PREC = "fp32"
if "--precision" in args:
    i = args.index("--precision")
    PREC = args[i + 1] if i + 1 < len(args) else ""
    del args[i:i + 2]
if PREC not in ("fp32", "tf32", "bf16"):
    sys.exit(f"torch_train_step.py: --precision must be fp32, tf32 or bf16 (got '{PREC}')")
L, C, H, T, B, V, STEPS = map(int, args[0:7])
WARM = int(args[7]) if len(args) > 7 else 1
DEV = torch.device(os.environ.get("CF_TORCH_DEVICE", "cpu"))
if PREC == "tf32" and DEV.type != "cuda":
    sys.exit("torch_train_step.py: --precision tf32 needs CF_TORCH_DEVICE=cuda")
SDPA = os.environ.get("CF_TORCH_SDPA", "0") == "1"
if SDPA and not hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0 (Debian 12 has 1.13)
    sys.exit(f"torch_train_step.py: CF_TORCH_SDPA=1 needs PyTorch >= 2.0 (this is {torch.__version__})")
if DEV.type == "cuda":
    torch.backends.cuda.matmul.allow_tf32 = PREC == "tf32"
    torch.backends.cudnn.allow_tf32 = PREC == "tf32"
    torch.set_float32_matmul_precision("high" if PREC == "tf32" else "highest")
AUTOCAST = (torch.autocast(device_type=DEV.type, dtype=torch.bfloat16) if PREC == "bf16"
            else contextlib.nullcontext())

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C); self.ln_2 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C); self.c_proj = nn.Linear(C, C)
        self.c_fc = nn.Linear(C, 4 * C); self.m_proj = nn.Linear(4 * C, C)
    def forward(self, x):
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, H, C // H).transpose(1, 2); k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        if SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            att = F.softmax(att.masked_fill(MASK == 0, float("-inf")), dim=-1)
            y = att @ v
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.m_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, C); self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList([Block() for _ in range(L)]); self.ln_f = nn.LayerNorm(C)
    def forward(self, idx, tgt):
        x = self.wte(idx) + self.wpe(torch.arange(T, device=DEV))
        for b in self.h: x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, V), tgt.view(-1))

MASK = torch.tril(torch.ones(T, T)).view(1, 1, T, T).to(DEV)
torch.manual_seed(1)
m = GPT().to(DEV)
decay = [p for p in m.parameters() if p.dim() >= 2]; nodecay = [p for p in m.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                        lr=1e-4, betas=(0.9, 0.95), foreach=True)
x = torch.randint(0, V, (B, T)).to(DEV); y = torch.randint(0, V, (B, T)).to(DEV)
sync = torch.cuda.synchronize if DEV.type == "cuda" else (lambda: None)
secs = 0.0
best = float("inf")  # the fastest step (robust to a VM's drifting speed)
for s in range(WARM + STEPS):
    sync(); t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    with AUTOCAST:
        loss = m(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step()
    sync(); t1 = time.perf_counter()
    if s >= WARM:
        secs += t1 - t0
        best = min(best, t1 - t0)
P = sum(p.numel() for p in m.parameters())
print(f"torch params={P} tokens_per_s={B*T*STEPS/secs:.1f} step_s={secs/STEPS:.4f} best_tokens_per_s={B*T/best:.1f} loss={loss.item():.4f} "
      f"peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.1f} threads={torch.get_num_threads()} precision={PREC}"
      + (f" device={torch.cuda.get_device_name()} peak_device_mib={torch.cuda.max_memory_allocated()/2**20:.1f}"
         f" sdpa={int(SDPA)}" if DEV.type == "cuda" else ""))
