#!/usr/bin/env bash
# Tensor names are never cut in the terminal tables of inspect, replay and sweep, at any width:
# neighbouring layers (layers.1.q_proj, layers.11.q_proj) differ only in an index, so a cut name
# makes rows look alike. A name longer than its column is written whole and its row continues on
# the next line.
set -u
FP8KIT=$1
REPO=$2
EX=$REPO/data/example
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMP_NUM_THREADS=1

# Every name must appear whole, as a field of its own (followed by a space or the line's end).
all_whole() {  # $1: file of names, $2: output, $3: what
    local missing
    missing=$(while IFS= read -r n; do
        grep -qE "(^| )$(printf '%s' "$n" | sed 's/[.[\*^$/]/\\&/g')( |$)" "$2" || echo "$n"
    done <"$1" | head -3)
    [ -z "$missing" ] || fail "$3: names cut or missing: $missing"
}

cut -d, -f2 "$EX/amax_trace.csv" | tail -n +2 | sort -u >"$TMP/trace_names"
[ "$(wc -l <"$TMP/trace_names")" -gt 10 ] || fail "trace has too few names for this test"
"$FP8KIT" inspect "$EX/llama_tiny_dump.h5" --steps 0 --csv | cut -d, -f2 | tail -n +2 | sort -u >"$TMP/dump_names"
sed 's|/[^/]*$||' "$TMP/dump_names" | sort -u >"$TMP/dump_groups"
sed 's|.*/||' "$TMP/dump_names" | sort -u >"$TMP/dump_leaves"

for cols in 40 60 72 80 99 100 140; do
    COLUMNS=$cols "$FP8KIT" replay "$EX/amax_trace.csv" --recipe te-delayed >"$TMP/replay" 2>"$TMP/err" \
        || fail "replay at $cols columns: $(cat "$TMP/err")"
    all_whole "$TMP/trace_names" "$TMP/replay" "replay at $cols columns"
    COLUMNS=$cols "$FP8KIT" sweep "$EX/amax_trace.csv" >"$TMP/sweep" 2>"$TMP/err" \
        || fail "sweep at $cols columns: $(cat "$TMP/err")"
    all_whole "$TMP/trace_names" "$TMP/sweep" "sweep at $cols columns"
    COLUMNS=$cols "$FP8KIT" inspect "$EX/llama_tiny_dump.h5" --steps 0 >"$TMP/inspect" 2>"$TMP/err" \
        || fail "inspect at $cols columns: $(cat "$TMP/err")"
    all_whole "$TMP/dump_groups" "$TMP/inspect" "inspect groups at $cols columns"
    all_whole "$TMP/dump_leaves" "$TMP/inspect" "inspect leaves at $cols columns"
    # A wrapped row's numbers stay in their columns: the replay header's "class" column starts
    # where each row's class does.
    bad=$(awk '/^tensor / { c = index($0, "class"); next }
               c && match($0, / (activation|weight|gradient) /) && RSTART + 1 != c { print; exit }' "$TMP/replay")
    [ -z "$bad" ] || fail "replay at $cols columns: a row's class is out of its column: $bad"
done
echo "names never cut: ok"
