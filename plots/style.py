"""Labels, legends, series styles and label placement shared by the figures of plots/plot.py.

Axis labels name the quantity and its unit ("p99 latency (s)", not "latency_p99_s"); legend entries
name the variable of a value that does not say what it is ("causal=false", "batch=8", but "flash");
many series are told apart by colour and marker, never by pale shades; text labels do not overlap.
"""
import math

# Column -> (scale, label) for the quantities the specs plot; other columns get a generic label.
LABELS = {
    "ai": (1.0, "arithmetic intensity (FLOP/byte)"),
    "predicted_s": (1e3, "predicted time (ms)"),
    "measured_s": (1e3, "measured time (ms)"),
    "model_error": (1.0, "model error: (predicted − measured) / measured"),
    "tokens_per_s": (1.0, "throughput (tokens/s)"),
    "requests_per_s": (1.0, "achieved throughput (requests/s)"),
    "rate": (1.0, "offered load (requests/s)"),
    "latency_p99_s": (1.0, "p99 latency (s)"),
    "ttft_p99_s": (1.0, "p99 time to first token (s)"),
    "time_s": (1.0, "simulated time (s)"),
    "mean_batch": (1.0, "mean batch (sequences per iteration)"),
    "waiting": (1.0, "requests waiting"),
    "kv_reserved_bytes": (1e-9, "KV memory reserved (GB)"),
    "kv_used_bytes": (1e-9, "KV memory holding tokens (GB)"),
    "reserved_bytes": (1e-9, "KV memory reserved (GB)"),
    "used_bytes": (1e-9, "KV memory holding tokens (GB)"),
    "utilization": (1.0, "share of reserved KV memory holding tokens"),
    "kv_cache_bytes": (1e-9, "KV cache (GB)"),
    "bytes": (1e-9, "HBM bytes (GB)"),
    "bytes_scores": (1e-9, "HBM bytes of the scores S and P (GB)"),
    "max_batch": (1.0, "largest batch that fits"),
    "kv_bytes_per_token": (1 / 1024, "KV cache per token (KiB)"),
    "weights_bytes": (1e-9, "weights (GB)"),
    "prefill_s": (1e3, "prefill step (ms)"),
    "decode_s": (1e3, "decode step (ms)"),
    "prefill_tokens_per_s": (1.0, "prefill tokens/s"),
    "decode_tokens_per_s": (1.0, "decode tokens/s"),
    "context": (1.0, "context (tokens)"),
    "seq": (1.0, "sequence length (tokens)"),
    "batch": (1.0, "batch (sequences)"),
    "m": (1.0, "tokens m (rows of X)"),
    "step": (1.0, "decode step"),
    "block_size": (1.0, "block size (tokens)"),
    "alpha": (1.0, "acceptance rate α"),
    "gamma": (1.0, "draft length γ"),
    "optimal_gamma": (1.0, "optimal draft length γ"),
    "optimal_speedup": (1.0, "speedup at the optimal γ"),
    "speedup": (1.0, "speedup over plain decoding"),
    "closed_form_speedup": (1.0, "Leviathan's E / (γc + 1)"),
    "measured_speedup": (1.0, "measured speedup over bf16"),
    "predicted_speedup": (1.0, "predicted speedup over bf16"),
    "rel_error": (1.0, "output error ‖Y − Y_bf16‖ / ‖Y_bf16‖"),
    "measured_flops_per_s": (1e-12, "measured TFLOP/s"),
    "predicted_flops_per_s": (1e-12, "predicted TFLOP/s"),
    "measured_kv_bytes_per_s": (1e-9, "K+V read, measured (GB/s)"),
    "predicted_bytes_per_s": (1e-9, "HBM traffic, predicted (GB/s)"),
    "measured_bytes_per_s": (1e-9, "HBM traffic, measured (GB/s)"),
    "comm_share": (1.0, "the communication's share of the step"),
}

# Twenty colours apart from each other, none pale: tab10, then the darker halves of tab20b/c.
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#31a354", "#756bb1",
          "#636363", "#e6550d"]
MARKER_CYCLE = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "*"]
LINESTYLE_CYCLE = ["-", "--", ":", "-."]


def display(col):
    """(scale, label) for a column: its quantity and unit."""
    if col in LABELS:
        return LABELS[col]
    name = col.replace("_", " ")
    if col.endswith("flops_per_s"):
        return 1e-12, f"{name[:-len(' flops per s')]} TFLOP/s".strip()
    if col.endswith("bytes_per_s"):
        return 1e-9, f"{name[:-len(' bytes per s')]} GB/s".strip()
    if col.endswith("_per_s"):
        return 1.0, f"{name[:-len(' per s')]} per second"
    if col.endswith("_s"):
        return 1e3, f"{name[:-2]} (ms)"
    if col.endswith("bytes") or col.startswith("bytes"):
        return 1e-9, f"{name.replace(' bytes', '').replace('bytes ', '')} (GB)"
    return 1.0, name


