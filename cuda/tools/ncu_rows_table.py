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


def last_call(ks):
    """The launches of the row's timed call: the first run of 4 equal blocks of p launches
    (3 warm-ups and the timed call), the smallest p; set-up kernels of the bench may come before
    and after it. [] if there is none."""
    names = [k["kernel"] for k in ks]
    for p in range(1, len(names) // 4 + 1):
        for start in range(len(names) - 4 * p + 1):
            block = names[start : start + p]
            if all(names[start + q * p : start + (q + 1) * p] == block for q in range(4)):
                return ks[start + 3 * p : start + 4 * p]
    return []


def main(folder, log2n):
    n = 1 << int(log2n)
    print("| row | kernel | us | DRAM % | issue slots % | thread inst / element | regs | occupancy (achieved / max) |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for path in sorted(pathlib.Path(folder).glob("*.csv")):
        ks = [k for k in launches(path) if not k["kernel"].startswith(SETUP)]
        call = last_call(ks)
        if not call:
            print(f"| {path.stem} | (no 4 equal calls among {len(ks)} launches) | | | | | | |")
            continue
        for k in call:
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
