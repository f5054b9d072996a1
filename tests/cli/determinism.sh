#!/usr/bin/env bash
# Same numbers for any thread count: inspect, sweep and validate (--json) on the example dump and
# trace, with OMP_NUM_THREADS=1, 2 and 8 and each run twice, must print byte-identical output.
# Usage: bash determinism.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
DUMP=$REPO/data/example/llama_tiny_dump.h5
TRACE=$REPO/data/example/amax_trace.csv
LOG=$REPO/data/example/dlfw_inspect.log
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
W=step_000100/model.layers.1.mlp.down_proj/weight
# Kernel "output" for validate: fixed bytes that are not the reference codes, so every mismatch
# class and the example lists are exercised (64x192 = 12288 codes).
head -c 12288 "$TRACE" >"$T/codes.bin"

run() { # name, command...
    local name=$1; shift
    for threads in 1 2 8; do
        for rep in a b; do
            OMP_NUM_THREADS=$threads "$@" >"$T/$name.$threads$rep" 2>"$T/$name.err"
            local rc=$?
            # validate exits 1 for mismatches; anything else than 0/1 is a failed run.
            if [ $rc -gt 1 ]; then echo "FAIL: $name with $threads threads: exit $rc: $(cat "$T/$name.err")"; fail=1; fi
        done
    done
    [ -s "$T/$name.1a" ] || { echo "FAIL: $name printed nothing"; fail=1; }
    for f in "$T/$name".*[ab]; do
        if ! cmp -s "$T/$name.1a" "$f"; then
            echo "FAIL: $name: $(basename "$f") differs from 1 thread, first run"; diff "$T/$name.1a" "$f" | head -5; fail=1
        fi
    done
    echo "ok: $name identical for 1, 2, 8 threads, twice each"
}

run inspect "$FP8KIT" inspect "$DUMP" --json --steps 0,100 --include '*layers.1.*'
run inspect_block "$FP8KIT" inspect "$DUMP" --json --steps 100 --include '*mlp*' --recipe deepseek-v3
run sweep "$FP8KIT" sweep "$TRACE" --json
run sweep_log "$FP8KIT" sweep "$LOG" --json
run sweep_dump "$FP8KIT" sweep "$DUMP" --json --tensor '*layers.1.*'
run validate "$FP8KIT" validate --json --to e4m3 --profile cuda-satfinite --input "$DUMP:/$W" --output "$T/codes.bin" --shape 64x192
exit $fail
