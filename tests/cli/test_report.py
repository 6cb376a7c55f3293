#!/usr/bin/env python3
"""`inferlab report RESULTS_DIR`: one self-contained HTML page of a results folder.

    test_report.py --cli build/inferlab             the page's structure (Python's html.parser): a table per
                                                     CSV holding its rows, the figures inline, every link
                                                     resolving, figures and rows pointing at each other, model
                                                     errors marked by size, nothing fetched; bad input
    test_report.py --cli build/inferlab --browser   the page in headless Chromium (Debian's chromium): tables
                                                     and figures render, the figure-to-rows filter works, no
                                                     console errors. Exit 77 (skipped) without chromium.

The results: a copy of the committed H100 attention results (measured: model errors) and a fresh run of a
quickstart spec (predicted), in a temporary folder.
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from html.parser import HTMLParser

import clitest
from clitest import ROOT

sys.path.insert(0, os.path.join(ROOT, "plots"))
from plot import select  # noqa: E402  (the rows a figure draws, as plot.py selects them)

H100 = os.path.join(ROOT, "data", "results", "nvidia-h100-80gb-hbm3")


class Page(HTMLParser):
    """Every element's tag, attributes and place, the text, and the tables' rows."""

    def __init__(self):
        super().__init__()
        self.ids, self.hrefs, self.stack, self.elements = [], [], [], []
        self.tables, self.text = {}, []
        self.table = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.elements.append((tag, a, list(self.stack)))
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if tag == "table":
            self.table = a.get("id")
            self.tables[self.table] = {"head": [], "rows": []}
        if tag == "tr" and self.table and a.get("id"):
            self.tables[self.table]["rows"].append({"id": a["id"], "cells": [], "classes": [], "links": []})
        if tag == "td" and self.table and self.tables[self.table]["rows"]:
            row = self.tables[self.table]["rows"][-1]
            row["cells"].append("")
            row["classes"].append(a.get("class", ""))
        if tag == "a" and self.table and self.tables[self.table]["rows"] and "href" in a:
            self.tables[self.table]["rows"][-1]["links"].append(a["href"][1:])
        if tag not in ("br", "meta", "path", "use", "stop", "rect", "circle", "line", "polyline", "polygon",
                       "ellipse", "image"):
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        a = dict(attrs)
        self.elements.append((tag, a, list(self.stack)))
        if "id" in a:
            self.ids.append(a["id"])

    def handle_endtag(self, tag):
        if tag in self.stack:
            while self.stack and self.stack.pop() != tag:
                pass
        if tag == "table":
            self.table = None

    def handle_data(self, data):
        self.text.append(data)
        if self.table and self.stack and self.stack[-1] == "th":
            self.tables[self.table]["head"].append(data)
        elif self.table and self.stack and self.stack[-1] == "td" and self.tables[self.table]["rows"]:
            self.tables[self.table]["rows"][-1]["cells"][-1] += data


def make_results(tmp):
    """A results folder: the committed H100 attention results (measured) and a quickstart run (predicted)."""
    res = os.path.join(tmp, "results")
    os.makedirs(os.path.join(res, "figures"))
    for f in ("attention_prefill.csv", "attention_prefill.json"):
        shutil.copy(os.path.join(H100, f), res)
    for f in os.listdir(os.path.join(H100, "figures")):
        if f.startswith("attention_prefill-") and f.endswith(".svg"):
            shutil.copy(os.path.join(H100, "figures", f), os.path.join(res, "figures"))
    try:
        import matplotlib  # noqa: F401
        plots = ()
    except ImportError:
        plots = ("--no-plots",)
    r = clitest.cli("run", "experiments/quickstart_decode_batch.yaml", "--out", res, *plots)
    assert r.returncode == 0, r.stderr
    return res


def read(path):
    with open(path, newline="") as f:
        return f.read()


class Report(clitest.CliTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="inferlab_report_")
        cls.results = make_results(cls.tmp)
        r = clitest.cli("report", cls.results, "--json")
        assert r.returncode == 0, r.stderr
        cls.summary = json.loads(r.stdout)
        cls.html = read(os.path.join(cls.results, "report.html"))
        cls.page = Page()
        cls.page.feed(cls.html)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def specs(self):
        for name in ("attention_prefill", "quickstart_decode_batch"):
            with open(os.path.join(self.results, name + ".csv"), newline="") as f:
                rows = list(csv.DictReader(f))
            with open(os.path.join(self.results, name + ".json")) as f:
                prov = json.load(f)
            yield name, rows, prov

    def test_the_page_is_whole_and_fetches_nothing(self):
        self.assertTrue(self.html.startswith("<!DOCTYPE html>"))
        self.assertEqual(self.summary["html"], os.path.join(self.results, "report.html"))
        self.assertEqual(self.summary["bytes"], len(self.html.encode()))
        dup = {i for i in self.page.ids if self.page.ids.count(i) > 1}
        self.assertEqual(dup, set(), "ids are unique, the figures' own included")
        ids = set(self.page.ids)
        for h in self.page.hrefs:
            self.assertTrue(h.startswith("#"), f"a link out of the page: {h}")
            self.assertIn(h[1:], ids, f"link {h} points nowhere")
        for tag, a, _ in self.page.elements:
            self.assertNotIn(tag, ("link", "img", "iframe"), "nothing loaded from elsewhere")
            if tag == "script":
                self.assertNotIn("src", a)
            for k in ("src", "href", "xlink:href"):
                self.assertFalse(str(a.get(k, "")).startswith(("http:", "https:", "//", "file:")), (tag, a))
        self.assertEqual(self.page.stack, [], "every element is closed")
        self.assertEqual(os.listdir(self.results).count("report.html"), 1)
        self.assertFalse([f for f in os.listdir(self.results) if f.startswith(".report-")], "no temporary left")

    def test_every_csv_has_its_rows_provenance_and_figures(self):
        text = "".join(self.page.text)
        for name, rows, prov in self.specs():
            table = self.page.tables[f"tbl-{name}"]
            self.assertEqual(table["head"], ["#", "figures"] + list(rows[0]), name)
            self.assertEqual(len(table["rows"]), len(rows), name)
            for i in (0, len(rows) // 2, len(rows) - 1):
                self.assertEqual(table["rows"][i]["cells"][2:], list(rows[i].values()), (name, i))
            self.assertIn(prov["commit"], text)
            self.assertIn(prov["description"], text)
            figures = [e for e in self.page.elements if e[0] == "figure" and e[1].get("id", "").startswith(f"fig-{name}-")]
            drawn = [p for p in prov["plots"]
                     if os.path.isfile(os.path.join(self.results, "figures", f"{name}-{p['name']}.svg"))]
            self.assertEqual(len(figures), len(drawn), name)
            if name == "attention_prefill":
                self.assertEqual(len(drawn), len(prov["plots"]))
            for fig in figures:
                inside = [e for e in self.page.elements if e[0] == "svg" and "figure" in e[2]]
                self.assertTrue(inside)
            summary = next(s for s in self.summary["specs"] if s["name"] == name)
            self.assertEqual((summary["rows"], summary["figures"]), (len(rows), len(drawn)))

    def test_figures_and_rows_point_at_each_other(self):
        links = {e[1]["data-label"]: e[1] for e in self.page.elements if e[0] == "a" and "data-rows" in e[1]}
        for name, rows, prov in self.specs():
            table = self.page.tables[f"tbl-{name}"]
            for plot in prov["plots"]:
                keep = {id(r) for r in select(rows, plot)}
                want = [f"{name}-r{i}" for i, r in enumerate(rows) if id(r) in keep]
                link = next(a for a in (e[1] for e in self.page.elements if e[0] == "a" and "data-rows" in e[1])
                            if a["data-table"] == f"tbl-{name}" and a["data-label"] == plot["name"])
                self.assertEqual(link["data-rows"].split(), want, (name, plot["name"]))
                self.assertLess(0, len(want))
                fid = f"fig-{name}-{plot['name']}"
                marked = [row["id"] for row in table["rows"] if fid in row["links"]]
                self.assertEqual(marked, want, "each row names the figures that draw it")
        self.assertTrue(links)

    def test_model_errors_are_marked_by_size(self):
        name, rows, _ = next(self.specs())
        self.assertEqual(name, "attention_prefill")
        table = self.page.tables[f"tbl-{name}"]
        col = 2 + list(rows[0]).index("model_error")
        marks = {"err-high": 0, "err-mid": 0}
        for row, r in zip(table["rows"], rows):
            e = abs(float(r["model_error"]))
            want = "err-high" if e > 0.25 else "err-mid" if e > 0.10 else ""
            got = [c for c in row["classes"][col].split() if c.startswith("err-")]
            self.assertEqual(got, [want] if want else [], (row["id"], e))
            if want:
                marks[want] += 1
        self.assertGreater(marks["err-mid"] + marks["err-high"], 0, "the H100 results have errors beyond 10%")
        median = sorted(abs(float(r["model_error"])) for r in rows)[len(rows) // 2]
        self.assertIn("median", "".join(self.page.text))
        self.assertRegex("".join(self.page.text), r"over %d measured rows: median" % len(rows))
        self.assertLess(abs(median), 1)

    def test_help(self):
        self.assertIn("--json", self.ok("report", "--help").stdout)

    def test_bad_input_writes_nothing(self):
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty, exist_ok=True)
        self.fails("holds no results CSV", "report", empty)
        self.assertEqual(self.files(empty), [])
        self.fails("not found", "report", os.path.join(self.tmp, "nowhere"))
        self.fails("does not exist", "report", self.results, "--out", os.path.join(self.tmp, "no", "page.html"))
        shards = os.path.join(self.tmp, "shards")
        self.ok("run", "experiments/quickstart_decode_batch.yaml", "--out", shards, "--shard", "0/2")
        self.fails("inferlab merge", "report", shards)
        self.assertFalse(os.path.exists(os.path.join(shards, "report.html")))
        broken = os.path.join(self.tmp, "broken")
        os.makedirs(broken, exist_ok=True)
        shutil.copy(os.path.join(H100, "attention_prefill.csv"), broken)
        with open(os.path.join(broken, "attention_prefill.json"), "w") as f:
            f.write("{ not json")
        self.fails("malformed JSON", "report", broken)
        self.assertEqual(self.files(broken), ["attention_prefill.csv", "attention_prefill.json"])


CHECK = """<script>
window.__errors = [];
window.addEventListener('error', function (e) { window.__errors.push('error: ' + e.message); });
(function () { var err = console.error; console.error = function () {
  window.__errors.push('console.error: ' + Array.prototype.join.call(arguments, ' ')); err.apply(console, arguments); }; })();
