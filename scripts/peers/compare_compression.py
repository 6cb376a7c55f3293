#!/usr/bin/env python3
"""Ratio table of inferlab's compressed linear layers to PyTorch's, measured in the same session.

    compare_compression.py RESULTS_DIR [--spec compression_h200] [--md OUT.md]

RESULTS_DIR holds SPEC.csv (inferlab run experiments/SPEC.yaml) and peers/compression.csv
(scripts/peers/compression_peers.py). Each format's speedup is over its own side's cuBLAS bf16 (ours: the bf16 point
of the same run; the peer's: F.linear in the peer's run); "ours ÷ peer" is the peer's time over ours."""
import argparse
import csv
import os

SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336), (1024, 4096)]
FORMATS = ["int4", "int8", "sparse24", "fp8"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--spec", default="compression_h200")
    ap.add_argument("--md")
    a = ap.parse_args()
    ours = {}
    for r in csv.DictReader(open(os.path.join(a.results, a.spec + ".csv"))):
        if r.get("measured_s") and r["m"] != "8192":
            ours[(int(r["n"]), int(r["k"]), int(r["m"]), r["format"])] = (float(r["measured_s"]) * 1e6,
                                                                           float(r["measured_speedup"]))
    peers = {}
    for r in csv.DictReader(open(os.path.join(a.results, "peers", "compression.csv"))):
        if r["status"] == "ok":
            peers[(int(r["n"]), int(r["k"]), int(r["m"]), r["format"])] = (float(r["median_us"]),
                                                                           float(r["speedup_vs_bf16"]))
    lines = ["| W [n x k] | m | format | ours µs | ours ÷ bf16 | peer µs | peer ÷ its bf16 | ours ÷ peer |",
             "|" + "---|" * 8]
    ms = sorted({m for (_, _, m, _) in ours})
    for n, k in SHAPES:
        for m in ms:
            for f in FORMATS:
                o, p = ours.get((n, k, m, f)), peers.get((n, k, m, f))
                if not o or not p:
                    continue
                lines.append(f"| {n} x {k} | {m} | {f} | {o[0]:.2f} | {o[1]:.2f}x | {p[0]:.2f} | {p[1]:.2f}x | "
                             f"**{p[0] / o[0]:.2f}x** |")
    text = "\n".join(lines) + "\n"
    if a.md:
        with open(a.md, "w") as out:
            out.write(f"Ours: {a.spec}.csv; peers: peers/compression.csv (PyTorch: int4 torch._weight_int4pack_mm, int8 "
                      "torch._weight_int8pack_mm, 2:4 to_sparse_semi_structured, fp8 torch._scaled_mm; bf16 F.linear).\n\n")
            out.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
