#!/usr/bin/env python3
"""Per-pipe instruction counts of a kernel's hot loop, read off its SASS.

The model (sim/include/inferlab/sim/kernels.h) charges a kernel's loop with the instructions it
issues per unit of work, by the pipe that executes them; this script is where those counts come
from. It disassembles an object file with `cuobjdump -sass`, finds in every function the innermost
loop (a backward branch) holding the most instructions of the class that marks the hot loop
(tensor-core instructions, else MUFU, else everything), and counts its instructions per pipe:

    tensor   HMMA / HGMMA (mma.sync, wgmma), IMMA, HMMA.SP
    mufu     MUFU.* (ex2, rcp, rsqrt, ...): 16 lanes per SM per clock on sm_80/sm_90
    fp32     FFMA, FADD, FMUL, and the packed fp16 HFMA2, HADD2, HMUL2 (FMA pipe: 128 lanes per SM per clock)
    alu      integer and logic, compares, min/max, selects, moves: LOP3, IADD3, SHF, PRMT, ISETP,
             FSETP, FMNMX, FSEL, SEL, MOV, IMAD (64 lanes per SM per clock)
    cvt      conversions: F2F, F2FP (pack to 16-bit), I2F, F2I, I2FP, FRND (16 lanes per SM per clock)
    memory   LDG, STG, LDS, STS, LDSM, LDGSTS, SHFL, ATOM, RED
    uniform  the uniform datapath: U* (one per warp, they take an issue slot)
    control  BRA, BAR, SYNCS, WARPGROUP, DEPBAR, NOP, ...

A region the loop jumps over with a forward conditional branch is left out when it holds neither a
tensor-core nor a memory instruction (the masking of a partial tile: not the steady state; a
guarded refill load is the steady state and stays in); the loop's exits are counted as the
fall-through path. Counts are per thread per loop iteration (one warp instruction
each); divide by the work one iteration does (printed as the loop's tensor instructions).

Usage:  scripts/sass-counts.py OBJECT [FUNCTION-REGEX] [--cuobjdump PATH] [--json]
The cuobjdump of the CUDA toolkit (or the PyPI package nvidia-cuda-cuobjdump with
nvidia-cuda-nvdisasm beside it) reads objects built for sm_90/sm_90a on a machine without a GPU.
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys

PIPES = ("tensor", "mufu", "fp32", "alu", "cvt", "memory", "uniform", "control")

_TENSOR = ("HMMA", "HGMMA", "IMMA", "QGMMA", "IGMMA", "DMMA")
_FP32 = ("FFMA", "FADD", "FMUL", "FFMA32I", "FADD32I", "FMUL32I", "HFMA2", "HADD2", "HMUL2")
_CVT = ("F2F", "F2FP", "I2F", "F2I", "I2FP", "F2IP", "FRND")
_MEMORY = ("LDG", "STG", "LDS", "STS", "LDSM", "LDGSTS", "SHFL", "ATOM", "ATOMG", "ATOMS", "RED", "LD", "ST",
           "LDC", "STSM", "LDGDEPBAR", "UBLKCP", "UTMALDG", "UTMASTG")
_CONTROL = ("BRA", "BAR", "SYNCS", "WARPGROUP", "DEPBAR", "NOP", "EXIT", "BSSY", "BSYNC", "WARPSYNC", "MEMBAR",
            "FENCE", "CCTL", "ERRBAR", "YIELD", "RET", "CALL", "ELECT", "ACQBULK", "ARRIVES", "USETMAXREG", "BPT",
            "VOTE", "S2R", "CS2R", "S2UR", "R2UR", "PLOP3", "P2R", "R2P", "NANOSLEEP", "ENDCOLLECTIVE")

LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:\{\s*)?(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)\s*(.*?);")


def pipe_of(op):
    base = op
    if base in _TENSOR:
        return "tensor"
    if base == "MUFU":
        return "mufu"
    if base in _FP32:
        return "fp32"
    if base in _CVT:
        return "cvt"
    if base in _MEMORY:
        return "memory"
    if base in _CONTROL:
        return "control"
    if base.startswith("U") and base not in ("UNKNOWN",):
        return "uniform"
    return "alu"


def parse(text):
    """Functions -> list of (address, opcode, modifiers, operands, predicated)."""
    funcs, name = {}, None
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            name = m.group(1)
            funcs[name] = []
            continue
        if name is None:
            continue
        m = LINE.match(line)
        if m:
            funcs[name].append((int(m.group(1), 16), m.group(3), m.group(4), m.group(5), bool(m.group(2))))
    return funcs


def branch_target(ins):
    if ins[1] != "BRA":
        return None
    m = re.search(r"0x([0-9a-f]+)", ins[3])
    return int(m.group(1), 16) if m else None


def hot_loop(ins, start=None):
    """(start, end) of the backward-branch loop with the most marker instructions, or (with start, an
    address) the loop that starts there: a kernel whose item loop holds its tile loop once, unrolled
    around it, needs the tile loop named (its start is the target of its backward branch)."""
    loops = []
    for a, op, mods, args, pred in ins:
        t = branch_target((a, op, mods, args))
        if t is not None and t <= a:
            loops.append((t, a))
    if start is not None:
        loops = [(lo, hi) for lo, hi in loops if lo == start]
    if not loops:
        return None

    def count(lo, hi, pipe):
        return sum(1 for a, op, *_ in ins if lo <= a <= hi and pipe_of(op) == pipe)

    for marker in ("tensor", "mufu", None):
        scored = [(count(lo, hi, marker) if marker else hi - lo, -(hi - lo), lo, hi) for lo, hi in loops]
        best = max(scored)
        if best[0] > 0:
            return best[2], best[3]
    return None


def loop_counts(ins, lo, hi):
    cold = []
    for a, op, mods, args, pred in ins:
        t = branch_target((a, op, mods, args))
        if t is None or not pred or not (lo <= a < t <= hi):
            continue
        if not any(a < b < t and pipe_of(o) in ("tensor", "memory") for b, o, *_ in ins):
            cold.append((a + 16, t))
    per_pipe, per_op = collections.Counter(), collections.Counter()
    for a, op, mods, args, pred in ins:
        if lo <= a <= hi and not any(s <= a < e for s, e in cold):
            per_pipe[pipe_of(op)] += 1
            per_op[op + mods] += 1
    return per_pipe, per_op, cold


def find_cuobjdump(given):
    if given:
        return given
    found = shutil.which("cuobjdump")
    if found:
        return found
    for root in ("/usr/local/cuda/bin",):
        if os.path.exists(os.path.join(root, "cuobjdump")):
            return os.path.join(root, "cuobjdump")
    sys.exit("cuobjdump not found: install the CUDA toolkit's, or pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("object")
    ap.add_argument("function", nargs="?", default=".")
    ap.add_argument("--cuobjdump")
    ap.add_argument("--loop", type=lambda x: int(x, 16), help="the loop starting at this address (hex)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tool = find_cuobjdump(a.cuobjdump)
    env = dict(os.environ, PATH=os.path.dirname(tool) + os.pathsep + os.environ.get("PATH", ""))
    text = subprocess.run([tool, "-sass", a.object], check=True, capture_output=True, text=True, env=env).stdout
    out = {}
    for name, ins in parse(text).items():
        if not re.search(a.function, name):
            continue
        loop = hot_loop(ins, a.loop)
        if not loop:
            continue
        per_pipe, per_op, cold = loop_counts(ins, *loop)
        out[name] = {"loop": [hex(loop[0]), hex(loop[1])], "cold": [[hex(s), hex(e)] for s, e in cold],
                     "pipes": {p: per_pipe.get(p, 0) for p in PIPES}, "total": sum(per_pipe.values()),
                     "ops": dict(per_op.most_common())}
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print("function | loop | " + " | ".join(PIPES) + " | total")
    for name, r in out.items():
        short = re.sub(r"_GLOBAL__N__\w+?_\d+_", "", name)
        print(f"{short} | {r['loop'][0]}-{r['loop'][1]} | " + " | ".join(str(r["pipes"][p]) for p in PIPES) +
              f" | {r['total']}")


if __name__ == "__main__":
    main()
