# Sourced by tests/cli/output_lost.sh and tests/mpi/output_lost.sh; not a test itself (ctest runs
# tests/cli/*.sh). One small run of every command that writes a report to standard output (gemm
# and table through `-o -`), on the bundled data. Needs FP8KIT, REPO and T; sets CMDS.
. "$REPO/tests/cli/npy.bash"
npy "$T/a.npy" '|u1' '(2, 2)' '\x38\x40\x48\x38'
npy "$T/b.npy" '|u1' '(1, 2)' '\x40\x40'
EX=$REPO/data/example
head -c 12288 "$EX/amax_trace.csv" >"$T/codes.bin"
mkdir -p "$T/stats/nvdlfw_inspect_statistics_logs"
printf '2026-11-29 01:00:00,000 - INFO - fc1_activation_max \t\t\t\t iteration=000001 \t\t\t\t value=2.5000\n' \
    >"$T/stats/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log"
CMDS=(
    "calibrate $EX/llama_tiny_dump.h5 --method max --tensors */lm_head/input --json"
    "checkpoint check $REPO/data/checkpoints/ct_fp8 --json"
    "decode 0x38 --from e4m3"
    "encode 1.5 --to e4m3 --profile torch"
    "formats"
    "gemm $T/a.npy $T/b.npy --accum exact -o -"
    "inspect $EX/llama_tiny_dump.h5 --json -q --steps 100"
    "kv $EX/llama_tiny_kv.h5 --no-attention --csv"
    "recipe list"
    "recipe show te-current"
    "replay $EX/amax_trace.csv --recipe te-delayed --history 16 --json"
    "replay --stats $T/stats"
    "simulate msamp $EX/llama_tiny_dump.h5 --level O1 --ranks 8 --json"
    "sweep $EX/amax_trace.csv --json -q"
    "table --from e4m3 --to f32 -o -"
    "validate --json -q --to e4m3 --profile cuda-satfinite --input $EX/llama_tiny_dump.h5:/step_000100/model.layers.1.mlp.down_proj/weight --output $T/codes.bin --shape 64x192"
    "watch --json $EX/amax_trace.csv"
)
# The one line a lost report prints: a report into /dev/full ($1 = full) or a closed standard
# output ($1 = closed); `-o -` names its option.
lost_line() {
    if [ "$1" = full ]; then echo '^fp8kit: error: \(writing standard output failed\(: No space left on device\)\?: the report is incomplete\|-o -: write failed: No space left on device\)$'
    else echo '^fp8kit: error: \(standard output is closed: the report was lost\|-o -: standard output is closed: nothing was written\)$'; fi
}
