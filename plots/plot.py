#!/usr/bin/env python3
"""Draws one figure from an inferlab results CSV.

    plot.py --csv RESULTS.csv --plot PLOT.json --out BASE      ->  BASE.png, BASE.svg
    plot.py --check --csv ROWS.csv --plot PLOTS.json           ->  exit 2 naming every problem

--check validates plot entries (PLOT.json: one entry or a list, each with an optional "_where") against
the rows a run is about to write, without matplotlib: a known kind, the fields it needs, no unknown
field, every named column present, rows left after 'where'/'exclude'. `inferlab run` calls it before
it writes anything.

PLOT.json is one entry of a spec's `plots:` list (experiments/*.yaml):
  kind      roofline | memory | line | grouped_bars | stacked_bars | heatmap
  where     {column: value or [values]}   keep only matching rows (numbers compare as numbers)
  exclude   {column: value or [values]}   drop matching rows
  facet     column or [column, column]    one panel per value (grid: columns x rows)
  wrap      with one facet column: at most this many panels per row
  title, logx, logy
  roofline: label (colour, default op), marker (shape, default phase), annotate (a column written
            beside matmul and attention points, e.g. op). Ceilings come from the
            rows' peak_flops and bandwidth columns (the numbers the model used), so nothing about
            the hardware is computed here. Measured points, where present, are joined to the
            predicted ones.
  memory:   x (default batch); stacked weights / KV cache / activations; the capacity of every
            hardware in the panel as a horizontal line.
  line:     x, y (column or list: one panel per column), series (columns naming each line),
            hlines {y column: column holding a reference value, e.g. ai: ridge},
            compare {y column: column drawn dashed beside it, e.g. measured_s: predicted_s},
            per (a column to divide y by, e.g. batch_used for bytes per sequence), facet (one row of
            panels per y), sort_by (the column that orders each line's points, default x: e.g. the
            request rate when x is the throughput it achieved), markers (false: lines only, for dense
            series). Rows with fits=false (memory over the device capacity) get hollow markers.
            A compared column is drawn even where y is empty (predict-only rows); a panel with
            nothing to draw says so.
  grouped_bars: x (a category column: one group of bars per value), y (one column, or a list: a panel
            per column, `wrap` panels a row), series (one bar per value in each group), facet, logy. Several rows of one bar give their mean, with
            min-max whiskers (e.g. the error of a format over every batch); an empty panel says so.
  stacked_bars: x (a column naming each bar, kept in row order), stack (columns stacked in each bar),
            labels (legend names of the stack, default the columns), ylabel, hline (a column holding a
            reference value, e.g. capacity_bytes, drawn dashed), annotate (a column printed above
            each bar; *share / *fraction columns as percents), marker (a column drawn as a diamond on
            each bar, e.g. the measured total beside a predicted split). Rows with fits=false are hatched.
  heatmap:  x, y, z (a cell per (x, y), coloured and labelled by z), overlay (a column holding, for
            each y, an x value to mark: e.g. optimal_gamma), center (z value at the middle of a
            diverging colour map, e.g. 1 for speedups).
Every figure whose rows have a `ceilings` column names the ceilings below it (datasheet or measured).
Column units are converted for display: *_s -> ms, *bytes -> GB, *flops_per_s -> TFLOP/s,
*bytes_per_s -> GB/s.
"""
import argparse
import csv
import json
import math
import os
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from style import COLORS, SeriesStyles, display, spread_labels, text_box, value_text  # noqa: E402, F401

matplotlib = plt = None  # imported by load_matplotlib(): --check runs without it


def load_matplotlib():
    global matplotlib, plt
    import matplotlib as mpl
    mpl.use("Agg")
    import matplotlib.colors  # noqa: F401
    import matplotlib.patches  # noqa: F401
    import matplotlib.pyplot as pyplot
    matplotlib, plt = mpl, pyplot

MARKERS = {"decode": "o", "prefill": "^"}
STACK = [("weights_bytes", "weights", "#4C72B0"), ("kv_cache_bytes", "KV cache", "#DD8452"),
         ("activation_bytes", "activations", "#55A868")]


_EXTRA_MARKERS = ["s", "D", "v", "P", "X", "<", ">"]
_assigned = {}


def marker_of(value):
    """decode: circle, prefill: triangle; other values get the next free shape, stably."""
    if value in MARKERS:
        return MARKERS[value]
    if value not in _assigned:
        _assigned[value] = _EXTRA_MARKERS[len(_assigned) % len(_EXTRA_MARKERS)]
    return _assigned[value]


