#!/usr/bin/env bash
# Issue 47: the adversarial sweep. Every command that reads a user's file, on a corpus of hostile
# inputs of every kind it reads (tests/cli/make_adversarial_corpus.py: HDF5 dumps, safetensors,
# torch.save zips, .npy, raw arrays, recipe JSON, amax-trace CSV, dlfw-inspect logs, TE statistics
# folders, TE tensor_dumps folders, checkpoint folders), plus the path classes every input slot
# shares (missing, a folder where a file is expected, a FIFO, /dev/zero, a symlink loop, a name
# with control characters, a 100 kB path, and, as `nobody` under root, a file it may not read).
# Each run is asserted (docs/hardening.md, "The adversarial sweep"):
#   - it ends within 20 s (timeout: a hang fails);
#   - the exit status is 0, 1 or 2 (never a signal: 134, 139, ...); `bad_*` inputs exit 1 or 2;
#   - on failure (validate and checkpoint check: exit 2; their 1 is a verdict), stderr names the
#     input (its name's stem) in at most 3 lines, each under 2000 bytes (as input_gate.sh), and
#     stdout holds no success verdict (BIT-EXACT, a line OK);
#   - neither output holds a raw control character;
#   - nothing is left in the working folder, the corpus folder or the output folder.
# Only failures are printed in full, then one line per command slot with its count of inputs.
# Usage: bash adversarial.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
PY="$REPO/.venv/bin/python"
[ -x "$PY" ] || PY=python3
"$PY" -c "import h5py, numpy" 2>/dev/null || { echo "SKIP: no Python with h5py and numpy to write the corpus"; exit 77; }
T=$(mktemp -d)
RO=
trap 'rm -rf "$T"; [ -z "$RO" ] || rm -rf "$RO"' EXIT
export OMP_NUM_THREADS=1
unset COLUMNS
fail=0
C=$T/c
"$PY" "$REPO/tests/cli/make_adversarial_corpus.py" "$C" "$REPO" || { echo "FAIL: the corpus"; exit 1; }
G=$C/good
"$FP8KIT" recipe show te-delayed >"$G/recipe.json" || { echo "FAIL: recipe show te-delayed"; exit 1; }
CTL=$'\x1b[31m\x07\nfake: ok\r'
# The path classes every input slot shares.
P=$C/paths
mkdir -p "$P/bad_dir" "$T/cwd" "$T/o"
mkfifo "$P/bad_fifo"
ln -s bad_loop_b "$P/bad_loop_a" && ln -s bad_loop_a "$P/bad_loop_b"
printf 'garbage\n' >"$P/bad_ctl$CTL"
LONG=$P/bad_long$(head -c 100000 /dev/zero | tr '\0' x)
PATHS=("$P/bad_missing" "$P/bad_dir" "$P/bad_fifo" /dev/zero "$P/bad_loop_a" "$P/bad_ctl$CTL" "$LONG")
listing_before=$(cd "$C" && find . | sort)

