#!/usr/bin/env bash
# "Read only the files the user named" (docs/hardening.md): inspect, replay, sweep, validate and
# simulate msamp (and recipe show, the one other command that reads a user's file) on
# HDF5 dumps whose datasets point outside themselves (external raw storage to /etc/passwd, to a file
# in another folder, to /dev/zero and /dev/urandom; virtual datasets mapping another file, a missing
# file and themselves; external links), run under `strace -f -e trace=open,openat`: no file other
# than the named inputs (and the system's libraries) may be opened, and each such dataset is
# skipped with a note naming what it points at. Then --allow-external-in-dump-folder reads the
# external file and VDS source inside the dump's folder, and still nothing outside it.
# Fixtures: tests/cli/make_outside_fixtures.py (h5py). Exit 77 (skipped) without strace or h5py.
# Usage: bash read_only_named.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
command -v strace >/dev/null || { echo "SKIP: strace is not installed (scripts/install/install-deps.sh installs it)"; exit 77; }
PY="$REPO/.venv/bin/python"
[ -x "$PY" ] || PY=python3
"$PY" -c "import h5py" 2>/dev/null || { echo "SKIP: no Python with h5py to write the fixtures"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
"$PY" "$REPO/tests/cli/make_outside_fixtures.py" "$T" || { echo "FAIL: fixtures"; exit 1; }
D=$T/dump
mkdir -p "$T/cwd" && cp "$T/other/secret.bin" "$T/other/src.h5" "$T/cwd/"   # the working directory's bait
cd "$T/cwd"

# traced NAME CMD...: runs CMD under strace; fails if it opened a forbidden path.
traced() {
    local name=$1; shift
    # LeakSanitizer cannot run under ptrace and aborts the process at exit with status 1 (the
    # sanitizer build runs this script too), so leak checking is off for the traced runs only;
    # ASan and UBSan stay on, and the leak check runs in every other test of that build.
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        strace -f -qq -e trace=open,openat -o "$T/$name.trace" "$@" >"$T/$name.out" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
    # Opened paths (successful or not) outside the system's own folders.
    grep -o 'open[a-z]*([^"]*"[^"]*"' "$T/$name.trace" | sed 's/.*"\(.*\)"/\1/' |
        grep -Ev '^(/lib|/usr/lib|/usr/local/lib|/etc/ld\.so|/proc/|/sys/|/dev/null$|/usr/share/locale|/usr/lib/locale)' |
        sort -u >"$T/$name.opened"
    local bad
    bad=$(grep -E '^/etc/passwd|^/dev/zero|^/dev/urandom|/other/|/cwd/|^secret\.bin|^src\.h5|^\.\./' "$T/$name.opened")
    check "$name opens nothing outside the named files${bad:+ (opened: $(echo $bad))}" "$([ -z "$bad" ]; echo $?)"
}

ALL=("$D/ext_passwd.h5" "$D/ext_other.h5" "$D/ext_zero.h5" "$D/vds.h5" "$D/vds_self.h5" "$D/elink.h5" "$D/inside.h5")
traced inspect timeout 60 "$FP8KIT" inspect --json "${ALL[@]}"
check "inspect finishes (exit 0 or 1, not a crash or a hang: $(cat "$T/inspect.rc"))" "$(rc=$(cat "$T/inspect.rc"); [ "$rc" -le 1 ]; echo $?)"
for f in ext_passwd.h5 ext_other.h5 ext_zero.h5 vds.h5 vds_self.h5 elink.h5 inside.h5; do
    check "inspect reports the good tensor of $f" "$(grep -q "$f" "$T/inspect.out"; echo $?)"
done
check "external /etc/passwd named in a skip note" "$(grep -q "/etc/passwd" "$T/inspect.err" "$T/inspect.out"; echo $?)"
check "VDS mapping itself named in a skip note" "$(grep -q "virtual dataset mapping '(this file):self'" "$T/inspect.err" "$T/inspect.out"; echo $?)"
check "no 'root' from /etc/passwd in the output" "$(! grep -q root "$T/inspect.out"; echo $?)"

traced replay timeout 60 "$FP8KIT" replay "$D/ext_zero.h5"
check "replay finishes (rc $(cat "$T/replay.rc"))" "$(rc=$(cat "$T/replay.rc"); [ "$rc" -le 2 ]; echo $?)"
traced sweep timeout 60 "$FP8KIT" sweep "$D/ext_passwd.h5" "$D/vds.h5" "$D/vds_self.h5" "$D/ext_other.h5"
check "sweep finishes (rc $(cat "$T/sweep.rc"))" "$(rc=$(cat "$T/sweep.rc"); [ "$rc" -le 2 ]; echo $?)"
traced watch timeout 60 "$FP8KIT" watch --json "$D/ext_passwd.h5"
check "watch finishes (rc $(cat "$T/watch.rc"))" "$(rc=$(cat "$T/watch.rc"); [ "$rc" -le 1 ]; echo $?)"
check "watch names the external /etc/passwd in its skipped list" \
    "$(grep -A3 '"skipped"' "$T/watch.out" | grep -q "/etc/passwd"; echo $?)"
traced watch_text timeout 60 "$FP8KIT" watch "$D/ext_passwd.h5"
check "watch's text names it in a note" "$(grep -q "^note: skipped .*/etc/passwd" "$T/watch_text.out"; echo $?)"

v=0
for src in ext_passwd.h5:/codes ext_passwd.h5:/x ext_other.h5:/abs ext_other.h5:/rel ext_other.h5:/cwd ext_zero.h5:/zero \
           vds.h5:/v vds.h5:/missing vds_self.h5:/self elink.h5:/e elink.h5:/erel; do
    v=$((v + 1))
    traced "validate$v" timeout 60 "$FP8KIT" validate --input "$D/$src" --output "$D/ext_passwd.h5:/codes16" --to e4m3 --profile cuda-satfinite --examples 64
    check "validate --input $src: exit 2 ($(cat "$T/validate$v.rc"))" "$([ "$(cat "$T/validate$v.rc")" = 2 ]; echo $?)"
    check "validate --input $src: one line naming it" "$(grep -q "${src#*:}" "$T/validate$v.err"; echo $?)"
    check "validate --input $src: no 'root'" "$(! grep -q root "$T/validate$v.out" "$T/validate$v.err"; echo $?)"
done

# Allowed inside the dump's folder: inside.bin and inside_src.h5 are read; nothing else is.
traced allowed timeout 60 "$FP8KIT" inspect --json --allow-external-in-dump-folder "${ALL[@]}"
check "allowed: the external file in the folder is read (2.0)" "$(grep -A12 '"inside.h5"\|inside.h5' "$T/allowed.out" | grep -q '"ext"'; echo $?)"
check "allowed: the VDS source in the folder is read" "$(grep -q '"v"' "$T/allowed.out"; echo $?)"
check "allowed: inside.bin opened" "$(grep -q 'inside.bin' "$T/allowed.opened"; echo $?)"
traced allowed_validate timeout 60 "$FP8KIT" validate --allow-external-in-dump-folder --input "$D/inside.h5:/ext" \
    --output "$D/inside.h5:/codes16" --to e4m3 --profile cuda-satfinite --scale 1
check "allowed validate reads the in-folder external file: 2.0 is E4M3 0x40, bit-exact (exit $(cat "$T/allowed_validate.rc"))" \
    "$([ "$(cat "$T/allowed_validate.rc")" = 0 ]; echo $?)"

# simulate msamp: one module's wgrad in /etc/passwd, another's in a VDS on itself, a weight in
# /dev/zero, an exp_avg in a VDS on another file, an exp_avg_sq behind an external link.
for lvl in O1 O2; do
    traced "simulate$lvl" timeout 60 "$FP8KIT" simulate msamp "$D/msamp.h5" --level "$lvl" --ranks 8 --json
    rc=$(cat "$T/simulate$lvl.rc")
    check "simulate $lvl finishes (exit 0, or 2 for O2's missing weight: $rc)" "$([ "$rc" = 0 ] || { [ "$lvl" = O2 ] && [ "$rc" = 2 ]; }; echo $?)"
    check "simulate $lvl: no 'root'" "$(! grep -q root "$T/simulate$lvl.out" "$T/simulate$lvl.err"; echo $?)"
    for what in "ext/wgrad: raw data stored outside the file, in '/etc/passwd'" "self/wgrad: virtual dataset mapping" \
                "zero/weight: raw data stored outside the file, in '/dev/zero'" "vds/exp_avg: virtual dataset mapping '$T/other/src.h5"; do
        check "simulate $lvl: skipped with a note: $what" "$(grep -qF "skipped $D/msamp.h5: $what" "$T/simulate$lvl.err"; echo $?)"
    done
done
check "simulate O1: the whole module simulated" "$(grep -q '"tensor": "good"' "$T/simulateO1.out"; echo $?)"
check "simulate O1: modules whose gradient was skipped are not simulated" \
    "$(! grep -Eq '"tensor": "(ext|self)"' "$T/simulateO1.out"; echo $?)"
check "simulate O1: the skipped datasets are in the JSON" "$(grep -q '"skipped"' "$T/simulateO1.out"; echo $?)"
check "simulate O2: the missing weight is explained" "$(grep -q "zero has no weight .*skipped .*zero/weight" "$T/simulateO2.err"; echo $?)"

# recipe show FILE: the recipe file, nothing else.
"$FP8KIT" recipe show te-current >"$D/recipe.json"
traced recipe "$FP8KIT" recipe show "$D/recipe.json"
check "recipe show reads the file (exit $(cat "$T/recipe.rc"))" "$([ "$(cat "$T/recipe.rc")" = 0 ] && grep -q "$D/recipe.json" "$T/recipe.opened"; echo $?)"
exit $fail
