#!/usr/bin/env bash
# A `table -o FILE` run stopped by a signal (Ctrl-C: SIGINT; SIGTERM) while it writes must not
# leave its hidden temporary `.FILE.XXXXXX.partial` behind, nor a FILE, and must die of that
# signal (exit status 128 + signal number), not exit as if it had finished (issue 25).
# The f32 table is 2^32 bytes, so the run is stopped while still writing; it is signalled as soon
# as its temporary holds data. Everything is written in a temporary folder removed at the end.
# Usage: bash table_interrupted.sh /path/to/fp8kit /path/to/repo
set -u
# Job control on: without it bash starts background commands with SIGINT and SIGQUIT ignored,
# and an ignored signal is left ignored (the table would not see the Ctrl-C at all).
set -m
FP8KIT=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
for sig in INT TERM; do
    d=$T/$sig
    mkdir -p "$d"
    "$FP8KIT" table --from f32 --to e4m3 --profile cuda-satfinite -o "$d/table.bin" 2>"$d/err" &
    pid=$!
    for _ in $(seq 3000); do   # up to 30 s (a loaded machine, the sanitizer build) for data to appear
        f=$(compgen -G "$d/.table.bin.*.partial")
        [ -n "$f" ] && [ -s "$f" ] && break
        kill -0 "$pid" 2>/dev/null || break   # finished (or failed) before it could be stopped
        sleep 0.01
    done
    seen=$(compgen -G "$d/.table.bin.*.partial" | wc -l)
    kill -s "$sig" "$pid"
    wait "$pid"
    rc=$?
    want=$((128 + $(kill -l "$sig")))
    check "SIG$sig: the temporary existed while writing ($seen)" "$([ "$seen" = 1 ]; echo $?)"
    check "SIG$sig: exit status $rc says the signal ($want)" "$([ "$rc" = "$want" ]; echo $?)"
    left=$(ls -A "$d" | grep -v '^err$')
    check "SIG$sig: nothing left in the folder (${left:-empty})" "$([ -z "$left" ]; echo $?)"
done
exit $fail
