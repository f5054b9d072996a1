#!/usr/bin/env bash
# Issue 47: every file a command writes goes through the one output sink (lib/src/io/sink.cpp):
# table -o, gemm -o and calibrate --save, onto every kind of target (docs/hardening.md, "Output"):
# a new file; an existing FILE.tmp of the user's (untouched); a symlink (written through to its
# file, the link kept); a dangling symlink (refused); a full device (written in place, never replaced,
# exit 2); a FIFO with a reader (written in place) and without one (refused at once, no hang); a
# folder (refused); a read-only folder and a file-size limit (exit 2, nothing left, the old file
# kept); `-` (standard output, checked).
# Usage: bash output_targets.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
T=$(mktemp -d)
RO=
trap 'chmod -R u+w "$T" ${RO:+"$RO"} 2>/dev/null; rm -rf "$T"; [ -z "$RO" ] || [ "$RO" = "$T" ] || rm -rf "$RO"' EXIT
chmod 755 "$T"
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
export OMP_NUM_THREADS=1
. "$REPO/tests/cli/npy.bash"
. "$REPO/tests/cli/full_device.bash"
npy "$T/a.npy" '|u1' '(2, 2)' '\x38\x40\x48\x38'
npy "$T/b.npy" '|u1' '(1, 2)' '\x40\x40'
chmod 644 "$T/a.npy" "$T/b.npy"
DUMP=$REPO/data/example/llama_tiny_dump.h5
# run COMMAND OUTPUT: the command writing OUTPUT (its report, if any, to /dev/null).
run() {
    case $1 in
        table) "$FP8KIT" table --from e4m3 --to f32 -o "$2" ;;
        gemm) "$FP8KIT" gemm "$T/a.npy" "$T/b.npy" --accum exact -o "$2" ;;
        calibrate) "$FP8KIT" calibrate "$DUMP" --method max --tensors '*/lm_head/input' --save "$2" >/dev/null ;;
    esac
}
# Waits until process $1 (cat) is blocked opening the FIFO: from then on it counts as its reader.
wait_in_open() {
    for _ in $(seq 200); do
        [ "$(cat /proc/$1/comm 2>/dev/null)" = cat ] && [ "$(cut -d' ' -f1 /proc/$1/syscall 2>/dev/null)" = 257 ] && return
        sleep 0.05
    done
}
# Nothing but the named entries in folder $1 (no temporary left behind).
only() { local d=$1; shift; [ "$(ls -A "$d" | sort | tr '\n' ' ')" = "$(for e in "$@"; do echo "$e"; done | sort | tr '\n' ' ')" ]; }

