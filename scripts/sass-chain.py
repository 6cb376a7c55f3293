#!/usr/bin/env python3
"""One warp's dependent chain through a kernel's hot loop, read off its SASS control words.

sass-counts.py says how many instructions a loop iteration issues; this script says how many clock
cycles ONE warp needs for that iteration when nothing else runs on its scheduler: the in-order issue
the compiler scheduled. Every sm_70+ instruction carries a control word (the high 23 bits of its
second 64-bit half): a stall count (cycles before the warp's next instruction may issue: the
compiler's own account of fixed-latency dependences and of the pipe's rate for this warp), a write
and a read scoreboard it sets (variable-latency results: memory, conversions, MUFU), and a mask of
the scoreboards it waits on. Walking the loop's steady-state path with those, a scoreboard released
LATENCY cycles after the instruction that set it, gives the chain:

    shared memory (LDS, LDSM, LDL spills, LDC, S2R)   --smem cycles   (hardware pipes.smem_latency_cycles)
    global loads and cp.async groups (LDG, LDGSTS)   --dram cycles   (pipes.dram_latency_us x sm clock)
    MUFU, conversions (I2F, F2I)                      --mufu cycles   (pipes.mufu_latency_cycles)
    operands read (a read scoreboard)                 --read cycles
    a wgmma batch (WARPGROUP.DEPBAR waits for it)     its tensor work at the SM's rate shared by
                                                      --warpgroups warpgroups: 2·64·N·16 FLOP per
                                                      HGMMA / (tensor_flops_per_clk / warpgroups)

The path: the loop body in address order; a forward conditional branch is taken (its region
skipped) when the region holds a store or an atomic (the write-out of a tile: not the steady
state) or neither a tensor-core nor a memory instruction (sass-counts.py's cold region). The loop
runs --iterations times; the result is the cycles per iteration of the second half (steady state:
the ring's loads issued iterations earlier have had their latency).

The DRAM wait: with latencies above the loop's own work the cycles grow one for one with the
latency (a ring's refill consumed one iteration later, a fence that drains the copies in flight):
cycles = latency + "cycles beside one DRAM latency"; both that and the cycles with no DRAM wait are
printed, so the model (sim/src/kernels.cpp) takes the hardware's latency as its own input.

With W warps on a scheduler each needing C cycles for I instructions, the scheduler issues
min(1, W·I / C) instructions a cycle: a warp's iteration takes max(C, W·I) cycles.

Usage:  scripts/sass-chain.py OBJECT FUNCTION-REGEX [--smem 30 --dram 2265 --mufu 18 --read 4.6
        --warpgroups 2] [--json]
"""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("sass_counts", os.path.join(_here, "sass-counts.py"))
sc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sc)

INS = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:\{\s*)?(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)\s*(.*?);"
                 r"\s*/\*\s*0x[0-9a-f]{16}\s*\*/")
HI = re.compile(r"^\s*/\*\s*(0x[0-9a-f]{16})\s*\*/\s*$")
_SMEM = ("LDS", "LDSM", "LDL", "LDC", "S2R", "S2UR", "CS2R", "LD", "SHFL", "ATOMS")
_GLOBAL = ("LDG", "LDGSTS", "LDGDEPBAR")
_SLOW = ("MUFU", "I2F", "F2I", "F2F", "I2FP", "F2IP", "FRND", "POPC", "FLO", "BREV")
_WRITES = ("STG", "ATOMG", "RED", "ATOM", "ST")


def parse_control(text):
    """Functions -> list of (address, opcode, modifiers, operands, predicated, control word)."""
    funcs, name, lines = {}, None, text.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"Function : (\S+)", line)
        if m:
            name = m.group(1)
            funcs[name] = []
            continue
        m = INS.match(line)
        if name is None or not m or i + 1 >= len(lines):
            continue
        h = HI.match(lines[i + 1])
        if not h:
            continue
        ctrl = int(h.group(1), 16) >> 41
        funcs[name].append((int(m.group(1), 16), m.group(3), m.group(4), m.group(5), bool(m.group(2)), ctrl))
    return funcs


def steady_path(ins, lo, hi):
    """The loop's instructions in issue order along the steady-state path (see the docstring)."""
    body = [x for x in ins if lo <= x[0] <= hi]
    skip = []
    for a, op, mods, args, pred, _ in body:
        t = sc.branch_target((a, op, mods, args))
        if t is None or not (lo <= a < t <= hi + 16):
            continue
        region = [x[1] for x in body if a < x[0] < t]
        hot = any(sc.pipe_of(o) in ("tensor", "memory") for o in region)
        writes = any(o in _WRITES for o in region)
        if not pred or writes or not hot:
            skip.append((a + 16, t))
    path = []
    for x in body:
        if any(s <= x[0] < e for s, e in skip):
            continue
        if x[1] == "BRA" and sc.branch_target(x[:4]) is not None and sc.branch_target(x[:4]) > x[0]:
            continue  # a forward branch falls through or was skipped over above
        path.append(x)
    return path


