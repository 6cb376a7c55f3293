#!/usr/bin/env python3
"""Hugging Face transformers as the reference and the peer of inferlab's GPU engine (kernels/engine).

Correctness (default mode), on the GPU machine where torch and transformers are installed, nothing
downloaded:
  1. Builds a random-init model from a config (LlamaForCausalLM with GQA; --arch qwen2: Qwen2ForCausalLM,
     q/k/v biases), moves its norm weights to 1 + N(0, 0.1) and its biases to N(0, 0.02) (HF's init
     leaves them at 1 and 0, which would not test them), rounds every weight to bf16 and saves it with
     save_pretrained (bf16 safetensors): HF fp32, HF bf16 and the engine all use these exact values.
  2. Random token sequences; teacher-forced logits of every position from HF in fp32 (the reference;
     TF32 off) and in bf16 (the peer), and from the engine (build/inferlab_engine_logits).
  3. Compares as ../shared/ENGINE.md says: the engine's max |logit - ref| must be <= 2x HF bf16's own,
     argmax agreement >= 97% (or HF bf16's own agreement, where bf16 itself agrees less), the reference
     top-1 in the engine's top 5; free-running greedy text from
     the first --prompt tokens compared as vLLM's check_logprobs_close (at the first differing token each
     run's token must be in the other's top-5; comparison stops there).
  Writes --out (JSON): max_logit_diff, ref_bf16_max_logit_diff, argmax_agreement, ref_top1_in_top5,
  greedy_tokens_compared, greedy_first_mismatch per sequence, pass/fail of each rule, and provenance.

Speed (--perf): HF's generate with a static cache (auto-compiled) for a Llama-2-7B-shaped random model,
  bf16, 128-token prompt, 128 new tokens, greedy, at --perf-batches; tokens/s of the decode (the
  generate time minus a 1-token generate's), written to --perf-out as CSV.

Usage: python3 scripts/peers/hf_engine_peer.py --bin build --out OUT.json [--arch llama|qwen2]
       python3 scripts/peers/hf_engine_peer.py --perf --perf-out OUT.csv [--perf-batches 1,64]
"""
import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def provenance(torch, transformers):
    def run(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception as e:  # noqa: BLE001
            return f"unavailable: {e}"
    commit = run(["git", "rev-parse", "HEAD"])
    dirty = run(["git", "status", "--porcelain", "--untracked-files=no"])
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": socket.gethostname(),
        "gpu": torch.cuda.get_device_name(0),
        "nvidia_smi": run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem",
                           "--format=csv,noheader"]),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "commit": commit + ("+dirty" if dirty else ""),
    }


