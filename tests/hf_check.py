#!/usr/bin/env python3
"""hf_check.py - an independent check of `trident export --format hf`.

    hf_check.py DIR CKPT.h5
    hf_check.py --to-llmc DIR OUT.bin VP
    hf_check.py --to-f16 DIR OUTDIR
    hf_check.py --edit DIR OUTDIR EDIT...

The second form writes the exported model as an llm.c model file (version 3,
fp32; its vocabulary padded with zero rows to VP), laid out as llm.c's
train_gpt2.py writes one, for init_from's llm.c reader to be tested on a
file trident did not write. The third writes the model as one F16
model.safetensors (and its config.json), for init_from's F16 path. The
fourth writes it as F32 with tensors added or changed and config.json's
fields set (see edit()), for init_from's refusals.

Written from three documents only, never from trident's C code:
  * the safetensors specification (huggingface/safetensors README, "Format"):
    8-byte little-endian header length, a JSON header of {name: {dtype,
    shape, data_offsets}} and "__metadata__", data in C order tiling the
    data area with no gap and no overlap;
  * transformers' GPT2LMHeadModel (modeling_gpt2.py): the state dict's names
    and shapes for a config.json (Conv1D weights are (in, out); c_attn's
    columns are [q | k | v]; lm_head is tied to wte and not stored);
  * doc/checkpoint-format.md: trident's tensors, (out, in), QKV rows grouped
    per head [head][q,k,v][head_dim], wte padded up to [model] vocab_size.

It checks the files, the names, shapes and dtypes against GPT-2's
definition, every value against the checkpoint's (read with h5dump, as raw
little-endian fp32): bitwise for F32, the checkpoint's value rounded to
nearest even for BF16. Then it runs GPT-2's forward pass twice on a few
tokens, once from the exported tensors the way modeling_gpt2.py does and
once from the checkpoint's tensors the way checkpoint-format.md lays them
out, and compares the logits. Pure Python (json, struct, math): no numpy,
no torch. Prints one line per check; exits 1 on the first failure.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

DTYPE_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2,
              "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def fail(msg):
    print("hf_check: FAIL: " + msg)
    sys.exit(1)


def ok(msg):
    print("hf_check: ok: " + msg)


# ---- safetensors, from the specification -------------------------------

def read_safetensors(path):
    """{name: (dtype, shape, raw bytes)} after checking the layout."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail("%s: shorter than the 8-byte header length" % path)
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        fail("%s: header length %d past the end of the file" % (path, n))
    text = blob[8:8 + n].decode("utf-8")
    header = json.loads(text.rstrip(" "))
    if (8 + n) % 8:
        fail("%s: data area starts at %d, not 8-byte aligned" % (path, 8 + n))
    meta = header.pop("__metadata__", None)
    if meta != {"format": "pt"}:
        fail("%s: __metadata__ is %r, want {'format': 'pt'}" % (path, meta))
    data = blob[8 + n:]
    spans = []
    out = {}
    for name, e in header.items():
        if set(e) != {"dtype", "shape", "data_offsets"}:
            fail("%s: %s: keys %s" % (path, name, sorted(e)))
        if e["dtype"] not in DTYPE_SIZE:
            fail("%s: %s: unknown dtype %s" % (path, name, e["dtype"]))
        begin, end = e["data_offsets"]
        numel = 1
        for d in e["shape"]:
            numel *= d
        if end - begin != numel * DTYPE_SIZE[e["dtype"]]:
            fail("%s: %s: offsets %d..%d for %s %s" % (path, name, begin, end, e["dtype"],
                                                      e["shape"]))
        spans.append((begin, end, name))
        out[name] = (e["dtype"], e["shape"], data[begin:end])
    spans.sort()
    at = 0
    for begin, end, name in spans:
        if begin != at:
            fail("%s: %s begins at %d, the previous tensor ended at %d" % (path, name, begin, at))
        at = end
    if at != len(data):
        fail("%s: tensors end at %d of %d data bytes" % (path, at, len(data)))
    return out