def fail(msg):
    print(f"plot.py: {msg}", file=sys.stderr)
    sys.exit(2)


def as_list(v):
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def number(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def same(cell, want):
    a, b = number(cell), number(want)
    if a is not None and b is not None:
        return a == b
    if isinstance(want, bool):
        want = "true" if want else "false"
    return str(cell) == str(want)


def select(rows, plot):
    for col, want in (plot.get("where") or {}).items():
        rows = [r for r in rows if col in r and any(same(r[col], w) for w in as_list(want))]
    for col, want in (plot.get("exclude") or {}).items():
        rows = [r for r in rows if not (col in r and any(same(r[col], w) for w in as_list(want)))]
    return rows


def ordered_values(rows, col):
    seen = []
    for r in rows:
        if r.get(col) not in seen:
            seen.append(r.get(col))
    return seen


def panels(rows, plot):
    """[(title, rows)] and the grid shape (nrows, ncols)."""
    facet = as_list(plot.get("facet"))
    if not facet:
        return [("", rows)], (1, 1)
    cols_v = ordered_values(rows, facet[0])
    wrap = int(plot.get("wrap") or 0)
    if len(facet) == 1 and 0 < wrap < len(cols_v):  # one facet column, wrapped into rows of `wrap` panels
        out = [(f"{facet[0]}={v}", [r for r in rows if r.get(facet[0]) == v]) for v in cols_v]
        nr = -(-len(out) // wrap)
        out += [("", [])] * (nr * wrap - len(out))
        return out, (nr, wrap)
    rows_v = ordered_values(rows, facet[1]) if len(facet) > 1 else [None]
    out = []
    for rv in rows_v:
        for cv in cols_v:
            sel = [r for r in rows if r.get(facet[0]) == cv and (rv is None or r.get(facet[1]) == rv)]
            title = f"{facet[0]}={cv}" + (f", {facet[1]}={rv}" if rv is not None else "")
            out.append((title, sel))
    return out, (len(rows_v), len(cols_v))


def figure(shape, plot, w=6.0, h=4.6, extra_w=0.0):
    nr, nc = shape
    width = max(w * nc + extra_w, 9.0)
    fig, axes = plt.subplots(nr, nc, figsize=(width, h * nr + 0.6), squeeze=False)
    if plot.get("title"):
        fig.suptitle(textwrap.fill(plot["title"], width=int(width * 11)), fontsize=12)
    return fig, [ax for row in axes for ax in row]


def label_clusters(ax, points, lo, hi, radius=0.3):
    """One multi-line label per group of points closer than `radius` decades (log-log), joined to its
    points by a thin line; returns the labels (spread_labels moves them apart)."""
    clusters = []
    for x, y, text, group in points:
        for c in clusters:
            if c["group"] == group and abs(math.log10(x / c["x"])) < radius and abs(math.log10(y / c["y"])) < radius:
                if text not in c["texts"]:
                    c["texts"].append(text)
                break
        else:
            clusters.append({"x": x, "y": y, "group": group, "texts": [text]})
    out = []
    for c in clusters:
        # decode labels to the right, prefill (near the roof) to the left, unless that leaves the panel
        right = c["group"] != "prefill" or c["x"] < lo * (hi / lo) ** 0.2
        out.append(ax.annotate("\n".join(c["texts"]), (c["x"], c["y"]), xytext=(8 if right else -8, -6),
                               textcoords="offset points", fontsize=6, va="top", ha="left" if right else "right",
                               color="dimgray", arrowprops={"arrowstyle": "-", "color": "lightgray", "lw": 0.6,
                                                            "shrinkA": 0, "shrinkB": 3}))
    return out


def roofline(rows, plot):
    rows = [r for r in rows if (number(r.get("ai")) or 0) > 0 and (number(r.get("predicted_s")) or 0) > 0]
    if not rows:
        fail("no rows with a positive arithmetic intensity to place on a roofline")
    label_col, marker_col = plot.get("label", "op"), plot.get("marker", "phase")
    annotate = plot.get("annotate")
    labels = ordered_values(rows, label_col)
    colour = {lab: COLORS[i % len(COLORS)] for i, lab in enumerate(labels)}
    groups, shape = panels(rows, plot)
    fig, axes = figure(shape, plot, 7.0, 5.4)
    texts, obstacles = [], []
    for ax, (title, sel) in zip(axes, groups):
        if not sel:
            ax.set_visible(False)
            continue
        ais = [number(r["ai"]) for r in sel]
        lo, hi = min(ais) / 4, max(ais) * 4
        # One roof per distinct (peak, bandwidth); dtypes that share a peak (fp16 and bf16) share a label.
        roofs = {}
        for r in sel:
            key = (number(r["peak_flops"]), number(r["bandwidth"]))
            names = roofs.setdefault(key, [])
            if r.get("compute_dtype", "") not in names:
                names.append(r.get("compute_dtype", ""))
        bw = max(k[1] for k in roofs)
        for peak, band in roofs:
            ridge = peak / band
            lo, hi = min(lo, ridge / 8), max(hi, ridge * 8)
        xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        for (peak, band), names in sorted(roofs.items()):
            vector = all("vector" in n for n in names)
            ax.plot(xs, [min(peak, x * band) / 1e12 for x in xs], color="black", lw=1.2, ls=":" if vector else "-")
            obstacles.append(ax.annotate(f"{'/'.join(names)} {peak / 1e12:.0f} TFLOP/s\nridge {peak / band:.0f} FLOP/B",
                                         (peak / band, peak / 1e12), xytext=(-4, 4), textcoords="offset points",
                                         ha="right", va="bottom", fontsize=7))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        to_label = []
        for r in sel:
            x = number(r["ai"])
            y = number(r["flops"]) / number(r["predicted_s"]) / 1e12
            m = marker_of(r.get(marker_col, ""))
            size = 140 if r.get("op") == "total" else 46
            mk = "*" if r.get("op") == "total" else m
            ax.scatter([x], [y], marker=mk, s=size, facecolors="none", edgecolors=[colour[r[label_col]]], lw=1.4)
            if annotate and r.get(annotate):
                to_label.append((x, y, r[annotate], r.get(marker_col, "")))
            meas = number(r.get("measured_s"))
            if meas and meas > 0:
                ym = number(r["flops"]) / meas / 1e12
                ax.scatter([x], [ym], marker=mk, s=size, color=colour[r[label_col]])
                ax.plot([x, x], [y, ym], color=colour[r[label_col]], lw=0.8)
        lowest = min(number(r["flops"]) / number(r["predicted_s"]) / 1e12 for r in sel)
        ax.set_ylim(lowest / 6, max(k[0] for k in roofs) / 1e12 * 4)  # room for the labels below the lowest point
        texts += label_clusters(ax, to_label, lo, hi)
        # The bandwidth, named in the corner above the memory roof (no point can lie above a roof),
        # with a line to the slope.
        x0 = lo * 3
        obstacles.append(ax.annotate(f"memory roof: HBM {bw / 1e9:.0f} GB/s", (x0, x0 * bw / 1e12), xytext=(0.02, 0.97),
                                     textcoords="axes fraction", fontsize=8, va="top", ha="left",
                                     arrowprops={"arrowstyle": "-", "color": "gray", "lw": 0.6}))
        ax.set_xlabel("arithmetic intensity (FLOP/byte)")
        ax.set_ylabel("attainable TFLOP/s")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.25)
    handles = [plt.Line2D([], [], color=colour[lab], marker="o", ls="", label=f"{label_col}={lab}") for lab in labels]
    for ph in ordered_values(rows, marker_col):
        handles.append(plt.Line2D([], [], color="gray", marker=marker_of(ph), ls="", mfc="none",
                                  label=f"{marker_col}={ph}"))
    if any(r.get("op") == "total" for r in rows):
        handles.append(plt.Line2D([], [], color="gray", marker="*", ls="", mfc="none", ms=11, label="whole step"))
    if any(number(r.get("measured_s")) for r in rows):
        handles.append(plt.Line2D([], [], color="gray", marker="o", ls="", label="measured (filled)"))
    fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 0.86, 0.95))
    spread_labels(fig, texts, obstacles)
    return fig


