#!/usr/bin/env python3
"""pytorch_gpt2.py - the peer trident is measured against: the same GPT-2
(pre-LayerNorm, tanh GELU, tied LM head, AdamW, fp32) trained with PyTorch
on the CPU, on random tokens, printing one line of JSON:

  {"tokens_per_s": ..., "step_ms": ..., "init_s": ..., "threads": ...}

Usage: pytorch_gpt2.py N_LAYER N_EMBD N_HEAD SEQ VOCAB BATCH STEPS [THREADS]

init_s is the time from interpreter start to the end of the first step
(import, model construction, first step): what a job pays before training.
Written for Debian's python3-torch (1.13); on the CPU it uses nothing
newer.

On a GPU (PT_DEVICE=cuda, for bench/gpu_check.sh) it runs PyTorch's usual
best: PT_DTYPE=bf16 autocasts to bf16 over fp32 weights (trident's bf16
mode keeps fp32 master weights too), attention is
scaled_dot_product_attention (FlashAttention) where PyTorch has it, AdamW
is the fused one, PT_COMPILE=1 adds torch.compile; steps are timed after
torch.cuda.synchronize, and the line adds peak_mem_gib.
"""
import os
import json
import math
import sys
import time

T0 = time.time()
import torch  # noqa: E402  (timed on purpose)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


DEVICE = os.environ.get("PT_DEVICE", "cpu")
DTYPE = os.environ.get("PT_DTYPE", "fp32")
COMPILE = os.environ.get("PT_COMPILE", "0") == "1"
# the fused attention only on a GPU: the CPU figures stay those of the
# plain formulation they were always measured with
FLASH = DEVICE != "cpu" and hasattr(F, "scaled_dot_product_attention")


class Block(nn.Module):
    def __init__(self, c, nh):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.mproj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.nh, c // self.nh).transpose(1, 2)
        k = k.view(b, t, self.nh, c // self.nh).transpose(1, 2)
        v = v.view(b, t, self.nh, c // self.nh).transpose(1, 2)
        if FLASH:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.mproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, n_layer, c, nh, seq, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(seq, c)
        self.blocks = nn.ModuleList(Block(c, nh) for _ in range(n_layer))
        self.lnf = nn.LayerNorm(c)
        # GPT-2's initialisation, as trident's (and nanoGPT's): with
        # PyTorch's defaults (N(0, 1) embeddings, tied to the head) the
        # softmax saturates, gradients turn denormal and every GEMM runs
        # 8x slower on this CPU: a peer that slow would flatter trident.
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def measure(make_model, vocab, seq, batch, steps, threads):
    """Trains make_model() (a module whose forward(idx, targets) returns
    the loss) on random tokens and prints the line of JSON; shared with
    bench/pytorch_llama.py."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    gpu = DEVICE != "cpu"
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = True
    model = make_model().to(DEVICE)
    extra = {"fused": True} if gpu else {}
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, **extra)
    data = torch.randint(0, vocab, (batch, seq + 1), device=DEVICE)
    x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    forward = torch.compile(model) if COMPILE else model

    def step():
        opt.zero_grad(set_to_none=True)
        if DTYPE == "bf16":
            with torch.autocast(device_type=DEVICE, dtype=torch.bfloat16):
                loss = forward(x, y)
        else:
            loss = forward(x, y)
        loss.backward()
        opt.step()
        return loss.item()

    step()
    init_s = time.time() - T0
    step()  # warm-up
    t = time.time()
    for _ in range(steps):
        step()
    dt = (time.time() - t) / steps  # loss.item() waited for the device
    line = {"tokens_per_s": batch * seq / dt, "step_ms": 1e3 * dt,
            "init_s": init_s, "threads": threads}
    if gpu:
        line["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
        line.update(device=torch.cuda.get_device_name(), dtype=DTYPE, compile=COMPILE)
    print(json.dumps(line))


def main():
    a = sys.argv[1:]
    n_layer, c, nh, seq, vocab, batch, steps = (int(x) for x in a[:7])
    threads = int(a[7]) if len(a) > 7 else 2
    measure(lambda: GPT(n_layer, c, nh, seq, vocab), vocab, seq, batch, steps, threads)


if __name__ == "__main__":
    main()
