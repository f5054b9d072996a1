#!/usr/bin/env bash
# Issue 47, "read only the files the user named", for every command and subcommand at once: each
# runs under `strace -f -e trace=open,openat,openat2,creat`, and
#   - every path it opens outside the system's folders is one of its own arguments (a file, a file
#     of a folder it was given, the file part of file.h5:/x), and
#   - it opens nothing for writing but the output it was told to write (-o, --save) and the
#     output sink's temporary beside it (.NAME.XXXXXX.partial).
# The commands that read no input (table -o -, encode, decode, formats, recipe list, recipe show
# PRESET) must open no path at all. Every command of tests/cli/commands.bash (the lost-stdout
# list) is traced, plus the inputs and outputs that list does not use (--recipe FILE, watch
# --grad-norm, validate --gemm, gemm --scale-a, checkpoint --reference, table -o,
# gemm -o, calibrate --save, simulate msamp O2, sweep on a statistics folder).
# Exit 77 (skipped) without strace.
# Usage: bash every_command_traced.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
command -v strace >/dev/null || { echo "SKIP: strace is not installed (scripts/install/install-deps.sh installs it)"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
export OMP_NUM_THREADS=1
. "$REPO/tests/cli/commands.bash"
EX=$REPO/data/example
CK=$REPO/data/checkpoints
"$FP8KIT" recipe show te-current >"$T/recipe.json"
printf 'step,grad_norm\n0,1.5\n1,2\n' >"$T/grad_norm.csv"
npy "$T/sa.npy" '<f4' '(1,)' '\x00\x00\x80\x3f'
"$FP8KIT" gemm "$T/a.npy" "$T/b.npy" --accum exact -o "$T/d.npy" || check "gemm for validate --gemm's D" 1
S=$T/amax_stats/nvdlfw_inspect_statistics_logs
mkdir -p "$S"
for it in 1 2; do
    printf '2026-11-29 01:00:00,000 - INFO - fc1_activation_cur_amax \t\t\t\t iteration=%06d \t\t\t\t value=%s\n' "$it" "2.5$it" >>"$S/nvdlfw_inspect_globalrank-0.log"
done
EXTRA=(
    "inspect -q --recipe $T/recipe.json $EX/llama_tiny_kv.h5"
    "replay --recipe $T/recipe.json $EX/amax_trace.csv"
    "sweep -q $T/amax_stats"
    "watch --grad-norm $T/grad_norm.csv $EX/amax_trace.csv"
    "validate --gemm --a $T/a.npy --b $T/b.npy --output $T/d.npy"
    "gemm $T/a.npy $T/b.npy --scale-a $T/sa.npy -o $T/out/d.npy"
    "table --from e4m3 --to f32 -o $T/out/t.bin"
    "calibrate $EX/llama_tiny_dump.h5 --method max --tensors */lm_head/input --save $T/out/s.safetensors"
    "checkpoint check $CK/llmc_fp8 --reference $CK/llmc_original"
    "simulate msamp $EX/llama_tiny_dump.h5 --level O2 --ranks 8"
)
mkdir "$T/out"
SYSTEM=$'^(/lib|/usr/lib|/usr/local/lib|/etc/ld\\.so|/proc/|/sys/|/dev/null\t|/usr/share/locale|/usr/lib/locale)'
set -f  # the patterns are fp8kit's
for cmd in "${CMDS[@]}" "${EXTRA[@]}"; do
    read -ra args <<<"$cmd"
    name=${cmd//$T\//}
    name=${name//$EX\//}
    name=${name//$CK\//}
    # The paths this command was given: arguments that exist (file.h5:/x as file.h5), and outputs.
    named=() outputs=()
    prev=
    for a in "${args[@]}"; do
        case $prev in -o | --output | --save)
            # (validate's --output is an input; `-o -` is standard output: no file.)
            if [ "${args[0]}" != validate ]; then
                [ "$a" = - ] || outputs+=("$a")
                prev=$a
                continue
            fi ;;
        esac
        p=${a%%:*}
        [ -e "$p" ] && named+=("$(realpath -s "$p")")
        prev=$a
    done
    rm -rf "$T/out"/* "$T/out"/.[!.]* 2>/dev/null
    # shellcheck disable=SC2086
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        strace -f -qq -e trace=open,openat,openat2,creat -o "$T/trace" "$FP8KIT" "${args[@]}" >/dev/null 2>"$T/err"
    rc=$?
    check "$name: runs (exit $rc: $(head -c 200 "$T/err"))" $((rc > 1))
    # Each open as PATH<TAB>FLAGS (creat: a write).
    sed -n 's/.*\(open\|openat\|openat2\|creat\)([^"]*"\([^"]*\)", *\([A-Z_|]*\).*/\2\t\3/p; s/.*creat("\([^"]*\)".*/\1\tO_WRONLY/p' "$T/trace" |
        grep -Ev "$SYSTEM" | grep -Ev '\.so(\.[0-9]+)*	' | sort -u >"$T/opened"
    bad=
    while IFS=$'\t' read -r path flags; do
        abs=$(realpath -s "$path" 2>/dev/null || echo "$path")
        ok=0
        if [[ $flags == *O_WRONLY* || $flags == *O_RDWR* || $flags == *O_CREAT* ]]; then
            for o in "${outputs[@]}"; do
                d=$(dirname "$o") b=$(basename "$o")
                [[ $abs == "$o" || ($(dirname "$abs") == "$d" && $(basename "$abs") == ."$b".*.partial) ]] && ok=1
            done
        else
            for n in "${named[@]}"; do [[ $abs == "$n" || $abs == "$n"/* ]] && ok=1; done
            # The sink reads its target's status through the folder: an output is also a read path.
            for o in "${outputs[@]}"; do [[ $abs == "$o" || $abs == "$(dirname "$o")" ]] && ok=1; done
        fi
        [ $ok = 1 ] || bad="$bad $path ($flags)"
    done <"$T/opened"
    check "$name: opens only its named files${bad:+ (also:$bad)}" "$([ -z "$bad" ]; echo $?)"
    if [ ${#named[@]} -eq 0 ] && [ ${#outputs[@]} -eq 0 ]; then
        check "$name: reads no input, so opens no path ($(wc -l <"$T/opened") opened)" "$([ ! -s "$T/opened" ]; echo $?)"
    fi
done
exit $fail