def memory(rows, plot):
    """Stacked weights / KV cache / activations per x, one panel per facet, all panels on one scale
    (so that MHA and GQA panels compare by eye); a panel whose weights differ from the others' (a
    KV-heads override changes the K/V projections) says how many parameters it holds."""
    x = plot.get("x", "batch")
    groups, shape = panels(rows, plot)
    fig, axes = figure(shape, plot, 5.2, 4.2)
    totals = [sum(number(r.get(c)) or 0 for c, _, _ in STACK) / 1e9 for r in rows]
    caps_all = sorted({number(r["capacity_bytes"]) / 1e9 for r in rows if number(r.get("capacity_bytes"))})
    top_all = max(totals + caps_all)
    if caps_all and top_all > 3 * caps_all[-1]:
        top_all = 3 * caps_all[-1]  # keep the capacity lines readable: clip what is far above them
    params_vary = len({r.get("params") for r in rows}) > 1
    for ax, (title, sel) in zip(axes, groups):
        if not sel:
            ax.set_visible(False)
            continue
        xs, by_x = [], {}
        for r in sel:  # one bar per x value (the breakdown does not depend on the hardware)
            if r[x] not in by_x:
                by_x[r[x]] = r
                xs.append(r[x])
        xs.sort(key=lambda v: (number(v) is None, number(v) or 0, v))
        bottom = [0.0] * len(xs)
        for col, name, colour in STACK:
            vals = [(number(by_x[v].get(col)) or 0) / 1e9 for v in xs]
            ax.bar(range(len(xs)), vals, bottom=bottom, color=colour, label=name, width=0.75)
            bottom = [b + v for b, v in zip(bottom, vals)]
        caps = sorted({(number(r["capacity_bytes"]), r.get("capacity_label", "")) for r in sel
                       if number(r.get("capacity_bytes"))})
        for i, (cap, lab) in enumerate(caps):
            ax.axhline(cap / 1e9, color="crimson", ls=["--", ":", "-."][i % 3], lw=1.3)
            ax.annotate(lab, (-0.5, cap / 1e9), ha="left", va="bottom", fontsize=7, color="crimson",
                        bbox={"facecolor": "white", "alpha": 0.75, "lw": 0, "pad": 0.6})
        for i, b in enumerate(bottom):
            if b > top_all:  # a bar cut at the top of the scale: its height printed on it
                ax.annotate(f"{b:.0f}", (i, top_all), ha="center", va="top", fontsize=7, color="white", rotation=90)
        ax.set_ylim(0, top_all * 1.08)
        if params_vary and number(sel[0].get("params")):
            title += f" · {number(sel[0]['params']) / 1e9:.1f} B params"
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels(xs, rotation=45 if len(xs) > 8 else 0, fontsize=8)
        ax.set_xlabel(display(x)[1])
        ax.set_ylabel("GB (10^9 bytes)")
        ax.set_title(title, fontsize=9)
        ax.grid(True, axis="y", alpha=0.25)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def no_data(ax, what):
    """An empty panel that says why, e.g. a measured column in predict-only rows."""
    ax.text(0.5, 0.5, textwrap.fill(f"no values of {what} in these rows (predictions only? measured columns "
                                     "are filled on a GPU)", 40), transform=ax.transAxes, ha="center", va="center",
            fontsize=8, color="dimgray")


