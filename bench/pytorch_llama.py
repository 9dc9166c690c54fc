#!/usr/bin/env python3
"""pytorch_llama.py - the PyTorch peer of trident's Llama (issue 34): the
same model as trident's arch = llama (RMSNorm before attention and MLP,
rotary embeddings, grouped-query attention, SwiGLU MLP, no biases, the LM
head tied to the embedding as in Llama 3.2 1B) trained on random tokens,
printing bench/pytorch_gpt2.py's line of JSON:

  {"tokens_per_s": ..., "step_ms": ..., "init_s": ..., "threads": ...}

Usage: pytorch_llama.py N_LAYER N_EMBD N_HEAD N_KV_HEAD FFN SEQ VOCAB BATCH STEPS [THREADS]

Llama 3.2 1B, as bench/gpu_check.sh's llama1b section runs it:
  PT_DEVICE=cuda PT_DTYPE=bf16 PT_COMPILE=1 \\
      pytorch_llama.py 16 2048 32 8 8192 2048 128256 4 10

The environment (PT_DEVICE, PT_DTYPE, PT_COMPILE) and the measurement
(fused AdamW, bf16 autocast over fp32 weights, scaled_dot_product_attention,
the steps timed after a warm-up) are pytorch_gpt2.py's, shared from it.
PT_ROPE_THETA sets rotary's base (default 500000, Llama 3's).
"""
import os
import sys

from pytorch_gpt2 import F, measure, nn, torch  # starts init_s's clock first

ROPE_THETA = float(os.environ.get("PT_ROPE_THETA", "500000"))
NORM_EPS = 1e-5


def supports_gqa():
    """Whether scaled_dot_product_attention takes fewer key/value heads
    than query heads itself (enable_gqa, PyTorch 2.5 on)."""
    q = torch.zeros(1, 2, 1, 8)
    kv = torch.zeros(1, 1, 1, 8)
    try:
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        return True
    except TypeError:
        return False


GQA = supports_gqa()


class RMSNorm(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))

    def forward(self, x):
        if hasattr(F, "rms_norm"):  # PyTorch's own kernel where it has one
            return F.rms_norm(x, (x.shape[-1],), self.weight.type_as(x), NORM_EPS)
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + NORM_EPS)
        return self.weight * x32.type_as(x)


def rotate(x, cos, sin):
    """Rotary embedding, the halves of each head paired (transformers'
    rotate_half layout)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Block(nn.Module):
    def __init__(self, c, nh, nkv, ffn):
        super().__init__()
        self.nh, self.nkv, self.hd = nh, nkv, c // nh
        self.norm1 = RMSNorm(c)
        self.q = nn.Linear(c, nh * self.hd, bias=False)
        self.k = nn.Linear(c, nkv * self.hd, bias=False)
        self.v = nn.Linear(c, nkv * self.hd, bias=False)
        self.o = nn.Linear(nh * self.hd, c, bias=False)
        self.norm2 = RMSNorm(c)
        self.gate = nn.Linear(c, ffn, bias=False)
        self.up = nn.Linear(c, ffn, bias=False)
        self.down = nn.Linear(ffn, c, bias=False)

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.nh, self.hd).transpose(1, 2)
        k = self.k(h).view(b, t, self.nkv, self.hd).transpose(1, 2)
        v = self.v(h).view(b, t, self.nkv, self.hd).transpose(1, 2)
        q, k = rotate(q, cos, sin).type_as(v), rotate(k, cos, sin).type_as(v)
        if GQA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            rep = self.nh // self.nkv
            y = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, dim=1),
                                               v.repeat_interleave(rep, dim=1), is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, c))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, n_layer, c, nh, nkv, ffn, seq, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, c)
        self.blocks = nn.ModuleList(Block(c, nh, nkv, ffn) for _ in range(n_layer))
        self.norm = RMSNorm(c)
        # trident's init = normal, init_std 0.02 (norm weights stay 1)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
        hd = c // nh
        inv = 1.0 / ROPE_THETA ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        angles = torch.outer(torch.arange(seq, dtype=torch.float64), inv)
        angles = torch.cat((angles, angles), dim=-1).float()
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, idx, targets):
        t = idx.shape[1]
        cos, sin = self.cos[:t], self.sin[:t]
        x = self.embed(idx)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        logits = self.norm(x) @ self.embed.weight.t()  # tied head
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    a = sys.argv[1:]
    if len(a) < 9:
        print(__doc__)
        sys.exit(2)
    n_layer, c, nh, nkv, ffn, seq, vocab, batch, steps = (int(x) for x in a[:9])
    threads = int(a[9]) if len(a) > 9 else 2
    measure(lambda: Llama(n_layer, c, nh, nkv, ffn, seq, vocab), vocab, seq, batch, steps,
            threads)


if __name__ == "__main__":
    main()
