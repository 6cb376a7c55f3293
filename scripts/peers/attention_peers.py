#!/usr/bin/env python3
"""PyTorch scaled_dot_product_attention (SDPA) as a peer for inferlab's attention kernels.

What it measures
  Forward-only SDPA, torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=...,
  enable_gqa=...), with one backend pinned at a time through
  torch.nn.attention.sdpa_kernel(SDPBackend.X) for X in FLASH_ATTENTION, CUDNN_ATTENTION, MATH.
  Layout is PyTorch's: q [b, h, s, d], k/v [b, kv_heads, s, d]; inputs are torch.randn.
  A backend that refuses a shape is recorded as "unsupported" (with the reason PyTorch warns or
  raises), an out-of-memory as "oom"; the sweep goes on.

  prefill (default): d=128, 16 query heads, batch*seq = 16384 tokens, seq 512..16384,
    causal and non-causal, MHA (16 KV heads), GQA-2 (2 KV heads), MQA (1 KV head).
    tflops = flops / median, flops = 4*b*h*s^2*d, halved when causal ("4bhs2d_half_if_causal").
    MATH is skipped when its score matrix b*h*s*s*2 bytes would exceed --math-max-gib (16);
    note MATH upcasts bf16/fp16 to fp32 internally, so its real peak is several times that.
  decode: one query token (is_causal=False: PyTorch's causal mask is top-left aligned, so with
    q_len=1 it would keep only key 0), GQA 32 query / 8 KV heads, d=128, batch x kv_len in
    1x32768, 8x8192, 32x4096, 64x4096. gbps = K+V bytes (2*b*kv_heads*kv_len*d*elem) / median.

How it times
  Warm-up calls for at least 0.25 s (an idle GPU runs its first ~0.1 s at lower clocks; the last
  one, timed, sizes the run), then N timed calls, N = 0.3 s / estimate clamped to [10, 50] (5 with
  --quick). Before every timed call L2 is flushed outside the events by READING a 256 MiB buffer
  (a max-reduction): a flush by writing (zero_) leaves dirty lines whose write-back lands in the
  timed call, as inferlab's own timing (roofline/timing.h) learned. Each call is bracketed by CUDA
  events on the current stream; one synchronize at the end; median, p10, p90 are reported in ms.

Correctness (cheap): for the first shape of every (kind, causal) each backend's output on batch 0
and the first KV-head group(s) is compared with the MATH backend run in float32 on that slice;
max |err| (at most 4 query heads) goes in max_abs_err_vs_math (empty elsewhere).

Usage: python3 scripts/peers/attention_peers.py --out FILE.csv [--mode prefill|decode]
                                                [--quick] [--seqs 512,1024] [--dtype bf16|fp16]
"""
import argparse
import csv
import datetime
import os
import socket
import statistics
import subprocess
import tempfile
import time
import warnings

TOKENS = 16384
PREFILL_SEQS = [512, 1024, 2048, 4096, 8192, 16384]
PREFILL_KINDS = [("MHA", 16), ("GQA-2", 2), ("MQA", 1)]  # (name, kv_heads) for 16 query heads; GQA-G: G KV heads
DECODE_SHAPES = [(1, 32768), (8, 8192), (32, 4096), (64, 4096)]  # (batch, kv_len)
BACKENDS = ["FLASH_ATTENTION", "CUDNN_ATTENTION", "MATH"]
FLUSH_BYTES = 256 << 20
COLUMNS = ["mode", "backend", "kind", "seq", "batch", "heads", "kv_heads", "head_dim", "dtype",
           "causal", "status", "message", "median_ms", "p10_ms", "p90_ms", "tflops", "gbps",
           "flops_convention", "max_abs_err_vs_math", "gpu_name", "driver", "torch_version",
           "cuda_version", "cudnn_version", "date_utc", "host"]