def line(rows, plot):
    x = plot.get("x")
    ys = as_list(plot.get("y"))
    if not x or not ys:
        fail("a line plot needs x and y")
    series = as_list(plot.get("series"))
    hlines = plot.get("hlines") or {}
    compare = plot.get("compare") or {}
    groups, (nr, nc) = panels(rows, plot)
    # Without facets the y columns sit side by side; with them, one row of facet panels per y.
    fig, axes = figure((nr * len(ys), nc) if plot.get("facet") else (1, len(ys)), plot, 5.6, 4.4, extra_w=2.8)
    styles = SeriesStyles(rows, series, markers=plot.get("markers", True))
    per = plot.get("per")  # divide y by this column (e.g. bytes per sequence: per batch_used)
    xscale, xlabel = display(x)
    order = plot.get("sort_by", x)

    def points(sel, k, col):
        return [(p[1] * xscale, p[2]) for p in sorted(
            (number(r.get(order)), number(r[x]), number(r[col]) / (number(r[per]) if per else 1.0)) for r in sel
            if styles.of_row(r) == k and number(r.get(x)) is not None and number(r.get(col)) is not None)]

    # One row of panels per y column, one panel per facet value.
    for ax, (y, (title, sel)) in zip(axes, [(y, g) for y in ys for g in groups]):
        if not sel:
            ax.set_visible(False)
            continue
        scale, ylabel = display(y)
        if per:
            ylabel = f"{ylabel} per {display(per)[1]}"
        paired = compare.get(y)
        drawn = False
        for k in styles.keys:
            st = styles.style(k)
            pts = points(sel, k, y)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] * scale for p in pts], lw=1.4, **st)
                drawn = True
            if paired:  # the model's value for the same points, dashed in the same colour (also alone)
                pp = points(sel, k, paired)
                pscale, _ = display(paired)
                ax.plot([p[0] for p in pp], [p[1] * pscale for p in pp], ls="--", lw=1.0, color=st["color"])
                drawn = drawn or bool(pp)
            # Points whose memory does not fit the device: hollow white markers over the line.
            over = sorted((number(r[x]) * xscale, number(r[y])) for r in sel
                          if styles.of_row(r) == k and r.get("fits") == "false"
                          and number(r.get(x)) is not None and number(r.get(y)) is not None)
            if over:
                ax.plot([p[0] for p in over], [p[1] * scale for p in over], ls="", marker="o", ms=6,
                        mfc="white", mec=st["color"])
        if not drawn:
            no_data(ax, y)
        if y in hlines:  # a reference value of each row, e.g. the ridge point or the search's cap
            ref_col = hlines[y]
            refs = {}  # value -> the series it belongs to
            for r in sel:
                if number(r.get(ref_col)) is not None:
                    lab = ", ".join(value_text(c, r.get(c, "")) for c in series[:1])
                    refs.setdefault(number(r[ref_col]), [])
                    if lab and lab not in refs[number(r[ref_col])]:
                        refs[number(r[ref_col])].append(lab)
            for j, (v, labs) in enumerate(sorted(refs.items())):
                ax.axhline(v * scale, color="gray", ls=["--", ":", "-."][j % 3], lw=1)
                ax.annotate(f"{ref_col} = {v * scale:.3g}" + (f" ({', '.join(labs)})" if len(refs) > 1 else ""),
                            (0.01, v * scale), xycoords=("axes fraction", "data"), fontsize=7, va="bottom",
                            color="dimgray")
        if drawn and plot.get("logx", False):
            ax.set_xscale("log", base=2)
        if drawn and plot.get("logy", False):
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if title:
            ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.25)
    handles = styles.handles(plt, fallback=display(ys[0])[1])
    for y, paired in compare.items():
        if y in ys:
            handles.append(plt.Line2D([], [], color="gray", ls="--", lw=1.0, label=f"dashed: {display(paired)[1]}"))
    if any(r.get("fits") == "false" for r in rows):
        handles.append(plt.Line2D([], [], color="gray", marker="o", ms=6, mfc="white", ls="",
                                  label="does not fit in memory"))
    fig.legend(handles=handles, loc="center right", fontsize=7, frameon=False,
               title=", ".join(series) if series else None, title_fontsize=7)
    fig.tight_layout(rect=(0, 0, 1 - 2.6 / fig.get_figwidth(), 0.93))
    return fig


