#!/usr/bin/env python3
"""Trains the lab's model family on the GCIDE corpus (scripts/train/corpus.py), on the GPU machine:

  1. target            Llama architecture (LlamaForCausalLM), ~20 M parameters, GQA (common.TARGET),
                       next-byte cross-entropy;
  2. draft-distilled   common.DRAFT (under 1/8 of the target), trained on the target's logits alone:
                       soft-target KL(p_target || p_draft) at temperature 1 over every position;
  3. draft             the same draft and seed, trained on the data alone (cross-entropy), in the same
                       time box (so more steps than the distilled one, which also runs the target).

Each is saved as a Hugging Face folder under --out (config.json + model.safetensors in bf16,
byte_tokenizer.json, train_log.jsonl, provenance.json), with loss_curves.png beside them.

Steps: --*-steps N, or 0 (the default) to fit a time box: the first 20 steps are timed and the step
count is set to what fits in --*-seconds; it is logged, and the same command with that N given
reproduces the run (same seed: same batches, same initialisation; GPU kernels may still differ in the
last bits). The learning rate warms up over 100 steps and decays by cosine to 10% at the last step.

Usage (GPU machine): python3 scripts/train/train.py --corpus data/corpus/gcide --out data/models/trained
       (here, CPU, toy scale): python3 scripts/train/train.py --toy --device cpu --out /tmp/toy
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

NAMES = {"target": "gcide-target-20m", "draft-distilled": "gcide-draft-2m-distilled", "draft": "gcide-draft-2m"}


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


class Batches:
    """Random windows of the train split: [BOS] + bytes[o : o + W - 1] → bytes[o : o + W]."""

    def __init__(self, torch, data, batch, window, seed, device):
        self.torch, self.batch, self.window, self.device = torch, batch, window, device
        self.data = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device=device, dtype=torch.long)
        self.gen = torch.Generator(device="cpu").manual_seed(seed)
        self.ar = torch.arange(window, device=device)

    def next(self):
        torch = self.torch
        off = torch.randint(0, self.data.numel() - self.window, (self.batch,), generator=self.gen).to(self.device)
        tgt = self.data[off[:, None] + self.ar[None, :]]
        inp = torch.cat([torch.full((self.batch, 1), common.BOS, device=self.device, dtype=torch.long), tgt[:, :-1]], 1)
        return inp, tgt


def val_loss(torch, model, val_windows, device, batch=32):
    """Mean next-byte cross-entropy (nats) over every byte of the validation split (common.windows)."""
    F = torch.nn.functional
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad(), torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=device != "cpu"):
        full = [w for w in val_windows if len(w[0]) == len(val_windows[0][0])]
        chunks = [full[i:i + batch] for i in range(0, len(full), batch)]
        chunks += [[w] for w in val_windows if len(w[0]) != len(val_windows[0][0])]  # the last, shorter piece
        for chunk in chunks:
            inp = torch.tensor([w[0] for w in chunk], device=device)
            tgt = torch.tensor([w[1] for w in chunk], device=device)
            logits = model(input_ids=inp).logits.float()
            total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="sum"))
            count += tgt.numel()
    model.train()
    return total / count


def train_one(torch, transformers, args, role, cfg_kw, data, val_windows, teacher=None):
    F = torch.nn.functional
    device = args.device
    torch.manual_seed(args.seed)
    config = common.llama_config(transformers, **cfg_kw)
    config._attn_implementation = "sdpa"
    model = transformers.LlamaForCausalLM(config).to(device)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    lr = args.lr_target if role == "target" else args.lr_draft
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if device.startswith("cuda") else {}))
    flag = {"target": "target-steps", "draft-distilled": "distilled-steps", "draft": "draft-steps"}[role]
    steps = getattr(args, flag.replace("-", "_"))
    budget = args.target_seconds if role == "target" else args.draft_seconds
    batches = Batches(torch, data, args.batch, args.window, args.seed + 1, device)
    log, t0, step, timed_from = [], time.time(), 0, None
    warmup = min(100, max(1, steps // 10)) if steps else 100
    autocast = dict(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=device != "cpu")

    def lr_at(s, total):
        if s < warmup:
            return lr * (s + 1) / warmup
        p = min(1.0, (s - warmup) / max(1, total - warmup))
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))

    total = steps or 10 ** 9
    while step < total:
        if not steps and step == 20:  # the time box: the rate of steps 5..19 sets the count
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            rate = (time.time() - timed_from) / 15
            total = max(21, int((budget - (time.time() - t0)) / rate) + 20)
            print(f"[{role}] {rate * 1e3:.1f} ms/step: {total} steps fit in {budget:.0f} s", flush=True)
        if step == 5:
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            timed_from = time.time()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total if total < 10 ** 9 else 10 ** 6)
        inp, tgt = batches.next()
        with torch.autocast(**autocast):
            logits = model(input_ids=inp).logits.float()
            if teacher is None:
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
            else:
                with torch.no_grad():
                    t_logp = F.log_softmax(teacher(input_ids=inp).logits.float(), -1)
                s_logp = F.log_softmax(logits, -1)
                loss = F.kl_div(s_logp.reshape(-1, logits.shape[-1]), t_logp.reshape(-1, logits.shape[-1]),
                                log_target=True, reduction="batchmean")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % args.log_every == 0 or step == total:
            entry = {"step": step, "tokens": step * args.batch * args.window, "loss": float(loss),
                     "lr": opt.param_groups[0]["lr"], "elapsed_s": round(time.time() - t0, 2)}
            if step % args.val_every == 0 or step == total:
                entry["val_loss"] = val_loss(torch, model, val_windows, device)
            log.append(entry)
            print(f"[{role}] " + json.dumps(entry), flush=True)
    elapsed = time.time() - t0
    final_val = log[-1]["val_loss"]
    out = os.path.join(args.out, NAMES[role])
    os.makedirs(out, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    common.write_tokenizer(out)
    with open(os.path.join(out, "train_log.jsonl"), "w") as f:
        for e in log:
            f.write(json.dumps(e) + "\n")
    prov = {
        "role": role, "parameters": params, "config": cfg_kw,
        "objective": "cross-entropy on the data" if teacher is None else
                     "soft-target KL(p_target || p_draft), temperature 1, from " + NAMES["target"],
        "steps": step, "batch": args.batch, "window": args.window, "tokens": step * args.batch * args.window,
        "lr": lr, "schedule": f"warmup {warmup} steps, cosine to 10%", "optimizer": "AdamW(0.9, 0.95), wd 0.1, clip 1.0",
        "precision": "fp32 weights, bf16 autocast; saved in bf16",
        "seed": args.seed, "seconds": round(elapsed, 1),
        "val_loss_nats": final_val, "val_bits_per_byte": final_val / math.log(2), "val_perplexity": math.exp(final_val),
        "reproduce": f"python3 scripts/train/train.py --seed {args.seed} --{flag} {step} --batch {args.batch}"
                     f" --corpus {args.corpus} --roles {role}" + ("" if role != "draft-distilled" else " (the target in --out)"),
        "corpus": args.corpus, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor(),
        "torch": torch.__version__, "transformers": transformers.__version__, "commit": args.commit,
    }
    with open(os.path.join(out, "provenance.json"), "w") as f:
        json.dump(prov, f, indent=2)
        f.write("\n")
    print(f"[{role}] {params / 1e6:.2f} M parameters, {step} steps in {elapsed:.0f} s, val loss {final_val:.4f} nats "
          f"({final_val / math.log(2):.3f} bits/byte) → {out}", flush=True)
    return model, log, prov


def plot(args, logs):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for role, log in logs.items():
        xs = [e["tokens"] / 1e6 for e in log]
        axes[0 if role == "target" else 1].plot(xs, [e["loss"] for e in log], label=f"{role} train", alpha=0.6)
        v = [(e["tokens"] / 1e6, e["val_loss"]) for e in log if "val_loss" in e]
        axes[0 if role == "target" else 1].plot([a for a, _ in v], [b for _, b in v], "o-", label=f"{role} validation CE")
    axes[0].set_title("target: cross-entropy (nats/byte)")
    axes[1].set_title("drafts: train objective (KL for distilled, CE for plain); validation CE")
    for ax in axes:
        ax.set_xlabel("training tokens (M)")
        ax.set_ylabel("nats per byte")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "loss_curves.png"), dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="data/corpus/gcide")
    ap.add_argument("--out", default="data/models/trained")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--window", type=int, default=common.WINDOW)
    ap.add_argument("--target-steps", type=int, default=0)
    ap.add_argument("--draft-steps", type=int, default=0, help="the draft trained on data alone")
    ap.add_argument("--distilled-steps", type=int, default=0, help="the distilled draft")
    ap.add_argument("--target-seconds", type=float, default=165)
    ap.add_argument("--draft-seconds", type=float, default=55)
    ap.add_argument("--lr-target", type=float, default=1.5e-3)
    ap.add_argument("--lr-draft", type=float, default=3e-3)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--val-every", type=int, default=250)
    ap.add_argument("--roles", default="target,draft-distilled,draft")
    ap.add_argument("--toy", action="store_true", help="tiny shapes and steps (debugging the script on a CPU)")
    args = ap.parse_args()
    import torch
    import transformers
    args.commit = git_commit()
    target_kw, draft_kw = dict(common.TARGET), dict(common.DRAFT)
    if args.toy:
        target_kw = dict(hidden=128, layers=2, heads=2, kv_heads=1, intermediate=256)
        draft_kw = dict(hidden=64, layers=1, heads=1, kv_heads=1, intermediate=128, tie=True)
        args.batch, args.window = 4, 64
        args.target_steps = args.target_steps or 30
        args.draft_steps = args.draft_steps or 20
        args.distilled_steps = args.distilled_steps or 20
        args.val_every, args.log_every = 10, 5
    train = common.read_bytes(os.path.join(args.corpus, "train.txt"))
    val = common.read_bytes(os.path.join(args.corpus, "validation.txt"))
    if args.toy:
        train, val = train[:200000], val[:4096]
    val_windows = common.windows(val, args.window)
    os.makedirs(args.out, exist_ok=True)
    roles = args.roles.split(",")
    logs, teacher = {}, None
    if "target" in roles:
        teacher, logs["target"], tp = train_one(torch, transformers, args, "target", target_kw, train, val_windows)
    elif "draft-distilled" in roles:
        teacher = transformers.LlamaForCausalLM.from_pretrained(os.path.join(args.out, NAMES["target"])).to(args.device)
    if teacher is not None:
        teacher.eval()
        for p in teacher.parameters():
            p.requires_grad_(False)
    for role in ("draft-distilled", "draft"):
        if role in roles:
            _, logs[role], dp = train_one(torch, transformers, args, role, draft_kw, train, val_windows,
                                          teacher if role == "draft-distilled" else None)
            if "target" in roles and not args.toy and dp["parameters"] * 8 > tp["parameters"]:
                sys.exit(f"draft has {dp['parameters']} parameters, more than 1/8 of the target's {tp['parameters']}")
    plot(args, logs)


if __name__ == "__main__":
    main()