def chain(path, smem, dram, mufu, read, wgmma_cycles, iterations):
    """Cycles per iteration of one warp in steady state, and the instructions per iteration."""
    sb = [[] for _ in range(6)]  # completion times pending on each scoreboard
    wg_done, groups = 0.0, []  # the tensor pipe's last completion; the open wgmma groups' completions
    t, starts = 0.0, []
    for _ in range(iterations):
        starts.append(t)
        for a, op, mods, args, pred, ctrl in path:
            stall, wbar, rbar, wait = ctrl & 15, (ctrl >> 5) & 7, (ctrl >> 8) & 7, (ctrl >> 11) & 63
            for b in range(6):
                if wait >> b & 1 and sb[b]:
                    t = max(t, max(sb[b]))
                    sb[b] = []
            if op == "DEPBAR":  # DEPBAR.LE SBx, n: at most n groups still pending on SBx
                m = re.search(r"SB(\d), (0x[0-9a-f]+|\d+)", args)
                if m:
                    b, n = int(m.group(1)), int(m.group(2), 0)
                    pend = sorted(sb[b])
                    if len(pend) > n:
                        t = max(t, pend[len(pend) - n - 1])
                        sb[b] = pend[len(pend) - n:]
            if op == "MEMBAR":  # a fence: every load and copy this thread has in flight completes first
                for b in range(6):
                    if sb[b]:
                        t = max(t, max(sb[b]))
                        sb[b] = []
            if op == "WARPGROUP" and "DEPBAR" in mods:  # WARPGROUP.DEPBAR.LE gsb0, n: all but the last n groups
                m = re.search(r"gsb0, (0x[0-9a-f]+|\d+)", args)
                n = int(m.group(1), 0) if m else 0
                if len(groups) > n:
                    t = max(t, groups[len(groups) - n - 1])
                    groups = groups[len(groups) - n:]
            if op == "HGMMA":  # the tensor pipe runs the batches in order; gsb0 closes a group
                m = re.search(r"(\d+)x(\d+)x(\d+)", mods + args)
                wg_done = max(wg_done, t) + wgmma_cycles(int(m.group(2)))
                if "gsb0" in args:
                    groups.append(wg_done)
            issue = t
            t += max(1, stall)
            lat = smem if op in _SMEM else dram if op in _GLOBAL else mufu if op in _SLOW else read
            if wbar != 7:
                sb[wbar].append(issue + lat)
            if rbar != 7:
                sb[rbar].append(issue + read)
    half = iterations // 2
    return (t - starts[half]) / (iterations - half), len(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("object")
    ap.add_argument("function")
    ap.add_argument("--cuobjdump")
    ap.add_argument("--smem", type=float, default=30.0)
    ap.add_argument("--dram", type=float, default=2265.0)
    ap.add_argument("--mufu", type=float, default=18.0)
    ap.add_argument("--read", type=float, default=4.6)
    ap.add_argument("--tensor-flops-per-clk", type=float, default=4096.0)
    ap.add_argument("--tensor-clock-ratio", type=float, default=1976.0 / 1830.0, help="SM clock / tensor clock")
    ap.add_argument("--warpgroups", type=float, default=2.0, help="warpgroups sharing the SM's tensor cores")
    ap.add_argument("--iterations", type=int, default=64)
    ap.add_argument("--loop", type=lambda x: int(x, 16), help="the loop starting at this address (hex)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tool = sc.find_cuobjdump(a.cuobjdump)
    env = dict(os.environ, PATH=os.path.dirname(tool) + os.pathsep + os.environ.get("PATH", ""))
    text = subprocess.run([tool, "-sass", a.object], check=True, capture_output=True, text=True, env=env).stdout
    share = a.tensor_flops_per_clk / a.warpgroups
    wgmma_cycles = lambda n: 2.0 * 64 * n * 16 / share * a.tensor_clock_ratio
    out = {}
    for name, ins in parse_control(text).items():
        if not re.search(a.function, name):
            continue
        loop = sc.hot_loop([x[:5] for x in ins], a.loop)
        if not loop:
            continue
        path = steady_path(ins, *loop)
        cycles, count = chain(path, a.smem, a.dram, a.mufu, a.read, wgmma_cycles, a.iterations)
        alone, _ = chain(path, a.smem, 0.0, a.mufu, a.read, wgmma_cycles, a.iterations)
        pipes = {}
        for x in path:
            pipes[sc.pipe_of(x[1])] = pipes.get(sc.pipe_of(x[1]), 0) + 1
        out[name] = {"loop": [hex(loop[0]), hex(loop[1])], "instructions": count, "pipes": pipes, "cycles": round(cycles, 1),
                     "cycles_per_instruction": round(cycles / count, 2), "cycles_no_dram": round(alone, 1),
                     "beside_dram": round(cycles - a.dram, 1)}
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print("function | loop | instructions (per pipe, the steady path) | cycles | cycles per instruction | "
          "cycles without the DRAM wait | cycles beside one DRAM latency")
    for name, r in out.items():
        short = re.sub(r"_GLOBAL__N__\w+?_\d+_", "", name)
        per = " ".join(f"{k} {v}" for k, v in sorted(r["pipes"].items()))
        print(f"{short} | {r['loop'][0]}-{r['loop'][1]} | {r['instructions']} ({per}) | {r['cycles']} | "
              f"{r['cycles_per_instruction']} | {r['cycles_no_dram']} | {r['beside_dram']}")


if __name__ == "__main__":
    main()