def grouped_bars(rows, plot):
    """Grouped bars: one group per x value (a category, in order of appearance), one bar per series.
    Several rows of one bar (e.g. every batch of a format) give the mean, with min-max whiskers.
    y a list of columns: one panel per column (each with its own unit), wrapped at `wrap` panels a row."""
    x = plot.get("x")
    ys = as_list(plot.get("y"))
    if not x or not ys:
        fail("a grouped_bars plot needs x and y")
    series = as_list(plot.get("series"))
    logy = plot.get("logy", False)
    if isinstance(plot.get("y"), list):
        wrap = int(plot.get("wrap") or len(ys))
        groups = [(display(y)[1], rows, y) for y in ys]
        shape = (-(-len(ys) // wrap), min(wrap, len(ys)))
        groups += [("", [], None)] * (shape[0] * shape[1] - len(groups))
        fig, axes = figure(shape, plot, 4.2, 3.6, extra_w=1.6)
    else:
        sel_groups, shape = panels(rows, plot)
        groups = [(title, sel, ys[0]) for title, sel in sel_groups]
        fig, axes = figure(shape, plot, 6.4, 4.4, extra_w=2.8)
    cats = ordered_values(rows, x)
    styles = SeriesStyles(rows, series)
    keys = styles.keys
    width = 0.8 / max(len(keys), 1)
    for ax, (title, sel, y) in zip(axes, groups):
        if not sel:
            ax.set_visible(False)
            continue
        scale, ylabel = display(y)
        drawn = False
        for i, k in enumerate(keys):
            colour = COLORS[i % len(COLORS)]
            for c, cat in enumerate(cats):
                vals = [number(r[y]) * scale for r in sel if r.get(x) == cat and styles.of_row(r) == k
                        and number(r.get(y)) is not None]
                if not vals:
                    continue
                drawn = True
                pos = c - 0.4 + width * (i + 0.5)
                mean = sum(vals) / len(vals)
                if logy and mean <= 0:  # nothing to draw on a log axis: say so
                    ax.annotate("0", (pos, 0), xycoords=("data", "axes fraction"), ha="center", va="bottom",
                                fontsize=6, color=colour)
                    continue
                err = [[mean - min(vals)], [max(vals) - mean]] if len(vals) > 1 else None
                ax.bar([pos], [mean], width=width * 0.95, color=colour, yerr=err, capsize=2,
                       error_kw={"lw": 0.8})
        if not drawn:
            no_data(ax, y)
        elif logy:
            ax.set_yscale("log")
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels(cats, fontsize=8, rotation=20 if len(ys) > 1 else 0, ha="right" if len(ys) > 1 else "center")
        ax.set_xlim(-0.6, len(cats) - 0.4)
        ax.set_xlabel(display(x)[1])
        ax.set_ylabel(ylabel)
        if title:
            ax.set_title(title, fontsize=10)
        ax.grid(True, axis="y", which="both", alpha=0.25)
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[i % len(COLORS)],
                             label=", ".join(value_text(c, v) for c, v in zip(series, k)) or display(ys[0])[1])
               for i, k in enumerate(keys)]
    fig.legend(handles=handles, loc="center right", fontsize=7, frameon=False,
               title=", ".join(series) if series else None, title_fontsize=7)
    fig.tight_layout(rect=(0, 0, 1 - 2.6 / fig.get_figwidth(), 0.93))
    return fig