</script>"""

RUN = """<script>
(function () {
  var out = {tables: [], figures: [], filter: null, errors: window.__errors};
  document.querySelectorAll('table[id^="tbl-"]').forEach(function (t) {
    var shown = Array.prototype.filter.call(t.querySelectorAll('tbody tr'), function (tr) {
      return tr.getBoundingClientRect().height > 0; });
    out.tables.push({id: t.id, rows: t.querySelectorAll('tbody tr').length, shown: shown.length,
                     width: t.getBoundingClientRect().width});
  });
  document.querySelectorAll('figure').forEach(function (f) {
    var s = f.querySelector('svg'), r = s ? s.getBoundingClientRect() : {width: 0, height: 0};
    var drawn = s ? s.querySelectorAll('path, use, text').length : 0;
    out.figures.push({id: f.id, width: r.width, height: r.height, drawn: drawn});
  });
  var a = document.querySelector('a[data-rows]');
  if (a) {
    a.click();
    var t = document.getElementById(a.dataset.table);
    var visible = Array.prototype.filter.call(t.querySelectorAll('tbody tr'), function (tr) {
      return tr.getBoundingClientRect().height > 0; }).map(function (tr) { return tr.id; });
    document.querySelector('#' + a.dataset.table + '-filter button').click();
    var after = Array.prototype.filter.call(t.querySelectorAll('tbody tr'), function (tr) {
      return tr.getBoundingClientRect().height > 0; }).length;
    out.filter = {want: a.dataset.rows.split(' '), visible: visible, after: after};
  }
  var pre = document.createElement('pre');
  pre.id = 'inferlab-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def browser_main():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("chromium not installed (Debian: chromium): the page is not loaded in a browser: skipped")
        return 77
    clitest.take_cli_argument()
    tmp = tempfile.mkdtemp(prefix="inferlab_report_browser_")
    try:
        results = make_results(tmp)
        r = clitest.cli("report", results)
        assert r.returncode == 0, r.stderr
        page = read(os.path.join(results, "report.html"))
        checked = os.path.join(results, "checked.html")
        with open(checked, "w") as f:
            f.write(page.replace("<head>", "<head>" + CHECK, 1).replace("</body>", RUN + "</body>", 1))
        cmd = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--enable-logging=stderr",
               "--v=0", "--window-size=1400,1000", f"--user-data-dir={os.path.join(tmp, 'profile')}",
               "--virtual-time-budget=10000", "--dump-dom", "file://" + checked]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        m = re.search(r'<pre id="inferlab-check">(.*?)</pre>', p.stdout, re.S)
        failures = []
        if not m:
            print(p.stderr[-3000:])
            print("the page's check did not run (chromium printed no check)")
            return 1
        import html as html_module
        out = json.loads(html_module.unescape(m.group(1)))
        console = [l for l in p.stderr.splitlines() if "CONSOLE" in l and ("ERROR" in l or "Uncaught" in l)]
        failures += [f"console: {l}" for l in console] + [f"page: {e}" for e in out["errors"]]
        with open(os.path.join(results, "attention_prefill.csv")) as f:
            prefill_rows = sum(1 for _ in f) - 1
        tables = {t["id"]: t for t in out["tables"]}
        if set(tables) != {"tbl-attention_prefill", "tbl-quickstart_decode_batch"}:
            failures.append(f"tables: {sorted(tables)}")
        for t in out["tables"]:
            if t["rows"] == 0 or t["shown"] != t["rows"] or t["width"] < 200:
                failures.append(f"table {t['id']} does not render all its rows: {t}")
        if tables.get("tbl-attention_prefill", {}).get("rows") != prefill_rows:
            failures.append("attention_prefill's table does not hold the CSV's rows")
        if len(out["figures"]) < 5:
            failures.append(f"{len(out['figures'])} figures rendered, the H100 results alone have 5")
        for fig in out["figures"]:
            if fig["width"] < 200 or fig["height"] < 100 or fig["drawn"] < 20:
                failures.append(f"figure {fig['id']} does not render: {fig}")
        f = out["filter"]
        if not f or f["visible"] != f["want"] or f["after"] == len(f["want"]):
            failures.append("the figure's rows link does not filter its table to its rows: " +
                            (f"{len(f['want'])} rows wanted, {len(f['visible'])} shown, {f['after']} after 'show all'"
                             if f else "no link"))
        for msg in failures:
            print("FAIL:", msg)
        print(f"chromium: {len(out['tables'])} tables, {len(out['figures'])} figures rendered, "
              f"filter {len(f['visible']) if f else 0} rows; {len(failures)} failed")
        return 1 if failures else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if "--browser" in sys.argv:
        sys.argv.remove("--browser")
        sys.exit(browser_main())
    clitest.main()
