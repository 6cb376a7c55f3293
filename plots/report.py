#!/usr/bin/env python3
"""One self-contained HTML page of a results folder (`inferlab report RESULTS_DIR`).

    report.py --results DIR --out PAGE.html      ->  PAGE.html (written to a temporary file, then renamed);
                                                     a JSON summary on stdout; exit 2 naming the problem

For every results CSV of the folder (NAME.csv, with its provenance NAME.json beside it): the spec's
description, the provenance (commit, date, host, GPU, mode, ceilings, warnings; the whole JSON folded),
the model's errors against the measurements (a summary, and every model_error cell coloured by size), the
figures of figures/NAME-PLOT.svg inline, and the rows. A figure and its rows point at each other: the
figure's caption filters the table to the rows it draws (the rows its plot entry keeps, by plot.py's own
`select`), and each row names the figures that draw it. Nothing is fetched: styles, script and figures are
in the page. Needs python3 only (not matplotlib).
"""
import argparse
import csv
import html
import json
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot import as_list, number, select  # noqa: E402  (the figures' own row selection)

# How large a model error is marked: beyond 10% amber, beyond 25% red (|predicted - measured| / measured).
ERROR_BANDS = [(0.25, "err-high"), (0.10, "err-mid")]
ERROR_COLUMNS = ("model_error",)

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#fafbfc}
header{background:#1d2330;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c8cede}nav{padding:8px 24px;background:#eef1f6;border-bottom:1px solid #d8dde7}
nav a{margin-right:14px}main{padding:8px 24px 40px}section{margin:26px 0 40px}
h2{border-bottom:2px solid #1d2330;padding-bottom:4px}h3{margin:18px 0 6px;font-size:15px}
table{border-collapse:collapse;font-size:12px}th,td{border:1px solid #d8dde7;padding:2px 6px;white-space:nowrap}
th{background:#eef1f6;position:sticky;top:0;z-index:1}td.num{text-align:right;font-variant-numeric:tabular-nums}
table.prov td:first-child{font-weight:600}.scroll{max-height:480px;overflow:auto;border:1px solid #d8dde7}
figure{margin:14px 0;background:#fff;border:1px solid #d8dde7;padding:8px;display:inline-block;max-width:100%}
figure svg{max-width:100%;height:auto}figcaption{font-size:13px;margin-top:4px}
.err-high{background:#f6c8c3}.err-mid{background:#fbe7b5}.note{color:#6a7385}
tr.hidden{display:none}tr.flash td{background:#d7ebff}.filter{margin:6px 0;font-size:13px}
button{font:inherit;cursor:pointer}pre{background:#fff;border:1px solid #d8dde7;padding:8px;overflow:auto;font-size:12px}
.figs a{margin-right:4px}
"""

SCRIPT = """
(function () {
  function table(id) { return document.getElementById(id); }
  function show(tableId, rows, label) {
    var t = table(tableId), keep = rows ? new Set(rows.split(' ')) : null, shown = 0;
    t.querySelectorAll('tbody tr').forEach(function (tr) {
      var on = !keep || keep.has(tr.id);
      tr.classList.toggle('hidden', !on);
      if (on) shown++;
    });
    var f = document.getElementById(tableId + '-filter');
    f.querySelector('span').textContent = keep ? shown + ' rows of ' + label : 'all rows';
    f.querySelector('button').disabled = !keep;
  }
  document.querySelectorAll('a[data-rows]').forEach(function (a) {
    a.addEventListener('click', function () { show(a.dataset.table, a.dataset.rows, a.dataset.label); });
  });
  document.querySelectorAll('.filter button').forEach(function (b) {
    b.addEventListener('click', function () { show(b.dataset.table, null, ''); });
  });
  document.querySelectorAll('a.row-link').forEach(function (a) {
    a.addEventListener('click', function () {
      var tr = document.getElementById(a.getAttribute('href').slice(1));
      if (!tr) return;
      show(tr.closest('table').id, null, '');
      tr.classList.add('flash');
      setTimeout(function () { tr.classList.remove('flash'); }, 2000);
    });
  });
})();
"""


def fail(msg):
    print(f"report.py: {msg}", file=sys.stderr)
    sys.exit(2)


def esc(v):
    return html.escape(str(v), quote=True)


def slug(text):
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text)


def read_rows(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader), list(reader.fieldnames or [])


def error_class(cell):
    v = number(cell)
    if v is None or v != v:
        return ""
    for bound, cls in ERROR_BANDS:
        if abs(v) > bound:
            return cls
    return ""


def inline_svg(path, prefix):
    """The SVG's markup for the page: no XML prolog, and every id (and reference to one) prefixed, so that
    the figures of one page never share an id."""
    with open(path) as f:
        svg = f.read()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', svg)
    svg = re.sub(r'url\(#([^)]+)\)', lambda m: f"url(#{prefix}{m.group(1)})", svg)
    svg = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', svg)
    return svg


def provenance_rows(prov, rows):
    gpu = prov.get("gpu") or {}
    measured = sum(1 for r in rows if r.get("measured_s"))
    ceilings = as_list(prov.get("ceilings")) or list(dict.fromkeys(r["ceilings"] for r in rows if r.get("ceilings")))
    out = [("spec", prov.get("spec", "")), ("scenario", prov.get("scenario", "")), ("commit", prov.get("commit", "")),
           ("date", prov.get("date", "")), ("host", prov.get("host", "")),
           ("GPU", gpu.get("name") if gpu.get("present") else "none" + (f" ({gpu['reason']})" if gpu.get("reason") else "")),
           ("mode", f"{prov.get('mode', '')}: {prov.get('mode_reason', '')}"),
           ("ceilings", "; ".join(ceilings) or "-"),
           ("points", f"{prov.get('points_total', '?')} points, {len(rows)} rows ({measured} measured)")]
    if prov.get("measured_on"):
        out.append(("measured on", "; ".join(f"{k}: {v}" for k, v in prov["measured_on"].items())))
    if prov.get("measured_commits"):
        out.append(("measured at", "; ".join(f"{k}: {v}" for k, v in prov["measured_commits"].items())))
    if prov.get("merged"):
        out.append(("merged from", f"{prov['merged'].get('shards')} shards"))
    if prov.get("warnings"):
        out.append(("warnings", " · ".join(prov["warnings"])))
    out.append(("complete", str(prov.get("complete", "?")).lower()))
    return out


def error_summary(name, rows, columns):
    """(html, count of errors) of the model's errors in these rows."""
    col = next((c for c in ERROR_COLUMNS if c in columns), None)
    if not col:
        return "", 0
    errs = [(abs(number(r[col])), i) for i, r in enumerate(rows) if number(r.get(col)) is not None]
    if not errs:
        return f'<p class="note">No measured rows: no model error to show.</p>', 0
    worst = sorted(errs, reverse=True)[:5]
    marked = sum(1 for e, _ in errs if e > ERROR_BANDS[-1][0])
    links = ", ".join(f'<a class="row-link" href="#{name}-r{i}">row {i + 1}: {e:.1%}</a>' for e, i in worst)
    return (f'<p>Model error |predicted − measured| / measured over {len(errs)} measured rows: median '
            f'{statistics.median(e for e, _ in errs):.1%}, {marked} beyond {ERROR_BANDS[-1][0]:.0%} '
            f'(<span class="err-mid">&gt;{ERROR_BANDS[-1][0]:.0%}</span>, <span class="err-high">&gt;'
            f'{ERROR_BANDS[0][0]:.0%}</span>). Largest: {links}.</p>'), len(errs)


def spec_section(folder, csv_name, summary):
    name = csv_name[:-4]
    sid = slug(name)
    rows, columns = read_rows(os.path.join(folder, csv_name))
    prov_path = os.path.join(folder, name + ".json")
    prov = {}
    if os.path.isfile(prov_path):
        with open(prov_path) as f:
            try:
                prov = json.load(f)
            except json.JSONDecodeError as e:
                fail(f"{prov_path}: malformed JSON: {e}")
    out = [f'<section id="{sid}"><h2>{esc(name)}</h2>']
    if prov.get("description"):
        out.append(f"<p>{esc(prov['description'])}</p>")
    if prov:
        out.append('<h3>Provenance</h3><table class="prov">')
        out += [f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in provenance_rows(prov, rows)]
        out.append(f"</table><details><summary>{esc(name)}.json</summary><pre>{esc(json.dumps(prov, indent=2))}</pre>"
                   "</details>")
    else:
        out.append(f'<p class="note">No provenance ({esc(name)}.json) beside the CSV: where these rows come from '
                   'cannot be told.</p>')
    errors_html, measured = error_summary(sid, rows, columns)
    if errors_html:
        out.append("<h3>Model error</h3>" + errors_html)

    # Figures, each with the rows its plot entry keeps.
    figs_of_row = [[] for _ in rows]
    index = {id(r): i for i, r in enumerate(rows)}
    figures = 0
    plots = prov.get("plots") or []
    if plots:
        out.append("<h3>Figures</h3>")
    for plot in plots:
        pname = plot.get("name", plot.get("kind", "plot"))
        fid = f"fig-{sid}-{slug(pname)}"
        kept = [index[id(r)] for r in select(rows, plot)]
        for i in kept:
            figs_of_row[i].append((fid, pname))
        svg = os.path.join(folder, "figures", f"{name}-{pname}.svg")
        title = plot.get("title", pname)
        link = (f'<a href="#tbl-{sid}" data-table="tbl-{sid}" data-label="{esc(pname)}" '
                f'data-rows="{" ".join(f"{sid}-r{i}" for i in kept)}">its {len(kept)} rows</a>')
        if os.path.isfile(svg):
            figures += 1
            out.append(f'<figure id="{fid}">{inline_svg(svg, fid + "-")}<figcaption><b>{esc(pname)}</b>: '
                       f"{esc(title)} · {link}</figcaption></figure>")
        else:
            out.append(f'<p id="{fid}" class="note">Figure <b>{esc(pname)}</b> is not drawn '
                       f"(figures/{esc(name)}-{esc(pname)}.svg): <code>inferlab plot {esc(csv_name)}</code> draws it; "
                       f"{link}.</p>")

    # The rows.
    out.append(f'<h3>Rows ({len(rows)})</h3><div class="filter" id="tbl-{sid}-filter"><span>all rows</span> '
               f'<button data-table="tbl-{sid}" disabled>show all</button></div>')
    out.append(f'<div class="scroll"><table id="tbl-{sid}"><thead><tr><th>#</th><th>figures</th>')
    out += [f"<th>{esc(c)}</th>" for c in columns]
    out.append("</tr></thead><tbody>")
    for i, r in enumerate(rows):
        figs = "".join(f'<a href="#{fid}">{esc(p)}</a>' for fid, p in figs_of_row[i])
        cells = []
        for c in columns:
            v = r.get(c, "")
            cls = ("num " if number(v) is not None else "") + (error_class(v) if c in ERROR_COLUMNS else "")
            cells.append(f'<td class="{cls.strip()}">{esc(v)}</td>' if cls.strip() else f"<td>{esc(v)}</td>")
        out.append(f'<tr id="{sid}-r{i}"><td class="num">{i + 1}</td><td class="figs">{figs}</td>{"".join(cells)}</tr>')
    out.append("</tbody></table></div></section>")
    summary.append({"name": name, "rows": len(rows), "figures": figures, "plots": len(plots),
                    "measured_rows": measured, "provenance": bool(prov)})
    return "\n".join(out)


def build(folder):
    if not os.path.isdir(folder):
        fail(f"{folder}: no such folder")
    csvs = sorted(f for f in os.listdir(folder) if f.endswith(".csv") and os.path.isfile(os.path.join(folder, f)))
    whole = [f for f in csvs if ".shard-" not in f]
    if not csvs:
        fail(f"{folder} holds no results CSV: nothing to report")
    if not whole:
        fail(f"{folder} holds only shards (NAME.shard-I-of-N.csv): `inferlab merge {folder}` joins them first")
    summary = []
    sections = [spec_section(folder, f, summary) for f in whole]
    title = os.path.basename(os.path.normpath(os.path.abspath(folder)))
    others = sorted(f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f))
                    and not f.endswith((".csv", ".json")) and f != "report.html")
    page = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>inferlab results: {esc(title)}</title><style>{STYLE}</style></head><body>",
            f"<header><h1>inferlab results: {esc(title)}</h1><p>{len(whole)} result files · "
            f"{sum(s['rows'] for s in summary)} rows · {sum(s['figures'] for s in summary)} figures</p></header>",
            "<nav>" + "".join(f'<a href="#{slug(s["name"])}">{esc(s["name"])}</a>' for s in summary) + "</nav><main>"]
    if len(csvs) > len(whole):
        page.append(f'<p class="note">{len(csvs) - len(whole)} shard file(s) left out: `inferlab merge` joins '
                    "them into their spec's file.</p>")
    if others:
        page.append('<p class="note">Other files in the folder: ' + ", ".join(esc(o) for o in others) + ".</p>")
    page += sections
    page.append(f"</main><script>{SCRIPT}</script></body></html>")
    return "\n".join(page) + "\n", summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True, help="the results folder")
    ap.add_argument("--out", required=True, help="the page to write")
    a = ap.parse_args(argv)
    out_dir = os.path.dirname(os.path.abspath(a.out))
    if not os.path.isdir(out_dir):
        fail(f"--out {a.out}: folder {out_dir} does not exist")
    page, summary = build(a.results)
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=out_dir)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(page)
        os.chmod(tmp, 0o644)  # a page to share: readable as any file written here
        os.replace(tmp, a.out)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    print(json.dumps({"html": os.path.abspath(a.out), "bytes": len(page.encode()), "specs": summary}))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