def build_model(args, torch, transformers):
    common = dict(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
                  num_hidden_layers=args.layers, num_attention_heads=args.heads,
                  num_key_value_heads=args.kv_heads, max_position_embeddings=4096, rms_norm_eps=1e-5,
                  rope_theta=10000.0, tie_word_embeddings=False, torch_dtype="bfloat16")
    if args.arch == "qwen2":
        config = transformers.Qwen2Config(**common, use_sliding_window=False)
        model = transformers.Qwen2ForCausalLM(config)
    else:
        config = transformers.LlamaConfig(**common, rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                                                  "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                                  "original_max_position_embeddings": 256})
        model = transformers.LlamaForCausalLM(config)
    g = torch.Generator().manual_seed(args.seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return model


def check_logprobs_close(ours, ref, k=5):
    """vLLM's rule: walk both greedy outputs; at the first differing token each must be in the other's
    top-k; stop there. Returns (tokens compared, first mismatch index or None, passed)."""
    for i, (a, b) in enumerate(zip(ours["greedy"], ref["greedy"])):
        if a != b:
            a_in_ref = a in [t for t, _ in ref["top_logprobs"][i][:k]]
            b_in_ours = b in [t for t, _ in ours["top_logprobs"][i][:k]]
            return i + 1, i, a_in_ref and b_in_ours
    return min(len(ours["greedy"]), len(ref["greedy"])), None, True


def hf_greedy(model, prompt, n, torch):
    ids = torch.tensor([prompt], device="cuda")
    greedy, tops = [], []
    past = None
    with torch.no_grad():
        for _ in range(n):
            out = model(input_ids=ids, past_key_values=past, use_cache=True)
            past = out.past_key_values
            lp = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
            top = torch.topk(lp, 5)
            tok = int(torch.argmax(out.logits[0, -1]))
            greedy.append(tok)
            tops.append([[int(i), float(v)] for i, v in zip(top.indices, top.values)])
            ids = torch.tensor([[tok]], device="cuda")
    return {"greedy": greedy, "top_logprobs": tops}


def correctness(args):
    import numpy as np
    import torch
    import transformers
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    work = tempfile.mkdtemp(prefix="inferlab_hf_peer_")
    model_dir = os.path.join(work, "model")
    model = build_model(args, torch, transformers)
    model.to(torch.bfloat16).save_pretrained(model_dir, safe_serialization=True)
    g = torch.Generator().manual_seed(args.seed + 1)
    seqs = torch.randint(0, args.vocab, (args.sequences, args.tokens), generator=g).tolist()
    with open(os.path.join(work, "tokens.json"), "w") as f:
        json.dump(seqs, f)

    ref32 = model.to(torch.float32).cuda().eval()
    ref_logits, ref_greedy = [], []
    with torch.no_grad():
        for s in seqs:
            ref_logits.append(ref32(input_ids=torch.tensor([s], device="cuda")).logits[0].float().cpu().numpy())
        for s in seqs:
            ref_greedy.append(hf_greedy(ref32, s[:args.prompt], args.greedy, torch))
    bf = ref32.to(torch.bfloat16)
    bf_logits = []
    with torch.no_grad():
        for s in seqs:
            bf_logits.append(bf(input_ids=torch.tensor([s], device="cuda")).logits[0].float().cpu().numpy())
    del bf, ref32
    torch.cuda.empty_cache()

    logits_path, out_path = os.path.join(work, "logits.f32"), os.path.join(work, "engine.json")
    cmd = [os.path.join(args.bin, "inferlab_engine_logits"), "--model-dir", model_dir, "--tokens",
           os.path.join(work, "tokens.json"), "--prompt", str(args.prompt), "--greedy", str(args.greedy),
           "--logits", logits_path, "--out", out_path]
    print("running", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    ours = np.fromfile(logits_path, dtype=np.float32).reshape(args.sequences, args.tokens, args.vocab)
    with open(out_path) as f:
        ours_greedy = json.load(f)["sequences"]

    ref = np.stack(ref_logits)
    bfl = np.stack(bf_logits)
    max_diff = float(np.abs(ours - ref).max())
    bf_diff = float(np.abs(bfl - ref).max())
    ref_top1 = ref.argmax(-1)
    agree = float((ours.argmax(-1) == ref_top1).mean())
    bf_agree = float((bfl.argmax(-1) == ref_top1).mean())
    top5 = np.argsort(-ours, axis=-1)[..., :5]
    in_top5 = float((top5 == ref_top1[..., None]).any(-1).mean())
    greedy = [check_logprobs_close(o, r) for o, r in zip(ours_greedy, ref_greedy)]
    result = {
        "arch": args.arch,
        "config": {"hidden": args.hidden, "intermediate": args.intermediate, "layers": args.layers,
                   "heads": args.heads, "kv_heads": args.kv_heads, "vocab": args.vocab},
        "sequences": args.sequences, "tokens_per_sequence": args.tokens,
        "max_logit_diff": max_diff,
        "ref_bf16_max_logit_diff": bf_diff,
        "argmax_agreement": agree,
        "ref_bf16_argmax_agreement": bf_agree,
        "ref_top1_in_top5": in_top5,
        "greedy_prompt_tokens": args.prompt,
        "greedy_tokens_compared": int(sum(c for c, _, _ in greedy)),
        "greedy_first_mismatch": [m for _, m, _ in greedy],
        "greedy_logprobs_close": all(p for _, _, p in greedy),
        # Argmax agreement: 97% (../shared/ENGINE.md, from HF bf16's own 97.5% on the Llama config), or HF bf16's
        # own agreement where that is lower (the Qwen2 config with its biases: bf16 itself agrees less).
        "rules": {"max_diff_le_2x_hf_bf16": max_diff <= 2 * bf_diff,
                  "argmax_agreement_ge_min_0.97_hf_bf16": agree >= min(0.97, bf_agree),
                  "ref_top1_in_top5": in_top5 == 1.0, "greedy_logprobs_close": all(p for _, _, p in greedy)},
        "provenance": provenance(torch, transformers),
    }
    result["passed"] = all(result["rules"].values())
    with open(out_path) as f:  # the engine binary's build commit (a tree copied elsewhere may carry a stale .git)
        built = json.load(f).get("commit", "")
    if built:
        result["provenance"]["commit"] = built + " (built from)"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        json.dump(result, f, indent=2)
    os.replace(args.out + ".tmp", args.out)
    print(json.dumps({k: v for k, v in result.items() if k != "provenance"}, indent=2))
    return 0 if result["passed"] else 1


def perf(args):
    import torch
    import transformers
    config = transformers.LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                                      num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                                      max_position_embeddings=4096, torch_dtype="bfloat16")
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(config).to(torch.bfloat16).eval()
    rows = []
    for b in [int(x) for x in args.perf_batches.split(",")]:
        ids = torch.randint(0, 32000, (b, 128), device="cuda")
        def gen(n):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, cache_implementation="static")
            torch.cuda.synchronize()
            return time.perf_counter() - t0
        for _ in range(2):
            gen(128)  # compile and warm up
        t_all, t_one = min(gen(128) for _ in range(2)), min(gen(1) for _ in range(2))
        tps = b * 127 / (t_all - t_one)
        rows.append((b, tps, t_all, t_one))
        print(f"HF static cache, batch {b}: {tps:.1f} decode tokens/s", flush=True)
    prov = provenance(torch, transformers)
    with open(args.perf_out, "w") as f:
        f.write("peer,model,batch,prompt_tokens,new_tokens,tokens_per_s,generate_s,first_token_s,gpu,torch,transformers,date\n")
        for b, tps, ta, t1 in rows:
            f.write(f"hf_static_cache,llama-2-7b,{b},128,128,{tps:.3f},{ta:.4f},{t1:.4f},{prov['gpu']},{prov['torch']},"
                    f"{prov['transformers']},{prov['date']}\n")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build", help="folder holding inferlab_engine_logits")
    ap.add_argument("--out", default="engine_vs_hf.json")
    ap.add_argument("--arch", choices=["llama", "qwen2"], default="llama")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--intermediate", type=int, default=2816)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--sequences", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--greedy", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--perf", action="store_true")
    ap.add_argument("--perf-out", default="hf_engine_peer_perf.csv")
    ap.add_argument("--perf-batches", default="1,64")
    args = ap.parse_args()
    sys.exit(perf(args) if args.perf else correctness(args))


if __name__ == "__main__":
    main()