def value_text(col, value):
    """A value as a legend shows it: with its variable when the value alone does not say what it is."""
    v = str(value)
    try:
        float(v)
        numeric = True
    except ValueError:
        numeric = False
    return f"{col}={v}" if numeric or v in ("true", "false") or v == "" else v


def key_label(values, cols):
    return ", ".join(value_text(c, v) for c, v in zip(cols, values))


class SeriesStyles:
    """Colour (and marker or line style) of each series, keyed by the tuple of its columns' values.

    Up to 20 series get a colour each. More, with two or more series columns: the colour tells the
    values of all but the last column, the marker (or the line style) the last one's value."""

    def __init__(self, rows, series, markers=True):
        self.series = series
        self.keys = []
        for r in rows:
            k = tuple(r.get(c, "") for c in series)
            if k not in self.keys:
                self.keys.append(k)
        self.split = len(self.keys) > 10 and len(series) >= 2
        if self.split:
            self.heads = list(dict.fromkeys(k[:-1] for k in self.keys))
            self.tails = list(dict.fromkeys(k[-1] for k in self.keys))
            self.split = len(self.heads) <= len(COLORS) and len(self.tails) <= len(MARKER_CYCLE)
        self.markers = markers

    def of_row(self, r):
        return tuple(r.get(c, "") for c in self.series)

    def style(self, key):
        """Keyword arguments of plot() for the series `key`."""
        if not self.split:
            return {"color": COLORS[self.keys.index(key) % len(COLORS)], "marker": "o" if self.markers else None,
                    "ls": "-", "ms": 3.5}
        colour = COLORS[self.heads.index(key[:-1])]
        t = self.tails.index(key[-1])
        if self.markers:
            return {"color": colour, "marker": MARKER_CYCLE[t], "ls": "-", "ms": 5}
        return {"color": colour, "marker": None, "ls": LINESTYLE_CYCLE[t % len(LINESTYLE_CYCLE)], "ms": 5}

    def color(self, key):
        return self.style(key)["color"]

    def handles(self, plt, fallback=""):
        """Legend entries: one per series, or the colours then the markers when split."""
        if not self.split:
            return [plt.Line2D([], [], label=key_label(k, self.series) or fallback, **self.style(k))
                    for k in self.keys]
        out = [plt.Line2D([], [], color=COLORS[i], marker="o" if self.markers else None,
                          label=key_label(h, self.series[:-1])) for i, h in enumerate(self.heads)]
        last = self.series[-1]
        for i, t in enumerate(self.tails):
            kw = {"marker": MARKER_CYCLE[i], "ls": ""} if self.markers else {"ls": LINESTYLE_CYCLE[i % 4]}
            out.append(plt.Line2D([], [], color="dimgray", label=value_text(last, t), **kw))
        return out


def text_box(t, renderer):
    """The box of a text's letters (an annotation's own extent also covers its leader line)."""
    from matplotlib.text import Text
    return Text.get_window_extent(t, renderer)


def spread_labels(fig, texts, obstacles=(), step_px=2.0, rounds=60):
    """Moves text labels (annotations placed in offset points) until none overlaps another or an
    obstacle (other texts drawn in the panel): down past what it overlaps, or up when down would
    leave its axes. The figure's renderer measures each box."""
    if not texts:
        return
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    px_to_pt = 72.0 / fig.dpi
    placed = [text_box(o, renderer).expanded(1.02, 1.05) for o in obstacles]
    for t in sorted(texts, key=lambda a: -text_box(a, renderer).y1):
        frame = t.axes.get_window_extent(renderer)
        start = t.xyann
        for direction in (-1, 1, 0):  # down, else up, else where it was (overlapping)
            t.xyann = start
            for _ in range(rounds if direction else 0):
                box = text_box(t, renderer)
                hit = next((p for p in placed if box.overlaps(p)), None)
                if hit is None:
                    break
                shift = (box.y1 - hit.y0 if direction < 0 else hit.y1 - box.y0) + step_px
                x, y = t.xyann
                t.xyann = (x, y + direction * shift * px_to_pt)
            box = text_box(t, renderer)
            clear = not any(box.overlaps(p) for p in placed)
            if direction == 0 or (clear and box.y0 >= frame.y0 and box.y1 <= frame.y1):
                break
        placed.append(text_box(t, renderer).expanded(1.02, 1.05))

