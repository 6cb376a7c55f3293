#!/usr/bin/env python3
"""PyTorch's weight-compressed linear layers as peers for inferlab's compression experiment.

What it measures
  y = x W^T for the Llama-3-8B linear shapes of experiments/compression.yaml (W [n, k]: 4096x4096,
  14336x4096, 4096x14336, 1024x4096) at m = 1, 2, 4, 8, 16, 32, 64 tokens, bf16 activations:
    bf16      torch.nn.functional.linear (cuBLAS), the baseline every speedup is taken against;
    int4      torch._weight_int4pack_mm, group 128, bf16 scales and zero points (tinygemm);
    int8      torch._weight_int8pack_mm, one scale per output channel;
    sparse24  torch.sparse.to_sparse_semi_structured (2:4 pruned bf16) through F.linear; x is padded
              to a multiple of 16 rows where m is smaller (the kernel's minimum), the time is that call's;
    fp8       torch._scaled_mm, e4m3 x and W with per-tensor scales, bf16 out; x padded to 16 rows.
  A peer that refuses a shape is recorded as "unsupported" (with PyTorch's message); the sweep goes on.

How it times
  As attention_peers.py (its helpers imported): warm-up for 0.25 s, then 10-50 calls, each bracketed by
  CUDA events, L2 flushed before every call by reading a 256 MiB buffer outside the events; median,
  p10, p90 in microseconds.

Correctness (cheap): each peer's output is compared with float32 x times its own dequantized weight
(rel_err = ||y - y_ref|| / ||y_ref||): the peer computes what it was given.

Usage: python3 scripts/peers/compression_peers.py --out FILE.csv [--quick]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_peers import FLUSH_BYTES, flush_l2, percentile, provenance, short, time_call, write_csv  # noqa: E402

SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336), (1024, 4096)]  # (n, k)
TOKENS = [1, 2, 4, 8, 16, 32, 64]
FORMATS = ["bf16", "int4", "int8", "sparse24", "fp8"]
GROUP = 128
COLUMNS = ["n", "k", "m", "format", "peer", "status", "message", "median_us", "p10_us", "p90_us",
           "speedup_vs_bf16", "rel_err", "gpu_name", "driver", "torch_version", "cuda_version", "date_utc", "host"]
PEERS = {"bf16": "F.linear", "int4": "torch._weight_int4pack_mm", "int8": "torch._weight_int8pack_mm",
         "sparse24": "to_sparse_semi_structured + F.linear", "fp8": "torch._scaled_mm"}


def prepare(torch, fmt, w):
    """Returns (call(x) -> a thunk computing y (x prepared outside it), w_ref float32 [n, k]: the weight the
    peer multiplies by, rows_min: the fewest rows of x it takes)."""
    F = torch.nn.functional
    n, k = w.shape
    if fmt == "bf16":
        return (lambda x: lambda: F.linear(x, w)), w.float(), 1
    if fmt == "int4":  # asymmetric, group 128: q in 0..15, w ~ (q - 8) * s + z (tinygemm's zero point)
        wg = w.float().reshape(n, k // GROUP, GROUP)
        lo, hi = wg.amin(-1, keepdim=True), wg.amax(-1, keepdim=True)
        s = ((hi - lo) / 15).clamp(min=1e-8)
        q = ((wg - lo) / s).round().clamp(0, 15)
        z = lo + 8 * s
        w_ref = ((q - 8) * s + z).reshape(n, k)
        q = q.reshape(n, k).to(torch.int32)
        packed_u8 = ((q[:, ::2] << 4) | q[:, 1::2]).to(torch.uint8)
        packed = torch._convert_weight_to_int4pack(packed_u8, 8)
        sz = torch.stack([s.squeeze(-1), z.squeeze(-1)], dim=-1).transpose(0, 1).contiguous().to(torch.bfloat16)
        return (lambda x: lambda: torch._weight_int4pack_mm(x, packed, GROUP, sz)), w_ref, 1
    if fmt == "int8":
        s = (w.float().abs().amax(1) / 127).clamp(min=1e-8)
        q = (w.float() / s[:, None]).round().clamp(-127, 127).to(torch.int8)
        sb = s.to(torch.bfloat16)
        return (lambda x: lambda: torch._weight_int8pack_mm(x, q, sb)), q.float() * sb.float()[:, None], 1
    if fmt == "sparse24":  # keep the 2 largest |w| of every 4
        g = w.reshape(n, k // 4, 4)
        keep = g.abs().topk(2, dim=-1).indices
        mask = torch.zeros_like(g, dtype=torch.bool).scatter_(-1, keep, True)
        pruned = (g * mask).reshape(n, k)
        ws = torch.sparse.to_sparse_semi_structured(pruned)
        return (lambda x: lambda: F.linear(x, ws)), pruned.float(), 16
    if fmt == "fp8":  # x quantized outside the timed call (per-tensor scale), as the lab's cuBLASLt point
        e4m3 = torch.float8_e4m3fn
        sw = (w.float().abs().amax() / 448).clamp(min=1e-8)
        wq = (w.float() / sw).to(e4m3)

        def call(x):
            sx = (x.float().abs().amax() / 448).clamp(min=1e-8)
            xq = (x.float() / sx).to(e4m3)
            return lambda: torch._scaled_mm(xq, wq.t(), scale_a=sx.reshape(()), scale_b=sw.reshape(()),
                                            out_dtype=torch.bfloat16)
        return call, wq.float() * sw, 16
    raise ValueError(fmt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="CSV file to write (atomically)")
    ap.add_argument("--quick", action="store_true", help="smoke run: the first shape, m = 1 and 16, 5 repeats")
    args = ap.parse_args()

    import torch  # imported here so that --help works without torch

    if not torch.cuda.is_available():
        raise SystemExit("compression_peers: no CUDA device visible to torch")
    dev = torch.device("cuda")
    prov = provenance(torch)
    flush = torch.ones(FLUSH_BYTES // 4, dtype=torch.int32, device=dev)
    flush_l2(flush)
    shapes, tokens = (SHAPES[:1], [1, 16]) if args.quick else (SHAPES, TOKENS)

    rows = []
    for n, k in shapes:
        gen = torch.Generator(device=dev).manual_seed(1234)
        w = (torch.randn(n, k, device=dev, generator=gen) * 0.02).to(torch.bfloat16)
        x_all = torch.randn(max(tokens + [16]), k, device=dev, generator=gen).to(torch.bfloat16)
        bf16_us = {}
        for fmt in FORMATS:
            try:
                call, w_ref, rows_min = prepare(torch, fmt, w)
            except Exception as e:  # noqa: BLE001 - a peer's refusal is a result
                for m in tokens:
                    rows.append({"n": n, "k": k, "m": m, "format": fmt, "peer": PEERS[fmt], "status": "unsupported",
                                 "message": short(e), **prov})
                print(f"{fmt} {n}x{k}: unsupported ({short(e, 120)})", flush=True)
                continue
            for m in tokens:
                x = x_all[:max(m, rows_min)].contiguous()
                row = {"n": n, "k": k, "m": m, "format": fmt, "peer": PEERS[fmt], **prov}
                try:
                    run = call(x)
                    y = run()
                    ref = x.float() @ w_ref.t()
                    row["rel_err"] = f"{(float((y.float() - ref).norm() / ref.norm())):.3g}"
                    ts = time_call(torch, run, flush, args.quick)
                    med = statistics.median(ts) * 1e3
                    row.update(status="ok", median_us=f"{med:.2f}", p10_us=f"{percentile(ts, 10) * 1e3:.2f}",
                               p90_us=f"{percentile(ts, 90) * 1e3:.2f}",
                               message="" if m >= rows_min else f"x padded to {rows_min} rows")
                    if fmt == "bf16":
                        bf16_us[m] = med
                    if m in bf16_us:
                        row["speedup_vs_bf16"] = f"{bf16_us[m] / med:.3f}"
                except Exception as e:  # noqa: BLE001
                    row.update(status="unsupported", message=short(e))
                rows.append(row)
                print(f"{fmt:9} {n:>5}x{k:<5} m={m:<3} {row['status']:11} {row.get('median_us', ''):>9} us "
                      f"speedup {row.get('speedup_vs_bf16', '')} rel_err {row.get('rel_err', '')}", flush=True)
            del call, w_ref
            torch.cuda.empty_cache()
    write_csv(args.out, rows, COLUMNS)
    print(f"compression_peers: {len(rows)} rows -> {args.out}")


if __name__ == "__main__":
    main()
