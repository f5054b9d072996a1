#!/usr/bin/env bash
# Output integrity and hostile inputs for the non-HDF5 readers and every command (issue 25:
# sections 2-5 for safetensors, traces and the CLI's own output; docs/hardening.md). Each check
# fails if its class of bug comes back. Files are written here with printf (no Python).
# Usage: bash hardening.sh /path/to/fp8kit /path/to/repo
set -u
FP8KIT=$1
REPO=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { # description, condition status (0 = ok)
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi
}
export OMP_NUM_THREADS=1
unset COLUMNS
. "$REPO/tests/cli/full_device.bash"

# st FILE HEADER DATA(printf escapes): a safetensors file, header length as 8 little-endian bytes.
st() {
    local n=${#2}
    {
        printf "\\x$(printf %02x $((n & 255)))\\x$(printf %02x $(((n >> 8) & 255)))\\x$(printf %02x $(((n >> 16) & 255)))\\x00\\x00\\x00\\x00\\x00"
        printf '%s' "$2"
        printf "$3"
    } > "$1"
}
ONE='\x00\x00\x80\x3f'   # float32 1.0
st "$T/good.safetensors" '{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' "$ONE"
printf 'step,tensor,amax\n0,a,1.5\n1,a,2\n' > "$T/trace.csv"

## 3. Output integrity: lost output is never success.
for cmd in "inspect $T/good.safetensors" "inspect $T/good.safetensors --json" "inspect $T/good.safetensors --csv" \
           "replay $T/trace.csv" "replay $T/trace.csv --json" "sweep $T/trace.csv" "sweep $T/trace.csv --json" \
           "sweep $T/trace.csv --csv" "formats" "encode 1.5 --to e4m3 --profile torch" "--help"; do
    $FP8KIT $cmd > "$FULL" 2> "$T/err"; rc=$?
    [ $rc -ne 0 ] && grep -q "standard output" "$T/err"; check "$cmd > full device exits nonzero ($rc) and says so" $?
    $FP8KIT $cmd >&- 2> "$T/err"; rc=$?
    [ $rc -ne 0 ] && grep -q "standard output is closed" "$T/err"; check "$cmd with stdout closed exits nonzero ($rc)" $?
done

## 3. table -o: a unique temporary and an atomic rename; never another file; through symlinks.
echo "keep me" > "$T/t.bin.partial"
$FP8KIT table --from e4m3 --to f32 -o "$T/t.bin"; check "table -o exits 0" $?
[ "$(cat "$T/t.bin.partial")" = "keep me" ]; check "table -o FILE leaves the user's FILE.partial alone" $?
[ "$(stat -c %s "$T/t.bin")" = 1024 ]; check "table -o FILE written" $?
[ -z "$(ls -A "$T" | grep -v '^t.bin' | grep partial)" ] && [ -z "$(ls -a "$T" | grep '^\.t\.bin')" ]
check "no temporary left behind" $?
$FP8KIT table --from e4m3 --to f32 -o "$T/real.bin" && ln -s real.bin "$T/link.bin"
: > "$T/real.bin"
$FP8KIT table --from e4m3 --to f32 -o "$T/link.bin"; check "table -o SYMLINK exits 0" $?
[ -L "$T/link.bin" ] && [ "$(stat -c %s "$T/real.bin")" = 1024 ]; check "table -o SYMLINK writes the target, keeps the link" $?
mkdir "$T/ro" && chmod 555 "$T/ro"
if [ ! -w "$T/ro" ]; then   # root can write anyway: the check needs a folder we cannot write
    $FP8KIT table --from e4m3 --to f32 -o "$T/ro/x.bin" 2> "$T/err"; rc=$?
    [ $rc -eq 2 ] && grep -q "temporary file" "$T/err"; check "table -o in a read-only folder: exit 2, says why" $?
fi
chmod 755 "$T/ro"
$FP8KIT table --from e4m3 --to f32 -o "$FULL" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "write failed" "$T/err"; check "table -o full device fails ($rc)" $?

## 2. Only regular files; bounded lines; no hang.
mkfifo "$T/fifo.csv"
for cmd in replay sweep; do
    timeout 10 $FP8KIT $cmd "$T/fifo.csv" > /dev/null 2> "$T/err"; rc=$?
    [ $rc -eq 2 ] && grep -q "a FIFO, not a regular file" "$T/err"; check "$cmd FIFO: refused at once ($rc)" $?
done
timeout 10 $FP8KIT replay /dev/zero > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "a device, not a regular file" "$T/err"; check "replay /dev/zero: refused at once ($rc)" $?
mkfifo "$T/fifo.safetensors"
timeout 10 $FP8KIT inspect "$T/good.safetensors" "$T/fifo.*" > "$T/out" 2> "$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q "fifo.safetensors: a FIFO, not a regular file" "$T/err" && grep -q "1 tensors" "$T/out"
check "inspect glob matching a FIFO: named, not read, the other file reported ($rc)" $?
{ printf 'step,tensor,amax\n0,a,1\n1,'; head -c 2000000 /dev/zero | tr '\0' a; printf ',1\n'; } > "$T/long.csv"
$FP8KIT replay "$T/long.csv" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "long.csv:3: line longer than" "$T/err"; check "trace line past 1 MiB: an error naming the line ($rc)" $?
[ "$(wc -c < "$T/err")" -lt 400 ]; check "... and the message does not quote the line" $?

## 4. amax -nan (printf's NaN with the sign bit) is NaN, not negative.
printf 'step,tensor,amax\n0,a,-nan\n1,a,2\n' > "$T/nan.csv"
$FP8KIT replay "$T/nan.csv" --csv > "$T/out" 2> "$T/err"; check "amax -nan accepted: $(cat "$T/err")" $?
printf 'step,tensor,amax\n0,a,-1\n' > "$T/neg.csv"
$FP8KIT replay "$T/neg.csv" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "is negative" "$T/err"; check "amax -1 still refused" $?

## 4. safetensors: names repeated, bytes no tensor covers, NUL in a name.
st "$T/dup.safetensors" '{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}' "$ONE$ONE"
$FP8KIT inspect "$T/dup.safetensors" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q "tensor name 'w' appears twice" "$T/err"; check "safetensors duplicate name refused ($rc)" $?
st "$T/gap.safetensors" '{"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}' "$ONE$ONE"
$FP8KIT inspect "$T/gap.safetensors" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q "data bytes \[0, 4) belong to no tensor" "$T/err"; check "safetensors bytes before a tensor refused ($rc)" $?
st "$T/tail.safetensors" '{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' "$ONE$ONE"
$FP8KIT inspect "$T/tail.safetensors" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q "after the last tensor belong to no tensor" "$T/err"; check "safetensors trailing bytes refused ($rc)" $?
st "$T/nul.safetensors" '{"a\u0000b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' "$ONE"
$FP8KIT inspect "$T/nul.safetensors" --wide > "$T/out" 2> "$T/err"
grep -qF 'a\0b' "$T/out"; check "NUL in a tensor name printed as \\0, not cut" $?
$FP8KIT inspect "$T/nul.safetensors" --json > "$T/out"
grep -qF '"name": "a\u0000b"' "$T/out"; check "NUL in a tensor name kept in JSON" $?

## 2. A shape nested a million deep: one error, no crash, the other file still reported.
deep=$(head -c 1000000 /dev/zero | tr '\0' '[')
st "$T/deep.safetensors" "{\"x\":{\"dtype\":\"F32\",\"shape\":[1,$deep],\"data_offsets\":[0,4]}}" "$ONE"
$FP8KIT inspect "$T/good.safetensors" "$T/deep.safetensors" > "$T/out" 2> "$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q "1 tensors" "$T/out" && grep -q "deep.safetensors" "$T/err"
check "deeply nested shape: named, no crash, the good file reported ($rc)" $?
[ "$(wc -c < "$T/err")" -lt 600 ]; check "... and the message is short" $?
deep2="$(head -c 100000 /dev/zero | tr '\0' '[')1$(head -c 100000 /dev/zero | tr '\0' ']')"
st "$T/deep2.safetensors" "{\"x\":{\"dtype\":\"F32\",\"shape\":[$deep2],\"data_offsets\":[0,4]}}" "$ONE"
$FP8KIT inspect "$T/deep2.safetensors" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q "nested" "$T/err"; check "closed deep nesting in a shape: named ($rc)" $?

## 5. Control characters from files are escaped; quoted input is cut.
st "$T/esc.safetensors" '{"x\u001b]0;pwned\u0007\nfake line":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' "$ONE"
$FP8KIT inspect "$T/esc.safetensors" --wide > "$T/out" 2>&1
! grep -q $'\x1b' "$T/out" && ! grep -q "^fake line" "$T/out" && grep -qF 'x\e]0;pwned\x07\nfake line' "$T/out"
check "escape sequences and newlines in names are escaped" $?
printf 'step,tensor,amax\n0,x\x1b[2J,1\n' > "$T/esc.csv"
$FP8KIT replay "$T/esc.csv" > "$T/out" 2>&1
! grep -q $'\x1b' "$T/out" && grep -qF 'x\e[2J' "$T/out"; check "replay escapes tensor names" $?
$FP8KIT sweep "$T/esc.csv" > "$T/out" 2>&1
! grep -q $'\x1b' "$T/out" && grep -qF 'x\e[2J' "$T/out"; check "sweep escapes tensor names" $?
{ printf 'step,'; head -c 100000 /dev/zero | tr '\0' x; printf '\n0,1\n'; } > "$T/wide_header.csv"
$FP8KIT replay "$T/wide_header.csv" > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "(100005 bytes)" "$T/err" && [ "$(wc -c < "$T/err")" -lt 600 ]
check "a 100 kB CSV header is cut in the message, with its length ($rc)" $?

## 3. validate never reports "BIT-EXACT" on nothing.
: > "$T/empty.bin"
$FP8KIT validate --input "$T/empty.bin" --dtype f32 --shape 4294967296x4294967296 --output "$T/empty.bin" --to e4m3 \
    --profile torch > "$T/out" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && ! grep -q "BIT-EXACT" "$T/out" && grep -q "more elements than any file holds" "$T/err"
check "validate --shape wrapping 64 bits: exit 2, no verdict ($rc)" $?
$FP8KIT validate --input "$T/empty.bin" --dtype f32 --output "$T/empty.bin" --to e4m3 --profile torch > "$T/out" 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && ! grep -q "BIT-EXACT" "$T/out" && grep -q "no elements to compare" "$T/err"
check "validate on an empty input: exit 2, no verdict ($rc)" $?

exit $fail