def read_model_dir(d):
    index = os.path.join(d, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(index):
        with open(index) as f:
            idx = json.load(f)
        files = sorted(set(idx["weight_map"].values()))
        total = 0
        for fn in files:
            part = read_safetensors(os.path.join(d, fn))
            for name, t in part.items():
                if idx["weight_map"].get(name) != fn:
                    fail("index: %s is in %s, the map says %s" % (name, fn,
                                                                 idx["weight_map"].get(name)))
                tensors[name] = t
                total += len(t[2])
        if set(idx["weight_map"]) != set(tensors):
            fail("index: weight_map and the shards name different tensors")
        if idx["metadata"]["total_size"] != total:
            fail("index: total_size %d, the shards hold %d bytes" %
                 (idx["metadata"]["total_size"], total))
        ok("%d shards and their index agree" % len(files))
    else:
        tensors = read_safetensors(os.path.join(d, "model.safetensors"))
        ok("model.safetensors follows the specification")
    return tensors


def floats(dtype, raw):
    if dtype == "F32":
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    if dtype == "BF16":
        half = struct.unpack("<%dH" % (len(raw) // 2), raw)
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in half]
    fail("dtype %s" % dtype)


def to_bf16(x):
    """fp32 -> bf16 -> fp32, round to nearest even (NaN aside)."""
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", u))[0]


# ---- GPT2LMHeadModel's state dict, from modeling_gpt2.py ---------------

def gpt2_state_dict_shapes(cfg):
    C, L, V, P = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"], cfg["n_positions"]
    inner = cfg.get("n_inner") or 4 * C
    s = {"transformer.wte.weight": [V, C], "transformer.wpe.weight": [P, C],
         "transformer.ln_f.weight": [C], "transformer.ln_f.bias": [C]}
    for i in range(L):
        h = "transformer.h.%d." % i
        s.update({h + "ln_1.weight": [C], h + "ln_1.bias": [C],
                  h + "attn.c_attn.weight": [C, 3 * C], h + "attn.c_attn.bias": [3 * C],
                  h + "attn.c_proj.weight": [C, C], h + "attn.c_proj.bias": [C],
                  h + "ln_2.weight": [C], h + "ln_2.bias": [C],
                  h + "mlp.c_fc.weight": [C, inner], h + "mlp.c_fc.bias": [inner],
                  h + "mlp.c_proj.weight": [inner, C], h + "mlp.c_proj.bias": [C]})
    if not cfg.get("tie_word_embeddings", True):
        s["lm_head.weight"] = [V, C]
    return s


# ---- LlamaForCausalLM's state dict, from modeling_llama.py -------------

def llama_state_dict_shapes(cfg):
    C, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    NH, F = cfg["num_attention_heads"], cfg["intermediate_size"]
    KV = cfg.get("num_key_value_heads") or NH
    hd = cfg.get("head_dim") or C // NH
    s = {"model.embed_tokens.weight": [V, C], "model.norm.weight": [C]}
    for i in range(L):
        h = "model.layers.%d." % i
        s.update({h + "input_layernorm.weight": [C],
                  h + "self_attn.q_proj.weight": [NH * hd, C],
                  h + "self_attn.k_proj.weight": [KV * hd, C],
                  h + "self_attn.v_proj.weight": [KV * hd, C],
                  h + "self_attn.o_proj.weight": [C, NH * hd],
                  h + "post_attention_layernorm.weight": [C],
                  h + "mlp.gate_proj.weight": [F, C], h + "mlp.up_proj.weight": [F, C],
                  h + "mlp.down_proj.weight": [C, F]})
    if not cfg.get("tie_word_embeddings", False):
        s["lm_head.weight"] = [V, C]
    return s


# trident's llama tensors (checkpoint-format.md) and their HF names: the
# q and k rows are stored in HF's rotary layout, so values map one to one
LLAMA_OF = {"ln1.w": "input_layernorm.weight", "attn.q.w": "self_attn.q_proj.weight",
            "attn.k.w": "self_attn.k_proj.weight", "attn.v.w": "self_attn.v_proj.weight",
            "attn.o.w": "self_attn.o_proj.weight", "ln2.w": "post_attention_layernorm.weight",
            "mlp.gate.w": "mlp.gate_proj.weight", "mlp.up.w": "mlp.up_proj.weight",
            "mlp.down.w": "mlp.down_proj.weight"}


def llama_hf_name(name):
    fixed = {"wte": "model.embed_tokens.weight", "lnf.w": "model.norm.weight",
             "lm_head": "lm_head.weight"}
    if name in fixed:
        return fixed[name]
    _, layer, rest = name.split(".", 2)
    return "model.layers.%s.%s" % (layer, LLAMA_OF[rest])


def check_llama(d, ckpt, cfg, tensors):
    want = llama_state_dict_shapes(cfg)
    if set(tensors) != set(want):
        fail("names: missing %s, unexpected %s" % (sorted(set(want) - set(tensors)),
                                                   sorted(set(tensors) - set(want))))
    for name, shape in want.items():
        if tensors[name][1] != shape:
            fail("%s: shape %s, LlamaForCausalLM wants %s" % (name, tensors[name][1], shape))
    want_dtype = {"float32": "F32", "bfloat16": "BF16"}[cfg["torch_dtype"]]
    if {t[0] for t in tensors.values()} != {want_dtype}:
        fail("dtypes differ from config.json's %s" % cfg["torch_dtype"])
    ok("%d tensors: LlamaForCausalLM's names and shapes, all %s" % (len(want), want_dtype))
    names = ["wte", "lnf.w"] + (["lm_head"] if "lm_head.weight" in want else [])
    names += ["h.%d.%s" % (l, s) for l in range(cfg["num_hidden_layers"]) for s in LLAMA_OF]
    V, C = cfg["vocab_size"], cfg["hidden_size"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            expect = h5_tensor(ckpt, name, tmp)
            if name in ("wte", "lm_head"):
                expect = expect[:V * C]
            if want_dtype == "BF16":
                expect = [to_bf16(v) for v in expect]
            got = floats(*tensors[llama_hf_name(name)][0::2])
            if [struct.pack("<f", v) for v in got] != [struct.pack("<f", v) for v in expect]:
                fail("%s -> %s: values differ from the checkpoint's" % (name, llama_hf_name(name)))
    ok("every value is the checkpoint's, bitwise%s" % (
        "" if want_dtype == "F32" else " after rounding to bf16"))


# ---- the checkpoint, from doc/checkpoint-format.md ---------------------

def h5_tensor(ckpt, name, tmp):
    out = os.path.join(tmp, "t.bin")
    subprocess.run(["h5dump", "-d", "/model/" + name, "-b", "LE", "-o", out, ckpt],
                   check=True, stdout=subprocess.DEVNULL)
    with open(out, "rb") as f:
        raw = f.read()
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))


def trident_to_hf(name, vals, cfg, V_ckpt):
    """The HF tensor (flat, C order) the checkpoint tensor `name` must become."""
    C, NH = cfg["n_embd"], cfg["n_head"]
    hs = C // NH
    if name in ("wte", "lm_head"):
        return vals[:cfg["vocab_size"] * C]          # padding rows dropped
    if name.endswith("attn.qkv.w") or name.endswith("attn.qkv.b"):
        cols = C if name.endswith(".w") else 1
        # (NH, 3, hs, cols) -> (3, NH, hs, cols): GPT-2's [q | k | v] rows
        rows = [None] * (3 * C)
        for head in range(NH):
            for which in range(3):
                for d in range(hs):
                    src = (head * 3 + which) * hs + d
                    rows[(which * NH + head) * hs + d] = vals[src * cols:(src + 1) * cols]
        if cols == 1:
            return [r[0] for r in rows]
        return transpose(rows)                       # (out, in) -> Conv1D (in, out)
    if name.endswith(".w") and (".attn.proj" in name or ".mlp." in name):
        out_dim = {"attn.proj": C, "mlp.fc": 4 * C, "mlp.proj": C}
        key = name.split(".", 2)[2][:-2]
        o = out_dim[key]
        i = len(vals) // o
        return transpose([vals[r * i:(r + 1) * i] for r in range(o)])
    return vals


def transpose(rows):
    return [rows[r][c] for c in range(len(rows[0])) for r in range(len(rows))]


HF_OF = {"ln1.w": "ln_1.weight", "ln1.b": "ln_1.bias", "attn.qkv.w": "attn.c_attn.weight",
         "attn.qkv.b": "attn.c_attn.bias", "attn.proj.w": "attn.c_proj.weight",
         "attn.proj.b": "attn.c_proj.bias", "ln2.w": "ln_2.weight", "ln2.b": "ln_2.bias",
         "mlp.fc.w": "mlp.c_fc.weight", "mlp.fc.b": "mlp.c_fc.bias",
         "mlp.proj.w": "mlp.c_proj.weight", "mlp.proj.b": "mlp.c_proj.bias"}


def hf_name(name):
    if name == "wte":
        return "transformer.wte.weight"
    if name == "wpe":
        return "transformer.wpe.weight"
    if name == "lnf.w":
        return "transformer.ln_f.weight"
    if name == "lnf.b":
        return "transformer.ln_f.bias"
    if name == "lm_head":
        return "lm_head.weight"
    _, layer, rest = name.split(".", 2)
    return "transformer.h.%s.%s" % (layer, HF_OF[rest])


# ---- GPT-2's forward pass, twice ---------------------------------------

def layernorm(x, w, b, eps):
    m = sum(x) / len(x)
    v = sum((a - m) ** 2 for a in x) / len(x)
    r = 1.0 / math.sqrt(v + eps)
    return [(a - m) * r * w[i] + b[i] for i, a in enumerate(x)]


def gelu_new(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def conv1d(x, w, b, n_in, n_out):
    """HF Conv1D: x @ W + b with W (in, out)."""
    return [b[o] + sum(x[i] * w[i * n_out + o] for i in range(n_in)) for o in range(n_out)]


def linear(x, w, b, n_in, n_out):
    """trident: x W^T + b with W (out, in)."""
    return [(b[o] if b else 0.0) + sum(x[i] * w[o * n_in + i] for i in range(n_in))
            for o in range(n_out)]


def attention(q, k, v, NH, hs, T):
    out = [[0.0] * (NH * hs) for _ in range(T)]
    for h in range(NH):
        for t in range(T):
            s = [sum(q[t][h * hs + d] * k[u][h * hs + d] for d in range(hs)) / math.sqrt(hs)
                 for u in range(t + 1)]
            m = max(s)
            e = [math.exp(a - m) for a in s]
            z = sum(e)
            for d in range(hs):
                out[t][h * hs + d] = sum(e[u] / z * v[u][h * hs + d] for u in range(t + 1))
    return out


def forward_hf(W, cfg, tokens):
    C, NH, V = cfg["n_embd"], cfg["n_head"], cfg["vocab_size"]
    eps, hs, T = cfg["layer_norm_epsilon"], C // NH, len(tokens)
    wte, wpe = W["transformer.wte.weight"], W["transformer.wpe.weight"]
    x = [[wte[tok * C + c] + wpe[t * C + c] for c in range(C)] for t, tok in enumerate(tokens)]
    for l in range(cfg["n_layer"]):
        p = lambda n: W["transformer.h.%d.%s" % (l, n)]
        a = [layernorm(r, p("ln_1.weight"), p("ln_1.bias"), eps) for r in x]
        qkv = [conv1d(r, p("attn.c_attn.weight"), p("attn.c_attn.bias"), C, 3 * C) for r in a]
        q, k, v = ([r[i * C:(i + 1) * C] for r in qkv] for i in range(3))
        y = attention(q, k, v, NH, hs, T)
        y = [conv1d(r, p("attn.c_proj.weight"), p("attn.c_proj.bias"), C, C) for r in y]
        x = [[x[t][c] + y[t][c] for c in range(C)] for t in range(T)]
        a = [layernorm(r, p("ln_2.weight"), p("ln_2.bias"), eps) for r in x]
        f = [[gelu_new(z) for z in conv1d(r, p("mlp.c_fc.weight"), p("mlp.c_fc.bias"), C, 4 * C)]
             for r in a]
        y = [conv1d(r, p("mlp.c_proj.weight"), p("mlp.c_proj.bias"), 4 * C, C) for r in f]
        x = [[x[t][c] + y[t][c] for c in range(C)] for t in range(T)]
    x = [layernorm(r, W["transformer.ln_f.weight"], W["transformer.ln_f.bias"], eps) for r in x]
    head = W.get("lm_head.weight", wte)
    return [linear(r, head, None, C, V) for r in x]


def forward_trident(K, mcfg, tokens, V):
    C, NH = mcfg["n_embd"], mcfg["n_head"]
    hs, T, eps = C // NH, len(tokens), 1e-5
    x = [[K["wte"][tok * C + c] + K["wpe"][t * C + c] for c in range(C)]
         for t, tok in enumerate(tokens)]
    for l in range(mcfg["n_layer"]):
        p = lambda n: K["h.%d.%s" % (l, n)]
        a = [layernorm(r, p("ln1.w"), p("ln1.b"), eps) for r in x]
        qkv = [linear(r, p("attn.qkv.w"), p("attn.qkv.b"), C, 3 * C) for r in a]
        # rows per head: [head][q, k, v][hs]
        pick = lambda r, which: [r[(h * 3 + which) * hs + d] for h in range(NH) for d in range(hs)]
        q, k, v = ([pick(r, i) for r in qkv] for i in range(3))
        y = attention(q, k, v, NH, hs, T)
        y = [linear(r, p("attn.proj.w"), p("attn.proj.b"), C, C) for r in y]
        x = [[x[t][c] + y[t][c] for c in range(C)] for t in range(T)]
        a = [layernorm(r, p("ln2.w"), p("ln2.b"), eps) for r in x]
        f = [[gelu_new(z) for z in linear(r, p("mlp.fc.w"), p("mlp.fc.b"), C, 4 * C)] for r in a]
        y = [linear(r, p("mlp.proj.w"), p("mlp.proj.b"), 4 * C, C) for r in f]
        x = [[x[t][c] + y[t][c] for c in range(C)] for t in range(T)]
    x = [layernorm(r, K["lnf.w"], K["lnf.b"], eps) for r in x]
    head = K.get("lm_head", K["wte"])
    return [linear(r, head, None, C, V) for r in x]


def stored_model_config(ckpt):
    """[model] keys of the config the checkpoint stores (attribute `config`)."""
    text = subprocess.run(["h5dump", "-a", "/config", ckpt], check=True,
                          capture_output=True, text=True).stdout
    m = {}
    for line in text.replace("\\n", "\n").splitlines():
        line = line.strip().strip('"')
        if "=" in line:
            k, v = (s.strip() for s in line.split("=", 1))
            m.setdefault(k, v.split(";")[0].strip())
    return {"n_layer": int(m["n_layer"]), "n_embd": int(m["n_embd"]),
            "n_head": int(m["n_head"]), "vocab_size": int(m["vocab_size"]),
            "tie_embeddings": m["tie_embeddings"] in ("true", "yes", "1", "on")}


def to_llmc(d, out, Vp):
    """llm.c's gpt2_*.bin: 256 int32 header [20240326, 3, maxT, V, L, NH, C,
    Vp], then fp32 wte (Vp, C), wpe (maxT, C), and per-layer arrays stacked
    over layers in the order ln1w ln1b qkvw qkvb attprojw attprojb ln2w ln2b
    fcw fcb fcprojw fcprojb, then lnfw lnfb; weights as PyTorch's Linear
    stores them, (out, in), qkv rows [q | k | v]."""
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    W = {n: floats(t[0], t[2]) for n, t in read_model_dir(d).items()}
    C, L, V, T = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"], cfg["n_positions"]
    header = [20240326, 3, T, V, L, cfg["n_head"], C, Vp] + [0] * 248
    lin = lambda w, n_in, n_out: transpose([w[i * n_out:(i + 1) * n_out] for i in range(n_in)])
    per_layer = [("ln_1.weight", None), ("ln_1.bias", None),
                 ("attn.c_attn.weight", (C, 3 * C)), ("attn.c_attn.bias", None),
                 ("attn.c_proj.weight", (C, C)), ("attn.c_proj.bias", None),
                 ("ln_2.weight", None), ("ln_2.bias", None),
                 ("mlp.c_fc.weight", (C, 4 * C)), ("mlp.c_fc.bias", None),
                 ("mlp.c_proj.weight", (4 * C, C)), ("mlp.c_proj.bias", None)]
    vals = W["transformer.wte.weight"] + [0.0] * ((Vp - V) * C) + W["transformer.wpe.weight"]
    for name, conv in per_layer:
        for l in range(L):
            w = W["transformer.h.%d.%s" % (l, name)]
            vals += lin(w, *conv) if conv else w
    vals += W["transformer.ln_f.weight"] + W["transformer.ln_f.bias"]
    with open(out, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%df" % len(vals), *vals))
    ok("wrote %s: llm.c version 3, V %d padded to %d" % (out, V, Vp))


def write_model(out, tensors, dtype, cfg):
    """tensors ({name: (shape, floats)}) as one model.safetensors of dtype
    (F32 or F16: struct's "f" or "e", round to nearest even) laid out as the
    specification says, the header padded to 8, and cfg as config.json."""
    code = {"F32": "f", "F16": "e"}[dtype]
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (shape, v) in tensors.items():
        blob = struct.pack("<%d%s" % (len(v), code), *v)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    with open(os.path.join(out, "config.json"), "w") as g:
        json.dump(cfg, g)


def read_floats_and_config(d):
    tensors = {name: (shape, floats(dtype, raw))
               for name, (dtype, shape, raw) in read_model_dir(d).items()}
    with open(os.path.join(d, "config.json")) as f:
        return tensors, json.load(f)


def to_f16(d, out):
    """The same tensors, F16, in one file."""
    tensors, cfg = read_floats_and_config(d)
    cfg["torch_dtype"] = "float16"
    write_model(out, tensors, "F16", cfg)
    ok("wrote %s: %d F16 tensors" % (out, len(tensors)))


def edit(d, out, edits):
    """The model of d, F32, changed as each edit says, for init_from's
    refusals and for published models' quirks: NAME=COPY adds tensor NAME,
    a copy of COPY; NAME[I]=X sets element I (flat) of NAME to the float X
    (nan, inf); config.KEY=JSON sets a field of config.json to a JSON value;
    -config.KEY removes one; -NAME removes tensor NAME; strip=PREFIX takes
    PREFIX off every tensor name that has it (HF hub's gpt2 files lack
    "transformer.")."""
    tensors, cfg = read_floats_and_config(d)
    for e in edits:
        if e.startswith("-config."):
            del cfg[e[len("-config."):]]
            continue
        if e.startswith("-"):
            del tensors[e[1:]]
            continue
        target, value = e.split("=", 1)
        if target == "strip":
            tensors = {(k[len(value):] if k.startswith(value) else k): t
                       for k, t in tensors.items()}
        elif target.startswith("config."):
            cfg[target[len("config."):]] = json.loads(value)
        elif target.endswith("]"):
            name, index = target[:-1].split("[")
            tensors[name][1][int(index)] = float(value)
        else:
            shape, v = tensors[value]
            tensors[target] = (shape, list(v))
    write_model(out, tensors, "F32", cfg)
    ok("wrote %s: %d F32 tensors, %d edits" % (out, len(tensors), len(edits)))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--to-f16":
        to_f16(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) >= 4 and sys.argv[1] == "--edit":
        edit(sys.argv[2], sys.argv[3], sys.argv[4:])
        return
    if len(sys.argv) == 5 and sys.argv[1] == "--to-llmc":
        to_llmc(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    d, ckpt = sys.argv[1], sys.argv[2]
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") == "llama" and cfg.get("architectures") == ["LlamaForCausalLM"]:
        check_llama(d, ckpt, cfg, read_model_dir(d))
        return
    for key, want in (("model_type", "gpt2"), ("architectures", ["GPT2LMHeadModel"])):
        if cfg.get(key) != want:
            fail("config.json: %s is %r" % (key, cfg.get(key)))
    tensors = read_model_dir(d)
    want = gpt2_state_dict_shapes(cfg)
    if set(tensors) != set(want):
        fail("names: missing %s, unexpected %s" % (sorted(set(want) - set(tensors)),
                                                   sorted(set(tensors) - set(want))))
    for name, shape in want.items():
        if tensors[name][1] != shape:
            fail("%s: shape %s, GPT2LMHeadModel wants %s" % (name, tensors[name][1], shape))
    dtypes = {t[0] for t in tensors.values()}
    want_dtype = {"float32": "F32", "bfloat16": "BF16"}[cfg["torch_dtype"]]
    if dtypes != {want_dtype}:
        fail("dtypes %s, config.json says %s" % (sorted(dtypes), cfg["torch_dtype"]))
    ok("%d tensors: GPT2LMHeadModel's names and shapes, all %s" % (len(want), want_dtype))

    mcfg = stored_model_config(ckpt)
    for k in ("n_layer", "n_embd", "n_head"):
        if mcfg[k] != cfg[k]:
            fail("config.json %s = %d, the checkpoint's %d" % (k, cfg[k], mcfg[k]))
    names = ["wte", "wpe", "lnf.w", "lnf.b"] + (["lm_head"] if not mcfg["tie_embeddings"] else [])
    names += ["h.%d.%s" % (l, s) for l in range(mcfg["n_layer"]) for s in HF_OF]
    K = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            K[name] = h5_tensor(ckpt, name, tmp)
    W = {n: floats(t[0], t[2]) for n, t in tensors.items()}
    for name in names:
        expect = trident_to_hf(name, K[name], cfg, mcfg["vocab_size"])
        if want_dtype == "BF16":
            expect = [to_bf16(v) for v in expect]
        got = W[hf_name(name)]
        bad = [i for i in range(len(expect)) if struct.pack("<f", expect[i]) != struct.pack("<f", got[i])]
        if len(got) != len(expect) or bad:
            fail("%s -> %s: %d of %d values differ (first at %d)" % (
                name, hf_name(name), len(bad), len(expect), bad[0] if bad else -1))
    ok("every value is the checkpoint's, bitwise%s" % (
        "" if want_dtype == "F32" else " after rounding to bf16"))

    tokens = [(7 * i + 3) % cfg["vocab_size"] for i in range(min(6, cfg["n_positions"]))]
    a = forward_hf(W, cfg, tokens)
    b = forward_trident(K, mcfg, tokens, cfg["vocab_size"])
    worst = max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
    tol = 1e-6 if want_dtype == "F32" else 0.5
    if not worst <= tol:
        fail("forward pass: logits differ by %.3g (tolerance %g)" % (worst, tol))
    ok("forward pass on %d tokens: HF GPT-2's logits from the export = trident's layout's "
       "from the checkpoint (largest difference %.3g, tolerance %g)" % (len(tokens), worst, tol))


if __name__ == "__main__":
    main()
