#!/usr/bin/env python3
"""`inferlab compare`: models or GPUs side by side. Each number is the one the `memory` and `model` verbs
give for the same point (one model, two ways of asking); the three table formats hold the same rows; the
figure is drawn; bad input is refused with a clear error.

    test_compare.py --cli build/inferlab
"""
import csv
import io
import json
import os
import re
import shutil
import tempfile
import xml.etree.ElementTree as ET

import clitest

MODELS = ["llama-2-7b", "llama-3-8b", "mistral-7b"]
GPUS = ["h100-sxm-80gb", "a100-sxm-80gb"]


class Compare(clitest.CliTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="inferlab_compare_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def compare(self, *extra):
        r = self.ok("compare", "--model", ",".join(MODELS), "--hardware", ",".join(GPUS), "--batch", 8,
                    "--context", 2048, *extra)
        return r

    def test_every_number_is_the_one_memory_and_model_give(self):
        rows = json.loads(self.compare("--json").stdout)["rows"]
        self.assertEqual([(r["model"], r["hardware"]) for r in rows], [(m, g) for m in MODELS for g in GPUS])
        for r in rows:
            self.assertEqual((r["batch"], r["context"]), (8, 2048))
            mem = json.loads(self.ok("memory", "--model", r["model"], "--hardware", r["hardware"], "--batch", 8,
                                     "--context", 2048, "--json").stdout)["memory"]
            for col in ("weights_bytes", "kv_bytes_per_token", "kv_cache_bytes", "max_batch", "fits", "capacity_bytes"):
                self.assertEqual(r[col], mem[col], (r["model"], r["hardware"], col))
            for phase in ("prefill", "decode"):
                total = json.loads(self.ok("model", "--model", r["model"], "--hardware", r["hardware"], "--phase", phase,
                                           "--batch", 8, "--context", 2048, "--json").stdout)["ops"][-1]
                self.assertEqual(total["op"], "total")
                self.assertEqual(r[f"{phase}_s"], total["predicted_s"], (r["model"], r["hardware"], phase))
                self.assertEqual(r[f"{phase}_tokens_per_s"], total["tokens_per_s"])
                self.assertEqual(r[f"{phase}_bound"], total["bound"])
            # tokens/s is the step's tokens over its time: batch x context for prefill, batch for decode.
            self.assertAlmostEqual(r["decode_tokens_per_s"] * r["decode_s"], 8, places=6)
            self.assertAlmostEqual(r["prefill_tokens_per_s"] * r["prefill_s"], 8 * 2048, places=3)
            # KV per token from the config: K and V of every layer's KV heads, 2 bytes each (fp16/bf16).
            cfg = json.loads(self.ok("list", "--json").stdout)["models"]
            m = next(c for c in cfg if c["name"] == r["model"])
            self.assertEqual(r["kv_bytes_per_token"], 2 * m["layers"] * m["kv_heads"] * m["head_dim"] * 2)
        by = {(r["model"], r["hardware"]): r for r in rows}
        for m in MODELS:  # the H100's bandwidth and tensor rate beat the A100's at every step
            self.assertLess(by[(m, "h100-sxm-80gb")]["decode_s"], by[(m, "a100-sxm-80gb")]["decode_s"])
            self.assertLess(by[(m, "h100-sxm-80gb")]["prefill_s"], by[(m, "a100-sxm-80gb")]["prefill_s"])

    def test_text_markdown_and_csv_hold_the_same_rows(self):
        rows = json.loads(self.compare("--json").stdout)["rows"]
        text = self.compare().stdout.splitlines()
        body = [l for l in text[2:] if l.strip()]
        self.assertEqual(len(body), 1 + len(rows))  # header + a line per entry
        self.assertTrue(body[0].startswith("model"))
        md = [l for l in self.compare("--format", "markdown").stdout.splitlines() if l.startswith("|")]
        self.assertEqual(len(md), 2 + len(rows))
        self.assertEqual(len({l.count("|") for l in md}), 1, "every Markdown line has the same cells")
        self.assertRegex(md[1], r"^\|( :?-+:? \|)+$")
        for line, r in zip(md[2:], rows):
            cells = [c.strip() for c in line.strip("|").split("|")]
            self.assertEqual(cells[:2], [r["model"], r["hardware"]])
            self.assertEqual(cells[4], str(r["max_batch"]))
        parsed = list(csv.DictReader(io.StringIO(self.compare("--format", "csv").stdout)))
        self.assertEqual(len(parsed), len(rows))
        for p, r in zip(parsed, rows):
            for col in ("model", "hardware", "max_batch", "fits"):
                self.assertEqual(p[col], str(r[col]).lower() if isinstance(r[col], bool) else str(r[col]))
            self.assertAlmostEqual(float(p["decode_s"]), r["decode_s"], delta=1e-9 * r["decode_s"])

    def test_the_figure(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("matplotlib not installed")
        base = os.path.join(self.tmp, "cmp")
        out = json.loads(self.compare("--figure", base, "--json").stdout)
        self.assertEqual(sorted(out["figures"]), [base + ".png", base + ".svg"])
        root = ET.parse(base + ".svg").getroot()
        self.assertTrue(root.tag.endswith("svg"))
        with open(base + ".svg") as f:
            svg = f.read()
        # A panel per quantity (matplotlib names each axes and keeps every label as a comment).
        self.assertEqual(len(set(re.findall(r'id="axes_\d+"', svg))), 7)
        for title in ("weights (GB)", "KV cache per token (KiB)", "largest batch that fits", "prefill step (ms)",
                      "decode step (ms)", "decode tokens/s", *MODELS, *GPUS):
            self.assertIn(f"<!-- {title} -->", svg)
        self.assertGreater(os.path.getsize(base + ".png"), 10000)
        self.assertEqual(self.files(self.tmp), ["cmp.png", "cmp.svg"])  # nothing else left behind

    def test_bad_input(self):
        self.fails("two or more models or GPUs", "compare", "--model", "llama-2-7b", "--hardware", "h100-sxm-80gb")
        self.fails("known:", "compare", "--model", "llama-2-7b,llama-9", "--hardware", "h100-sxm-80gb")
        self.fails("unknown hardware 'h900'", "compare", "--model", "llama-2-7b", "--hardware", "h100-sxm-80gb,h900")
        self.fails("'batch' must be at least 1", "compare", "--model", "llama-2-7b,llama-3-8b", "--hardware",
                   "h100-sxm-80gb", "--batch", 0)
        missing = os.path.join(self.tmp, "no", "such", "fig")
        self.fails("does not exist", "compare", "--model", "llama-2-7b,llama-3-8b", "--hardware", "h100-sxm-80gb",
                   "--figure", missing)
        r = clitest.cli("compare", "--model", "llama-2-7b,llama-3-8b", "--hardware", "h100-sxm-80gb", "--format", "html")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--format", r.stderr)
        self.assertIn("--json", self.ok("compare", "--help").stdout)


if __name__ == "__main__":
    clitest.main()
