#!/usr/bin/env python3
"""`inferlab run SPEC --shard I/N` and `inferlab merge`: a sweep split over several local processes, started
the way a cluster's launcher starts them (examples/cluster/: a Slurm job array, mpirun), joins into the
very file one run of the whole spec writes; bad shard specs and shards that disagree are refused with a
clear error and nothing written.

    test_shards.py --cli build/inferlab
"""
import json
import os
import re
import shutil
import tempfile

import clitest
from clitest import ROOT, cli, start

SPEC = os.path.join(ROOT, "experiments", "quickstart_decode_batch.yaml")
NAME = "quickstart_decode_batch"
SCRIPTS = os.path.join(ROOT, "examples", "cluster")


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401  (the CLI draws with the python3 it was configured with: this one under ctest)
        return True
    except ImportError:
        return False


class Shards(clitest.CliTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="inferlab_shards_")
        self.whole = os.path.join(self.tmp, "whole")
        self.ok("run", SPEC, "--out", self.whole, "--no-plots")
        with open(os.path.join(self.whole, NAME + ".csv")) as f:
            self.expected = f.read()

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_shards(self, out, n, launch):
        """Starts n shards at once, each as `launch(i)` gives (command, env); waits for all."""
        procs = [start(*launch(i)) for i in range(n)]
        for p in procs:
            stdout, stderr = p.communicate(timeout=600)
            self.assertEqual(p.returncode, 0, stderr)
        return out

    def cli_shards(self, n, out=None, spec=SPEC):
        out = out or os.path.join(self.tmp, f"cli{n}")
        return self.run_shards(out, n, lambda i: ([clitest.CLI, "run", spec, "--out", out, "--shard", f"{i}/{n}"], {}))

    def merged_csv(self, out):
        with open(os.path.join(out, NAME + ".csv")) as f:
            return f.read()

    def test_shards_merge_into_the_whole_runs_file(self):
        for n in (1, 3, 7, 25):  # 25 shards of 20 points: some shards hold no point
            out = self.cli_shards(n)
            names = self.files(out)
            if n > 1:
                self.assertEqual(len([f for f in names if f.endswith(".csv")]), n, names)
                self.assertNotIn(NAME + ".csv", names)  # a shard writes its own file only
                self.assertNotIn("figures", names)       # figures wait for the merge
            plots = () if have_matplotlib() else ("--no-plots",)
            r = self.ok("merge", out, "--json", *plots) if n > 1 else None
            self.assertEqual(self.merged_csv(out), self.expected, f"{n} shards")
            if r is None:
                continue
            summary = json.loads(r.stdout)
            self.assertEqual([s["spec"] for s in summary], [NAME])
            self.assertEqual(summary[0]["points"], 20)
            self.assertEqual(len(summary[0]["shards"]), n)
            if plots == ():
                self.assertTrue(summary[0]["figures"], "merge draws the spec's figures")
                self.assertTrue(all(os.path.getsize(f) > 0 for f in summary[0]["figures"]))
            with open(os.path.join(out, NAME + ".json")) as f:
                prov = json.load(f)
            with open(os.path.join(self.whole, NAME + ".json")) as f:
                whole = json.load(f)
            self.assertEqual(prov["merged"]["shards"], n)
            self.assertNotIn("shard", prov)
            for key in ("spec_hash", "commit", "points_total", "ceilings", "plots", "mode", "complete"):
                self.assertEqual(prov[key], whole[key], key)

    def test_the_slurm_array_script_and_the_mpirun_line(self):
        # A Slurm job array of 4 tasks numbered from 1, as sbatch would start them.
        out = os.path.join(self.tmp, "slurm")
        self.run_shards(out, 4, lambda i: (
            [os.path.join(SCRIPTS, "sweep.sbatch"), SPEC, out],
            {"SLURM_ARRAY_TASK_ID": str(i + 1), "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "4",
             "SLURM_SUBMIT_DIR": ROOT}))
        r = start([os.path.join(SCRIPTS, "merge.sbatch"), out, "--no-plots"], {"SLURM_SUBMIT_DIR": ROOT})
        _, err = r.communicate(timeout=600)
        self.assertEqual(r.returncode, 0, err)
        self.assertEqual(self.merged_csv(out), self.expected)
        # The README's mpirun line: every rank runs run-shard.sh with its rank in the environment.
        with open(os.path.join(ROOT, "README.md")) as f:
            readme = f.read()
        m = re.search(r"mpirun -n (\d+) (examples/cluster/run-shard\.sh) (\S+) (\S+)", readme)
        self.assertIsNotNone(m, "the README shows an mpirun launch of examples/cluster/run-shard.sh")
        ranks = int(m.group(1))
        out = os.path.join(self.tmp, "mpi")
        self.run_shards(out, ranks, lambda i: (
            [os.path.join(ROOT, m.group(2)), SPEC, out],
            {"OMPI_COMM_WORLD_RANK": str(i), "OMPI_COMM_WORLD_SIZE": str(ranks)}))
        self.ok("merge", out, "--no-plots")
        self.assertEqual(self.merged_csv(out), self.expected)
        # Without a shard in the environment the script says so.
        p = start([os.path.join(SCRIPTS, "run-shard.sh"), SPEC, out])
        _, err = p.communicate(timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no shard in the environment", err)

    def test_bad_shard_specs_are_refused_before_anything_is_written(self):
        out = os.path.join(self.tmp, "bad")
        for text, needle in (("3/2", "shard index 3 is out of range: the 2 shards are numbered 0 to 1"),
                             ("2/2", "out of range"),
                             ("0/0", "N, the number of shards, must be at least 1"),
                             ("-1/4", "out of range"),
                             ("1", "expected I/N"),
                             ("1/2/3", "expected I/N"),
                             ("a/2", "must be whole numbers")):
            self.fails(needle, "run", SPEC, "--out", out, "--shard", text)
            self.assertEqual(self.files(out), [], text)

    def test_shards_that_disagree_are_not_merged(self):
        out = self.cli_shards(3, os.path.join(self.tmp, "disagree"))
        shard = lambda i, ext: os.path.join(out, f"{NAME}.shard-{i}-of-3.{ext}")

        def nothing_merged():
            self.assertFalse(os.path.exists(os.path.join(out, NAME + ".csv")))
            self.assertFalse(os.path.exists(os.path.join(out, NAME + ".json")))

        def edit(i, **fields):
            with open(shard(i, "json")) as f:
                prov = json.load(f)
            before = dict(prov)
            prov.update(fields)
            with open(shard(i, "json"), "w") as f:
                json.dump(prov, f)
            return before

        # Another commit.
        before = edit(1, commit="0123456789abcdef0123456789abcdef01234567")
        self.fails("different code", "merge", out)
        nothing_merged()
        edit(1, **before)
        # Other ceilings.
        edit(2, ceilings=["measured h100-sxm-80gb.measured.json (2026-01-01)"])
        self.fails("different ceilings", "merge", out)
        nothing_merged()
        edit(2, ceilings=before["ceilings"])
        # An interrupted shard.
        edit(0, complete=False)
        self.fails("shard 0", "merge", out)
        edit(0, complete=True)
        # A shard of another version of the spec (its text differs).
        other = os.path.join(self.tmp, NAME + ".yaml")
        with open(SPEC) as f:
            text = f.read()
        with open(other, "w") as f:
            f.write(text.replace("description: >-", "description: >-\n  Another version.", 1))
        self.ok("run", other, "--out", out, "--shard", "1/3")
        self.fails("different specs", "merge", out)
        nothing_merged()
        # A missing shard, named as such; a shard of another split.
        self.ok("run", SPEC, "--out", out, "--shard", "1/3")
        os.remove(shard(2, "csv"))
        self.fails("not found", "merge", out)
        os.remove(shard(2, "json"))
        self.fails("shard 2 of 3 missing", "merge", out)
        self.ok("run", SPEC, "--out", out, "--shard", "2/4")
        self.fails("different splits", "merge", out)
        nothing_merged()
        # A shard's rows cut short.
        os.remove(os.path.join(out, f"{NAME}.shard-2-of-4.csv"))
        os.remove(os.path.join(out, f"{NAME}.shard-2-of-4.json"))
        self.ok("run", SPEC, "--out", out, "--shard", "2/3")
        with open(shard(2, "csv")) as f:
            lines = f.readlines()
        with open(shard(2, "csv"), "w") as f:
            f.writelines(lines[:-3])
        self.fails("rows where its provenance lists", "merge", out)
        nothing_merged()
        # The three agreeing shards again: merged.
        self.ok("run", SPEC, "--out", out, "--shard", "2/3")
        self.ok("merge", out, "--no-plots")
        self.assertEqual(self.merged_csv(out), self.expected)

    def test_help_and_json(self):
        self.assertIn("--json", self.ok("merge", "--help").stdout)
        self.assertIn("--shard", self.ok("run", "--help").stdout)

    def test_folders_without_results_or_shards(self):
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty)
        self.fails("holds no results CSV", "merge", empty)
        self.fails("holds no shard results", "merge", self.whole)  # results of a whole run: nothing to merge
        self.fails("not found", "merge", os.path.join(self.tmp, "nowhere"))
        self.fails("is not a shard's results", "merge", os.path.join(self.whole, NAME + ".csv"))
        self.assertEqual(self.files(empty), [])


if __name__ == "__main__":
    clitest.main()