# stem FILE: what the message must name: the corpus entry's ASCII stem (zero for /dev/zero).
stem() {
    local b=${1#"$C"/}
    b=${b#*/}; b=${b%%/*}; b=${b%%.*}
    case $1 in /dev/zero) b=zero ;; "$LONG") b=bad_long ;; *"$CTL"*) b=${b%%$'\x1b'*} ;; esac
    printf '%s' "${b:0:40}"
}
declare -A runs
# one LABEL FILE CMD...: run CMD (@ in an argument is replaced by FILE) and assert the above.
one() {
    local label=$1 file=$2; shift 2
    local args=() a
    for a in "$@"; do args+=("${a//@/$file}"); done
    local s; s=$(stem "$file")
    (cd "$T/cwd" && exec timeout -k 2 20 "${as[@]}" "$FP8KIT" "${args[@]}") >"$T/out" 2>"$T/err"
    local rc=$? why=()
    runs[$label]=$(( ${runs[$label]:-0} + 1 ))
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then why+=("hangs (killed after 20 s)")
    elif [ $rc -gt 2 ]; then why+=("exit $rc (a signal or a crash)")
    fi
    case $s in bad_*|zero) [ $rc -eq 0 ] && why+=("exit 0 on a bad input") ;; esac
    # validate and checkpoint check: exit 1 is their verdict (mismatches, failed checks), a report.
    local failed=$((rc != 0))
    case ${args[0]} in validate|checkpoint) failed=$((rc == 2)) ;; esac
    if [ $failed -eq 1 ]; then
        grep -qF -- "$s" "$T/err" || why+=("stderr does not name '$s'")
        [ "$(wc -l <"$T/err")" -le 3 ] || why+=("stderr has $(wc -l <"$T/err") lines")
        [ "$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$T/err")" -lt 2000 ] || why+=("a stderr line over 2000 bytes")
        ! grep -qE 'BIT-EXACT|^OK$' "$T/out" || why+=("a success verdict with exit $rc")
    fi
    LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$T/err" && why+=("a raw control character on stderr")
    LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$T/out" && why+=("a raw control character on stdout")
    [ -z "$(ls -A "$T/cwd")" ] || why+=("left in the working folder: $(ls -A "$T/cwd" | head -3)")
    local left
    left=$(cd "$T/o" && find . -mindepth 1 ! -name d.npy | head -3)
    if [ -n "$left" ] || { [ $rc -ne 0 ] && [ -e "$T/o/d.npy" ]; }; then
        why+=("left in the output folder: $left $(ls -A "$T/o" | head -3)")
    fi
    rm -rf "$T/cwd"/* "$T/cwd"/.[!.]* "$T/o"/* "$T/o"/.[!.]* 2>/dev/null
    if [ ${#why[@]} -gt 0 ]; then
        fail=1
        local shown=${file:0:120}
        echo "FAIL: $label on ${shown//[$'\x01'-$'\x1f']/?} (exit $rc): ${why[*]}"
        { head -c 300 "$T/err"; echo; } | head -3 | tr '\000-\011\013-\037' '?' | sed 's/^/    stderr: /'
    fi
}
# each LABEL "GLOB..." CMD...: one LABEL on every corpus entry matching GLOB (a folder of the corpus:
# its every entry) and on every path class.
each() {
    local label=$1 kinds=$2; shift 2
    local k f
    for k in $kinds; do
        [ -d "$C/$k" ] && k="$k/*"
        for f in "$C"/$k; do one "$label" "$f" "$@"; done
    done
    for f in "${PATHS[@]}"; do one "$label" "$f" "$@"; done
}
as=()
X=(--to e4m3 --profile torch)
each "inspect" "h5 st pt te" inspect -q @
each "inspect --recipe" "recipe" inspect -q --recipe @ "$G/x.h5"
each "sweep" "csv log h5 st pt stats te" sweep -q --no-blocks @
each "replay" "csv log h5 st" replay @
each "replay --recipe" "recipe" replay --recipe @ "$G/trace.csv"
each "replay --stats" "stats log" replay --stats @
each "watch" "csv log h5 st stats" watch @
each "watch --grad-norm" "csv" watch --grad-norm @ "$G/trace.csv"
each "validate --input" "npy" validate "${X[@]}" --input @ --output "$G/codes.npy"
each "validate --input raw" "bin" validate "${X[@]}" --input @ --dtype f32 --output "$G/codes.npy"
each "validate --input h5" "h5" validate "${X[@]}" --input @:/step_0/x.weight --output "$G/codes.npy"
each "validate --output" "npy bin" validate "${X[@]}" --input "$G/x.npy" --output @
each "validate --output st" "st" validate "${X[@]}" --input "$G/x.npy" --output @:w
each "validate --scales" "npy" validate "${X[@]}" --input "$G/x.npy" --output "$G/codes.npy" --scales @ --block rowwise
each "validate --gemm --a" "npy" validate --gemm --a @ --b "$G/b.npy" --output "$G/d.npy"
each "gemm A" "npy" gemm @ "$G/b.npy" -o "$T/o/d.npy"
each "gemm B" "npy" gemm "$G/a.npy" @ -o "$T/o/d.npy"
each "gemm --scale-a" "npy" gemm "$G/a.npy" "$G/b.npy" --scale-a @ -o "$T/o/d.npy"
each "calibrate" "h5 st" calibrate @ --method max
each "kv" "h5 st" kv @ --no-attention
each "simulate msamp" "h5 st" simulate msamp @ --level O1 --ranks 8
each "checkpoint check" "ckpt" checkpoint check @
each "checkpoint --reference" "ckpt/bad_noshard ckpt/bad_shard_* ckpt/bad_idx_* ckpt/any_*" checkpoint check "$G/ckpt" --reference @
each "recipe show" "recipe" recipe show @

# A file the user may not read: as nobody under root (root reads anything), from a folder of /tmp
# nobody may enter (the build and TMPDIR may be in 0700 folders).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    RO=$(mktemp -d /tmp/fp8kit-adversarial.XXXXXX)
    chmod 755 "$RO"
    cp "$FP8KIT" "$RO/fp8kit" && chmod 755 "$RO/fp8kit"
    mkdir "$RO/c" "$RO/c/paths" && cp "$G/x.npy" "$G/codes.npy" "$G/b.npy" "$G/trace.csv" "$RO/c/" && chmod 644 "$RO"/c/*
    cp -r "$G/ckpt" "$RO/c/bad_ckpt" && chmod -R a+rX "$RO/c/bad_ckpt"
    printf 'step,tensor,amax\n0,a,1\n' >"$RO/c/paths/bad_unreadable" && chmod 000 "$RO/c/paths/bad_unreadable"
    chmod 000 "$RO/c/bad_ckpt/config.json"
    chmod 777 "$T/cwd" "$T/o" && chmod 755 "$T"
    saved=("$FP8KIT" "$C" "$G"); FP8KIT=$RO/fp8kit C=$RO/c G=$RO/c
    as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    U=$C/paths/bad_unreadable
    for cmd in "inspect|inspect -q @" "sweep|sweep -q @" "replay|replay @" "watch|watch @" "calibrate|calibrate @ --method max" \
               "kv|kv @" "simulate msamp|simulate msamp @ --level O1 --ranks 8" "recipe show|recipe show @" \
               "inspect --recipe|inspect -q --recipe @ $C/x.npy" \
               "validate --input|validate --to e4m3 --profile torch --input @ --dtype f32 --output $C/codes.npy" \
               "validate --output|validate --to e4m3 --profile torch --input $C/x.npy --output @" \
               "gemm A|gemm @ $C/b.npy -o $T/o/d.npy"; do
        # shellcheck disable=SC2086
        one "unreadable: ${cmd%%|*}" "$U" ${cmd#*|}
    done
    one "unreadable: checkpoint check (its config.json)" "$C/bad_ckpt" checkpoint check @
    grep -q "Permission denied" "$T/err" || { echo "FAIL: checkpoint check: an unreadable config.json: no 'Permission denied'"; fail=1; }
    as=(); FP8KIT=${saved[0]} C=${saved[1]} G=${saved[2]}
else
    echo "skip: the unreadable-file class needs root and setpriv"
fi

[ "$(cd "$C" && find . | sort)" = "$listing_before" ] || { echo "FAIL: files added to or removed from the corpus folder"; fail=1; }
total=0
while IFS= read -r label; do
    echo "ran: $label: ${runs[$label]} inputs"
    total=$((total + runs[$label]))
done < <(printf '%s\n' "${!runs[@]}" | sort)
echo "ran $total commands on hostile inputs ($(printf '%s\n' "${!runs[@]}" | wc -l) command slots)"
exit $fail