def stacked_bars(rows, plot):
    x = plot.get("x")
    stack = as_list(plot.get("stack"))
    if not x or not stack:
        fail("a stacked_bars plot needs x and stack")
    labels = as_list(plot.get("labels")) or stack
    if len(labels) != len(stack):
        fail("stacked_bars: labels must name every stack column")
    scale, ylabel = display(stack[0])
    ylabel = plot.get("ylabel", ylabel.replace(stack[0], ", ".join(labels)))
    groups, shape = panels(rows, plot)
    fig, axes = figure(shape, plot, 6.4, 4.6)
    for ax, (title, sel) in zip(axes, groups):
        if not sel:
            ax.set_visible(False)
            continue
        xs = ordered_values(sel, x)
        by_x = {r[x]: r for r in sel}
        bottom = [0.0] * len(xs)
        for i, (col, lab) in enumerate(zip(stack, labels)):
            vals = [(number(by_x[v].get(col)) or 0) * scale for v in xs]
            hatch = ["//" if by_x[v].get("fits") == "false" else "" for v in xs]
            for j, (val, h) in enumerate(zip(vals, hatch)):
                ax.bar(j, val, bottom=bottom[j], color=COLORS[i % len(COLORS)], width=0.72, hatch=h, edgecolor="white")
            bottom = [b + v for b, v in zip(bottom, vals)]
        mark = plot.get("marker")
        if mark:
            for j, v in enumerate(xs):
                val = number(by_x[v].get(mark))
                if val is not None:
                    ax.scatter([j], [val * scale], marker="D", s=28, color="black", zorder=5)
                    bottom[j] = max(bottom[j], val * scale)
        ref = plot.get("hline")
        if ref:
            for j, (v, lab) in enumerate(sorted({(number(r.get(ref)), r.get(ref.replace("_bytes", "_label"), ""))
                                                for r in sel if number(r.get(ref))})):
                ax.axhline(v * scale, color="crimson", ls="--", lw=1.2)
                ax.annotate(lab or ref, (len(xs) - 0.5, v * scale), ha="right", va="bottom", fontsize=7, color="crimson")
        ann = plot.get("annotate")
        if ann:
            for j, v in enumerate(xs):
                val = number(by_x[v].get(ann))
                if val is None:
                    continue
                text = f"{100 * val:.0f}%" if ann.endswith(("share", "fraction")) else f"{val:.3g}"
                ax.annotate(text, (j, bottom[j]), xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                            fontsize=7)
            ax.set_ylim(0, max(bottom) * 1.12)
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels(xs, rotation=30 if len(xs) > 5 else 0, ha="right" if len(xs) > 5 else "center", fontsize=8)
        ax.set_xlabel(display(x)[1])
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        ax.grid(True, axis="y", alpha=0.25)
    handles = [matplotlib.patches.Patch(color=COLORS[i % len(COLORS)], label=textwrap.fill(lab, 24))
               for i, lab in enumerate(labels)]
    if plot.get("marker"):
        handles.append(plt.Line2D([], [], color="black", marker="D", ls="", label=display(plot["marker"])[1]))
    fig.legend(handles=handles, loc="center right", fontsize=8, frameon=False,
               title=textwrap.fill(f"above the bars: {display(ann)[1]}", 30) if ann else None, title_fontsize=7)
    if any(r.get("fits") == "false" for r in rows):
        fig.text(0.01, 0.01, "hatched: does not fit in device memory", fontsize=7, color="dimgray")
    fig.tight_layout(rect=(0, 0.02, 0.84, 0.93))
    return fig


