#!/usr/bin/env bash
# Nsight Compute metrics of fp8kit_cuda_bench rows, one profiled run per row: where a kernel's
# time goes (DRAM throughput against issue slots), the evidence for a row's floor
# (docs/performance.md). Each row runs 3 warm-ups and 1 timed call under ncu; the kernels of
# the last call are kept (the bench's own fill/narrow set-up kernels are dropped).
# Usage: BENCH=path/to/fp8kit_cuda_bench cuda/tools/ncu_rows.sh OUTDIR LOG2N ROW [ROW ...]
# Then: python3 cuda/tools/ncu_rows_table.py OUTDIR LOG2N
set -u -o pipefail
out=${1:?usage: ncu_rows.sh OUTDIR LOG2N ROW...}
log2n=${2:?LOG2N}
shift 2
bench=${BENCH:?BENCH: the fp8kit_cuda_bench program}
mkdir -p "$out"
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,\
sm__inst_issued.avg.pct_of_peak_sustained_active,sm__instruction_throughput.avg.pct_of_peak_sustained_active,\
smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,\
sm__maximum_warps_per_active_cycle_pct,launch__grid_size,launch__block_size,\
l1tex__throughput.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed
for row in "$@"; do
    FP8KIT_BENCH_ONLY="=$row" timeout 240 ncu --csv --print-units base --metrics "$metrics" "$bench" "$log2n" 1 \
        >"$out/$row.csv" 2>"$out/$row.err" || echo "ncu failed on $row (see $out/$row.err)"
done
