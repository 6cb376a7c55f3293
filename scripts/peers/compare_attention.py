#!/usr/bin/env python3
"""Ratio table of inferlab's attention kernels to PyTorch SDPA peers measured in the same session.

    compare_attention.py RESULTS_DIR [--md OUT.md] [--ours NAME.csv] [--peers peers/NAME.csv]

RESULTS_DIR holds attention_prefill.csv (inferlab run experiments/attention_prefill.yaml) and
peers/sdpa_prefill.csv (scripts/peers/attention_peers.py); --ours and --peers name other files there
(head dim 64: attention_prefill_d64.csv and peers/sdpa_prefill_d64.csv). Times are compared directly (same shape,
same GPU, same session), so the FLOP convention of either side does not matter: ratio = peer time /
our time (> 1: ours is faster). Printed as markdown; written to --md as well.
"""
import argparse
import csv
import os

# (label, KV heads) for 16 query heads. Rows are matched by the number of KV heads (kv_heads_count
# in ours, kv_heads in the peers'), which results written before the GQA naming changed share.
KINDS = [("MHA", 16), ("GQA-2", 2), ("MQA", 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--md")
    ap.add_argument("--ours", default="attention_prefill.csv")
    ap.add_argument("--peers", default=os.path.join("peers", "sdpa_prefill.csv"))
    a = ap.parse_args()
    ours = {}
    for r in csv.DictReader(open(os.path.join(a.results, a.ours))):
        if r.get("measured_s"):
            key = (r["variant"], int(r["kv_heads_count"]), int(r["seq"]), r["causal"] == "true")
            ours[key] = r
    peers = {}
    for r in csv.DictReader(open(os.path.join(a.results, a.peers))):
        if r["status"] == "ok":
            peers[(r["backend"], int(r["kv_heads"]), int(r["seq"]), r["causal"] == "True")] = float(r["median_ms"]) * 1e-3
    lines = ["| kind | seq | causal | flash TFLOP/s | ÷ FA2 | ÷ cuDNN | naive TFLOP/s | naive ÷ MATH | flash model error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for kind, kv in KINDS:
        for causal in (False, True):
            for seq in sorted({k[2] for k in ours}):
                f, n = ours.get(("flash", kv, seq, causal)), ours.get(("naive", kv, seq, causal))
                if not f:
                    continue
                tf = float(f["measured_s"])
                fa2, cud = peers.get(("FLASH_ATTENTION", kv, seq, causal)), peers.get(("CUDNN_ATTENTION", kv, seq, causal))
                math = peers.get(("MATH", kv, seq, causal))
                cell = lambda p, t: f"{p / t:.2f}" if p else "—"
                naive_tf = f"{float(n['measured_flops_per_s']) / 1e12:.0f}" if n else "—"
                lines.append(f"| {kind} | {seq} | {'yes' if causal else 'no'} | {float(f['measured_flops_per_s']) / 1e12:.0f} | "
                             f"{cell(fa2, tf)} | {cell(cud, tf)} | {naive_tf} | {cell(math, float(n['measured_s'])) if n else '—'} | "
                             f"{float(f['model_error']) * 100:+.0f}% |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.md:
        with open(a.md, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