def heatmap(rows, plot):
    x, y, z = plot.get("x"), plot.get("y"), plot.get("z")
    if not (x and y and z):
        fail("a heatmap needs x, y and z")
    overlay, center = plot.get("overlay"), plot.get("center")
    groups, shape = panels(rows, plot)
    fig, axes = figure(shape, plot, 5.4, 4.8)
    zs = [number(r.get(z)) for r in rows if number(r.get(z)) is not None]
    lo, hi = min(zs), max(zs)
    if center is not None:
        norm = matplotlib.colors.TwoSlopeNorm(vcenter=center, vmin=min(lo, center - 1e-9), vmax=max(hi, center + 1e-9))
        cmap = plt.get_cmap("RdYlGn")
    else:
        norm, cmap = matplotlib.colors.Normalize(lo, hi), plt.get_cmap("viridis")
    image = None
    for ax, (title, sel) in zip(axes, groups):
        if not sel:
            ax.set_visible(False)
            continue
        xs = sorted({number(r[x]) for r in sel})
        ys = sorted({number(r[y]) for r in sel})
        grid = [[float("nan")] * len(xs) for _ in ys]
        for r in sel:
            grid[ys.index(number(r[y]))][xs.index(number(r[x]))] = number(r[z])
        image = ax.imshow(grid, origin="lower", aspect="auto", cmap=cmap, norm=norm)
        for i in range(len(ys)):
            for j in range(len(xs)):
                v = grid[i][j]
                if v == v:
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6)
        if overlay:
            pts = {}
            for r in sel:
                ov = number(r.get(overlay))
                if ov is not None:
                    pts[number(r[y])] = ov
            oy = sorted(pts)
            # x positions on the cell grid: the overlay value's index (values outside the grid clamp to its ends)
            ox = [min(range(len(xs)), key=lambda k: abs(xs[k] - pts[v])) if xs[0] <= pts[v] <= xs[-1]
                  else (-0.5 if pts[v] < xs[0] else len(xs) - 0.5) for v in oy]
            ax.plot(ox, [ys.index(v) for v in oy], color="black", lw=1.3, marker="o", ms=15, mfc="none", mew=1.3)
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels([f"{v:g}" for v in xs], fontsize=8)
        ax.set_yticks(range(len(ys)))
        ax.set_yticklabels([f"{v:g}" for v in ys], fontsize=8)
        ax.set_xlabel(display(x)[1])
        ax.set_ylabel(display(y)[1])
        ax.set_title(title, fontsize=9)
    if overlay:
        fig.legend(handles=[plt.Line2D([], [], color="black", marker="o", mfc="none", ms=9,
                                       label=f"{display(overlay)[1]} per {display(y)[1]}")],
                   loc="upper right", fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 0.9, 0.92))
    cax = fig.add_axes((0.91, 0.12, 0.015, 0.72))
    bar = fig.colorbar(image, cax=cax, label=display(z)[1])
    if center is not None:  # as many ticks below the centre as above it
        ticks = [lo + (center - lo) * k / 3 for k in range(3)] + [center + (hi - center) * k / 4 for k in range(5)]
        bar.set_ticks([t for t in ticks if lo <= t <= hi])
        bar.set_ticklabels([f"{t:.2g}" for t in ticks if lo <= t <= hi])
    return fig


KINDS = {"roofline": roofline, "memory": memory, "line": line, "grouped_bars": grouped_bars,
         "stacked_bars": stacked_bars, "heatmap": heatmap}


# What each kind needs; which fields name one or more columns; which map columns to values or columns.
REQUIRED = {"roofline": [], "memory": [], "line": ["x", "y"], "grouped_bars": ["x", "y"],
            "stacked_bars": ["x", "stack"], "heatmap": ["x", "y", "z"]}
COLUMN_FIELDS = ["facet", "series", "x", "y", "z", "stack", "sort_by", "overlay", "per", "label", "marker", "annotate",
                 "hline"]
