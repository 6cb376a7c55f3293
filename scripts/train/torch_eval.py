#!/usr/bin/env python3
"""PyTorch's side of the trained models' evaluation (GPU machine), written as one JSON:

  perplexity   every model folder's test perplexity and top-1 accuracy with Hugging Face transformers,
               in fp32 (the reference; TF32 off) and bf16, on exactly the windows `inferlab eval` cuts
               (common.windows); with --engine-json (inferlab eval --json outputs), the engine's number
               beside it and the relative difference, which must stay within 1%;
  fp8          the target with its layer weights (q, k, v, o, gate, up, down) and their inputs rounded to
               fp8 e4m3 with per-tensor scales (amax / 448; activations scaled per call), as cuBLASLt's fp8
               GEMM with per-tensor scales computes them: simulated, since the engine refuses fp8;
  agreement    speculative decoding's acceptance: the target generates --gen tokens greedily after each of
               --prompts test prompts; each draft, teacher-forced on that text, proposes its argmax at
               every generated position; the share equal to the target's token is the greedy acceptance
               rate α, and the expected tokens per target pass for γ = 1..8 follows from the measured runs
               of accepted tokens (not from α alone).

usage: python3 scripts/train/torch_eval.py --models DIR --data test.txt --out torch_eval.json [--engine-json a.json ...]
"""
import argparse
import datetime
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from train import NAMES  # noqa: E402


def score(torch, model, wins, device, batch=32):
    F = torch.nn.functional
    nll, correct, count = 0.0, 0, 0
    full = [w for w in wins if len(w[0]) == len(wins[0][0])]
    chunks = [full[i:i + batch] for i in range(0, len(full), batch)] + [[w] for w in wins if len(w[0]) != len(wins[0][0])]
    with torch.no_grad():
        for chunk in chunks:
            inp = torch.tensor([w[0] for w in chunk], device=device)
            tgt = torch.tensor([w[1] for w in chunk], device=device)
            logits = model(input_ids=inp).logits.double()
            nll += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="sum"))
            correct += int((logits.argmax(-1) == tgt).sum())
            count += tgt.numel()
    return {"perplexity": math.exp(nll / count), "nll_per_token": nll / count, "top1_accuracy": correct / count,
            "tokens": count}


def fp8_hooks(torch, model):
    """Rounds every layer linear's weight and input to e4m3 with per-tensor scales (in place / per call)."""
    e4m3 = torch.float8_e4m3fn
    maxv = torch.finfo(e4m3).max

    def q(x):
        s = x.abs().amax().float().clamp(min=1e-12) / maxv
        return ((x.float() / s).to(e4m3).float() * s).to(x.dtype)

    handles = []
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and ".layers." in name:
            with torch.no_grad():
                mod.weight.copy_(q(mod.weight))
            handles.append(mod.register_forward_pre_hook(lambda m, args: (q(args[0]),) + tuple(args[1:])))
    return handles


def agreement(torch, target, drafts, data, device, prompts, prompt_len, gen):
    starts = [i * (len(data) // prompts) for i in range(prompts)]
    ids = torch.tensor([[common.BOS] + list(data[s:s + prompt_len]) for s in starts], device=device)
    with torch.no_grad():
        out = target.generate(ids, max_new_tokens=gen, min_new_tokens=gen, do_sample=False,
                              pad_token_id=common.PAD, eos_token_id=None)
    res = {}
    for name, d in drafts.items():
        with torch.no_grad():
            am = d(input_ids=out).logits.argmax(-1)  # position i proposes token i + 1
        P = ids.shape[1]
        match = (am[:, P - 1:-1] == out[:, P:]).cpu()  # [prompts, gen]
        alpha = float(match.float().mean())
        per_gamma = {}
        for gamma in range(1, 9):  # walk each sequence as greedy speculative decoding would
            passes, tokens = 0, 0
            for row in match.tolist():
                i = 0
                while i + gamma < len(row):  # whole passes only: γ proposals and the target's token
                    k = 0
                    while k < gamma and row[i + k]:
                        k += 1
                    passes += 1
                    tokens += k + 1
                    i += k + 1
            per_gamma[str(gamma)] = tokens / passes
        res[name] = {"alpha": alpha, "tokens_per_target_pass": per_gamma,
                     "predicted_from_alpha": {str(g): (1 - alpha ** (g + 1)) / (1 - alpha) if alpha < 1 else g + 1
                                              for g in range(1, 9)}}
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="data/models/trained")
    ap.add_argument("--data", default="data/corpus/gcide/test.txt")
    ap.add_argument("--out", required=True)
    ap.add_argument("--engine-json", nargs="*", default=[])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--gen", type=int, default=128)
    args = ap.parse_args()
    import torch
    import transformers
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    data = common.read_bytes(args.data)
    wins = common.windows(data)
    models = {}
    result = {"data": args.data, "windows": len(wins), "perplexity": {}, "date":
              datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "torch": torch.__version__, "transformers": transformers.__version__,
              "gpu": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"}
    engine = {}
    for path in args.engine_json:
        with open(path) as f:
            j = json.load(f)
        engine[(os.path.basename(os.path.normpath(j["model"])), j["weight_format"])] = j
    for role, name in NAMES.items():
        folder = os.path.join(args.models, name)
        m32 = transformers.LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).to(args.device).eval()
        entry = {"fp32": score(torch, m32, wins, args.device)}
        entry["bf16"] = score(torch, m32.to(torch.bfloat16), wins, args.device)
        e = engine.get((name, "bf16"))
        if e and e.get("measured"):
            entry["engine_bf16"] = {k: e[k] for k in ("perplexity", "top1_accuracy", "tokens", "device")}
            entry["engine_vs_fp32_relative"] = e["perplexity"] / entry["fp32"]["perplexity"] - 1
            entry["within_1_percent"] = abs(entry["engine_vs_fp32_relative"]) <= 0.01
        result["perplexity"][role] = entry
        models[role] = m32.to(torch.bfloat16)
        print(role, json.dumps(entry), flush=True)
    tgt32 = transformers.LlamaForCausalLM.from_pretrained(os.path.join(args.models, NAMES["target"]),
                                                          dtype=torch.bfloat16).to(args.device).eval()
    fp8_hooks(torch, tgt32)
    result["target_fp8_simulated"] = score(torch, tgt32, wins, args.device)
    print("fp8 (simulated)", json.dumps(result["target_fp8_simulated"]), flush=True)
    del tgt32
    result["greedy_agreement"] = {"prompts": args.prompts, "prompt_bytes": args.prompt_len, "generated": args.gen,
                                  **agreement(torch, models["target"], {k: v for k, v in models.items() if k != "target"},
                                              data, args.device, args.prompts, args.prompt_len, args.gen)}
    print("agreement", json.dumps(result["greedy_agreement"]), flush=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
