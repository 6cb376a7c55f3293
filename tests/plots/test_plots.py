#!/usr/bin/env python3
"""Draws every plot kind of plots/plot.py from a small generated CSV and checks the files.
Exit 77 (skipped) when matplotlib is missing; 1 on any failure."""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("matplotlib not installed: skipped")
    sys.exit(77)

ap = argparse.ArgumentParser()
ap.add_argument("--plot-script", required=True)
script = ap.parse_args().plot_script
failures = []

with tempfile.TemporaryDirectory() as d:
    model_csv = os.path.join(d, "model.csv")
    with open(model_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["hardware", "phase", "batch", "op", "ai", "flops", "predicted_s", "measured_s", "peak_flops",
                    "bandwidth", "compute_dtype", "ridge", "ceilings"])
        for hw, peak, bw in (("a100", 312e12, 2.039e12), ("h100", 989e12, 3.35e12)):
            for phase, ai in (("decode", 1.0), ("prefill", 900.0)):
                for b in (1, 8, 64):
                    for op, k in (("qkv_proj", 1.0), ("attention", 0.5), ("total", 0.8)):
                        flops = 1e12 * k
                        t = max(flops / peak, flops / (ai * k * b) / bw)
                        w.writerow([hw, phase, b, op, ai * k * b, flops, t, t * 1.2 if op != "total" else "", peak, bw,
                                    "fp16", peak / bw, "datasheet"])
                w.writerow([hw, phase, 1, "rope", 0.6, 1e9, 1e-5, "", 19.5e12, bw, "fp32-vector", 19.5e12 / bw,
                            "datasheet"])
    mem_csv = os.path.join(d, "mem.csv")
    with open(mem_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "hardware", "batch", "weights_bytes", "kv_cache_bytes", "activation_bytes",
                    "capacity_bytes", "capacity_label"])
        for hw, cap in (("a100-40gb", 42.9e9), ("a100-80gb", 85.9e9)):
            for b in (1, 2, 4, 8):
                w.writerow(["m", hw, b, 13.5e9, 2.1e9 * b, 0.3e9, cap, hw])

    serve_csv = os.path.join(d, "serve.csv")
    with open(serve_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scheduler", "kv", "rate", "row", "requests_per_s", "latency_p99_s", "time_s", "kv_reserved_bytes"])
        for sch, cap in (("static", 5.0), ("continuous", 14.0)):
            for kv in ("contiguous", "paged"):
                for rate in (1, 4, 8, 16, 32):
                    tput = min(rate, cap * (1.5 if kv == "paged" else 1.0))
                    w.writerow([sch, kv, rate, "summary", tput, 10 + 100 * rate / cap, "", ""])
                for t in range(50):
                    w.writerow([sch, kv, 8, "timeline", "", "", t * 0.5, 1e9 * (t % 7)])
    par_csv = os.path.join(d, "par.csv")
    with open(par_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["layout", "batch", "weights_bytes", "kv_cache_bytes", "capacity_bytes", "capacity_label", "fits",
                    "step_ops_s", "step_tp_comm_s", "comm_share"])
        for b in (1, 32):
            for tp, pp in ((1, 1), (2, 1), (4, 1), (1, 2), (2, 2)):
                w.writerow([f"TP{tp} x PP{pp}", b, 138e9 / (tp * pp), 1e9 * b / (tp * pp), 85.5e9, "h100 (80 GB)",
                            "false" if tp * pp == 1 else "true", 0.05 / tp, 0.002 * (tp - 1), 0.04 * (tp - 1)])
    spec_csv = os.path.join(d, "spec.csv")
    with open(spec_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["drafter", "alpha", "gamma", "speedup", "optimal_gamma"])
        for drafter, c in (("model", 0.3), ("ngram", 0.0)):
            for a in (0.3, 0.5, 0.7, 0.9):
                best = max(range(0, 9), key=lambda g: (1 - a ** (g + 1)) / (1 - a) / (g * c + 1))
                for g in range(1, 9):
                    w.writerow([drafter, a, g, (1 - a ** (g + 1)) / (1 - a) / (g * c + 1), best])
    # Linear-layer rows as the compression spec writes them: measured columns filled for some
    # shapes and empty (predict-only) for others.
    lin_csv = os.path.join(d, "linear.csv")
    with open(lin_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["shape", "format", "m", "predicted_speedup", "measured_speedup", "rel_error"])
        for shape, measured in (("4096x4096", True), ("14336x4096", True), ("1024x4096", False)):
            for fmt, ideal, err in (("bf16", 1.0, 0.0), ("int8", 2.0, 2e-3), ("int4", 3.8, 3e-2)):
                for m in (1, 2, 4, 8, 16, 32, 64):
                    pred = 1 + (ideal - 1) / (1 + m / 64)
                    w.writerow([shape, fmt, m, pred, pred * 0.9 if measured else "",
                                err * (1 + m / 100) if measured else ""])

    cases = [
        (model_csv, {"name": "r", "kind": "roofline", "facet": ["hardware"], "where": {"batch": [1, 8.0]}}),
        (model_csv, {"name": "l", "kind": "line", "x": "batch", "y": ["predicted_s", "ai"],
                     "series": ["hardware", "op"], "hlines": {"ai": "ridge"}, "logx": True, "logy": True,
                     "exclude": {"op": "rope"}}),
        (mem_csv, {"name": "m", "kind": "memory", "x": "batch", "facet": "model"}),
        (serve_csv, {"name": "curve", "kind": "line", "x": "requests_per_s", "y": "latency_p99_s",
                     "series": ["scheduler", "kv"], "sort_by": "rate", "where": {"row": "summary"}, "logy": True}),
        (serve_csv, {"name": "timeline", "kind": "line", "x": "time_s", "y": "kv_reserved_bytes",
                     "series": ["scheduler", "kv"], "where": {"row": "timeline"}, "markers": False}),
        (par_csv, {"name": "bars", "kind": "stacked_bars", "x": "layout", "stack": ["weights_bytes", "kv_cache_bytes"],
                   "labels": ["weights", "KV"], "hline": "capacity_bytes", "facet": ["batch"]}),
        (par_csv, {"name": "split", "kind": "stacked_bars", "x": "layout", "stack": ["step_ops_s", "step_tp_comm_s"],
                   "annotate": "comm_share", "ylabel": "step (ms)"}),
        (spec_csv, {"name": "heat", "kind": "heatmap", "x": "gamma", "y": "alpha", "z": "speedup",
                    "overlay": "optimal_gamma", "center": 1, "facet": ["drafter"]}),
        (lin_csv, {"name": "lf", "kind": "line", "x": "m", "y": ["measured_speedup"], "series": ["format"],
                   "compare": {"measured_speedup": "predicted_speedup"}, "facet": ["shape"], "wrap": 2,
                   "logx": True}),
        (lin_csv, {"name": "lp", "kind": "line", "x": "m", "y": ["measured_speedup"], "series": ["format"],
                   "compare": {"measured_speedup": "predicted_speedup"}, "where": {"shape": "1024x4096"}}),
        (lin_csv, {"name": "b", "kind": "grouped_bars", "x": "format", "y": "rel_error", "series": ["shape"], "logy": True}),
        (model_csv, {"name": "bp", "kind": "grouped_bars", "x": "hardware", "y": ["predicted_s", "ai", "flops"],
                     "series": ["phase"], "wrap": 2}),
        (lin_csv, {"name": "be", "kind": "grouped_bars", "x": "format", "y": "rel_error", "facet": "shape",
                   "where": {"shape": "1024x4096"}}),
    ]
    for csv_path, plot in cases:
        spec = os.path.join(d, plot["name"] + ".json")
        with open(spec, "w") as f:
            json.dump(plot, f)
        out = os.path.join(d, "fig-" + plot["name"])
        r = subprocess.run([sys.executable, script, "--csv", csv_path, "--plot", spec, "--out", out],
                           capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"{plot['kind']}: exit {r.returncode}: {r.stderr}")
            continue
        for ext in ("png", "svg"):
            p = f"{out}.{ext}"
            if not os.path.exists(p) or os.path.getsize(p) < 5000:
                failures.append(f"{plot['kind']}: {p} missing or too small")
        with open(f"{out}.png", "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                failures.append(f"{plot['kind']}: not a PNG")
        with open(f"{out}.svg") as f:
            svg = f.read()
        # What each figure must show: predict-only rows still draw the dashed model curve, a panel
        # without values says so, a wrapped facet gives one titled panel per shape, bars are drawn.
        # Figures over rows with a ceilings column name them.
        expect = {"r": ["ceilings: datasheet"], "l": ["ceilings: datasheet"],
                  "lf": ["shape=4096x4096", "shape=1024x4096", "dashed: predicted speedup"],
                  "lp": ["dashed: predicted speedup"], "b": ["14336x4096"], "be": ["no values of rel_error"]}
        for needle in expect.get(plot["name"], []):
            if needle not in svg:
                failures.append(f"{plot['name']}: '{needle}' not in the figure")
        if plot["name"] == "lp" and svg.count("stroke-dasharray") < 3:
            failures.append("lp: the predicted curves of predict-only rows are not drawn (dashed)")
        if plot["name"] in ("lp", "b") and "no values of" in svg:
            failures.append(f"{plot['name']}: claims to have no values")

    # Bad input: an unknown kind and a missing column fail with a message and a non-zero exit.
    for plot, needle in (({"kind": "pie"}, "unknown plot kind"),
                         ({"kind": "line", "x": "batch", "y": "nope"}, "column 'nope'"),
                         ({"kind": "line", "x": "batch", "y": "ai", "where": {"op": "none"}}, "no rows left"),
                         ({"kind": "stacked_bars", "x": "batch"}, "needs 'stack'"),
                         ({"kind": "heatmap", "x": "batch", "y": "ai"}, "needs 'z'"),
                         ({"kind": "line", "x": "batch", "y": "ai", "serie": "op"}, "unknown field 'serie'"),
                         ({"kind": "heatmap", "x": "batch", "y": "ai", "z": "nope"}, "column 'nope'"),
                         ({"kind": "grouped_bars", "x": "batch", "y": ["ai", "flops"], "facet": "phase"},
                          "takes no facet")):
        spec = os.path.join(d, "bad.json")
        with open(spec, "w") as f:
            json.dump(plot, f)
        r = subprocess.run([sys.executable, script, "--csv", model_csv, "--plot", spec, "--out",
                            os.path.join(d, "bad")], capture_output=True, text=True)
        if r.returncode == 0 or needle not in r.stderr:
            failures.append(f"bad input {plot} accepted or unclear: {r.returncode} {r.stderr}")

    # --check: every problem of a list of entries at once, without matplotlib; nothing drawn.
    entries = [{"name": "ok", "kind": "line", "x": "batch", "y": "ai", "_where": "s.yaml:3"},
               {"name": "bad", "kind": "line", "x": "batch", "y": "nope", "_where": "s.yaml:4"},
               {"name": "pie", "kind": "pie", "_where": "s.yaml:5"}]
    spec = os.path.join(d, "entries.json")
    with open(spec, "w") as f:
        json.dump(entries, f)
    r = subprocess.run([sys.executable, "-c", "import runpy, sys; sys.modules['matplotlib'] = None; "
                        "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')",
                        script, "--check", "--csv", model_csv, "--plot", spec],
                       capture_output=True, text=True)
    if r.returncode != 2 or "s.yaml:4: plot 'bad': column 'nope'" not in r.stderr or "s.yaml:5" not in r.stderr \
            or "s.yaml:3" in r.stderr:
        failures.append(f"--check: {r.returncode} {r.stderr}")
    json.dump(entries[:1], open(spec, "w"))
    r = subprocess.run([sys.executable, script, "--check", "--csv", model_csv, "--plot", spec], capture_output=True,
                       text=True)
    if r.returncode != 0:
        failures.append(f"--check of a good entry: {r.returncode} {r.stderr}")

    import importlib.util
    spec_ = importlib.util.spec_from_file_location("plot_under_test", script)
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    mod.load_matplotlib()
    with open(model_csv, newline="") as f:
        model_rows = list(csv.DictReader(f))
    with open(mem_csv, newline="") as f:
        mem_rows = list(csv.DictReader(f))

    # What a student reads: axis labels name the quantity and unit, legends the variable of a bare
    # value; 16 series stay apart (colour x marker, no pale shade); facets of a memory plot share one
    # scale; roofline labels do not overlap.
    fig = mod.render(model_rows, {"kind": "line", "x": "batch", "y": "predicted_s", "series": ["hardware", "batch"]})
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    if "a100, batch=1" not in texts or fig.axes[0].get_ylabel() != "predicted time (ms)":
        failures.append(f"labels: {texts} / {fig.axes[0].get_ylabel()}")
    rows16 = [{"v": v, "l": l, "b": str(b), "x": str(x), "y": str(x * b)} for v in ("plain", "split")
              for l in ("contiguous", "paged") for b in (1, 8, 32, 64) for x in (1, 2)]
    styles = mod.SeriesStyles(rows16, ["v", "l", "b"])
    picked = {(styles.style(k)["color"], styles.style(k)["marker"]) for k in styles.keys}
    if len(picked) != 16 or len({c for c, _ in picked}) != 4:
        failures.append(f"16 series: {len(picked)} styles, {len({c for c, _ in picked})} colours")
    for c in mod.COLORS:
        r, g, b = (int(c[i:i + 2], 16) / 255 for i in (1, 3, 5))
        if 0.299 * r + 0.587 * g + 0.114 * b > 0.75:
            failures.append(f"colour {c} is too pale to see on white")
    fig = mod.render(mem_rows, {"kind": "memory", "x": "batch", "facet": "hardware"})
    if len({ax.get_ylim() for ax in fig.axes if ax.get_visible()}) != 1:
        failures.append("memory panels on different scales")
    fig = mod.render(model_rows, {"kind": "roofline", "facet": ["hardware"], "annotate": "op"})
    fig.canvas.draw()
    r_ = fig.canvas.get_renderer()
    for ax in fig.axes:
        boxes = [mod.text_box(t, r_) for t in ax.texts if t.get_text() and t.get_visible()]
        if any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:]):
            failures.append("roofline labels overlap")
            break

    # Ctrl-C while drawing: exit 130, no traceback.

    def interrupted(rows, plot):
        raise KeyboardInterrupt
    mod.KINDS["line"] = interrupted
    json.dump({"kind": "line", "x": "batch", "y": "ai"}, open(spec, "w"))
    if mod.main(["--csv", model_csv, "--plot", spec, "--out", os.path.join(d, "int")]) != 130:
        failures.append("an interrupted drawing does not exit 130")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("all plot kinds drawn")