KEYED_FIELDS = ["where", "exclude"]      # {column: value(s)}
PAIRED_FIELDS = ["hlines", "compare"]    # {column: column}
OTHER_FIELDS = ["name", "kind", "title", "logx", "logy", "wrap", "labels", "ylabel", "center", "markers", "_where"]
COLUMNS_OF_KIND = {"roofline": ["ai", "flops", "predicted_s", "peak_flops", "bandwidth"],
                   "memory": ["weights_bytes", "kv_cache_bytes", "activation_bytes"]}


def problems(plot, rows, columns):
    """Every problem of one plot entry over these rows, as messages (empty: it can be drawn)."""
    kind = plot.get("kind")
    if kind not in KINDS:
        return [f"unknown plot kind '{kind}' (known: {', '.join(KINDS)})"]
    out = []
    known = set(COLUMN_FIELDS + KEYED_FIELDS + PAIRED_FIELDS + OTHER_FIELDS)
    out += [f"unknown field '{k}' (known: {', '.join(sorted(known - {'_where'}))})" for k in plot if k not in known]
    out += [f"a {kind} plot needs '{f}'" for f in REQUIRED[kind] if not plot.get(f)]
    if kind == "grouped_bars" and isinstance(plot.get("y"), list) and plot.get("facet"):
        out.append("a grouped_bars plot with a list of y columns (a panel each) takes no facet")
    if kind == "stacked_bars" and plot.get("labels") and len(as_list(plot["labels"])) != len(as_list(plot.get("stack"))):
        out.append("stacked_bars: labels must name every stack column")
    named = [c for f in COLUMN_FIELDS for c in as_list(plot.get(f))] + COLUMNS_OF_KIND.get(kind, [])
    if kind == "memory":
        named.append(plot.get("x", "batch"))
    if kind == "roofline":
        named.append(plot.get("label", "op"))
    named += [c for f in KEYED_FIELDS for c in (plot.get(f) or {})]
    named += [c for f in PAIRED_FIELDS for pair in (plot.get(f) or {}).items() for c in pair]
    missing = [c for c in dict.fromkeys(named) if c not in columns]
    if missing:
        out.append(f"column{'s' if len(missing) > 1 else ''} {', '.join(repr(c) for c in missing)} not in the results "
                   f"(columns: {', '.join(columns)})")
    elif not select(rows, plot):
        out.append("no rows left after 'where'/'exclude'")
    return out


def render(rows, plot, origin="the CSV"):
    """The figure of one plot entry over the CSV's rows, with its footers."""
    kind = plot.get("kind")
    columns = list(rows[0].keys()) if rows else []
    trouble = problems(plot, rows, columns)
    if trouble:
        fail(f"plot '{plot.get('name', kind)}' over {origin}: " + "; ".join(trouble))
    rows = select(rows, plot)
    fig = KINDS[kind](rows, plot)
    fig.text(0.995, 0.005, "inferlab", ha="right", va="bottom", fontsize=6, color="gray")
    # Which ceilings the predictions stand on (datasheet or a measured file), on every figure that has them.
    sources = [c for c in ordered_values(rows, "ceilings") if c]
    if sources:
        fig.text(0.5, 0.003, "ceilings: " + "; ".join(sources), ha="center", va="bottom", fontsize=6, color="gray")
    return fig


def main(argv=None):
    """Exit status: 0 drawn or checked, 2 bad input, 130 interrupted (Ctrl-C: quietly, no traceback)."""
    try:
        draw(argv)
    except KeyboardInterrupt:
        return 130
    return 0


def draw(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--plot", required=True, help="JSON file with one plot entry")
    ap.add_argument("--out", help="output path without extension")
    ap.add_argument("--check", action="store_true", help="validate the plot entries against the rows; draw nothing")
    a = ap.parse_args(argv)
    with open(a.plot) as f:
        plot = json.load(f)
    with open(a.csv, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        columns = list(reader.fieldnames or [])
    if a.check:
        bad = []
        for p in as_list(plot):
            for msg in problems(p, rows, columns):
                bad.append(f"{p.get('_where', '')}{': ' if p.get('_where') else ''}plot '{p.get('name', p.get('kind'))}': {msg}")
        if bad:
            fail("\n".join(bad))
        return
    if not a.out:
        fail("--out is needed to draw")
    load_matplotlib()
    fig = render(rows, plot, a.csv)
    for ext in ("png", "svg"):
        fig.savefig(f"{a.out}.{ext}", dpi=150)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