def percentile(sorted_xs, p):
    """Linear-interpolated percentile of an already sorted list, p in [0, 100]."""
    k = (len(sorted_xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (k - lo)


def flush_l2(flush):
    """Evicts L2 by reading the buffer (a reduction writes one element, not a dirty L2's worth)."""
    flush.amax()


def time_call(torch, fn, flush, quick):
    """Returns sorted per-call times in ms (CUDA events, L2 flushed before each call)."""
    start_s = time.monotonic()
    while True:
        flush_l2(flush)
        fn()
        fn()
        torch.cuda.synchronize()
        if quick or time.monotonic() - start_s >= 0.25:
            break
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flush_l2(flush)
    e0.record()
    fn()
    e1.record()
    torch.cuda.synchronize()
    est_s = max(e0.elapsed_time(e1) / 1e3, 1e-6)
    n = 5 if quick else max(10, min(50, int(0.3 / est_s)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(n)]
    for start, end in events:
        flush_l2(flush)  # outside the timed region: same stream, ordered before start
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return sorted(s.elapsed_time(e) for s, e in events)


def provenance(torch):
    driver = ""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode == 0 and r.stdout.strip():
            driver = r.stdout.strip().splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"gpu_name": torch.cuda.get_device_name(), "driver": driver,
            "torch_version": torch.__version__, "cuda_version": torch.version.cuda or "",
            "cudnn_version": "" if cudnn is None else str(cudnn),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname()}


def write_csv(path, rows, columns=COLUMNS):
    """Atomic: temp file in the destination folder, then os.replace."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".peers.", suffix=".csv.tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def short(msg, limit=300):
    return " ".join(str(msg).split())[:limit]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="CSV file to write (atomically)")
    ap.add_argument("--mode", choices=["prefill", "decode"], default="prefill")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: seq 1024 only (prefill) or the first decode shape, 5 repeats")
    ap.add_argument("--seqs", help="comma-separated prefill seq lengths (default 512..16384)")
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--head-dim", type=int, default=128, help="head dim of every shape (64, 128, ...)")
    ap.add_argument("--math-max-gib", type=float, default=16.0,
                    help="skip MATH when b*h*s*s*2 bytes exceed this many GiB (default 16)")
    args = ap.parse_args()

    import torch  # imported here so that --help works without torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not torch.cuda.is_available():
        raise SystemExit("attention_peers: no CUDA device visible to torch")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    dev = torch.device("cuda")
    prov = provenance(torch)
    flush = torch.ones(FLUSH_BYTES // 4, dtype=torch.int32, device=dev)
    flush_l2(flush)  # the fill's dirty lines leave L2 before anything is timed
    d = args.head_dim

    # shapes: (kind, batch, heads, kv_heads, q_len, kv_len, causal_list)
    shapes = []
    if args.mode == "prefill":
        seqs = [int(x) for x in args.seqs.split(",")] if args.seqs else PREFILL_SEQS
        if args.quick:
            seqs = [1024]
        for s in seqs:
            for kind, hk in PREFILL_KINDS:
                shapes.append((kind, max(1, TOKENS // s), 16, hk, s, s, [False, True]))
    else:
        for b, kv in DECODE_SHAPES[:1] if args.quick else DECODE_SHAPES:
            shapes.append(("GQA-8", b, 32, 8, 1, kv, [False]))

    rows, checked = [], set()
    for kind, b, h, hk, sq, skv, causals in shapes:
        torch.cuda.empty_cache()
        gen = torch.Generator(device=dev).manual_seed(1234)
        q = torch.randn(b, h, sq, d, dtype=dtype, device=dev, generator=gen)
        k = torch.randn(b, hk, skv, d, dtype=dtype, device=dev, generator=gen)
        v = torch.randn(b, hk, skv, d, dtype=dtype, device=dev, generator=gen)
        gqa = hk < h
        for causal in causals:
            ref, check = None, (kind, causal) not in checked
            if check:  # fp32 MATH reference on batch 0, <= 4 query heads of the first KV head(s)
                checked.add((kind, causal))
                g = h // hk
                nkv = min(hk, max(1, 4 // g))
                nq = min(h, nkv * g, 4)  # query head i reads KV head i // g
                sl = (slice(0, 1), slice(0, nq))
                try:
                    with sdpa_kernel(SDPBackend.MATH):
                        ref = F.scaled_dot_product_attention(
                            q[sl].float(), k[0:1, :nkv].float(), v[0:1, :nkv].float(),
                            is_causal=causal, enable_gqa=nq != nkv)
                except RuntimeError as e:  # OOM included: leave the column empty
                    print(f"# reference for {kind} causal={causal} failed: {short(e, 120)}")
                    torch.cuda.empty_cache()
            for backend in BACKENDS:
                row = dict(prov, mode=args.mode, backend=backend, kind=kind, seq=skv, batch=b,
                           heads=h, kv_heads=hk, head_dim=d, dtype=args.dtype, causal=causal,
                           status="ok", message="", median_ms="", p10_ms="", p90_ms="",
                           tflops="", gbps="", max_abs_err_vs_math="",
                           flops_convention="4bhs2d_half_if_causal" if args.mode == "prefill" else "")
                scores_gib = b * h * sq * skv * 2 / 2**30
                if backend == "MATH" and scores_gib > args.math_max_gib:
                    row["status"] = f"skipped: scores would need {scores_gib:.1f} GiB"
                    rows.append(row)
                    continue

                def fn(causal=causal):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                          enable_gqa=gqa)
                # backend pinned around the whole timing loop: no context-manager cost per call
                with sdpa_kernel(getattr(SDPBackend, backend)), \
                        warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    try:
                        times = time_call(torch, fn, flush, args.quick)
                        if ref is not None:
                            out = fn()[sl].float()
                            row["max_abs_err_vs_math"] = f"{(out - ref).abs().max().item():.3e}"
                            del out
                    except torch.cuda.OutOfMemoryError as e:
                        row.update(status="oom", message=short(e))
                    except RuntimeError as e:
                        why = " | ".join(short(w.message, 200) for w in caught[:3])
                        row.update(status="unsupported", message=short(f"{e} {why}".strip()))
                if row["status"] != "ok":
                    torch.cuda.synchronize()
                    torch.cuda.empty_cache()
                    rows.append(row)
                    write_csv(args.out, rows)
                    continue
                med = statistics.median(times)
                row.update(median_ms=f"{med:.4f}", p10_ms=f"{percentile(times, 10):.4f}",
                           p90_ms=f"{percentile(times, 90):.4f}")
                if args.mode == "prefill":
                    flops = 4 * b * h * sq * skv * d / (2 if causal else 1)
                    row["tflops"] = f"{flops / (med * 1e-3) / 1e12:.2f}"
                else:
                    kv_bytes = 2 * b * hk * skv * d * q.element_size()
                    row["gbps"] = f"{kv_bytes / (med * 1e-3) / 1e9:.1f}"
                rows.append(row)
                write_csv(args.out, rows)
            del ref
        del q, k, v

    write_csv(args.out, rows)
    print(f"# {prov['gpu_name']} driver {prov['driver']} torch {prov['torch_version']} "
          f"cuda {prov['cuda_version']} cudnn {prov['cudnn_version']} -> {args.out}")
    print(f"{'backend':<16}{'kind':<7}{'seq':>6}{'b':>4}{'h/kv':>7}{'causal':>7}"
          f"{'med_ms':>10}{'p10':>9}{'p90':>9}{'TFLOP/s':>9}{'GB/s':>8}{'err':>10}  status")
    for r in rows:
        print(f"{r['backend']:<16}{r['kind']:<7}{r['seq']:>6}{r['batch']:>4}"
              f"{str(r['heads']) + '/' + str(r['kv_heads']):>7}{str(r['causal'])[0]:>7}"
              f"{r['median_ms']:>10}{r['p10_ms']:>9}{r['p90_ms']:>9}{r['tflops']:>9}"
              f"{r['gbps']:>8}{r['max_abs_err_vs_math']:>10}  {r['status']} {r['message'][:60]}")


if __name__ == "__main__":
    main()
