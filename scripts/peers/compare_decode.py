#!/usr/bin/env python3
"""Ratio table of inferlab's decode attention to PyTorch SDPA decode peers measured in the same session.

    compare_decode.py RESULTS_DIR [--md OUT.md] [--copy-gbs GB/s] [--ours NAME.csv]

RESULTS_DIR holds decode_attention.csv (inferlab run experiments/decode_attention.yaml; --ours names another there,
decode_attention_h200.csv on the H200) and peers/sdpa_decode.csv (scripts/peers/attention_peers.py --mode decode). Shapes: GQA-8 (32 query / 8 KV heads), d=128,
bf16. GB/s = K+V bytes / median time on both sides; ratio = our GB/s / the peer's."""
import argparse
import csv
import os

SHAPES = [(1, 32768), (8, 8192), (32, 4096), (64, 4096)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--md")
    ap.add_argument("--copy-gbs", type=float, default=0, help="measured copy bandwidth for the 0.9x check")
    ap.add_argument("--ours", default="decode_attention.csv")
    a = ap.parse_args()
    ours = {}
    for r in csv.DictReader(open(os.path.join(a.results, a.ours))):
        if int(r["kv_heads_count"]) == 8 and r.get("measured_kv_bytes_per_s"):  # GQA-8: 32 query / 8 KV heads
            ours[(r["variant"], r["layout"], int(r["batch"]), int(r["context"]))] = r
    peers = {}
    for r in csv.DictReader(open(os.path.join(a.results, "peers", "sdpa_decode.csv"))):
        if r["status"] == "ok":
            peers[(r["backend"], int(r["batch"]), int(r["seq"]))] = float(r["gbps"])
    head = "| batch x context | split paged GB/s | ÷ copy | paged ÷ contiguous | plain → split speedup | ÷ FA2 | ÷ cuDNN | split model error |"
    lines = [head, "|" + "---|" * 8]
    for b, c in SHAPES:
        sp, sc = ours.get(("split", "paged", b, c)), ours.get(("split", "contiguous", b, c))
        pp = ours.get(("plain", "paged", b, c))
        if not sp:
            continue
        g = float(sp["measured_kv_bytes_per_s"]) / 1e9
        cell = lambda x: f"{x:.2f}" if x else "—"
        fa2, cud = peers.get(("FLASH_ATTENTION", b, c)), peers.get(("CUDNN_ATTENTION", b, c))
        lines.append(
            f"| {b} x {c} | {g:.0f} (splits {sp['splits']}) | {cell(g / a.copy_gbs if a.copy_gbs else 0)} | "
            f"{cell(float(sp['measured_s']) and float(sc['measured_s']) / float(sp['measured_s']) if sc else 0)} | "
            f"{cell(float(pp['measured_s']) / float(sp['measured_s']) if pp else 0)} | {cell(g / fa2 if fa2 else 0)} | "
            f"{cell(g / cud if cud else 0)} | {float(sp['model_error']) * 100:+.0f}% |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.md:
        open(a.md, "w").write(text)


if __name__ == "__main__":
    main()
