"""What the Python tests of the CLI share: running `inferlab` from the project root, and asserting a
clear failure (a non-zero exit and a message naming the problem)."""
import os
import subprocess
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("INFERLAB_CLI", os.path.join(ROOT, "build", "inferlab"))


def take_cli_argument():
    """`--cli PATH` on the test's command line names the binary under test (ctest passes it)."""
    global CLI
    if "--cli" in sys.argv:
        i = sys.argv.index("--cli")
        CLI = os.path.abspath(sys.argv[i + 1])
        del sys.argv[i:i + 2]
    os.environ["INFERLAB"] = CLI  # the example scripts take the CLI from $INFERLAB


def cli(*args, env=None, cwd=ROOT):
    """Runs the CLI; returns the CompletedProcess (text stdout and stderr)."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([CLI, *map(str, args)], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=600)


def start(cmd, env=None):
    """Starts a process in the project root (one shard of a sweep, say); returns the Popen."""
    return subprocess.Popen([str(c) for c in cmd], cwd=ROOT, env=dict(os.environ, **(env or {})),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class CliTestCase(unittest.TestCase):
    def ok(self, *args, **kw):
        r = cli(*args, **kw)
        self.assertEqual(r.returncode, 0, f"inferlab {' '.join(map(str, args))}\n{r.stdout}\n{r.stderr}")
        return r

    def fails(self, needle, *args, **kw):
        """The command exits non-zero (not by a crash) and its error names the problem."""
        r = cli(*args, **kw)
        self.assertNotEqual(r.returncode, 0, f"inferlab {' '.join(map(str, args))} succeeded:\n{r.stdout}")
        self.assertGreater(r.returncode, 0, f"inferlab {' '.join(map(str, args))} crashed: {r.stderr}")
        self.assertIn(needle, r.stderr, f"inferlab {' '.join(map(str, args))}")
        self.assertIn("inferlab: error:", r.stderr)
        return r

    def files(self, folder):
        return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def main():
    take_cli_argument()
    unittest.main(verbosity=2)
