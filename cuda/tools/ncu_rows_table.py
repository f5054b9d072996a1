"""The table of cuda/tools/ncu_rows.sh's output: per bench row, the kernels of its last timed
call, with their time, DRAM throughput, issue slots busy, thread instructions per element,
registers and occupancy. Usage: python3 cuda/tools/ncu_rows_table.py OUTDIR LOG2N"""

import csv
import io
import pathlib
import sys

SETUP = ("fill", "narrow")  # fp8kit_cuda_bench's own set-up kernels


def launches(path):
    """{launch id: {metric: value}} in launch order, from ncu's --csv output (one row per metric)."""
    text = path.read_text()
    start = text.find('"ID"')
    if start < 0:
        return []
    out = {}
    for r in csv.DictReader(io.StringIO(text[start:])):
        k = out.setdefault(int(r["ID"]), {"kernel": r["Kernel Name"]})
        k[r["Metric Name"]] = r["Metric Value"].replace(",", "")
    return [out[i] for i in sorted(out)]


def call_length(ks):
    """The number of launches of one call of the row: the shortest p whose last 4 p launches are
    the same p kernels 4 times (set-up kernels of the bench may come before); 0 if none."""
    names = [k["kernel"] for k in ks]
    for p in range(1, len(names) // 4 + 1):
        tail = names[len(names) - 4 * p :]
        if all(tail[i] == tail[i % p] for i in range(4 * p)):
            return p
    return 0


def main(folder, log2n):
    n = 1 << int(log2n)
    print("| row | kernel | us | DRAM % | issue slots % | thread inst / element | regs | occupancy (achieved / max) |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for path in sorted(pathlib.Path(folder).glob("*.csv")):
        ks = [k for k in launches(path) if not k["kernel"].startswith(SETUP)]
        p = call_length(ks)
        if p == 0:
            print(f"| {path.stem} | (no 4 equal calls among {len(ks)} launches) | | | | | | |")
            continue
        for k in ks[-p:]:  # the last call: 3 warm-ups and 1 timed
            name = k["kernel"].removeprefix("void ").replace("<unnamed>::", "").split("(")[0].split("<")[0]
            inst = float(k["smsp__inst_executed.sum"]) * 32 / n  # warp instructions x 32 lanes
            print(
                f"| {path.stem} | {name} | {float(k['gpu__time_duration.sum']) / 1e3:.1f} "
                f"| {float(k['dram__throughput.avg.pct_of_peak_sustained_elapsed']):.1f} "
                f"| {float(k['sm__inst_issued.avg.pct_of_peak_sustained_active']):.1f} | {inst:.1f} "
                f"| {k['launch__registers_per_thread']} "
                f"| {float(k['sm__warps_active.avg.pct_of_peak_sustained_active']):.1f} / "
                f"{float(k['sm__maximum_warps_per_active_cycle_pct']):.1f} |"
            )


if __name__ == "__main__":
    main(*sys.argv[1:3])