for c in table gemm calibrate; do
    D=$T/$c
    mkdir -p "$D"
    run $c "$D/ref"; check "$c: a new file: exit 0" $?
    only "$D" ref; check "$c: a new file: nothing else left" $?
    [ "$(stat -c %a "$D/ref")" = "$(printf '%o' $(( 0666 & ~$(umask) )))" ]
    s=$?; check "$c: a new file gets the umask's permissions ($(stat -c %a "$D/ref"))" $s

    # An existing OUT.tmp is the user's file: untouched, not removed.
    echo "mine" > "$D/out.tmp"
    run $c "$D/out"; check "$c: OUT with OUT.tmp present: exit 0" $?
    [ "$(cat "$D/out.tmp")" = mine ]; check "$c: OUT.tmp untouched" $?
    cmp -s "$D/out" "$D/ref"; check "$c: OUT written" $?
    only "$D" ref out out.tmp; check "$c: nothing else left" $?

    # A symlink is written through to its regular file; the link stays a link.
    echo "old" > "$D/real"
    ln -s real "$D/link"
    run $c "$D/link"; check "$c: a symlink: exit 0" $?
    [ -L "$D/link" ] && [ "$(readlink "$D/link")" = real ]; check "$c: the symlink is kept" $?
    cmp -s "$D/real" "$D/ref"; check "$c: its file is written" $?
    ln -s nowhere "$D/dangling"
    run $c "$D/dangling" 2>"$T/err"; rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -q "symbolic link that resolves to no file" "$T/err"
    s=$?; check "$c: a dangling symlink: exit 2, one line ($rc: $(head -c 200 "$T/err"))" $s
    [ -L "$D/dangling" ] && [ ! -e "$D/nowhere" ]; check "$c: the dangling link is kept, nothing created" $?
    rm "$D/link" "$D/real" "$D/dangling" "$D/out" "$D/out.tmp"

    # The full device: written in place and failing; as root too, the device node stays.
    run $c "$FULL" 2>"$T/err"; rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -q "write failed: No space left on device" "$T/err"
    s=$?; check "$c: full device: exit 2, one line ($rc: $(head -c 200 "$T/err"))" $s
    is_full_device "$FULL"; check "$c: the full device is still a device" $?

    # A FIFO: with a reader, written in place; without one, refused at once.
    mkfifo "$D/fifo"
    cat "$D/fifo" > "$T/received" & reader=$!
    wait_in_open $reader
    timeout 60 bash -c "$(declare -f run); FP8KIT='$FP8KIT' T='$T' DUMP='$DUMP' run $c '$D/fifo'"; rc=$?
    wait $reader
    [ $rc -eq 0 ] && cmp -s "$T/received" "$D/ref"; check "$c: a FIFO with a reader gets the bytes ($rc)" $?
    timeout 60 bash -c "$(declare -f run); FP8KIT='$FP8KIT' T='$T' DUMP='$DUMP' run $c '$D/fifo'" 2>"$T/err"; rc=$?
    [ $rc -eq 2 ] && grep -q "is a FIFO that no process is reading" "$T/err"
    s=$?; check "$c: a FIFO without a reader: refused, no hang ($rc: $(head -c 200 "$T/err"))" $s
    [ -p "$D/fifo" ]; check "$c: the FIFO stays a FIFO" $?
    rm "$D/fifo"

    # A folder is refused.
    mkdir "$D/dir"
    run $c "$D/dir" 2>"$T/err"; rc=$?
    [ $rc -eq 2 ] && grep -q "is a directory" "$T/err"; check "$c: a folder: exit 2 ($rc)" $?
    rmdir "$D/dir"

    # A read-only folder (root writes anyway: the command then runs as nobody, in a folder of
    # /tmp that nobody may enter, holding copies of the inputs and of the program: TMPDIR and the
    # checkout may be in 0700 folders).
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
        as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
        RO=$(mktemp -d /tmp/fp8kit-readonly.XXXXXX)
        chmod 755 "$RO"
        cp "$T/a.npy" "$T/b.npy" "$DUMP" "$FP8KIT" "$RO/"
        RO_DUMP=$RO/$(basename "$DUMP") RO_FP8KIT=$RO/$(basename "$FP8KIT")
        chmod 644 "$RO/a.npy" "$RO/b.npy" "$RO_DUMP"
        chmod 755 "$RO_FP8KIT"
    else
        as=()
        RO=$T RO_DUMP=$DUMP RO_FP8KIT=$FP8KIT
    fi
    mkdir "$RO/ro"; chmod 555 "$RO/ro"
    if [ "$(id -u)" != 0 ] || [ ${#as[@]} -gt 0 ]; then
        "${as[@]}" bash -c "$(declare -f run); FP8KIT='$RO_FP8KIT' T='$RO' DUMP='$RO_DUMP' run $c '$RO/ro/out'" 2>"$T/err"; rc=$?
        [ $rc -eq 2 ] && grep -q "cannot create a temporary file in $RO/ro/: Permission denied" "$T/err"
        s=$?; check "$c: a read-only folder: exit 2, says why ($rc: $(head -c 200 "$T/err"))" $s
        only "$RO/ro"; check "$c: a read-only folder: nothing left" $?
    else
        echo "skipped: $c read-only folder (root without setpriv)"
    fi
    chmod 755 "$RO/ro"; rmdir "$RO/ro"
    [ "$RO" = "$T" ] || rm -rf "$RO"

    # A write that fails on a regular file (the file-size limit: EFBIG, as ENOSPC would):
    # exit 2, the old file kept, nothing left.
    echo "old" > "$D/full"
    # (Standard error goes through a pipe: the limit applies to every regular file.)
    (trap '' XFSZ; ulimit -f 0; run $c "$D/full" 2>&1; echo "exit $?") | cat > "$T/err"
    rc=$(sed -n 's/^exit //p' "$T/err")
    [ "$rc" = 2 ] && grep -q "write failed: File too large" "$T/err"
    s=$?; check "$c: a failing write: exit 2 ($rc: $(head -1 "$T/err"))" $s
    [ "$(cat "$D/full")" = old ]; check "$c: a failing write keeps the old file" $?
    only "$D" ref full; check "$c: a failing write leaves nothing" $?
    rm "$D/full"

    # `-`: standard output, every write checked (calibrate's report is on standard output too).
    [ $c = calibrate ] && continue
    run $c - > "$T/stdout"; check "$c: - : exit 0" $?
    cmp -s "$T/stdout" "$D/ref"; check "$c: - writes the same bytes" $?
    run $c - > "$FULL" 2>"$T/err"; rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$T/err")" = 1 ]; check "$c: - > full device: exit 2, one line ($rc: $(head -c 200 "$T/err"))" $?
done
exit $fail
