#!/usr/bin/env python3
"""Instructions one thread issues on a chosen path through a kernel's SASS.

The SASS counts of docs/performance.md (instructions per element of a hot path): a walk from the
kernel's first instruction that follows unconditional branches, takes a conditional branch or a
predicated EXIT where a decision says so ("ADDR:T", hex address as cuobjdump prints it) and falls
through otherwise, and counts every instruction it passes (predicated-off ones too: they issue).
Each conditional branch without a decision is printed, so the decisions can be read off the SASS
(a branch past a division's slow path, the vectorised store, the loop's back edge, ...).

  cuobjdump -sass block_rows.cu.o > k.sass
  scripts/sass_path.py k.sass 'row_blocks_kernel<FF<8, 7, 0, 127>, FF<2, 1, 4, 1>, 2, -1, true, 1>' \
      --decide 90:N,150:T,... --mark 4b0,ab00

The kernel is chosen by a substring of its demangled name, with fp8kit::emu::FloatFormat written FF
and the Encoding casts dropped. --mark prints how many instructions were issued before each given
address (the loop's head and its end give the loop body); -v prints the path.
"""

import argparse
import re
import subprocess
import sys


def kernel_sass(path, want):
    for chunk in open(path).read().split("Function : ")[1:]:
        name = chunk.split("\n", 1)[0].strip()
        dem = subprocess.run(["c++filt", name], capture_output=True, text=True, check=True).stdout
        dem = dem.replace("fp8kit::emu::FloatFormat", "FF").replace("(fp8kit::emu::Encoding)", "")
        if want in dem:
            ins = []
            for line in chunk.split("\n"):
                m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s*(.*?);", line)
                if m:
                    ins.append((int(m.group(1), 16), m.group(2).strip()))
            return ins
    sys.exit(f"sass_path: no kernel matching {want!r} in {path}")


def walk(ins, decide, marks, verbose):
    index = {a: i for i, (a, _) in enumerate(ins)}
    i, n, seen, at = 0, 0, {}, {}
    while i < len(ins):
        a, t = ins[i]
        if a in marks:
            at[a] = n
        seen[a] = seen.get(a, 0) + 1
        if seen[a] > 2:
            sys.exit(f"sass_path: the walk loops at {a:x}; decide the loop's back edge")
        n += 1
        if verbose:
            print(f"{n:5d} {a:05x} {t}")
        if t.startswith("EXIT"):
            break
        if re.match(r"@!?U?P\w+ EXIT", t) and decide.get(a) == "T":
            break
        m = re.match(r"(@!?U?P\w+ )?BRA(\.DIV)?( U?R\w+,| !?U?P\w+,)? (0x[0-9a-f]+)", t)
        if m:
            target = int(m.group(4), 16)
            conditional = m.group(1) or (m.group(3) and "P" in m.group(3))
            if m.group(2):  # BRA.DIV: the warp is converged on these paths
                conditional, d = True, "N"
            else:
                d = decide.get(a)
            if not conditional:
                i = index[target]
                continue
            if d is None:
                print(f"undecided {a:x}: {t} (falls through)")
            elif d == "T":
                i = index[target]
                continue
        i += 1
    return n, at


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sass")
    p.add_argument("kernel")
    p.add_argument("--decide", default="")
    p.add_argument("--mark", default="")
    p.add_argument("-v", action="store_true")
    a = p.parse_args()
    decide = {int(k, 16): v for k, v in (kv.split(":") for kv in a.decide.split(",") if kv)}
    marks = [int(x, 16) for x in a.mark.split(",") if x]
    n, at = walk(kernel_sass(a.sass, a.kernel), decide, marks, a.v)
    print("issued", n, " ".join(f"before {k:x}: {v}" for k, v in at.items()))


if __name__ == "__main__":
    main()
