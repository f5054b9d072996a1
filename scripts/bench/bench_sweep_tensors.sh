#!/usr/bin/env bash
# sweep's scaling in the number of tensors (issue 20 item 5): writes a CSV trace of N tensors x S
# steps (amax values from awk's seeded rand) and times `fp8kit sweep` on it in text, --json and
# --csv, with peak memory (/usr/bin/time). Usage:
#   scripts/bench/bench_sweep_tensors.sh build/tools/fp8kit 10000 [steps=10]
set -eu
FP8KIT=$1
N=$2
S=${3:-10}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
awk -v n="$N" -v s="$S" 'BEGIN {
    srand(1); print "step,tensor,amax"
    split("input weight grad", kind, " ")
    for (st = 0; st < s; ++st)
        for (t = 0; t < n; ++t)
            printf "%d,layers.%d.t%d.%s,%.6g\n", st, int(t / 8), t % 8, kind[t % 3 + 1], 0.5 + 1.5 * rand()
}' > "$T/trace.csv"
for mode in "" --json --csv; do
    /usr/bin/time -f "sweep $N tensors x $S steps ${mode:-text}: %e s wall, %U s user, %M KB peak" \
        "$FP8KIT" sweep "$T/trace.csv" $mode > /dev/null
done
