#!/usr/bin/env python3
"""The Python module `inferlab`: imported from the build tree, its answers are the CLI's for the same points
(model, memory, serve, compare, a spec's rows), as plain Python and as pandas DataFrames; bad input raises
inferlab.Error with the CLI's message; a config's warnings become Python warnings; installed with
`cmake --install --component python` into a fresh prefix it works from anywhere with the data it carries;
the notebook-style example runs.

    test_module.py --cli build/inferlab --build build     (PYTHONPATH=build/python)
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import clitest  # noqa: E402
from clitest import ROOT  # noqa: E402

BUILD = None
if "--build" in sys.argv:
    i = sys.argv.index("--build")
    BUILD = os.path.abspath(sys.argv[i + 1])
    del sys.argv[i:i + 2]
    sys.path.insert(0, os.path.join(BUILD, "python"))
import inferlab  # noqa: E402


def cli_json(*args):
    r = clitest.cli(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def close(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    return a == b


class Module(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="inferlab_python_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def assertRowEqual(self, got, want, what=""):
        for k, v in want.items():
            self.assertIn(k, got, what)
            self.assertTrue(close(got[k], v), f"{what} {k}: {got[k]!r} != {v!r}")

    def test_it_comes_from_the_build_tree_and_reads_the_source_tree(self):
        self.assertTrue(inferlab.__file__.startswith(os.path.join(BUILD, "python")), inferlab.__file__)
        self.assertEqual(os.path.realpath(inferlab.root()), os.path.realpath(ROOT))
        listing = cli_json("list")
        self.assertEqual(inferlab.models(), [m["name"] for m in listing["models"]])
        self.assertEqual(sorted(inferlab.specs()), sorted(s["name"] for s in listing["specs"]))
        self.assertEqual([s["name"] for s in inferlab.scenarios()], [s["name"] for s in listing["scenarios"]])
        self.assertTrue(inferlab.__doc__ and inferlab.step.__doc__ and inferlab.Rows.frame.__doc__)

    def test_models_and_hardware(self):
        listing = {m["name"]: m for m in cli_json("list")["models"]}
        for name in ("llama-3-8b", "deepseek-v2-lite", "gemma-2-9b"):
            self.assertEqual(inferlab.model(name), listing[name])
        # A Hugging Face config by path (a folder holding config.json).
        folder = os.path.join(self.tmp, "my-model")
        os.makedirs(folder)
        shutil.copy(os.path.join(ROOT, "data", "models", "mistral-7b.json"), os.path.join(folder, "config.json"))
        self.assertEqual(inferlab.model(folder)["params"], listing["mistral-7b"]["params"])
        h = inferlab.hardware("h100-sxm-80gb")
        want = cli_json("model", "--model", "llama-2-7b", "--hardware", "h100-sxm-80gb", "--context", 8)["hardware"]
        self.assertEqual(h, want)

    def test_ops_and_step_are_the_model_verbs(self):
        for phase, batch, extra in (("decode", 8, {}), ("prefill", 1, {"weight_format": "int4"}),
                                    ("decode", 16, {"tp": 2, "kv_dtype": "fp8"})):
            rows = inferlab.ops("llama-3-8b", "h100-sxm-80gb", context=2048, phase=phase, batch=batch, **extra)
            args = ["model", "--model", "llama-3-8b", "--hardware", "h100-sxm-80gb", "--context", 2048, "--phase", phase,
                    "--batch", batch]
            for k, v in extra.items():
                args += ["--" + k.replace("_", "-"), v]
            want = cli_json(*args)["ops"]
            self.assertEqual([r["op"] for r in rows], [w["op"] for w in want])
            for r, w in zip(rows, want):
                self.assertRowEqual(r, w, f"{phase} {r['op']}")
            self.assertEqual(set(rows[0]), set(want[0]))
            self.assertEqual(list(rows[0])[:3], ["op", "op_class", "variant"])  # in the rows' order, as the CSVs
            step = inferlab.step("llama-3-8b", "h100-sxm-80gb", 2048, phase, batch, **extra)
            self.assertEqual(step["op"], "total")
            self.assertRowEqual(step, want[-1])

    def test_memory_serve_and_compare_are_the_verbs(self):
        mem = inferlab.memory("llama-2-70b", 4096, batch=4, hardware="h100-sxm-80gb", kv_dtype="fp8")
        want = cli_json("memory", "--model", "llama-2-70b", "--context", 4096, "--batch", 4, "--hardware",
                        "h100-sxm-80gb", "--kv-dtype", "fp8")["memory"]
        self.assertRowEqual(mem, want)
        self.assertEqual(inferlab.memory("llama-2-7b", 4096)["fits"], None)  # no hardware: nothing to fit
        summary = inferlab.serve("llama-2-7b", "h100-sxm-80gb", requests=300, rate=6, seed=3, scheduler="chunked")
        want = cli_json("serve", "--model", "llama-2-7b", "--hardware", "h100-sxm-80gb", "--requests", 300, "--rate", 6,
                        "--seed", 3, "--scheduler", "chunked")["summary"]
        self.assertRowEqual(summary, want)
        timeline = inferlab.serve("llama-2-7b", "h100-sxm-80gb", timeline_every_s=1, requests=100, rate=4)
        self.assertEqual(timeline[0]["row"], "summary")
        self.assertGreater(len(timeline.where(row="timeline")), 3)
        rows = inferlab.compare(["llama-2-7b", "mistral-7b"], ["h100-sxm-80gb", "l4"], batch=4, context=1024)
        want = cli_json("compare", "--model", "llama-2-7b,mistral-7b", "--hardware", "h100-sxm-80gb,l4", "--batch", 4,
                        "--context", 1024)["rows"]
        self.assertEqual(len(rows), 4)
        for r, w in zip(rows, want):
            self.assertRowEqual(r, w)

    def test_a_specs_rows_in_memory_and_run_to_files(self):
        out = os.path.join(self.tmp, "cli")
        clitest.cli("run", "experiments/quickstart_kv_memory.yaml", "--out", out, "--no-plots")
        with open(os.path.join(out, "quickstart_kv_memory.csv"), newline="") as f:
            csv_rows = list(csv.DictReader(f))
        spec = inferlab.spec_rows("quickstart_kv_memory")
        self.assertEqual(len(spec["rows"]), len(csv_rows))
        self.assertEqual(spec["columns"], list(csv_rows[0]))
        for got, want in zip(spec["rows"], csv_rows):
            for k, v in want.items():
                g = got[k]
                text = "" if g is None else ("true" if g is True else "false" if g is False else str(g))
                if isinstance(g, float):
                    self.assertTrue(close(g, float(v)), k)
                else:
                    self.assertEqual(text, v, k)
        self.assertEqual(os.listdir(self.tmp), ["cli"])  # spec_rows wrote nothing
        run = inferlab.run(os.path.join(ROOT, "experiments", "quickstart_kv_memory.yaml"), os.path.join(self.tmp, "py"))
        self.assertTrue(run["complete"])
        self.assertEqual(run["rows"], spec["rows"])
        with open(run["csv"]) as a, open(os.path.join(out, "quickstart_kv_memory.csv")) as b:
            self.assertEqual(a.read(), b.read())
        # A shard of it, in memory and on disk.
        part = inferlab.spec_rows("quickstart_kv_memory", shard="1/3")
        self.assertEqual(part["rows"], [r for r in spec["rows"] if r["point"] in
                                        list(dict.fromkeys(r["point"] for r in spec["rows"]))[1::3]])
        shard = inferlab.run("quickstart_kv_memory", os.path.join(self.tmp, "shard"), shard="1/3")
        self.assertTrue(shard["csv"].endswith("quickstart_kv_memory.shard-1-of-3.csv"))

    def test_data_frames(self):
        rows = inferlab.ops("llama-2-7b", "a100-sxm-80gb", context=1024)
        try:
            import pandas  # noqa: F401
            df = rows.frame()
            self.assertEqual(list(df.columns), list(dict.fromkeys(c for r in rows for c in r)))
            self.assertEqual(len(df), len(rows))
            self.assertEqual(df.loc[df.op == "total", "predicted_s"].item(), rows[-1]["predicted_s"])
            self.assertEqual(df["flops"].dtype.kind, "f")
        except ImportError:
            pass  # without pandas: the message below is what the user reads
        saved = sys.modules.get("pandas")
        sys.modules["pandas"] = None  # as if pandas were not installed
        try:
            with self.assertRaisesRegex(ImportError, "python3-pandas"):
                rows.frame()
        finally:
            if saved is None:
                del sys.modules["pandas"]
            else:
                sys.modules["pandas"] = saved

    def test_bad_input_and_warnings(self):
        self.assertTrue(issubclass(inferlab.Error, ValueError))
        with self.assertRaisesRegex(inferlab.Error, "unknown model 'llama-9'"):
            inferlab.model("llama-9")
        with self.assertRaisesRegex(inferlab.Error, "'batch' must be at least 1"):
            inferlab.step("llama-2-7b", "h100-sxm-80gb", 1024, batch=0)
        with self.assertRaisesRegex(inferlab.Error, "unknown parameter 'bach'"):
            inferlab.ops("llama-2-7b", "h100-sxm-80gb", 1024, bach=2)
        with self.assertRaisesRegex(inferlab.Error, "one value"):
            inferlab.ops("llama-2-7b", "h100-sxm-80gb", 1024, batch=[1, 2])
        with self.assertRaisesRegex(inferlab.Error, "unknown scenario"):
            inferlab.evaluate("nope")
        with self.assertRaisesRegex(inferlab.Error, "out of range"):
            inferlab.spec_rows("quickstart_kv_memory", shard="3/2")
        with self.assertRaisesRegex(inferlab.Error, "not found"):
            inferlab.spec_rows(os.path.join(self.tmp, "none.yaml"))
        # A config read with an assumption: a Python warning naming it.
        with open(os.path.join(ROOT, "data", "models", "llama-2-7b.json")) as f:
            cfg = json.load(f)
        cfg["model_type"] = "mystery"
        path = os.path.join(self.tmp, "config.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            inferlab.step(path, "h100-sxm-80gb", 128)
        self.assertTrue(any("mystery" in str(w.message) for w in caught), [str(w.message) for w in caught])

    def test_installed_into_a_fresh_prefix(self):
        prefix = os.path.join(self.tmp, "env")
        r = subprocess.run(["cmake", "--install", BUILD, "--component", "python", "--prefix", prefix],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        site = os.path.join(prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
        code = ("import inferlab, json; print(json.dumps([inferlab.__file__, inferlab.root(), "
                "inferlab.step('llama-2-7b', 'h100-sxm-80gb', 4096)['predicted_s'], "
                "len(inferlab.spec_rows('quickstart_decode_batch')['rows'])]))")
        env = {k: v for k, v in os.environ.items() if k not in ("INFERLAB_ROOT", "PYTHONPATH")}
        env["PYTHONPATH"] = site
        r = subprocess.run([sys.executable, "-c", code], cwd=self.tmp, env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        where, root, predicted, rows = json.loads(r.stdout)
        self.assertTrue(where.startswith(site), where)
        self.assertEqual(root, os.path.join(site, "inferlab", "share"))  # its own data, not the source tree's
        self.assertEqual(predicted, inferlab.step("llama-2-7b", "h100-sxm-80gb", 4096)["predicted_s"])
        self.assertEqual(rows, len(inferlab.spec_rows("quickstart_decode_batch")["rows"]))

    def test_the_notebook_example(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("matplotlib not installed")
        out = os.path.join(self.tmp, "example")
        env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
        r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python", "quickstart_decode_batch.py"), out],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("the same predictions", r.stdout)
        for ext in ("png", "svg"):
            self.assertGreater(os.path.getsize(os.path.join(out, f"quickstart_decode_batch.{ext}")), 10000)


if __name__ == "__main__":
    clitest.main()
