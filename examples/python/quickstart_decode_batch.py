# %% [markdown]
# # Decode batching on the roofline, from Python
#
# The quickstart figure `quickstart_decode_batch-time_ai_throughput` (experiments/quickstart_decode_batch.yaml),
# rebuilt cell by cell with the `inferlab` module: Llama-2-7B decoding with a 1024-token context on the A100
# and the H100, batch 1 to 512. The weight GEMMs' arithmetic intensity grows with the batch and crosses the
# ridge; decode attention stays near 1 FLOP/byte, since each sequence reads its own KV cache.
#
# Run it as a script (`python3 examples/python/quickstart_decode_batch.py [OUT_DIR]`) or cell by cell in
# Jupyter or VS Code (the `# %%` markers). The module comes from the build tree
# (`PYTHONPATH=build/python`) or an installed package (scripts/install-python.sh).

# %%
import os
import sys

try:
    import inferlab
except ImportError:  # run from a checkout without PYTHONPATH: the default build folder
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "python"))
    import inferlab

out_dir = sys.argv[1] if len(sys.argv) > 1 else "out/python"
gpus = ["a100-sxm-80gb", "h100-sxm-80gb"]
batches = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
ops_shown = ["total", "gate_up_proj", "attention"]

# %% [markdown]
# One call per point: `inferlab.ops` gives a row per operator of the step and a `total` row, in microseconds
# of Python rather than a process start each.

# %%
rows = inferlab.Rows()
for gpu in gpus:
    for batch in batches:
        for r in inferlab.ops("llama-2-7b", gpu, phase="decode", batch=batch, context=1024, dtype="fp16",
                              ceilings="datasheet"):
            rows.append(dict(r, hardware=gpu, batch=batch))
print(f"{len(rows)} rows; columns: {', '.join(list(rows[0])[:12])}, ...")

# %% [markdown]
# The same rows as the spec gives them (`inferlab run` would write them to a CSV): the numbers agree.

# %%
spec = inferlab.spec_rows("quickstart_decode_batch")
by_point = {(r["hardware"], r["batch"], r["op"]): r for r in spec["rows"]}
for r in rows:
    assert r["predicted_s"] == by_point[(r["hardware"], r["batch"], r["op"])]["predicted_s"]
print(f"{spec['name']}: {spec['points']} points, {len(spec['rows'])} rows, the same predictions")

# %% [markdown]
# With pandas, a DataFrame: the step's time, arithmetic intensity and throughput by batch.

# %%
try:
    table = rows.where(op="total").frame()
    print(table.pivot(index="batch", columns="hardware", values="tokens_per_s").round(0))
except ImportError as e:
    print(e)

# %% [markdown]
# The figure: step time, arithmetic intensity (with each GPU's ridge) and throughput against the batch.

# %%
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

panels = [("predicted_s", 1e3, "step time (ms)"), ("ai", 1.0, "arithmetic intensity (FLOP/byte)"),
          ("tokens_per_s", 1.0, "throughput (tokens/s)")]
fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
styles = {"a100-sxm-80gb": "--", "h100-sxm-80gb": "-"}
colours = {"total": "#4C72B0", "gate_up_proj": "#DD8452", "attention": "#55A868"}
for ax, (col, scale, label) in zip(axes, panels):
    for gpu in gpus:
        for op in ops_shown:
            sel = [r for r in rows if r["hardware"] == gpu and r["op"] == op and r[col] is not None]
            if not sel:  # throughput is the whole step's only
                continue
            ax.plot([r["batch"] for r in sel], [r[col] * scale for r in sel], styles[gpu], marker="o", ms=3,
                    color=colours[op], label=f"{gpu}, {op}")
        if col == "ai":
            ax.axhline(rows.where(hardware=gpu, op="total")[0]["ridge"], ls=styles[gpu], color="gray", lw=0.8)
    ax.set(xscale="log", yscale="log", xlabel="batch (sequences)", ylabel=label)
    ax.grid(True, which="both", alpha=0.25)
axes[0].legend(fontsize=7)
fig.suptitle("Llama-2-7B decode (1024 context): step time, arithmetic intensity and throughput vs batch "
             "(grey: the tensor-core ridge)")
fig.tight_layout()
os.makedirs(out_dir, exist_ok=True)
for ext in ("png", "svg"):
    fig.savefig(os.path.join(out_dir, f"quickstart_decode_batch.{ext}"), dpi=120)
print("figure", os.path.join(out_dir, "quickstart_decode_batch.png"))
