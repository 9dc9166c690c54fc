#!/usr/bin/env python3
"""hf_check_moe.py - an independent check of `trident export --format hf` for
the llama family: LlamaForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM.

    hf_check_moe.py DIR CKPT.h5 [WINDOW LOSS]

Written from these documents only, never from trident's C code:
  * the safetensors specification (read by hf_check.py's reader);
  * transformers' modeling_mixtral.py and modeling_qwen2_moe.py (and
    modeling_llama.py): the state dict's names and shapes for a config.json
    (MixtralSparseMoeBlock: `gate` the router (E, C), experts.J.w1 (F, C)
    the gate, w3 the up, w2 (C, F) the down; Qwen2MoeSparseMoeBlock: `gate`,
    experts.J.gate_proj/up_proj/down_proj, shared_expert.*, shared_expert_gate
    (1, C), a dense Qwen2MoeMLP where (layer + 1) % decoder_sparse_step != 0;
    Qwen2MoeAttention's q, k, v have biases), and their forward pass: RMSNorm,
    rotary embedding (rotate_half), grouped-query causal attention, the
    router's softmax over the experts, its top k (renormalised by Mixtral,
    and by Qwen2-MoE under norm_topk_prob), SwiGLU experts (silu(gate) * up,
    then down), Qwen2-MoE's shared expert times sigmoid(shared_expert_gate);
  * doc/checkpoint-format.md and issue 38's contract for trident's tensor
    names (h.L.moe.router.w, h.L.moe.e.J.gate.w, ...).

It checks the names, shapes and dtypes against the format's definition,
every value against the checkpoint's (h5dump: bitwise for F32, rounded to
nearest even for BF16), that every tensor of the checkpoint is exported
and that Qwen2-MoE's q, k, v biases are zeros. With WINDOW (a file of
max_position_embeddings + 1 bytes, the one window a run on it trains on)
and LOSS (that run's step-1 loss at lr = 0, from its metrics file), it runs
the format's forward pass on the window's bytes from the exported tensors
alone, in double precision, and compares the mean cross-entropy with LOSS:
within 1e-5 relative. Pure Python; prints one line per check; exits 1 on
the first failure.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_check import attention as causal_attention  # noqa: E402
from hf_check import fail, floats, h5_tensor, ok, read_model_dir, to_bf16  # noqa: E402

ARCHS = {"llama": "LlamaForCausalLM", "mixtral": "MixtralForCausalLM",
         "qwen2_moe": "Qwen2MoeForCausalLM"}
ATTN = {"input_layernorm.weight": "ln1.w", "self_attn.q_proj.weight": "attn.q.w",
        "self_attn.k_proj.weight": "attn.k.w", "self_attn.v_proj.weight": "attn.v.w",
        "self_attn.o_proj.weight": "attn.o.w", "post_attention_layernorm.weight": "ln2.w"}
DENSE = {"mlp.gate_proj.weight": "mlp.gate.w", "mlp.up_proj.weight": "mlp.up.w",
         "mlp.down_proj.weight": "mlp.down.w"}
MIXTRAL_EXPERT = {"w1": "gate", "w3": "up", "w2": "down"}
QWEN_EXPERT = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down"}


def sizes(cfg):
    C, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = cfg.get("head_dim") or C // NH
    return C, NH, cfg.get("num_key_value_heads") or NH, hd


def is_moe(cfg, layer):
    if cfg["model_type"] == "mixtral":
        return True
    if cfg["model_type"] == "qwen2_moe":
        return (layer not in (cfg.get("mlp_only_layers") or [])
                and (layer + 1) % cfg.get("decoder_sparse_step", 1) == 0)
    return False


def state_dict(cfg):
    """{hf name: (shape, trident name or None for a zero bias)}."""
    C, NH, KV, hd = sizes(cfg)
    V, fmt = cfg["vocab_size"], cfg["model_type"]
    s = {"model.embed_tokens.weight": ([V, C], "wte"), "model.norm.weight": ([C], "lnf.w")}
    if not cfg.get("tie_word_embeddings", False):
        s["lm_head.weight"] = ([V, C], "lm_head")
    for l in range(cfg["num_hidden_layers"]):
        h, t = "model.layers.%d." % l, "h.%d." % l
        shapes = [[C], [NH * hd, C], [KV * hd, C], [KV * hd, C], [C, NH * hd], [C]]
        for (name, trident), shape in zip(ATTN.items(), shapes):
            s[h + name] = (shape, t + trident)
        if fmt == "qwen2_moe":
            for p, n in (("q", NH), ("k", KV), ("v", KV)):
                s[h + "self_attn.%s_proj.bias" % p] = ([n * hd], None)
        if not is_moe(cfg, l):
            F = cfg["intermediate_size"]
            for (name, trident), shape in zip(DENSE.items(), [[F, C], [F, C], [C, F]]):
                s[h + name] = (shape, t + trident)
            continue
        E = cfg["num_local_experts"] if fmt == "mixtral" else cfg["num_experts"]
        F = cfg["intermediate_size"] if fmt == "mixtral" else cfg["moe_intermediate_size"]
        block = "block_sparse_moe." if fmt == "mixtral" else "mlp."
        s[h + block + "gate.weight"] = ([E, C], t + "moe.router.w")
        names = MIXTRAL_EXPERT if fmt == "mixtral" else QWEN_EXPERT
        for j in range(E):
            for hf, tri in names.items():
                shape = [C, F] if tri == "down" else [F, C]
                s[h + block + "experts.%d.%s.weight" % (j, hf)] = (shape, t + "moe.e.%d.%s.w" %
                                                                   (j, tri))
        if fmt == "qwen2_moe":
            Fs = cfg["shared_expert_intermediate_size"]
            for hf, tri in QWEN_EXPERT.items():
                shape = [C, Fs] if tri == "down" else [Fs, C]
                s[h + "mlp.shared_expert.%s.weight" % hf] = (shape, t + "moe.shared.%s.w" % tri)
            s[h + "mlp.shared_expert_gate.weight"] = ([1, C], t + "moe.shared_gate.w")
    return s


def checkpoint_names(ckpt):
    text = subprocess.run(["h5dump", "-n", ckpt], check=True, capture_output=True,
                          text=True).stdout
    names = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "dataset" and parts[1].startswith("/model/"):
            names.add(parts[1][len("/model/"):])
    if not names:
        fail("%s: h5dump lists no /model/ dataset" % ckpt)
    return names


def check_values(d, ckpt, cfg, tensors, want):
    want_dtype = {"float32": "F32", "bfloat16": "BF16"}[cfg["torch_dtype"]]
    if {t[0] for t in tensors.values()} != {want_dtype}:
        fail("dtypes differ from config.json's %s" % cfg["torch_dtype"])
    used = {tri for _, tri in want.values() if tri}
    missing = checkpoint_names(ckpt) - used
    if missing:
        fail("the checkpoint's %s not exported" % sorted(missing))
    V, C = cfg["vocab_size"], cfg["hidden_size"]
    W = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (shape, tri) in want.items():
            got = floats(tensors[name][0], tensors[name][2])
            W[name] = got
            if tri is None:
                if any(v != 0.0 for v in got):
                    fail("%s: a bias trident's model lacks, not all zeros" % name)
                continue
            expect = h5_tensor(ckpt, tri, tmp)
            if tri in ("wte", "lm_head"):
                expect = expect[:V * C]
            if want_dtype == "BF16":
                expect = [to_bf16(v) for v in expect]
            if [struct.pack("<f", v) for v in got] != [struct.pack("<f", v) for v in expect]:
                fail("%s -> %s: values differ from the checkpoint's" % (tri, name))
    ok("every value is the checkpoint's (%d of its tensors), bitwise%s; zero biases zero" %
       (len(used), "" if want_dtype == "F32" else " after rounding to bf16"))
    return W


# ---- the forward pass, as the modeling files compute it ----------------

def matvec(w, x, rows):
    n = len(x)
    return [sum(w[r * n + i] * x[i] for i in range(n)) for r in range(rows)]


def rmsnorm(x, w, eps):
    r = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * r * w[i] for i, v in enumerate(x)]


def silu(v):
    return v / (1.0 + math.exp(-v))


def rope(vec, heads, hd, pos, theta):
    out = list(vec)
    half = hd // 2
    for h in range(heads):
        for i in range(half):
            a = pos * theta ** (-2.0 * i / hd)
            x1, x2 = vec[h * hd + i], vec[h * hd + half + i]
            out[h * hd + i] = x1 * math.cos(a) - x2 * math.sin(a)
            out[h * hd + half + i] = x2 * math.cos(a) + x1 * math.sin(a)
    return out


def attention(W, h, cfg, x):
    C, NH, KV, hd = sizes(cfg)
    theta = cfg.get("rope_theta", 1e6 if cfg["model_type"] == "mixtral" else 10000.0)
    bias = lambda p, n: W.get(h + "self_attn.%s_proj.bias" % p, [0.0] * n)
    proj = lambda p, r, n: [a + b for a, b in zip(matvec(W[h + "self_attn.%s_proj.weight" % p],
                                                          r, n), bias(p, n))]
    q = [rope(proj("q", r, NH * hd), NH, hd, t, theta) for t, r in enumerate(x)]
    k = [rope(proj("k", r, KV * hd), KV, hd, t, theta) for t, r in enumerate(x)]
    v = [proj("v", r, KV * hd) for r in x]
    # each key/value head repeated for its NH / KV query heads
    expand = lambda r: [r[(head // (NH // KV)) * hd + i] for head in range(NH) for i in range(hd)]
    y = causal_attention(q, [expand(r) for r in k], [expand(r) for r in v], NH, hd, len(x))
    return [matvec(W[h + "self_attn.o_proj.weight"], r, C) for r in y]


def swiglu(W, prefix, names, x, F, C):
    g, u, d = (prefix + n + ".weight" for n in names)
    a = [silu(p) * q for p, q in zip(matvec(W[g], x, F), matvec(W[u], x, F))]
    return matvec(W[d], a, C)


def moe(W, h, cfg, x):
    C = cfg["hidden_size"]
    if cfg["model_type"] == "mixtral":
        E, k, F = cfg["num_local_experts"], cfg["num_experts_per_tok"], cfg["intermediate_size"]
        block, names, norm = h + "block_sparse_moe.", ("w1", "w3", "w2"), True
    else:
        E, k, F = cfg["num_experts"], cfg["num_experts_per_tok"], cfg["moe_intermediate_size"]
        block, names = h + "mlp.", ("gate_proj", "up_proj", "down_proj")
        norm = cfg.get("norm_topk_prob", False)
    logits = matvec(W[block + "gate.weight"], x, E)
    m = max(logits)
    p = [math.exp(a - m) for a in logits]
    z = sum(p)
    p = [a / z for a in p]
    top = sorted(range(E), key=lambda j: (-p[j], j))[:k]
    s = sum(p[j] for j in top) if norm else 1.0
    y = [0.0] * C
    for j in top:
        out = swiglu(W, block + "experts.%d." % j, names, x, F, C)
        y = [a + p[j] / s * b for a, b in zip(y, out)]
    if cfg["model_type"] == "qwen2_moe":
        Fs = cfg["shared_expert_intermediate_size"]
        shared = swiglu(W, block + "shared_expert.", names, x, Fs, C)
        gate = 1.0 / (1.0 + math.exp(-matvec(W[block + "shared_expert_gate.weight"], x, 1)[0]))
        y = [a + gate * b for a, b in zip(y, shared)]
    return y


def forward_logits(W, cfg, inputs):
    """The logits (one row of vocab_size per input token)."""
    C, V = cfg["hidden_size"], cfg["vocab_size"]
    eps = cfg.get("rms_norm_eps", 1e-5 if cfg["model_type"] == "mixtral" else 1e-6)
    emb = W["model.embed_tokens.weight"]
    x = [emb[t * C:(t + 1) * C] for t in inputs]
    for l in range(cfg["num_hidden_layers"]):
        h = "model.layers.%d." % l
        a = attention(W, h, cfg, [rmsnorm(r, W[h + "input_layernorm.weight"], eps) for r in x])
        x = [[p + q for p, q in zip(r, s)] for r, s in zip(x, a)]
        n = [rmsnorm(r, W[h + "post_attention_layernorm.weight"], eps) for r in x]
        if is_moe(cfg, l):
            m = [moe(W, h, cfg, r) for r in n]
        else:
            m = [swiglu(W, h + "mlp.", ("gate_proj", "up_proj", "down_proj"), r,
                        cfg["intermediate_size"], C) for r in n]
        x = [[p + q for p, q in zip(r, s)] for r, s in zip(x, m)]
    head = W.get("lm_head.weight", emb)
    return [matvec(head, rmsnorm(r, W["model.norm.weight"], eps), V) for r in x]


def cross_entropy(rows, targets):
    total = 0.0
    for logits, target in zip(rows, targets):
        m = max(logits)
        total += m + math.log(sum(math.exp(v - m) for v in logits)) - logits[target]
    return total / len(targets)


def forward_loss(W, cfg, tokens):
    return cross_entropy(forward_logits(W, cfg, tokens[:-1]), tokens[1:])


def main():
    if len(sys.argv) not in (3, 5):
        print(__doc__)
        sys.exit(2)
    d, ckpt = sys.argv[1], sys.argv[2]
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    fmt = cfg.get("model_type")
    if fmt not in ARCHS or cfg.get("architectures") != [ARCHS[fmt]]:
        fail("config.json: model_type %r, architectures %r" % (fmt, cfg.get("architectures")))
    tensors = read_model_dir(d)
    want = state_dict(cfg)
    if set(tensors) != set(want):
        fail("names: missing %s, unexpected %s" % (sorted(set(want) - set(tensors)),
                                                   sorted(set(tensors) - set(want))))
    for name, (shape, _) in want.items():
        if tensors[name][1] != shape:
            fail("%s: shape %s, %s wants %s" % (name, tensors[name][1], ARCHS[fmt], shape))
    ok("%d tensors: %s's names and shapes" % (len(want), ARCHS[fmt]))
    W = check_values(d, ckpt, cfg, tensors, want)
    if len(sys.argv) == 5:
        with open(sys.argv[3], "rb") as f:
            tokens = list(f.read())
        want_loss = float(sys.argv[4])
        got = forward_loss(W, cfg, tokens)
        rel = abs(got - want_loss) / abs(want_loss)
        if not rel <= 1e-5:
            fail("forward pass: cross-entropy %.9g from the export, trident's loss %.9g "
                 "(relative %.2g, tolerance 1e-5)" % (got, want_loss, rel))
        ok("forward pass on %d tokens as %s computes it: cross-entropy %.9g, trident's %.9g "
           "(relative %.2g)" % (len(tokens) - 1, ARCHS[fmt], got, want_loss, rel))


if __name__ == "__main__":
    main()
