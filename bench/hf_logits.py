#!/usr/bin/env python3
"""hf_logits.py - an export of trident's (GPT2LMHeadModel, LlamaForCausalLM,
MixtralForCausalLM, Qwen2MoeForCausalLM) run by transformers itself.

    hf_logits.py DIR WINDOW LOSS

Loads DIR with transformers' AutoModelForCausalLM in fp32 (on the GPU when
there is one), checks the class is the one config.json names, and runs
the window's bytes but the last (WINDOW: seq_len + 1 bytes, the one window
a trident run on that file trains on). Its logits are compared with a
forward pass over the same files in pure Python and double precision, the
modeling files' math written out independently of trident's code
(tests/hf_check.py's for GPT-2, tests/hf_check_moe.py's for the llamas),
and its mean cross-entropy of the next bytes with LOSS, trident's step-1
loss of that window at lr = 0 (from its metrics file): both within 1e-5
relative. trident prints no logits: its loss on the window is what
stands for them. For bench/gpu_check.sh's interop section (transformers
and torch are there, not in CI). Prints one line; exits 1 when a check
fails.
"""
import json
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from hf_check import floats, forward_hf, read_model_dir  # noqa: E402
from hf_check_moe import forward_logits  # noqa: E402


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    d, window, want_loss = sys.argv[1], sys.argv[2], float(sys.argv[3])
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    with open(window, "rb") as f:
        tokens = list(f.read())
    device = "cuda" if torch.cuda.is_available() else "cpu"
    # fp32 whatever the version's name for the argument (dtype in 5,
    # torch_dtype in 4): the export is F32 and from_pretrained's default
    # is fp32; .float() makes sure
    model = transformers.AutoModelForCausalLM.from_pretrained(d)
    model = model.float().to(device).eval()
    if type(model).__name__ != cfg["architectures"][0]:
        print("FAIL: transformers built %s, config.json names %s" % (type(model).__name__,
                                                                   cfg["architectures"][0]))
        sys.exit(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        ids = torch.tensor([tokens[:-1]], device=device)
        logits = model(input_ids=ids).logits[0].double().cpu()
    got_loss = torch.nn.functional.cross_entropy(logits, torch.tensor(tokens[1:])).item()
    W = {n: floats(t[0], t[2]) for n, t in read_model_dir(d).items()}
    forward = forward_hf if cfg["model_type"] == "gpt2" else forward_logits
    ref = torch.tensor(forward(W, cfg, tokens[:-1]), dtype=torch.float64)
    logit_rel = ((logits - ref).abs().max() / ref.abs().max()).item()
    loss_rel = abs(got_loss - want_loss) / abs(want_loss)
    verdict = "ok" if logit_rel <= 1e-5 and loss_rel <= 1e-5 else "FAIL"
    print("%s: transformers %s %s (%s) on %d tokens: logits vs the modeling files' math "
          "max |a-b|/max|b| %.2g; cross-entropy %.9g, trident's loss %.9g (relative %.2g; "
          "tolerance 1e-5)" % (verdict, transformers.__version__, type(model).__name__, device,
                               len(tokens) - 1, logit_rel, got_loss, want_loss, loss_rel))
    sys.exit(0 if verdict == "ok" else 1)


if __name__ == "__main__":
    main()
